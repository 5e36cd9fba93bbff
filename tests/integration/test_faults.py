"""Fault injection on a real `herd serve` (herd.http.listener and herd.faults.enable set): real clients seeing
injected errors and recovering as they would from the real thing, delays and stalls keeping the order of answers,
drops closing only the connection they hit, the CLI end to end, and a node without herd.faults.enable refusing
with 403. One broker for the module; the consumer-recovery scenarios are the pytest plugin's (tests/plugin)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import BrokerProcess
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from rawkafka import RawClient

from herd.client.wire import request_builder
from herd.testing.faults import FaultError, Faults


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(
        tmp_path_factory.mktemp("faults") / "data", {"herd.http.listener": "127.0.0.1:0", "herd.faults.enable": "true"}
    ).start()
    # the module's topic, made here so that each test stands alone (the offsets test commits to it, and an
    # OffsetCommit to a topic that does not exist is refused; it passed only after the produce test made it)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(20)
    yield b
    b.stop()


@pytest.fixture
def faults(broker: BrokerProcess) -> Iterator[Faults]:
    faults = Faults(broker.http)
    yield faults
    faults.clear()


def _commit(group: str, offset: int) -> Any:
    b = request_builder(8, 9)
    return b.request(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            b(
                "OffsetCommitRequestTopic",
                name="t",
                partitions=(
                    b(
                        "OffsetCommitRequestPartition",
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )


def _committed(broker: BrokerProcess, group: str) -> int:
    b = request_builder(9, 8)
    request = b.request(
        require_stable=False,
        groups=(
            b(
                "OffsetFetchRequestGroup",
                group_id=group,
                topics=(b("OffsetFetchRequestTopics", name="t", partition_indexes=(0,)),),
            ),
        ),
    )
    with RawClient(broker.port) as client:
        return client.request(9, 8, request).groups[0].topics[0].partitions[0].committed_offset


def _api_versions(client: RawClient, client_id: str) -> bytes:
    return client.encode(
        18, 3, request_builder(18, 3).request(client_software_name="raw", client_software_version="1"), client_id
    )


def _readable(client: RawClient, seconds: float) -> bool:
    return bool(select.select([client.sock], [], [], seconds)[0])


def test_a_producer_retries_injected_not_leader_and_a_consumer_recommits_after_not_coordinator(
    broker: BrokerProcess, faults: Faults
) -> None:
    produce = faults.add(action="error", api="Produce", topic="t", error="NOT_LEADER_OR_FOLLOWER", count=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retry.backoff.ms": 50})
    delivered: list[Any] = []
    for i in range(3):
        producer.produce("t", f"m{i}".encode(), partition=0, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(20) == 0
    assert delivered == [None, None, None]
    assert produce.id not in [r.id for r in faults.list()]  # both injections used: the count removed it

    commit = faults.add(action="error", api="OffsetCommit", group="kp", error="NOT_COORDINATOR", count=1)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp", enable_auto_commit=False)
    try:
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(2, "", -1)})  # NOT_COORDINATOR: finds the coordinator, commits again
        assert consumer.committed(tp) == 2
    finally:
        consumer.close()
    assert commit.id not in [r.id for r in faults.list()]


def test_a_delayed_answer_keeps_its_place_and_a_stall_holds_the_connection_until_removed(
    broker: BrokerProcess, faults: Faults
) -> None:
    faults.add(action="delay", api="ApiVersions", client_id="slow", delay_ms=200, count=1)
    with RawClient(broker.port) as client:
        client.send_raw(_api_versions(client, "slow") + _api_versions(client, "slow"))
        client.read_response(18, 3)
        assert client.last_correlation_id == 1  # the delayed answer first, the one handled at once behind it
        client.read_response(18, 3)
        assert client.last_correlation_id == 2

    stall = faults.add(action="stall", client_id="stuck")
    with RawClient(broker.port) as stuck, RawClient(broker.port) as other:
        stuck.send_raw(_api_versions(stuck, "stuck") + _api_versions(stuck, "stuck"))
        other.send_raw(_api_versions(other, "other"))
        other.read_response(18, 3)  # other connections are served meanwhile
        assert not _readable(stuck, 0.3)
        assert [r.hits for r in faults.list() if r.id == stall.id] == [1]  # the second request was not even read
        faults.remove(stall.id)
        stuck.read_response(18, 3)
        stuck.read_response(18, 3)
        assert stuck.last_correlation_id == 2


def test_drops_close_only_their_connection_and_after_means_applied_but_unanswered(
    broker: BrokerProcess, faults: Faults
) -> None:
    faults.add(action="drop", api="OffsetCommit", group="after", when="after", count=1)
    faults.add(action="drop", api="OffsetCommit", group="before", count=1)
    with RawClient(broker.port) as bystander:
        bystander.request(
            18, 3, request_builder(18, 3).request(client_software_name="raw", client_software_version="1")
        )
        for group in ("after", "before"):
            with RawClient(broker.port) as client:
                client.send_raw(client.encode(8, 9, _commit(group, 42)))
                assert client.is_closed_by_peer()
        assert _committed(broker, "after") == 42  # the broker wrote it; the answer died with the connection
        assert _committed(broker, "before") == -1
        bystander.send_raw(_api_versions(bystander, "raw"))
        bystander.read_response(18, 3)  # still open

    with RawClient(broker.port) as x, RawClient(broker.port) as y:
        for client, name in ((x, "x"), (y, "y")):
            client.send_raw(_api_versions(client, name))
            client.read_response(18, 3)
        assert faults.drop_connections(client_id="x") == 1
        assert x.is_closed_by_peer()
        y.send_raw(_api_versions(y, "y"))
        y.read_response(18, 3)


def test_the_python_client_reports_the_nodes_one_line_refusals(faults: Faults) -> None:
    with pytest.raises(FaultError, match="Kafka does not answer Heartbeat with OFFSET_OUT_OF_RANGE") as caught:
        faults.add(action="error", api="Heartbeat", error="OFFSET_OUT_OF_RANGE")
    assert caught.value.status == 400
    with pytest.raises(FaultError, match="no fault rule 12345"):
        faults.remove(12345)
    with faults.injected(action="delay", api="Fetch", delay_ms=10) as rule:
        assert [r.id for r in faults.list()] == [rule.id]
    assert faults.list() == []


def _herd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "herd.cli", "faults", *args], capture_output=True, text=True, timeout=30, env=env
    )


def test_the_cli_end_to_end(broker: BrokerProcess, faults: Faults) -> None:
    added = _herd(
        "add",
        "--http",
        broker.http,
        "--api",
        "Heartbeat",
        "--group",
        "g",
        "--error",
        "REBALANCE_IN_PROGRESS",
        "--count",
        "1",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("added fault rule ")
    listed = _herd("list", "--output", "json", env={**os.environ, "HERD_HTTP": broker.http})
    rules = json.loads(listed.stdout)
    assert [(r["api"], r["group"], r["error"], r["count"], r["hits"]) for r in rules] == [
        ("Heartbeat", "g", "REBALANCE_IN_PROGRESS", 1, 0)
    ]
    table = _herd("list", "--http", broker.http).stdout.splitlines()
    assert table[0].split()[:4] == ["ID", "ACTION", "API", "GROUP"]
    assert table[1].split()[1:4] == ["error", "Heartbeat", "g"]
    refused = _herd("add", "--http", broker.http, "--api", "Produce", "--group", "g", "--action", "drop")
    assert (refused.returncode, refused.stderr) == (1, "herd: error: Produce requests carry no group\n")
    bad = _herd("add", "--http", "nowhere", "--action", "drop")
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    cleared = _herd("clear", "--http", broker.http)
    assert (cleared.returncode, cleared.stdout) == (0, "removed 1 fault rules\n")


def test_a_node_without_herd_faults_enable_refuses_with_403(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data", {"herd.http.listener": "127.0.0.1:0"}).start()
    try:
        with pytest.raises(FaultError, match="fault injection is disabled: start the node with herd.faults.enable"):
            Faults(node.http).list()
        refused = _herd("add", "--http", node.http, "--action", "drop")
        assert refused.returncode == 1 and "fault injection is disabled" in refused.stderr
        with pytest.raises(FaultError, match="fault injection is disabled") as moving:
            Faults(node.http).move_coordinator("g")
        assert moving.value.status == 403
        refused = _herd("move", "--http", node.http, "--group", "g")
        assert refused.returncode == 1 and "fault injection is disabled" in refused.stderr
    finally:
        node.stop()
    assert "herd http listening" in node.log()


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://elsewhere.example"}, {"Sec-Fetch-Site": "cross-site"}],
    ids=["origin", "sec-fetch-site"],
)
def test_another_sites_page_cannot_inject_faults(
    broker: BrokerProcess, faults: Faults, headers: dict[str, str]
) -> None:
    """A page on another site that the operator's browser runs must not add rules through the listener (the
    browser names the page's origin); the node's own console and scripts (no Origin) still can."""
    import urllib.error
    import urllib.request

    body = json.dumps({"action": "drop"}).encode()
    request = urllib.request.Request(
        f"http://{broker.http}/v1/faults",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403 and b"another site" in refused.value.read()
    assert faults.list() == []
    same = urllib.request.Request(
        f"http://{broker.http}/v1/faults",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Origin": f"http://{broker.http}"},
    )
    with urllib.request.urlopen(same, timeout=10) as answer:
        assert answer.status in (200, 201)
    assert len(faults.list()) == 1
