"""Broker configuration: Kafka's property names, defaults, and one-line refusals."""

from __future__ import annotations

import pytest

from herd.config import SETTINGS, BrokerConfig, ConfigError, parse_properties


def test_defaults_are_kafkas():
    c = BrokerConfig.from_properties({})
    assert c.get("offsets.topic.num.partitions") == 50
    assert c.get("group.initial.rebalance.delay.ms") == 3000
    assert c.get("group.min.session.timeout.ms") == 6000
    assert c.get("group.max.session.timeout.ms") == 1800000
    assert c.get("socket.request.max.bytes") == 104857600
    assert c.get("message.max.bytes") == 1048588
    assert c.retention_ms == 168 * 3600 * 1000
    assert [(listener.host, listener.port) for listener in c.listeners] == [("127.0.0.1", 9092)]
    # share groups (KIP-932): on, as on a new Kafka 4.2 cluster, with GroupCoordinatorConfig's defaults
    assert c.get("group.share.enable") is True and c.get("group.share.max.size") == 200
    assert (c.get("group.share.session.timeout.ms"), c.get("group.share.heartbeat.interval.ms")) == (45000, 5000)


def test_every_setting_the_issue_names_is_known():
    names = {s.name for s in SETTINGS}
    for name in (
        "listeners advertised.listeners node.id log.dirs num.partitions auto.create.topics.enable "
        "log.segment.bytes log.retention.ms log.retention.bytes log.flush.interval.messages "
        "log.flush.interval.ms socket.request.max.bytes message.max.bytes offsets.topic.num.partitions "
        "group.initial.rebalance.delay.ms group.min.session.timeout.ms group.max.session.timeout.ms "
        "group.max.size offsets.retention.minutes offsets.retention.check.interval.ms "
        "offset.metadata.max.bytes"
    ).split():
        assert name in names


def test_properties_file_syntax():
    text = "# comment\n! also\nnum.partitions=3\nlog.dirs : /tmp/x\nlisteners PLAINTEXT://h:1\nnode.id=\\\n  7\n"
    assert parse_properties(text) == {
        "num.partitions": "3",
        "log.dirs": "/tmp/x",
        "listeners": "PLAINTEXT://h:1",
        "node.id": "7",
    }


def test_properties_are_read_as_java_reads_them_and_a_bad_line_is_named_not_shown():
    # java.util.Properties.load: a key alone has an empty value, escapes are honoured (the clients' reader, one
    # implementation in herd.protocol.properties)
    assert parse_properties("lonely\n" r"key\ with\ spaces=a\tb\u0041") == {"lonely": "", "key with spaces": "a\tbA"}
    with pytest.raises(ConfigError) as caught:
        parse_properties("node.id=1\nherd.cluster.database.url=postgresql://u:s3cr\\u12et@h/db\n", "herd.properties")
    assert str(caught.value) == "herd.properties:2: malformed \\uXXXX escape"
    assert "s3cr" not in str(caught.value)


@pytest.mark.parametrize(
    "props,message",
    [
        ({"no.such.thing": "1"}, "unknown setting 'no.such.thing'"),
        ({"num.partitions": "three"}, "num.partitions: 'three' is not a whole number"),
        ({"num.partitions": "0"}, "num.partitions: 0 is out of range"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable: 'yes' is not true or false"),
        ({"listeners": "127.0.0.1:9092"}, "is not a listener of the form"),
        ({"listeners": "PLAINTEXT://127.0.0.1:99999"}, "port 99999 is out of range [0, 65535]"),
        ({"advertised.listeners": "PLAINTEXT://h:65536"}, "port 65536 is out of range"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "clients cannot connect to the wildcard address"),
        ({"node.id": "99999999999"}, "out of range"),
        ({"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"}, "must not exceed"),
        # GroupCoordinatorConfig's checks of the share groups' settings, with Kafka's words
        (
            {"group.share.heartbeat.interval.ms": "20000"},
            "group.share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms",
        ),
        (
            {"group.share.min.session.timeout.ms": "1000", "group.share.session.timeout.ms": "4000"},
            "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms",
        ),
        ({"group.share.max.size": "1001"}, "group.share.max.size: 1001 is out of range"),
        ({"group.share.assignors": "simple,simple"}, "group.share.assignors must contain exactly one assignor"),
        ({"group.share.assignors": "uniform"}, "uniform is not a share-group assignor herd supports (simple)"),
        ({"group.share.record.lock.duration.ms": "999"}, "group.share.record.lock.duration.ms: 999 is out of range"),
    ],
)
def test_bad_settings_are_refused_with_one_line(props, message):
    with pytest.raises(ConfigError) as info:
        BrokerConfig.from_properties(props)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_log_dirs_naming_a_file_is_refused_with_the_path(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    for path in (afile, afile / "below"):
        with pytest.raises(ConfigError, match=f"log.dirs: '{afile}' is a file, not a directory"):
            BrokerConfig.from_properties({"log.dirs": str(path)})
    assert BrokerConfig.from_properties({"log.dirs": str(tmp_path / "new" / "dir")})


def test_retention_precedence():
    assert BrokerConfig.from_properties({"log.retention.minutes": "2"}).retention_ms == 120_000
    assert BrokerConfig.from_properties({"log.retention.minutes": "2", "log.retention.ms": "5"}).retention_ms == 5
    assert BrokerConfig.from_properties({"log.retention.hours": "-1"}).retention_ms == -1


def test_load_merges_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nnode.id=4\n")
    c = BrokerConfig.load(str(path), ["num.partitions=5"])
    assert c.get("num.partitions") == 5 and c.get("node.id") == 4
    with pytest.raises(ConfigError, match="--override expects key=value"):
        BrokerConfig.load(None, ["novalue"])
    with pytest.raises(ConfigError, match="cannot read config file"):
        BrokerConfig.load(str(tmp_path / "missing"), [])
    binary = tmp_path / "binary.properties"
    binary.write_bytes(b"num.partitions=\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"binary.properties': not UTF-8 text \(byte 0xff at position 15\)"):
        BrokerConfig.load(str(binary), [])
