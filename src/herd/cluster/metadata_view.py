"""The local view of cluster mode's metadata that every node keeps: the nodes, topics, partitions and their
leaders, the dynamic broker configs, the ACLs and the SCRAM credentials, read in one snapshot
(`read_snapshot`, one REPEATABLE READ transaction) whenever the database says something changed and every session
timeout. `MetadataView._apply` makes the view match a snapshot: the queries of `TopicIndex` answer from it, the
owners of configs, ACLs and credentials are told of changes, and the logs of the partitions this node leads (by
the snapshot, while it holds its lease) are opened, those it no longer leads closed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg_pool import AsyncConnectionPool

from herd.cluster.database import DB_ERRORS, Trouble, connect
from herd.cluster.leases import Lease
from herd.cluster.nodes import Node, Nodes, NodeState, read_nodes
from herd.cluster.topics import Topic, TopicIndex, string_configs
from herd.log.api import LogConfig, PartitionLog
from herd.log.postgres import metadata_sql as q
from herd.log.postgres.db import describe

log = logging.getLogger(__name__)

LeadershipCallback = Callable[[str, int, PartitionLog | None], None]
# a row of herd_acls: resource type, resource name, pattern type, principal, host, operation, permission type
# (Kafka's codes; herd.security.acl_store makes ACLs of them)
AclRow = tuple[int, str, int, str, str, int, int]


class LeaderStore(Protocol):
    """What SharedCluster needs of the log store (PgLogStore): to open the log of a partition this node leads,
    from the row that said so, and to close it when it no longer does."""

    def open_partition(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        pid: int,
        leader_epoch: int,
        log_start_offset: int,
        log_end_offset: int,
    ) -> PartitionLog: ...

    async def close_partition(self, log: PartitionLog, *, flush: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class Row:
    """A partition as the last read of herd_partitions showed it."""

    pid: int
    leader: int | None
    epoch: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class Led:
    topic: Topic
    pid: int  # a topic deleted and made again under its name has new pids
    epoch: int
    log: PartitionLog


# herd_scram_credentials as read: (user name, mechanism name) -> (salt, StoredKey, ServerKey, iterations); what they
# mean is herd.security.credentials' business (this layer stores them and tells every node when they change)
ScramRows = dict[tuple[str, str], tuple[bytes, bytes, bytes, int]]


@dataclass(slots=True)
class Snapshot:
    nodes: Nodes  # non-stopped nodes and the seconds their leases have left (<= 0: ran out)
    topics: list[tuple[uuid.UUID, str, int, dict[str, str]]]
    rows: dict[tuple[str, int], Row]
    broker_configs: dict[str, dict[str, str]]  # the dynamic broker configs, by resource name ("": the default)
    acls: frozenset[AclRow]  # the rows of herd_acls
    scram_credentials: ScramRows


async def read_snapshot(conn: psycopg.AsyncConnection) -> Snapshot:
    """The whole view, read with `conn` (in a REPEATABLE READ transaction: one consistent snapshot)."""
    nodes = await read_nodes(conn)
    cursor = await conn.execute(q.TOPICS)
    topics = [(r[0], r[1], r[2], string_configs(r[3])) for r in await cursor.fetchall()]
    names = {t[0]: t[1] for t in topics}
    cursor = await conn.execute(q.PARTITIONS)
    rows = {(names[r[0]], r[1]): Row(r[2], r[3], r[4], r[5], r[6]) for r in await cursor.fetchall() if r[0] in names}
    cursor = await conn.execute(q.BROKER_CONFIGS)
    broker_configs = {r[0]: configs for r in await cursor.fetchall() if (configs := string_configs(r[1]))}
    cursor = await conn.execute(q.ACLS)
    acls = frozenset(tuple(r) for r in await cursor.fetchall())
    return Snapshot(
        nodes,
        topics,
        rows,
        broker_configs,
        acls,  # type: ignore[arg-type]
        await read_scram(conn),
    )


async def read_scram(conn: psycopg.AsyncConnection) -> ScramRows:
    cursor = await conn.execute(q.SCRAM_CREDENTIALS)
    return {(r[0], r[1]): (bytes(r[2]), bytes(r[3]), bytes(r[4]), r[5]) for r in await cursor.fetchall()}


async def listen_forever(
    pool: AsyncConnectionPool, *, node_id: int, heartbeat_s: float, where: str, heard: Callable[[str | None], None]
) -> None:
    """LISTEN on the metadata channel on a connection of its own: `heard(kind)` for each notification another
    node sent ("nodes", "topics", "leaders", "configs", "acls", "credentials"), `heard(None)` whenever a new
    connection listens (notifications may have been missed meanwhile)."""
    trouble = Trouble(f"listening for metadata changes on node {node_id}")
    while True:
        try:
            conn = await connect(pool)
            async with conn:
                await conn.execute(q.LISTEN)
                trouble.ok()
                heard(None)
                async for notice in conn.notifies():
                    kind, _, sender = notice.payload.partition(" ")
                    if sender != str(node_id):
                        heard(kind)
        except DB_ERRORS as e:
            trouble.failed(e, where)
        await asyncio.sleep(min(heartbeat_s, 1.0))


def call_quietly(callback: Callable[[Any], None] | None, value: Any, what: str) -> None:
    """Call `callback(value)` if there is one; a failure is logged ("could not <what>"): the cluster's view must
    not stop following the database for it."""
    if callback is None:
        return
    try:
        callback(value)
    except Exception:
        log.exception("could not %s", what)


class MetadataView(TopicIndex):
    """The topics and partition leaders of a cluster as this node last read them from PostgreSQL, and the logs of
    the partitions it leads (opened and closed through `store`). `SharedCluster` keeps it up to date."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        defaults: LogConfig,
        node_id: int,
        max_partitions: int,
        store: LeaderStore,
        lease: Lease,
        on_leadership: LeadershipCallback | None,
        on_topics_deleted: Callable[[list[str]], None] | None,
        on_broker_configs: Callable[[dict[str, dict[str, str]]], None] | None,
        *,
        session_s: float,
        where: str,
    ) -> None:
        super().__init__(defaults, node_id, max_partitions)
        self._pool = pool
        self._session_s = session_s
        self._where = where
        self._view_lock = asyncio.Lock()
        self.on_broker_configs = on_broker_configs
        # herd_acls as the view last read it, and who is told when that changes (herd.security.acl_store)
        self.acls: frozenset[AclRow] = frozenset()
        self.on_acls: Callable[[frozenset[AclRow]], None] | None = None
        # the SCRAM credentials of the last view, and who is told when another view changes them (herd.security)
        self.scram_credentials: ScramRows = {}
        self.on_scram_credentials: Callable[[ScramRows], None] | None = None
        self._store = store
        self._lease = lease
        self._on_leadership = on_leadership
        self._on_topics_deleted = on_topics_deleted
        self._rows: dict[tuple[str, int], Row] = {}
        self._nodes: dict[int, Node] = {}
        self._led: dict[tuple[str, int], Led] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def leader(self, name: str, index: int) -> tuple[int, int]:
        """(leader node id, leader epoch) as this node last read them; the id is -1 when the partition has no
        live leader (or is unknown: then the epoch is -1 too)."""
        row = self._rows.get((name, index))
        if row is None:
            return -1, -1
        return (row.leader if row.leader in self._nodes else -1), row.epoch

    def nodes(self, listener: str | None = None) -> list[Node]:
        """The live nodes, by id (this one only while it holds its lease); with `listener`, those that have it,
        with their addresses on it (`Node.on`)."""
        found = [self._nodes[n] for n in sorted(self._nodes)]
        if listener is None:
            return found
        return [node for node in (n.on(listener) for n in found) if node is not None]

    def node(self, node_id: int, listener: str | None = None) -> Node | None:
        node = self._nodes.get(node_id)
        return node if node is None or listener is None else node.on(listener)

    def _missed(self) -> None:
        """Called when a read after a change failed (SharedCluster reads again soon)."""

    def _viewed(self, nodes: Nodes) -> None:
        """Called with the nodes of every snapshot applied (SharedCluster schedules its next lease check)."""

    async def _refresh_quietly(self) -> None:
        try:
            await self._refresh()
        except DB_ERRORS as e:
            log.warning(
                "could not read the cluster metadata after a change (read again later): %s", describe(e, self._where)
            )
            self._missed()

    async def _refresh(self) -> None:
        """Read the nodes, topics and partitions in one snapshot and make the view, and the logs this node
        opens, match it."""
        async with self._view_lock:
            async with self._pool.connection(timeout=self._session_s) as conn, conn.transaction():
                await conn.execute(q.SNAPSHOT)
                snapshot = await read_snapshot(conn)
            await self._apply(snapshot)
            self._viewed(snapshot.nodes)

    async def _apply(self, snapshot: Snapshot) -> None:
        self._nodes = {n: node for n, (node, left) in snapshot.nodes.items() if left > 0}
        if not self._lease.holding():
            self._nodes.pop(self.node_id, None)
        shape_before = {(t.topic_id, len(t.partitions)) for t in self._topics.values()}  # grown in place below
        topics: dict[str, Topic] = {}
        altered: list[Topic] = []  # topics whose configs another node (or this one) changed
        for topic_id, name, count, configs in snapshot.topics:
            topic = self._by_id.get(topic_id) or Topic(name, topic_id, configs, [])
            if topic.configs != configs:
                topic.configs = configs
                altered.append(topic)
            topic.partitions.extend([None] * (count - len(topic.partitions)))  # type: ignore[list-item]
            topics[name] = topic
        by_id = {t.topic_id: t for t in topics.values()}
        deleted = [self._by_id[i].name for i in self._by_id.keys() - by_id.keys()]
        if {(t.topic_id, len(t.partitions)) for t in topics.values()} != shape_before:
            self.topics_version += 1
        self._topics = topics
        self._by_id = by_id
        self._rows = snapshot.rows
        self._apply_configs(snapshot.broker_configs, altered)
        if snapshot.acls != self.acls:
            self.acls = snapshot.acls
            call_quietly(self.on_acls, snapshot.acls, "apply the ACLs")
        if snapshot.scram_credentials != self.scram_credentials:
            self.scram_credentials = snapshot.scram_credentials
            call_quietly(self.on_scram_credentials, snapshot.scram_credentials, "apply the SCRAM credentials")
        if deleted:
            call_quietly(self._on_topics_deleted, deleted, f"act on the deletion of topics {deleted}")
        leading = self._lease.state is NodeState.ALIVE and self._lease.holding()
        wanted = {
            key: row
            for key, row in snapshot.rows.items()
            if leading and row.leader == self.node_id and key[0] in topics
        }
        closing = self._let_go(
            [
                k
                for k, led in self._led.items()
                if k not in wanted or (wanted[k].pid, wanted[k].epoch) != (led.pid, led.epoch)
            ],
            flush=False,
        )
        reopened = [task for key, task in closing.items() if key in wanted]
        if reopened:  # the same partition at a new epoch: its old log is closed before the new one opens
            await asyncio.gather(*reopened, return_exceptions=True)
            if not (self._lease.state is NodeState.ALIVE and self._lease.holding()):
                return  # the lease was lost or the node began to leave meanwhile: lead nothing
        for key, row in wanted.items():
            if key not in self._led:
                self._take(topics[key[0]], key[1], row)

    def _apply_configs(self, broker_configs: dict[str, dict[str, str]], altered: list[Topic]) -> None:
        """Config changes the view shows: the dynamic broker configs (the broker applies them, new defaults
        reaching every partition led here) and the altered topics' configs, to the partitions led here."""
        if broker_configs != self.broker_configs:
            call_quietly(
                self._broker_configs_changed, broker_configs, f"apply the dynamic broker configs {broker_configs}"
            )
        for topic in altered:
            self._reconfigure(topic)

    def _take(self, topic: Topic, index: int, row: Row) -> None:
        try:
            opened = self._store.open_partition(
                topic.name,
                index,
                self.log_config(topic.configs),
                pid=row.pid,
                leader_epoch=row.epoch,
                log_start_offset=row.log_start_offset,
                log_end_offset=row.log_end_offset,
            )
        except Exception:
            log.exception("could not open %s-%d, which node %d now leads", topic.name, index, self.node_id)
            return
        self._led[topic.name, index] = Led(topic, row.pid, row.epoch, opened)
        topic.partitions[index] = opened
        log.info("node %d leads %s-%d at epoch %d", self.node_id, topic.name, index, row.epoch)
        self._tell(topic.name, index, opened)

    def _let_go(self, keys: list[tuple[str, int]], *, flush: bool) -> dict[tuple[str, int], asyncio.Task[None]]:
        """Stop leading `keys` now (the view, then the owner told), and close their logs in the background;
        returns the closing tasks."""
        tasks = {}
        for key in keys:
            led = self._led.pop(key)
            if led.topic.partitions[key[1]] is led.log:
                led.topic.partitions[key[1]] = None  # type: ignore[call-overload]
            log.info("node %d no longer leads %s-%d (epoch %d)", self.node_id, key[0], key[1], led.epoch)
            self._tell(key[0], key[1], None)
            task = asyncio.get_running_loop().create_task(self._close(key, led.log, flush=flush))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            tasks[key] = task
        return tasks

    async def _close(self, key: tuple[str, int], partition_log: PartitionLog, *, flush: bool) -> None:
        try:
            await self._store.close_partition(partition_log, flush=flush)
        except Exception as e:
            log.warning("closing %s-%d failed: %s", key[0], key[1], e)

    async def _drop_all(self, *, flush: bool) -> None:
        self._let_go(list(self._led), flush=flush)
        await asyncio.gather(*self._closing, return_exceptions=True)

    def _tell(self, name: str, index: int, partition_log: PartitionLog | None) -> None:
        if self._on_leadership is None:
            return
        try:
            self._on_leadership(name, index, partition_log)
        except Exception:
            log.exception("the leadership change of %s-%d was not taken up", name, index)

    def _lost_lease(self) -> None:
        """The lease was lost (`Lease.on_lost`): this node leads nothing from now on, and leaves itself out of the
        live nodes until it registers again."""
        log.warning(
            "node %d could not renew its lease within %.1f s: giving up the %d partitions it leads and "
            "registering again when the database answers",
            self.node_id,
            self._lease.session_s,
            len(self._led),
        )
        self._nodes.pop(self.node_id, None)
        self._let_go(list(self._led), flush=False)
