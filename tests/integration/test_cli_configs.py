"""`herd configs` and `herd topics alter --config` as a user runs them: real subprocesses against a real broker,
output in kafka-configs.sh's layout, failures one line on stderr (exit 1), bad arguments exit 2."""

from __future__ import annotations

import json
from collections.abc import Iterable

import pytest
from brokers import BrokerProcess
from test_cli_admin import fails, ok

from herd.cli.configs import parse_add_config


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterable[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("cli-configs") / "data", {"offsets.topic.num.partitions": "1", "num.partitions": "1"}
    ).start()
    yield process
    process.stop()


def test_alter_and_describe_a_topic(broker):
    b = broker.bootstrap
    ok("topics", "create", "--topic", "orders", bootstrap=b)
    assert (
        ok(
            "configs",
            "alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "orders",
            "--add-config",
            "retention.ms=60000,cleanup.policy=[compact,delete]",
            bootstrap=b,
        )
        == "Completed updating config for topic orders.\n"
    )
    assert (
        ok(
            "topics",
            "alter",
            "--topic",
            "orders",
            "--config",
            "max.message.bytes=5000",
            "--delete-config",
            "retention.ms",
            bootstrap=b,
        )
        == "Completed updating config for topic orders.\n"
    )
    lines = ok("configs", "describe", "--entity-type", "topics", "--entity-name", "orders", bootstrap=b).splitlines()
    assert lines[0] == "Dynamic configs for topic orders are:"
    assert sorted(lines[1:]) == [
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  max.message.bytes=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=5000, "
        "DEFAULT_CONFIG:message.max.bytes=1048588}",
    ]


def test_broker_defaults_and_errors(broker):
    b = broker.bootstrap
    altered = ok(
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--add-config",
        "log.retention.ms=3600000",
        bootstrap=b,
    )
    assert altered == "Completed updating default config for brokers in the cluster.\n"
    described = json.loads(
        ok(
            "configs",
            "describe",
            "--entity-type",
            "brokers",
            "--entity-name",
            "0",
            "--all",
            "--output",
            "json",
            bootstrap=b,
        )
    )
    retention = next(e for e in described if e["name"] == "log.retention.ms")
    assert (retention["value"], retention["source"], retention["read_only"]) == (
        "3600000",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
        False,
    )
    assert next(e for e in described if e["name"] == "log.dirs")["read_only"] is True
    # without --all, as kafka-configs.sh: a named broker shows its own dynamic configs, not the cluster defaults
    ok(
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "00",
        "--add-config",
        "log.retention.bytes=123456789",
        bootstrap=b,
    )  # "00" names node 0, as Kafka parses it
    assert ok("configs", "describe", "--entity-type", "brokers", "--entity-name", "0", bootstrap=b).splitlines() == [
        "Dynamic configs for broker 0 are:",
        "  log.retention.bytes=123456789 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:log.retention.bytes=123456789, "
        "DEFAULT_CONFIG:log.retention.bytes=-1}",
    ]
    assert ok("configs", "describe", "--entity-type", "brokers", "--entity-default", bootstrap=b).splitlines()[1:] == [
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}"
    ]
    assert (
        fails(
            "configs",
            "alter",
            "--entity-type",
            "brokers",
            "--entity-name",
            "0",
            "--add-config",
            "log.dirs=/x",
            bootstrap=b,
        )
        == "herd: error: Cannot update these configs dynamically: Set(log.dirs)"
    )
    assert (
        fails(
            "configs",
            "alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "nope",
            "--add-config",
            "retention.ms=1",
            bootstrap=b,
        )
        == "herd: error: The topic 'nope' does not exist."
    )
    assert "--add-config or --delete-config" in fails(
        "configs", "alter", "--entity-type", "topics", "--entity-name", "orders", bootstrap=b, code=2
    )


def test_add_config_takes_kafka_configs_lists():
    assert parse_add_config("a=1,b=[x,y], c = 2") == {"a": "1", "b": "x,y", "c": "2"}


def test_alter_and_describe_a_group(broker):
    """kafka-configs.sh --entity-type groups (Kafka 4.x's group configs): set a share group's start and lock, see
    them as the group's own, remove one, and Kafka's refusals of a bad value or name."""
    b = broker.bootstrap
    done = ok("configs", "alter", "--entity-type", "groups", "--entity-name", "jobs", "--add-config",
              "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000", bootstrap=b)  # fmt: skip
    assert done == "Completed updating config for group jobs.\n"
    lines = ok("configs", "describe", "--entity-type", "groups", "--entity-name", "jobs", bootstrap=b).splitlines()
    assert lines[0] == "Dynamic configs for group jobs are:"
    assert sorted(line.split(" ")[2].split("=")[0] for line in lines[1:]) == [
        "share.auto.offset.reset",
        "share.record.lock.duration.ms",
    ]
    ok("configs", "alter", "--entity-type", "groups", "--entity-name", "jobs", "--delete-config",
       "share.record.lock.duration.ms", bootstrap=b)  # fmt: skip
    entries = json.loads(ok("configs", "describe", "--entity-type", "groups", "--entity-name", "jobs", "--output",
                            "json", bootstrap=b))  # fmt: skip
    assert [(e["name"], e["value"], e["source"]) for e in entries] == [
        ("share.auto.offset.reset", "earliest", "DYNAMIC_GROUP_CONFIG")
    ]
    bad = fails("configs", "alter", "--entity-type", "groups", "--entity-name", "jobs", "--add-config",
                "share.auto.offset.reset=sometimes", bootstrap=b)  # fmt: skip
    assert "share.auto.offset.reset" in bad and "\n" not in bad.strip()
    assert "--entity-name must name the group" in fails("configs", "describe", "--entity-type", "groups",
                                                       bootstrap=b, code=2)  # fmt: skip
