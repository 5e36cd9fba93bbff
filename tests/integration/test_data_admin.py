"""Topic administration and ListOffsets through each client's admin API, with Kafka's error codes, on both
backends (tests/backends.py). One broker serves the module; each test has topics of its own.

A cluster's nodes learn of a topic change shortly after the node that made it answered, as Kafka's brokers do
(its admin client: "it may take several seconds ... for all the brokers to become aware"), so a check of
metadata right after a change polls for it (`_soon`); on the embedded node the first look sees it."""

from __future__ import annotations

import asyncio
import time

import pytest
from backends import BACKENDS, start_broker

from herd.testing.wait import wait_until, wait_until_async


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "admin", {"num.partitions": "1"}) as b:
        yield b


def _soon(check, what: str, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    """Poll `check` until it holds; fail naming `what` after `timeout` seconds."""
    wait_until(check, timeout, what, interval=0.05)


async def _soon_async(check, what: str, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    await wait_until_async(check, timeout, what, interval=0.05)


def _wait(futures: dict) -> dict:
    out = {}
    for key, fut in futures.items():
        try:
            out[key] = fut.result(10)
        except Exception as e:  # noqa: BLE001 - the test inspects the error
            out[key] = e
    return out


def test_confluent_topic_lifecycle(broker):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = _wait(
        admin.create_topics(
            [
                NewTopic("life", 2, 1, config={"retention.ms": "3600000"}),
                NewTopic("bad name!", 1, 1),
                NewTopic("rf4", 1, 4),
                NewTopic("badcfg", 1, 1, config={"no.such.config": "1"}),
            ]
        )
    )
    assert res["life"] is None
    assert res["bad name!"].args[0].code() == KafkaError.TOPIC_EXCEPTION
    assert res["rf4"].args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR  # more replicas than nodes
    assert res["badcfg"].args[0].code() == KafkaError.INVALID_CONFIG
    again = _wait(admin.create_topics([NewTopic("life", 2, 1)]))
    assert again["life"].args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    def partitions(topic: str) -> int:
        found = admin.list_topics(timeout=10).topics.get(topic)
        return -1 if found is None else len(found.partitions)

    _soon(lambda: partitions("life") == 2, "life listed with 2 partitions")
    grown = _wait(admin.create_partitions([NewPartitions("life", 5)]))
    assert grown["life"] is None
    _soon(lambda: partitions("life") == 5, "life listed with 5 partitions")
    shrink = _wait(admin.create_partitions([NewPartitions("life", 3)]))
    assert shrink["life"].args[0].code() == KafkaError.INVALID_PARTITIONS
    unknown = _wait(admin.create_partitions([NewPartitions("nope", 3)]))
    assert unknown["nope"].args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    configs = admin.describe_configs([ConfigResource("topic", "life")])
    entries = list(configs.values())[0].result(10)
    assert entries["retention.ms"].value == "3600000"
    assert entries["cleanup.policy"].value == "delete"
    broker_cfg = list(admin.describe_configs([ConfigResource("broker", "0")]).values())[0].result(10)
    assert broker_cfg["offsets.topic.num.partitions"].value == "50"

    deleted = _wait(admin.delete_topics(["life", "never-existed"]))
    assert deleted["life"] is None
    assert deleted["never-existed"].args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    _soon(lambda: partitions("life") == -1, "life no longer listed")
    assert broker.stored_partitions("life") == []


@pytest.mark.parametrize(
    "name,value,complaint",
    [
        ("max.message.bytes", "-5", "Value must be at least 0"),
        ("retention.ms", "-99", "Value must be at least -1"),
        ("segment.bytes", "1", "Value must be at least 1048576"),
        ("segment.bytes", "99999999999", "Not a number of type INT"),
        ("flush.messages", "0", "Value must be at least 1"),
        ("cleanup.policy", "sometimes", "String must be one of"),
    ],
)
def test_out_of_range_topic_configs_are_refused_as_kafka_does(broker, name, value, complaint):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"cfg-{name.replace('.', '-')}-{value.lstrip('-')}"
    error = _wait(admin.create_topics([NewTopic(topic, 1, 1, config={name: value})]))[topic].args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert error.str().startswith(f"Invalid value {value} for configuration {name}: {complaint}")
    assert topic not in admin.list_topics(timeout=10).topics
    assert broker.stored_partitions(topic) == []


def test_kafka_python_topic_lifecycle(broker):
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions, NewTopic
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError, UnknownTopicOrPartitionError

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("kp", 1, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic("kp", 1, 1)], raise_on_error=True) if _has_kw(
            admin.create_topics
        ) else admin.create_topics([NewTopic("kp", 1, 1)])
    admin.create_partitions({"kp": NewPartitions(total_count=4)})
    _soon(lambda: len(admin.describe_topics(["kp"])[0]["partitions"]) == 4, "kp described with 4 partitions")
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kp": NewPartitions(total_count=2)})
    admin.delete_topics(["kp"])
    _soon(lambda: "kp" not in admin.list_topics(), "kp no longer listed")
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["kp"])
    admin.close()


def _has_kw(fn) -> bool:
    import inspect

    return "raise_on_error" in inspect.signature(fn).parameters


def test_aiokafka_topic_lifecycle(broker):
    async def run() -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic("ak", 2, 1)])
            await admin.create_partitions({"ak": NewPartitions(total_count=3)})

            async def grown() -> bool:
                return len((await admin.describe_topics(["ak"]))[0]["partitions"]) == 3

            await _soon_async(grown, "ak described with 3 partitions")
            await admin.delete_topics(["ak"])

            async def gone() -> bool:
                return "ak" not in await admin.list_topics()

            await _soon_async(gone, "ak no longer listed")
        finally:
            await admin.close()

    asyncio.run(run())


def _produce_timed(bootstrap: str, topic: str, base: int, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=0, timestamp=base + i * 1000)
    assert p.flush(10) == 0


def test_list_offsets_by_timestamp(broker):
    base = int(time.time() * 1000) - 3_600_000
    _produce_timed(broker.bootstrap, "times", base, 100)  # one batch: the lookups must find records within it

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t"})
    found = c.offsets_for_times([TopicPartition("times", 0, base + 50_500)], timeout=10)
    assert found[0].offset == 51
    assert c.offsets_for_times([TopicPartition("times", 0, base)], timeout=10)[0].offset == 0
    assert c.offsets_for_times([TopicPartition("times", 0, base + 10**9)], timeout=10)[0].offset == -1
    assert c.get_watermark_offsets(TopicPartition("times", 0), timeout=10) == (0, 100)
    c.close()

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    k = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = KTP("times", 0)
    result = k.offsets_for_times({tp: base + 99_000})[tp]
    assert (result.offset, result.timestamp) == (99, base + 99_000)
    assert k.beginning_offsets([tp])[tp] == 0 and k.end_offsets([tp])[tp] == 100
    k.close()
