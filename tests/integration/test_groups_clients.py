"""Consumer groups through each real client (kafka-python, confluent-kafka, aiokafka), over real sockets; and share
groups (KIP-932) through confluent-kafka's ShareConsumer, at the end.

One broker serves the whole module (each test has its own topic and group), on each backend
(tests/backends.py); the initial rebalance delay is 0 and session timeouts are a few seconds, so groups form
and fail over quickly. Members run in threads (see groupmembers); the one killed without leaving runs in a
child process.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections import Counter

import pytest
from backends import BACKENDS, start_broker
from click.testing import CliRunner
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from groupmembers import (
    BROKER_OVERRIDES,
    CLIENTS,
    ChildMember,
    add_partitions,
    admin_groups,
    balanced,
    committed_offsets,
    consumed_values,
    create_topic,
    produce,
    settled,
    start_members,
    wait_for,
)

from herd.cli import cli
from herd.testing.wait import wait_until

_names = itertools.count()


# share-group members heartbeat every second, so that they are given partitions quickly (the share-group tests)
SHARE_HEARTBEAT = {"group.share.min.heartbeat.interval.ms": "1000", "group.share.heartbeat.interval.ms": "1000"}


@pytest.fixture(scope="module", params=BACKENDS)
def shared_broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "groups", {**BROKER_OVERRIDES, **SHARE_HEARTBEAT}) as broker:
        yield broker


@pytest.fixture
def topic(shared_broker, request):
    name = f"t{next(_names)}-{request.node.name.split('[')[-1].rstrip(']')}"
    create_topic(shared_broker.bootstrap, name, 6)
    return name


def _exactly_once(values: list[bytes], expected: list[bytes]) -> None:
    duplicates = [v for v, n in Counter(values).items() if n > 1]
    assert not duplicates, f"{len(duplicates)} messages consumed more than once, e.g. {duplicates[:3]}"
    assert sorted(values) == sorted(expected)


@pytest.mark.parametrize("client", CLIENTS)
def test_balanced_exactly_once_and_a_leaving_member(shared_broker, topic, members, client):
    bootstrap = shared_broker.bootstrap
    members += start_members(client, bootstrap, topic, f"g-{topic}")
    wait_for(lambda: balanced(members, 6), what="3 members holding 2 partitions each")
    assert sorted(len(m.assigned) for m in members) == [2, 2, 2]

    first = produce(bootstrap, topic, 6, 300)
    wait_for(lambda: len(consumed_values(members)) >= 300, what="300 messages consumed")

    leaver, rest = members[0], members[1:]
    leaver.stop()  # closes the consumer: LeaveGroup
    wait_for(lambda: balanced(rest, 6), what="the two remaining members taking over all 6 partitions")
    second = produce(bootstrap, topic, 6, 300, start=300)
    wait_for(lambda: len(consumed_values(members)) >= 600, what="600 messages consumed")
    _exactly_once(consumed_values(members), first + second)
    wait_for(
        lambda: committed_offsets(bootstrap, f"g-{topic}", topic, 6) == {p: 100 for p in range(6)},
        what="every partition committed at its end",
    )
    for m in members:
        m.check()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_member_killed_without_leaving_is_expired(shared_broker, topic, members, client):
    bootstrap, group = shared_broker.bootstrap, f"g-{topic}"
    members += start_members(client, bootstrap, topic, group, n=2)
    child = ChildMember(client, bootstrap, topic, group, session_ms=2000)
    try:
        wait_for(lambda: balanced([*members, child], 6), what="two members and the child balanced")
        child.kill()
        wait_for(lambda: balanced(members, 6), timeout=20, what="the survivors taking over after session expiry")
    finally:
        child.kill()
    values = produce(bootstrap, topic, 6, 60)
    wait_for(lambda: set(values) <= set(consumed_values(members)), what="the survivors consuming every partition")


@pytest.mark.parametrize("client", CLIENTS)
def test_static_member_restart_keeps_generation_and_partitions(shared_broker, topic, members, client):
    # All three are static: kafka-python 3.0.12's range assignor loses dynamic members when static and dynamic
    # ones are interleaved in the member list (itertools.groupby on unsorted input).
    bootstrap, group = shared_broker.bootstrap, f"g-{topic}"
    for i in range(3):
        members += start_members(client, bootstrap, topic, group, n=1, prefix=f"s{i}-", instance_id=f"static-{i}")
    settled(members, 6)
    restarting, others = members[0], members[1:]
    before = {m.name: (m.event_count(), m.assigned) for m in others}
    generation, held = restarting.generation, restarting.assigned

    restarting.stop()  # a static member does not leave the group on close
    again = start_members(client, bootstrap, topic, group, n=1, prefix="again", instance_id="static-0")[0]
    members.append(again)
    wait_for(lambda: again.assigned, what="the restarted static member getting its partitions")
    assert again.assigned == held
    if client != "confluent":  # librdkafka does not expose the generation
        assert again.generation == generation
    assert {m.name: (m.event_count(), m.assigned) for m in others} == before, "the other members saw a rebalance"

    values = produce(bootstrap, topic, 6, 60)
    wait_for(lambda: set(values) <= set(consumed_values(members)), what="the group consuming every partition")
    assert {m.name: m.event_count() for m in others} == {name: n for name, (n, _) in before.items()}


@pytest.mark.parametrize("client", CLIENTS)
def test_added_partitions_are_picked_up(shared_broker, topic, members, client):
    bootstrap = shared_broker.bootstrap
    members += start_members(client, bootstrap, topic, f"g-{topic}")
    wait_for(lambda: balanced(members, 6), what="three members balanced on 6 partitions")
    add_partitions(bootstrap, topic, 9)
    wait_for(lambda: balanced(members, 9), timeout=20, what="three members balanced on 9 partitions")
    values = produce(bootstrap, topic, 9, 90)
    wait_for(lambda: set(values) <= set(consumed_values(members)), what="messages of the new partitions consumed")


@pytest.mark.parametrize("client", CLIENTS)
def test_describe_and_list_groups_through_admin(shared_broker, topic, members, client):
    bootstrap, group = shared_broker.bootstrap, f"g-{topic}"
    members += start_members(client, bootstrap, topic, group, n=2)
    wait_for(lambda: balanced(members, 6), what="two members balanced")
    listed, described = wait_for(lambda: _stable(client, bootstrap, group), what="the group described as Stable")
    assert group in listed
    if client != "aiokafka":  # aiokafka's list_consumer_groups asks ListGroups v0, which has no state
        assert listed[group].lower() == "stable"
    d = described[group]
    assert d["protocol"] == "range"
    prefix = {"kafka-python": "kp", "confluent": "cf", "aiokafka": "ak"}[client]
    assert d["members"] == sorted((f"{prefix}-{m.member_name}", sorted(m.assigned)) for m in members)

    for m in members:
        m.stop()
    listed, described = admin_groups(client, bootstrap, [group])
    assert described[group]["state"].lower() == "empty" and described[group]["members"] == []


def _stable(client: str, bootstrap: str, group: str):
    listed, described = admin_groups(client, bootstrap, [group])
    return (listed, described) if described[group]["state"].lower() == "stable" else None


# --- share groups (KIP-932) on both backends, with confluent-kafka's ShareConsumer -----------------------------------
# Two consumers read a three-partition topic as a queue, every record delivered and accepted once (in cluster mode
# the partitions' leaders read the group's share.auto.offset.reset from the node that coordinates it), and
# kafka-share-groups.sh's view of the group (herd share-groups) shows no lag left (in cluster mode the node that
# coordinates the group reads the share state of partitions other nodes lead from their share coordinators, and
# their high watermarks from PostgreSQL).


def _group_reading_records(bootstrap: str, partitions: int = 3, count: int = 60):
    """A topic with `count` records, a share group set to start at the earliest, and two ShareConsumers of it."""
    topic, group = f"q-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])]
    ).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    values = {b"v%d" % i for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(30) == 0
    consumers = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(2)]
    for c in consumers:
        c.subscribe([topic])
    return topic, group, values, consumers


def _read_all(consumers: list[ShareConsumer], values: set[bytes]) -> list[bytes]:
    seen: list[bytes] = []

    def all_seen() -> bool:
        for c in consumers:
            seen.extend(m.value() for m in c.poll(0.2) if m.error() is None)
        return set(seen) >= values

    wait_until(all_seen, 60, "every record")
    for c in consumers:
        c.commit_sync()  # the last polls' acknowledgements (close would not send them: librdkafka 2.16)
    return seen


def test_share_consumers_read_a_topic_as_a_queue(shared_broker) -> None:
    topic, group, values, consumers = _group_reading_records(shared_broker.bootstrap)
    try:
        assert sorted(_read_all(consumers, values)) == sorted(values)
    finally:
        for c in consumers:
            c.close()


def test_herd_share_groups_shows_no_lag_once_every_record_is_accepted(shared_broker) -> None:
    bootstrap = shared_broker.bootstrap
    topic, group, values, consumers = _group_reading_records(bootstrap, count=30)
    try:
        _read_all(consumers, values)

        def herd_rows() -> list[dict]:
            result = CliRunner().invoke(
                cli, ["share-groups", "describe", "--group", group, "--output", "json", "--bootstrap-server", bootstrap]
            )
            assert result.exit_code == 0, result.output
            return json.loads(result.stdout)

        # commit_sync returns once the acknowledgements it sends are durable, but not those that rode on a ShareFetch
        # still in flight (librdkafka 2.16 does not wait for it): herd writes those as the fetch arrives, not when
        # its wait is up (test_share_admin's waiting-fetch test pins that), so the lag is soon 0 on every partition
        wait_until(
            lambda: [(r["partition"], r["lag"]) for r in herd_rows()] == [(0, 0), (1, 0), (2, 0)],
            15,
            "no lag on any partition",
        )
    finally:
        for c in consumers:
            c.close()
