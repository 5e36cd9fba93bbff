"""herd's consumer in one group with kafka-python and confluent-kafka consumers (same assignor name).

Each test starts one kind of member first, so that it leads the first generation, then the other two;
the three must agree on one balanced, disjoint assignment covering every partition, whoever computed it.
Then the leader leaves and the other two rebalance between themselves (so a member of another client
leads). A cooperative-sticky variant checks that no partition is ever held by two members at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from brokers import BrokerProcess
from groupmembers import kafka_python_group_consumer, wait_for

from herd.client.admin import Admin
from herd.client.consumer import GroupConsumer
from herd.testing.wait import collect_until_async

PARTITIONS = 6
SESSION_MS, HEARTBEAT_MS = 4000, 250
OVERRIDES = {
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}
KINDS = ("herd", "kafka-python", "confluent")


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory) -> Iterable[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("client-groups") / "data", OVERRIDES).start()
    yield broker
    broker.stop()


def create_topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with Admin(bootstrap) as admin:
            await admin.create_topic(topic, partitions, 1)

    asyncio.run(create())
    return topic


class Member(threading.Thread):
    """One consumer polling in its own thread; `held` is what it holds now, `history` every change."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, assignor: str) -> None:
        super().__init__(daemon=True, name=f"member-{kind}")
        self.kind, self.bootstrap, self.group, self.topic, self.assignor = kind, bootstrap, group, topic, assignor
        self.client_id = f"{kind}-member"
        self.held: frozenset[int] = frozenset()
        self.history: list[tuple[float, str, frozenset[int]]] = []
        self.leader_id: str | None = None
        self.member_id: str | None = None
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            {"herd": self._herd, "kafka-python": self._kafka_python, "confluent": self._confluent}[self.kind]()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def _set(self, kind: str, partitions: Iterable[int], held: Iterable[int]) -> None:
        self.history.append((time.monotonic(), kind, frozenset(partitions)))
        self.held = frozenset(held)

    def _herd(self) -> None:
        async def main() -> None:
            consumer = GroupConsumer(
                self.bootstrap,
                self.group,
                [self.topic],
                assignors=[self.assignor],
                client_id=self.client_id,
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                rebalance_timeout_ms=10_000,
            )

            def changed(kind: str) -> Callable[[frozenset], None]:
                return lambda parts: self._set(
                    kind, {tp.partition for tp in parts}, {tp.partition for tp in consumer.assignment}
                )

            consumer.user_callbacks = {k: changed(k) for k in ("assigned", "revoked", "lost")}
            async with consumer:
                while not self.stopping.is_set():
                    held = consumer.member.assignment
                    if held is not None:
                        self.leader_id, self.member_id = held.leader_id, held.member_id
                    await asyncio.sleep(0.05)

        asyncio.run(main())

    def _kafka_python(self) -> None:
        from kafka import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        assignors = {
            "range": RangePartitionAssignor,
            "roundrobin": RoundRobinPartitionAssignor,
            "cooperative-sticky": CooperativeStickyAssignor,
        }
        consumer = kafka_python_group_consumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.client_id,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            partition_assignment_strategy=[assignors[self.assignor]],
            fetch_max_wait_ms=100,
            metadata_max_age_ms=500,
        )
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member._set("revoked", {tp.partition for tp in revoked}, member.held - {tp.partition for tp in revoked})

            def on_partitions_assigned(self, assigned: Any) -> None:
                member._set(
                    "assigned", {tp.partition for tp in assigned}, {tp.partition for tp in consumer.assignment()}
                )

        # Knowing the topic before joining avoids a metadata-driven rejoin right after the group forms.
        wait_for(lambda: consumer.partitions_for_topic(self.topic), what="kafka-python to see the topic")
        consumer.subscribe([self.topic], listener=Listener())
        while not self.stopping.is_set():
            consumer.poll(timeout_ms=1000)
        consumer.close()

    def _confluent(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "client.id": self.client_id,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "enable.auto.commit": False,
                "partition.assignment.strategy": self.assignor,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        cooperative = self.assignor == "cooperative-sticky"

        def on_assign(c: Any, partitions: Any) -> None:
            added = {p.partition for p in partitions}
            self._set("assigned", added, (self.held | added) if cooperative else added)

        def on_revoke(c: Any, partitions: Any) -> None:
            gone = {p.partition for p in partitions}
            self._set("revoked", gone, self.held - gone)

        def on_lost(c: Any, partitions: Any) -> None:
            gone = {p.partition for p in partitions}
            self._set("lost", gone, self.held - gone)

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
        while not self.stopping.is_set():
            consumer.poll(0.05)
        consumer.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive(), f"{self.kind} member did not stop"
        if self.error is not None:
            raise self.error


def balanced(members: list[Member], partitions: int = PARTITIONS) -> bool:
    held = [m.held for m in members]
    sizes = [len(h) for h in held]
    return (
        sum(sizes) == partitions
        and frozenset().union(*held) == frozenset(range(partitions))
        and max(sizes) - min(sizes) <= 1
    )


def describe_members(bootstrap: str, group: str) -> dict[str, str]:
    """member id -> client id, as the coordinator sees the group."""

    async def describe() -> dict[str, str]:
        async with Admin(bootstrap) as admin:
            return {m.member_id: m.client_id for m in (await admin.describe_group(group)).members}

    return asyncio.run(describe())


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
@pytest.mark.parametrize("first", KINDS)
def test_three_clients_share_one_assignment_whoever_leads(group_broker, first, assignor):
    bootstrap, group = group_broker.bootstrap, f"mixed-{uuid.uuid4().hex[:8]}"
    topic = create_topic(bootstrap)
    leader = Member(first, bootstrap, group, topic, assignor)
    members = [leader]
    try:
        wait_for(lambda: len(leader.held) == PARTITIONS, what=f"{first} alone to hold every partition")
        members += [Member(k, bootstrap, group, topic, assignor) for k in KINDS if k != first]
        wait_for(lambda: balanced(members), what="a balanced assignment over three clients")
        herd = next(m for m in members if m.kind == "herd")
        wait_for(
            lambda: herd.leader_id is not None and len(describe_members(bootstrap, group)) == 3,
            what="the group to settle",
        )
        assert describe_members(bootstrap, group)[herd.leader_id] == f"{first}-member"

        leader.stop()
        members.remove(leader)
        wait_for(lambda: balanced(members), what="the two others to rebalance after the leader left")
    finally:
        for m in members:
            m.stop()


def test_cooperative_sticky_never_holds_a_partition_twice(group_broker):
    bootstrap, group = group_broker.bootstrap, f"coop-{uuid.uuid4().hex[:8]}"
    topic = create_topic(bootstrap)
    members = [Member("herd", bootstrap, group, topic, "cooperative-sticky")]
    try:
        wait_for(lambda: len(members[0].held) == PARTITIONS, what="herd alone to hold every partition")
        members.append(Member("confluent", bootstrap, group, topic, "cooperative-sticky"))
        wait_for(lambda: balanced(members), what="a balanced cooperative assignment")
        herd = members[0]
        kept = herd.held
        assert not any(kind == "revoked" and parts & kept for _, kind, parts in herd.history)
        assert ("revoked", frozenset(range(PARTITIONS))) not in [(k, p) for _, k, p in herd.history]
        members.append(Member("kafka-python", bootstrap, group, topic, "cooperative-sticky"))
        wait_for(lambda: balanced(members), what="three cooperative members balanced")
    finally:
        for m in members:
            m.stop()
    events = sorted((t, m.kind, kind, parts) for m in members for t, kind, parts in m.history)
    owners: dict[int, str] = {}
    for _, who, kind, parts in events:
        for p in parts:
            if kind == "assigned":
                assert owners.get(p) in (None, who), f"partition {p} given to {who} while {owners[p]} holds it"
                owners[p] = who
            elif owners.get(p) == who:
                del owners[p]


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def produce(bootstrap: str, topic: str, n: int, partitions: int = PARTITIONS) -> None:
    """`n` records round-robin over the partitions, in batches of every compression codec in turn."""
    from confluent_kafka import Producer

    chunk = -(-n // len(CODECS))
    for c, codec in enumerate(CODECS):
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": codec})
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            producer.produce(
                topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions, headers=[("i", b"%d" % i)]
            )
        assert producer.flush(30) == 0


def test_group_consumer_fetches_every_codec_commits_and_resumes_from_its_commits(group_broker):
    bootstrap, group = group_broker.bootstrap, f"consume-{uuid.uuid4().hex[:8]}"
    topic = create_topic(bootstrap)
    produce(bootstrap, topic, 60)

    async def consume(until: int, seen: list) -> None:
        consumer = GroupConsumer(
            bootstrap,
            group,
            [topic],
            assignors=["range"],
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
        )
        async with consumer:
            await consumer.wait_for_assignment(20)

            async def poll() -> list:
                got = [r for records in (await consumer.getmany(timeout_ms=200)).values() for r in records]
                await consumer.commit()
                return got

            seen.extend(await collect_until_async(poll, lambda got: len(got) >= until, 20))

    first: list = []
    asyncio.run(consume(60, first))
    assert sorted(int(dict(r.headers)["i"]) for r in first) == list(range(60))
    assert all(
        r.key == b"k%d" % int(dict(r.headers)["i"]) and r.partition == int(r.value[1:]) % PARTITIONS for r in first
    )

    async def lag() -> list[int | None]:
        async with Admin(bootstrap) as admin:
            return [row.lag for row in (await admin.describe_offsets(group))[1]]

    assert asyncio.run(lag()) == [0] * PARTITIONS
    produce(bootstrap, topic, 12)
    second: list = []
    asyncio.run(consume(12, second))  # a new member of the group resumes from the commits: only the new records
    assert sorted(r.value for r in second) == sorted(b"v%d" % i for i in range(12))
    assert all(r.offset >= 10 for r in second)
