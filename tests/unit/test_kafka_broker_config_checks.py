"""Kafka 4.2's broker configs herd accepts without effect (herd.kafka_broker_configs): their checks at startup and at
run time, in Kafka's words, and how their values are written back."""

from __future__ import annotations

import pytest

from herd.cluster.config_ops import ConfigChangeError
from herd.config import SETTINGS_BY_NAME, BrokerConfig, ConfigError, check_dynamic, java_double, unparse


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        (
            "security.inter.broker.protocol",
            "FOO",
            "Invalid value FOO for configuration security.inter.broker.protocol: String must be one of: PLAINTEXT, "
            "SSL, SASL_PLAINTEXT, SASL_SSL",
        ),
        (
            "sasl.oauthbearer.assertion.algorithm",
            "HS256",
            "Invalid value HS256 for configuration sasl.oauthbearer.assertion.algorithm: String must be one of (case "
            "insensitive): ES256, RS256",
        ),
        (
            "process.roles",
            "broker,client",
            "Invalid value client for configuration process.roles: String must be one of: broker, controller",
        ),
        ("process.roles", "broker,broker", "Configuration 'process.roles' values must not be duplicated."),
        (
            "process.roles",
            "",
            "Configuration 'process.roles' must not be empty. Valid values include: [broker, controller]",
        ),
        (
            "sasl.login.refresh.buffer.seconds",
            "40000",
            "Invalid value 40000 for configuration sasl.login.refresh.buffer.seconds: Not a number of type SHORT",
        ),
        ("num.io.threads", "0", "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
        (
            "remote.log.manager.task.retry.jitter",
            "0.6",
            "Invalid value 0.6 for configuration remote.log.manager.task.retry.jitter: Value must be no more than 0.5",
        ),
        (
            "log.cleaner.enable",
            "yes",
            "Invalid value yes for configuration log.cleaner.enable: Expected value to be either true or false",
        ),
        (
            "remote.log.metadata.manager.class.name",
            "",
            "Invalid value  for configuration remote.log.metadata.manager.class.name: String must be non-empty",
        ),
    ],
)
def test_kafka_s_validators_at_startup_in_kafka_s_words(name: str, value: str, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_properties({name: value})
    assert str(raised.value) == words


def test_kafka_s_values_are_taken_at_startup() -> None:
    config = BrokerConfig.from_properties(
        {
            "process.roles": "broker,controller",
            "sasl.oauthbearer.assertion.algorithm": "es256",
            "sasl.login.refresh.buffer.seconds": "100",
            "log.cleaner.io.buffer.load.factor": "0.75",
            "ssl.keystore.password": "secret",
        }
    )
    assert config.get("sasl.login.refresh.buffer.seconds") == 100
    assert config.get("log.cleaner.io.buffer.load.factor") == 0.75
    assert SETTINGS_BY_NAME["ssl.keystore.password"].sensitive
    assert not SETTINGS_BY_NAME["ssl.keystore.password"].applied and SETTINGS_BY_NAME["listeners"].applied


@pytest.mark.parametrize(
    ("props", "per_broker", "message"),
    [
        ({"num.io.threads": "0"}, True, "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
        (
            {"sasl.login.refresh.min.period.seconds": "x"},
            True,
            "Invalid value x for configuration sasl.login.refresh.min.period.seconds: Not a number of type SHORT",
        ),
        ({"process.roles": "broker"}, True, "Cannot update these configs dynamically: Set(process.roles)"),
        (
            {"ssl.truststore.password": "x"},
            True,
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            "Set(ssl.truststore.password)",
        ),
        (
            {"sasl.kerberos.min.time.before.relogin": "58000", "num.io.threads": "4"},
            False,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(sasl.kerberos.min.time.before.relogin)",
        ),
    ],
)
def test_kafka_s_refusals_at_run_time(props: dict[str, str], per_broker: bool, message: str) -> None:
    with pytest.raises(ConfigChangeError) as raised:
        check_dynamic(props, per_broker=per_broker)
    assert str(raised.value) == message and raised.value.error_code == 42


def test_kafka_s_dynamic_ones_are_taken_at_run_time() -> None:
    check_dynamic({"sasl.kerberos.min.time.before.relogin": "58000", "num.io.threads": "4"})
    check_dynamic({"num.io.threads": "4", "log.cleaner.threads": "2"}, per_broker=False)


def test_doubles_are_written_as_java_writes_them() -> None:
    assert [java_double(v) for v in (0.5, 1.0, 1e-4, 1.7976931348623157e308, 12345678.0, -2.5e-7, 0.0)] == [
        "0.5",
        "1.0",
        "1.0E-4",
        "1.7976931348623157E308",
        "1.2345678E7",
        "-2.5E-7",
        "0.0",
    ]
    assert unparse(SETTINGS_BY_NAME["log.cleaner.io.max.bytes.per.second"].default) == "1.7976931348623157E308"


def test_log_dir_is_kafka_s_fallback_for_log_dirs(tmp_path) -> None:
    only = BrokerConfig.from_properties({"log.dir": str(tmp_path / "a")})
    assert only.log_dirs == [str(tmp_path / "a")]
    both = BrokerConfig.from_properties({"log.dir": str(tmp_path / "a"), "log.dirs": str(tmp_path / "b")})
    assert both.log_dirs == [str(tmp_path / "b")]
    assert BrokerConfig.from_properties({}).log_dirs == ["./herd-data"]
    assert SETTINGS_BY_NAME["log.dir"].applied


def test_kafka_s_broker_quotas_change_at_run_time_only_as_numbers() -> None:
    check_dynamic({"leader.replication.throttled.rate": "1048576", "follower.replication.throttled.rate": "0"})
    with pytest.raises(ConfigChangeError) as raised:
        check_dynamic({"replica.alter.log.dirs.io.max.bytes.per.second": "-1"}, per_broker=False)
    assert str(raised.value) == (
        "Invalid value -1 for configuration replica.alter.log.dirs.io.max.bytes.per.second: Value must be at least 0"
    )
