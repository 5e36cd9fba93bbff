"""Topic and broker configs at run time through confluent-kafka's and kafka-python's admin APIs, on both backends
(tests/backends.py, one broker for the module): the calls, their error paths, and the effect on a running
partition (a lowered max.message.bytes refuses a produce; a shorter retention removes old data; a smaller
log.segment.bytes of the broker rolls segments). In a cluster the node that answered applied the change; the
others (which may lead the partition) within a notification, so effects are polled for (`wait_for`)."""

from __future__ import annotations

import time

import pytest
from backends import BACKENDS, start_broker
from groupmembers import wait_for
from pgcluster import knows_topic


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(
        request, tmp_path_factory, "configs", {"num.partitions": "1", "log.retention.check.interval.ms": "200"}
    ) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(admin, name: str, config: dict[str, str] | None = None) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import NewTopic

    (future,) = admin.create_topics([NewTopic(name, 1, 1, config=config or {})]).values()
    future.result(10)
    # known to every node, not only to one: in a cluster the others learn of it from PostgreSQL's notification a few
    # ms after the node that created it answered, and the next request (kafka-python's) may go to any of them
    ports = [b.port for b in admin.list_topics(timeout=10).brokers.values()]
    wait_for(lambda: all(knows_topic(port, name, 1) for port in ports), 10, f"{name} known to every node", 0.1)


def _incremental(admin, resource) -> None:  # type: ignore[no-untyped-def]
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(10)


def _error(call) -> str:  # type: ignore[no-untyped-def]
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as raised:
        call()
    return raised.value.args[0].name()


def _produce(bootstrap: str, topic: str, value: bytes, timestamp: int | None = None) -> str | None:
    """Produce one record and flush; the error's name, or None when it was stored."""
    from confluent_kafka import Producer

    errors: list[str | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.send.max.retries": 0})
    kwargs = {} if timestamp is None else {"timestamp": timestamp}
    p.produce(topic, value=value, partition=0, on_delivery=lambda err, _m: errors.append(err and err.name()), **kwargs)
    assert p.flush(10) == 0
    return errors[0]


def _hour_old_records(bootstrap: str, topic: str):  # type: ignore[no-untyped-def]
    """Five records of partition 0 stamped an hour ago, and (a consumer, the partition's log start offset)."""
    from confluent_kafka import Consumer, TopicPartition

    hour_ago = int(time.time() * 1000) - 3_600_000
    for _ in range(5):
        assert _produce(bootstrap, topic, b"v" * 150, timestamp=hour_ago) is None
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"configs-{topic}"})
    return consumer, lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[0]


def test_confluent_incremental_alter_refuses_what_is_now_too_large(broker, admin):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    _create(admin, "small-messages")
    assert _produce(broker.bootstrap, "small-messages", b"x" * 3000) is None
    _incremental(
        admin,
        ConfigResource(
            "topic",
            "small-messages",
            incremental_configs=[
                ConfigEntry("max.message.bytes", "1000", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ],
        ),
    )
    wait_for(
        lambda: _produce(broker.bootstrap, "small-messages", b"x" * 3000) == "MSG_SIZE_TOO_LARGE",
        10,
        "a 3000-byte record refused",
        interval=0.1,
    )
    (future,) = admin.describe_configs([ConfigResource("topic", "small-messages")]).values()
    entries = future.result(10)
    assert entries["max.message.bytes"].value == "1000"
    assert entries["max.message.bytes"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert entries["cleanup.policy"].value == "delete,compact"
    assert entries["segment.bytes"].source == 5  # DEFAULT_CONFIG
    _incremental(
        admin,
        ConfigResource(
            "topic",
            "small-messages",
            incremental_configs=[
                ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)
            ],
        ),
    )
    wait_for(
        lambda: _produce(broker.bootstrap, "small-messages", b"x" * 3000) is None,
        10,
        "a 3000-byte record stored",
        interval=0.1,
    )


def test_confluent_errors(admin):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    def alter(resource_type: str, name: str, key: str, value: str, op=AlterConfigOpType.SET):  # type: ignore
        return lambda: _incremental(
            admin,
            ConfigResource(
                resource_type, name, incremental_configs=[ConfigEntry(key, value, incremental_operation=op)]
            ),
        )

    _create(admin, "refusing")
    assert _error(alter("topic", "never-made", "retention.ms", "1")) == "UNKNOWN_TOPIC_OR_PART"
    assert _error(alter("topic", "refusing", "retention.ms", "-7")) == "INVALID_CONFIG"
    assert _error(alter("topic", "refusing", "no.such.config", "1")) == "INVALID_CONFIG"
    assert _error(alter("topic", "refusing", "retention.ms", "1", AlterConfigOpType.APPEND)) == "INVALID_CONFIG"
    assert _error(alter("broker", "0", "log.dirs", "/elsewhere")) == "INVALID_REQUEST"
    with pytest.warns(DeprecationWarning):  # AlterConfigs, which confluent-kafka deprecates
        futures = admin.alter_configs([ConfigResource("topic", "never-made", set_config={"retention.ms": "1"})])
    (future,) = futures.values()
    assert _error(lambda: future.result(10)) == "UNKNOWN_TOPIC_OR_PART"


def test_retention_and_segment_size_changed_at_run_time_remove_old_data(broker, admin):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    def set_segment_bytes(value: str | None, op=AlterConfigOpType.SET):  # type: ignore[no-untyped-def]
        _incremental(
            admin,
            ConfigResource(
                "broker", "0", incremental_configs=[ConfigEntry("log.segment.bytes", value, incremental_operation=op)]
            ),
        )

    # every batch rolls a segment (embedded; PostgreSQL removes batches, not segments): old ones can go
    set_segment_bytes("200")
    try:
        (future,) = admin.describe_configs([ConfigResource("broker", "0")]).values()
        assert future.result(10)["log.segment.bytes"].source == 2  # DYNAMIC_BROKER_CONFIG
        _create(admin, "expiring")
        consumer, earliest = _hour_old_records(broker.bootstrap, "expiring")
        assert earliest() == 0
        _incremental(
            admin,
            ConfigResource(
                "topic",
                "expiring",
                incremental_configs=[ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)],
            ),
        )
        wait_for(lambda: earliest() >= 4, 10, "the records older than retention.ms removed", interval=0.1)
        consumer.close()
    finally:
        set_segment_bytes(None, AlterConfigOpType.DELETE)


def test_an_empty_cleanup_policy_keeps_the_log_for_ever(broker, admin):
    """Kafka 4.2 (KAFKA-19112): `cleanup.policy=` is valid and means infinite retention, neither delete nor compact;
    subtracting the last policy leaves it empty."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    def broker_segment_bytes(value: str | None, op=AlterConfigOpType.SET):  # type: ignore[no-untyped-def]
        entry = ConfigEntry("log.segment.bytes", value, incremental_operation=op)
        _incremental(admin, ConfigResource("broker", "0", incremental_configs=[entry]))

    def policy(op: AlterConfigOpType, value: str) -> str:
        entry = ConfigEntry("cleanup.policy", value, incremental_operation=op)
        _incremental(admin, ConfigResource("topic", "forever", incremental_configs=[entry]))
        (future,) = admin.describe_configs([ConfigResource("topic", "forever")]).values()
        return future.result(10)["cleanup.policy"].value

    broker_segment_bytes("200")  # every batch rolls a segment (embedded; PostgreSQL removes batches)
    try:
        _create(admin, "forever", {"cleanup.policy": "", "retention.ms": "60000"})
        consumer, earliest = _hour_old_records(broker.bootstrap, "forever")
        time.sleep(1.0)  # five retention checks (log.retention.check.interval.ms=200) that must delete nothing
        assert earliest() == 0
        assert policy(AlterConfigOpType.SET, "delete") == "delete"  # now retention.ms applies
        wait_for(lambda: earliest() >= 4, 10, "the records older than retention.ms removed", interval=0.1)
        assert policy(AlterConfigOpType.SUBTRACT, "delete") == ""
        consumer.close()
    finally:
        broker_segment_bytes(None, AlterConfigOpType.DELETE)
    assert _error(lambda: _create(admin, "twice", {"cleanup.policy": "delete,delete"})) == "INVALID_CONFIG"


def test_records_stamped_too_far_from_the_broker_s_clock_are_refused(broker, admin):
    """Kafka 4.x refuses a CreateTime record more than message.timestamp.after.max.ms (1 h by default) ahead of its
    clock, or message.timestamp.before.max.ms behind it: INVALID_TIMESTAMP; a LogAppendTime topic takes any."""
    now = int(time.time() * 1000)
    _create(admin, "stamped")
    assert _produce(broker.bootstrap, "stamped", b"v", timestamp=now + 2 * 3_600_000) == "INVALID_TIMESTAMP"
    assert _produce(broker.bootstrap, "stamped", b"v", timestamp=now + 1_800_000) is None
    assert _produce(broker.bootstrap, "stamped", b"v", timestamp=now - 30 * 86_400_000) is None  # any age
    _create(admin, "recent", {"message.timestamp.before.max.ms": "60000"})
    assert _produce(broker.bootstrap, "recent", b"v", timestamp=now - 3_600_000) == "INVALID_TIMESTAMP"
    assert _produce(broker.bootstrap, "recent", b"v") is None
    _create(admin, "appended", {"message.timestamp.type": "LogAppendTime"})
    assert _produce(broker.bootstrap, "appended", b"v", timestamp=now + 48 * 3_600_000) is None
    # Produce v9's answer lists each refused record: its index in the batch and Kafka's message
    import datetime

    from batches import client_batch
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.static.primitive import i16, i32, i32Timedelta
    from rawkafka import RawClient

    batch = client_batch([now, now + 2 * 3_600_000, now, now + 3 * 3_600_000])
    data = TopicProduceData(name="stamped", partition_data=(PartitionProduceData(index=i32(0), records=batch),))
    request = ProduceRequest(transactional_id=None, acks=i16(-1), topic_data=(data,),
                             timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)))  # fmt: skip
    leader = admin.list_topics("stamped", timeout=10).topics["stamped"].partitions[0].leader
    port = admin.list_topics(timeout=10).brokers[leader].port
    with RawClient(port) as client:
        (answer,) = client.request(0, 9, request).responses[0].partition_responses
    assert (answer.error_code, answer.error_message) == (
        32,
        "One or more records have been rejected due to invalid timestamp",
    )
    assert [e.batch_index for e in answer.record_errors] == [1, 3]
    assert answer.record_errors[0].batch_index_error_message.startswith(
        f"Timestamp {now + 2 * 3_600_000} of message with offset 1 is out of range. The timestamp should be within ["
    )


def test_kafka_python_alter_and_describe(admin):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    _create(admin, "legacy-alter", {"retention.ms": "1000"})
    client = KafkaAdminClient(bootstrap_servers=admin_bootstrap(admin))
    topic = ConfigResourceType.TOPIC
    try:
        replaced = client.alter_configs(
            [ConfigResource(topic, "legacy-alter", configs={"max.message.bytes": "4000"})], incremental=False
        )  # AlterConfigs: the whole set replaced
        assert replaced == {"topic": {"legacy-alter": "OK"}}
        appended = client.alter_configs(
            [ConfigResource(topic, "legacy-alter", configs={"cleanup.policy": ("APPEND", "compact")})]
        )
        assert appended == {"topic": {"legacy-alter": "OK"}}
        described = client.describe_configs([ConfigResource(topic, "legacy-alter")], include_synonyms=True)
        entries = described["topic"]["legacy-alter"]
        assert entries["max.message.bytes"]["value"] == "4000"  # (kafka-python sent retention.ms again: still set)
        assert entries["cleanup.policy"]["value"] == "delete,compact"
        assert [s["source"] for s in entries["max.message.bytes"]["synonyms"]] == [
            "DYNAMIC_TOPIC_CONFIG",
            "DEFAULT_CONFIG",
        ]
        refused = client.alter_configs([ConfigResource(topic, "legacy-alter", configs={"segment.bytes": "10"})])
        assert "InvalidConfigurationError" in refused["topic"]["legacy-alter"]
        with pytest.raises(ValueError, match="log.dirs"):  # read_only in DescribeConfigs: refused by the client
            client.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", configs={"log.dirs": "x"})])
    finally:
        client.close()


def test_herd_admin_asks_each_broker_for_its_own_configs(broker, admin):
    """herd's client sends a broker's configs to that broker, the only one that answers for them (on a cluster the
    bootstrap node would refuse another node's id), as Kafka's AdminClient does."""
    import asyncio

    from herd.client import Admin

    nodes = sorted(admin.list_topics(timeout=10).brokers)

    async def each() -> dict[int, str | None]:
        async with Admin(broker.bootstrap) as herd_admin:
            found = {}
            for node in nodes:
                await herd_admin.alter_configs("brokers", str(node), {"log.index.interval.bytes": "8192"})
                entries = await herd_admin.describe_configs("brokers", str(node))
                found[node] = next(e.value for e in entries if e.name == "log.index.interval.bytes")
                await herd_admin.alter_configs("brokers", str(node), delete=["log.index.interval.bytes"])
            return found

    assert asyncio.run(each()) == {node: "8192" for node in nodes}


def admin_bootstrap(admin) -> str:  # type: ignore[no-untyped-def]
    """Every node, as the module's confluent admin client sees them (kafka-python is given the same)."""
    return ",".join(f"{b.host}:{b.port}" for b in admin.list_topics(timeout=10).brokers.values())
