"""A group's coordinator failing over between three herd nodes, seen from the groups: a coordinator paused with
SIGSTOP past its lease is fenced when it wakes (nothing it writes lands, its parked answers go out as
NOT_COORDINATOR) while its groups carry on at the node that took its `__consumer_offsets` partitions over;
static members (KIP-345) and a KIP-469 pre-registration live through a kill -9 of their coordinator without a
rebalance; herd's own consumer and `herd groups ...` follow the coordinator to its new node.

One cluster serves the whole module (one database, `pg_url`); a test that kills a node leaves it dead and the
next test starts it again (the `nodes` fixture), its lease having run out and its partitions having moved.
Leases are short (2 s), so a coordinator moves within about three seconds; consumers keep a 10 s session.

A group's coordinator is found as a client finds it, with FindCoordinator against a live node; groups are named
so that the node a test stops coordinates them (`groups_on`). Where a test must control exactly what reaches a
stopped node it speaks the protocol itself (`RawMember`, over tests/rawkafka.py): requests parked on the node
before it stops, and requests that wait in its socket while it is stopped. The generation of a group is read on
the wire: a Heartbeat with a member's id answers NONE for the current generation only (ILLEGAL_GENERATION for any
other, changing nothing).
"""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from groupmembers import wait_for
from kio.schema.errors import ErrorCode
from pgcluster import create_topic_on, wait_offsets_spread
from rawkafka import RawClient

from herd.client.consumer_protocol import Subscription, encode_subscription
from herd.coordinator import coordinator_partition
from herd.protocol.messages import request_class
from herd.protocol.values import make
from herd.testing import HerdCluster

pytestmark = pytest.mark.timeout(240)

NODES = 3
OFFSETS_PARTITIONS = 6
OFFSETS_TOPIC = "__consumer_offsets"
OVERRIDES = {
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "group.min.session.timeout.ms": "1000",
}
SESSION_MS = 10_000  # every member's session timeout
REBALANCE_MS = 60_000  # every member's rebalance timeout: no join phase or KIP-469 hold ends by itself in a test

JOIN, HEARTBEAT, SYNC, DESCRIBE, COMMIT, FETCH, FIND, METADATA = 11, 12, 14, 15, 8, 9, 10, 3
VERSIONS = {JOIN: 5, HEARTBEAT: 3, SYNC: 3, DESCRIBE: 5, COMMIT: 7, FETCH: 6, FIND: 4, METADATA: 12}
NONE, NOT_COORDINATOR = ErrorCode.none, ErrorCode.not_coordinator
RAW_TOPIC = "fenced"  # what the raw members subscribe to and commit offsets of
SUBSCRIPTION = encode_subscription(Subscription((RAW_TOPIC,)))


# -- the protocol, raw ------------------------------------------------------------------------------------------


def request(api: int, /, **fields: Any) -> Any:
    """The kio request of `api` at the version this module speaks (VERSIONS); fields it lacks are dropped."""
    return make(request_class(api, VERSIONS[api]), fields)


def part(api: int, class_name: str, /, **fields: Any) -> Any:
    """The nested class `class_name` of that request."""
    return make(getattr(sys.modules[request_class(api, VERSIONS[api]).__module__], class_name), fields)


class Raw(RawClient):
    """A raw connection to one node. `send` without reading lets a request park on the coordinator or wait in a
    stopped node's socket; `receive` reads the answers in the order the requests went."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        super().__init__(port, timeout=timeout)
        self._waiting: list[int] = []

    def call(self, api: int, **fields: Any) -> Any:
        self.send(api, **fields)
        return self.receive()

    def send(self, api: int, **fields: Any) -> None:
        self.send_raw(self.encode(api, VERSIONS[api], request(api, **fields)))
        self._waiting.append(api)

    def receive(self) -> Any:
        api = self._waiting.pop(0)
        return self.read_response(api, VERSIONS[api])

    def answered(self, timeout: float) -> bool:
        """True once an answer has begun to arrive (within `timeout` seconds)."""
        return bool(select.select([self.sock], [], [], timeout)[0])


class RawMember:
    """One member of a group (protocol type "consumer", protocol "range", subscribed to RAW_TOPIC; any bytes as
    assignments) on its own connection to a node: its member id and generation as the coordinator gave them."""

    def __init__(self, port: int, group: str, instance_id: str | None = None) -> None:
        self.group, self.instance_id = group, instance_id
        self.raw = Raw(port)
        self.member_id = ""
        self.generation = -1

    def at(self, port: int) -> RawMember:
        """The same member (member id, generation) on a new connection to the node at `port`; this one's
        connection stays, with whatever it still waits for."""
        other = RawMember(port, self.group, self.instance_id)
        other.member_id, other.generation = self.member_id, self.generation
        return other

    def send_join(self) -> None:
        self.raw.send(
            JOIN,
            group_id=self.group,
            session_timeout=SESSION_MS,
            rebalance_timeout=REBALANCE_MS,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocols=(part(JOIN, "JoinGroupRequestProtocol", name="range", metadata=SUBSCRIPTION),),
        )

    def start_join(self) -> Any | None:
        """Join up to the JoinGroup the coordinator may park. A dynamic member without a member id is first
        answered MEMBER_ID_REQUIRED (KIP-394), never parked: that answer is awaited, and the id it hands out
        taken. Returns the answer when the coordinator answers the last JoinGroup within half a second, None when
        it does not (`join_answer` reads it later)."""
        while True:
            self.send_join()
            if not (self.member_id == "" and self.instance_id is None) and not self.raw.answered(0.5):
                return None
            answer = self._joined(self.raw.receive())
            if answer.error_code != ErrorCode.member_id_required:
                return answer

    def join_answer(self) -> Any:
        """The answer to the JoinGroup `start_join` (or `send_join`) left waiting."""
        return self._joined(self.raw.receive())

    def _joined(self, answer: Any) -> Any:
        if answer.error_code == ErrorCode.member_id_required:
            self.member_id = answer.member_id
        elif answer.error_code == NONE:
            self.member_id, self.generation = answer.member_id, answer.generation_id
        return answer

    def join(self) -> Any:
        answer = self.start_join() or self.join_answer()
        assert answer.error_code == NONE, answer
        return answer

    def send_sync(self, assignments: dict[str, bytes] | None = None) -> None:
        self.raw.send(
            SYNC,
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            assignments=tuple(
                part(SYNC, "SyncGroupRequestAssignment", member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ),
        )

    def sync(self, assignments: dict[str, bytes] | None = None) -> Any:
        self.send_sync(assignments)
        answer = self.raw.receive()
        assert answer.error_code == NONE, answer
        return answer

    def heartbeat(self, generation: int | None = None) -> ErrorCode:
        return self.raw.call(
            HEARTBEAT,
            group_id=self.group,
            member_id=self.member_id,
            generation_id=self.generation if generation is None else generation,
            group_instance_id=self.instance_id,
        ).error_code

    def commit_fields(self, topic: str, offsets: dict[int, int]) -> dict[str, Any]:
        return dict(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            topics=(
                part(
                    COMMIT,
                    "OffsetCommitRequestTopic",
                    name=topic,
                    partitions=tuple(
                        part(
                            COMMIT,
                            "OffsetCommitRequestPartition",
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p, o in offsets.items()
                    ),
                ),
            ),
        )

    def commit(self, topic: str, offsets: dict[int, int]) -> ErrorCode:
        return commit_error(self.raw.call(COMMIT, **self.commit_fields(topic, offsets)))


def commit_error(answer: Any) -> ErrorCode:
    """The one error of an OffsetCommit answer (NONE when every partition was committed)."""
    codes = {p.error_code for t in answer.topics for p in t.partitions}
    assert len(codes) == 1, answer
    return codes.pop()


def committed(port: int, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as its coordinator at `port` answers OffsetFetch."""
    with Raw(port) as raw:
        answer = raw.call(
            FETCH,
            group_id=group,
            topics=(part(FETCH, "OffsetFetchRequestTopic", name=topic, partition_indexes=tuple(range(partitions))),),
        )
    assert answer.error_code == NONE, answer
    return {p.partition_index: p.committed_offset for t in answer.topics for p in t.partitions}


def described(port: int, group: str) -> tuple[str, dict[str, tuple[str | None, bytes]]]:
    """(state, member id -> (group.instance.id, assignment)) from DescribeGroups at `port`."""
    with Raw(port) as raw:
        (g,) = raw.call(DESCRIBE, groups=(group,), include_authorized_operations=False).groups
    assert g.error_code == NONE, g
    return g.group_state, {m.member_id: (m.group_instance_id, m.member_assignment) for m in g.members}


def generation(port: int, group: str) -> int:
    """The current generation of a Stable group, read with heartbeats (see the module docstring)."""
    with Raw(port) as raw:
        (g,) = raw.call(DESCRIBE, groups=(group,), include_authorized_operations=False).groups
        assert g.group_state == "Stable" and g.members, g
        member = g.members[0]
        for candidate in range(1, 100):
            answer = raw.call(
                HEARTBEAT,
                group_id=group,
                generation_id=candidate,
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
            )
            if answer.error_code == NONE:
                return candidate
    raise AssertionError(f"no generation of {group} below 100 answered")


# -- the cluster ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdCluster]:
    cluster = HerdCluster(
        tmp_path_factory.mktemp("failover-static"), overrides=OVERRIDES, database_url=pg_url, faults=False
    )
    try:
        cluster.start(nodes=NODES, balanced=False)
        settle(cluster)
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def nodes(cluster: HerdCluster) -> HerdCluster:
    """The module's cluster with every node running (one a test killed is started again, one a failed test left
    stopped is continued) and the offsets partitions spread over them and loaded."""
    for i in range(NODES):
        if not cluster.running(i):
            cluster.restart(i)
        elif cluster.paused(i):
            cluster.resume(i)
    settle(cluster)
    return cluster


def live(cluster: HerdCluster, avoid: tuple[int, ...] = ()) -> list[int]:
    """The nodes that run and are not stopped (nor in `avoid`)."""
    return [i for i in range(len(cluster.nodes)) if cluster.running(i) and not cluster.paused(i) and i not in avoid]


def port(cluster: HerdCluster, node: int) -> int:
    return cluster.nodes[node].port


def offsets_leaders(port_: int) -> dict[int, int]:
    """__consumer_offsets partition -> leader, as the node at `port_` sees them."""
    with Raw(port_) as raw:
        answer = raw.call(
            METADATA,
            topics=(part(METADATA, "MetadataRequestTopic", name=OFFSETS_TOPIC, topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    return {p.partition_index: p.leader_id for t in answer.topics for p in t.partitions}


def settle(cluster: HerdCluster) -> None:
    """Wait until the offsets partitions are spread over the nodes, two on each, and loaded."""
    wait_offsets_spread(cluster, OFFSETS_PARTITIONS)


def coordinators(cluster: HerdCluster, groups: list[str], avoid: tuple[int, ...] = ()) -> dict[str, int]:
    """group -> coordinator node (-1 when none) as FindCoordinator answers on a live node."""
    with Raw(port(cluster, live(cluster, avoid)[0])) as raw:
        answer = raw.call(FIND, key_type=0, coordinator_keys=tuple(groups))
    return {c.key: c.node_id if c.error_code == NONE else -1 for c in answer.coordinators}


def groups_on(cluster: HerdCluster, node: int, *prefixes: str, partition: int | None = None) -> list[str]:
    """For each prefix a group id `prefix-N` that `node` coordinates (stored in offsets partition `partition`,
    when given)."""
    candidates = {
        prefix: [
            name
            for name in (f"{prefix}-{i}" for i in range(200))
            if partition in (None, coordinator_partition(name, OFFSETS_PARTITIONS))
        ][:40]
        for prefix in prefixes
    }
    found = coordinators(cluster, [name for names in candidates.values() for name in names])
    return [next(name for name in candidates[prefix] if found[name] == node) for prefix in prefixes]


def wait_coordinated(cluster: HerdCluster, groups: list[str], not_by: int | None = None) -> dict[str, int]:
    """Wait until a node other than `not_by` coordinates each group and has loaded it; group -> that node."""
    avoid = () if not_by is None else (not_by,)

    def loaded() -> dict[str, int] | None:
        found = coordinators(cluster, groups, avoid)
        if any(node in (not_by, -1) for node in found.values()):
            return None
        for group, node in found.items():
            with Raw(port(cluster, node)) as raw:
                (g,) = raw.call(DESCRIBE, groups=(group,), include_authorized_operations=False).groups
            if g.error_code != NONE:  # COORDINATOR_LOAD_IN_PROGRESS while it replays the partition
                return None
        return found

    return wait_for(loaded, 30, f"a coordinator other than {not_by} for {groups}", 0.05, (OSError,))


def end_offsets(cluster: HerdCluster, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's log end offset (the high watermark), read with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "end-offsets"})
    try:
        return wait_for(
            lambda: {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
            },
            30,
            f"the end offsets of {topic}",
            0.1,
            (KafkaException,),
        )
    finally:
        consumer.close()


def stored_batches(url: str, partitions: set[int]) -> set[tuple[int, int, int]]:
    """(partition, base offset, leader epoch) of every stored batch of these offsets partitions."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT p.partition, b.base_offset, b.leader_epoch FROM herd_batches b JOIN herd_partitions p "
            "ON p.pid = b.pid JOIN herd_topics t ON t.topic_id = p.topic_id WHERE t.name = %s",
            (OFFSETS_TOPIC,),
        )
        return {row for row in rows.fetchall() if row[0] in partitions}


def leader_epochs(url: str, partitions: set[int]) -> dict[int, tuple[int, int]]:
    """offsets partition -> (leader, leader epoch) as the database holds them."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT p.partition, p.leader, p.leader_epoch FROM herd_partitions p JOIN herd_topics t "
            "ON t.topic_id = p.topic_id WHERE t.name = %s",
            (OFFSETS_TOPIC,),
        ).fetchall()
    return {partition: (leader, epoch) for partition, leader, epoch in rows if partition in partitions}


class RowLock:
    """A transaction of the test's own holding the row of one offsets partition (FOR UPDATE): the leader's next
    commit to that partition waits for it in PostgreSQL, and whatever the leader is given meanwhile stays
    pending behind that commit (one transaction in flight per partition). `release` commits."""

    def __init__(self, url: str, partition: int) -> None:
        self.url = url
        self.conn = psycopg.connect(url)
        self.conn.execute(
            "SELECT 1 FROM herd_partitions p JOIN herd_topics t ON t.topic_id = p.topic_id "
            "WHERE t.name = %s AND p.partition = %s FOR UPDATE OF p",
            (OFFSETS_TOPIC, partition),
        )
        self.xid = self.conn.execute("SELECT pg_current_xact_id()::xid::text").fetchone()[0]

    def wait_for_commit(self) -> None:
        """Wait until a leader's commit (herd.log.postgres.sql.COMMIT) waits for the row: for this transaction."""

        def waiting() -> bool:
            with psycopg.connect(self.url) as conn:
                return (
                    conn.execute(
                        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted "
                        "AND l.locktype = 'transactionid' AND l.transactionid::text = %s "
                        "AND a.query LIKE '%%INSERT INTO herd_batches%%'",
                        (self.xid,),
                    ).fetchone()[0]
                    > 0
                )

        wait_for(waiting, 30, "a commit waiting for the partition's row", 0.02)

    def release(self) -> None:
        self.conn.commit()
        self.conn.close()


# -- real clients -----------------------------------------------------------------------------------------------


class Feeding(threading.Thread):
    """A confluent-kafka producer writing numbered values round-robin to the partitions of `topic` until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, per_second: int = 200) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.topic, self.partitions, self.per_second = topic, partitions, per_second
        self.sent = 0
        self._halt = threading.Event()

    def __enter__(self) -> Feeding:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self.join(90)

    def run(self) -> None:
        while not self._halt.is_set():
            for _ in range(self.per_second // 20):
                self.producer.produce(self.topic, b"%08d" % self.sent, partition=self.sent % self.partitions)
                self.sent += 1
            self.producer.poll(0.05)
        self.producer.flush(60)


class Member(threading.Thread):
    """A confluent-kafka consumer in a thread, subscribed to `topic` in `group` (static with `instance_id`):
    commits synchronously after each batch it consumes and records what the tests look at: its assignments,
    the offsets whose commit was acknowledged, and librdkafka's statistics (the coordinator connection and the
    heartbeats sent on it, the rebalances gone through)."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str, instance_id: str | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "max.poll.interval.ms": REBALANCE_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
            "fetch.wait.max.ms": 100,
            "statistics.interval.ms": 250,
            "stats_cb": self._stats,
        }
        if instance_id is not None:
            self.config["group.instance.id"] = instance_id
        self.topic = topic
        self.assigned: frozenset[int] = frozenset()
        self.events: list[tuple[str, frozenset[int]]] = []
        self.acked: dict[int, int] = {}
        self.stats: dict[str, Any] = {}
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            consumer = Consumer(self.config)

            def on_assign(c: Any, partitions: list[TopicPartition]) -> None:
                self.assigned = frozenset(tp.partition for tp in partitions)
                self.events.append(("assigned", self.assigned))

            def on_revoke(c: Any, partitions: list[TopicPartition]) -> None:
                self.events.append(("revoked", frozenset(tp.partition for tp in partitions)))
                self.assigned = frozenset()

            consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
            try:
                while not self._halt.is_set():
                    if [m for m in consumer.consume(500, timeout=0.1) if m.error() is None]:
                        self._commit(consumer)
            finally:
                consumer.close()
        except BaseException as e:  # noqa: BLE001 - surfaced by `stop`
            self.error = e

    def _commit(self, consumer: Consumer) -> None:
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException:  # refused (NOT_COORDINATOR while the coordinator moves, ...): not acknowledged
            return
        for tp in done or ():
            if tp.error is None and tp.offset >= 0:
                self.acked[tp.partition] = max(self.acked.get(tp.partition, 0), tp.offset)

    def _stats(self, text: str) -> None:
        stats = json.loads(text)
        coordinator = stats["brokers"].get("GroupCoordinator", {})
        self.stats = {
            "rebalances": stats.get("cgrp", {}).get("rebalance_cnt"),
            "coordinator": coordinator.get("nodename"),
            "coordinator_state": coordinator.get("state"),
            "heartbeats": coordinator.get("req", {}).get("Heartbeat", 0),
        }

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise AssertionError(f"{self.name} failed: {self.error!r}") from self.error


def start_members(*members: Member) -> list[Member]:
    for m in members:
        m.start()
    return list(members)


def stop_members(members: list[Member]) -> None:
    for m in members:
        m._halt.set()
    for m in members:
        m.stop()


def acked(members: list[Member]) -> dict[int, int]:
    """partition -> the highest offset whose commit any member saw acknowledged."""
    out: dict[int, int] = {}
    for m in members:
        for p, o in list(m.acked.items()):
            out[p] = max(out.get(p, 0), o)
    return out


def caught_up(members: list[Member], ends: dict[int, int]) -> bool:
    """The members consumed every partition up to `ends` and had that committed."""
    got = acked(members)
    return all(got.get(p, 0) >= end for p, end in ends.items())


def members_settled(members: list[Member], partitions: int, quiet_s: float = 1.0) -> None:
    """Wait until every partition is held by exactly one member and no assignment changed for `quiet_s`."""
    state: list[Any] = [None, time.monotonic()]

    def quiet() -> bool:
        now = ([sorted(m.assigned) for m in members], [len(m.events) for m in members])
        held = sorted(p for m in members for p in m.assigned)
        if now != state[0]:
            state[:] = [now, time.monotonic()]
            return False
        return held == list(range(partitions)) and time.monotonic() - state[1] >= quiet_s

    wait_for(quiet, 60, "the members settling", 0.05)


def heartbeating_to(members: list[Member], address: str) -> None:
    """Wait until each member's coordinator connection goes to `address` and two more heartbeats went out on it."""
    wait_for(
        lambda: all(
            m.stats.get("coordinator") == address and m.stats.get("coordinator_state") == "UP" for m in members
        ),
        30,
        f"the members' coordinator being {address}",
        0.05,
    )
    sent = [m.stats["heartbeats"] for m in members]
    wait_for(
        lambda: all(m.stats["heartbeats"] >= n + 2 for m, n in zip(members, sent)),
        30,
        "heartbeats to the new coordinator",
        0.05,
    )


def herd_cli(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    """`herd ...` as a user runs it, in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "herd", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0 and "Traceback" not in result.stderr, (result.args, result.stdout, result.stderr)
    return result.stdout


class HerdConsumers(threading.Thread):
    """Consumers of herd's own client (herd.client.GroupConsumer) in one group, on an event loop of their own:
    each fetches and commits its positions after every batch (`acked`: what was committed, `commit_errors`: the
    commits refused)."""

    def __init__(self, bootstrap: str, topic: str, group: str, n: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.group, self.n = bootstrap, topic, group, n
        self.consumers: list[Any] = []
        self.acked: dict[int, int] = {}
        self.commit_errors: list[str] = []
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # noqa: BLE001 - surfaced by `stop`
            self.error = e

    async def _main(self) -> None:
        from herd.client import GroupConsumer

        self.consumers = [
            GroupConsumer(
                self.bootstrap,
                self.group,
                [self.topic],
                client_id=f"herd-{i}",
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=500,
                rebalance_timeout_ms=REBALANCE_MS,
                auto_offset_reset="earliest",
            )
            for i in range(self.n)
        ]
        try:
            for consumer in self.consumers:
                await consumer.start()
            await asyncio.gather(*(self._consume(c) for c in self.consumers))
        finally:
            for consumer in self.consumers:
                await consumer.close()

    async def _consume(self, consumer: Any) -> None:
        from herd.client.errors import KafkaError

        while not self._halt.is_set():
            batches = await consumer.getmany(timeout_ms=200)
            if not batches:
                await asyncio.sleep(0.02)
                continue
            positions = dict(consumer.positions)
            try:
                await consumer.commit(positions)
            except KafkaError as e:
                self.commit_errors.append(e.code.name)
                continue
            for tp, offset in positions.items():
                self.acked[tp.partition] = max(self.acked.get(tp.partition, 0), offset)

    def caught_up(self, ends: dict[int, int]) -> bool:
        """Consumed every partition up to `ends`, and had that committed."""
        return all(self.acked.get(p, 0) >= end for p, end in ends.items())

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        assert not self.is_alive(), "the herd consumers did not stop"
        if self.error is not None:
            raise AssertionError(f"the herd consumers failed: {self.error!r}") from self.error


# -- the tests --------------------------------------------------------------------------------------------------


def test_a_coordinator_paused_past_its_lease_is_fenced_while_its_groups_carry_on_elsewhere(
    nodes: HerdCluster, pg_url: str
) -> None:
    """SIGSTOP node 2, which coordinates five groups, until they moved; then SIGCONT it. An offset commit it was
    storing when it stopped is stored, loaded by the new coordinator and acknowledged when the node wakes; what
    it held pending behind that commit (an offset commit, a static member's replacement), what it had parked (a
    JoinGroup, a follower's SyncGroup) and what waited in its socket (the leader's SyncGroup, an offset commit)
    is answered NOT_COORDINATOR, and none of it is stored (no batch of its epoch lands after the move) or visible
    at the new coordinator. Meanwhile every group carries on there: the raw members commit, heartbeat and
    rebalance; confluent-kafka consumers and a consumer of herd's own client (whose requests to the stopped node
    wait until it wakes: a commit among them is answered NOT_COORDINATOR then, and retried at the new
    coordinator) catch up, and no commit they saw acknowledged is lost."""
    cluster, victim = nodes, 2
    at = port(cluster, victim)
    # the two offsets partitions node 2 leads: one for the groups whose writes the test holds up, whose row it
    # locks, and one for the others, which keep writing meanwhile
    held, other = sorted(p for p, leader in offsets_leaders(at).items() if leader == victim)
    commit_g, static_g = groups_on(cluster, victim, "fenced-commits", "fenced-static", partition=held)
    join_g, sync_g, real_g, herd_g = groups_on(
        cluster, victim, "fenced-join", "fenced-sync", "fenced-real", "fenced-herd", partition=other
    )
    groups = [commit_g, join_g, sync_g, static_g, real_g, herd_g]
    topic, partitions = RAW_TOPIC, 4
    create_topic_on(cluster, topic, partitions)
    offsets_partitions = {coordinator_partition(g, OFFSETS_PARTITIONS) for g in groups}

    with Feeding(cluster.bootstrap, topic, partitions):
        real = start_members(*(Member(cluster.bootstrap, topic, real_g, f"fenced-real-{i}") for i in range(2)))
        herd = HerdConsumers(cluster.bootstrap, topic, herd_g, 1)
        herd.start()
        try:
            members_settled(real, partitions)
            wait_for(lambda: len(acked(real)) == len(herd.acked) == partitions, 30, "the consumers committing", 0.05)

            # parked on the coordinator when it stops: a JoinGroup waiting for a member to rejoin...
            join_1 = RawMember(at, join_g)
            join_1.join()
            join_1.sync({join_1.member_id: b"join-1"})
            join_2 = RawMember(at, join_g)
            assert join_2.start_join() is None
            assert described(at, join_g)[0] == "PreparingRebalance"
            # ...and a follower's SyncGroup waiting for the leader's assignment
            sync_1 = RawMember(at, sync_g)
            sync_1.join()
            sync_1.sync({sync_1.member_id: b"generation-1"})
            sync_2 = RawMember(at, sync_g)
            assert sync_2.start_join() is None
            sync_1.send_join()
            answers = [sync_1.join_answer(), sync_2.join_answer()]
            assert [(a.error_code, a.generation_id) for a in answers] == [(NONE, 2), (NONE, 2)]
            leader, follower = (sync_1, sync_2) if answers[0].leader == sync_1.member_id else (sync_2, sync_1)
            follower.send_sync()
            assert not follower.raw.answered(0.3)
            # a static member, and a member that commits
            static = RawMember(at, static_g, "fenced-static")
            static.join()
            static.sync({static.member_id: b"static"})
            committer = RawMember(at, commit_g)
            committer.join()
            committer.sync({committer.member_id: b"commits"})
            assert committer.commit(topic, {0: 1}) == NONE
            epochs = leader_epochs(pg_url, offsets_partitions)
            assert {leader for leader, _ in epochs.values()} == {victim}

            # being stored when the node stops: a commit whose statement waits for the partition's row...
            lock = RowLock(pg_url, held)
            committer.raw.send(COMMIT, **committer.commit_fields(topic, {0: 2}))
            lock.wait_for_commit()
            # ...and pending behind it: another commit and a static member taking its instance over
            pending = committer.at(at)
            pending.raw.send(COMMIT, **pending.commit_fields(topic, {0: 3}))
            replacing = RawMember(at, static_g, "fenced-static")
            replacing.send_join()
            time.sleep(0.3)  # read and applied by the node, their records staged behind the commit

            cluster.pause(victim)
            lock.release()  # the commit's statement runs now, before the partition moves
            moved = wait_coordinated(cluster, groups, not_by=victim)
            taken_over = leader_epochs(pg_url, offsets_partitions)
            assert all(taken_over[p][1] > epochs[p][1] for p in offsets_partitions), (epochs, taken_over)
            stored = stored_batches(pg_url, offsets_partitions)
            new = {g: port(cluster, node) for g, node in moved.items()}
            assert committed(new[commit_g], commit_g, topic, 2) == {0: 2, 1: -1}

            # waiting in the stopped node's socket: the leader's assignment of generation 2 (a group record to
            # write) and an offset commit
            leader.send_sync({leader.member_id: b"generation-2", follower.member_id: b"generation-2"})
            late = committer.at(at)
            late.raw.send(COMMIT, **late.commit_fields(topic, {1: 777_777}))

            # meanwhile every group carries on at its new coordinator, as it was when the node stopped
            moving_on = committer.at(new[commit_g])
            assert moving_on.heartbeat() == NONE
            assert moving_on.commit(topic, {0: 4}) == NONE

            assert described(new[join_g], join_g) == ("Stable", {join_1.member_id: (None, b"join-1")})
            rejoining = [join_1.at(new[join_g]), RawMember(new[join_g], join_g)]  # join_2 joins afresh...
            assert rejoining[0].heartbeat() == NONE
            assert rejoining[1].start_join() is None  # ...and the group waits for join_1 to rejoin
            rejoining[0].send_join()
            assert [(m.join_answer().error_code, m.generation) for m in rejoining] == [(NONE, 2), (NONE, 2)]

            assert described(new[sync_g], sync_g) == ("Stable", {sync_1.member_id: (None, b"generation-1")})
            rejoining = [sync_1.at(new[sync_g]), RawMember(new[sync_g], sync_g)]
            assert rejoining[0].heartbeat(1) == NONE and rejoining[0].heartbeat(2) == ErrorCode.illegal_generation
            assert rejoining[1].start_join() is None
            rejoining[0].send_join()
            assert [(m.join_answer().error_code, m.generation) for m in rejoining] == [(NONE, 2), (NONE, 2)]

            assert described(new[static_g], static_g) == ("Stable", {static.member_id: ("fenced-static", b"static")})
            assert static.at(new[static_g]).heartbeat() == NONE
            taking_over = RawMember(new[static_g], static_g, "fenced-static")
            assert taking_over.join().generation_id == 1  # takes the instance over, without a rebalance (KIP-345)
            assert static.at(new[static_g]).heartbeat() == ErrorCode.fenced_instance_id

            cluster.resume(victim)
            assert commit_error(committer.raw.receive()) == NONE  # stored before the move: acknowledged
            assert commit_error(pending.raw.receive()) == NOT_COORDINATOR
            assert replacing.join_answer().error_code == NOT_COORDINATOR
            assert join_2.join_answer().error_code == NOT_COORDINATOR
            assert follower.raw.receive().error_code == NOT_COORDINATOR
            assert leader.raw.receive().error_code == NOT_COORDINATOR
            assert commit_error(late.raw.receive()) == NOT_COORDINATOR

            ends = end_offsets(cluster, topic, partitions)
            wait_for(lambda: caught_up(real, ends) and herd.caught_up(ends), 60, "the consumers catching up", 0.05)
            assert herd.error is None and not herd.commit_errors, (herd.error, herd.commit_errors)
        finally:
            stop_members(real)
            herd.stop()

    settle(cluster)  # the node woke, registered again and took its share back: whatever it wrote is in by now
    landed = {row for row in stored_batches(pg_url, offsets_partitions) - stored if row[2] < taken_over[row[0]][1]}
    assert not landed, f"node {victim} stored batches after it lost its partitions: {sorted(landed)}"
    now = {g: port(cluster, node) for g, node in wait_coordinated(cluster, groups).items()}
    assert committed(now[commit_g], commit_g, topic, 2) == {0: 4, 1: -1}
    assert described(now[static_g], static_g) == ("Stable", {taking_over.member_id: ("fenced-static", b"static")})
    for group, offsets in ((real_g, acked(real)), (herd_g, herd.acked)):
        final = committed(now[group], group, topic, partitions)
        assert all(final[p] >= offset for p, offset in offsets.items()), (group, final, offsets)
    assert "Traceback" not in cluster.log(victim)


def test_static_members_keep_their_generation_and_assignments_through_a_kill_9_of_their_coordinator(
    nodes: HerdCluster,
) -> None:
    """Three static confluent-kafka consumers; kill -9 their coordinator. Each heartbeats to the new one, where
    the group is the same (members, assignments, generation), nobody rebalances, and consumption goes on."""
    cluster, victim = nodes, 1
    (group,) = groups_on(cluster, victim, "static-fleet")
    topic, partitions = "static-fleet", 6
    create_topic_on(cluster, topic, partitions)
    with Feeding(cluster.bootstrap, topic, partitions):
        members = start_members(
            *(Member(cluster.bootstrap, topic, group, f"static-{i}", instance_id=f"static-{i}") for i in range(3))
        )
        try:
            members_settled(members, partitions)
            wait_for(
                lambda: len(acked(members)) == partitions and all(m.stats for m in members),
                30,
                "the members committing",
                0.05,
            )
            at = port(cluster, victim)
            before = described(at, group), generation(at, group)
            rebalances = [(m.stats["rebalances"], list(m.events)) for m in members]

            cluster.kill(victim)
            new = wait_coordinated(cluster, [group], not_by=victim)[group]
            heartbeating_to(members, cluster.address(new))
            ends = end_offsets(cluster, topic, partitions)
            wait_for(lambda: caught_up(members, ends), 60, "consuming on, committed at the new coordinator", 0.05)
            assert (described(port(cluster, new), group), generation(port(cluster, new), group)) == before
            assert [(m.stats["rebalances"], list(m.events)) for m in members] == rebalances
        finally:
            stop_members(members)


def test_a_pre_registration_made_before_a_kill_9_of_the_coordinator_still_holds_the_group_after_it(
    nodes: HerdCluster,
) -> None:
    """KIP-469: a static consumer holds four partitions; `herd groups add-members` pre-registers two more
    instances and the first of them joins, held in the group without partitions. After a kill -9 of the
    coordinator the new one holds the group the same way (same members and generation, the third instance still
    awaited); when the third joins, the group rebalances once over all three."""
    cluster, victim = nodes, 2
    (group,) = groups_on(cluster, victim, "pre-registered")
    topic, partitions = "pre-registered", 4
    create_topic_on(cluster, topic, partitions)
    members = start_members(Member(cluster.bootstrap, topic, group, "pre-a", instance_id="pre-a"))
    try:
        members_settled(members, partitions)
        out = ok(
            herd_cli(
                "groups", "add-members", "--group", group, "--instance-ids", "pre-b,pre-c", bootstrap=cluster.bootstrap
            )
        )
        assert out.endswith("waits for 2 pre-registered members: pre-b, pre-c.\n"), out
        members += start_members(Member(cluster.bootstrap, topic, group, "pre-b", instance_id="pre-b"))
        at = port(cluster, victim)
        wait_for(lambda: members[1].events and len(described(at, group)[1]) == 2, 30, "pre-b held", 0.05)
        held = described(at, group), generation(at, group)
        assert held[0][0] == "Stable"
        assert [m.assigned for m in members] == [frozenset(range(partitions)), frozenset()]
        events = [list(m.events) for m in members]

        cluster.kill(victim)
        new = wait_coordinated(cluster, [group], not_by=victim)[group]
        heartbeating_to(members, cluster.address(new))
        assert (described(port(cluster, new), group), generation(port(cluster, new), group)) == held
        listed = json.loads(
            ok(
                herd_cli(
                    "groups", "describe", "--group", group, "--members", "--output", "json", bootstrap=cluster.bootstrap
                )
            )
        )
        assert sorted((m["group_instance_id"], m["joined"], m["partitions"]) for m in listed) == [
            ("pre-a", True, partitions),
            ("pre-b", True, 0),
            ("pre-c", False, None),
        ]
        assert [list(m.events) for m in members] == events

        members += start_members(Member(cluster.bootstrap, topic, group, "pre-c", instance_id="pre-c"))
        members_settled(members, partitions)
        assert generation(port(cluster, new), group) == held[1] + 1
        for m, seen in zip(members, events + [[]]):
            assert [kind for kind, _ in m.events[len(seen) :]].count("assigned") == 1, (m.name, m.events)
        listed = json.loads(
            ok(
                herd_cli(
                    "groups", "describe", "--group", group, "--members", "--output", "json", bootstrap=cluster.bootstrap
                )
            )
        )
        assert sorted((m["group_instance_id"], m["joined"]) for m in listed) == [
            ("pre-a", True),
            ("pre-b", True),
            ("pre-c", True),
        ]
    finally:
        stop_members(members)


def test_herd_client_and_cli_follow_a_kill_9_of_the_coordinator(nodes: HerdCluster) -> None:
    """Two consumers of herd's own client; kill -9 their coordinator. They keep consuming and committing, with
    no rebalance. `herd groups list` and `herd groups describe --state`, started right after the kill with the
    dead node first in their bootstrap list, answer once the group has moved, and name its new coordinator; after
    the move `describe --state` and `describe` (offsets and lag) work as before."""
    cluster, victim = nodes, 0
    (group,) = groups_on(cluster, victim, "herd-client")
    topic, partitions = "herd-client", 4
    create_topic_on(cluster, topic, partitions)
    bootstrap = ",".join([cluster.address(victim)] + [cluster.address(i) for i in range(NODES) if i != victim])
    with Feeding(cluster.bootstrap, topic, partitions):
        consuming = HerdConsumers(cluster.bootstrap, topic, group, 2)
        consuming.start()
        during: list[subprocess.Popen[str]] = []
        try:
            wait_for(
                lambda: len(consuming.acked) == partitions or consuming.error, 60, "the herd consumers committing", 0.05
            )
            assert consuming.error is None, consuming.error
            before = [(c.member.generation_id, list(c.events)) for c in consuming.consumers]

            cluster.kill(victim)
            during += [
                subprocess.Popen(
                    [sys.executable, "-m", "herd", "groups", *args, "--bootstrap-server", bootstrap],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for args in (("list",), ("describe", "--group", group, "--state", "--output", "json"))
            ]
            new = wait_coordinated(cluster, [group], not_by=victim)[group]
            ends = end_offsets(cluster, topic, partitions)
            wait_for(lambda: consuming.caught_up(ends), 60, "consuming on, committed at the new coordinator", 0.05)
            assert consuming.error is None and not consuming.commit_errors, (consuming.error, consuming.commit_errors)
            assert [(c.member.generation_id, list(c.events)) for c in consuming.consumers] == before

            outputs = [p.communicate(timeout=60) for p in during]
            assert [p.returncode for p in during] == [0, 0], outputs
            assert group in outputs[0][0].split()
            (state,) = json.loads(outputs[1][0])
            assert (state["coordinator"]["id"], state["state"], state["members"]) == (new, "Stable", 2)

            out = ok(herd_cli("groups", "describe", "--group", group, "--state", bootstrap=bootstrap))
            assert out.splitlines()[1].split() == [group, f"{cluster.address(new)}", f"({new})", "range", "Stable", "2"]
            assert group in ok(herd_cli("groups", "list", bootstrap=bootstrap)).split()
            rows = [
                line.split()
                for line in ok(herd_cli("groups", "describe", "--group", group, bootstrap=bootstrap)).splitlines()[1:]
            ]
            assert sorted(int(r[2]) for r in rows) == list(range(partitions))
        finally:
            for proc in during:  # the two CLI runs, reaped however the test ends (communicate() did, if it ran)
                if proc.poll() is None:
                    proc.kill()
                proc.communicate()
            consuming.stop()
