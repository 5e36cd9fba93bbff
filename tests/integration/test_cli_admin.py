"""`herd groups` and `herd topics` as a user runs them, against a real broker.

Failures run as real processes (`fails`: one line on stderr, the exit code, never a traceback); commands that
succeed run in this process through click (`ok`: the same command line, its stdout), which spares a Python
start per command. Output is checked as printed (Kafka's column names, aligned; "-" for missing values) and as JSON;
every
failure must be one line on stderr (`herd: error: ...`) with exit code 1, bad arguments exit code 2, and
never a traceback.
"""

from __future__ import annotations

import datetime
import json
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable

import pytest
from brokers import BrokerProcess
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.sync_group.v3.request import SyncGroupRequest
from rawkafka import RawClient

from herd.testing.wait import wait_until

OVERRIDES = {
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}
OFFSET_HEADER = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
]


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory) -> Iterable[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("cli-admin") / "data", OVERRIDES).start()
    yield broker
    broker.stop()


def herd(*args: str, bootstrap: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "herd.cli", *args]
    if bootstrap is not None:
        command += ["--bootstrap-server", bootstrap]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def ok(*args: str, bootstrap: str) -> str:
    """The stdout of a command that must succeed, run in this process (click's runner, stderr kept apart)."""
    from click.testing import CliRunner

    from herd.cli import cli

    result = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap])
    assert result.exit_code == 0 and result.exception is None, f"{args}: {result.stderr} {result.exception!r}"
    return result.stdout


def fails(*args: str, bootstrap: str | None = None, code: int = 1) -> str:
    """The one error line of a failing command."""
    result = herd(*args, bootstrap=bootstrap)
    assert result.returncode == code, f"{args}: exit {result.returncode}, {result.stdout} {result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("herd: error: "), result.stderr
    return lines[0]


def rows(table: str) -> list[list[str]]:
    """A printed table split back into fields (values never contain spaces)."""
    return [line.split() for line in table.strip().splitlines()]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


class ConfluentMember:
    """A confluent-kafka consumer in the group that commits chosen offsets and stays until closed."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": "lag-checker",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "partition.assignment.strategy": "range",
            }
        )
        self.consumer.subscribe([topic])

        def assigned() -> bool:
            if len(self.consumer.assignment()) < partitions:
                self.consumer.poll(0.1)
            return len(self.consumer.assignment()) >= partitions

        wait_until(assigned, 30, f"the consumer to be assigned {partitions} partitions", interval=0)

    def commit(self, topic: str, offsets: dict[int, int]) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


def static_member(port: int, group: str, instance_id: str) -> str:
    """Join and sync a static member over the raw protocol (it never heartbeats: session 30s)."""
    with RawClient(port) as client:
        protocol = JoinGroupRequestProtocol(name="range", metadata=b"")
        join = client.request(
            11,
            5,
            JoinGroupRequest(
                group_id=group,
                session_timeout=datetime.timedelta(seconds=30),
                rebalance_timeout=datetime.timedelta(seconds=30),
                member_id="",
                group_instance_id=instance_id,
                protocol_type="consumer",
                protocols=(protocol,),
            ),
        )
        assert join.error_code == 0, join
        sync = client.request(
            14,
            3,
            SyncGroupRequest(
                group_id=group,
                generation_id=join.generation_id,
                member_id=join.member_id,
                group_instance_id=instance_id,
                assignments=(),
            ),
        )
        assert sync.error_code == 0, sync
        return join.member_id


# -- topics ---------------------------------------------------------------------------------------------------


def test_topics_create_list_describe_alter_delete(cli_broker):
    b, topic = cli_broker.bootstrap, unique("orders")
    assert (
        ok(
            "topics",
            "create",
            "--topic",
            topic,
            "--partitions",
            "3",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=86400000",
            bootstrap=b,
        )
        == f"Created topic {topic}.\n"
    )
    assert topic in ok("topics", "list", bootstrap=b).split()
    assert "__consumer_offsets" not in ok("topics", "list", "--exclude-internal", bootstrap=b).split()

    text = ok("topics", "describe", "--topic", topic, bootstrap=b).splitlines()
    assert text[0].startswith(f"Topic: {topic}\tTopicId: ") and "\tPartitionCount: 3\tReplicationFactor: 1\t" in text[0]
    assert text[0].endswith("Configs: retention.ms=86400000")
    assert text[1:] == [f"\tTopic: {topic}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(3)]

    assert ok("topics", "alter", "--topic", topic, "--partitions", "5", bootstrap=b) == "Adding partitions succeeded!\n"
    [described] = json.loads(ok("topics", "describe", "--topic", topic, "--output", "json", bootstrap=b))
    assert (described["topic"], described["partition_count"], described["replication_factor"]) == (topic, 5, 1)
    assert described["configs"] == {"retention.ms": "86400000"} and len(described["topic_id"]) == 36
    assert [p["partition"] for p in described["partitions"]] == list(range(5))
    assert "5 would not be an increase" in fails("topics", "alter", "--topic", topic, "--partitions", "5", bootstrap=b)

    assert ok("topics", "delete", "--topic", topic, bootstrap=b) == f"Deleted topic {topic}.\n"
    assert topic not in json.loads(ok("topics", "list", "--output", "json", bootstrap=b))
    assert fails("topics", "delete", "--topic", topic, bootstrap=b) == f"herd: error: Topic '{topic}' does not exist."


def test_topics_errors_are_one_line(cli_broker):
    b, topic = cli_broker.bootstrap, unique("dup")
    ok("topics", "create", "--topic", topic, bootstrap=b)
    assert fails("topics", "create", "--topic", topic, bootstrap=b) == f"herd: error: Topic '{topic}' already exists."
    ok("topics", "create", "--topic", topic, "--if-not-exists", bootstrap=b)
    assert "does not exist" in fails("topics", "describe", "--topic", unique("missing"), bootstrap=b)


# -- groups: describe with lag, members, state; reset; delete -----------------------------------------------


@pytest.fixture
def committed_group(cli_broker) -> Iterable[tuple[str, str, ConfluentMember]]:
    """A 2-partition topic with 10 + 4 records, and a consumer that committed 3 and 4."""
    b, topic, group = cli_broker.bootstrap, unique("lag"), unique("group")
    ok("topics", "create", "--topic", topic, "--partitions", "2", bootstrap=b)
    produce(b, topic, {0: 10, 1: 4})
    member = ConfluentMember(b, group, topic, 2)
    member.commit(topic, {0: 3, 1: 4})
    try:
        yield topic, group, member
    finally:
        member.close()


def test_describe_shows_lag_members_and_state_while_a_consumer_is_in_the_group(cli_broker, committed_group):
    b, (topic, group, _) = cli_broker.bootstrap, committed_group
    table = rows(ok("groups", "describe", "--group", group, bootstrap=b))
    assert table[0] == OFFSET_HEADER
    body = [r[:6] for r in table[1:]]
    assert body == [[group, topic, "0", "3", "10", "7"], [group, topic, "1", "4", "4", "0"]]
    consumer_id, host, client_id = table[1][6:]
    assert consumer_id.startswith("lag-checker-") and host == "/127.0.0.1" and client_id == "lag-checker"

    data = json.loads(ok("groups", "describe", "--group", group, "--output", "json", bootstrap=b))
    assert [(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in data] == [
        (0, 3, 10, 7),
        (1, 4, 4, 0),
    ]
    assert {r["consumer_id"] for r in data} == {consumer_id}

    members = rows(ok("groups", "describe", "--group", group, "--members", "--verbose", bootstrap=b))
    assert members[0] == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert members[1] == [group, consumer_id, "-", "/127.0.0.1", "lag-checker", "2", f"{topic}(0,1)"]
    [member] = json.loads(ok("groups", "describe", "--group", group, "--members", "--output", "json", bootstrap=b))
    assert member["assignment"] == [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]

    state = ok("groups", "describe", "--group", group, "--state", bootstrap=b).splitlines()
    assert state[0].split("  ")[0] == "GROUP" and "COORDINATOR (ID)" in state[0] and "ASSIGNMENT-STRATEGY" in state[0]
    assert state[1].split()[0] == group and "range" in state[1].split() and "Stable" in state[1].split()
    [described] = json.loads(ok("groups", "describe", "--group", group, "--state", "--output", "json", bootstrap=b))
    assert (described["state"], described["members"], described["assignment_strategy"]) == ("Stable", 1, "range")
    assert described["coordinator"]["port"] == cli_broker.port

    everything = json.loads(ok("groups", "describe", "--all-groups", "--state", "--output", "json", bootstrap=b))
    assert group in [g["group"] for g in everything]

    listed = json.loads(ok("groups", "list", "--output", "json", bootstrap=b))
    assert {"group": group, "protocol_type": "consumer", "state": "Stable", "type": "classic"} in listed
    assert group in ok("groups", "list", bootstrap=b).split()
    assert [group, "classic", "Stable"] in rows(ok("groups", "list", "--state", "stable", bootstrap=b))
    assert group not in ok("groups", "list", "--state", "Empty", bootstrap=b)


def test_reset_offsets_is_refused_while_the_group_has_members(cli_broker, committed_group):
    b, (topic, group, _) = cli_broker.bootstrap, committed_group
    for mode in ("--dry-run", "--execute"):
        assert fails(
            "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", mode, bootstrap=b
        ) == (
            f"herd: error: Assignments can only be reset if the group '{group}' is "
            f"inactive, but the current state is Stable."
        )
    assert "The group is not empty" in fails("groups", "delete", "--group", group, bootstrap=b)


def test_reset_offsets_dry_run_then_execute(cli_broker, committed_group):
    b, (topic, group, member) = cli_broker.bootstrap, committed_group
    member.close()
    result = herd("groups", "describe", "--group", group, bootstrap=b)
    assert f"Consumer group '{group}' has no active members." in result.stderr
    assert [r[6:] for r in rows(result.stdout)[1:]] == [["-", "-", "-"]] * 2

    def reset(*spec: str) -> list[list[str]]:
        return rows(ok("groups", "reset-offsets", "--group", group, "--topic", topic, *spec, bootstrap=b))

    def current() -> list[str]:
        return [r[3] for r in rows(ok("groups", "describe", "--group", group, bootstrap=b))[1:]]

    dry = herd("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", bootstrap=b)
    assert "No action will be performed as the --execute option is missing" in dry.stderr
    assert rows(dry.stdout) == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [group, topic, "0", "0"],
        [group, topic, "1", "0"],
    ]
    assert reset("--to-earliest", "--dry-run") == rows(dry.stdout) and current() == ["3", "4"]

    reset("--to-earliest", "--execute")
    assert current() == ["0", "0"]
    assert [r[3] for r in reset("--shift-by", "2", "--execute")[1:]] == ["2", "2"]
    assert [r[3] for r in reset("--shift-by", "-5", "--dry-run")[1:]] == ["0", "0"]  # kept within the log
    assert [r[3] for r in reset("--to-offset", "7", "--dry-run")[1:]] == ["7", "4"]
    assert [r[3] for r in reset("--to-latest", "--dry-run")[1:]] == ["10", "4"]
    assert [r[3] for r in reset("--to-datetime", "2999-01-01T00:00:00.000", "--dry-run")[1:]] == ["10", "4"]
    assert [r[3] for r in reset("--to-datetime", "2000-01-01T00:00:00", "--dry-run")[1:]] == ["0", "0"]
    assert current() == ["2", "2"]

    planned = json.loads(
        ok(
            "groups",
            "reset-offsets",
            "--group",
            group,
            "--all-topics",
            "--to-latest",
            "--execute",
            "--output",
            "json",
            bootstrap=b,
        )
    )
    assert [(p["topic"], p["partition"], p["new_offset"]) for p in planned] == [(topic, 0, 10), (topic, 1, 4)]
    data = json.loads(ok("groups", "describe", "--group", group, "--output", "json", bootstrap=b))
    assert [(r["current_offset"], r["lag"], r["consumer_id"]) for r in data] == [(10, 0, None), (4, 0, None)]
    only = rows(
        ok(
            "groups",
            "reset-offsets",
            "--group",
            group,
            "--topic",
            f"{topic}:1",
            "--to-offset",
            "1",
            "--execute",
            bootstrap=b,
        )
    )
    assert only[1:] == [[group, topic, "1", "1"]] and current() == ["10", "1"]


def test_delete_group(cli_broker, committed_group):
    b, (_, group, member) = cli_broker.bootstrap, committed_group
    member.close()
    assert (
        ok("groups", "delete", "--group", group, bootstrap=b)
        == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    )
    assert (
        fails("groups", "describe", "--group", group, bootstrap=b)
        == f"herd: error: Consumer group '{group}' does not exist."
    )
    assert "does not exist" in fails("groups", "delete", "--group", group, bootstrap=b)


def test_remove_a_static_member_by_instance_id(cli_broker):
    b, group = cli_broker.bootstrap, unique("static")
    member_id = static_member(cli_broker.port, group, "instance-a")
    [listed] = json.loads(ok("groups", "describe", "--group", group, "--members", "--output", "json", bootstrap=b))
    assert (listed["consumer_id"], listed["group_instance_id"]) == (member_id, "instance-a")

    assert "UNKNOWN_MEMBER_ID" in fails(
        "groups", "remove-members", "--group", group, "--instance-id", "nobody", bootstrap=b
    )
    assert (
        ok("groups", "remove-members", "--group", group, "--instance-id", "instance-a", bootstrap=b)
        == f"Removed members with group.instance.id instance-a from group '{group}'.\n"
    )
    assert json.loads(ok("groups", "describe", "--group", group, "--members", "--output", "json", bootstrap=b)) == []
    [state] = json.loads(ok("groups", "describe", "--group", group, "--state", "--output", "json", bootstrap=b))
    assert state["state"] == "Empty"


def test_delete_offsets(cli_broker, committed_group):
    b, (topic, group, member) = cli_broker.bootstrap, committed_group
    result = herd("groups", "delete-offsets", "--group", group, "--topic", topic, bootstrap=b)
    assert result.returncode == 1  # the group still consumes the topic: Kafka refuses, per partition
    assert rows(result.stdout)[1:] == [
        [topic, "0", "GROUP_SUBSCRIBED_TO_TOPIC"],
        [topic, "1", "GROUP_SUBSCRIBED_TO_TOPIC"],
    ]
    assert result.stderr.strip() == (
        f"herd: error: Offsets of group '{group}' could not all be deleted: GROUP_SUBSCRIBED_TO_TOPIC."
    )
    member.close()
    out = json.loads(
        ok("groups", "delete-offsets", "--group", group, "--topic", f"{topic}:1", "--output", "json", bootstrap=b)
    )
    assert out == [{"topic": topic, "partition": 1, "error": None}]
    assert [r[:4] for r in rows(ok("groups", "describe", "--group", group, bootstrap=b))[1:]] == [
        [group, topic, "0", "3"]
    ]
    assert ok("groups", "delete-offsets", "--group", group, "--topic", topic, bootstrap=b).splitlines()[0].split() == [
        "TOPIC",
        "PARTITION",
        "STATUS",
    ]
    assert json.loads(ok("groups", "describe", "--group", group, "--output", "json", bootstrap=b)) == []


def test_delete_offsets_of_an_unknown_topic_is_one_line(cli_broker):
    assert (
        fails(
            "groups",
            "delete-offsets",
            "--group",
            unique("g"),
            "--topic",
            "no-such-topic",
            bootstrap=cli_broker.bootstrap,
        )
        == "herd: error: Topic 'no-such-topic' does not exist."
    )


# -- bad arguments and unreachable brokers ------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,message",
    [
        (["groups", "describe"], "takes --group (one or more) or --all-groups"),
        (["groups", "describe", "--group", "g", "--all-groups"], "takes --group (one or more) or --all-groups"),
        (["groups", "reset-offsets", "--group", "g", "--topic", "t"], "exactly one of --to-earliest"),
        (["groups", "reset-offsets", "--group", "g", "--to-earliest"], "exactly one of --topic, --all-topics"),
        (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--to-earliest"], "exactly one of"),
        (
            ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--dry-run", "--execute"],
            "mutually exclusive",
        ),
        (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-offset", "x"], "'x' is not a valid integer"),
        (["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "yesterday"], "invalid datetime"),
        (["groups", "reset-offsets", "--group", "g", "--topic", "t:a", "--to-latest"], "TOPIC:PARTITION"),
        (["groups", "describe", "--group", "g", "--bootstrap-server", "nonsense"], "is not HOST:PORT"),
        (["groups", "remove-members", "--group", "g"], "Missing option '--instance-id'"),
        (["groups", "frobnicate"], "No such command 'frobnicate'"),
        (["topics", "create", "--topic", "t", "--partitions", "0"], "0 is not in the range x>=1"),
        (["topics", "create", "--topic", "t", "--config", "novalue"], "is not KEY=VALUE"),
        (["topics", "alter", "--topic", "t"], "Missing option '--partitions'"),
        (["groups", "list", "--output", "yaml"], "'yaml' is not one of"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args, message):
    assert message in fails(*args, code=2)


def test_an_unreachable_broker_is_one_line_and_exit_1():
    line = fails("groups", "list", "--bootstrap-server", "127.0.0.1:1")
    assert "cannot connect to 127.0.0.1:1" in line


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/html\r\n\r\n<!DOCTYPE html><html>...</html>\n",
        b"\x00\x00\x00\x08\x7f\xff\xff\xffjunk",  # a plausible size, but not the id the request carried
    ],
)
def test_a_port_that_does_not_speak_kafka_is_one_line_and_exit_1(answer):
    """An HTTP server (or anything else) answers the client's ApiVersions with bytes that are no Kafka answer:
    one line saying so, at once, not "400 bytes read on a total of 1008813135 expected bytes"."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def answer_once() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(answer)
                time.sleep(5)  # keep the socket open: the client must not wait for the rest of a "frame"

        server = threading.Thread(target=answer_once, daemon=True)
        server.start()
        started = time.monotonic()
        line = fails("topics", "list", "--bootstrap-server", f"127.0.0.1:{port}")
        assert time.monotonic() - started < 4.5
    assert line.startswith(f"herd: error: 127.0.0.1:{port}: ")
    assert "not a Kafka broker" in line or "correlation id" in line


def test_unknown_group_is_one_line(cli_broker):
    group = unique("nobody")
    for view in ([], ["--members"], ["--state"]):
        assert (
            fails("groups", "describe", "--group", group, *view, bootstrap=cli_broker.bootstrap)
            == f"herd: error: Consumer group '{group}' does not exist."
        )
