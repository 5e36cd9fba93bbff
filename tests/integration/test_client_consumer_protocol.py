"""herd's own consumer on the consumer protocol (`GroupConsumer(group_protocol="consumer")`, KIP-848) against a real
`herd serve`: two herd consumers and a confluent-kafka consumer on group.protocol=consumer share a topic as the
coordinator assigns it, read every record once, commit at their member epochs, and hand partitions over when one
leaves, never holding one partition in two members at once; a herd consumer on the consumer protocol upgrades a
group of herd consumers on the classic protocol, which go on consuming inside it; and one subscribed by a regular
expression follows the topics that match it."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from brokers import BrokerProcess
from groupmembers import ConsumerProtocolMember, owned_twice, produce

from herd.client.admin import Admin
from herd.client.consumer import GroupConsumer
from herd.client.consumer_protocol import TopicPartition
from herd.client.errors import KafkaError
from herd.testing.wait import wait_until_async

PARTITIONS = 6
OVERRIDES = {
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "300",
    "group.consumer.heartbeat.interval.ms": "300",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("client-848") / "data", OVERRIDES).start()
    yield process
    process.stop()


async def create_topic(bootstrap: str) -> str:
    topic = f"t848-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap) as admin:
        await admin.create_topic(topic, PARTITIONS, 1)
    return topic


class Herd:
    """A herd GroupConsumer polling in the test's event loop, with the timeline groupmembers.owned_twice reads."""

    def __init__(self, bootstrap: str, group: str, topic: str | None, name: str, **kw: Any) -> None:
        self.name, self.values, self.timeline = name, [], []
        self.stopped_at: float | None = None
        self.commit_failures = 0
        self.stopping = False
        topics = [topic] if topic is not None else []  # none: a `topic_regex` subscribes
        self.consumer = GroupConsumer(bootstrap, group, topics, client_id=name, auto_offset_reset="earliest", **kw)
        self.consumer.user_callbacks = {k: self._event(k) for k in ("assigned", "revoked", "lost")}
        self.task: asyncio.Task[None] | None = None

    def _event(self, kind: str):  # noqa: ANN202
        def record(parts: frozenset[TopicPartition]) -> None:
            self.timeline.append(
                (time.monotonic(), "revoked" if kind == "lost" else kind, {tp.partition for tp in parts})
            )

        return record

    @property
    def held(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment)

    async def start(self) -> Herd:
        await self.consumer.start()
        self.task = asyncio.get_running_loop().create_task(self._poll())
        return self

    async def _poll(self) -> None:
        while not self.stopping:
            batches = await self.consumer.getmany(timeout_ms=100)
            self.values += [r.value for records in batches.values() for r in records]
            if batches:
                try:
                    await self.consumer.commit()  # at the member's epoch
                except KafkaError:
                    self.commit_failures += 1  # its partitions moved on: the next owner may read these again
            else:  # getmany returns at once while nothing is assigned
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """End the poll loop by its flag, not by cancelling it: Python 3.11's asyncio.wait_for (in the client's
        requests) can swallow a cancellation that races an answer, and the loop would go on for ever."""
        self.stopped_at = time.monotonic()
        self.stopping = True
        assert self.task is not None
        await asyncio.wait_for(self.task, 60)
        await self.consumer.close()


def test_herd_consumers_on_the_consumer_protocol_share_commit_and_hand_over(broker) -> None:
    async def main() -> None:
        topic, group = await create_topic(broker.bootstrap), f"g848-{uuid.uuid4().hex[:6]}"
        expected = set(produce(broker.bootstrap, topic, PARTITIONS, 120))
        a = await Herd(broker.bootstrap, group, topic, "herd-a", group_protocol="consumer").start()
        b = await Herd(broker.bootstrap, group, topic, "herd-b", group_protocol="consumer").start()
        cf = ConsumerProtocolMember(broker.bootstrap, topic, group, name="cf", assignor="uniform")
        cf.start()
        try:
            members = [a, b]

            def balanced() -> bool:
                held = [a.held, b.held, cf.assigned]
                return sorted(map(len, held)) == [2, 2, 2] and frozenset().union(*held) == frozenset(range(6))

            await wait_until_async(lambda: balanced(), 30, "two partitions each, all six held")
            await wait_until_async(
                lambda: expected <= set(a.values + b.values) | {v for *_, v in cf.consumed}, 30, "every record read"
            )
            assert a.consumer.member.assignment.generation_id > 0  # type: ignore[union-attr]
            await b.stop()  # it revokes (committing) and leaves: a and cf take its partitions
            await wait_until_async(
                lambda: len(a.held) == len(cf.assigned) == 3 and not a.held & cf.assigned, 30, "three each"
            )
            more = set(produce(broker.bootstrap, topic, PARTITIONS, 60, start=120))
            await wait_until_async(
                lambda: more <= set(a.values) | {v for *_, v in cf.consumed}, 30, "the later records read"
            )
            read = a.values + b.values + [v for *_, v in cf.consumed]
            twice = [v for v, n in Counter(read).items() if n > 1]
            failures = a.commit_failures + b.commit_failures + cf.commit_failures
            assert not twice or failures, f"{len(twice)} records read twice though every commit went through"
            assert owned_twice([a, b, cf]) == []  # type: ignore[list-item]
            await a.stop()
        finally:
            cf.stop()
            for m in members:
                if m.task is not None and not m.task.done():
                    await m.stop()

    asyncio.run(main())


def test_a_herd_consumer_on_the_consumer_protocol_upgrades_a_classic_group_of_herd_consumers(broker) -> None:
    async def main() -> None:
        topic, group = await create_topic(broker.bootstrap), f"gmig-{uuid.uuid4().hex[:6]}"
        expected = set(produce(broker.bootstrap, topic, PARTITIONS, 60))
        classic = [
            await Herd(
                broker.bootstrap, group, topic, f"classic-{i}", session_timeout_ms=4000, heartbeat_interval_ms=250
            ).start()
            for i in range(2)
        ]
        try:
            await wait_until_async(lambda: all(len(c.held) == 3 for c in classic), 30, "the classic group formed")
            new = await Herd(broker.bootstrap, group, topic, "new", group_protocol="consumer").start()
            classic.append(new)
            await wait_until_async(
                lambda: sorted(len(c.held) for c in classic) == [2, 2, 2], 30, "two each in the consumer group"
            )
            async with Admin(broker.bootstrap) as admin:
                described = await admin.describe_group(group)
            assert described.group_type == "consumer" and len(described.members) == 3
            await wait_until_async(lambda: expected <= {v for c in classic for v in c.values}, 30, "every record read")
            assert owned_twice(classic) == []  # type: ignore[arg-type]
        finally:
            for c in classic:
                await c.stop()

    asyncio.run(main())


def test_a_herd_consumer_subscribed_by_regular_expression_follows_topics_created_later(broker) -> None:
    """`topic_regex` goes to the coordinator as SubscribedTopicRegex (RE2, matched whole): the member gets the
    partitions of the matching topic (not of one that only contains the pattern), then those of a matching topic
    created while it runs, and reads their records."""

    async def main() -> None:
        prefix, group = f"rx{uuid.uuid4().hex[:6]}", f"grx-{uuid.uuid4().hex[:6]}"
        async with Admin(broker.bootstrap) as admin:
            for name, partitions in ((f"{prefix}-a", 2), (f"x{prefix}-a", 2)):
                await admin.create_topic(name, partitions, 1)
        member = await Herd(
            broker.bootstrap, group, None, "rx", group_protocol="consumer", topic_regex=f"{prefix}-.*"
        ).start()
        try:
            topics = lambda: {tp.topic for tp in member.consumer.assignment}  # noqa: E731
            await wait_until_async(lambda: topics() == {f"{prefix}-a"}, 30, "the matching topic assigned")
            async with Admin(broker.bootstrap) as admin:
                await admin.create_topic(f"{prefix}-b", 3, 1)
            expected = set(produce(broker.bootstrap, f"{prefix}-b", 3, 9))
            await wait_until_async(lambda: topics() == {f"{prefix}-a", f"{prefix}-b"}, 45, "the new topic assigned")
            await wait_until_async(lambda: expected <= set(member.values), 30, "the new topic's records read")
        finally:
            await member.stop()

    asyncio.run(main())


def test_a_regular_expression_needs_the_consumer_protocol() -> None:
    with pytest.raises(ValueError, match="topic_regex needs group_protocol='consumer'"):
        GroupConsumer("127.0.0.1:9", "g", (), topic_regex="a.*")
