"""Helpers of the Spark connector tests: topics, producing and reading back with confluent-kafka, queries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from herd.testing.wait import collect_until


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    return name


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(name, total)]).values():
        future.result(30)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[int, bytes | None, bytes | None]],
    headers: bool = False,
) -> int:
    """(partition, key, value) records; with `headers`, each gets [("n", its index)]."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    n = 0
    for n, (partition, key, value) in enumerate(records, 1):
        producer.produce(topic, value, key, partition, headers=[("n", b"%d" % n)] if headers else None)
    assert producer.flush(30) == 0
    return n


def numbered(topic_partitions: int, count: int, start: int = 0) -> list[tuple[int, bytes, bytes]]:
    """`count` records numbered from `start`, round-robin over the partitions."""
    return [(i % topic_partitions, b"k%d" % i, b"v%d" % i) for i in range(start, start + count)]


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sparkkit-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    try:
        return collect_until(
            lambda: [m for m in consumer.consume(1000, 0.5) if m.error() is None],
            lambda out: len(out) >= expected,
            timeout,
        )
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        answered = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answered}


def source(spark: Any, bootstrap: str, stream: bool = False, **options: Any) -> Any:
    """spark.read(Stream).format("herd") with options given as keyword arguments (camelCase as in Spark;
    `kafka_group_id` style names become `kafka.group.id`)."""
    reader = (spark.readStream if stream else spark.read).format("herd")
    reader = reader.option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key.replace("_", "."), str(value))
    return reader.load()
