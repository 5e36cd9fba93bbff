"""The incremental config operations and the checks of config changes, as Kafka words them."""

from __future__ import annotations

import pytest

from herd.cluster.config_ops import (
    ConfigChangeError,
    ConfigOp,
    OpType,
    apply_ops,
    broker_not_list,
    check_entries,
    check_ops,
    list_message,
    parse_list,
    topic_not_list,
)
from herd.config import BrokerConfig, ConfigSource, check_dynamic

LISTS = {"cleanup.policy"}


def run(current: dict[str, str], *ops: tuple[str, int, str | None]) -> dict[str, str]:
    parsed = [ConfigOp(*o) for o in ops]
    check_ops(parsed)
    return apply_ops(
        current, parsed, is_list=LISTS.__contains__, default=lambda n: "delete", on_not_list=topic_not_list
    )


def refused(call) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigChangeError) as raised:
        call()
    return raised.value.error_code, str(raised.value)


def test_set_delete_append_subtract():
    assert run({"a": "1"}, ("a", OpType.DELETE, None), ("b", OpType.SET, "2")) == {"b": "2"}
    assert run({}, ("cleanup.policy", OpType.APPEND, "compact,compact")) == {"cleanup.policy": "delete,compact"}
    assert run({"cleanup.policy": "compact"}, ("cleanup.policy", OpType.APPEND, "compact")) == {
        "cleanup.policy": "compact"
    }
    assert run({}, ("cleanup.policy", OpType.SUBTRACT, "delete,never")) == {"cleanup.policy": ""}
    assert run({"x": "1"}, ("y", OpType.DELETE, None)) == {"x": "1"}  # deleting what is not set: nothing


def test_refusals_in_kafkas_words():
    assert refused(lambda: run({}, ("a", OpType.SET, "1"), ("a", OpType.SET, "2"))) == (
        42,
        "Error due to duplicate config keys",
    )
    assert refused(lambda: run({}, ("a", OpType.SET, None), ("b", OpType.APPEND, None))) == (
        42,
        "Null value not supported for : a, b",
    )
    assert refused(lambda: run({}, ("a", 9, "1"))) == (42, "Unknown operations type 9")
    assert refused(lambda: run({}, ("retention.ms", OpType.SUBTRACT, "1"))) == (
        40,
        "Can't SUBTRACT to key retention.ms because its type is not LIST.",
    )
    assert (
        broker_not_list("message.max.bytes", OpType.APPEND)
        == "Config value append is not allowed for config key: message.max.bytes"
    )
    assert refused(lambda: check_entries(["a"], ["a"])) == (42, "Null value not supported for : a")


def test_dynamic_broker_checks():
    check_dynamic({"message.max.bytes": "10", "log.cleanup.policy": "compact,delete"})
    assert refused(lambda: check_dynamic({"log.retention.hours": "1", "listeners": "x"})) == (
        42,
        "Cannot update these configs dynamically: Set(listeners, log.retention.hours)",
    )
    assert refused(lambda: check_dynamic({"log.segment.bytes": "1"})) == (
        42,
        "Invalid value 1 for configuration log.segment.bytes: Value must be at least 14",
    )
    assert refused(lambda: check_dynamic({"what": "1"})) == (40, "Unknown broker config name: what")


def test_dynamic_configs_overlay_and_synonyms():
    static = BrokerConfig.from_properties({"log.retention.hours": "5", "message.max.bytes": "500"})
    config = static.with_dynamic(
        {"log.retention.ms": "1000", "message.max.bytes": "600"}, {"message.max.bytes": "700", "log.dirs": "/ignored"}
    )
    assert (config.retention_ms, config.get("message.max.bytes"), config.get("log.dirs")) == (1000, 700, "./herd-data")
    assert config.static.get("message.max.bytes") == 500
    assert config.synonyms("message.max.bytes") == [
        ("message.max.bytes", "700", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("message.max.bytes", "600", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("message.max.bytes", "500", ConfigSource.STATIC_BROKER_CONFIG),
        ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG),
    ]
    assert config.synonyms("log.retention.minutes") == []  # unset, no default: Kafka lists nothing
    assert config.log_config().retention_ms == 1000
    again = config.with_dynamic({}, {})  # dropping the dynamic configs returns to the static ones
    assert (again.retention_ms, again.get("message.max.bytes")) == (5 * 3_600_000, 500)


def test_lists_are_parsed_and_checked_as_kafka_4_2_does() -> None:
    """ConfigDef.parseType LIST (split on commas with the spaces around them, blank: no item) and ValidList
    (KAFKA-19112: an empty list is valid for cleanup.policy, meaning infinite retention; no empty or repeated
    item), in Kafka's words."""
    assert parse_list("") == parse_list("  ") == []
    assert parse_list(" compact ,delete ") == ["compact", "delete"]
    assert parse_list("delete,,compact") == ["delete", "", "compact"]
    policies = ("compact", "delete")
    for fine in ("", "delete", "compact, delete", " delete "):
        assert list_message("cleanup.policy", fine, policies) is None
    assert list_message("cleanup.policy", "delete,delete", policies) == (
        "Configuration 'cleanup.policy' values must not be duplicated."
    )
    assert (
        list_message("cleanup.policy", "delete,", policies)
        == "Configuration 'cleanup.policy' values must not be empty."
    )
    assert list_message("cleanup.policy", "delete,foo", policies) == (
        "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"
    )
    assert list_message("x", "", policies, empty_allowed=False) == (
        "Configuration 'x' must not be empty. Valid values include: [compact, delete]"
    )


def test_an_empty_cleanup_policy_is_accepted_and_subtracting_the_last_policy_leaves_it_empty() -> None:
    from herd.cluster.topics import TopicError, check_topic_configs
    from herd.log.api import deletes

    assert check_topic_configs({"cleanup.policy": ""}) == {"cleanup.policy": ""}
    assert run({"cleanup.policy": "delete"}, ("cleanup.policy", OpType.SUBTRACT, "delete")) == {"cleanup.policy": ""}
    assert run({}, ("cleanup.policy", OpType.APPEND, " compact ")) == {"cleanup.policy": "delete,compact"}
    with pytest.raises(TopicError, match="values must not be duplicated"):
        check_topic_configs({"cleanup.policy": "compact,compact"})
    assert check_topic_configs({"cleanup.policy": "delete,delete"}, stored=True)  # stored before 4.2's rules
    assert not deletes("") and not deletes("compact") and deletes("compact , delete") and deletes("delete")
    assert (
        BrokerConfig.from_properties({"log.cleanup.policy": "", "log.dirs": "/tmp/x"}).get("log.cleanup.policy") == ""
    )
    assert refused(lambda: check_dynamic({"log.cleanup.policy": "delete,delete"})) == (
        42,
        "Configuration 'log.cleanup.policy' values must not be duplicated.",
    )
