"""The share coordinator of this node (KIP-932): one shard per `__share_group_state` partition it hosts, each a
`ShareStateShard` (herd.coordinator.share_state), on the same shell as the group and transaction coordinators (a
`ShardHost`, runtime/host.py): loading, durable group-committed writes, compaction, failure and reload.

The state of share partition (group, topic id, partition) lives in partition
abs(hashCode("group:topicId:partition")) % share.coordinator.state.topic.num.partitions, as Kafka places it
(SharePartitionKey.asCoordinatorKey, with Kafka's string form of the topic id). The topic is made on first use
(internal, cleanup.policy=delete and retention.ms=-1, as Kafka's ShareCoordinatorService makes it).

Writes are ShareUpdates with a ShareSnapshot every share.coordinator.snapshot.update.records.per.snapshot of them
(coordinator/share_state/shard.py), so the topic is neither compacted (an update's key is not its snapshot's:
compaction would keep only a partition's last update) nor left to grow: every
share.coordinator.state.topic.prune.interval.ms each hosted partition is pruned, as Kafka's share coordinator prunes
it (ShareCoordinatorService's prune job, ShareCoordinatorOffsetsManager; confluentinc/kafka
share-coordinator/src/main/java/org/apache/kafka/coordinator/share/). Every record below the oldest of its share
partitions' latest snapshots is redundant (each partition's state is its latest snapshot and the updates after
it), and the log start moves up to there (`delete_records`, durable and fenced like every write); a share
partition whose state was deleted holds nothing back. Where each share partition's latest snapshot is comes from
reading the log (`_Pruning`), from where the previous round stopped, up to the durable end: records are never
pruned on the strength of a write that could still be lost. A `__share_group_state` made compacted by an earlier
herd (whose every write was a snapshot) is switched to Kafka's configs on its first prune.

The runtime is also the persister the share partitions a node leads call (runtime/shares.py), as Kafka's leader
calls its Persister: read a partition's state when it is first used, initialize it, write every change, each
answered once durable. On a single node every partition of `__share_group_state` is hosted here. In cluster mode
(the topic kept in PostgreSQL like every other, made by the first node that needs it) each node hosts the
partitions of `__share_group_state` it leads and follows their moves (server/cluster_node.py); a request for a
share partition whose state another node hosts goes to that node through `remote`, as Kafka's
DefaultStatePersister sends Initialize/Read/Write/DeleteShareGroupState to the share coordinator
(herd.server.share_state_peers). A request that finds no coordinator (the state's partition moving, loading, its
node unreachable) is tried again for up to `RETRY_S` before the caller is told.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from herd.cluster.api import ClusterAdmin
from herd.cluster.topics import SHARE_STATE_TOPIC, SHARE_STATE_TOPIC_CONFIGS, Cluster
from herd.config import BrokerConfig
from herd.coordinator import CoordinatorError, ErrorCode
from herd.coordinator.records import record_type
from herd.coordinator.share_state.records import SHARE_SNAPSHOT, StateBatch
from herd.coordinator.share_state.shard import (
    Delete,
    Initialize,
    Read,
    ReadSummary,
    ShareState,
    ShareStateResponse,
    ShareStateShard,
    Write,
    delivery_complete,
)
from herd.log.api import PartitionLog, PolicyViolationError, as_remote
from herd.runtime.batches import read_batches
from herd.runtime.host import CoordinatorKind, ShardHost
from herd.runtime.shard import LOAD_CHUNK_BYTES, ShardRuntime, ShardState
from herd.runtime.stats import CoordinatorStats
from herd.runtime.timer import AsyncioTimer, WallClock

log = logging.getLogger(__name__)

ShareStateRequest = Initialize | Read | Write | Delete
Remote = Callable[[int, ShareStateRequest], Awaitable[ShareStateResponse]]
"""(node id, request) -> that node's share coordinator's answer; raises ShareStateError when it cannot be asked."""

RETRY_S = 5.0  # how long a request waits for the state's coordinator (loading, moving, being made) before failing
_RETRY_PAUSE_S = 0.05
# what a request may meet while the state's partition loads or moves: tried again
_RETRIABLE = frozenset(
    {ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator, ErrorCode.coordinator_not_available}
)


class ShareStateError(Exception):
    """The share coordinator refused or could not write: the change is not durable."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code = code


def kafka_uuid(value: uuid.UUID) -> str:
    """A topic id as Kafka writes it (Uuid.toString: URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey: what places a share partition's state."""
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def _contents(shards: Sequence[ShareStateShard]) -> str:
    return f"{sum(shard.size() for shard in shards)} share partitions"


@dataclass(slots=True)
class _Pruning:
    """What pruning knows of one hosted partition of `__share_group_state` (one loaded `ShardRuntime`): how far its
    log has been read, and for each share partition whose state it holds (by its snapshot key without the type)
    an offset at or below its latest snapshot (the end of the batch before the snapshot's)."""

    shard: ShardRuntime[ShareStateShard]
    read_to: int = 0
    latest: dict[bytes, int] = field(default_factory=dict)


class ShareStateRuntime:
    """`__share_group_state` on a `ShardHost`, and the persister the share partitions use. `remote` (cluster mode)
    asks another node's share coordinator."""

    topic = SHARE_STATE_TOPIC

    def __init__(
        self,
        cluster: Cluster,
        config: BrokerConfig,
        clock: WallClock | None = None,
        *,
        admin: ClusterAdmin,
        node_id: int = 0,
        remote: Remote | None = None,
    ) -> None:
        self._cluster = cluster
        self._admin = admin  # what changes the topic's configs (`_switch_to_kafka_configs`), on either backend
        self._broker_config = config
        self.clock = clock or WallClock()
        self._node_id = node_id
        self._remote = remote
        kind = CoordinatorKind(
            topic=SHARE_STATE_TOPIC,
            keys="share partitions",
            coordinated="share partitions",
            topic_settings=self._topic_settings,
            new_shard=self._new_shard,
            contents=_contents,
            compacted=False,
        )
        self._host: ShardHost[ShareStateShard] = ShardHost(cluster, config, kind, self.clock)
        self._pruning: dict[int, _Pruning] = {}
        self._pruner: asyncio.Task[None] | None = None

    def start(self, partitions: Iterable[int] | None = None) -> None:
        """Load the topic's partitions (default: all; in cluster mode the ones this node leads) if it exists;
        otherwise it is made on first use (`ensure_created`)."""
        if self._cluster.get(SHARE_STATE_TOPIC) is not None:
            self._host.start(partitions)

    def ensure_created(self) -> bool:
        """True if `__share_group_state` exists; if it does not, start making it and return False (a single node
        makes it and hosts every partition; in cluster mode it is made in the background by whichever node needs it
        first, and each node loads the partitions it is given to lead: ShardHost.ensure_created)."""
        return self._host.ensure_created()

    def _made(self) -> bool:
        """Whether the topic exists, made now if not (a single node makes it at once, its partitions then load)."""
        return self.ensure_created() or self._host.num_partitions > 0

    def load_partition(self, partition: int, *, announce: bool = False) -> asyncio.Task[None]:
        """This node now leads `partition` of the topic (cluster mode): load it (`announce`: log when it is)."""
        self.ensure_created()
        return self._host.load_partition(partition, announce=announce)

    async def unload_partition(self, partition: int) -> None:
        """This node no longer leads `partition` (cluster mode): forget it (a no-op unless it is hosted)."""
        await self._host.unload_partition(partition)

    async def wait_loaded(self) -> None:
        await self._host.wait_loaded()

    async def close(self) -> None:
        if self._pruner is not None:
            self._pruner.cancel()
            await asyncio.gather(self._pruner, return_exceptions=True)
            self._pruner = None
        await self._host.close()

    @property
    def shards(self) -> dict[int, ShardRuntime[ShareStateShard]]:
        return self._host.shards

    @property
    def stats(self) -> CoordinatorStats:
        """The host's write rounds (herd.server.metrics)."""
        return self._host.stats

    def _topic_settings(self) -> tuple[int, dict[str, str | None]]:
        configs: dict[str, str | None] = {
            **SHARE_STATE_TOPIC_CONFIGS,
            "segment.bytes": str(self._broker_config.get("share.coordinator.state.topic.segment.bytes")),
        }
        return self._broker_config.get("share.coordinator.state.topic.num.partitions"), configs

    def _new_shard(self, partition_log: PartitionLog, timer: AsyncioTimer) -> ShareStateShard:
        """The core of a partition about to load (on the loop): whichever way it came to be hosted here, the
        pruning of the hosted partitions runs from then on."""
        self._start_pruning()
        config = self._broker_config
        return ShareStateShard(
            clock=self.clock,
            updates_per_snapshot=config.get("share.coordinator.snapshot.update.records.per.snapshot"),
            timer=timer,
            cold_snapshot_interval_ms=config.get("share.coordinator.cold.partition.snapshot.interval.ms"),
        )

    # -- pruning (see the module docstring) ------------------------------------------------------------------------

    def _start_pruning(self) -> None:
        if self._pruner is None:
            self._pruner = asyncio.get_running_loop().create_task(self._prune_every_interval())

    async def _prune_every_interval(self) -> None:
        interval_s = self._broker_config.get("share.coordinator.state.topic.prune.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval_s)
            hosted = self._host.shards
            self._pruning = {p: known for p, known in self._pruning.items() if hosted.get(p) is known.shard}
            for shard in list(hosted.values()):
                try:
                    await self.prune(shard)
                except Exception as error:  # the disk, the database, a move: the next round tries again
                    log.warning("pruning %s-%d failed, tried again later: %s", self.topic, shard.partition, error)

    async def prune(self, shard: ShardRuntime[ShareStateShard]) -> int:
        """Delete the records of `shard`'s partition that its share partitions' latest snapshots made redundant
        (see the module docstring); returns the partition's log start offset after it (unchanged while the shard
        is not active)."""
        partition_log = shard.log
        if shard.state is not ShardState.ACTIVE:
            return partition_log.log_start_offset
        pruning = self._pruning.get(shard.partition)
        if pruning is None or pruning.shard is not shard:  # loaded (again) since the last round: read it from its start
            pruning = self._pruning[shard.partition] = _Pruning(shard)
        end = partition_log.flushed_offset  # what a crash cannot take back
        offset = max(pruning.read_to, partition_log.log_start_offset)
        latest = pruning.latest
        while offset < end:
            if partition_log.commits_itself:
                data = await as_remote(partition_log).read_async(offset, LOAD_CHUNK_BYTES)
            else:
                data = partition_log.read(offset, LOAD_CHUNK_BYTES)
            start = offset
            for batch in read_batches(data):
                if batch.next_offset > end:
                    break
                for key, value in batch.records:
                    if key is not None and record_type(key) == SHARE_SNAPSHOT:
                        if value is None:  # the share partition's state is deleted: nothing of it is needed
                            latest.pop(key[2:], None)
                        else:
                            latest[key[2:]] = offset
                offset = batch.next_offset
            if offset == start:
                break
            await asyncio.sleep(0)
        pruning.read_to = offset
        redundant = min(latest.values(), default=offset)
        if redundant <= partition_log.log_start_offset:
            return partition_log.log_start_offset
        try:
            if partition_log.commits_itself:
                return await as_remote(partition_log).delete_records_async(redundant)
            return partition_log.delete_records(redundant)
        except PolicyViolationError:  # compacted, made so by an earlier herd: pruned from the next round on
            await self._switch_to_kafka_configs()
            return partition_log.log_start_offset

    async def _switch_to_kafka_configs(self) -> None:
        """A `__share_group_state` made compacted by an earlier herd gets Kafka's configs (SHARE_STATE_TOPIC_CONFIGS)
        before it is first pruned; nothing compacts it any more (CoordinatorKind.compacted)."""
        await self._admin.alter_topic_configs(
            SHARE_STATE_TOPIC, lambda configs: {**configs, **SHARE_STATE_TOPIC_CONFIGS}
        )
        log.info("%s now has Kafka's configs %s, to be pruned", SHARE_STATE_TOPIC, SHARE_STATE_TOPIC_CONFIGS)

    # -- the persister ---------------------------------------------------------------------------------------------

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> ShareState | None:
        """The partition's durable state, None if it has none. ShareStateError if the coordinator cannot say."""
        response = await self._call(
            group_id, topic_id, partition, ShareStateShard.read, Read(group_id, topic_id, partition, leader_epoch)
        )
        return response.state

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int, int] | None:
        """(start offset, delivery-complete count, leader epoch) of the partition's durable state, None if it has
        none: ReadShareGroupStateSummary, when another node keeps it. ShareStateError if no one can say."""
        response = await self._call(
            group_id, topic_id, partition, ShareStateShard.read, ReadSummary(group_id, topic_id, partition)
        )
        state = response.state
        if state is None:
            return None
        done = response.delivery_complete if response.delivery_complete >= 0 else delivery_complete(state)
        return state.start_offset, done, state.leader_epoch

    async def initialize(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int
    ) -> None:
        await self._call(
            group_id,
            topic_id,
            partition,
            ShareStateShard.initialize,
            Initialize(group_id, topic_id, partition, state_epoch, start_offset),
        )

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> None:
        request = Write(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset, tuple(batches))
        await self._call(group_id, topic_id, partition, ShareStateShard.write, request)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        await self._call(group_id, topic_id, partition, ShareStateShard.delete, Delete(group_id, topic_id, partition))

    async def _call(self, group_id: str, topic_id: uuid.UUID, partition: int, handler, request) -> ShareStateResponse:  # type: ignore[no-untyped-def]
        """The answer of the share coordinator of the partition's state: this node's, or (cluster mode) the one on
        the node leading the state's partition. Waits up to RETRY_S for one that can answer; ShareStateError if
        none did, or with the error it answered."""
        key = coordinator_key(group_id, topic_id, partition)
        deadline = asyncio.get_running_loop().time() + RETRY_S
        while True:
            response = await self._try(key, handler, request)
            if response.error_code == ErrorCode.none:
                return response
            if response.error_code not in _RETRIABLE or asyncio.get_running_loop().time() >= deadline:
                raise ShareStateError(response.error_code, response.error_message)
            await asyncio.sleep(_RETRY_PAUSE_S)

    async def _try(self, key: str, handler, request: ShareStateRequest) -> ShareStateResponse:  # type: ignore[no-untyped-def]
        if not self._made():
            return ShareStateResponse(ErrorCode.coordinator_not_available, f"{SHARE_STATE_TOPIC} is being made")
        if self._remote is not None and not self._host.hosts(key):
            leader, _ = self._cluster.leader(SHARE_STATE_TOPIC, self._host.partition_for(key))
            if leader < 0 or leader == self._node_id:  # no leader yet, or this node before it loads the partition
                return ShareStateResponse(ErrorCode.coordinator_not_available, f"no leader of {key}'s state")
            try:
                return await self._remote(leader, request)
            except ShareStateError as error:
                return ShareStateResponse(ErrorCode.coordinator_not_available, str(error))
        return await self.call_local(key, handler, request)

    async def call_local(self, key: str, handler, request: ShareStateRequest) -> ShareStateResponse:  # type: ignore[no-untyped-def]
        """The answer of this node's share coordinator for `key` (coordinator_key): NOT_COORDINATOR when it does not
        host the key's partition, COORDINATOR_LOAD_IN_PROGRESS while it loads (what another node's request gets,
        herd.server.apis.*_share_group_state)."""
        if not self._made():
            return ShareStateResponse(ErrorCode.coordinator_not_available, f"{SHARE_STATE_TOPIC} is being made")
        try:
            outcome = self._host.shard_for(key).call(handler, request)
        except CoordinatorError as error:
            return ShareStateResponse(error.code, error.message)
        response = await outcome if isinstance(outcome, asyncio.Future) else outcome
        assert isinstance(response, ShareStateResponse)
        return response
