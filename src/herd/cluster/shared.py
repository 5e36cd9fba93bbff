"""Cluster mode's metadata and partition leadership, shared by every node through PostgreSQL.

`SharedCluster` is the cluster-mode twin of `herd.cluster.topics.Cluster`: the same queries (`get`, `topics`,
`partition`, ...) answered from a local view of the database, and the same admin operations, which change the
database and then the view. It runs the jobs of the modules beside it and keeps their timing:

- `leases`: this node's registration and lease in `herd_nodes`, renewed every heartbeat interval on a connection of
  its own and judged in the database's clock; a node that could not renew within the session timeout by its own
  monotonic clock gives up every partition at once and registers again as a new incarnation when it can;
- `controller`: the controller step (expire the nodes whose lease ran out, move their partitions, balance the
  groups in the steps of a node that has just registered), moves on demand and elections, each in one
  transaction under the metadata lock, every moved partition getting a new leader epoch that fences its old
  leader's writes. A node runs the step when it starts, when nodes come or go (NOTIFY), right after the earliest
  lease of another node runs out (so the partitions of a killed node move within the session timeout plus the
  time of one step), and every session timeout as a fallback;
- `metadata_view`: the view, read in one snapshot whenever the database says something changed (LISTEN/NOTIFY on
  `herd_metadata`) and, in case a notification was lost with its connection, every session timeout;
  `partition()` gives a log only where this node leads the partition;
- `admin`: the admin writes (topics, configs, ACLs, SCRAM credentials);
- `purge`: the removal of deleted topics' data; `nodes` and `database`: what the others share.
The SQL of all of them is `herd.log.postgres.metadata_sql`.

`move_partition` moves one partition's leadership on demand (fault injection: a coordinator move a test asks for,
or AlterPartitionReassignments); since only a joining node's step balances, the move stays until a node joins or
the new leader goes. `elect_leaders` (ElectLeaders) moves the partitions asked for by the placement rules.

A controlled shutdown first marks the node shutting_down (others stop giving it partitions, and leave it those
it has), commits what its logs hold (`close_partition(flush=True)`), and only then hands its partitions over in
its own step and marks itself stopped.

Failures: a database failure under an ACL or SCRAM change raises MetadataWriteError (herd.security makes it an
AclStoreError or a CredentialStoreError); under a topic, config or leadership change TopicError(KAFKA_STORAGE_ERROR),
which the handlers of those changes answer as Kafka's codes.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from psycopg_pool import AsyncConnectionPool

from herd.cluster import admin, controller
from herd.cluster.controller import Moved
from herd.cluster.database import DB_ERRORS, Trouble, locked, wait
from herd.cluster.leases import Lease
from herd.cluster.metadata_view import AclRow, LeadershipCallback, LeaderStore, MetadataView, ScramRows, listen_forever
from herd.cluster.nodes import ClusterError, Node, Nodes, NodeState, read_nodes
from herd.cluster.placement import Elected, Election, MoveError
from herd.cluster.purge import purge_forever
from herd.cluster.topics import (
    KAFKA_STORAGE_ERROR,
    TOPIC_ALREADY_EXISTS,
    ConfigChange,
    Topic,
    TopicError,
    check_growth,
    check_new_topic,
    unknown_topic,
)
from herd.log.api import LogConfig
from herd.log.postgres import metadata_sql as q
from herd.log.postgres.db import describe, redact
from herd.log.postgres.errors import MetadataWriteError

__all__ = [
    "AclRow",
    "ClusterError",
    "Elected",
    "LeaderStore",
    "MoveError",
    "Moved",
    "Node",
    "NodeState",
    "ScramRows",
    "SharedCluster",
    "read_end_offsets",
]

log = logging.getLogger(__name__)

STEP_MARGIN_S = 0.02  # a step scheduled at a lease's end runs this much after it

T = TypeVar("T")


class SharedCluster(MetadataView):
    """The topics and partition leaders of a cluster whose metadata lives in PostgreSQL."""

    shared = True
    # as herd.cluster.api.ClusterAdmin's: True, the controller places each partition, and a node leads those it is
    # given (told through `on_leadership`), not the partitions of a topic it made
    places_partitions = True

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
        self._session_s = session_timeout_ms / 1000
        self._heartbeat_s = heartbeat_interval_ms / 1000
        self._where = redact(str(pool.conninfo))
        lease = Lease(
            pool,
            node_id=node_id,
            endpoint=endpoint,
            rack=rack,
            http_url=http_url,
            listeners=listeners,
            session_s=self._session_s,
            heartbeat_s=self._heartbeat_s,
            where=self._where,
            on_lost=lambda: self._lost_lease(),
        )
        super().__init__(
            pool,
            defaults,
            node_id,
            max_partitions,
            store,
            lease,
            on_leadership,
            on_topics_deleted,
            on_broker_configs,
            session_s=self._session_s,
            where=self._where,
        )
        self.cluster_id = cluster_id
        self.endpoint = endpoint
        self.listeners = listeners  # advertised listener name -> (host, port), registered in herd_nodes.listeners
        self.rack = rack
        self.http_url = http_url
        self._wake = asyncio.Event()
        self._step_due = False
        self._check_due = False
        self._balanced = 0  # the registration after which a step of this node last balanced the groups
        self._step_timer: asyncio.TimerHandle | None = None
        self._purge_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Register this node, run a controller step, read the view (opening the logs of the partitions this
        node leads) and start the background work. Raises ClusterError (one line) if another live process is
        registered with this node.id or the database cannot be used."""
        try:
            await self._lease.register()
            await self._controller_step()
            await self._refresh()
        except DB_ERRORS as e:
            self._lease.forget()
            raise ClusterError(describe(e, self._where)) from None
        loop = asyncio.get_running_loop()
        listen = listen_forever(
            self._pool, node_id=self.node_id, heartbeat_s=self._heartbeat_s, where=self._where, heard=self._heard
        )
        purge = purge_forever(
            self._pool, self._purge_wake, node_id=self.node_id, session_s=self._session_s, where=self._where
        )
        for name, work in (
            ("renewal", self._lease.renew_forever(self._registered_again)),
            ("metadata", self._metadata_forever()),
            ("listen", listen),
            ("purge", purge),
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
        registered = self._lease.incarnation is not None
        self._lease.state = NodeState.SHUTTING_DOWN
        try:
            reachable = True  # once the database fails a step, the steps after it are not tried (each would wait)
            if controlled and registered:
                reachable = await self._bounded(
                    self._lease.set_state(NodeState.SHUTTING_DOWN), "mark this node shutting down"
                )
            reachable = (
                await self._bounded(self._drop_all(flush=reachable), "commit and close the logs this node leads")
                and reachable
            )
            if registered and reachable:
                await self._bounded(self._lease.leave(handover=controlled), "hand this node's partitions over")
        finally:
            await self._cancel([renewal])
            self._tasks.clear()
            await self._lease.close()
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

    # -- admin changes (herd.cluster.admin) --------------------------------------------------------------------

    async def create_topic(
        self, name: str, partitions: int, configs: dict[str, str | None] | None = None, *, validate_only: bool = False
    ) -> Topic:
        """Create the topic and its partitions, each with a leader, in one transaction (so it can be produced to
        at once), or nothing. Raises TopicError with Cluster's codes and messages; KAFKA_STORAGE_ERROR when the
        database failed (nothing was created, unless the commit's answer was lost)."""
        checked = check_new_topic(name, partitions, configs, self._topics)
        self.check_room(partitions)
        topic = Topic(name, uuid.uuid4(), checked, [None] * partitions)  # type: ignore[list-item]
        try:
            await self._change(
                lambda conn: admin.create_topic(
                    conn,
                    topic,
                    configs,
                    max_partitions=self.max_partitions,
                    validate_only=validate_only,
                    sender=self.node_id,
                ),
                f"create topic {name}",
            )
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
        await self._change(
            lambda conn: admin.add_partitions(
                conn, name, total, max_partitions=self.max_partitions, validate_only=validate_only, sender=self.node_id
            ),
            f"grow topic {name} to {total} partitions",
        )
        if not validate_only:
            log.info("topic %s grown to %d partitions", name, total)
            await self._refresh_quietly()

    async def delete_topic(self, name: str) -> Topic:
        """Delete the topic: its partitions lose their leaders (new epochs: no write of theirs can be stored
        any more) and their batches are removed in the background. Raises TopicError."""
        topic = self._topics.get(name)
        deleted = await self._change(
            lambda conn: admin.delete_topic(conn, name, sender=self.node_id), f"delete topic {name}"
        )
        log.info("deleted topic %s", name)
        await self._refresh_quietly()
        self._purge_wake.set()
        return topic if topic is not None and topic.topic_id == deleted.topic_id else deleted

    async def alter_topic_configs(self, name: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        """Replace the topic's configs with `change(current)` (checked as Cluster checks them) in one transaction
        under the metadata lock, from what the database holds, and tell every node (NOTIFY): each applies them to
        the partitions it leads when its view follows (this node's before this returns). Raises TopicError or
        what `change` raises."""
        await self._change(
            lambda conn: admin.alter_topic_configs(
                conn, name, change, validate_only=validate_only, sender=self.node_id
            ),
            f"alter the configs of topic {name}",
        )
        if not validate_only:
            await self._refresh_quietly()

    async def alter_broker_configs(self, resource: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        """Replace the dynamic broker configs of `resource` ("" for the cluster default, else a node id) with
        `change(current)` in herd_broker_configs, in one transaction under the metadata lock, and tell every
        node (NOTIFY); each applies them when its view follows (this node's before this returns). Raises
        TopicError(KAFKA_STORAGE_ERROR) or what `change` raises."""
        await self._change(
            lambda conn: admin.alter_broker_configs(
                conn, resource, change, validate_only=validate_only, sender=self.node_id
            ),
            "store the dynamic broker configs",
        )
        if not validate_only:
            await self._refresh_quietly()

    async def change_acls(self, change: admin.Change[T]) -> T:
        """Run `change` (herd.security.acl_store's SQL on herd_acls) in one transaction under the metadata lock,
        tell every node (NOTIFY) and read the view again, so that this node's ACLs follow before this returns.
        Raises MetadataWriteError when the database failed (nothing changed)."""
        outcome = await self._write(lambda conn: admin.change_acls(conn, change, sender=self.node_id), "store the ACLs")
        await self._refresh_quietly()
        return outcome

    async def alter_scram_credentials(self, plan: Callable[[ScramRows], tuple[T, dict[tuple[str, str], Any]]]) -> T:
        """Change herd_scram_credentials in one transaction under the metadata lock: `plan(rows)`, given the rows
        as stored, returns (its result, the changes: key -> a new row, or None to delete the row); they are
        written and every node told (NOTIFY), this node's view following before this returns. Raises
        MetadataWriteError when the database fails (nothing changed)."""
        result = await self._write(
            lambda conn: admin.alter_scram_credentials(conn, plan, sender=self.node_id), "store the SCRAM credentials"
        )
        await self._refresh_quietly()
        return result

    async def _change(self, change: admin.Change[T], what: str) -> T:
        """`_write`, for the changes of topics, configs and leaders, whose callers answer the codes of TopicError:
        a database failure becomes TopicError(KAFKA_STORAGE_ERROR)."""
        try:
            return await self._write(change, what)
        except MetadataWriteError as e:
            raise TopicError(KAFKA_STORAGE_ERROR, str(e)) from None

    async def _write(self, change: admin.Change[T], what: str) -> T:
        """Run `change` in one transaction under the metadata lock; raises MetadataWriteError."""
        return await admin.write(self._pool, change, what, timeout=self._session_s, where=self._where)

    # -- what is stored ----------------------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the cluster's data lives: the database, named without its password."""
        return self._where

    async def stored_end_offsets(self) -> dict[tuple[str, int], int] | None:
        """TopicIndex.stored_end_offsets: every partition's, in one query (`read_end_offsets`)."""
        return await read_end_offsets(self)

    async def stored_sizes(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the bytes of its batches stored in PostgreSQL, for every partition this node
        leads (DescribeLogDirs). Raises TopicError(KAFKA_STORAGE_ERROR) if the database cannot be read."""
        try:
            async with self._pool.connection(timeout=self._session_s) as conn:
                cursor = await conn.execute(q.STORED_SIZES, (self.node_id,))
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
                cursor = await conn.execute(q.PARTITION_STATS)
                return {(r[0], r[1]): (r[2], r[3], r[4], int(r[5])) for r in await cursor.fetchall()}
        except DB_ERRORS as e:
            raise TopicError(
                KAFKA_STORAGE_ERROR, f"Could not read the partitions: {describe(e, self._where)}"
            ) from None

    # -- leadership on demand (herd.cluster.controller) ---------------------------------------------------------

    async def move_partition(self, topic: str, index: int, to_node: int | None = None) -> Moved:
        """Give the partition's leadership to `to_node` (None: the next live node after its leader, by id) with a
        new leader epoch, in one transaction under the metadata lock, and tell every node (NOTIFY). This node's
        view follows before it returns; the others' when the notification reaches them, a few milliseconds
        later: the old leader lets go (its writes not yet stored are fenced by the epoch), the new one opens the
        partition (a coordinator partition: loads its groups). Raises MoveError."""
        try:
            async with locked(self._pool, self._session_s) as conn:
                moved = await controller.move_leadership(conn, topic, index, to_node, sender=self.node_id)
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
        elected = await self._change(
            lambda conn: controller.elect_leaders(conn, partitions, preferred=preferred, sender=self.node_id),
            "elect leaders",
        )
        moved = sum(e.outcome is Election.ELECTED for e in elected.values())
        if moved:
            log.info(
                "elected new leaders of %d partitions (%s election)", moved, "preferred" if preferred else "unclean"
            )
            await self._refresh_quietly()
        return elected

    # -- the controller step and its timing --------------------------------------------------------------------

    def _registered_again(self) -> None:
        """The lease was lost and this node registered again: a step (which balances) and a read follow."""
        self._step_due = True
        self._wake.set()

    async def _controller_step(self) -> None:
        """Expire the nodes whose lease ran out and move the partitions that must move, in one transaction; the
        first step to succeed after this node registered also balances the groups (a node joining takes its
        share)."""
        registration = self._lease.registrations
        async with locked(self._pool, self._session_s) as conn:
            await controller.step(conn, self.node_id, balance=registration != self._balanced)
        self._balanced = registration

    async def _check_leases(self) -> None:
        """At the time another node's lease should run out: run a step if one did."""
        async with self._pool.connection(timeout=self._session_s) as conn:
            nodes = await read_nodes(conn)
        if any(left <= 0 for n, (_, left) in nodes.items() if n != self.node_id):
            await self._controller_step()
        # the refresh that follows every check schedules the next one, from what it reads

    def _schedule_check(self, nodes: Nodes) -> None:
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

    # -- keeping the view (herd.cluster.metadata_view) ---------------------------------------------------------

    async def _metadata_forever(self) -> None:
        """Keep the view: a step and a read whenever something changed or was scheduled, and every session
        timeout anyway."""
        trouble = Trouble(f"reading the cluster metadata on node {self.node_id}")
        while True:
            if not await wait(self._wake, self._session_s):
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

    def _heard(self, kind: str | None) -> None:
        """A notification from another node (`kind`), or a new LISTEN connection (None: a read, in case one was
        missed): a node coming or going starts a step, any other change a read."""
        self._step_due |= kind == "nodes"
        self._wake.set()

    def _viewed(self, nodes: Nodes) -> None:
        self._schedule_check(nodes)

    def _missed(self) -> None:
        self._wake.set()


async def read_end_offsets(cluster: SharedCluster) -> dict[tuple[str, int], int] | None:
    """(topic, partition) -> the log end offset committed to PostgreSQL (the high watermark a fetch sees) of every
    partition of a topic, in one query: consumer lag of the partitions other nodes lead (herd.server.lag). None
    when the database cannot be read (logged at DEBUG: a scrape must not fill the log while the database is down)."""
    try:
        async with cluster._pool.connection(timeout=cluster._session_s) as conn:
            cursor = await conn.execute(q.END_OFFSETS)
            return {(r[0], r[1]): int(r[2]) for r in await cursor.fetchall()}
    except DB_ERRORS as e:
        log.debug("could not read the partitions' end offsets: %s", describe(e, cluster._where))
        return None
