"""KIP-848 consumer groups with real clients against `herd serve` (issue 31): confluent-kafka consumers with
`group.protocol=consumer` share a topic's partitions as the coordinator assigns them (uniform and range), take
over from a member that leaves, a static member restarted within its session gets its partitions back, offsets
committed at the member's epoch are where the next member resumes, a regex subscription follows topics created
later, and a coordinator move changes no epoch; confluent-kafka's AdminClient and `herd groups` list, describe
and delete consumer groups; raw ConsumerGroupHeartbeat and ConsumerGroupDescribe at each version, ListGroups v5
and DescribeGroups v5/v6 of a consumer group, and the API refused as Kafka refuses it when the consumer protocol
is not enabled. One embedded broker for the module, and a broker of their own for the gate and the move."""

from __future__ import annotations

import json
import uuid

import pytest
from brokers import BrokerProcess
from click.testing import CliRunner
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, req

from herd.cli import cli
from herd.testing import HerdBroker
from herd.testing.wait import wait_until

PARTITIONS = 6
HEARTBEAT = 68


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(
        tmp_path_factory.mktemp("kip848") / "data",
        {"offsets.topic.num.partitions": "4", "group.consumer.heartbeat.interval.ms": "5000"},
        die_with_parent=True,
    )
    process.start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def topic_with_records(bootstrap: str, count: int = 60) -> str:
    topic = unique("t848")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return topic


def consumer(bootstrap: str, group: str, **config: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
            **config,
        }
    )


def owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def poll_all(consumers: list[Consumer], until, timeout: float, what: str) -> list[bytes]:
    """Poll every consumer in turn until `until(values)` holds; the values read, in order."""
    values: list[bytes] = []

    def done() -> bool:
        for c in consumers:
            message = c.poll(0.1)
            if message is not None and message.error() is None:
                values.append(message.value())
        return until(values)

    wait_until(done, timeout, lambda: f"{what} (read {len(values)}, assignments {[owned(c) for c in consumers]})")
    return values


def test_consumers_share_the_partitions_and_one_takes_over_from_a_member_that_leaves(broker) -> None:
    # the records are produced once both members hold their share: records read by the first member while it still
    # held every partition would be read again by the second (nothing is committed here), which is at-least-once,
    # not a shared partition (soak of f2e36eb, run 8: b"3" and b"9" read twice)
    topic, group = topic_with_records(broker.bootstrap, count=0), unique("g")
    members = [consumer(broker.bootstrap, group) for _ in range(2)]
    try:
        for c in members:
            c.subscribe([topic])
        poll_all(members, lambda _: all(len(owned(c)) == 3 for c in members), 30, "both members with 3 partitions")
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(60):
            producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        values = poll_all(
            members,
            lambda v: len(v) >= 60 and all(len(owned(c)) == 3 for c in members),
            30,
            "both members with 3 partitions and every record read",
        )
        assert sorted(values) == sorted(b"%d" % i for i in range(60))  # each record once: no partition shared
        assert owned(members[0]).isdisjoint(owned(members[1]))
        members[1].close()
        poll_all(members[:1], lambda _: owned(members[0]) == set(range(PARTITIONS)), 30, "the survivor owns all 6")
    finally:
        for c in members:
            try:
                c.close()
            except RuntimeError:
                pass  # closed already


def test_the_range_assignor_gives_contiguous_ranges(broker) -> None:
    topic, group = topic_with_records(broker.bootstrap), unique("g")
    members = [consumer(broker.bootstrap, group, **{"group.remote.assignor": "range"}) for _ in range(3)]
    try:
        for c in members:
            c.subscribe([topic])
        poll_all(members, lambda _: all(len(owned(c)) == 2 for c in members), 30, "three members with 2 each")
        ranges = sorted(sorted(owned(c)) for c in members)
        assert ranges == [[0, 1], [2, 3], [4, 5]]
    finally:
        for c in members:
            c.close()


def test_a_static_member_restarted_gets_its_partitions_back_and_the_other_keeps_its_own(broker) -> None:
    topic, group = topic_with_records(broker.bootstrap), unique("g")
    static = consumer(broker.bootstrap, group, **{"group.instance.id": "static-1"})
    other = consumer(broker.bootstrap, group)
    try:
        for c in (static, other):
            c.subscribe([topic])
        poll_all([static, other], lambda _: len(owned(static)) == len(owned(other)) == 3, 30, "3 partitions each")
        before, others = owned(static), owned(other)
        static.close()  # a static member leaves with epoch -2: its partitions are held for it
        static = consumer(broker.bootstrap, group, **{"group.instance.id": "static-1"})
        static.subscribe([topic])
        poll_all([static, other], lambda _: owned(static) == before, 30, "the restarted member's partitions back")
        assert owned(other) == others  # never reassigned
    finally:
        static.close()
        other.close()


def heartbeat(c: RawClient, version: int, **fields):
    values = dict(
        group_id="raw",
        member_id="",
        member_epoch=0,
        rebalance_timeout=30_000,
        subscribed_topic_names=(),
        topic_partitions=(),
    )
    values.update(fields)
    return c.request(HEARTBEAT, version, req(HEARTBEAT, version, **values))


def test_raw_heartbeats_at_v0_and_v1(broker) -> None:
    with RawClient(broker.port) as c:
        v0 = heartbeat(c, 0, group_id=unique("raw"))
        assert v0.error_code == ErrorCode.none and v0.member_id and v0.member_epoch == 1  # v0: the coordinator names it
        assert v0.assignment is not None and v0.assignment.topic_partitions == ()
        empty_id = heartbeat(c, 1, group_id=unique("raw"))
        assert empty_id.error_code == ErrorCode.invalid_request and empty_id.error_message == "MemberId can't be empty."
        group, member = unique("raw"), uuid.uuid4().hex
        v1 = heartbeat(c, 1, group_id=group, member_id=member)
        assert (v1.error_code, v1.member_id, v1.member_epoch) == (ErrorCode.none, member, 1)
        ahead = c.request(
            HEARTBEAT, 1, req(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=5, topic_partitions=None)
        )
        assert ahead.error_code == ErrorCode.fenced_member_epoch
        left = c.request(
            HEARTBEAT, 1, req(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=-1, topic_partitions=None)
        )
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        gone = heartbeat(c, 1, group_id=group, member_id=member, member_epoch=1, rebalance_timeout=-1)
        assert gone.error_code == ErrorCode.unknown_member_id


def test_the_api_is_refused_when_the_consumer_protocol_is_not_enabled(tmp_path) -> None:
    classic_only = BrokerProcess(tmp_path / "data", {"group.coordinator.rebalance.protocols": "classic"})
    classic_only.start()
    try:
        with RawClient(classic_only.port) as c:
            refused = heartbeat(c, 1, member_id="m")
            assert refused.error_code == ErrorCode.unsupported_version
    finally:
        classic_only.stop()


def test_offsets_committed_by_a_member_are_where_the_next_member_resumes(broker) -> None:
    topic, group = topic_with_records(broker.bootstrap), unique("g")
    first = consumer(broker.bootstrap, group)
    first.subscribe([topic])
    try:
        read = poll_all([first], lambda v: len(v) >= 60, 30, "every record")
        assert sorted(read) == sorted(b"%d" % i for i in range(60))
        committed = first.commit(asynchronous=False)  # OffsetCommit v9 at the member's epoch
        assert committed is not None and all(tp.error is None for tp in committed)
    finally:
        first.close()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(60, 66):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    second = consumer(broker.bootstrap, group)
    second.subscribe([topic])
    try:
        rest = poll_all([second], lambda v: len(v) >= 6, 30, "the records after the committed offsets")
        assert sorted(rest) == sorted(b"%d" % i for i in range(60, 66))
    finally:
        second.close()


def test_admin_clients_list_describe_and_delete_consumer_groups(broker) -> None:
    """confluent-kafka's AdminClient: list_consumer_groups with its type filter (ListGroups v5),
    describe_consumer_groups (ConsumerGroupDescribe for a consumer group), delete_consumer_groups."""
    topic, group = topic_with_records(broker.bootstrap), unique("g")
    members = [consumer(broker.bootstrap, group) for _ in range(2)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    try:
        for c in members:
            c.subscribe([topic])
        poll_all(members, lambda _: all(len(owned(c)) == 3 for c in members), 30, "3 partitions each")
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(15)
        mine = [g for g in listed.valid if g.group_id == group]
        assert len(mine) == 1 and mine[0].type == ConsumerGroupType.CONSUMER
        assert mine[0].state == ConsumerGroupState.STABLE
        classic_only = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(15)
        assert group not in {g.group_id for g in classic_only.valid}

        described = admin.describe_consumer_groups([group])[group].result(15)
        assert described.type == ConsumerGroupType.CONSUMER and described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "uniform" and len(described.members) == 2
        assigned = [{tp.partition for tp in m.assignment.topic_partitions} for m in described.members]
        assert sorted(p for a in assigned for p in a) == list(range(PARTITIONS))
        assert all(tp.topic == topic for m in described.members for tp in m.assignment.topic_partitions)

        refused = admin.delete_consumer_groups([group])[group]
        with pytest.raises(KafkaException) as non_empty:
            refused.result(15)
        assert non_empty.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    finally:
        for c in members:
            c.close()
    wait_until(
        lambda: admin.describe_consumer_groups([group])[group].result(15).state == ConsumerGroupState.EMPTY,
        60,
        f"{group} to be empty once both members left",
    )
    admin.delete_consumer_groups([group])[group].result(15)
    gone = {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    assert group not in gone


def test_raw_describe_list_and_describe_groups_of_a_consumer_group(broker) -> None:
    group, member = unique("raw"), uuid.uuid4().hex
    topic = topic_with_records(broker.bootstrap, count=0)
    with RawClient(broker.port) as c:
        joined = heartbeat(c, 1, group_id=group, member_id=member, subscribed_topic_names=(topic,))
        assert joined.error_code == ErrorCode.none and len(joined.assignment.topic_partitions[0].partitions) == 6
        for version in (0, 1):
            described = c.request(
                69, version, req(69, version, group_ids=(group, "nope"), include_authorized_operations=False)
            )
            ours, unknown = described.groups
            assert (ours.error_code, ours.group_state, ours.group_epoch, ours.assignment_epoch) == (
                ErrorCode.none,
                "Stable",
                1,
                1,
            )
            (m,) = ours.members
            assert m.member_id == member and m.subscribed_topic_names == (topic,)
            assert m.assignment.topic_partitions[0].topic_name == topic
            assert m.target_assignment == m.assignment
            assert getattr(m, "member_type", 1) == 1
            assert (unknown.error_code, unknown.error_message) == (
                ErrorCode.group_id_not_found,
                "Group nope not found.",
            )
        listed = c.request(16, 5, req(16, 5, states_filter=(), types_filter=("CONSUMER",)))
        ours = [g for g in listed.groups if g.group_id == group]
        assert [(g.protocol_type, g.group_state, g.group_type) for g in ours] == [("consumer", "Stable", "consumer")]
        v6 = c.request(15, 6, req(15, 6, groups=(group,), include_authorized_operations=False)).groups[0]
        assert (v6.error_code, v6.error_message, v6.group_state) == (
            ErrorCode.group_id_not_found,
            f"Group {group} is not a classic group.",
            "Dead",
        )
        v5 = c.request(15, 5, req(15, 5, groups=(group,), include_authorized_operations=False)).groups[0]
        assert (v5.error_code, v5.group_state) == (ErrorCode.none, "Dead")


def test_a_regex_subscription_follows_topics_created_later(broker) -> None:
    """librdkafka sends a `^` subscription to the coordinator as SubscribedTopicRegex (RE2, matched whole); a topic
    created afterwards is picked up by a later refresh (at most every 10 s, Kafka's minimum interval)."""
    prefix, group = unique("rx"), unique("g")
    first = topic_with_records(broker.bootstrap, count=6)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    renamed = f"{prefix}-a"
    admin.create_topics([NewTopic(renamed, 2, 1)])[renamed].result(15)
    c = consumer(broker.bootstrap, group, **{"topic.metadata.refresh.interval.ms": "1000"})
    try:
        c.subscribe([f"^{prefix}-.*"])
        poll_all([c], lambda _: {tp.topic for tp in c.assignment()} == {renamed}, 30, f"{renamed} assigned")
        later = f"{prefix}-b"
        admin.create_topics([NewTopic(later, 3, 1)])[later].result(15)
        poll_all(
            [c], lambda _: {tp.topic for tp in c.assignment()} == {renamed, later}, 45, f"{later} joins the assignment"
        )
        assert first not in {tp.topic for tp in c.assignment()}
    finally:
        c.close()


def test_a_coordinator_move_keeps_every_epoch_and_assignment(tmp_path) -> None:
    """The group's `__consumer_offsets` partition is unloaded and loaded again (what a coordinator failover does
    on one node): the members heartbeat to the reloaded coordinator and go on consuming, no epoch bumped, no
    partition moved."""
    with HerdBroker(tmp_path, {"offsets.topic.num.partitions": "2"}, faults=True) as node:
        topic, group = topic_with_records(node.bootstrap, count=30), unique("g")
        members = [consumer(node.bootstrap, group) for _ in range(2)]
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        try:
            for c in members:
                c.subscribe([topic])
            # every member at the end of the three partitions it owns: a count of the records read would not do, as
            # the first member reads the second one's partitions before they move, and they are read again
            poll_all(members, lambda _: all(read_to_end(c, 3, 30 // PARTITIONS) for c in members), 30, "all read")
            before = admin.describe_consumer_groups([group])[group].result(15)
            epochs_before = epochs(node.port, group)
            node.faults.move_coordinator(group, unavailable_ms=500)
            producer = Producer({"bootstrap.servers": node.bootstrap})
            for i in range(30, 60):
                producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
            assert producer.flush(30) == 0
            after_move = poll_all(members, lambda v: len(v) >= 30, 60, "the records produced after the move")
            assert sorted(after_move) == sorted(b"%d" % i for i in range(30, 60))
            after = admin.describe_consumer_groups([group])[group].result(15)
            assert after.state == ConsumerGroupState.STABLE
            by_id = {m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in before.members}
            assert {m.member_id: {tp.partition for tp in m.assignment.topic_partitions} for m in after.members} == by_id
            assert epochs(node.port, group) == epochs_before  # the group's, the target's and every member's
        finally:
            for c in members:
                c.close()


def read_to_end(c: Consumer, partitions: int, end: int) -> bool:
    """`c` owns `partitions` partitions and its position in each is `end`."""
    assignment = c.assignment()
    return len(assignment) == partitions and all(tp.offset == end for tp in c.position(assignment))


def epochs(port: int, group: str) -> tuple[int, int, dict[str, int]]:
    """(group epoch, assignment epoch, member id -> member epoch), from ConsumerGroupDescribe."""
    with RawClient(port) as c:
        (g,) = c.request(69, 1, req(69, 1, group_ids=(group,), include_authorized_operations=False)).groups
    assert g.error_code == ErrorCode.none
    return g.group_epoch, g.assignment_epoch, {m.member_id: m.member_epoch for m in g.members}


def test_herd_groups_shows_consumer_groups_as_kafka_consumer_groups_does(broker) -> None:
    """`herd groups list` shows the type; `describe --state` the assignor and the group and target epochs;
    `describe --members --verbose` each member's epoch and target assignment (ConsumerGroupDescribe)."""

    def herd(*args: str) -> str:
        result = CliRunner().invoke(cli, [*args, "--bootstrap-server", broker.bootstrap])
        assert result.exit_code == 0, result.output
        return result.stdout

    topic, group = topic_with_records(broker.bootstrap, count=0), unique("g")
    members = [consumer(broker.bootstrap, group) for _ in range(2)]
    try:
        for c in members:
            c.subscribe([topic])
        poll_all(members, lambda _: all(len(owned(c)) == 3 for c in members), 30, "3 partitions each")
        listed = json.loads(herd("groups", "list", "--output", "json"))
        assert {"group": group, "protocol_type": "consumer", "state": "Stable", "type": "consumer"} in listed
        (state,) = json.loads(herd("groups", "describe", "--group", group, "--state", "--output", "json"))
        assert (state["type"], state["assignment_strategy"], state["state"], state["members"]) == (
            "consumer",
            "uniform",
            "Stable",
            2,
        )
        assert state["group_epoch"] == state["target_assignment_epoch"] == 2
        table = herd("groups", "describe", "--group", group, "--state")
        assert "GROUP-EPOCH" in table and "TARGET-ASSIGNMENT-EPOCH" in table
        rows = json.loads(herd("groups", "describe", "--group", group, "--members", "--verbose", "--output", "json"))
        assert len(rows) == 2 and all(r["member_epoch"] == 2 for r in rows)
        assert all(r["assignment"] == r["target_assignment"] and len(r["assignment"]) == 3 for r in rows)
        assert "CURRENT-EPOCH" in herd("groups", "describe", "--group", group, "--members", "--verbose")
    finally:
        for c in members:
            c.close()
