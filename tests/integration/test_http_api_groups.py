"""The HTTP JSON API of a real `herd serve` (herd.http.listener on port 0): a group of real consumers
(kafka-python and confluent-kafka) as /v1/groups and /v1/groups/{group} show it (members, their decoded
assignments, lag = end offset - committed, the rebalance history), a group that only committed offsets, the
topics with their offsets and sizes, the errors, and the console's files."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from brokers import BrokerProcess
from groupmembers import BROKER_OVERRIDES, create_topic, produce, settled, start_members, stop_all, wait_for

TOPIC, PARTITIONS = "api-orders", 4
# KIP-848 members heartbeat every half second, as the classic members of groupmembers do
CONSUMER_PROTOCOL = {"group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    broker = BrokerProcess(
        tmp_path_factory.mktemp("http-api") / "data",
        {**BROKER_OVERRIDES, **CONSUMER_PROTOCOL, "herd.http.listener": "127.0.0.1:0"},
    ).start()
    create_topic(broker.bootstrap, TOPIC, PARTITIONS)
    yield broker
    broker.stop()


def get(node: BrokerProcess, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(f"http://{node.http}{path}", timeout=10) as response:
            body = response.read()
            return response.status, json.loads(body) if "json" in response.headers["Content-Type"] else body
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_live_group_its_members_assignments_lag_and_history(node, members):
    produce(node.bootstrap, TOPIC, PARTITIONS, 20)
    members += start_members(["kafka-python", "confluent"], node.bootstrap, TOPIC, "api-live", n=2)
    settled(members, PARTITIONS, quiet_s=0.5)

    def consumed() -> dict[str, Any] | None:  # every message consumed and committed
        status, group = get(node, "/v1/groups/api-live")
        return group if status == 200 and [p["lag"] for p in group["partitions"]] == [0] * PARTITIONS else None

    group = wait_for(consumed, what="the members' commits")
    assert group["state"] == "Stable" and group["protocol_type"] == "consumer" and group["protocol"] == "range"
    assert group["coordinator"] == 0 and group["lag"] == 0
    assert group["leader"] in {m["member_id"] for m in group["members"]}
    by_client = {m["client_id"]: m for m in group["members"]}
    assert sorted(by_client) == ["cf-m1", "kp-m0"]
    for member in members:
        held = by_client[f"{'kp' if member.client == 'kafka-python' else 'cf'}-{member.member_name}"]
        assert held["member_id"].startswith(held["client_id"] + "-") and held["client_host"].endswith("127.0.0.1")
        assert held["assignment"] == [{"topic": TOPIC, "partitions": sorted(member.assigned)}]
    owners = {p["partition"]: p["member_id"] for p in group["partitions"]}
    assert owners == {p: m["member_id"] for m in group["members"] for p in m["assignment"][0]["partitions"]}
    assert [(p["committed"], p["end_offset"]) for p in group["partitions"]] == [(5, 5)] * PARTITIONS

    last = group["rebalances"][-1]
    assert last["generation"] == group["generation"] and last["outcome"] == "stable"
    assert last["cause"] and last["join_ms"] is not None and last["sync_ms"] is not None
    assert [r["generation"] for r in group["rebalances"]] == sorted(r["generation"] for r in group["rebalances"])

    status, listed = get(node, "/v1/groups")
    assert status == 200 and listed["unreachable"] == [] and listed["nodes"] == [0]
    (summary,) = [g for g in listed["groups"] if g["group"] == "api-live"]
    assert summary == {
        "group": "api-live",
        "type": "classic",
        "state": "Stable",
        "protocol_type": "consumer",
        "protocol": "range",
        "generation": group["generation"],
        "members": 2,
        "coordinator": 0,
        "lag": 0,
        "last_rebalance": {key: last[key] for key in ("generation", "cause", "started_ms", "completed_ms", "outcome")},
    }

    stop_all(members)  # they leave: the group is empty, its offsets stay; new messages are lag
    produce(node.bootstrap, TOPIC, PARTITIONS, 8, start=20)
    status, group = get(node, "/v1/groups/api-live")
    assert status == 200 and group["state"] == "Empty" and group["members"] == []
    assert [(p["committed"], p["end_offset"], p["lag"]) for p in group["partitions"]] == [(5, 7, 2)] * PARTITIONS
    assert group["lag"] == 8


def test_a_consumer_group_with_a_classic_member_its_epochs_states_and_targets(node, members):
    """A KIP-848 consumer group (a confluent-kafka member on group.protocol=consumer) that a kafka-python member
    joined with the classic protocol: each member's epoch, reconciliation state, current and target partitions."""
    group_id = "api-848"
    members += start_members(
        ["confluent-consumer"], node.bootstrap, TOPIC, group_id, n=1, prefix="c", assignor="uniform"
    )
    wait_for(lambda: members[0].assigned, what="the consumer-protocol member's partitions")
    members += start_members(["kafka-python"], node.bootstrap, TOPIC, group_id, n=1, prefix="k")
    settled(members, PARTITIONS, quiet_s=0.5)

    def stable() -> dict[str, Any] | None:
        status, group = get(node, f"/v1/groups/{group_id}")
        done = (
            status == 200
            and group["state"] == "Stable"
            and all(m["member_state"] == "STABLE" for m in group["members"])
        )
        return group if done else None

    group = wait_for(stable, what="a stable consumer group")
    assert (group["type"], group["protocol_type"], group["protocol"]) == ("consumer", "consumer", "uniform")
    assert group["generation"] == group["assignment_epoch"] and group["leader"] is None
    by_protocol = {m["protocol"]: m for m in group["members"]}
    assert sorted(by_protocol) == ["classic", "consumer"]
    assert by_protocol["classic"]["client_id"] == "kp-k0" and by_protocol["consumer"]["client_id"] == "cf-c0"
    assert by_protocol["classic"]["session_timeout_ms"] == 6000  # its own, from its JoinGroup
    assert by_protocol["consumer"]["session_timeout_ms"] == 45000  # the group's
    for member in members:
        held = by_protocol["classic" if member.client == "kafka-python" else "consumer"]
        assert held["member_epoch"] == group["generation"]
        assert (
            held["assignment"] == held["target_assignment"] == [{"topic": TOPIC, "partitions": sorted(member.assigned)}]
        )
    last = group["rebalances"][-1]
    assert last["group_type"] == "consumer" and last["join_end"] == "target-assignment"
    assert last["generation"] == group["generation"] and last["outcome"] == "stable"

    status, listed = get(node, "/v1/groups")
    (summary,) = [g for g in listed["groups"] if g["group"] == group_id]
    assert (summary["type"], summary["state"], summary["members"]) == ("consumer", "Stable", 2)
    assert summary["assignment_epoch"] == group["assignment_epoch"]


def test_a_group_with_committed_offsets_only(node):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "api-offsets", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 1, 1), TopicPartition(TOPIC, 2, 0)], asynchronous=False)
    finally:
        consumer.close()
    status, group = get(node, "/v1/groups/api-offsets")
    ends = {
        p["partition"]: p["end_offset"]
        for t in get(node, "/v1/topics")[1]["topics"]
        if t["topic"] == TOPIC
        for p in t["partitions"]
    }
    assert status == 200 and group["members"] == [] and group["state"] == "Empty"
    assert [(p["partition"], p["committed"], p["lag"], p["member_id"]) for p in group["partitions"]] == [
        (1, 1, ends[1] - 1, None),
        (2, 0, ends[2], None),
    ]
    listed = get(node, "/v1/groups")[1]["groups"]
    assert {"group": "api-offsets", "members": 0, "lag": ends[1] - 1 + ends[2]}.items() <= next(
        g for g in listed if g["group"] == "api-offsets"
    ).items()


def test_topics_with_partitions_offsets_and_sizes(node):
    produce(node.bootstrap, TOPIC, PARTITIONS, 4, start=100)
    status, body = get(node, "/v1/topics")
    assert status == 200
    (topic,) = [t for t in body["topics"] if t["topic"] == TOPIC]
    assert topic["internal"] is False and [p["partition"] for p in topic["partitions"]] == list(range(PARTITIONS))
    for p in topic["partitions"]:
        assert p["leader"] == 0 and p["start_offset"] == 0 and p["end_offset"] >= 1 and p["size_bytes"] > 0
    offsets = next(t for t in body["topics"] if t["topic"] == "__consumer_offsets")
    assert offsets["internal"] is True and len(offsets["partitions"]) == 10


def test_errors_and_the_console_files(node):
    status, body = get(node, "/v1/groups/no-such-group")
    assert status == 404 and body == {"error": "no group 'no-such-group'"}
    status, body = get(node, "/v1/groups?scope=everywhere")
    assert status == 400 and "scope" in body["error"]
    for path in ("/", "/topics", "/groups/api-live"):
        status, page = get(node, path)
        assert status == 200 and b'<script src="/console/console.js">' in page
    for path in ("/console/console.js", "/console/console.css"):
        assert get(node, path)[0] == 200
    assert get(node, "/console/../http.py")[0] == 404
