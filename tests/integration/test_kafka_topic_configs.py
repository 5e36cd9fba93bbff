"""Every topic config of Kafka 4.2 (issue 34 point 1), with real clients on both backends: a topic created with each
one, each described (value and source), each changed at run time, and a value Kafka refuses refused with Kafka's
message.

The names are Kafka 4.2's own list, LogConfig.CONFIG (confluentinc/kafka, branch 4.2 at d26e85231a8f,
storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java, the names from
clients/.../common/config/TopicConfig.java and server-common/.../server/config/QuotaConfig.java); the refusals are
the words of its validators (ConfigDef's Range, ValidString, ValidList and Boolean parsing, CompressionType's level
validators, ThrottledReplicaListValidator, LogConfig.validateRemoteStorageOnlyIfSystemEnabled). Which of them herd
applies and which it accepts without effect is docs/compatibility.md's "Topic configs" table.
"""

from __future__ import annotations

import uuid

import pytest
from backends import BACKENDS, start_broker

from herd.cluster.topics import TOPIC_CONFIGS

# LogConfig.CONFIG's names, in its order
KAFKA_4_2_TOPIC_CONFIGS = (
    "segment.bytes", "segment.ms", "segment.jitter.ms", "segment.index.bytes", "flush.messages", "flush.ms",
    "retention.bytes", "retention.ms", "max.message.bytes", "index.interval.bytes", "delete.retention.ms",
    "min.compaction.lag.ms", "max.compaction.lag.ms", "file.delete.delay.ms", "min.cleanable.dirty.ratio",
    "cleanup.policy", "unclean.leader.election.enable", "min.insync.replicas", "compression.type",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "preallocate",
    "message.timestamp.type", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas", "remote.storage.enable",
    "local.retention.ms", "local.retention.bytes", "remote.log.copy.disable", "remote.log.delete.on.disable",
)  # fmt: skip

# name: (a value to create the topic with, another to change it to, a value Kafka refuses, Kafka's message)
CASES: dict[str, tuple[str, str, str, str]] = {
    "segment.bytes": ("2097152", "3145728", "1024", "Value must be at least 1048576"),
    "segment.ms": ("3600000", "7200000", "0", "Value must be at least 1"),
    "segment.jitter.ms": ("10", "20", "-1", "Value must be at least 0"),
    "segment.index.bytes": ("4096", "8192", "3", "Value must be at least 4"),
    "flush.messages": ("100", "200", "0", "Value must be at least 1"),
    "flush.ms": ("1000", "2000", "-1", "Value must be at least 0"),
    "retention.bytes": ("1000000", "-1", "x", "Not a number of type LONG"),
    "retention.ms": ("3600000", "-1", "-2", "Value must be at least -1"),
    "max.message.bytes": ("100000", "200000", "-1", "Value must be at least 0"),
    "index.interval.bytes": ("8192", "4096", "-1", "Value must be at least 0"),
    "delete.retention.ms": ("1000", "2000", "-1", "Value must be at least 0"),
    "min.compaction.lag.ms": ("10", "20", "-1", "Value must be at least 0"),
    "max.compaction.lag.ms": ("100000", "200000", "0", "Value must be at least 1"),
    "file.delete.delay.ms": ("1000", "0", "-1", "Value must be at least 0"),
    "min.cleanable.dirty.ratio": ("0.25", "0.75", "1.5", "Value must be no more than 1"),
    "cleanup.policy": ("compact,delete", "", "delete,delete", "values must not be duplicated"),
    "unclean.leader.election.enable": ("true", "false", "yes", "Expected value to be either true or false"),
    "min.insync.replicas": ("1", "1", "0", "Value must be at least 1"),
    "compression.type": ("zstd", "lz4", "brotli", "String must be one of"),
    "compression.gzip.level": ("5", "-1", "0", "Value must be between 1 and 9 or equal to -1"),
    "compression.lz4.level": ("4", "17", "18", "Value must be no more than 17"),
    "compression.zstd.level": ("10", "-5", "23", "Value must be no more than 22"),
    "preallocate": ("true", "false", "1", "Expected value to be either true or false"),
    "message.timestamp.type": ("LogAppendTime", "CreateTime", "Now", "String must be one of"),
    "message.timestamp.before.max.ms": ("86400000", "1000", "-1", "Value must be at least 0"),
    "message.timestamp.after.max.ms": ("60000", "1000", "-1", "Value must be at least 0"),
    "leader.replication.throttled.replicas": ("0:1,0:2", "*", "0-1", "must be the literal '*'"),
    "follower.replication.throttled.replicas": ("*", "0:0", "all", "must be the literal '*'"),
    "remote.storage.enable": ("false", "false", "true", "Tiered Storage functionality is disabled in the broker"),
    "local.retention.ms": ("-2", "1000", "-3", "Value must be at least -2"),
    "local.retention.bytes": ("-2", "1000", "-3", "Value must be at least -2"),
    "remote.log.copy.disable": ("true", "false", "no", "Expected value to be either true or false"),
    "remote.log.delete.on.disable": ("true", "false", "no", "Expected value to be either true or false"),
}


def test_herd_knows_exactly_kafka_s_topic_configs() -> None:
    assert set(TOPIC_CONFIGS) == set(KAFKA_4_2_TOPIC_CONFIGS) == set(CASES)


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "kafkaconfigs", {"num.partitions": "1"}) as b:
        yield b


def test_every_topic_config_is_created_described_changed_and_checked(broker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    prefix = f"kc-{uuid.uuid4().hex[:6]}"
    topics = {name: f"{prefix}-{name}" for name in KAFKA_4_2_TOPIC_CONFIGS}
    created = admin.create_topics([NewTopic(topics[n], 1, 1, config={n: CASES[n][0]}) for n in topics])
    for future in created.values():
        future.result(30)

    def described(name: str):  # type: ignore[no-untyped-def]
        (future,) = admin.describe_configs([ConfigResource("topic", topics[name])]).values()
        return future.result(30)

    for name in KAFKA_4_2_TOPIC_CONFIGS:
        entry = described(name)[name]
        assert (entry.value, entry.source) == (CASES[name][0], 1), name  # DYNAMIC_TOPIC_CONFIG
        others = described(name)
        assert set(others) >= set(KAFKA_4_2_TOPIC_CONFIGS), name  # every config listed, with its default

    changes = [
        ConfigResource(
            "topic",
            topics[name],
            incremental_configs=[ConfigEntry(name, CASES[name][1], incremental_operation=AlterConfigOpType.SET)],
        )
        for name in KAFKA_4_2_TOPIC_CONFIGS
    ]
    for future in admin.incremental_alter_configs(changes).values():
        future.result(30)
    for name in KAFKA_4_2_TOPIC_CONFIGS:
        assert described(name)[name].value == CASES[name][1], name

    for name in KAFKA_4_2_TOPIC_CONFIGS:
        refused = admin.create_topics(
            [NewTopic(f"{prefix}-refused", 1, 1, config={name: CASES[name][2]})], validate_only=True
        )
        with pytest.raises(KafkaException) as raised:
            next(iter(refused.values())).result(30)
        error = raised.value.args[0]
        assert error.name() == "INVALID_CONFIG" and CASES[name][3] in error.str(), (name, error.str())


def test_the_defaults_are_kafka_s(broker) -> None:
    """A topic without configs: each config's value is Kafka's default (its broker setting's, else LogConfig's)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"defaults-{uuid.uuid4().hex[:6]}"
    next(iter(admin.create_topics([NewTopic(topic, 1, 1)]).values())).result(30)
    (future,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    entries = future.result(30)
    expected = {
        "segment.ms": "604800000",  # log.roll.hours, 168
        "segment.jitter.ms": "0",
        "segment.index.bytes": "10485760",
        "file.delete.delay.ms": "60000",
        "max.compaction.lag.ms": "9223372036854775807",
        "min.cleanable.dirty.ratio": "0.5",
        "unclean.leader.election.enable": "false",
        "compression.gzip.level": "-1",
        "compression.lz4.level": "9",
        "compression.zstd.level": "3",
        "message.timestamp.after.max.ms": "3600000",
        "local.retention.ms": "-2",
        "leader.replication.throttled.replicas": "",
        "remote.storage.enable": "false",
    }
    assert {name: entries[name].value for name in expected} == expected
    assert entries["segment.ms"].source == 5 and entries["remote.storage.enable"].source == 5  # DEFAULT_CONFIG


def test_compaction_lags_that_conflict_are_refused(broker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "1000"}
    refused = admin.create_topics([NewTopic(f"lags-{uuid.uuid4().hex[:6]}", 1, 1, config=config)])
    with pytest.raises(KafkaException) as raised:
        next(iter(refused.values())).result(30)
    assert (
        raised.value.args[0]
        .str()
        .endswith("conflict topic config setting min.compaction.lag.ms (5000) > max.compaction.lag.ms (1000)")
    )
