"""Consumer groups across clients and across broker restarts: cooperative-sticky incremental rebalancing
(confluent-kafka, kafka-python), one group mixing all three clients, and committed offsets that survive a
SIGKILL of the broker. The module's broker runs on both backends (tests/backends.py); the SIGKILL is the
embedded node's."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from backends import BACKENDS, Broker, embedded_only, start_broker
from groupmembers import (
    BROKER_OVERRIDES,
    CLIENTS,
    admin_groups,
    balanced,
    committed_offsets,
    consumed_values,
    create_topic,
    produce,
    settled,
    start_members,
    stop_all,
    wait_for,
)

_names = itertools.count()


@pytest.fixture(scope="module", params=BACKENDS)
def shared_broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "groups-mixed", BROKER_OVERRIDES) as broker:
        yield broker


def _topic(broker: Broker, partitions: int = 6) -> str:
    name = f"mixed{next(_names)}"
    create_topic(broker.bootstrap, name, partitions)
    return name


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_cooperative_sticky_moves_only_what_must_move(shared_broker, members, client):
    bootstrap, topic = shared_broker.bootstrap, _topic(shared_broker)
    group = f"g-{topic}"
    members += start_members(client, bootstrap, topic, group, n=2, assignor="cooperative-sticky")
    settled(members, 6)
    before = {m.name: m.assigned for m in members}
    marks = {m.name: m.event_count() for m in members}

    members += start_members(client, bootstrap, topic, group, n=1, prefix="new", assignor="cooperative-sticky")
    settled(members, 6)
    newcomer = members[-1]
    assert len(newcomer.assigned) == 2
    for m in members[:2]:
        revoked = frozenset().union(*(p for kind, p in m.events[marks[m.name] :] if kind == "revoked"))
        assert len(revoked) == 1, f"{m.name} gave up {sorted(revoked)}, not just the one partition that had to move"
        assert m.assigned == before[m.name] - revoked, f"{m.name} lost or gained more than the moved partition"
    assert newcomer.assigned == frozenset().union(*before.values()) - members[0].assigned - members[1].assigned


def test_one_group_of_kafka_python_confluent_and_aiokafka_members(shared_broker, members):
    bootstrap, topic = shared_broker.bootstrap, _topic(shared_broker)
    members += start_members(CLIENTS, bootstrap, topic, f"g-{topic}", assignor="roundrobin")
    settled(members, 6)
    assert sorted(len(m.assigned) for m in members) == [2, 2, 2]
    listed, described = admin_groups("confluent", bootstrap, [f"g-{topic}"])
    assert described[f"g-{topic}"]["protocol"] == "roundrobin"
    assert sorted(c for c, _ in described[f"g-{topic}"]["members"]) == ["ak-m2", "cf-m1", "kp-m0"]

    values = produce(bootstrap, topic, 6, 300)
    wait_for(lambda: len(consumed_values(members)) >= 300, what="300 messages consumed")
    members[1].stop()  # the confluent-kafka member leaves; kafka-python and aiokafka share its partitions
    wait_for(lambda: balanced([members[0], members[2]], 6), what="the other two taking over")
    more = produce(bootstrap, topic, 6, 300, start=300)
    wait_for(lambda: len(consumed_values(members)) >= 600, what="600 messages consumed")
    consumed = consumed_values(members)
    assert not [v for v, n in Counter(consumed).items() if n > 1], "a message was consumed twice"
    assert sorted(consumed) == sorted(values + more)


@embedded_only("a kill -9 and restart of the one broker on its data directory (test_cluster kills a node)")
def test_commits_survive_a_broker_sigkill(broker_factory):
    broker = broker_factory(BROKER_OVERRIDES)
    bootstrap, topic = broker.bootstrap, _topic(broker)
    first = produce(bootstrap, topic, 6, 120)
    groups = {client: f"restart-{client}" for client in CLIENTS}
    members = [start_members(client, bootstrap, topic, groups[client], n=1)[0] for client in CLIENTS]
    try:
        for m in members:
            wait_for(lambda: sorted(v for _, _, v in m.consumed) == sorted(first), what=f"{m.name} reading all")
        for client, group in groups.items():
            wait_for(
                lambda: committed_offsets(bootstrap, group, topic, 6) == {p: 20 for p in range(6)},
                what=f"{client}'s commits",
            )
    finally:
        stop_all(members)

    broker.kill()  # SIGKILL: nothing is flushed on the way out
    broker.restart()
    for client, group in groups.items():
        assert committed_offsets(bootstrap, group, topic, 6) == {p: 20 for p in range(6)}
        _, described = admin_groups(client, bootstrap, [group])
        assert described[group]["state"].lower() == "empty"

    more = produce(bootstrap, topic, 6, 60, start=120)
    members = [start_members(client, bootstrap, topic, groups[client], n=1, prefix="after")[0] for client in CLIENTS]
    try:
        for m in members:  # each group resumes from its committed offsets: only the new messages arrive
            wait_for(lambda: len(m.consumed) >= 60, what=f"{m.name} reading the new messages")
        for m in members:
            assert sorted(v for _, _, v in m.consumed) == sorted(more)
    finally:
        stop_all(members)
