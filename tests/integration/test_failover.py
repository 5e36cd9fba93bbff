"""A group's coordinator node killed with kill -9 under dynamic members of real clients, on three herd nodes over
PostgreSQL: the failure scenarios of the consumer coordinator design (coordinator failover and rediscovery,
failure during a rebalance, partition-count changes), with Kafka's behaviour where that design is silent.

What the scenarios rest on (Kafka's GroupMetadataManager, apache/kafka group-coordinator/src/main/java/org/
apache/kafka/coordinator/group/GroupMetadataManager.java, `onLoaded` and the classic-group replay): a classic
group is stored only when a generation completes, so the new coordinator loads it Stable at its last completed
generation, with every member's session timer re-armed; members that heartbeat to it within their session
timeout carry on without a rebalance, and a rebalance under way when the coordinator died is lost, its members
joining again.

The coordinator is found with FindCoordinator against a live node; the node leading the group's
`__consumer_offsets` partition is killed, its lease runs out (`broker.session.timeout.ms`), a live node loads the
partition, and the killed node is restarted, which moves partitions back to it: a second move the groups must
survive too. One cluster serves the module; every test starts from three live nodes leading two of the six
offsets partitions each, with a topic and a group of its own. The generation is read from what the coordinator
stored (the group's last GroupMetadata record in `__consumer_offsets`, in the database), the state and
assignments from DescribeGroups on the coordinator, and the rebalances each client saw from its assignment
callbacks.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from groupmembers import (
    AiokafkaMember,
    ChildMember,
    ConfluentMember,
    KafkaPythonMember,
    Member,
    Producing,
    add_partitions,
    balanced,
    committed_offsets,
    produce,
    settled,
    wait_for,
)
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8
from pgcluster import create_topic_on, stored_generation, wait_offsets_spread
from rawkafka import RawClient

from herd.client.consumer_protocol import decode_assignment
from herd.testing import HerdCluster

NODES = 3
OFFSETS_PARTITIONS = 6
CLUSTER_OVERRIDES = {
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "num.partitions": "1",
}
SESSION_MS = 10000  # the members' session timeout: a failover must fit in it
HEARTBEAT_MS = 1000
REBALANCE_MS = 20000  # max.poll.interval.ms, the rebalance timeout: a held rebalance must fit in it
FAILOVER_S = 30.0  # generous deadlines: the machine is shared
CLIENTS = ("kafka-python", "confluent", "aiokafka")

pytestmark = pytest.mark.timeout(300)
_names = itertools.count()


# -- the cluster -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def herd(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdCluster]:
    cluster = HerdCluster(
        tmp_path_factory.mktemp("failover"), overrides=CLUSTER_OVERRIDES, database_url=pg_url, faults=False
    )
    try:
        cluster.start(nodes=NODES, balanced=False)
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def cluster(herd: HerdCluster) -> HerdCluster:
    """The module's cluster with every node running and leading its share of `__consumer_offsets` (a test that
    failed before restarting its killed node leaves the restart to this)."""
    for i in range(NODES):
        if not herd.running(i):
            _restart(herd, i)
    _wait_balanced(herd)
    return herd


def _raw(cluster: HerdCluster, i: int) -> RawClient:
    return RawClient(cluster.nodes[i].port)


def _wait_balanced(cluster: HerdCluster) -> None:
    wait_offsets_spread(cluster, OFFSETS_PARTITIONS, FAILOVER_S)


def _restart(cluster: HerdCluster, i: int) -> None:
    cluster.restart(i, FAILOVER_S)


def _new_topic(cluster: HerdCluster, stem: str, partitions: int) -> str:
    name = f"{stem}-{next(_names)}"
    create_topic_on(cluster, name, partitions, FAILOVER_S)
    return name


# -- the group as its coordinator sees it ------------------------------------------------------------------------


def _coordinator(cluster: HerdCluster, group: str) -> int | None:
    """The node the first live node names as the group's coordinator (None if it names none)."""
    for i in range(NODES):
        if not cluster.running(i):
            continue
        with _raw(cluster, i) as c:
            r = c.request(10, 4, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)))
        (found,) = r.coordinators
        return found.node_id if found.error_code == ErrorCode.none else None
    return None


Assignments = dict[str, frozenset[int]]


def _describe(cluster: HerdCluster, node: int, group: str) -> tuple[str, Assignments]:
    """(state, member id -> partitions) from DescribeGroups on `node`; AssertionError unless it coordinates the
    group and has loaded it."""
    with _raw(cluster, node) as c:
        r = c.request(15, 5, DescribeGroupsRequest(groups=(group,), include_authorized_operations=False))
    (g,) = r.groups
    assert g.error_code == ErrorCode.none, g.error_code
    return g.group_state, {m.member_id: _partitions(m.member_assignment) for m in g.members}


def _partitions(assignment: bytes) -> frozenset[int]:
    return frozenset(tp.partition for tp in decode_assignment(assignment).partitions) if assignment else frozenset()


def _current(cluster: HerdCluster, group: str) -> tuple[int, str, Assignments]:
    """(coordinator, state, assignments) once a live node names a live coordinator that has loaded the group."""

    def ask() -> tuple[int, str, Assignments] | None:
        node = _coordinator(cluster, group)
        if node is None or not cluster.running(node):
            return None
        return (node, *_describe(cluster, node, group))

    return wait_for(ask, FAILOVER_S, f"a live coordinator of {group}", 0.1, ignore=(OSError, AssertionError))


def _wait_state(cluster: HerdCluster, group: str, state: str) -> None:
    wait_for(lambda: _current(cluster, group)[1] == state, FAILOVER_S, f"{group} {state}", 0.05)


def _stable(cluster: HerdCluster, group: str, members: int) -> Assignments:
    """Wait until the group is Stable with `members` members; their assignments."""

    def ask() -> Assignments | None:
        _, state, assignments = _current(cluster, group)
        return assignments if state == "Stable" and len(assignments) == members else None

    return wait_for(ask, FAILOVER_S, f"{group} Stable with {members} members", 0.1)


def _kill_coordinator(cluster: HerdCluster, group: str) -> int:
    node = _coordinator(cluster, group)
    assert node is not None and cluster.running(node)
    cluster.kill(node)
    return node


def _failed_over(cluster: HerdCluster, group: str, dead: int) -> tuple[int, str, Assignments]:
    """Wait until a live node other than `dead` coordinates the group and has loaded it; (that node, the group's
    state and assignments there)."""

    def moved() -> tuple[int, str, Assignments] | None:
        current = _current(cluster, group)
        return current if current[0] != dead else None

    return wait_for(moved, FAILOVER_S, f"{group} coordinated by a node other than {dead}", 0.1)


def _assigned_as_clients_say(cluster: HerdCluster, group: str, members: list[Any]) -> None:
    """The group is Stable with these members, and what each client holds is what the coordinator assigned."""
    described = _stable(cluster, group, len(members))
    assert sorted(map(sorted, described.values())) == sorted(sorted(m.assigned) for m in members)


# -- members that say what they committed -----------------------------------------------------------------------


class _Tracking(Member):
    """A member that commits, after each batch, exactly the offsets after the records it consumed of the
    partitions it holds, and keeps, for each partition, the highest offset whose commit the client reported
    successful (`acked`), and when each successful commit returned (`acked_at`)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("session_ms", SESSION_MS)
        super().__init__(*args, **kw)
        self.acked: dict[int, int] = {}
        self.acked_at: list[float] = []
        self._positions: dict[int, int] = {}

    def _on_messages(self, messages: Any) -> None:
        messages = list(messages)
        super()._on_messages(messages)
        for partition, offset, _ in messages:
            self._positions[partition] = max(self._positions.get(partition, 0), offset + 1)

    def _to_commit(self) -> dict[int, int]:
        held = self.assigned
        return {p: o for p, o in self._positions.items() if p in held and self.acked.get(p) != o}

    def _acknowledged(self, offsets: dict[int, int]) -> None:
        with self._lock:
            for p, o in offsets.items():
                self.acked[p] = max(self.acked.get(p, 0), o)
            self.acked_at.append(time.monotonic())

    def commits_since(self, moment: float) -> int:
        with self._lock:
            return sum(1 for t in self.acked_at if t > moment)

    def acked_offsets(self) -> dict[int, int]:
        with self._lock:
            return dict(self.acked)


class _KafkaPython(_Tracking, KafkaPythonMember):
    def _config(self) -> dict[str, Any]:
        return {
            **super()._config(),
            "heartbeat_interval_ms": HEARTBEAT_MS,
            "max_poll_interval_ms": REBALANCE_MS,
            "partition_assignment_strategy": [_gated_range()],
        }

    def _commit(self, consumer: Any) -> None:
        from kafka import TopicPartition
        from kafka.errors import CommitFailedError, KafkaError
        from kafka.structs import OffsetAndMetadata

        offsets = self._to_commit()
        if not offsets:
            return
        try:
            consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        except (CommitFailedError, KafkaError):
            self.commit_failures += 1
        else:
            self._acknowledged(offsets)


class _Confluent(_Tracking, ConfluentMember):
    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "heartbeat.interval.ms": HEARTBEAT_MS, "max.poll.interval.ms": REBALANCE_MS}

    def _commit(self, consumer: Any) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        offsets = self._to_commit()
        if not offsets:
            return
        try:
            result = consumer.commit(
                offsets=[TopicPartition(self.topic, p, o) for p, o in offsets.items()], asynchronous=False
            )
        except KafkaException:
            self.commit_failures += 1
            return
        if any(tp.error is not None for tp in result):
            self.commit_failures += 1
        else:
            self._acknowledged(offsets)


class _Aiokafka(_Tracking, AiokafkaMember):
    """`slow_revocation`: while it is set, the member's revocation callback does not return, so the member does
    not rejoin a rebalance; aiokafka keeps heartbeating meanwhile, as the callback may commit (aiokafka/consumer/
    group_coordinator.py, `ensure_active_group`: the heartbeat task is stopped only after `_on_join_prepare`).
    `revoking` is set once it waits there."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.slow_revocation = threading.Event()
        self.revoking = threading.Event()

    def _config(self) -> dict[str, Any]:
        return {
            **super()._config(),
            "heartbeat_interval_ms": HEARTBEAT_MS,
            "max_poll_interval_ms": REBALANCE_MS,
            "rebalance_timeout_ms": REBALANCE_MS,
        }

    async def _revoking(self) -> None:
        while self.slow_revocation.is_set() and not self.stopping:
            self.revoking.set()
            await asyncio.sleep(0.02)

    async def _commit(self, consumer: Any) -> None:  # type: ignore[override]
        from aiokafka import TopicPartition
        from aiokafka.errors import CommitFailedError, KafkaError

        offsets = self._to_commit()
        if not offsets:
            return
        try:
            await consumer.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()})
        except (CommitFailedError, KafkaError):
            self.commit_failures += 1
        else:
            self._acknowledged(offsets)


_MEMBERS: dict[str, type[_Tracking]] = {"kafka-python": _KafkaPython, "confluent": _Confluent, "aiokafka": _Aiokafka}


def _start(client: str, cluster: HerdCluster, topic: str, group: str, n: int, prefix: str = "m") -> list[Any]:
    started = [_MEMBERS[client](cluster.bootstrap, topic, group, name=f"{prefix}{i}") for i in range(n)]
    for m in started:
        m.start()
    return started


# While GATE is clear, a kafka-python leader waits in its assignment (GATE_ENTERED set), the group staying in
# CompletingRebalance; the tests leave it set.
GATE = threading.Event()
GATE.set()
GATE_ENTERED = threading.Event()


def _gated_range() -> type:
    """kafka-python's range assignor, held at GATE: the leader runs it between its JoinGroup response and its
    SyncGroup (kafka/coordinator/base.py, `_do_join_and_sync_async`). A function: kafka-python is imported when a
    member starts."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    class GatedRange(RangePartitionAssignor):
        @classmethod
        def assign(cls, cluster: Any, members: Any) -> Any:
            if not GATE.is_set():
                GATE_ENTERED.set()
                GATE.wait(60)
            return super().assign(cluster, members)

    return GatedRange


# -- records -----------------------------------------------------------------------------------------------------


def _consumed(members: list[Member]) -> set[bytes]:
    return {value for m in members for _, _, value in list(m.consumed)}


def _wait_consumed(members: list[Member], values: set[bytes], partitions: int, what: str) -> None:
    def missing() -> str:
        left = values - _consumed(members)
        return f"from partitions {sorted({int(v[2:]) % partitions for v in left})}" if left else ""

    try:
        wait_for(lambda: not missing(), FAILOVER_S, f"the records produced {what} consumed", 0.1)
    except AssertionError as e:
        raise AssertionError(f"{e}: none consumed {missing()}") from None


# -- 1. stable and committing -------------------------------------------------------------------------------------


def _no_rebalance(
    cluster: HerdCluster, group: str, before: Assignments, generation: int, members: list[Any], events: list[int]
) -> None:
    assert _stable(cluster, group, len(before)) == before, "the members or their assignments changed"
    assert stored_generation(cluster, group) == generation, "a rebalance completed"
    assert [m.event_count() for m in members] == events, "a client saw its partitions revoked or assigned"


def _no_acknowledged_commit_lost(cluster: HerdCluster, group: str, topic: str, members: list[Any]) -> None:
    """OffsetFetch gives every partition at least the highest offset whose commit a member saw succeed."""
    acked: dict[int, int] = {}
    for m in members:
        for p, o in m.acked_offsets().items():
            acked[p] = max(acked.get(p, 0), o)
    committed = committed_offsets(cluster.bootstrap, group, topic, 6)
    lost = {p: (o, committed[p]) for p, o in acked.items() if committed[p] < o}
    assert not lost, f"acknowledged commits lost (partition: (acknowledged, fetched)): {lost}"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_stable_committing_group_survives_its_coordinator_killed(
    cluster: HerdCluster, members: list[Member], client: str
) -> None:
    """Three members consume and commit while records flow; the coordinator node is killed and a live node loads
    the group; the killed node comes back and takes its share of the offsets partitions again (a second move).
    No rebalance: the stored generation, each member's assignment and every client's assignment callbacks stay
    as they were; every commit a client saw succeed is fetched at or above its offset; every record produced
    after the kill is consumed, and every member commits again after the restart."""
    topic = _new_topic(cluster, f"stable-{client}", 6)
    group = f"g-{topic}"
    tracked = _start(client, cluster, topic, group, 3)
    members += tracked
    producing = Producing(cluster.bootstrap, topic, 6)
    producing.start()
    try:
        settled(tracked, 6, timeout=FAILOVER_S)
        before = _stable(cluster, group, 3)
        wait_for(lambda: all(m.acked for m in tracked), FAILOVER_S, "every member committing")
        generation = stored_generation(cluster, group)
        events = [m.event_count() for m in tracked]

        killed_at = time.monotonic()
        dead = _kill_coordinator(cluster, group)
        _failed_over(cluster, group, dead)
        _no_rebalance(cluster, group, before, generation, tracked, events)
        _restart(cluster, dead)
        _wait_balanced(cluster)
        _no_rebalance(cluster, group, before, generation, tracked, events)
        _no_acknowledged_commit_lost(cluster, group, topic, tracked)

        restarted_at = time.monotonic()
        wait_for(lambda: len(producing.since(restarted_at)) >= 60, FAILOVER_S, "records acknowledged", 0.1)
        _wait_consumed(tracked, producing.since(killed_at), 6, "after the kill")
        wait_for(
            lambda: all(m.commits_since(restarted_at) for m in tracked),
            FAILOVER_S,
            "every member committing after the restart",
        )
    finally:
        producing.stop()
    _no_rebalance(cluster, group, before, generation, tracked, events)
    _no_acknowledged_commit_lost(cluster, group, topic, tracked)
    assert not producing.errors
    for m in tracked:
        m.check()


# -- a group interrupted by the failover, recovering (2, 3 and 5) --------------------------------------------------


def _stable_group(cluster: HerdCluster, members: list[Member], client: str, stem: str, n: int,
                  partitions: int = 6) -> tuple[str, str, list[Any], int]:  # fmt: skip
    """A new topic and `n` members of `client` in its group, Stable: (topic, group, the members, the stored
    generation)."""
    topic = _new_topic(cluster, stem, partitions)
    group = f"g-{topic}"
    started = _start(client, cluster, topic, group, n)
    members += started
    settled(started, partitions, timeout=FAILOVER_S)
    return topic, group, started, stored_generation(cluster, group)


def _recovered(cluster: HerdCluster, dead: int, topic: str, group: str, everyone: list[Any], generation: int,
               what: str) -> None:  # fmt: skip
    """Once the dead node is back: the group Stable over six partitions, assigned as its clients say, at a
    generation after `generation`, and consuming what is produced."""
    _restart(cluster, dead)
    _wait_balanced(cluster)
    settled(everyone, 6, timeout=FAILOVER_S)
    _assigned_as_clients_say(cluster, group, everyone)
    assert stored_generation(cluster, group) > generation
    values = set(produce(cluster.bootstrap, topic, 6, 60))
    _wait_consumed(everyone, values, 6, what)


# -- 2. the join phase ---------------------------------------------------------------------------------------------


def test_killed_in_the_join_phase_the_group_ends_stable_with_everyone_assigned(
    cluster: HerdCluster, members: list[Member]
) -> None:
    """Two aiokafka members are Stable; a third joins; one of the two rejoins at once (its JoinGroup parked), the
    other is slow to give its partitions up (its revocation callback holds it back from rejoining, heartbeating
    meanwhile), so the group waits in PreparingRebalance; the coordinator dies there. The new coordinator loads the last
    completed generation
    (the join phase is lost, as in Kafka); the members rejoin, and the group ends Stable with the three of them
    balanced, each consuming."""
    topic, group, first, generation = _stable_group(cluster, members, "aiokafka", "join", 2)
    fast, slow = first
    slow.slow_revocation.set()
    fast_events = fast.event_count()
    newcomer = _start("aiokafka", cluster, topic, group, 1, prefix="new")
    members += newcomer
    wait_for(slow.revoking.is_set, FAILOVER_S, "the slow member in its revocation callback")
    wait_for(lambda: fast.event_count() > fast_events, FAILOVER_S, "the other member rejoining")
    _wait_state(cluster, group, "PreparingRebalance")
    dead = _kill_coordinator(cluster, group)
    _failed_over(cluster, group, dead)
    assert stored_generation(cluster, group) == generation, "the interrupted join phase completed"
    slow.slow_revocation.clear()
    everyone = first + newcomer
    _recovered(cluster, dead, topic, group, everyone, generation, "once the group is Stable again")
    assert all(m.consumed for m in everyone), "a member consumed nothing"


# -- 3. the sync phase ---------------------------------------------------------------------------------------------


def test_killed_in_the_sync_phase_the_group_ends_stable_with_everyone_assigned(
    cluster: HerdCluster, members: list[Member]
) -> None:
    """Two kafka-python members are Stable; a third joins; the join phase completes, and the leader is slow to
    compute its assignment (held in its assignor), so the group waits in CompletingRebalance with the followers'
    SyncGroups parked; the coordinator dies there. The generation the leader never synced was not stored (Kafka
    stores a generation with its assignment, at the leader's SyncGroup); the new coordinator loads the one
    before, the members rejoin, and the group ends Stable with the three of them balanced, each consuming."""
    topic, group, first, generation = _stable_group(cluster, members, "kafka-python", "sync", 2)
    GATE_ENTERED.clear()
    GATE.clear()
    try:
        newcomer = _start("kafka-python", cluster, topic, group, 1, prefix="new")
        members += newcomer
        wait_for(GATE_ENTERED.is_set, FAILOVER_S, "the leader in its assignment")
        _wait_state(cluster, group, "CompletingRebalance")
        dead = _kill_coordinator(cluster, group)
        _failed_over(cluster, group, dead)
        assert stored_generation(cluster, group) == generation, "the unsynced generation was stored"
    finally:
        GATE.set()
    _recovered(cluster, dead, topic, group, first + newcomer, generation, "once the group is Stable again")


# -- 4. a member dying during the failover ----------------------------------------------------------------------


def test_a_member_dying_during_the_failover_is_expired_in_one_rebalance(
    cluster: HerdCluster, members: list[Member]
) -> None:
    """Three confluent-kafka members are Stable, one in a child process; it is killed (it never leaves) and the
    coordinator node with it. The new coordinator loads the group with the three members and re-arms their
    sessions; the dead one never heartbeats, so its session runs out and the two survivors take all six
    partitions in exactly one rebalance (one more stored generation, one revocation and one assignment each),
    which the node's restart leaves alone."""
    topic = _new_topic(cluster, "dying", 6)
    group = f"g-{topic}"
    survivors = _start("confluent", cluster, topic, group, 2)
    members += survivors
    child = ChildMember("confluent", cluster.bootstrap, topic, group, session_ms=SESSION_MS)
    try:
        wait_for(lambda: balanced([*survivors, child], 6), FAILOVER_S, "the three members balanced")
        _assigned_as_clients_say(cluster, group, [*survivors, child])
        generation = stored_generation(cluster, group)
        events = [m.event_count() for m in survivors]
        child.kill()
        dead = _kill_coordinator(cluster, group)
    finally:
        child.kill()
    _, _, loaded = _failed_over(cluster, group, dead)
    assert len(loaded) == 3, "the new coordinator did not load the group with its three members"
    settled(survivors, 6, timeout=SESSION_MS / 1000 + FAILOVER_S)
    assert stored_generation(cluster, group) == generation + 1
    assert [m.event_count() - e for m, e in zip(survivors, events)] == [2, 2], "not one revocation and assignment"
    _restart(cluster, dead)
    _wait_balanced(cluster)
    _assigned_as_clients_say(cluster, group, survivors)
    assert stored_generation(cluster, group) == generation + 1
    assert [m.event_count() - e for m, e in zip(survivors, events)] == [2, 2]
    values = set(produce(cluster.bootstrap, topic, 6, 60))
    _wait_consumed(survivors, values, 6, "after the failover")


# -- 5. partitions added during the failover ---------------------------------------------------------------------


def test_partitions_added_during_the_failover_are_assigned(cluster: HerdCluster, members: list[Member]) -> None:
    """Two aiokafka members share a topic of four partitions; the coordinator node is killed and the topic
    grows to six through a live node right after, while the dead node's lease runs out. The leader sees the new count in
    its metadata and rejoins at the new coordinator; the group ends Stable with all six partitions assigned,
    and records of the new partitions are consumed."""
    topic, group, tracked, generation = _stable_group(cluster, members, "aiokafka", "growing", 2, partitions=4)
    dead = _kill_coordinator(cluster, group)
    add_partitions(cluster.bootstrap, topic, 6)
    _failed_over(cluster, group, dead)
    _recovered(cluster, dead, topic, group, tracked, generation, "to the six partitions")
