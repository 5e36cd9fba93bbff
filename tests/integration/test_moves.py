"""Moves on demand (POST /v1/moves, herd.server.moves): a group's coordinator or a partition's leadership moved
while real clients use it, on three herd nodes over PostgreSQL, and a group's coordinator "moved" on one node.

A move is asked for over a node's HTTP listener (herd.server.http): POST /v1/moves on the cluster, the CLI's
`herd faults move` on the single node.

What a move must keep (as a failover does, docs/cluster.md): a Stable group keeps its generation, members and
assignments, and every commit a client saw succeed; a producer (idempotent, acks=all) loses no acknowledged
record and a consumer reads on. The move stays where it was put (only a joining node's step rebalances): shown
with SharedCluster instances in this process, whose controller steps the test runs itself.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from brokers import BrokerProcess
from groupmembers import (
    ConfluentMember,
    Member,
    Producing,
    committed_offsets,
    create_topic,
    produce,
    settled,
    stop_all,
    wait_for,
)
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.join_group.v9.request import JoinGroupRequestProtocol
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i8
from pgcluster import create_topic_on, stored_generation
from rawkafka import RawClient

from herd.cluster.shared import MoveError, SharedCluster
from herd.cluster.topics import OFFSETS_TOPIC
from herd.coordinator.partition import coordinator_partition
from herd.log.api import LogConfig
from herd.log.postgres.db import open_pool
from herd.log.postgres.schema import migrate
from herd.protocol.messages import request_class
from herd.server.apis._build import make
from herd.testing import HerdCluster
from herd.testing.wait import wait_until

JOIN, SYNC, HEARTBEAT = 11, 14, 12
OFFSETS_PARTITIONS = 6
CLUSTER_OVERRIDES = {
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "num.partitions": "1",
    "herd.http.listener": "127.0.0.1:0",
    "herd.faults.enable": "true",
}
WAIT_S = 30.0  # generous deadlines: the machine is shared
_HTTP_LISTENING = re.compile(r"herd http listening on ([\w.:\[\]-]+):(\d+)")

pytestmark = pytest.mark.timeout(180)


# -- asking for a move ---------------------------------------------------------------------------------------------


def _post(address: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://{address}/v1/moves",
        json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=WAIT_S) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def _http_address(log: str) -> str:
    match = _HTTP_LISTENING.search(log)
    assert match, "the node logged no HTTP listener"
    return f"{match.group(1)}:{match.group(2)}"


def _move(cluster: HerdCluster, **body: Any) -> dict[str, Any]:
    """Ask for a move (through node 0); the answer, which must be 200."""
    status, answer = _post(_http_address(cluster.log(0)), body)
    assert status == 200, answer
    return answer


# -- the cluster and what it says ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def herd(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdCluster]:
    cluster = HerdCluster(
        tmp_path_factory.mktemp("moves"), overrides=CLUSTER_OVERRIDES, database_url=pg_url, faults=False
    )
    try:
        cluster.start(nodes=3, balanced=False)
        yield cluster
    finally:
        cluster.close()


def _coordinator(cluster: HerdCluster, node: int, group: str) -> int:
    with RawClient(cluster.nodes[node].port) as c:
        (found,) = c.request(10, 4, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))).coordinators
    return found.node_id if found.error_code == ErrorCode.none else -1


def _described(cluster: HerdCluster, node: int, group: str) -> tuple[str, dict[str, bytes]] | None:
    """(state, member id -> assignment) from DescribeGroups on `node`; None unless it coordinates the group and
    has loaded it."""
    with RawClient(cluster.nodes[node].port) as c:
        (g,) = c.request(15, 5, DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)).groups
    return (g.group_state, {m.member_id: m.member_assignment for m in g.members}) if g.error_code == 0 else None


def _leaders(cluster: HerdCluster, node: int, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader, leader epoch) as `node` tells clients."""
    request = MetadataRequest(
        topics=(MetadataRequestTopic(name=topic, topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with RawClient(cluster.nodes[node].port) as c:
        (t,) = c.request(3, 12, request).topics
    return {p.partition_index: (p.leader_id, p.leader_epoch) for p in t.partitions}


def _everyone_says(cluster: HerdCluster, topic: str, partition: int, leader: int, epoch: int) -> None:
    wait_for(
        lambda: all(_leaders(cluster, i, topic)[partition] == (leader, epoch) for i in range(3)),
        WAIT_S,
        f"every node naming node {leader} at epoch {epoch} for {topic}-{partition}",
        0.05,
    )


# -- clients that say what was acknowledged ----------------------------------------------------------------------


class _Committing(ConfluentMember):
    """A confluent-kafka member that records every commit the client reported successful, and when."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, session_ms=10_000, **kw)
        self.acked: dict[int, int] = {}
        self.acked_at: list[float] = []

    def _commit(self, consumer: Any) -> None:
        from confluent_kafka import KafkaException

        try:
            result = consumer.commit(asynchronous=False)
        except KafkaException:
            self.commit_failures += 1
            return
        with self._lock:
            for tp in result or []:
                if tp.error is None and tp.offset >= 0:
                    self.acked[tp.partition] = max(self.acked.get(tp.partition, 0), tp.offset)
            self.acked_at.append(time.monotonic())

    def commits_since(self, moment: float) -> int:
        with self._lock:
            return sum(1 for t in self.acked_at if t > moment)


# -- a group's coordinator -------------------------------------------------------------------------------------------


def test_a_group_whose_coordinator_moves_keeps_its_generation_members_and_commits(
    herd: HerdCluster, members: list[Member]
) -> None:
    """Three confluent-kafka members consume and commit while records flow; their coordinator is moved to the
    next node. Every node then names the new one, which has loaded the group: Stable with the same members and
    assignments, the same stored generation, no client saw a rebalance; the members commit again, and every
    commit a client saw succeed is fetched."""
    topic, group = "coordinated", "g-coordinated"
    create_topic_on(herd, topic, 6, WAIT_S)
    started = [_Committing(herd.bootstrap, topic, group, name=f"m{i}") for i in range(3)]
    members += started
    for m in started:
        m.start()
    producing = Producing(herd.bootstrap, topic, 6, poll_s=0.02)
    producing.start()
    try:
        settled(started, 6, timeout=WAIT_S)
        wait_for(lambda: all(m.acked for m in started), WAIT_S, "every member committing")
        old = _coordinator(herd, 0, group)
        before = wait_for(lambda: _described(herd, old, group), WAIT_S, "the group described")
        generation, events = stored_generation(herd, group), [m.event_count() for m in started]

        answer = _move(herd, group=group)
        partition = coordinator_partition(group, OFFSETS_PARTITIONS)
        assert answer["partition"] == [OFFSETS_TOPIC, partition] and answer["from"] == old
        assert answer["to"] == (old + 1) % 3  # the next live node after the leader
        _everyone_says(herd, OFFSETS_TOPIC, partition, answer["to"], answer["leader_epoch"])
        assert all(_coordinator(herd, i, group) == answer["to"] for i in range(3))
        after = wait_for(lambda: _described(herd, answer["to"], group), WAIT_S, "the group loaded by its new node")
        assert after == before and before[0] == "Stable"
        loaded_at = time.monotonic()  # a commit acknowledged from now on was stored by the new coordinator
        wait_for(lambda: all(m.commits_since(loaded_at) for m in started), WAIT_S, "every member committing again")
    finally:
        producing.stop()
    assert _described(herd, answer["to"], group) == before
    assert stored_generation(herd, group) == generation, "a rebalance completed"
    assert [m.event_count() for m in started] == events, "a client saw its partitions revoked or assigned"
    acked: dict[int, int] = {}
    for m in started:
        for p, o in m.acked.items():
            acked[p] = max(acked.get(p, 0), o)
    committed = committed_offsets(herd.bootstrap, group, topic, 6)
    assert all(committed[p] >= o for p, o in acked.items()), (acked, committed)
    assert not producing.errors
    for m in started:
        m.check()


# -- a data partition's leadership -------------------------------------------------------------------------------------


def test_a_partition_moved_under_a_producer_and_a_consumer_loses_no_acknowledged_record(herd: HerdCluster) -> None:
    """An idempotent acks=all producer writes to two partitions and a kafka-python consumer (which validates its
    position with OffsetForLeaderEpoch after a leader change, KIP-320) reads them; partition 0 moves to a node
    named by `to`, with a new leader epoch every node reports. The producer carries on with no error; the
    consumer reads every acknowledged record, each once."""
    from kafka import KafkaConsumer, TopicPartition

    topic = "moving"
    create_topic_on(herd, topic, 2, WAIT_S)
    leader, epoch = _leaders(herd, 0, topic)[0]
    consumer = KafkaConsumer(
        bootstrap_servers=herd.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        metadata_max_age_ms=1000,
        fetch_max_wait_ms=100,
    )
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    seen: list[bytes] = []
    producing = Producing(herd.bootstrap, topic, 2, poll_s=0.02)
    producing.start()

    def read_until(done: Any) -> None:
        def read() -> bool:
            if not done():
                for records in consumer.poll(200).values():
                    seen.extend(r.value for r in records)
            return bool(done())

        wait_until(
            read,
            WAIT_S,
            lambda: f"the reads (read {len(seen)} records, {len(producing.values() - set(seen))} acknowledged missing)",
            interval=0,
        )

    try:
        read_until(lambda: len(seen) >= 50)
        target = (leader + 2) % 3
        answer = _move(herd, topic=topic, partition=0, to=target)
        assert answer == {"partition": [topic, 0], "from": leader, "to": target, "leader_epoch": epoch + 1}
        _everyone_says(herd, topic, 0, target, epoch + 1)
        after = len(producing.acked)
        wait_for(lambda: len(producing.acked) >= after + 100, WAIT_S, "records acknowledged after the move", 0.05)
    finally:
        producing.stop()
    try:
        read_until(lambda: producing.values() <= set(seen))
    finally:
        consumer.close()
    assert not producing.errors
    assert len(seen) == len(set(seen)), "a record was read twice"
    with psycopg.connect(herd.database_url) as conn:
        epochs = {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT b.leader_epoch FROM herd_batches b JOIN herd_partitions p ON p.pid = b.pid "
                "JOIN herd_topics t ON t.topic_id = p.topic_id WHERE t.name = %s AND p.partition = 0",
                (topic,),
            )
        }
    assert epochs == {epoch, epoch + 1}, "records stored by the old leader and by the new one"


# -- the move stays, and what is refused -----------------------------------------------------------------------------


class _Store:
    """A stand-in log store: leadership is what is tested here."""

    def open_partition(self, topic: str, partition: int, config: LogConfig, **row: Any) -> tuple[str, int]:
        return topic, partition

    async def close_partition(self, log: Any, *, flush: bool) -> None:
        pass


async def _member(url: str, node_id: int) -> SharedCluster:
    pool = await open_pool(url, min_size=1, max_size=2)
    async with pool.connection() as conn:
        cluster_id = await migrate(conn, "test")
    cluster = SharedCluster(
        pool,
        _Store(),
        LogConfig(),
        node_id=node_id,
        endpoint=("127.0.0.1", 9000 + node_id),
        session_timeout_ms=3000,
        heartbeat_interval_ms=500,
        cluster_id=cluster_id,
    )
    await cluster.start()
    return cluster


def test_a_move_stays_through_controller_steps_and_bad_moves_are_refused(pg_test_url: str) -> None:
    """Three SharedCluster nodes in this process (a database of the test's own): a move from any node takes
    effect in every view with the next epoch and a new entry in the partition's epoch history; controller steps
    leave it where it is, even where it made the nodes uneven; a node that joins afterwards balances again.
    Unknown topics and partitions, a `to` that is not a live node and a move onto the leader are refused."""

    async def test(nodes: list[SharedCluster]) -> None:
        a, b, c = nodes[:3]
        await a.create_topic("t", 3)
        await b._refresh()
        leaders = {i: b.leader("t", i)[0] for i in range(3)}
        assert sorted(leaders.values()) == [1, 2, 3]
        source = leaders[0]
        target = [n for n in (1, 2, 3) if n != source][0]
        other = [i for i in (1, 2) if leaders[i] == target][0]
        moved = await c.move_partition("t", 0, target)  # asked on a node that neither leads nor gets it
        assert (moved.from_node, moved.to_node, moved.leader_epoch) == (source, target, 1)
        for node in nodes:
            await node._refresh()
            assert node.leader("t", 0) == (target, 1)
        for node in nodes:  # node `target` leads two of three now: no step moves either back
            await node._controller_step()
        await a._refresh()
        assert (a.leader("t", 0), a.leader("t", other)) == ((target, 1), (target, 0))
        async with a._pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT epochs, epoch_starts FROM herd_partitions p JOIN herd_topics t ON t.topic_id = p.topic_id "
                    "WHERE t.name = 't' AND p.partition = 0"
                )
            ).fetchone()
        assert row is not None and list(row[0]) == [0, 1] and len(row[1]) == 2

        for args, status, words in [
            (("nope", 0, None), 404, "unknown topic"),
            (("t", 3, None), 404, "no partition 3"),
            (("t", 0, 7), 400, "not a live node"),
            (("t", 0, target), 409, "already led"),
        ]:
            with pytest.raises(MoveError, match=words) as refused:
                await b.move_partition(*args)
            assert refused.value.status == status

        default = await a.move_partition("t", 0)  # the next live node after the leader, wrapping around
        assert default.to_node == (target % 3) + 1 and default.leader_epoch == 2
        await a.move_partition("t", 0, target)  # uneven again
        nodes.append(await _member(pg_test_url, 4))  # its own start step balances
        await a._refresh()
        assert max(Counter(a.leader("t", i)[0] for i in range(3)).values()) == 1

    async def main() -> None:
        nodes = [await _member(pg_test_url, n) for n in (1, 2, 3)]
        try:
            await asyncio.wait_for(test(nodes), 60)
        finally:
            for node in nodes:
                await node.shutdown(controlled=False)
                await node._pool.close()

    asyncio.run(main())


# -- one node -----------------------------------------------------------------------------------------------------


def test_on_one_node_a_group_move_unloads_and_reloads_its_coordinator_without_a_rebalance(
    tmp_path: Path, members: list[Member]
) -> None:
    """Embedded mode: the group's `__consumer_offsets` partition is unloaded (clients get NOT_COORDINATOR) for
    `unavailable_ms` and loaded again from the log; two confluent-kafka members stay in their generation with the
    same assignments and commit again. A data partition's move is refused: it needs cluster mode."""
    broker = _EmbeddedBroker(tmp_path)
    try:
        topic, group = "solo", "g-solo"
        broker.create_topic(topic, 4)
        started = [_Committing(broker.bootstrap, topic, group, name=f"m{i}") for i in range(2)]
        members += started
        for m in started:
            m.start()
        settled(started, 4, timeout=WAIT_S)
        produce(broker.bootstrap, topic, 4, 40)
        wait_for(lambda: all(m.acked for m in started), WAIT_S, "every member committing")
        events = [m.event_count() for m in started]
        described = broker.described(group)

        moved_at = time.monotonic()
        status, answer = broker.move({"group": group, "unavailable_ms": 300})
        partition = coordinator_partition(group, 10)
        assert status == 0 and answer == {
            "partition": [OFFSETS_TOPIC, partition],
            "from": 0,
            "to": 0,
            "leader_epoch": 0,
        }
        produce(broker.bootstrap, topic, 4, 40, start=40)
        wait_for(lambda: all(m.commits_since(moved_at) for m in started), WAIT_S, "every member committing again")
        assert [m.event_count() for m in started] == events, "a client saw a rebalance"
        assert broker.described(group) == described

        _a_parked_join_is_answered_not_coordinator(broker)
        status, answer = broker.move({"topic": topic, "partition": 0})
        assert (status, answer) == (1, {"error": "moving a partition's leadership needs cluster mode"})
    finally:
        try:
            stop_all(members)  # before the broker: a member closing leaves its group
            members.clear()
        finally:
            broker.stop()


def _join(c: RawClient, group: str, member_id: str = "", *, send_only: bool = False) -> Any:
    request = make(
        request_class(JOIN, 9),
        dict(
            group_id=group,
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            reason="test",
            protocols=(make(JoinGroupRequestProtocol, dict(name="range", metadata=b"")),),
        ),
    )
    if send_only:
        c.send_raw(c.encode(JOIN, 9, request))
        return None
    return c.request(JOIN, 9, request)


def _a_parked_join_is_answered_not_coordinator(broker: _EmbeddedBroker) -> None:
    """A group of one Stable member; a second member's JoinGroup waits for the first to rejoin; the group's move
    answers it NOT_COORDINATOR (the join phase is lost, as when a coordinator moves)."""
    group, port = "g-parked", int(broker.bootstrap.rsplit(":", 1)[1])
    with RawClient(port) as a, RawClient(port) as b:
        first = _join(a, group, _join(a, group).member_id)
        assert first.error_code == ErrorCode.none and first.generation_id == 1
        sync = make(
            request_class(SYNC, 5),
            dict(
                group_id=group,
                generation_id=1,
                member_id=first.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=(),
            ),
        )
        assert a.request(SYNC, 5, sync).error_code == ErrorCode.none
        _join(b, group, _join(b, group).member_id, send_only=True)
        heartbeat = make(
            request_class(HEARTBEAT, 4),
            dict(group_id=group, generation_id=1, member_id=first.member_id, group_instance_id=None),
        )
        wait_for(
            lambda: a.request(HEARTBEAT, 4, heartbeat).error_code == ErrorCode.rebalance_in_progress,
            WAIT_S,
            "the second member's join parked",
        )
        assert broker.move({"group": group})[0] == 0
        assert b.read_response(JOIN, 9).error_code == ErrorCode.not_coordinator


class _EmbeddedBroker:
    """One node: a `herd serve` process with its HTTP listener; moves are asked for with `herd faults move`."""

    def __init__(self, tmp_path: Path) -> None:
        props = {
            "group.min.session.timeout.ms": "1000",
            "offsets.topic.num.partitions": "10",
            "herd.http.listener": "127.0.0.1:0",
            "herd.faults.enable": "true",
        }
        self.process = BrokerProcess(tmp_path / "node", props).start()
        self.bootstrap = self.process.bootstrap

    def create_topic(self, topic: str, partitions: int) -> None:
        create_topic(self.bootstrap, topic, partitions)

    def move(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """`herd faults move` with `body`'s fields as options: (0, its JSON answer) when it worked, else (its exit
        code, {"error": its one line without the `herd: error: ` prefix})."""
        args = [
            sys.executable,
            "-m",
            "herd.cli",
            "faults",
            "move",
            "--http",
            _http_address(self.process.log()),
            "--output",
            "json",
        ]
        for name, value in body.items():
            args += [f"--{name.replace('_', '-')}", str(value)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=WAIT_S)
        if done.returncode == 0:
            return 0, json.loads(done.stdout)
        assert done.stderr.count("\n") == 1, done.stderr  # one line, no traceback
        return done.returncode, {"error": done.stderr.strip().removeprefix("herd: error: ")}

    def described(self, group: str) -> tuple[int, str, dict[str, bytes]]:
        """(error, state, member id -> assignment) from DescribeGroups: the same member ids mean no member
        joined again (a rebalance with new members, or the group lost)."""
        port = int(self.bootstrap.rsplit(":", 1)[1])
        with RawClient(port) as c:
            (g,) = c.request(15, 5, DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)).groups
        return g.error_code, g.group_state, {m.member_id: m.member_assignment for m in g.members}

    def stop(self) -> None:
        self.process.stop()
