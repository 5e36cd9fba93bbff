"""Classic and consumer-protocol members in one group with real clients (issue 31 point 7; KIP-848's online
migration, herd.coordinator.migration and consumer_classic): kafka-python and aiokafka, which speak only the
classic protocol, share a group with confluent-kafka consumers on `group.protocol=consumer` while records keep
arriving. The group rolls from classic to consumer (a consumer-protocol member upgrades it, classic members keep
consuming inside it, then leave) and back (classic members join the consumer group, the last consumer-protocol
member leaves and the group is classic again). Every acknowledged record is read, one is read twice only by a
member whose commit failed (at-least-once), and no partition is ever held by two members at once as the clients
report it. On both backends (tests/backends.py)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from backends import BACKENDS, start_broker
from groupmembers import (
    BROKER_OVERRIDES,
    Member,
    Producing,
    consumed_values,
    create_topic,
    owned_twice,
    settled,
    start_members,
    wait_for,
)

PARTITIONS = 6
OVERRIDES = {
    **BROKER_OVERRIDES,
    # consumer-protocol members heartbeat every half second, as the classic members of groupmembers do
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}
_names = itertools.count()


@pytest.fixture(scope="module", params=BACKENDS)
def shared_broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "migration", OVERRIDES) as broker:
        yield broker


def group_type(bootstrap: str, group: str) -> str | None:
    """The group's type as ListGroups v5 gives it to confluent-kafka's AdminClient ("CLASSIC", "CONSUMER")."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    listed = admin.list_consumer_groups().result(15)
    return next((g.type.name for g in listed.valid if g.group_id == group), None)


def test_a_group_rolls_from_classic_clients_to_consumer_protocol_clients_and_back(shared_broker, members) -> None:
    bootstrap = shared_broker.bootstrap
    n = next(_names)
    topic, group = f"mig{n}", f"mig-group{n}"
    create_topic(bootstrap, topic, PARTITIONS)
    producing = Producing(bootstrap, topic, PARTITIONS, poll_s=0.2)
    producing.start()
    started: list[Member] = []

    def start(client: str, name: str) -> Member:
        (member,) = start_members(client, bootstrap, topic, group, n=1, prefix=name)
        members.append(member)
        started.append(member)
        return member

    def now_held_by(*holders: Member, kind: str) -> None:
        settled(list(holders), PARTITIONS, timeout=60)
        wait_for(lambda: group_type(bootstrap, group) == kind, 30, f"the group to be a {kind} group")

    try:
        # classic clients form a classic group
        k1, a1 = start("kafka-python", "k1-"), start("aiokafka", "a1-")
        now_held_by(k1, a1, kind="CLASSIC")
        # a consumer-protocol member upgrades it; the classic members go on inside the consumer group
        c1 = start("confluent-consumer", "c1-")
        now_held_by(k1, a1, c1, kind="CONSUMER")
        k1.stop()
        c2 = start("confluent-consumer", "c2-")
        now_held_by(a1, c1, c2, kind="CONSUMER")
        a1.stop()
        now_held_by(c1, c2, kind="CONSUMER")
        # and back: classic clients join the consumer group; when the last consumer-protocol member leaves, the
        # group is classic again
        k2 = start("kafka-python", "k2-")
        now_held_by(c1, c2, k2, kind="CONSUMER")
        c1.stop()
        now_held_by(c2, k2, kind="CONSUMER")
        c2.stop()
        now_held_by(k2, kind="CLASSIC")
        a2 = start("aiokafka", "a2-")
        now_held_by(k2, a2, kind="CLASSIC")
    finally:
        producing.stop()
    assert producing.errors == []
    acked = producing.values()
    live = [m for m in started if not m.stopping]
    wait_for(
        lambda: acked <= set(consumed_values(started)),
        60,
        lambda: f"every acknowledged record read ({len(acked - set(consumed_values(started)))} missing)",
    )
    for member in started:
        member.check()
    assert owned_twice(started) == []
    twice = [value for value, count in Counter(consumed_values(started)).items() if count > 1]
    failures = {m.name: m.commit_failures for m in started if m.commit_failures}
    assert not twice or failures, f"{len(twice)} records read twice though every commit succeeded: {twice[:5]}"
    assert len(live) == 2
