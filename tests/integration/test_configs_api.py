"""AlterConfigs (v0-2), IncrementalAlterConfigs (v0-1) and DescribeConfigs (v1-4) over raw sockets, at every
version kio has, against one in-process embedded broker: Kafka's errors and words, the values a running
partition takes, sources, synonyms and documentation, and the dynamic broker configs surviving a restart."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from inprocess import InProcessBroker
from rawkafka import RawClient

from herd.client.wire import request_builder

TOPIC, BROKER, GROUP = 2, 4, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
ALTER_VERSIONS = (0, 1, 2)
INCREMENTAL_VERSIONS = (0, 1)
DESCRIBE_VERSIONS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def node(tmp_path_factory) -> Iterator[InProcessBroker]:
    data = tmp_path_factory.mktemp("configs-api")
    broker = InProcessBroker({"log.dirs": str(data), "offsets.topic.num.partitions": "1"})
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def client(node) -> Iterator[RawClient]:
    with RawClient(node.port) as c:
        yield c


def create(client: RawClient, name: str, configs: dict[str, str] | None = None) -> None:
    b = request_builder(19, 5)
    topic = b(
        "CreatableTopic",
        name=name,
        num_partitions=1,
        replication_factor=1,
        assignments=(),
        configs=tuple(b("CreatableTopicConfig", name=k, value=v) for k, v in (configs or {}).items()),
    )
    answer = client.request(19, 5, b.request(topics=(topic,), timeout=5000, validate_only=False))
    assert answer.topics[0].error_code == 0


def incremental(
    client: RawClient,
    version: int,
    resources: list[tuple[int, str, list[tuple[str, int, Any]]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    b = request_builder(44, version)
    entries = tuple(
        b(
            "AlterConfigsResource",
            resource_type=t,
            resource_name=n,
            configs=tuple(b("AlterableConfig", name=k, config_operation=op, value=v) for k, op, v in ops),
        )
        for t, n, ops in resources
    )
    answer = client.request(44, version, b.request(resources=entries, validate_only=validate_only))
    return [(int(r.error_code), r.error_message) for r in answer.responses]


def legacy(
    client: RawClient, version: int, resources: list[tuple[int, str, dict[str, Any]]], validate_only: bool = False
) -> list[tuple[int, str | None]]:
    b = request_builder(33, version)
    entries = tuple(
        b(
            "AlterConfigsResource",
            resource_type=t,
            resource_name=n,
            configs=tuple(b("AlterableConfig", name=k, value=v) for k, v in configs.items()),
        )
        for t, n, configs in resources
    )
    answer = client.request(33, version, b.request(resources=entries, validate_only=validate_only))
    return [(int(r.error_code), r.error_message) for r in answer.responses]


def describe(
    client: RawClient, version: int, resource_type: int, name: str, keys: tuple[str, ...] | None = None
) -> Any:
    b = request_builder(32, version)
    resource = b("DescribeConfigsResource", resource_type=resource_type, resource_name=name, configuration_keys=keys)
    answer = client.request(
        32, version, b.request(resources=(resource,), include_synonyms=True, include_documentation=True)
    )
    return answer.results[0]


def partition_config(node: InProcessBroker, topic: str) -> Any:
    return node.server.broker.cluster.get(topic).partitions[0].config


OK = (0, None)


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_incremental_operations_reach_the_running_partition(node, client, version):
    name = f"inc-{version}"
    create(client, name)
    assert incremental(
        client, version, [(TOPIC, name, [("retention.ms", SET, "60000"), ("cleanup.policy", APPEND, "compact")])]
    ) == [OK]
    cfg = partition_config(node, name)
    assert (cfg.retention_ms, cfg.cleanup_policy) == (60000, "delete,compact")
    assert incremental(
        client, version, [(TOPIC, name, [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", DELETE, None)])]
    ) == [OK]
    cfg = partition_config(node, name)
    assert (cfg.retention_ms, cfg.cleanup_policy) == (604800000, "compact")
    assert incremental(client, version, [(TOPIC, name, [("max.message.bytes", SET, "100")])], validate_only=True) == [
        OK
    ]
    assert partition_config(node, name).max_message_bytes == 1048588
    assert incremental(client, version, [(BROKER, "", [("message.max.bytes", SET, "100")])], validate_only=True) == [OK]
    assert partition_config(node, name).max_message_bytes == 1048588
    assert [c.name for c in describe(client, 4, BROKER, "").configs] == []  # nothing stored


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_incremental_errors_are_kafkas(client, version):
    create(client, f"bad-{version}")
    t = f"bad-{version}"
    cases = [
        (
            (TOPIC, t, [("retention.ms", APPEND, "5")]),
            (40, "Can't APPEND to key retention.ms because its type is not LIST."),
        ),
        ((TOPIC, t, [("nope", SET, "1")]), (40, "Unknown topic config name: nope")),
        (
            (TOPIC, t, [("max.message.bytes", SET, "-5")]),
            (40, "Invalid value -5 for configuration max.message.bytes: Value must be at least 0"),
        ),
        (
            (TOPIC, t, [("cleanup.policy", SET, "sometimes")]),
            (40, "Invalid value sometimes for configuration cleanup.policy: String must be one of: compact, delete"),
        ),
        (
            (TOPIC, t, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]),
            (42, "Error due to duplicate config keys"),
        ),
        ((TOPIC, t, [("retention.ms", SET, None)]), (42, "Null value not supported for : retention.ms")),
        ((TOPIC, t, [("retention.ms", 7, "1")]), (42, "Unknown operations type 7")),
        ((TOPIC, "missing", [("retention.ms", SET, "1")]), (3, "The topic 'missing' does not exist.")),
        ((TOPIC, "", [("retention.ms", SET, "1")]), (42, "Default topic resources are not allowed.")),
        (
            (BROKER, "0", [("log.retention.hours", SET, "2")]),
            (42, "Cannot update these configs dynamically: Set(log.retention.hours)"),
        ),
        (
            (BROKER, "0", [("message.max.bytes", SET, "x")]),
            (42, "Invalid value x for configuration message.max.bytes: Not a number of type INT"),
        ),
        ((BROKER, "7", [("message.max.bytes", SET, "1")]), (42, "Unexpected broker id, expected 0, but received 7")),
        ((BROKER, "x", [("message.max.bytes", SET, "1")]), (42, "Node id must be an integer, but it is: x")),
        (
            (BROKER, "", [("message.max.bytes", APPEND, "1")]),
            (40, "Config value append is not allowed for config key: message.max.bytes"),
        ),
        ((BROKER, "", [("no.such", SET, "1")]), (40, "Unknown broker config name: no.such")),
        ((8, "x", [("a", SET, "1")]), (42, "Unknown resource type 8")),
    ]
    for resource, expected in cases:
        assert incremental(client, version, [resource]) == [expected], resource
    twice = incremental(client, version, [(TOPIC, t, [("retention.ms", SET, "1")])] * 2)
    assert twice == [(42, "Each resource must appear at most once.")] * 2


@pytest.mark.parametrize("version", ALTER_VERSIONS)
def test_alter_configs_replaces_the_whole_set(node, client, version):
    name = f"legacy-{version}"
    create(client, name, {"retention.ms": "1000", "flush.messages": "10"})
    assert legacy(client, version, [(TOPIC, name, {"max.message.bytes": "2000"})]) == [OK]
    assert node.server.broker.cluster.get(name).configs == {"max.message.bytes": "2000"}
    cfg = partition_config(node, name)
    assert (cfg.max_message_bytes, cfg.retention_ms, cfg.flush_interval_messages) == (2000, 604800000, 2**63 - 1)
    assert legacy(client, version, [(TOPIC, name, {"segment.bytes": "10"})]) == [
        (40, "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576")
    ]
    assert legacy(client, version, [(TOPIC, name, {"retention.ms": None})]) == [
        (42, "Null value not supported for : retention.ms")
    ]
    assert legacy(client, version, [(TOPIC, name, {})], validate_only=True) == [OK]
    assert node.server.broker.cluster.get(name).configs == {"max.message.bytes": "2000"}
    assert legacy(client, version, [(1, "x", {})]) == [(42, "Unknown resource type 1")]


@pytest.mark.parametrize("version", ALTER_VERSIONS)
def test_alter_configs_replaces_a_brokers_and_a_groups_whole_set(node, client, version):
    """AlterConfigs (the whole set) on the other resource types: the broker's dynamic configs, and a group's
    configs (Kafka's and herd.expected.instance.ids), which a set without them removes."""
    assert legacy(client, version, [(BROKER, "0", {"log.index.interval.bytes": "2048"})]) == [OK]
    assert node.server.broker.config.get("log.index.interval.bytes") == 2048
    assert legacy(client, version, [(BROKER, "0", {})]) == [OK]
    assert node.server.broker.config.get("log.index.interval.bytes") == 4096
    group = f"legacy-group-{version}"

    def group_values() -> dict[str, str]:
        return {c.name: c.value for c in describe(client, 4, GROUP, group).configs}

    given = {"herd.expected.instance.ids": "a,b", "consumer.session.timeout.ms": "50000"}
    assert legacy(client, version, [(GROUP, group, given)]) == [OK]
    assert group_values().items() >= given.items()
    assert legacy(client, version, [(GROUP, group, {"consumer.heartbeat.interval.ms": "6000"})]) == [OK]
    values = group_values()
    assert (values["herd.expected.instance.ids"], values["consumer.session.timeout.ms"]) == ("", "45000")
    assert values["consumer.heartbeat.interval.ms"] == "6000"
    assert legacy(client, version, [(GROUP, group, {})]) == [OK]
    assert group_values()["consumer.heartbeat.interval.ms"] == "5000"


@pytest.mark.parametrize("version", DESCRIBE_VERSIONS)
def test_describe_reports_sources_synonyms_and_documentation(client, version):
    name = f"described-{version}"
    create(client, name, {"max.message.bytes": "5000"})
    result = describe(client, version, TOPIC, name, ("max.message.bytes", "segment.bytes", "retention.ms"))
    entries = {c.name: c for c in result.configs}
    own = entries["max.message.bytes"]
    assert (own.value, own.config_source, own.read_only) == ("5000", 1, False)
    assert [(s.name, s.value, s.source) for s in own.synonyms][0] == ("max.message.bytes", "5000", 1)
    default = entries["segment.bytes"]
    assert (default.value, default.config_source) == ("1073741824", 5)
    assert [(s.name, s.source) for s in default.synonyms] == [("log.segment.bytes", 5)]
    assert entries["retention.ms"].synonyms == ()  # Kafka drops log.retention.hours: not retention.ms's first synonym
    if version >= 3:
        assert own.documentation.startswith("The largest record batch size allowed by Kafka")
        assert own.config_type == 3  # INT


def test_broker_dynamic_configs_apply_at_once_and_survive_a_restart(node, client):
    """...and so does a topic config altered at run time (stored in topics.json and partition.metadata)."""
    create(client, "follows-default")
    create(client, "own-value", {"max.message.bytes": "3000"})
    create(client, "altered")
    assert incremental(client, 1, [(TOPIC, "altered", [("retention.ms", SET, "123456")])]) == [OK]
    assert incremental(
        client,
        1,
        [
            (BROKER, "", [("message.max.bytes", SET, "2000")]),
            (BROKER, "0", [("log.segment.bytes", SET, "4096"), ("max.connections.per.ip", SET, "50")]),
        ],
    ) == [OK, OK]
    assert partition_config(node, "follows-default").max_message_bytes == 2000
    assert partition_config(node, "own-value").max_message_bytes == 3000
    assert partition_config(node, "follows-default").segment_bytes == 4096
    assert node.server.quotas.max_per_ip == 50
    default = describe(client, 4, BROKER, "")
    assert [(c.name, c.value, c.config_source) for c in default.configs] == [("message.max.bytes", "2000", 3)]
    mine = {c.name: c for c in describe(client, 4, BROKER, "0").configs}
    assert (mine["log.segment.bytes"].config_source, mine["log.segment.bytes"].read_only) == (2, False)
    assert [(s.name, s.source) for s in mine["message.max.bytes"].synonyms] == [
        ("message.max.bytes", 3),
        ("message.max.bytes", 5),
    ]
    assert (mine["log.dirs"].read_only, mine["listeners"].read_only) == (True, True)
    topic = {c.name: c for c in describe(client, 4, TOPIC, "follows-default").configs}
    assert (topic["max.message.bytes"].value, topic["max.message.bytes"].config_source) == ("2000", 3)

    data = node.server.config.get("log.dirs")
    node.stop()
    again = InProcessBroker({"log.dirs": data, "offsets.topic.num.partitions": "1"})
    try:
        assert partition_config(again, "follows-default").max_message_bytes == 2000
        assert partition_config(again, "own-value").max_message_bytes == 3000
        assert partition_config(again, "altered").retention_ms == 123456
        assert again.server.quotas.max_per_ip == 50
    finally:
        again.stop()
        node.__init__({"log.dirs": data, "offsets.topic.num.partitions": "1"})  # the module's broker again
