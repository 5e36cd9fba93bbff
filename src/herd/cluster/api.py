"""The metadata and admin side of a node's cluster, one async interface for both backends (as `herd.log.api` is
the log's): creating, growing and deleting topics, altering topic and broker configs, electing leaders.

`LocalAdmin` is the embedded node's: its `Cluster` (topics.json and the partitions' directories) changes
synchronously, so each method does its work and returns. `SharedAdmin` is a cluster node's: each change is a
transaction in PostgreSQL (herd.cluster.shared.SharedCluster), awaited. The API handlers and the server call this
interface and never ask which backend answers; what differs between the two (where partitions are placed, what an
election can do, who is told of a deletion) is said by the implementation.

Reads (topics by name or id, leaders, live nodes) stay synchronous on `TopicIndex`, the in-memory view both
backends keep: they are on the data path. ACLs have their own interface (herd.security.acl_store.AclStore), as
SCRAM credentials do (herd.security.credentials.CredentialStore).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from herd.cluster.placement import Elected, Election
from herd.cluster.topics import Cluster, ConfigChange, Topic, TopicError
from herd.log.store import SegmentStore, StoredPartition

if TYPE_CHECKING:
    from herd.cluster.shared import SharedCluster

__all__ = ["ClusterAdmin", "Elected", "LocalAdmin", "LogDir", "SharedAdmin", "disk_space"]


PartitionStats = tuple[int | None, int | None, int | None, int | None]


@dataclass(frozen=True, slots=True)
class LogDir:
    """Where some of this node's partitions are stored, as DescribeLogDirs answers it: the path (a cluster: the
    database, named without its password), the partitions held there, the volume's total and usable bytes (-1:
    unknown) and whether it could not be read (KAFKA_STORAGE_ERROR)."""

    path: str
    held: list[StoredPartition]
    total_bytes: int = -1
    usable_bytes: int = -1
    failed: bool = False


def disk_space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the volume holding `path`; (-1, -1), Kafka's "unknown", if it cannot be
    examined (e.g. a store on the in-memory filesystem)."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize


class ClusterAdmin(Protocol):
    """What changes a cluster's metadata. Every method raises TopicError with Kafka's code and message when the
    change is refused or could not be stored (nothing changed)."""

    places_partitions: bool
    """True where herd places every partition itself (cluster mode): a request's replica assignments are refused
    and a replication factor up to the number of live nodes is accepted (PostgreSQL keeps the one copy). False on
    one node, where an assignment may name this node only."""

    async def create_topic(
        self, name: str, partitions: int, configs: dict[str, str | None] | None = None, *, validate_only: bool = False
    ) -> Topic: ...

    async def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None: ...

    async def delete_topic(self, name: str) -> Topic:
        """Delete the topic; once deleted, the node's `on_topics_deleted` is told (on every node of a cluster)."""
        ...

    async def alter_topic_configs(self, name: str, change: ConfigChange, *, validate_only: bool = False) -> None: ...

    async def alter_broker_configs(
        self, resource: str, change: ConfigChange, *, validate_only: bool = False
    ) -> None: ...

    async def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None, *, preferred: bool
    ) -> dict[tuple[str, int], Elected]:
        """ElectLeaders: the election of each of `partitions` (None: every partition) that exists."""
        ...

    async def log_dirs(self) -> list[LogDir]:
        """DescribeLogDirs: where this node's partitions are stored, and their sizes."""
        ...

    async def partition_stats(self) -> dict[tuple[str, int], PartitionStats]:
        """(topic, partition) -> (leader, log start offset, log end offset, bytes stored; None: not known) of
        every partition known (the HTTP API's topics)."""
        ...


class LocalAdmin:
    """The embedded node's `ClusterAdmin`: its `Cluster`'s synchronous changes, done when awaited."""

    places_partitions = False

    def __init__(self, cluster: Cluster, store: object = None,
                 on_topics_deleted: Callable[[list[str]], None] | None = None) -> None:  # fmt: skip
        """`store`: the node's log directories (a `SegmentStore`; a test's store of another kind has none)."""
        self.cluster = cluster
        self.store = store
        self.on_topics_deleted = on_topics_deleted  # as SharedCluster's: producers forgotten, offsets tombstoned

    async def create_topic(
        self, name: str, partitions: int, configs: dict[str, str | None] | None = None, *, validate_only: bool = False
    ) -> Topic:
        return self.cluster.create_topic(name, partitions, configs, validate_only=validate_only)

    async def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        self.cluster.add_partitions(name, total, validate_only=validate_only)

    async def delete_topic(self, name: str) -> Topic:
        topic = self.cluster.delete_topic(name)
        if self.on_topics_deleted is not None:
            self.on_topics_deleted([name])
        return topic

    async def alter_topic_configs(self, name: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        self.cluster.alter_topic_configs(name, change, validate_only=validate_only)

    async def alter_broker_configs(self, resource: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        self.cluster.alter_broker_configs(resource, change, validate_only=validate_only)

    async def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None, *, preferred: bool
    ) -> dict[tuple[str, int], Elected]:
        """On one node every partition is led by it, its only possible leader: no election is needed."""
        if partitions is None:
            partitions = [(t.name, i) for t in self.cluster.topics() for i in range(len(t.partitions))]
        elected = {}
        for name, index in partitions:
            topic = self.cluster.get(name)
            if topic is not None and 0 <= index < len(topic.partitions):
                elected[(name, index)] = Elected(Election.NOT_NEEDED, self.cluster.node_id, 0)
        return elected

    async def log_dirs(self) -> list[LogDir]:
        """Each of log.dirs with the partitions it holds (a move's copy too, `is_future`) and its volume's space."""
        if not isinstance(self.store, SegmentStore):
            return []
        return [LogDir(root, held, *disk_space(root)) for root, held in self.store.stored_partitions().items()]

    async def partition_stats(self) -> dict[tuple[str, int], PartitionStats]:
        """Every partition's, from its log (and its segment files' size, with a `SegmentStore`)."""
        sizes: dict[tuple[str, int], int] = {}
        if isinstance(self.store, SegmentStore):
            for held in self.store.stored_partitions().values():
                for p in held:
                    if not p.is_future:
                        sizes[(p.topic, p.partition)] = p.size
        stats: dict[tuple[str, int], PartitionStats] = {}
        for topic in self.cluster.topics():
            for index, log in enumerate(topic.partitions):
                if log is not None:
                    stats[(topic.name, index)] = (
                        self.cluster.node_id,
                        log.log_start_offset,
                        log.log_end_offset,
                        sizes.get((topic.name, index)),
                    )
        return stats


class SharedAdmin:
    """A cluster node's `ClusterAdmin`: its `SharedCluster`'s changes, each a transaction in PostgreSQL. The
    cluster tells every node of a deletion itself (its own `on_topics_deleted`)."""

    places_partitions = True

    def __init__(self, cluster: SharedCluster) -> None:
        self.cluster = cluster

    async def create_topic(
        self, name: str, partitions: int, configs: dict[str, str | None] | None = None, *, validate_only: bool = False
    ) -> Topic:
        return await self.cluster.create_topic(name, partitions, configs, validate_only=validate_only)

    async def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        await self.cluster.add_partitions(name, total, validate_only=validate_only)

    async def delete_topic(self, name: str) -> Topic:
        return await self.cluster.delete_topic(name)

    async def alter_topic_configs(self, name: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        await self.cluster.alter_topic_configs(name, change, validate_only=validate_only)

    async def alter_broker_configs(self, resource: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        await self.cluster.alter_broker_configs(resource, change, validate_only=validate_only)

    async def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None, *, preferred: bool
    ) -> dict[tuple[str, int], Elected]:
        return await self.cluster.elect_leaders(partitions, preferred=preferred)

    async def log_dirs(self) -> list[LogDir]:
        """One "log dir", the database, with the bytes stored there of each partition this node leads."""
        try:
            sizes = await self.cluster.stored_sizes()
        except TopicError:
            return [LogDir(self.cluster.location, [], failed=True)]
        held = [StoredPartition(topic, index, size, 0, False) for (topic, index), size in sorted(sizes.items())]
        return [LogDir(self.cluster.location, held)]

    async def partition_stats(self) -> dict[tuple[str, int], PartitionStats]:
        """Read now in one query; raises TopicError(KAFKA_STORAGE_ERROR) if the database cannot be read."""
        return dict(await self.cluster.partition_stats())
