"""DescribeProducers (key 61, v0) on both backends (tests/backends.py): the idempotent producers of a partition as
its leader keeps them, asked with raw requests of every node and through kafka-python's admin client, the only
one of the three Python clients that has the call (confluent-kafka 2.16 and aiokafka 0.14 have none). A real
idempotent producer (confluent-kafka) writes the records."""

from __future__ import annotations

from typing import Any

import pytest
from backends import BACKENDS, start_broker
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32
from rawkafka import RawClient

TOPIC = "described"
COUNTS = {0: 5, 1: 3}  # records produced to each partition


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "producers") as b:
        b.create_topic(TOPIC, len(COUNTS))
        _produce(b.bootstrap)
        yield b


def _produce(bootstrap: str) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 30000,
        }
    )
    for partition, count in COUNTS.items():
        for i in range(count):
            producer.produce(TOPIC, b"value-%d" % i, partition=partition)
    assert producer.flush(30) == 0


def _describe(port: int, *topics: tuple[str, tuple[int, ...]]) -> dict[tuple[str, int], Any]:
    with RawClient(port) as client:
        resp = client.request(
            61,
            0,
            DescribeProducersRequest(
                topics=tuple(
                    TopicRequest(name=name, partition_indexes=tuple(i32(p) for p in partitions))
                    for name, partitions in topics
                )
            ),
        )
    assert resp.throttle_time.total_seconds() == 0
    return {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}


def test_raw_v0_the_leader_tells_each_partitions_producer_and_the_others_are_not_leaders(broker) -> None:
    answers = [_describe(port, (TOPIC, (0, 1, 7))) for port in broker.ports]
    producer_ids = set()
    for partition, count in COUNTS.items():
        by_node = [a[(TOPIC, partition)] for a in answers]
        led = [p for p in by_node if p.error_code == ErrorCode.none]
        assert len(led) == 1, [p.error_code for p in by_node]
        others = {p.error_code for p in by_node if p is not led[0]}
        assert others <= {ErrorCode.not_leader_or_follower}  # cluster mode: the other nodes
        (state,) = led[0].active_producers
        assert (state.producer_epoch, state.last_sequence) == (0, count - 1)
        assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
        assert state.last_timestamp > 1_600_000_000_000  # the last batch's timestamp, now-ish
        producer_ids.add(state.producer_id)
    assert len(producer_ids) == 1  # one producer wrote both partitions
    for answer in answers:
        assert answer[(TOPIC, 7)].error_code == ErrorCode.unknown_topic_or_partition


def test_raw_v0_unknown_and_invalid_topics_are_answered_per_partition(broker) -> None:
    answer = _describe(broker.ports[0], ("no-such-topic", (0, 1)), ("bad name!", (0,)))
    for partition in (0, 1):
        unknown = answer[("no-such-topic", partition)]
        assert unknown.error_code == ErrorCode.unknown_topic_or_partition
        assert unknown.error_message == "This server does not host this topic-partition."
        assert unknown.active_producers == ()
    invalid = answer[("bad name!", 0)]
    assert invalid.error_code == ErrorCode.invalid_topic_exception and invalid.error_message


def test_kafka_python_describe_producers(broker) -> None:
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NotLeaderForPartitionError, UnknownTopicOrPartitionError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        states = admin.describe_producers([TopicPartition(TOPIC, p) for p in COUNTS])  # each from its leader
        assert {tp.partition: [p.last_sequence for p in s.active_producers] for tp, s in states.items()} == {
            p: [count - 1] for p, count in COUNTS.items()
        }
        nodes = [n.node_id for n in admin._client.cluster.brokers()]
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([TopicPartition(TOPIC, 7)], broker_id=nodes[0])
        if broker.backend == "cluster":  # a node asked for a partition it does not lead
            # the leader from a Metadata answer of its own: the admin client's cache may not hold the topic yet
            (described,) = admin.describe_topics([TOPIC])
            leader = next(p["leader_id"] for p in described["partitions"] if p["partition_index"] == 0)
            other = next(n for n in nodes if n != leader)
            with pytest.raises(NotLeaderForPartitionError):
                admin.describe_producers([TopicPartition(TOPIC, 0)], broker_id=other)
    finally:
        admin.close()
