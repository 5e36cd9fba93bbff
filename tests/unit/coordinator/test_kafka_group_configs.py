"""Kafka's own group configs on a GROUP resource (consumer.*, share.*, streams.*: kafka_group_configs.py): the
validation and the words of GroupConfig/GroupConfigManager (confluentinc/kafka 4.2), SET/DELETE and the refusal of
APPEND/SUBTRACT, DescribeConfigs' view of overrides and broker defaults, the 0x7E02 record and its replay, a
failed append rolled back, and the consumer group's heartbeat interval and session timeout taken from them."""

from __future__ import annotations

import pytest

from herd.coordinator import CoordinatorConfig, ErrorCode
from herd.coordinator.consumer.group import ConsumerGroupState
from herd.coordinator.kafka_group_configs import DEFS
from herd.coordinator.records import group_config_record
from herd.coordinator.requests import (
    AlterGroupConfigs,
    DescribeGroupConfigs,
    GroupConfigOp,
    ListConfiguredGroups,
)

from .context import Ctx, reply
from .test_consumer_heartbeat import Consumer, new_ctx
from .test_history_core import reloaded
from .test_preregistration import APPEND, DELETE, NAME, SET, SUBTRACT


def alter(c: Ctx, *ops: tuple[str, int, str | None], group: str = "g", validate_only: bool = False) -> tuple:
    handle, result = c.run(
        "alter_group_configs",
        AlterGroupConfigs(
            group_id=group, ops=tuple(GroupConfigOp(n, o, v) for n, o, v in ops), validate_only=validate_only
        ),
    )
    response = reply(result, handle)
    return (response.error_code, response.error_message), result


def described(c: Ctx, group: str = "g") -> dict[str, tuple[str, bool, str]]:
    handle, result = c.run("describe_group_configs", DescribeGroupConfigs(group_id=group))
    return {e.name: (e.value, e.is_set, e.kind) for e in reply(result, handle).configs}


OK = (ErrorCode.none, None)


def test_every_config_kafka_defines_is_described_with_the_brokers_default_until_overridden() -> None:
    c = Ctx(config=CoordinatorConfig(group_consumer_session_timeout_ms=50_000))
    view = described(c)
    assert list(view) == [d.name for d in DEFS] + [NAME]
    assert view["consumer.session.timeout.ms"] == ("50000", False, "int")  # the broker's setting
    assert view["consumer.heartbeat.interval.ms"] == ("5000", False, "int")
    assert view["share.record.lock.duration.ms"] == ("30000", False, "int")
    assert view["share.auto.offset.reset"] == ("latest", False, "string")
    assert view["share.isolation.level"] == ("read_uncommitted", False, "string")
    assert view["streams.initial.rebalance.delay.ms"] == ("3000", False, "int")
    assert (
        alter(c, ("consumer.session.timeout.ms", SET, " 55000 "), ("share.auto.offset.reset", SET, "earliest"))[0] == OK
    )
    view = described(c)
    assert view["consumer.session.timeout.ms"] == ("55000", True, "int")
    assert view["share.auto.offset.reset"] == ("earliest", True, "string")
    assert alter(c, ("consumer.session.timeout.ms", DELETE, None))[0] == OK
    assert described(c)["consumer.session.timeout.ms"] == ("50000", False, "int")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("consumer.session.timeout.ms", "abc", "Invalid value abc for configuration consumer.session.timeout.ms: "
         "Not a number of type INT"),
        ("consumer.session.timeout.ms", "2147483648", "Not a number of type INT"),
        ("consumer.session.timeout.ms", "0", "Invalid value 0 for configuration consumer.session.timeout.ms: "
         "Value must be at least 1"),
        ("share.record.lock.duration.ms", "999", "Value must be at least 1000"),
        ("streams.num.standby.replicas", "-1", "Value must be at least 0"),
        ("consumer.session.timeout.ms", "44999",
         "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        ("consumer.session.timeout.ms", "60001",
         "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        ("consumer.heartbeat.interval.ms", "4999",
         "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        ("consumer.heartbeat.interval.ms", "15001",
         "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        ("share.record.lock.duration.ms", "14999",
         "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
        ("streams.num.standby.replicas", "3",
         "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
        ("share.isolation.level", "READ_COMMITTED", "Invalid value READ_COMMITTED for configuration "
         "share.isolation.level: String must be one of: read_committed, read_uncommitted"),
        ("share.auto.offset.reset", "none", "The value must be either 'earliest', 'latest' or of the format "
         "'by_duration:<PnDTnHnMn.nS>'."),
        ("share.auto.offset.reset", "by_duration:-PT1H", "by_duration:<PnDTnHnMn.nS>"),
        ("share.auto.offset.reset", "by_duration:PT", "by_duration:<PnDTnHnMn.nS>"),
        ("share.auto.offset.reset", "by_duration:", "by_duration:<PnDTnHnMn.nS>"),
        ("nope.ms", "1", "Unknown group config name: nope.ms"),
    ],
)  # fmt: skip
def test_kafkas_validation_and_words(name: str, value: str, message: str) -> None:
    c = Ctx()
    (code, text), result = alter(c, (name, SET, value))
    assert code == ErrorCode.invalid_config and message in text
    assert result.records == () and described(c)[name if name in described(c) else NAME][1] is False


@pytest.mark.parametrize("value", ["by_duration:PT1H", "by_duration:P1DT2H3M4.5S", "by_duration:pt0s", "earliest"])
def test_share_auto_offset_reset_takes_javas_durations(value: str) -> None:
    c = Ctx()
    assert alter(c, ("share.auto.offset.reset", SET, value))[0] == OK


def test_session_must_exceed_the_heartbeat_interval_with_the_broker_values_filling_in() -> None:
    # the broker allows a 10 s heartbeat; its 45 s session fills in for the check, as GroupConfigManager.validate does
    c = Ctx(config=CoordinatorConfig(group_consumer_max_heartbeat_interval_ms=60_000))
    assert alter(c, ("consumer.heartbeat.interval.ms", SET, "45000"))[0] == (
        ErrorCode.invalid_config,
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms",
    )
    assert alter(c, ("consumer.heartbeat.interval.ms", SET, "15000"))[0] == OK
    # a later change is checked with the overrides already set
    assert alter(c, ("consumer.session.timeout.ms", SET, "45000"))[0] == OK
    assert alter(c, ("consumer.heartbeat.interval.ms", SET, "45000"))[0][0] == ErrorCode.invalid_config


def test_append_subtract_and_null_are_refused_and_nothing_half_applies() -> None:
    c = Ctx()
    assert alter(c, ("consumer.session.timeout.ms", APPEND, "50000"))[0] == (
        ErrorCode.invalid_config,
        "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.",
    )
    assert alter(c, ("consumer.session.timeout.ms", SUBTRACT, "50000"))[0][1].startswith("Can't SUBTRACT")
    assert alter(c, ("consumer.session.timeout.ms", SET, None))[0][0] == ErrorCode.invalid_config
    # one bad entry fails the resource: neither the valid config nor the expected ids beside it are applied
    (code, _), result = alter(c, (NAME, SET, "a"), ("consumer.session.timeout.ms", SET, "50000"), ("x", SET, "1"))
    assert code == ErrorCode.invalid_config and result.records == ()
    assert described(c)["consumer.session.timeout.ms"][1] is False and c.shard.expected_members("g") == ()


def test_validate_only_and_a_repeated_change_write_nothing() -> None:
    c = Ctx()
    code, result = alter(c, ("consumer.session.timeout.ms", SET, "50000"), validate_only=True)
    assert code == OK and result.records == () and described(c)["consumer.session.timeout.ms"][1] is False
    _, first = alter(c, ("consumer.session.timeout.ms", SET, "50000"))
    assert first.records == (group_config_record("g", {"consumer.session.timeout.ms": "50000"}, applied=True),)
    assert alter(c, ("consumer.session.timeout.ms", SET, "50000"))[1].records == ()
    assert alter(c, ("share.session.timeout.ms", DELETE, None))[1].records == ()


def test_overrides_survive_a_reload_and_the_last_delete_is_a_tombstone() -> None:
    c = Ctx()
    alter(c, ("consumer.session.timeout.ms", SET, "50000"), ("share.isolation.level", SET, "read_committed"))
    alter(c, ("consumer.heartbeat.interval.ms", SET, "6000"), group="other")
    again = reloaded(c)
    assert described(again)["consumer.session.timeout.ms"] == ("50000", True, "int")
    assert described(again)["share.isolation.level"] == ("read_committed", True, "string")
    assert described(again, "other")["consumer.heartbeat.interval.ms"] == ("6000", True, "int")
    handle, result = again.run("list_configured_groups", ListConfiguredGroups())
    assert reply(result, handle).group_ids == ("g", "other")
    _, deleted = alter(c, ("consumer.session.timeout.ms", DELETE, None), ("share.isolation.level", DELETE, None))
    assert deleted.records == (group_config_record("g", {}, applied=True),) and deleted.records[0].value is None
    assert all(not is_set for _, is_set, _ in described(reloaded(c)).values())


def test_a_failed_append_puts_the_old_overrides_back() -> None:
    c = Ctx()
    alter(c, ("consumer.session.timeout.ms", SET, "50000"))
    ops = (GroupConfigOp("consumer.session.timeout.ms", SET, "55000"), GroupConfigOp(NAME, SET, "a"))
    result = c.shard.alter_group_configs(AlterGroupConfigs(group_id="g", ops=ops), "hx")
    assert described(c)["consumer.session.timeout.ms"] == ("55000", True, "int")
    failed = c.shard.on_append_failed(result, ErrorCode.not_leader_or_follower)
    assert reply(failed, "hx").error_code == ErrorCode.not_coordinator
    assert described(c)["consumer.session.timeout.ms"] == ("50000", True, "int") and c.shard.expected_members("g") == ()


def test_a_consumer_group_heartbeats_and_is_fenced_on_its_own_configs() -> None:
    ctx = new_ctx(group_consumer_max_heartbeat_interval_ms=15_000)
    alter(ctx, ("consumer.heartbeat.interval.ms", SET, "8000"), ("consumer.session.timeout.ms", SET, "50000"))
    a, b = Consumer(ctx, "a"), Consumer(ctx, "b")
    assert a.heartbeat().heartbeat_interval_ms == 8000
    b.heartbeat()
    ctx.sleep(47_000)
    a.heartbeat()  # the broker's 45 s would have fenced b by now; the group's 50 s have not
    assert set(ctx.shard.consumer_group("g").members) == {"a", "b"}
    ctx.sleep(3_001)
    assert set(ctx.shard.consumer_group("g").members) == {"a"}
    assert ctx.shard.consumer_group("g").state is ConsumerGroupState.ASSIGNING
    alter(ctx, ("consumer.heartbeat.interval.ms", DELETE, None))
    assert a.heartbeat().heartbeat_interval_ms == 5000  # the next answer has the broker's again
    assert ctx.shard.consumer_group_keep_alive("g", "a", a.epoch, "", "")[2] == 5000
