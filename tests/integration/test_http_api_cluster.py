"""The HTTP API on a cluster of three nodes sharing PostgreSQL (each with herd.http.listener on port 0, its URL in
herd_nodes): every node lists every group, whichever node coordinates it (its own and, asked over HTTP, the
others'); a group's page is proxied to its coordinator; a request another node sent is never forwarded again; a
node that does not answer is reported, not an error; the topics come from the database. The console of a node
(headless Chromium) shows every group and the page of a group another node coordinates."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import consolebrowser
import pytest
from groupmembers import ConfluentMember, settled
from pgcluster import create_topic_on, database_name, module_id, wait_offsets_spread

from herd.coordinator.partition import coordinator_partition
from herd.testing import HerdCluster

NODES, OFFSETS_PARTITIONS, TOPIC = 3, 3, "cl-api"
FORWARDED = {"X-Herd-Forwarded-By": "99"}


@pytest.fixture(scope="module")
def cluster(request, postgres_server, tmp_path_factory):
    url = postgres_server.create_database(database_name(module_id(request)), replace=True)
    herd = HerdCluster(
        tmp_path_factory.mktemp("http-cluster"),
        overrides={
            "herd.http.listener": "127.0.0.1:0",
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
            "group.min.session.timeout.ms": "1000",
        },
        database_url=url,
        faults=False,
    )
    try:
        herd.start(nodes=NODES, balanced=False)
        wait_offsets_spread(herd, OFFSETS_PARTITIONS)
        create_topic_on(herd, TOPIC, 2)
        yield herd
    finally:
        herd.close()


def get(cluster: HerdCluster, node: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(f"{cluster.nodes[node].http}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def commit(cluster: HerdCluster, group: str, offset: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_every_node_shows_every_group_and_proxies_a_group_to_its_coordinator(cluster, members):
    groups = [
        next(f"cl-{p}-{n}" for n in range(100) if coordinator_partition(f"cl-{p}-{n}", OFFSETS_PARTITIONS) == p)
        for p in range(OFFSETS_PARTITIONS)
    ]  # one group in each __consumer_offsets partition: on each node
    for group in groups:
        commit(cluster, group, 0)
    members.append(ConfluentMember(cluster.bootstrap, TOPIC, groups[0], name="live"))
    members[0].start()
    settled(members, 2, quiet_s=0.2)

    local = {
        node: {g["group"]: g for g in get(cluster, node, "/v1/groups?scope=local")[1]["groups"]}
        for node in range(NODES)
    }
    owner = {group: node for node, found in local.items() for group in found}
    assert sorted(owner) == sorted(groups) and sorted(owner.values()) == list(range(NODES))
    assert all(g["coordinator"] == node for node, found in local.items() for g in found.values())
    for node in range(NODES):
        status, body = get(cluster, node, "/v1/groups")
        assert status == 200 and body["nodes"] == list(range(NODES)) and body["unreachable"] == []
        assert {g["group"]: g["coordinator"] for g in body["groups"]} == owner

    live = groups[0]
    elsewhere = next(node for node in range(NODES) if node != owner[live])
    status, group = get(cluster, elsewhere, f"/v1/groups/{live}")
    assert status == 200 and group["coordinator"] == owner[live] and group["state"] == "Stable"
    (member,) = group["members"]
    assert member["client_id"] == "cf-live" and member["assignment"] == [{"topic": TOPIC, "partitions": [0, 1]}]
    status, refused = get(cluster, elsewhere, f"/v1/groups/{live}", FORWARDED)  # a forwarded request: no loop
    assert status == 503 and "does not coordinate" in refused["error"]
    assert get(cluster, elsewhere, "/v1/groups/cl-nobody")[0] == 404  # answered by its coordinator

    status, body = get(cluster, elsewhere, "/v1/topics")
    (topic,) = [t for t in body["topics"] if t["topic"] == TOPIC]
    assert status == 200 and all(p["leader"] in range(NODES) and p["size_bytes"] >= 0 for p in topic["partitions"])


def own_groups(cluster: HerdCluster, prefix: str) -> list[str]:
    """One group per __consumer_offsets partition (so on every node), each with a committed offset."""
    groups = [
        next(
            f"{prefix}-{p}-{n}"
            for n in range(100)
            if coordinator_partition(f"{prefix}-{p}-{n}", OFFSETS_PARTITIONS) == p
        )
        for p in range(OFFSETS_PARTITIONS)
    ]
    for group in groups:
        commit(cluster, group, 0)
    return groups


@pytest.mark.browser
def test_the_console_of_any_node_shows_every_group(cluster):
    mine = own_groups(cluster, "cl-console")  # not only the groups an earlier test left, if any
    owner = {g["group"]: g["coordinator"] for g in get(cluster, 0, "/v1/groups")[1]["groups"]}
    elsewhere = next(group for group in mine if owner[group] != 1)
    with consolebrowser.browser() as chromium:
        page = chromium.new_page()
        page.goto(f"{cluster.nodes[1].http}/")
        page.wait_for_function(f"document.querySelectorAll('#groups tbody tr').length === {len(owner)}")
        assert (
            page.locator(f'#groups tr[data-group="{elsewhere}"] td.coordinator').inner_text()
            == f"node {owner[elsewhere]}"
        )
        page.goto(f"{cluster.nodes[1].http}/groups/{elsewhere}")
        page.locator(".facts").wait_for()
        assert f"node {owner[elsewhere]}" in page.locator(".facts").inner_text()


def test_a_node_that_does_not_answer_is_reported(cluster):
    """Its own groups (one per __consumer_offsets partition, so on every node), not those of the other tests."""
    groups = own_groups(cluster, "cl-quiet")
    owner = {
        g["group"]: node
        for node in range(NODES)
        for g in get(cluster, node, "/v1/groups?scope=local")[1]["groups"]
        if g["group"] in groups
    }
    answering = sorted(group for group, node in owner.items() if node != 2)
    assert sorted(owner) == sorted(groups) and answering
    cluster.pause(2)
    try:
        status, body = get(cluster, 0, "/v1/groups")
    finally:
        cluster.resume(2)
    assert status == 200 and [u["node_id"] for u in body["unreachable"]] == [2]
    assert "no answer" in body["unreachable"][0]["error"] and body["unreachable"][0]["url"].startswith("http://")
    assert all(g["coordinator"] != 2 for g in body["groups"])
    assert set(answering) <= {g["group"] for g in body["groups"]}, body
