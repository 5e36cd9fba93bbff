"""Produce and read back with each real Kafka client, the same way for all three."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from herd.testing.wait import collect_until, collect_until_async

N_PARTITIONS = 3


@dataclass(frozen=True)
class Msg:
    partition: int
    offset: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def payload(i: int, size: int = 100) -> bytes:
    base = b"value-%06d-" % i
    return (base * (size // len(base) + 1))[:size]


def headers_for(i: int) -> list[tuple[str, bytes]]:
    return [("i", b"%d" % i), ("kind", b"test")]


# -- confluent-kafka -------------------------------------------------------------------------------------------


def confluent_produce(bootstrap: str, topic: str, n: int, codec: str, **extra: object) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, **extra})
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"k%d" % i, value=payload(i), headers=headers_for(i))
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(60) == 0, "messages left undelivered"


def confluent_read(bootstrap: str, topic: str, n: int, timeout_s: float = 60) -> list[Msg]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(N_PARTITIONS)])

    def poll() -> list[Msg]:
        return [
            Msg(
                m.partition(),
                m.offset(),
                m.key(),
                m.value(),
                tuple((k, v) for k, v in (m.headers() or [])),
                m.timestamp()[1],
            )
            for m in c.consume(5000, timeout=0.5)
            if m.error() is None
        ]

    try:
        return collect_until(poll, lambda out: len(out) >= n, timeout_s)
    finally:
        c.close()


def confluent_read_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 60) -> dict[int, list[bytes]]:
    """Every value of `topic` by partition, in offset order (a subscribed consumer of a new group, from the
    earliest offsets): `expected` of them, then whatever more arrives within half a second, so that a duplicate
    beyond `expected` shows up too."""
    from collections import defaultdict

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-all-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: dict[int, list[bytes]] = defaultdict(list)

    def poll() -> list[Any]:
        message = consumer.poll(0.5)
        return [] if message is None or message.error() else [message]

    try:
        for message in collect_until(poll, lambda got: len(got) >= expected, timeout_s):
            values[message.partition()].append(message.value())
        time.sleep(0.5)
        while (message := consumer.poll(0.5)) is not None:
            if not message.error():
                values[message.partition()].append(message.value())
    finally:
        consumer.close()
    return values


# -- kafka-python ----------------------------------------------------------------------------------------------


def kafka_python_produce(bootstrap: str, topic: str, n: int, codec: str) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec)
    futures = [p.send(topic, key=b"k%d" % i, value=payload(i), headers=headers_for(i)) for i in range(n)]
    p.flush(60)
    for f in futures:
        f.get(timeout=10)
    p.close()


def kafka_python_read(bootstrap: str, topic: str, n: int, timeout_s: float = 60) -> list[Msg]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    parts = [TopicPartition(topic, p) for p in range(N_PARTITIONS)]
    c.assign(parts)
    c.seek_to_beginning(*parts)

    def poll() -> list[Msg]:
        return [
            Msg(tp.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
            for tp, records in c.poll(timeout_ms=500, max_records=5000).items()
            for r in records
        ]

    try:
        return collect_until(poll, lambda out: len(out) >= n, timeout_s)
    finally:
        c.close()


# -- aiokafka --------------------------------------------------------------------------------------------------


def aiokafka_produce(bootstrap: str, topic: str, n: int, codec: str) -> None:
    async def run() -> None:
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec)
        await p.start()
        try:
            futures = [await p.send(topic, key=b"k%d" % i, value=payload(i), headers=headers_for(i)) for i in range(n)]
            await asyncio.gather(*futures)
        finally:
            await p.stop()

    asyncio.run(run())


def aiokafka_read(bootstrap: str, topic: str, n: int, timeout_s: float = 60) -> list[Msg]:
    async def run() -> list[Msg]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()

        async def poll() -> list[Msg]:
            return [
                Msg(tp.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
                for tp, records in (await c.getmany(timeout_ms=500, max_records=5000)).items()
                for r in records
            ]

        try:
            parts = [TopicPartition(topic, p) for p in range(N_PARTITIONS)]
            c.assign(parts)
            await c.seek_to_beginning(*parts)
            return await collect_until_async(poll, lambda out: len(out) >= n, timeout_s)
        finally:
            await c.stop()

    return asyncio.run(run())


# -- a consumer group's round trip, with any client settings (the security tests) ------------------------------


def confluent_group_round_trip(config: dict[str, Any], topic: str, n: int, group: str) -> tuple[list[bytes], int]:
    """Produce values v0..v{n-1} with `config`, read them in consumer group `group` from the earliest offset and
    commit: the values read, and the committed offsets summed over the assigned partitions."""
    from confluent_kafka import Consumer, Producer

    producer = Producer(config)
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])

    def poll() -> list[bytes]:
        messages = consumer.consume(100, timeout=0.5)
        for message in messages:
            assert message.error() is None, message.error()
        return [message.value() for message in messages]

    try:
        values = collect_until(poll, lambda values: len(values) >= n, 60)
        consumer.commit(asynchronous=False)
        committed = sum(tp.offset for tp in consumer.committed(consumer.assignment(), timeout=10))
    finally:
        consumer.close()
    return values, committed


def kafka_python_group_round_trip(config: dict[str, Any], topic: str, n: int, group: str) -> tuple[list[bytes], int]:
    """As confluent_group_round_trip, with kafka-python's settings; the committed offset of partition 0."""
    from groupmembers import kafka_python_subscriber
    from kafka import KafkaProducer, TopicPartition

    producer = KafkaProducer(**config)
    for i in range(n):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i).get(30)
    producer.close()
    consumer = kafka_python_subscriber(
        topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **config
    )
    try:
        values = collect_until(
            lambda: [r.value for records in consumer.poll(500).values() for r in records],
            lambda values: len(values) >= n,
            60,
        )
        consumer.commit()
        committed = consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close()
    return values, committed


def aiokafka_group_round_trip(config: dict[str, Any], topic: str, n: int, group: str) -> tuple[list[bytes], int]:
    """As confluent_group_round_trip, with aiokafka's settings; the committed offset of partition 0."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> tuple[list[bytes], int]:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for i in range(n):
                await producer.send_and_wait(topic, key=b"k%d" % i, value=b"v%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **config
        )
        await consumer.start()

        async def poll() -> list[bytes]:
            return [r.value for records in (await consumer.getmany(timeout_ms=500)).values() for r in records]

        try:
            values = await collect_until_async(poll, lambda values: len(values) >= n, 60)
            await consumer.commit()
            committed = await consumer.committed(TopicPartition(topic, 0))
        finally:
            await consumer.stop()
        return values, committed

    return asyncio.run(run())


PRODUCERS = {"confluent": confluent_produce, "kafka-python": kafka_python_produce, "aiokafka": aiokafka_produce}
READERS = {"confluent": confluent_read, "kafka-python": kafka_python_read, "aiokafka": aiokafka_read}


def check_exact(messages: list[Msg], n: int) -> None:
    """Every message 0..n-1 exactly once, intact, and in production order within each partition."""
    seen = sorted(int(dict(m.headers)["i"]) for m in messages)
    assert seen == list(range(n)), f"got {len(seen)} messages, {len(set(seen))} distinct, expected {n}"
    by_partition: dict[int, list[Msg]] = {}
    for m in messages:
        i = int(dict(m.headers)["i"])
        assert m.key == b"k%d" % i and m.value == payload(i), f"message {i} altered"
        assert list(m.headers) == [(k, v) for k, v in headers_for(i)]
        by_partition.setdefault(m.partition, []).append(m)
    for part in by_partition.values():
        offsets = [m.offset for m in part]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        order = [int(dict(m.headers)["i"]) for m in sorted(part, key=lambda m: m.offset)]
        assert order == sorted(order), "production order not kept within a partition"
