"""Offsets through the three real clients: commits (with metadata) survive a kill -9 of the broker; a
consumer that missed a rebalance has its commit rejected by the broker and rejoins; the admin clients
list, alter and delete group offsets and delete groups.

The module's broker runs on both backends (tests/backends.py). The raw requests (the intruder, DescribeGroups,
an admin LeaveGroup) go to one node: on a cluster that is the coordinator of every group (the cluster runs a
single `__consumer_offsets` partition); the clients bootstrap with every node."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from backends import BACKENDS, embedded_only, start_broker
from groupmembers import kafka_python_subscriber, wait_for
from kio.schema.errors import ErrorCode
from rawkafka import RawClient
from test_groups_api import part, req

from herd.client.consumer_protocol import Subscription, encode_subscription
from herd.testing.wait import wait_until_async

TOPIC = "orders"
PARTITIONS = 3
JOIN, SYNC, LEAVE, DESCRIBE, CREATE_TOPICS = 11, 14, 13, 15, 19
OVERRIDES = {
    "offsets.topic.num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


def create_topic(port: int, name: str = TOPIC) -> None:
    with RawClient(port) as c:
        c.request(
            CREATE_TOPICS,
            7,
            req(
                CREATE_TOPICS,
                7,
                timeout=10_000,
                validate_only=False,
                topics=(
                    part(
                        CREATE_TOPICS,
                        7,
                        "CreatableTopic",
                        name=name,
                        num_partitions=PARTITIONS,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    ),
                ),
            ),
        )


@pytest.fixture(scope="module", params=BACKENDS)
def shared(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "offsets-clients", OVERRIDES, single_coordinator=True) as b:
        create_topic(b.port)
        yield b


# -- commit, kill -9, fetch ------------------------------------------------------------------------------------


def confluent_commit(bootstrap: str, group: str, offsets: dict[int, tuple[int, str]]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(TOPIC, p, o, metadata=m) for p, (o, m) in offsets.items()], asynchronous=False)
    finally:
        c.close()


def confluent_fetch(bootstrap: str, group: str) -> dict[int, tuple[int, str]]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
    finally:
        c.close()
    return {tp.partition: (tp.offset, tp.metadata or "") for tp in tps if tp.offset >= 0}


def kafka_python_commit(bootstrap: str, group: str, offsets: dict[int, tuple[int, str]]) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        c.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, m, -1) for p, (o, m) in offsets.items()})
    finally:
        c.close()


def kafka_python_fetch(bootstrap: str, group: str) -> dict[int, tuple[int, str]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        got = {p: c.committed(TopicPartition(TOPIC, p), metadata=True) for p in range(PARTITIONS)}
    finally:
        c.close()
    return {p: (om.offset, om.metadata) for p, om in got.items() if om is not None}


def aiokafka_commit(bootstrap: str, group: str, offsets: dict[int, tuple[int, str]]) -> None:
    async def run() -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        from aiokafka.structs import OffsetAndMetadata

        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await c.start()
        try:
            c.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            await c.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, m) for p, (o, m) in offsets.items()})
        finally:
            await c.stop()

    asyncio.run(run())


def aiokafka_fetch(bootstrap: str, group: str) -> dict[int, tuple[int, str]]:
    async def run() -> dict[int, tuple[int, str]]:
        from aiokafka.admin import AIOKafkaAdminClient

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            got = await admin.list_consumer_group_offsets(group)
        finally:
            await admin.close()
        return {tp.partition: (om.offset, om.metadata) for tp, om in got.items() if tp.topic == TOPIC}

    return asyncio.run(run())


COMMITTERS = {
    "confluent": (confluent_commit, confluent_fetch),
    "kafka-python": (kafka_python_commit, kafka_python_fetch),
    "aiokafka": (aiokafka_commit, aiokafka_fetch),
}


@embedded_only("a kill -9 and restart of the one broker on its data directory (test_cluster kills a node)")
@pytest.mark.parametrize("client", list(COMMITTERS))
def test_commits_survive_a_kill_9_of_the_broker(broker_factory, client):
    broker = broker_factory(OVERRIDES)
    create_topic(broker.port)
    commit, fetch = COMMITTERS[client]
    offsets = {0: (41, "checkpoint-a"), 1: (7, ""), 2: (1000, "é")}
    commit(broker.bootstrap, f"durable-{client}", offsets)
    broker.kill()
    broker.restart()
    assert wait_for(lambda: fetch(broker.bootstrap, f"durable-{client}"), what="the offsets after a restart") == offsets


# -- a consumer that missed a rebalance ------------------------------------------------------------------------


def member_ids(port: int, group: str) -> list[str]:
    with RawClient(port) as c:
        d = c.request(DESCRIBE, 5, req(DESCRIBE, 5, groups=(group,), include_authorized_operations=False))
    return [m.member_id for m in d.groups[0].members]


class Intruder(threading.Thread):
    """A second member joining over a raw socket (rebalance timeout 1 s), which makes the group rebalance;
    it syncs as leader and then never heartbeats, so it drops out of the next rebalance."""

    def __init__(self, port: int, group: str) -> None:
        super().__init__(daemon=True)
        self.port, self.group = port, group
        self.member_id = ""

    def run(self) -> None:
        metadata = encode_subscription(Subscription(topics=(TOPIC,)))
        with RawClient(self.port, timeout=30) as c:

            def join(member_id: str) -> Any:
                return c.request(
                    JOIN,
                    9,
                    req(
                        JOIN,
                        9,
                        group_id=self.group,
                        session_timeout=30_000,
                        rebalance_timeout=1_000,
                        member_id=member_id,
                        group_instance_id=None,
                        protocol_type="consumer",
                        reason="intruder",
                        protocols=tuple(
                            part(JOIN, 9, "JoinGroupRequestProtocol", name=name, metadata=metadata)
                            for name in ("range", "roundrobin")
                        ),
                    ),
                )

            joined = join(join("").member_id)
            assert joined.error_code == ErrorCode.none, joined
            assignments = tuple(
                part(SYNC, 5, "SyncGroupRequestAssignment", member_id=m.member_id, assignment=b"")
                for m in joined.members
            )
            synced = c.request(
                SYNC,
                5,
                req(
                    SYNC,
                    5,
                    group_id=self.group,
                    generation_id=joined.generation_id,
                    member_id=joined.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name=joined.protocol_name,
                    assignments=assignments,
                ),
            )
            assert synced.error_code == ErrorCode.none
            self.member_id = joined.member_id


def test_kafka_python_consumer_that_missed_a_rebalance_is_rejected_and_rejoins(shared):
    from kafka.errors import CommitFailedError

    group = "missed-kafka-python"
    c = kafka_python_subscriber(
        TOPIC,
        bootstrap_servers=shared.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=60_000,
        heartbeat_interval_ms=50_000,
        max_poll_interval_ms=2_000,
        auto_offset_reset="earliest",
    )
    try:
        wait_for(lambda: c.poll(timeout_ms=100) is not None and c.assignment(), what="the first assignment")
        c.commit()
        intruder = Intruder(shared.port, group)
        intruder.start()
        while intruder.is_alive():  # keep polling (no heartbeat is due for 50 s): the rebalance goes on without us
            c.poll(timeout_ms=50)
        assert member_ids(shared.port, group) == [intruder.member_id]  # we missed it and are out
        with pytest.raises(CommitFailedError):
            c.commit()  # generation 1 and a member id the group no longer has: UNKNOWN_MEMBER_ID
        wait_for(lambda: c.poll(timeout_ms=100) is not None and c.assignment(), what="the rejoin")
        c.commit()
        assert intruder.member_id not in member_ids(shared.port, group)  # it rejoined; the silent intruder is out
    finally:
        c.close()


def test_aiokafka_consumer_that_missed_a_rebalance_is_rejected_and_rejoins(shared):
    async def run() -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import CommitFailedError

        group = "missed-aiokafka"
        # aiokafka heartbeats at least every max.poll.interval.ms; its join phase is bounded by its own
        # rebalance timeout, so a 1 s rebalance ends long before its next heartbeat.
        c = AIOKafkaConsumer(
            TOPIC,
            bootstrap_servers=shared.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=60_000,
            heartbeat_interval_ms=50_000,
            max_poll_interval_ms=30_000,
            rebalance_timeout_ms=1_000,
            auto_offset_reset="earliest",
        )
        await c.start()
        try:

            async def assigned() -> bool:
                await c.getmany(timeout_ms=100)
                return bool(c.assignment())

            await wait_until_async(assigned, 30, f"aiokafka's first assignment in {group}", interval=0)
            await c.commit()
            intruder = Intruder(shared.port, group)
            intruder.start()
            while intruder.is_alive():
                await c.getmany(timeout_ms=50)
            assert member_ids(shared.port, group) == [intruder.member_id]
            with pytest.raises(CommitFailedError):
                await c.commit()

            async def rejoined() -> bool:
                await c.getmany(timeout_ms=100)
                if c.assignment() and len(member_ids(shared.port, group)) == 1:
                    try:
                        await c.commit()
                        return True
                    except CommitFailedError:
                        pass
                return False

            await wait_until_async(rejoined, 30, "the consumer to rejoin alone and commit", interval=0)
        finally:
            await c.stop()

    asyncio.run(run())


def test_confluent_consumer_removed_from_its_group_is_rejected_and_rejoins(shared):
    """librdkafka heartbeats within max.poll.interval.ms, so it cannot sleep through a rebalance; instead it is
    removed from the group (an admin LeaveGroup by member id, as removeMembersFromConsumerGroup does) and
    commits before its next heartbeat would have told it."""
    from confluent_kafka import Consumer, KafkaError, KafkaException

    group = "missed-confluent"
    c = Consumer(
        {
            "bootstrap.servers": shared.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 60_000,
            "heartbeat.interval.ms": 50_000,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.subscribe([TOPIC])
        wait_for(lambda: c.poll(0.1) is None and c.assignment(), what="the first assignment")
        c.commit(offsets=_positions(c), asynchronous=False)
        (me,) = member_ids(shared.port, group)
        with RawClient(shared.port) as raw:
            left = raw.request(
                LEAVE,
                3,
                req(
                    LEAVE,
                    3,
                    group_id=group,
                    members=(part(LEAVE, 3, "MemberIdentity", member_id=me, group_instance_id=None),),
                ),
            )
        assert left.members[0].error_code == ErrorCode.none and member_ids(shared.port, group) == []
        with pytest.raises(KafkaException) as rejected:
            c.commit(offsets=_positions(c), asynchronous=False)
        assert rejected.value.args[0].code() in (KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION)

        def rejoined() -> bool:
            c.poll(0.1)
            if not c.assignment() or len(member_ids(shared.port, group)) != 1:
                return False
            try:
                c.commit(offsets=_positions(c), asynchronous=False)
                return True
            except KafkaException:
                return False

        wait_for(rejoined, what="the rejoin")
    finally:
        c.close()


def _positions(c: Any) -> list[Any]:
    from confluent_kafka import TopicPartition

    return [TopicPartition(TOPIC, tp.partition, 5) for tp in c.assignment()]


# -- admin clients ----------------------------------------------------------------------------------------------


def test_confluent_admin_alters_lists_and_deletes_group_offsets(shared):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": shared.bootstrap})
    group = "admin-confluent"
    altered = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, 0, 10), TopicPartition(TOPIC, 2, 30)])]
    )[group].result(timeout=20)
    assert sorted((tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions) == [
        (0, 10, None),
        (2, 30, None),
    ]
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])]
    )[group].result(timeout=20)
    assert {tp.partition: tp.offset for tp in listed.topic_partitions} == {0: 10, 1: -1001, 2: 30}
    admin.delete_consumer_groups([group])[group].result(timeout=20)
    assert confluent_fetch(shared.bootstrap, group) == {}


def test_kafka_python_admin_alters_lists_deletes_offsets_and_groups(shared):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupSubscribedToTopicError, NoError
    from kafka.structs import OffsetAndMetadata

    admin = KafkaAdminClient(bootstrap_servers=shared.bootstrap)
    group = "admin-kafka-python"
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    try:
        result = admin.alter_group_offsets(group, {tp: OffsetAndMetadata(100 + tp.partition, "m", -1) for tp in tps})
        assert set(result.values()) == {NoError}
        listed = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: (om.offset, om.metadata) for tp, om in listed.items()} == {
            p: (100 + p, "m") for p in range(PARTITIONS)
        }
        assert admin.delete_group_offsets(group, [tps[1]]) == {tps[1]: NoError}
        assert sorted(tp.partition for tp in admin.list_group_offsets({group: None})[group]) == [0, 2]

        # A live consumer group keeps the offsets of the topics it subscribes to.
        c = kafka_python_subscriber(
            TOPIC,
            bootstrap_servers=shared.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            wait_for(lambda: c.poll(timeout_ms=100) is not None and c.assignment(), what="an assignment")
            assert admin.delete_group_offsets(group, [tps[0]]) == {tps[0]: GroupSubscribedToTopicError}
        finally:
            c.close()
        assert admin.delete_groups([group]) == {group: "OK"}
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        admin.close()


def test_aiokafka_admin_lists_group_offsets(shared):
    kafka_python_commit(shared.bootstrap, "admin-aiokafka", {0: (3, "x"), 1: (4, "")})
    assert aiokafka_fetch(shared.bootstrap, "admin-aiokafka") == {0: (3, "x"), 1: (4, "")}


# -- deleting a topic ------------------------------------------------------------------------------------------


@embedded_only("ends with a kill -9 and restart of the one broker on its data directory")
def test_deleting_a_topic_deletes_the_offsets_committed_on_it_and_they_stay_deleted(broker_factory):
    # Kafka's onPartitionsDeleted: the offsets go with the topic (tombstones in __consumer_offsets), so a topic
    # created again under the same name does not resume from the old topic's positions, even after a restart.
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = broker_factory(OVERRIDES)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name in (TOPIC, "kept"):
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(timeout=20)
    confluent_commit(broker.bootstrap, "reader", {0: (41, "a"), 2: (9, "")})
    kafka_python_commit(broker.bootstrap, "other-reader", {1: (5, "")})
    kept = ConsumerGroupTopicPartitions("reader", [TopicPartition("kept", 0, 77)])
    admin.alter_consumer_group_offsets([kept])["reader"].result(timeout=20)

    admin.delete_topics([TOPIC])[TOPIC].result(timeout=20)
    assert wait_for(lambda: confluent_fetch(broker.bootstrap, "reader") == {} or None, what="the offsets to go")
    assert confluent_fetch(broker.bootstrap, "other-reader") == {}

    def listed(group: str) -> dict[tuple[str, int], int]:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=20)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}

    assert listed("reader") == {("kept", 0): 77}  # the other topic's offset stays
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=20)
    broker.kill()
    broker.restart()
    # a client that connects after the restart: the one from before would first sit out librdkafka's reconnect
    # backoff, which the refused connections of the restart raise towards reconnect.backoff.max.ms (10 s, +20%
    # jitter) and which alone took the 20 s of `listed` on a loaded machine (soak of f2e36eb, run 3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert wait_for(lambda: confluent_fetch(broker.bootstrap, "reader") == {} or None, what="a fetch after restart")
    assert listed("reader") == {("kept", 0): 77} and listed("other-reader") == {}
