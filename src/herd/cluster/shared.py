"""Cluster mode's metadata and partition leadership, shared by every node through PostgreSQL.

`SharedCluster` is the cluster-mode twin of `herd.cluster.topics.Cluster`: the same queries (`get`, `topics`,
`partition`, ...) answered from a local view of the database, and the same admin operations, which change the
database and then the view. Every node keeps its view by reading the nodes, topics and partitions whenever the
database says something changed (LISTEN/NOTIFY on `herd_metadata`) and, in case a notification was lost with
its connection, every session timeout. `partition()` gives a log only where this node leads the partition.

Nodes hold leases in `herd_nodes`, renewed every heartbeat interval on a connection of their own (a busy pool
must not cost a node its lease). A lease is judged in the database's clock only (`clock_timestamp()`), so the
machines' clocks never matter; a node that could not renew within the session timeout by its own monotonic
clock gives up every partition at once, without waiting to hear from the database, and registers again as a
new incarnation when it can (which gives each partition it still leads a new leader epoch, so nothing the old
incarnation had in flight can be stored).

Leadership is decided by the controller step, which any node runs, one at a time under an advisory lock, in
one transaction: nodes whose lease ran out are marked stopped, `placement.plan` says which partitions move
(those of stopped nodes; then, in the steps of a node that has just registered until one of them is done, as few
as balance the groups), and every moved partition's leader epoch grows by one, which fences the old leader's
writes (the log store checks leader and epoch in every write's transaction). A node runs the step when it
starts, when nodes come or go (NOTIFY), right after the earliest lease of another node runs out (so the
partitions of a killed node move within the session timeout plus the time of one step), and every session
timeout as a fallback.

`move_partition` moves one partition's leadership on demand (fault injection: a coordinator move a test asks
for, or AlterPartitionReassignments), from any node, in one transaction under the same lock: the leader and a new
epoch, NOTIFY. Since only a joining node's step balances, the move stays until a node joins or the new leader
goes. `elect_leaders` (ElectLeaders) moves the partitions asked for by the placement rules
(`placement.elect`: a preferred election balances, an unclean one gives leaderless partitions a leader), in one
transaction under the lock as well.

A controlled shutdown first marks the node shutting_down (others stop giving it partitions, and leave it those
it has), commits what its logs hold (`close_partition(flush=True)`), and only then hands its partitions over in
its own step and marks itself stopped.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from herd.cluster.placement import Election, Slot, assign_new, elect, plan
from herd.cluster.topics import (
    INTERNAL_TOPICS,
    KAFKA_STORAGE_ERROR,
    TOPIC_ALREADY_EXISTS,
    ConfigChange,
    Topic,
    TopicError,
    TopicIndex,
    check_growth,
    check_new_topic,
    check_room,
    check_topic_configs,
    string_configs,
    unknown_topic,
)
from herd.cluster.topics import Node as BaseNode
from herd.log.api import LogConfig, PartitionLog
from herd.log.postgres.db import describe, redact
from herd.log.postgres.errors import DatabaseError, MetadataWriteError
from herd.log.postgres.schema import METADATA_CHANNEL

log = logging.getLogger(__name__)

METADATA_LOCK = 0x6865726D  # 'herm': pg_advisory_xact_lock key serialising registrations, steps and admin changes
PURGE_LOCK = 0x68657270  # 'herp': pg_try_advisory_lock key of the node removing deleted topics' data
# what every UPDATE that gives a partition a new leader epoch sets: the epoch, and its entry in the epoch history,
# which begins at the log end offset (schema.py)
NEW_EPOCH = (
    "leader_epoch = leader_epoch + 1, epochs = epochs || (leader_epoch + 1), "
    "epoch_starts = epoch_starts || log_end_offset"
)
STEP_MARGIN_S = 0.02  # a step scheduled at a lease's end runs this much after it
PURGE_CHUNK = 2000  # batches deleted per statement when a deleted topic's data is removed
DB_ERRORS = (psycopg.Error, PoolTimeout, OSError)

LeadershipCallback = Callable[[str, int, PartitionLog | None], None]
# a row of herd_acls: resource type, resource name, pattern type, principal, host, operation, permission type
# (Kafka's codes; herd.security.acl_store makes ACLs of them)
AclRow = tuple[int, str, int, str, str, int, int]

T = TypeVar("T")


class ClusterError(DatabaseError):
    """This node cannot join the cluster (its node.id is taken by a live process); one line for the operator."""


class MoveError(Exception):
    """A move refused, with one line for the operator and the HTTP status that says why (404: no such topic or
    partition, 400: `to` is not a live node, 409: the move has nowhere to go, 503: the database failed)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Moved:
    """A leadership moved on demand: the partition, its leader before (None: it had none) and after, and the
    new leader epoch."""

    topic: str
    partition: int
    from_node: int | None
    to_node: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class Elected:
    """The election of one partition's leader: how it ended, the leader after it (None: none) and its epoch."""

    outcome: Election
    leader: int | None
    leader_epoch: int


class NodeState(enum.StrEnum):
    ALIVE = "alive"
    SHUTTING_DOWN = "shutting_down"  # handing its partitions over; given no new ones
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Node(BaseNode):
    """A node as herd_nodes records it: where clients reach it, its state, and the URL of its HTTP listener
    (herd.http.listener; None without one), through which the nodes' HTTP APIs ask each other."""

    state: NodeState = NodeState.ALIVE
    http_url: str | None = None
    # its advertised listeners, (name in upper case, host, port), from herd_nodes.listeners; empty for a node that
    # registered none (an older herd): its host and port then serve every listener
    listeners: tuple[tuple[str, str, int], ...] = ()

    def on(self, listener: str) -> Node | None:
        """This node with its address on `listener`, or None when it does not have that listener (Kafka leaves such
        a broker out of what a client of that listener is told)."""
        if not self.listeners:
            return self
        for name, host, port in self.listeners:
            if name == listener:
                return self if (host, port) == (self.host, self.port) else replace(self, host=host, port=port)
        return None


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
class _Row:
    """A partition as the last read of herd_partitions showed it."""

    pid: int
    leader: int | None
    epoch: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class _Led:
    topic: Topic
    pid: int  # a topic deleted and made again under its name has new pids
    epoch: int
    log: PartitionLog


# herd_scram_credentials as read: (user name, mechanism name) -> (salt, StoredKey, ServerKey, iterations); what they
# mean is herd.security.credentials' business (this layer stores them and tells every node when they change)
ScramRows = dict[tuple[str, str], tuple[bytes, bytes, bytes, int]]


@dataclass(slots=True)
class _Snapshot:
    nodes: dict[int, tuple[Node, float]]  # non-stopped nodes and the seconds their leases have left (<= 0: ran out)
    topics: list[tuple[uuid.UUID, str, int, dict[str, str]]]
    rows: dict[tuple[str, int], _Row]
    broker_configs: dict[str, dict[str, str]]  # the dynamic broker configs, by resource name ("": the default)
    acls: frozenset[AclRow]  # the rows of herd_acls
    scram_credentials: ScramRows


class _Trouble:
    """Logs the first failure of a background activity and its recovery, not every retry."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failing = False

    def failed(self, error: BaseException, where: str) -> None:
        if not self.failing:
            self.failing = True
            log.warning("%s failed (retrying): %s", self.what, describe(error, where))

    def ok(self) -> None:
        if self.failing:
            self.failing = False
            log.info("%s works again", self.what)


class SharedCluster(TopicIndex):
    """The topics and partition leaders of a cluster whose metadata lives in PostgreSQL."""

    shared = True

    def __init__(
        self,
        pool: AsyncConnectionPool,
        store: LeaderStore,
        defaults: LogConfig,
        *,
        node_id: int,
        endpoint: tuple[str, int],
        rack: str | None = None,
        http_url: str | None = None,
        listeners: dict[str, tuple[str, int]] | None = None,
        session_timeout_ms: int = 9000,
        heartbeat_interval_ms: int = 2000,
        max_partitions: int = 10_000,
        cluster_id: str = "",
        on_leadership: LeadershipCallback | None = None,
        on_topics_deleted: Callable[[list[str]], None] | None = None,
        on_broker_configs: Callable[[dict[str, dict[str, str]]], None] | None = None,
    ) -> None:
        """`on_leadership(topic, partition, log | None)` is called on the loop when this node gains (the opened
        log) or loses (None) a partition, from the first view `start` reads on; `on_topics_deleted(names)` with
        the topics deleted (by any node) since the last view; `on_broker_configs(configs)` with the dynamic broker
        configs (herd_broker_configs) whenever they change, before any partition opens with the defaults they
        give. They are given here, not set later, so that nothing read during `start` goes unannounced."""
        super().__init__(defaults, node_id, max_partitions)
        self.on_broker_configs = on_broker_configs
        # herd_acls as the view last read it, and who is told when that changes (herd.security.acl_store)
        self.acls: frozenset[AclRow] = frozenset()
        self.on_acls: Callable[[frozenset[AclRow]], None] | None = None
        # the SCRAM credentials of the last view, and who is told when another view changes them (herd.security)
        self.scram_credentials: ScramRows = {}
        self.on_scram_credentials: Callable[[ScramRows], None] | None = None
        self.cluster_id = cluster_id
        self._pool = pool
        self._store = store
        self.endpoint = endpoint
        self.listeners = listeners  # advertised listener name -> (host, port), registered in herd_nodes.listeners
        self.rack = rack
        self.http_url = http_url
        self._session_s = session_timeout_ms / 1000
        self._heartbeat_s = heartbeat_interval_ms / 1000
        self._where = redact(str(pool.conninfo))
        self._on_leadership = on_leadership
        self._on_topics_deleted = on_topics_deleted
        self._state = NodeState.STOPPED
        self._incarnation: uuid.UUID | None = None  # None: not registered (never, or the lease was lost)
        self._lease_deadline = 0.0  # loop time until which this node may act as a leader
        self._lease_timer: asyncio.TimerHandle | None = None
        self._lease_conn: psycopg.AsyncConnection | None = None  # the renewals' own
        self._rows: dict[tuple[str, int], _Row] = {}
        self._nodes: dict[int, Node] = {}
        self._led: dict[tuple[str, int], _Led] = {}
        self._view_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._step_due = False
        self._check_due = False
        self._registrations = 0  # how many times this node registered
        self._balanced = 0  # the registration after which a step of this node last balanced the groups
        self._step_timer: asyncio.TimerHandle | None = None
        self._purge_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing: set[asyncio.Task[None]] = set()

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Register this node, run a controller step, read the view (opening the logs of the partitions this
        node leads) and start the background work. Raises ClusterError (one line) if another live process is
        registered with this node.id or the database cannot be used."""
        try:
            await self._register()
            await self._controller_step()
            await self._refresh()
        except DB_ERRORS as e:
            self._forget_lease()
            raise ClusterError(describe(e, self._where)) from None
        loop = asyncio.get_running_loop()
        for name, work in (
            ("renewal", self._renew_forever()),
            ("metadata", self._metadata_forever()),
            ("listen", self._listen_forever()),
            ("purge", self._purge_forever()),
        ):
            self._tasks.append(loop.create_task(work, name=f"herd-node-{self.node_id}-{name}"))
        self._purge_wake.set()  # leftovers of deletions interrupted by a stop

    async def shutdown(self, controlled: bool) -> None:
        """Leave the cluster. Controlled: mark this node shutting_down, commit what its logs hold, hand its
        partitions to the other nodes (new leader epochs) and mark it stopped. Not controlled: commit and close
        the logs and mark the node stopped; the others take its partitions over when they hear of it. Each
        part is bounded by the session timeout; a database that cannot be reached leaves the lease to run out."""
        if not self._tasks:
            return
        renewal, others = self._tasks[0], self._tasks[1:]  # `start` creates the renewal first
        await self._cancel(others)
        if self._step_timer is not None:
            self._step_timer.cancel()
        registered = self._incarnation is not None
        self._state = NodeState.SHUTTING_DOWN
        try:
            reachable = True  # once the database fails a step, the steps after it are not tried (each would wait)
            if controlled and registered:
                reachable = await self._bounded(
                    self._set_state(NodeState.SHUTTING_DOWN), "mark this node shutting down"
                )
            reachable = (
                await self._bounded(self._drop_all(flush=reachable), "commit and close the logs this node leads")
                and reachable
            )
            if registered and reachable:
                await self._bounded(self._leave(handover=controlled), "hand this node's partitions over")
        finally:
            await self._cancel([renewal])
            self._tasks.clear()
            self._state = NodeState.STOPPED
            self._forget_lease()
            if self._lease_conn is not None:
                await self._lease_conn.close()
                self._lease_conn = None
            await asyncio.gather(*self._closing, return_exceptions=True)
        log.info("node %d left the cluster (%s)", self.node_id, "controlled" if controlled else "not controlled")

    async def _cancel(self, tasks: list[asyncio.Task[None]]) -> None:
        """Cancel background `tasks` and wait for them, at most the session timeout. A cancelled task does not stop
        at once: psycopg 3.3 answers a cancellation in the middle of a query by cancelling it on the server, waiting
        up to 5 s for that and up to 5 s more for the query to end (psycopg/connection_async.py, `wait`). A node
        SIGTERMed right after it started once hung in this shutdown until the process's limit
        (herd.server.server.shutdown_limit_s) ended it, and these waits had no bound of their own."""
        if not tasks:
            return
        for task in tasks:
            task.cancel()
        done, stuck = await asyncio.wait(tasks, timeout=self._session_s)
        for task in done:
            if not task.cancelled() and task.exception() is not None:  # retrieved, as gather did; and said
                log.warning("node %d: %s had failed: %r", self.node_id, task.get_name(), task.exception())
        if stuck:
            log.warning(
                "node %d: %s did not stop within %.1f s of being cancelled: leaving without it",
                self.node_id,
                ", ".join(sorted(t.get_name() for t in stuck)),
                self._session_s,
            )

    async def _bounded(self, work: Awaitable[Any], what: str) -> bool:
        """Whether `work` was done within the session timeout (a failure is logged)."""
        try:
            async with asyncio.timeout(self._session_s):
                await work
        except TimeoutError:
            log.warning("could not %s within %.1f s: leaving anyway", what, self._session_s)
        except DB_ERRORS as e:
            log.warning("could not %s: %s", what, describe(e, self._where))
        else:
            return True
        return False

    # -- queries -----------------------------------------------------------------------------------------------

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

    # -- admin changes -----------------------------------------------------------------------------------------

    async def create_topic(
        self, name: str, partitions: int, configs: dict[str, str | None] | None = None, *, validate_only: bool = False
    ) -> Topic:
        """Create the topic and its partitions, each with a leader, in one transaction (so it can be produced to
        at once), or nothing. Raises TopicError with Cluster's codes and messages; KAFKA_STORAGE_ERROR when the
        database failed (nothing was created, unless the commit's answer was lost)."""
        checked = check_new_topic(name, partitions, configs, self._topics)
        self.check_room(partitions)
        topic = Topic(name, uuid.uuid4(), checked, [None] * partitions)  # type: ignore[list-item]

        async def change(conn: psycopg.AsyncConnection) -> None:
            cursor = await conn.execute("SELECT name FROM herd_topics")
            check_new_topic(name, partitions, configs, [r[0] for r in await cursor.fetchall()])
            check_room(partitions, await _count_partitions(conn), self.max_partitions)
            if validate_only:
                return
            await conn.execute(
                "INSERT INTO herd_topics (topic_id, name, partitions, configs) VALUES (%s, %s, %s, %s)",
                (topic.topic_id, name, partitions, Jsonb(checked)),
            )
            await self._insert_partitions(conn, topic.topic_id, name, 0, partitions)
            await _notify(conn, "topics", self.node_id)

        try:
            await self._change(change, f"create topic {name}")
        except TopicError as e:
            if e.error_code == TOPIC_ALREADY_EXISTS:
                await self._refresh_quietly()  # another node made it: show it here too
            raise
        if validate_only:
            return topic
        log.info("created topic %s with %d partitions", name, partitions)
        await self._refresh_quietly()
        return self._topics.get(name, topic)

    async def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        """Grow a topic to `total` partitions, each with a leader, all or none; raises TopicError."""
        topic = self._topics.get(name)
        if topic is None:
            raise unknown_topic()
        check_growth(len(topic.partitions), total)
        self.check_room(total - len(topic.partitions))

        async def change(conn: psycopg.AsyncConnection) -> None:
            cursor = await conn.execute("SELECT topic_id, partitions FROM herd_topics WHERE name = %s", (name,))
            row = await cursor.fetchone()
            if row is None:
                raise unknown_topic()
            topic_id, current = row
            check_growth(current, total)
            check_room(total - current, await _count_partitions(conn), self.max_partitions)
            if validate_only:
                return
            await conn.execute("UPDATE herd_topics SET partitions = %s WHERE topic_id = %s", (total, topic_id))
            await self._insert_partitions(conn, topic_id, name, current, total)
            await _notify(conn, "topics", self.node_id)

        await self._change(change, f"grow topic {name} to {total} partitions")
        if not validate_only:
            log.info("topic %s grown to %d partitions", name, total)
            await self._refresh_quietly()

    async def delete_topic(self, name: str) -> Topic:
        """Delete the topic: its partitions lose their leaders (new epochs: no write of theirs can be stored
        any more) and their batches are removed in the background. Raises TopicError."""

        async def change(conn: psycopg.AsyncConnection) -> Topic:
            cursor = await conn.execute(
                "SELECT topic_id, partitions, configs FROM herd_topics WHERE name = %s", (name,)
            )
            row = await cursor.fetchone()
            if row is None:
                raise unknown_topic()
            await conn.execute(
                "UPDATE herd_partitions SET leader = NULL, " + NEW_EPOCH + " WHERE topic_id = %s", (row[0],)
            )
            await conn.execute("DELETE FROM herd_topics WHERE topic_id = %s", (row[0],))
            await _notify(conn, "topics", self.node_id)
            return Topic(name, row[0], dict(row[2]), [None] * row[1])  # type: ignore[list-item]

        topic = self._topics.get(name)
        deleted = await self._change(change, f"delete topic {name}")
        log.info("deleted topic %s", name)
        await self._refresh_quietly()
        self._purge_wake.set()
        return topic if topic is not None and topic.topic_id == deleted.topic_id else deleted

    async def alter_topic_configs(self, name: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        """Replace the topic's configs with `change(current)` (checked as Cluster checks them) in one transaction
        under the metadata lock, from what the database holds, and tell every node (NOTIFY): each applies them to
        the partitions it leads when its view follows (this node's before this returns). Raises TopicError or
        what `change` raises."""

        async def alter(conn: psycopg.AsyncConnection) -> None:
            cursor = await conn.execute("SELECT topic_id, configs FROM herd_topics WHERE name = %s", (name,))
            row = await cursor.fetchone()
            if row is None:
                raise unknown_topic()
            old = string_configs(row[1])
            configs = check_topic_configs(dict(change(dict(old))), internal=name in INTERNAL_TOPICS)
            if validate_only or configs == old:
                return
            await conn.execute("UPDATE herd_topics SET configs = %s WHERE topic_id = %s", (Jsonb(configs), row[0]))
            await _notify(conn, "topics", self.node_id)

        await self._change(alter, f"alter the configs of topic {name}")
        if not validate_only:
            await self._refresh_quietly()

    async def alter_broker_configs(self, resource: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        """Replace the dynamic broker configs of `resource` ("" for the cluster default, else a node id) with
        `change(current)` in herd_broker_configs, in one transaction under the metadata lock, and tell every
        node (NOTIFY); each applies them when its view follows (this node's before this returns). Raises
        TopicError(KAFKA_STORAGE_ERROR) or what `change` raises."""

        async def alter(conn: psycopg.AsyncConnection) -> None:
            cursor = await conn.execute("SELECT configs FROM herd_broker_configs WHERE resource_name = %s", (resource,))
            row = await cursor.fetchone()
            configs = dict(change(string_configs(row[0]) if row else {}))
            if validate_only:
                return
            await conn.execute(
                "INSERT INTO herd_broker_configs (resource_name, configs) VALUES (%s, %s) "
                "ON CONFLICT (resource_name) DO UPDATE SET configs = EXCLUDED.configs",
                (resource, Jsonb(configs)),
            )
            await _notify(conn, "configs", self.node_id)

        await self._change(alter, "store the dynamic broker configs")
        if not validate_only:
            await self._refresh_quietly()

    async def change_acls(self, change: Callable[[psycopg.AsyncConnection], Awaitable[T]]) -> T:
        """Run `change` (herd.security.acl_store's SQL on herd_acls) in one transaction under the metadata lock,
        tell every node (NOTIFY) and read the view again, so that this node's ACLs follow before this returns.
        Raises MetadataWriteError when the database failed (nothing changed)."""

        async def changed(conn: psycopg.AsyncConnection) -> T:
            outcome = await change(conn)
            await _notify(conn, "acls", self.node_id)
            return outcome

        outcome = await self._write(changed, "store the ACLs")
        await self._refresh_quietly()
        return outcome

    async def alter_scram_credentials(self, plan: Callable[[ScramRows], tuple[T, dict[tuple[str, str], Any]]]) -> T:
        """Change herd_scram_credentials in one transaction under the metadata lock: `plan(rows)`, given the rows
        as stored, returns (its result, the changes: key -> a new row, or None to delete the row); they are
        written and every node told (NOTIFY), this node's view following before this returns. Raises
        MetadataWriteError when the database fails (nothing changed)."""

        async def alter(conn: psycopg.AsyncConnection) -> T:
            result, changes = plan(await _read_scram(conn))
            for (user, mechanism), row in changes.items():
                if row is None:
                    await conn.execute(
                        "DELETE FROM herd_scram_credentials WHERE user_name = %s AND mechanism = %s", (user, mechanism)
                    )
                else:
                    await conn.execute(
                        "INSERT INTO herd_scram_credentials (user_name, mechanism, salt, stored_key, server_key, "
                        "iterations) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (user_name, mechanism) DO UPDATE "
                        "SET salt = EXCLUDED.salt, stored_key = EXCLUDED.stored_key, server_key = EXCLUDED.server_key, "
                        "iterations = EXCLUDED.iterations",
                        (user, mechanism, *row),
                    )
            if changes:
                await _notify(conn, "credentials", self.node_id)
            return result

        result = await self._write(alter, "store the SCRAM credentials")
        await self._refresh_quietly()
        return result

    async def _change(self, change: Callable[[psycopg.AsyncConnection], Awaitable[T]], what: str) -> T:
        """`_write`, for the changes of topics, configs and leaders, whose callers answer the codes of TopicError:
        a database failure becomes TopicError(KAFKA_STORAGE_ERROR)."""
        try:
            return await self._write(change, what)
        except MetadataWriteError as e:
            raise TopicError(KAFKA_STORAGE_ERROR, str(e)) from None

    async def _write(self, change: Callable[[psycopg.AsyncConnection], Awaitable[T]], what: str) -> T:
        """Run `change` in one transaction under the metadata lock; a database failure becomes
        MetadataWriteError."""
        try:
            async with self._pool.connection(timeout=self._session_s) as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (METADATA_LOCK,))
                return await change(conn)
        except DB_ERRORS as e:
            log.error("could not %s: %s", what, describe(e, self._where))
            raise MetadataWriteError(f"Could not {what}: {describe(e, self._where)}") from None

    async def _insert_partitions(
        self, conn: psycopg.AsyncConnection, topic_id: uuid.UUID, name: str, start: int, end: int
    ) -> None:
        nodes = await _read_nodes(conn)
        eligible = [n for n, (node, left) in nodes.items() if node.state is NodeState.ALIVE and left > 0]
        leaders = assign_new(name, end - start, await _read_slots(conn), eligible)
        await conn.execute(
            "INSERT INTO herd_partitions (topic_id, partition, leader) "
            "SELECT %s, p, l FROM unnest(%s::integer[], %s::integer[]) AS m(p, l)",
            (topic_id, list(range(start, end)), leaders),
        )

    # -- what is stored ----------------------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the cluster's data lives: the database, named without its password."""
        return self._where

    async def stored_sizes(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the bytes of its batches stored in PostgreSQL, for every partition this node
        leads (DescribeLogDirs). Raises TopicError(KAFKA_STORAGE_ERROR) if the database cannot be read."""
        try:
            async with self._pool.connection(timeout=self._session_s) as conn:
                cursor = await conn.execute(
                    "SELECT t.name, p.partition, coalesce(sum(b.size), 0) FROM herd_partitions p "
                    "JOIN herd_topics t ON t.topic_id = p.topic_id LEFT JOIN herd_batches b ON b.pid = p.pid "
                    "WHERE p.leader = %s GROUP BY t.name, p.partition",
                    (self.node_id,),
                )
                return {(r[0], r[1]): int(r[2]) for r in await cursor.fetchall()}
        except DB_ERRORS as e:
            log.warning("could not read the stored sizes of the partitions: %s", describe(e, self._where))
            raise TopicError(
                KAFKA_STORAGE_ERROR, f"Could not read the stored sizes: {describe(e, self._where)}"
            ) from None

    async def partition_stats(self) -> dict[tuple[str, int], tuple[int | None, int, int, int]]:
        """(topic, partition) -> (leader, log start offset, log end offset, bytes of its stored batches) of every
        partition, read now in one query (the HTTP API's topics). Raises TopicError(KAFKA_STORAGE_ERROR) if the
        database cannot be read."""
        try:
            async with self._pool.connection(timeout=self._session_s) as conn:
                cursor = await conn.execute(
                    "SELECT t.name, p.partition, p.leader, p.log_start_offset, p.log_end_offset, "
                    "coalesce((SELECT sum(b.size) FROM herd_batches b WHERE b.pid = p.pid), 0) "
                    "FROM herd_partitions p JOIN herd_topics t ON t.topic_id = p.topic_id"
                )
                return {(r[0], r[1]): (r[2], r[3], r[4], int(r[5])) for r in await cursor.fetchall()}
        except DB_ERRORS as e:
            raise TopicError(
                KAFKA_STORAGE_ERROR, f"Could not read the partitions: {describe(e, self._where)}"
            ) from None

    # -- moves on demand ---------------------------------------------------------------------------------------

    async def move_partition(self, topic: str, index: int, to_node: int | None = None) -> Moved:
        """Give the partition's leadership to `to_node` (None: the next live node after its leader, by id) with a
        new leader epoch, in one transaction under the metadata lock, and tell every node (NOTIFY). This node's
        view follows before it returns; the others' when the notification reaches them, a few milliseconds
        later: the old leader lets go (its writes not yet stored are fenced by the epoch), the new one opens the
        partition (a coordinator partition: loads its groups). Raises MoveError."""
        try:
            async with self._pool.connection(timeout=self._session_s) as conn, conn.transaction():
                moved = await move_leadership(conn, topic, index, to_node, sender=self.node_id)
        except DB_ERRORS as e:
            raise MoveError(f"could not move {topic}-{index}: {describe(e, self._where)}", 503) from None
        log.info(
            "moved the leadership of %s-%d from node %s to node %d (epoch %d) on demand",
            topic,
            index,
            moved.from_node,
            moved.to_node,
            moved.leader_epoch,
        )
        await self._refresh_quietly()
        return moved

    async def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None, *, preferred: bool
    ) -> dict[tuple[str, int], Elected]:
        """ElectLeaders: elect a leader for each of `partitions` (None: every partition) by `placement.elect`, in
        one transaction under the metadata lock; each partition that moves gets a new leader epoch, and every node
        is told (NOTIFY), as at any leadership change. Partitions that do not exist are left out of the answer.
        Raises TopicError(KAFKA_STORAGE_ERROR) when the database failed (nothing was elected)."""

        async def change(conn: psycopg.AsyncConnection) -> dict[tuple[str, int], Elected]:
            eligible, keep = _candidates(await _read_nodes(conn))
            placed = await _read_placed(conn)
            wanted = list(placed) if partitions is None else [p for p in dict.fromkeys(partitions) if p in placed]
            outcomes = elect(
                [slot for slot, _ in placed.values()],
                eligible,
                [placed[p][0].key for p in wanted],
                keep=keep,
                preferred=preferred,
            )
            epochs = await _set_leaders(
                conn,
                {
                    key: node
                    for key, (outcome, node) in outcomes.items()
                    if outcome is Election.ELECTED and node is not None
                },
            )
            if epochs:
                await _notify(conn, "leaders", self.node_id)
            elected = {}
            for p in wanted:
                slot, epoch = placed[p]
                outcome, leader = outcomes[slot.key]
                elected[p] = Elected(outcome, leader, epochs.get(slot.key, epoch))
            return elected

        elected = await self._change(change, "elect leaders")
        moved = sum(e.outcome is Election.ELECTED for e in elected.values())
        if moved:
            log.info(
                "elected new leaders of %d partitions (%s election)", moved, "preferred" if preferred else "unclean"
            )
            await self._refresh_quietly()
        return elected

    # -- registration and the lease ----------------------------------------------------------------------------

    async def _register(self) -> None:
        """Take this node's row as a new incarnation, refusing if another live process holds it; every
        partition still led under this node id gets a new epoch (fencing whatever an earlier incarnation of it
        has in flight). Raises ClusterError or a database error."""
        incarnation = uuid.uuid4()
        loop = asyncio.get_running_loop()
        sent = loop.time()
        async with self._pool.connection(timeout=self._session_s) as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (METADATA_LOCK,))
            cursor = await conn.execute(
                "SELECT host, port, EXTRACT(EPOCH FROM lease_until - clock_timestamp())::float8 FROM herd_nodes "
                "WHERE node_id = %s AND state <> 'stopped' AND lease_until > clock_timestamp()",
                (self.node_id,),
            )
            holder = await cursor.fetchone()
            if holder is not None:
                raise ClusterError(
                    f"node.id {self.node_id} is already registered in {self._where} by a live process at "
                    f"{holder[0]}:{holder[1]} (its lease runs for {holder[2]:.1f} s more): stop it, wait for its "
                    f"lease to run out, or give this node another node.id"
                )
            await conn.execute(
                "INSERT INTO herd_nodes (node_id, host, port, rack, incarnation, lease_until, state, http_url, "
                "listeners) VALUES (%s, %s, %s, %s, %s, clock_timestamp() + %s * interval '1 millisecond', 'alive', "
                "%s, %s) "
                "ON CONFLICT (node_id) DO UPDATE SET host = excluded.host, port = excluded.port, rack = excluded.rack, "
                "incarnation = excluded.incarnation, lease_until = excluded.lease_until, state = 'alive', "
                "registered_at = clock_timestamp(), http_url = excluded.http_url, listeners = excluded.listeners",
                (
                    self.node_id,
                    self.endpoint[0],
                    self.endpoint[1],
                    self.rack,
                    incarnation,
                    self._session_s * 1000,
                    self.http_url,
                    None
                    if not self.listeners
                    else Jsonb({name: [host, port] for name, (host, port) in self.listeners.items()}),
                ),
            )
            await conn.execute("UPDATE herd_partitions SET " + NEW_EPOCH + " WHERE leader = %s", (self.node_id,))
            await _notify(conn, "nodes", self.node_id)
        self._incarnation = incarnation
        self._state = NodeState.ALIVE
        self._registrations += 1
        self._leased(sent)
        log.info("node %d registered at %s:%d in %s", self.node_id, *self.endpoint, self._where)

    def _leased(self, sent: float) -> None:
        """The lease was renewed by a statement sent at loop time `sent`: this node may lead until a session
        timeout after it (the database's lease began later, so it runs out later than this)."""
        self._lease_deadline = sent + self._session_s
        if self._lease_timer is not None:
            self._lease_timer.cancel()
        self._lease_timer = asyncio.get_running_loop().call_at(self._lease_deadline, self._lease_lost)

    def _forget_lease(self) -> None:
        self._incarnation = None
        if self._lease_timer is not None:
            self._lease_timer.cancel()
            self._lease_timer = None

    def _holding_lease(self) -> bool:
        return self._incarnation is not None and asyncio.get_running_loop().time() < self._lease_deadline

    def _lease_lost(self) -> None:
        """No renewal within the session timeout (by this node's clock): lead nothing from now on."""
        if self._incarnation is None:
            return
        log.warning(
            "node %d could not renew its lease within %.1f s: giving up the %d partitions it leads and "
            "registering again when the database answers",
            self.node_id,
            self._session_s,
            len(self._led),
        )
        self._incarnation = None
        self._nodes.pop(self.node_id, None)
        self._let_go(list(self._led), flush=False)

    async def _renew_forever(self) -> None:
        trouble = _Trouble(f"renewing the lease of node {self.node_id}")
        loop = asyncio.get_running_loop()
        while True:
            sent = loop.time()
            try:
                if self._incarnation is None:
                    if self._state is NodeState.ALIVE:  # not while leaving
                        await self._register_again()
                else:
                    async with asyncio.timeout(max(self._lease_deadline - sent, self._heartbeat_s)):
                        await self._renew(sent)
                trouble.ok()
            except (ClusterError, *DB_ERRORS, TimeoutError) as e:
                trouble.failed(e, self._where)
            await asyncio.sleep(max(0.0, sent + self._heartbeat_s - loop.time()))

    async def _renew(self, sent: float) -> None:
        conn = await self._lease_connection()
        try:
            cursor = await conn.execute(
                "UPDATE herd_nodes SET lease_until = clock_timestamp() + %s * interval '1 millisecond' "
                "WHERE node_id = %s AND incarnation = %s AND state <> 'stopped' AND lease_until > clock_timestamp()",
                (self._session_s * 1000, self.node_id, self._incarnation),
            )
        except BaseException:
            self._lease_conn = None
            await conn.close()
            raise
        if cursor.rowcount == 1:
            self._leased(sent)
            return
        log.warning(
            "node %d lost its lease (it ran out, or another process took node.id %d)", self.node_id, self.node_id
        )
        self._lease_lost()

    async def _lease_connection(self) -> psycopg.AsyncConnection:
        """The renewals' own connection (not the pool's: a pool busy with writes must not delay them)."""
        if self._lease_conn is None or self._lease_conn.closed or self._lease_conn.broken:
            self._lease_conn = await self._connect()
        return self._lease_conn

    async def _connect(self) -> psycopg.AsyncConnection:
        """A connection of its own (autocommit), outside the pool, to the pool's database."""
        return await psycopg.AsyncConnection.connect(
            str(self._pool.conninfo), autocommit=True, **(self._pool.kwargs or {})
        )

    async def _register_again(self) -> None:
        await self._register()
        self._step_due = True
        self._wake.set()

    async def _set_state(self, state: NodeState) -> None:
        async with self._pool.connection(timeout=self._session_s) as conn, conn.transaction():
            await conn.execute(
                "UPDATE herd_nodes SET state = %s WHERE node_id = %s AND incarnation = %s",
                (state.value, self.node_id, self._incarnation),
            )
            await _notify(conn, "nodes", self.node_id)

    async def _leave(self, *, handover: bool) -> None:
        """Hand the partitions over (controlled) and mark this node stopped with its lease ended, in one
        transaction."""
        async with self._pool.connection(timeout=self._session_s) as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (METADATA_LOCK,))
            if handover:
                moved = await self._place(conn, handing_over=True)
                log.info("node %d handed %d partitions over", self.node_id, moved)
            await conn.execute(
                "UPDATE herd_nodes SET state = 'stopped', lease_until = clock_timestamp() "
                "WHERE node_id = %s AND incarnation = %s",
                (self.node_id, self._incarnation),
            )
            await _notify(conn, "nodes", self.node_id)

    # -- the controller step -----------------------------------------------------------------------------------

    async def _controller_step(self) -> None:
        """Expire the nodes whose lease ran out and move the partitions that must move, in one transaction; the
        first step to succeed after this node registered also balances the groups (a node joining takes its
        share)."""
        registration = self._registrations
        balance = registration != self._balanced
        async with self._pool.connection(timeout=self._session_s) as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (METADATA_LOCK,))
            cursor = await conn.execute(
                "UPDATE herd_nodes SET state = 'stopped' WHERE state <> 'stopped' AND lease_until <= clock_timestamp() "
                "RETURNING node_id"
            )
            expired = sorted(r[0] for r in await cursor.fetchall())
            if expired:
                log.warning("the leases of nodes %s ran out: their partitions move to live nodes", expired)
            moved = await self._place(conn, handing_over=False, balance=balance)
            if expired or moved:
                await _notify(conn, "leaders", self.node_id)
        self._balanced = registration

    async def _place(self, conn: psycopg.AsyncConnection, *, handing_over: bool, balance: bool = False) -> int:
        """Run `placement.plan` over the partitions and the live nodes and store its moves, each with the next
        leader epoch; returns how many moved. `handing_over`: this node's own partitions go too; `balance`: the
        groups are balanced as well (a joining node's step)."""
        eligible, keep = _candidates(await _read_nodes(conn), leaving=self.node_id if handing_over else None)
        moves = plan(await _read_slots(conn), eligible, keep=keep, balance=balance)
        if moves:
            await _set_leaders(conn, moves)
            log.info("moved the leadership of %d partitions (nodes %s eligible)", len(moves), sorted(eligible))
        return len(moves)

    async def _check_leases(self) -> None:
        """At the time another node's lease should run out: run a step if one did."""
        async with self._pool.connection(timeout=self._session_s) as conn:
            nodes = await _read_nodes(conn)
        if any(left <= 0 for n, (_, left) in nodes.items() if n != self.node_id):
            await self._controller_step()
        # the refresh that follows every check schedules the next one, from what it reads

    def _schedule_check(self, nodes: dict[int, tuple[Node, float]]) -> None:
        others = [left for n, (_, left) in nodes.items() if n != self.node_id]
        if self._step_timer is not None:
            self._step_timer.cancel()
            self._step_timer = None
        if others:
            self._step_timer = asyncio.get_running_loop().call_later(
                max(0.0, min(others)) + STEP_MARGIN_S, self._lease_check_due
            )

    def _lease_check_due(self) -> None:
        self._check_due = True
        self._wake.set()

    # -- the view ----------------------------------------------------------------------------------------------

    async def _metadata_forever(self) -> None:
        """Keep the view: a step and a read whenever something changed or was scheduled, and every session
        timeout anyway."""
        trouble = _Trouble(f"reading the cluster metadata on node {self.node_id}")
        while True:
            if not await _wait(self._wake, self._session_s):
                self._step_due = True
            self._wake.clear()
            step, check = self._step_due, self._check_due
            self._step_due = self._check_due = False
            try:
                if step:
                    await self._controller_step()
                elif check:
                    await self._check_leases()
                await self._refresh()
                trouble.ok()
            except DB_ERRORS as e:
                trouble.failed(e, self._where)
                self._step_due, self._check_due = step, check
                await asyncio.sleep(min(self._heartbeat_s, 1.0))
                self._wake.set()

    async def _listen_forever(self) -> None:
        """LISTEN on the metadata channel: a node coming or going starts a step, any other change a read; a
        new connection also reads (notifications may have been missed)."""
        trouble = _Trouble(f"listening for metadata changes on node {self.node_id}")
        while True:
            try:
                conn = await self._connect()
                async with conn:
                    await conn.execute(f"LISTEN {METADATA_CHANNEL}")
                    trouble.ok()
                    self._wake.set()
                    async for notice in conn.notifies():
                        kind, _, sender = notice.payload.partition(" ")
                        if sender != str(self.node_id):
                            self._step_due |= kind == "nodes"
                            self._wake.set()
            except DB_ERRORS as e:
                trouble.failed(e, self._where)
            await asyncio.sleep(min(self._heartbeat_s, 1.0))

    async def _refresh_quietly(self) -> None:
        try:
            await self._refresh()
        except DB_ERRORS as e:
            log.warning(
                "could not read the cluster metadata after a change (read again later): %s", describe(e, self._where)
            )
            self._wake.set()

    async def _refresh(self) -> None:
        """Read the nodes, topics and partitions in one snapshot and make the view, and the logs this node
        opens, match it."""
        async with self._view_lock:
            async with self._pool.connection(timeout=self._session_s) as conn, conn.transaction():
                await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                snapshot = await _read_snapshot(conn)
            await self._apply(snapshot)
            self._schedule_check(snapshot.nodes)

    async def _apply(self, snapshot: _Snapshot) -> None:
        self._nodes = {n: node for n, (node, left) in snapshot.nodes.items() if left > 0}
        if not self._holding_lease():
            self._nodes.pop(self.node_id, None)
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
        self._topics = topics
        self._by_id = by_id
        self._rows = snapshot.rows
        self._apply_configs(snapshot.broker_configs, altered)
        if snapshot.acls != self.acls:
            self.acls = snapshot.acls
            _call_quietly(self.on_acls, snapshot.acls, "apply the ACLs")
        if snapshot.scram_credentials != self.scram_credentials:
            self.scram_credentials = snapshot.scram_credentials
            _call_quietly(self.on_scram_credentials, snapshot.scram_credentials, "apply the SCRAM credentials")
        if deleted:
            _call_quietly(self._on_topics_deleted, deleted, f"act on the deletion of topics {deleted}")
        leading = self._state is NodeState.ALIVE and self._holding_lease()
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
            if not (self._state is NodeState.ALIVE and self._holding_lease()):
                return  # the lease was lost or the node began to leave meanwhile: lead nothing
        for key, row in wanted.items():
            if key not in self._led:
                self._take(topics[key[0]], key[1], row)

    def _apply_configs(self, broker_configs: dict[str, dict[str, str]], altered: list[Topic]) -> None:
        """Config changes the view shows: the dynamic broker configs (the broker applies them, new defaults
        reaching every partition led here) and the altered topics' configs, to the partitions led here."""
        if broker_configs != self.broker_configs:
            _call_quietly(
                self._broker_configs_changed, broker_configs, f"apply the dynamic broker configs {broker_configs}"
            )
        for topic in altered:
            self._reconfigure(topic)

    def _take(self, topic: Topic, index: int, row: _Row) -> None:
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
        self._led[topic.name, index] = _Led(topic, row.pid, row.epoch, opened)
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

    # -- removing deleted topics' data -------------------------------------------------------------------------

    async def _purge_forever(self) -> None:
        """Remove the batches of deleted topics' partitions (rows without a topic), in chunks, then the rows."""
        trouble = _Trouble(f"removing deleted topics' data on node {self.node_id}")
        while True:
            await _wait(self._purge_wake, self._session_s * 10)
            self._purge_wake.clear()
            try:
                await self._purge()
                trouble.ok()
            except DB_ERRORS as e:
                trouble.failed(e, self._where)

    async def _purge(self) -> None:
        """One node at a time (a session advisory lock; the others skip this round): every node wakes to purge at
        start and after deletions, and they would otherwise all delete the same rows."""
        async with self._pool.connection(timeout=self._session_s) as conn:
            cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (PURGE_LOCK,))
            row = await cursor.fetchone()
            await conn.commit()
            if not row or not row[0]:
                return
            try:
                await self._purge_with(conn)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (PURGE_LOCK,))
                await conn.commit()

    async def _purge_with(self, conn: psycopg.AsyncConnection) -> None:
        cursor = await conn.execute("SELECT pid FROM herd_partitions WHERE topic_id IS NULL")
        pids = [r[0] for r in await cursor.fetchall()]
        await conn.commit()
        for pid in pids:
            while True:
                cursor = await conn.execute(
                    "DELETE FROM herd_batches WHERE pid = %s AND base_offset IN (SELECT base_offset FROM "
                    "herd_batches WHERE pid = %s ORDER BY base_offset LIMIT %s)",
                    (pid, pid, PURGE_CHUNK),
                )
                await conn.commit()
                if cursor.rowcount < PURGE_CHUNK:
                    break
            await conn.execute("DELETE FROM herd_partitions WHERE pid = %s AND topic_id IS NULL", (pid,))
            await conn.commit()
        if pids:
            log.info("removed the data of %d partitions of deleted topics", len(pids))


async def _wait(event: asyncio.Event, seconds: float) -> bool:
    """Whether `event` was set within `seconds`. (Not asyncio.wait_for: on Python 3.11 it can swallow a
    cancellation that arrives as the event is set, and the task then never ends.)"""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


def _call_quietly(callback: Callable[[Any], None] | None, value: Any, what: str) -> None:
    """Call `callback(value)` if there is one; a failure is logged ("could not <what>"): the cluster's view must
    not stop following the database for it."""
    if callback is None:
        return
    try:
        callback(value)
    except Exception:
        log.exception("could not %s", what)


async def _notify(conn: psycopg.AsyncConnection, kind: str, sender: int) -> None:
    """Tell every node (at commit) that `kind` changed; `sender` does not need to hear it."""
    await conn.execute("SELECT pg_notify(%s, %s)", (METADATA_CHANNEL, f"{kind} {sender}"))


async def move_leadership(
    conn: psycopg.AsyncConnection, topic: str, index: int, to_node: int | None, *, sender: int
) -> Moved:
    """The database side of `SharedCluster.move_partition`, inside the caller's transaction, which commits it:
    take the metadata lock (no step or admin change runs meanwhile), check the partition and the target against
    the live nodes, store the new leader with the next epoch (NEW_EPOCH: the epoch history OffsetForLeaderEpoch
    answers from grows as at every other change) and notify every node but `sender`. Raises MoveError."""
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (METADATA_LOCK,))
    cursor = await conn.execute(
        "SELECT t.partitions, p.pid, p.leader FROM herd_topics t LEFT JOIN herd_partitions p "
        "ON p.topic_id = t.topic_id AND p.partition = %s WHERE t.name = %s",
        (index, topic),
    )
    row = await cursor.fetchone()
    if row is None:
        raise MoveError(f"unknown topic {topic!r}", 404)
    count, pid, leader = row
    if pid is None:
        raise MoveError(f"topic {topic!r} has no partition {index} (it has {count})", 404)
    nodes = await _read_nodes(conn)
    live = sorted(n for n, (node, left) in nodes.items() if left > 0 and node.state is NodeState.ALIVE)
    target = _move_target(f"{topic}-{index}", leader, to_node, live)
    cursor = await conn.execute(
        "UPDATE herd_partitions SET leader = %s, " + NEW_EPOCH + " WHERE pid = %s RETURNING leader_epoch", (target, pid)
    )
    updated = await cursor.fetchone()
    assert updated is not None
    await _notify(conn, "leaders", sender)
    return Moved(topic, index, leader, target, int(updated[0]))


def _move_target(name: str, leader: int | None, to_node: int | None, live: list[int]) -> int:
    """`to_node` if it is live and not the leader already; by default the first live node after the leader by
    id (wrapping around). Raises MoveError."""
    if to_node is not None:
        if to_node not in live:
            raise MoveError(f"node {to_node} is not a live node (live nodes: {live})", 400)
        if to_node == leader:
            raise MoveError(f"{name} is already led by node {to_node}", 409)
        return to_node
    others = [n for n in live if n != leader]
    if not others:
        raise MoveError(f"{name} has no other live node to move to (live nodes: {live})", 409)
    after = [n for n in others if leader is not None and n > leader]
    return (after or others)[0]


def _candidates(nodes: dict[int, tuple[Node, float]], leaving: int | None = None) -> tuple[list[int], list[int]]:
    """(eligible, keep) for `placement.plan` from the nodes `_read_nodes` gave: the live nodes that are alive, and
    those shutting down; `leaving` (a node handing its partitions over) is neither."""
    live = {n: node for n, (node, left) in nodes.items() if left > 0 and n != leaving}
    return (
        [n for n, node in live.items() if node.state is NodeState.ALIVE],
        [n for n, node in live.items() if node.state is NodeState.SHUTTING_DOWN],
    )


async def _set_leaders(conn: psycopg.AsyncConnection, moves: dict[int, int]) -> dict[int, int]:
    """Store each moved partition's new leader (by pid) with the next leader epoch (NEW_EPOCH); the new epochs."""
    if not moves:
        return {}
    cursor = await conn.execute(
        "UPDATE herd_partitions AS p SET leader = m.leader, " + NEW_EPOCH + " "
        "FROM unnest(%s::bigint[], %s::integer[]) AS m(pid, leader) WHERE p.pid = m.pid "
        "RETURNING p.pid, p.leader_epoch",
        (list(moves), list(moves.values())),
    )
    return {int(r[0]): int(r[1]) for r in await cursor.fetchall()}


async def _read_placed(conn: psycopg.AsyncConnection) -> dict[tuple[str, int], tuple[Slot, int]]:
    """Every partition of a topic, by (topic, index): its slot and its leader epoch."""
    cursor = await conn.execute(
        "SELECT p.pid, t.name, p.partition, p.leader, p.leader_epoch FROM herd_partitions p "
        "JOIN herd_topics t ON t.topic_id = p.topic_id"
    )
    return {(r[1], r[2]): (Slot(r[0], r[1], r[3]), r[4]) for r in await cursor.fetchall()}


async def _count_partitions(conn: psycopg.AsyncConnection) -> int:
    cursor = await conn.execute("SELECT count(*) FROM herd_partitions WHERE topic_id IS NOT NULL")
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def _read_nodes(conn: psycopg.AsyncConnection) -> dict[int, tuple[Node, float]]:
    cursor = await conn.execute(
        "SELECT node_id, host, port, rack, state, EXTRACT(EPOCH FROM lease_until - clock_timestamp())::float8, "
        "http_url, listeners FROM herd_nodes WHERE state <> 'stopped'"
    )
    return {
        r[0]: (Node(r[0], r[1], r[2], r[3], NodeState(r[4]), r[6], _listeners(r[7])), float(r[5]))
        for r in await cursor.fetchall()
    }


def _listeners(value: Any) -> tuple[tuple[str, str, int], ...]:
    """herd_nodes.listeners ({"NAME": [host, port]}, or NULL) as `Node.listeners`; anything else is ignored (the
    node's host and port then serve every listener)."""
    if not isinstance(value, dict):
        return ()
    try:
        return tuple((str(name).upper(), str(where[0]), int(where[1])) for name, where in value.items())
    except (TypeError, ValueError, IndexError):
        return ()


async def _read_slots(conn: psycopg.AsyncConnection) -> list[Slot]:
    """Every partition of a topic, as `placement` sees it."""
    return [slot for slot, _ in (await _read_placed(conn)).values()]


async def _read_snapshot(conn: psycopg.AsyncConnection) -> _Snapshot:
    nodes = await _read_nodes(conn)
    cursor = await conn.execute("SELECT topic_id, name, partitions, configs FROM herd_topics")
    topics = [(r[0], r[1], r[2], string_configs(r[3])) for r in await cursor.fetchall()]
    names = {t[0]: t[1] for t in topics}
    cursor = await conn.execute(
        "SELECT topic_id, partition, pid, leader, leader_epoch, log_start_offset, "
        "log_end_offset FROM herd_partitions WHERE topic_id IS NOT NULL"
    )
    rows = {(names[r[0]], r[1]): _Row(r[2], r[3], r[4], r[5], r[6]) for r in await cursor.fetchall() if r[0] in names}
    cursor = await conn.execute("SELECT resource_name, configs FROM herd_broker_configs")
    broker_configs = {r[0]: configs for r in await cursor.fetchall() if (configs := string_configs(r[1]))}
    cursor = await conn.execute(
        "SELECT resource_type, resource_name, pattern_type, principal, host, operation, permission_type FROM herd_acls"
    )
    acls = frozenset(tuple(r) for r in await cursor.fetchall())
    return _Snapshot(
        nodes,
        topics,
        rows,
        broker_configs,
        acls,  # type: ignore[arg-type]
        await _read_scram(conn),
    )


async def _read_scram(conn: psycopg.AsyncConnection) -> ScramRows:
    cursor = await conn.execute(
        "SELECT user_name, mechanism, salt, stored_key, server_key, iterations FROM herd_scram_credentials"
    )
    return {(r[0], r[1]): (bytes(r[2]), bytes(r[3]), bytes(r[4]), r[5]) for r in await cursor.fetchall()}


async def read_end_offsets(cluster: SharedCluster) -> dict[tuple[str, int], int] | None:
    """(topic, partition) -> the log end offset committed to PostgreSQL (the high watermark a fetch sees) of every
    partition of a topic, in one query: consumer lag of the partitions other nodes lead (herd.server.lag). None
    when the database cannot be read (logged at DEBUG: a scrape must not fill the log while the database is down)."""
    try:
        async with cluster._pool.connection(timeout=cluster._session_s) as conn:
            cursor = await conn.execute(
                "SELECT t.name, p.partition, p.log_end_offset FROM herd_partitions p "
                "JOIN herd_topics t ON t.topic_id = p.topic_id"
            )
            return {(r[0], r[1]): int(r[2]) for r in await cursor.fetchall()}
    except DB_ERRORS as e:
        log.debug("could not read the partitions' end offsets: %s", describe(e, cluster._where))
        return None
