"""Rebalance history on a real broker: raw-protocol members make three rebalances (a join, a join with a member
late by 300 ms, a leave with its KIP-800 reason); `herd groups history` prints them as a table and as JSON, and
they are still there after the broker restarts. On a three-node cluster the history moves with its group: the
coordinator is stopped, another node loads the group's `__consumer_offsets` partition from PostgreSQL, and the
history is read from it, and from a node that does not coordinate the group (DescribeConfigs forwarded).

The members speak the protocol over tests/rawkafka.py (JoinGroup v9 with its reason, SyncGroup v5, LeaveGroup
v5), so each rebalance happens exactly when the test makes it, with no client timers in the way.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from backends import embedded_only
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, part, req

from herd.client.consumer_protocol import Assignment, Subscription, encode_assignment, encode_subscription
from herd.coordinator import coordinator_partition
from herd.testing.wait import wait_until

JOIN, SYNC, LEAVE, DESCRIBE_CONFIGS, FIND = 11, 14, 13, 32, 10
VERSIONS = {JOIN: 9, SYNC: 5, LEAVE: 5, DESCRIBE_CONFIGS: 4, FIND: 4}
TOPIC = "history-topic"
SUBSCRIPTION = encode_subscription(Subscription((TOPIC,)))
OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
HISTORY = "herd.rebalance.history"


class Member:
    """A dynamic "consumer" member on its own connection (KIP-394: it takes the member id handed out)."""

    def __init__(self, port: int, group: str, name: str) -> None:
        self.raw = RawClient(port, timeout=30)
        self.group, self.name = group, name
        self.member_id, self.generation = "", -1
        self.reason: str | None = None

    def send(self, api: int, **fields: Any) -> None:
        self.raw.send_raw(self.raw.encode(api, VERSIONS[api], req(api, VERSIONS[api], **fields), client_id=self.name))

    def receive(self, api: int) -> Any:
        return self.raw.read_response(api, VERSIONS[api])

    def send_join(self, reason: str | None = None) -> None:
        self.reason = reason  # sent again with the member id KIP-394 hands out, as clients do
        protocol = part(JOIN, VERSIONS[JOIN], "JoinGroupRequestProtocol", name="range", metadata=SUBSCRIPTION)
        self.send(
            JOIN,
            group_id=self.group,
            session_timeout=10_000,
            rebalance_timeout=30_000,
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(protocol,),
            reason=reason,
        )

    def join_answer(self) -> Any:
        answer = self.receive(JOIN)
        if answer.error_code == ErrorCode.member_id_required:
            self.member_id = answer.member_id
            self.send_join(self.reason)
            answer = self.receive(JOIN)
        assert answer.error_code == ErrorCode.none, answer
        self.generation = answer.generation_id
        return answer

    def sync(self, assignments: dict[str, list[int]] | None = None) -> Any:
        given = tuple(
            part(
                SYNC,
                VERSIONS[SYNC],
                "SyncGroupRequestAssignment",
                member_id=m,
                assignment=encode_assignment(Assignment(tuple((TOPIC, p) for p in ps))),
            )
            for m, ps in (assignments or {}).items()
        )
        self.send(
            SYNC,
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=given,
        )
        return self

    def leave(self, reason: str) -> None:
        who = part(
            LEAVE, VERSIONS[LEAVE], "MemberIdentity", member_id=self.member_id, group_instance_id=None, reason=reason
        )
        self.send(LEAVE, group_id=self.group, members=(who,))
        assert self.receive(LEAVE).error_code == ErrorCode.none

    def close(self) -> None:
        self.raw.close()


def make_history(port: int, group: str) -> tuple[Member, Member]:
    """Three rebalances: a joins alone; b joins and a rejoins 300 ms later; b leaves and a rejoins."""
    a, b = Member(port, group, "alpha"), Member(port, group, "beta")
    a.send_join(reason="starting")
    a.join_answer()
    a.sync({a.member_id: [0, 1, 2]}).receive(SYNC)
    b.send_join(reason="scaling out")
    b.raw.sock.settimeout(30)
    b_first = b.receive(JOIN)  # KIP-394: MEMBER_ID_REQUIRED, then the join that starts the rebalance
    b.member_id = b_first.member_id
    b.send_join(reason="scaling out")
    time.sleep(0.3)  # a is late: it rejoins 300 ms after b (a real consumer would at its next heartbeat)
    a.send_join(reason="rebalance in progress")
    leader = a.join_answer()
    b.generation = b.receive(JOIN).generation_id
    assert leader.leader == a.member_id
    a.sync({a.member_id: [0, 1], b.member_id: [2]})
    b.sync().receive(SYNC)
    a.receive(SYNC)
    b.leave("the consumer is being closed")
    a.send_join()
    a.join_answer()
    a.sync({a.member_id: [0, 1, 2]}).receive(SYNC)
    return a, b


def herd(*args: str, bootstrap: str) -> Any:
    """`herd groups ARGS` in this process (click's runner: no interpreter to start); .exit_code, .stdout, .stderr."""
    from click.testing import CliRunner

    from herd.cli.groups import groups

    return CliRunner().invoke(groups, [*args, "--bootstrap-server", bootstrap])


def history_json(group: str, bootstrap: str) -> dict[str, Any]:
    result = herd("history", "--group", group, "--output", "json", bootstrap=bootstrap)
    assert result.exit_code == 0 and not result.stderr, result
    return json.loads(result.stdout)


def check_history(found: dict[str, Any], a: Member, b: Member) -> None:
    rebalances = found["rebalances"]
    assert [(r["cause"], r["generation"], r["outcome"]) for r in rebalances] == [
        ("member-join", 1, "stable"),
        ("member-join", 2, "stable"),
        ("member-leave", 3, "stable"),
    ]
    first, joined, left = rebalances
    assert first["member_id"] == a.member_id and "starting" in first["reason"]
    assert joined["member_id"] == b.member_id and "scaling out" in joined["reason"]
    assert [m["member_id"] for m in joined["late"]] == [a.member_id] and joined["late"][0]["after_ms"] >= 250
    assert {m["member_id"]: m["partitions"] for m in joined["members"]} == {a.member_id: 2, b.member_id: 1}
    assert joined["join_ms"] >= 250 and joined["sync_ms"] is not None and joined["members"][0]["client_id"]
    assert left["member_id"] == b.member_id and "the consumer is being closed" in left["reason"]
    assert [m["partitions"] for m in left["members"]] == [3] and found["state"] == "Stable"


@embedded_only("stops and restarts the one broker on its data directory")
def test_history_is_printed_as_a_table_and_json_and_survives_a_restart(broker_factory):
    broker = broker_factory(OVERRIDES)
    group, bootstrap = "history-group", broker.bootstrap
    a, b = make_history(broker.port, group)
    try:
        check_history(history_json(group, bootstrap), a, b)
        table = herd("history", "--group", group, bootstrap=bootstrap)
        assert table.exit_code == 0 and not table.stderr, table
        header, *cells = [re.split(" {2,}", line.strip()) for line in table.stdout.splitlines()]
        assert header == [
            "GENERATION",
            "CAUSE",
            "REASON",
            "MEMBER",
            "STARTED",
            "JOIN",
            "SYNC",
            "MEMBERS",
            "LATE",
            "DROPPED",
            "OUTCOME",
        ]
        assert [(r[0], r[1], r[2], r[-1]) for r in cells] == [
            ("1", "member-join", "starting", "stable"),
            ("2", "member-join", "scaling out", "stable"),
            ("3", "member-leave", "the consumer is being closed", "stable"),
        ]
        assert cells[1][8].startswith(f"{a.member_id}+") and cells[1][7] == "2" and cells[1][9] == "-"
    finally:
        a.close()
        b.close()
    broker.stop()
    broker.restart()
    check_history(history_json(group, bootstrap), a, b)
    missing = herd("history", "--group", "no-such-group", bootstrap=bootstrap)
    assert missing.exit_code == 1 and missing.stderr.strip().endswith("Consumer group 'no-such-group' does not exist.")


# -- cluster mode: the history moves with its group ----------------------------------------------------------------


@pytest.fixture
def cluster(postgres_server, request, tmp_path):
    from pgcluster import database_name, module_id

    from herd.testing import HerdCluster

    url = postgres_server.create_database(database_name(f"{module_id(request)}__history"), replace=True)
    overrides = {
        **OVERRIDES,
        "offsets.topic.num.partitions": "3",
        "broker.session.timeout.ms": "2000",
        "broker.heartbeat.interval.ms": "500",
    }
    nodes = HerdCluster(tmp_path, overrides=overrides, database_url=url, faults=False)
    with nodes.start(nodes=3, balanced=False):
        yield nodes


def coordinator(cluster: Any, group: str, among: list[int]) -> int:
    """The index of the node that coordinates `group`, as a live node names it (waits for one to)."""
    ports = {cluster.nodes[i].port: i for i in among}

    def named() -> list[int] | None:
        with RawClient(cluster.nodes[among[0]].port) as c:
            found = c.request(FIND, 4, req(FIND, 4, key_type=0, coordinator_keys=(group,))).coordinators[0]
        return [ports[found.port]] if found.error_code == ErrorCode.none and found.port in ports else None

    return wait_until(named, 30, f"a live node to coordinate {group}", interval=0.05, ignore=(OSError,))[0]


def described_history(port: int, group: str) -> dict[str, Any]:
    resource = part(
        DESCRIBE_CONFIGS,
        4,
        "DescribeConfigsResource",
        resource_type=32,
        resource_name=group,
        configuration_keys=(HISTORY,),
    )
    with RawClient(port) as c:
        answer = c.request(
            DESCRIBE_CONFIGS,
            4,
            req(DESCRIBE_CONFIGS, 4, resources=(resource,), include_synonyms=False, include_documentation=False),
        )
    (result,) = answer.results
    assert result.error_code == ErrorCode.none, result
    (config,) = result.configs
    assert config.name == HISTORY and config.read_only
    return json.loads(config.value)


@pytest.mark.timeout(120)
def test_the_history_moves_with_its_group_to_the_next_coordinator(cluster):
    group = next(f"moving-{i}" for i in range(100) if coordinator_partition(f"moving-{i}", 3) == 0)
    before = coordinator(cluster, group, [0, 1, 2])
    a, b = make_history(cluster.nodes[before].port, group)
    a.close()
    b.close()
    other = next(i for i in range(3) if i != before)
    assert described_history(cluster.nodes[other].port, group)["rebalances"][-1]["cause"] == "member-leave"
    assert cluster.terminate(before) == 0  # SIGTERM: the node hands its partitions over
    alive = [i for i in range(3) if i != before]
    after = coordinator(cluster, group, alive)
    tried: list[Any] = []

    def history() -> Any:  # the new coordinator may still be loading the partition
        tried.append(herd("history", "--group", group, "--output", "json", bootstrap=cluster.address(after)))
        return tried[-1] if tried[-1].exit_code == 0 else None

    found = wait_until(history, 30, lambda: f"herd history to succeed (the last: {tried[-1]})", interval=0.1)
    check_history(json.loads(found.stdout), a, b)
    elsewhere = next(i for i in alive if i != after)
    assert described_history(cluster.nodes[elsewhere].port, group) == json.loads(found.stdout)
