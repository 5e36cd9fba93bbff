"""Kafka 4.2's own group configs (GROUP resources of IncrementalAlterConfigs and DescribeConfigs): names, types,
defaults and validation, as apache/kafka group-coordinator/src/main/java/org/apache/kafka/coordinator/group/
GroupConfig.java and GroupConfigManager.java define them (read from confluentinc/kafka's 4.2 branch).

A group's overrides are a name -> string map (what the admin client sent, as Kafka stores it). `validate` checks a
group's whole set after a change, as Kafka's controller does (ControllerConfigurationValidator, GROUP case): every
name must be a group config ("Unknown group config name: x"); each value must parse as its type and pass its
ConfigDef validator, with ConfigDef's words ("Invalid value x for configuration y: Not a number of type INT",
"...: Value must be at least 1"); then GroupConfig.validateValues' checks against the broker's bounds
(`group.consumer.min.session.timeout.ms` and so on) and session > heartbeat interval. As in Kafka, the values not
overridden take, for that check, the broker's `group.consumer.session.timeout.ms` and
`group.consumer.heartbeat.interval.ms` and ConfigDef's static defaults for the rest
(GroupConfigManager.validate: extractConsumerGroupConfigMap). Every failure is INVALID_CONFIG.

`effective` is what DescribeConfigs shows: each config's override, else the broker's default (ConfigHelper's
GroupConfig.fromProps(extractGroupConfigMap, overrides): the consumer and share session, heartbeat and record lock
settings follow the broker; the others are ConfigDef's defaults).

The consumer configs apply now: a consumer group's members get `consumer.heartbeat.interval.ms` in every
heartbeat answer and are fenced after `consumer.session.timeout.ms` (consumer_heartbeat.py). The share and streams
configs are stored and described for groups herd does not have yet (share groups: issue 32; streams groups: not
planned), so that tools that set them work as against Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from herd.coordinator.config import CoordinatorConfig
from herd.coordinator.errors import CoordinatorError, ErrorCode

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
STREAMS_SESSION_TIMEOUT_MS = "streams.session.timeout.ms"
STREAMS_HEARTBEAT_INTERVAL_MS = "streams.heartbeat.interval.ms"
STREAMS_NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"
STREAMS_INITIAL_REBALANCE_DELAY_MS = "streams.initial.rebalance.delay.ms"

# java.time.Duration.parse's grammar (ISO-8601 PnDTnHnMn.nS, letters in either case, signs allowed per part)
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def _offset_reset(name: str, value: str) -> None:
    """ShareGroupAutoOffsetResetStrategy.Validator: earliest, latest or by_duration:<a non-negative duration>."""
    if value in ("earliest", "latest") or _non_negative_duration(value.removeprefix("by_duration:"), value):
        return
    raise _invalid(
        name,
        value,
        f"Invalid value `{value}` for configuration {name}. The value must be either 'earliest', 'latest' or of "
        "the format 'by_duration:<PnDTnHnMn.nS>'.",
    )


def _non_negative_duration(text: str, whole: str) -> bool:
    if not whole.startswith("by_duration:"):
        return False
    total = _duration_ns(text)
    return total is not None and total >= 0


def _duration_ns(text: str) -> int | None:
    """An ISO-8601 duration (Java's Duration.parse: PnDTnHnMn.nS) in nanoseconds; None if it is not one."""
    m = _DURATION.fullmatch(text)
    if m is None or (m.group(3) is not None and m.group(3).upper() == "T") or not any(m.group(i) for i in (2, 4, 5, 6)):
        return None
    sign = -1 if m.group(1) == "-" else 1
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = m.group(7) or ""
    nanos = int(fraction.ljust(9, "0")) if fraction else 0
    if m.group(6) and m.group(6).startswith("-"):
        nanos = -nanos
    return sign * ((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1_000_000_000 + nanos)


def by_duration_ms(value: str) -> int | None:
    """The duration of a share.auto.offset.reset of `by_duration:<duration>`, in milliseconds; None for earliest
    and latest (or anything else)."""
    if not value.startswith("by_duration:"):
        return None
    total = _duration_ns(value.removeprefix("by_duration:"))
    return None if total is None else total // 1_000_000


def _one_of(*allowed: str) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        if value not in allowed:
            raise _invalid(name, value, f"String must be one of: {', '.join(allowed)}")

    return check


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    kind: str
    """"int" or "string", as DescribeConfigs names the type."""
    default: int | str
    """ConfigDef's static default (GroupCoordinatorConfig's, ShareGroupConfig's)."""
    minimum: int | None = None
    check: Callable[[str, str], None] | None = None
    broker_default: str | None = None
    """The CoordinatorConfig field whose value is the default when the broker sets it (extractGroupConfigMap)."""
    documentation: str = ""


DEFS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef(
        CONSUMER_SESSION_TIMEOUT_MS, "int", 45_000, 1, None, "group_consumer_session_timeout_ms",
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    GroupConfigDef(
        CONSUMER_HEARTBEAT_INTERVAL_MS, "int", 5_000, 1, None, "group_consumer_heartbeat_interval_ms",
        "The heartbeat interval given to the members of a consumer group.",
    ),
    GroupConfigDef(
        SHARE_SESSION_TIMEOUT_MS, "int", 45_000, 1, None, "group_share_session_timeout_ms",
        "The timeout to detect client failures when using the share group protocol.",
    ),
    GroupConfigDef(
        SHARE_HEARTBEAT_INTERVAL_MS, "int", 5_000, 1, None, "group_share_heartbeat_interval_ms",
        "The heartbeat interval given to the members of a share group.",
    ),
    GroupConfigDef(
        SHARE_RECORD_LOCK_DURATION_MS, "int", 30_000, 1000, None, "group_share_record_lock_duration_ms",
        "The record acquisition lock duration in milliseconds for share groups.",
    ),
    GroupConfigDef(
        SHARE_AUTO_OFFSET_RESET, "string", "latest", None, _offset_reset, None,
        "The strategy to initialize the share-partition start offset: earliest, latest or "
        "by_duration:<PnDTnHnMn.nS>.",
    ),
    GroupConfigDef(
        SHARE_ISOLATION_LEVEL, "string", "read_uncommitted", None, _one_of("read_committed", "read_uncommitted"),
        None, "Controls how to read records written transactionally by a share group.",
    ),
    GroupConfigDef(
        STREAMS_SESSION_TIMEOUT_MS, "int", 45_000, 1, None, None,
        "The timeout to detect client failures when using the streams group protocol.",
    ),
    GroupConfigDef(
        STREAMS_HEARTBEAT_INTERVAL_MS, "int", 5_000, 1, None, None,
        "The heartbeat interval given to the members of a streams group.",
    ),
    GroupConfigDef(
        STREAMS_NUM_STANDBY_REPLICAS, "int", 0, 0, None, None, "The number of standby replicas for each task."
    ),
    GroupConfigDef(
        STREAMS_INITIAL_REBALANCE_DELAY_MS, "int", 3_000, 0, None, None,
        "The amount of time the group coordinator will wait for more streams clients to join a new group "
        "before performing the first rebalance.",
    ),
)  # fmt: skip
BY_NAME: Mapping[str, GroupConfigDef] = {d.name: d for d in DEFS}


def _invalid(name: str, value: str, message: str) -> CoordinatorError:
    """ConfigException(name, value, message)'s text, as INVALID_CONFIG."""
    return CoordinatorError(ErrorCode.invalid_config, f"Invalid value {value} for configuration {name}: {message}")


def _parse(d: GroupConfigDef, value: str) -> int | str:
    """ConfigDef.parseType and the validator: an INT is trimmed and must fit 32 bits."""
    if d.kind == "int":
        text = value.strip()
        if not re.fullmatch(r"[-+]?[0-9]+", text) or not -(2**31) <= int(text) < 2**31:
            raise _invalid(d.name, value, "Not a number of type INT")
        number = int(text)
        if d.minimum is not None and number < d.minimum:
            raise _invalid(d.name, str(number), f"Value must be at least {d.minimum}")
        return number
    value = value.strip()
    if d.check is not None:
        d.check(d.name, value)
    return value


def _broker_default(d: GroupConfigDef, config: CoordinatorConfig) -> int | str:
    return d.default if d.broker_default is None else getattr(config, d.broker_default)


def validate(overrides: Mapping[str, str], config: CoordinatorConfig) -> None:
    """Raise CoordinatorError(INVALID_CONFIG) unless `overrides` is a valid set of a group's configs."""
    for name in overrides:
        if name not in BY_NAME:
            raise CoordinatorError(ErrorCode.invalid_config, f"Unknown group config name: {name}")
    given = {d.name: _parse(d, overrides[d.name]) for d in DEFS if d.name in overrides}  # ConfigDef.parse's order
    consumer_defaults = {
        CONSUMER_SESSION_TIMEOUT_MS: config.group_consumer_session_timeout_ms,
        CONSUMER_HEARTBEAT_INTERVAL_MS: config.group_consumer_heartbeat_interval_ms,
    }
    values = {d.name: given.get(d.name, consumer_defaults.get(d.name, d.default)) for d in DEFS}
    bounds = [  # GroupConfig.validateValues, in its order
        (CONSUMER_HEARTBEAT_INTERVAL_MS, "consumer", "heartbeat.interval.ms",
         config.group_consumer_min_heartbeat_interval_ms, config.group_consumer_max_heartbeat_interval_ms),
        (CONSUMER_SESSION_TIMEOUT_MS, "consumer", "session.timeout.ms", config.group_consumer_min_session_timeout_ms,
         config.group_consumer_max_session_timeout_ms),
        (SHARE_HEARTBEAT_INTERVAL_MS, "share", "heartbeat.interval.ms", config.group_share_min_heartbeat_interval_ms,
         config.group_share_max_heartbeat_interval_ms),
        (SHARE_SESSION_TIMEOUT_MS, "share", "session.timeout.ms", config.group_share_min_session_timeout_ms,
         config.group_share_max_session_timeout_ms),
        (SHARE_RECORD_LOCK_DURATION_MS, "share", "record.lock.duration.ms",
         config.group_share_min_record_lock_duration_ms, config.group_share_max_record_lock_duration_ms),
        (STREAMS_HEARTBEAT_INTERVAL_MS, "streams", "heartbeat.interval.ms",
         config.group_streams_min_heartbeat_interval_ms, config.group_streams_max_heartbeat_interval_ms),
        (STREAMS_SESSION_TIMEOUT_MS, "streams", "session.timeout.ms", config.group_streams_min_session_timeout_ms,
         config.group_streams_max_session_timeout_ms),
    ]  # fmt: skip
    for name, kind, suffix, low, high in bounds:
        value = values[name]
        assert isinstance(value, int)
        if value < low:
            raise _bound(f"{name} must be greater than or equal to group.{kind}.min.{suffix}")
        if value > high:
            raise _bound(f"{name} must be less than or equal to group.{kind}.max.{suffix}")
    standby = values[STREAMS_NUM_STANDBY_REPLICAS]
    assert isinstance(standby, int)
    if standby > config.group_streams_max_standby_replicas:
        raise _bound(f"{STREAMS_NUM_STANDBY_REPLICAS} must be less than or equal to group.streams.max.standby.replicas")
    for kind in ("consumer", "share", "streams"):
        session, interval = values[f"{kind}.session.timeout.ms"], values[f"{kind}.heartbeat.interval.ms"]
        assert isinstance(session, int) and isinstance(interval, int)
        if session <= interval:
            raise _bound(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")


def _bound(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.invalid_config, message)


def effective(overrides: Mapping[str, str], config: CoordinatorConfig) -> list[tuple[GroupConfigDef, str, bool]]:
    """Every group config with the value in force (as a string) and whether the group overrides it."""
    out = []
    for d in DEFS:
        if d.name in overrides:
            out.append((d, str(_parse(d, overrides[d.name])), True))
        else:
            out.append((d, str(_broker_default(d, config)), False))
    return out


def int_value(overrides: Mapping[str, str] | None, name: str, default: int) -> int:
    """A group's int config: its override, else `default` (the broker's setting)."""
    if not overrides or name not in overrides:
        return default
    return int(overrides[name].strip())
