"""KIP-932 share groups' group side against `herd serve` (issue 32): confluent-kafka's ShareConsumer joins a share
group, is given every partition and leaves on close; raw ShareGroupHeartbeat v1 joins a share group,
is answered with an empty assignment until the share partitions' state is initialized, then with the partitions,
shared between members; ShareGroupDescribe v1; what ListGroups, DescribeGroups, DeleteGroups, OffsetCommit,
OffsetFetch and a classic JoinGroup answer for a share group; the group after a kill -9 and restart; and both APIs
refused with UNSUPPORTED_VERSION when group.share.enable is false. One embedded broker for the module, and a broker
of their own for the gate and the restart."""

from __future__ import annotations

import uuid

import pytest
from brokers import BrokerProcess
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, part, req

from herd.testing.wait import wait_until

HEARTBEAT, DESCRIBE = 76, 77
PARTITIONS = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    settings = {
        "offsets.topic.num.partitions": "4",
        "group.share.min.heartbeat.interval.ms": "1000",
        "group.share.heartbeat.interval.ms": "1000",  # the ShareConsumer's second heartbeat gets the partitions
    }
    process = BrokerProcess(tmp_path_factory.mktemp("kip932") / "data", settings, die_with_parent=True)
    process.start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def new_topic(bootstrap: str) -> str:
    topic = unique("t932")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    return topic


def heartbeat(c: RawClient, group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None):
    return c.request(
        HEARTBEAT,
        1,
        req(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics),
    )


def owned(response) -> set[int]:
    return {p for tp in response.assignment.topic_partitions for p in tp.partitions}


class Member:
    """A share-group member speaking raw ShareGroupHeartbeat: its epoch and what it was last assigned."""

    def __init__(self, c: RawClient, group: str, topic: str) -> None:
        self.c, self.group, self.topic = c, group, topic
        self.member_id, self.epoch, self.partitions = uuid.uuid4().hex, 0, set[int]()

    def beat(self) -> object:
        response = heartbeat(self.c, self.group, self.member_id, self.epoch, (self.topic,) if self.epoch == 0 else None)
        assert response.error_code == ErrorCode.none, response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.partitions = owned(response)
        return response


def settled(members: list[Member], partitions: set[int]) -> bool:
    """Every member heartbeats once; whether they hold `partitions` between them, each its own (fewer members than
    partitions: the simple assignor shares a partition only when members outnumber them)."""
    for m in members:
        m.beat()
    held = [m.partitions for m in members]
    return set().union(*held) == partitions and sum(map(len, held)) == len(partitions) and all(held)


def describe(c: RawClient, group: str):
    return c.request(DESCRIBE, 1, req(DESCRIBE, 1, group_ids=(group,), include_authorized_operations=False)).groups[0]


def test_a_share_consumer_joins_is_given_every_partition_and_leaves_on_close(broker) -> None:
    topic, group = new_topic(broker.bootstrap), unique("share")
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "queue-reader"})
    try:
        consumer.subscribe([topic])
        with RawClient(broker.port) as c:

            def assigned() -> bool:
                consumer.poll(0.2)  # no records yet: herd does not serve ShareFetch
                described = describe(c, group)
                if described.error_code != ErrorCode.none or not described.members:
                    return False
                (m,) = described.members
                return {p for tp in m.assignment.topic_partitions for p in tp.partitions} == set(range(PARTITIONS))

            wait_until(assigned, 20, "the share consumer to be given every partition")
            (m,) = describe(c, group).members
            assert (m.client_id, m.subscribed_topic_names, m.client_host) == ("queue-reader", (topic,), "/127.0.0.1")
            consumer.close()
            consumer = None
            after = describe(c, group)
            assert (after.group_state, after.members) == ("Empty", ())  # close left the group
    finally:
        if consumer is not None:
            consumer.close()


def test_a_member_gets_the_partitions_once_their_share_state_is_initialized_and_shares_them(broker) -> None:
    topic, group = new_topic(broker.bootstrap), unique("share")
    with RawClient(broker.port) as c:
        first = Member(c, group, topic)
        joined = first.beat()
        assert (joined.member_epoch, joined.assignment.topic_partitions) == (1, ())  # nothing initialized yet
        assert joined.heartbeat_interval.total_seconds() == 1  # group.share.heartbeat.interval.ms
        wait_until(lambda: settled([first], set(range(PARTITIONS))), 10, "the first member's partitions")
        assert first.epoch > 1
        second = Member(c, group, topic)
        wait_until(lambda: settled([first, second], set(range(PARTITIONS))), 10, "the partitions shared by two")
        assert len(first.partitions) == len(second.partitions) == PARTITIONS // 2  # balanced
        steady = first.beat()
        assert steady.assignment is None  # nothing changed: no assignment in the answer


def test_share_group_describe_and_the_other_group_apis(broker) -> None:
    topic, group = new_topic(broker.bootstrap), unique("share")
    with RawClient(broker.port) as c:
        member = Member(c, group, topic)
        member.beat()
        wait_until(lambda: settled([member], set(range(PARTITIONS))), 10, "the member's partitions")
        described = c.request(
            DESCRIBE, 1, req(DESCRIBE, 1, group_ids=(group, "nope", ""), include_authorized_operations=True)
        )
        ours, unknown, empty = described.groups
        assert (ours.error_code, ours.group_state, ours.assignor_name) == (ErrorCode.none, "Stable", "simple")
        assert ours.group_epoch == ours.assignment_epoch == member.epoch and ours.authorized_operations > 0
        (m,) = ours.members
        assert (m.member_id, m.member_epoch, m.subscribed_topic_names) == (member.member_id, member.epoch, (topic,))
        assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [
            (topic, tuple(range(PARTITIONS)))
        ]
        assert (unknown.error_code, unknown.error_message) == (ErrorCode.group_id_not_found, "Group nope not found.")
        assert empty.error_code == ErrorCode.invalid_group_id
        listed = c.request(16, 5, req(16, 5, states_filter=(), types_filter=("Share",)))
        ours_listed = [g for g in listed.groups if g.group_id == group]
        assert [(g.protocol_type, g.group_state, g.group_type) for g in ours_listed] == [("share", "Stable", "share")]
        v6 = c.request(15, 6, req(15, 6, groups=(group,), include_authorized_operations=False)).groups[0]
        assert (v6.error_code, v6.error_message, v6.group_state) == (
            ErrorCode.group_id_not_found,
            f"Group {group} is not a classic group.",
            "Dead",
        )
        offset = part(
            8, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=3, committed_metadata=""
        )
        commit = req(
            8,
            9,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=(part(8, 9, "OffsetCommitRequestTopic", name=topic, partitions=(offset,)),),
        )
        committed = c.request(8, 9, commit)
        assert committed.topics[0].partitions[0].error_code == ErrorCode.group_id_not_found
        join = req(
            11,
            9,
            group_id=group,
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="",
            protocol_type="consumer",
            protocols=(part(11, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),),
        )
        assert c.request(11, 9, join).error_code == ErrorCode.inconsistent_group_protocol
        busy = c.request(42, 2, req(42, 2, groups_names=(group,))).results[0]
        assert busy.error_code == ErrorCode.non_empty_group
        left = heartbeat(c, group, member.member_id, -1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        deleted = c.request(42, 2, req(42, 2, groups_names=(group,))).results[0]
        assert deleted.error_code == ErrorCode.none
        assert describe(c, group).error_code == ErrorCode.group_id_not_found


def test_raw_heartbeat_errors(broker) -> None:
    topic, group = new_topic(broker.bootstrap), unique("share")
    with RawClient(broker.port) as c:
        empty_id = heartbeat(c, group, "", 0, (topic,))
        assert (empty_id.error_code, empty_id.error_message) == (ErrorCode.invalid_request, "MemberId can't be empty.")
        no_topics = heartbeat(c, group, "m", 0, None)
        assert no_topics.error_message == "SubscribedTopicNames must be set in first request."
        assert heartbeat(c, group, "m", 3).error_code == ErrorCode.group_id_not_found  # no such group at epoch 3
        member = Member(c, group, topic)
        member.beat()
        ahead = heartbeat(c, group, member.member_id, member.epoch + 5)
        assert ahead.error_code == ErrorCode.fenced_member_epoch
        assert heartbeat(c, group, "stranger", 1).error_code == ErrorCode.unknown_member_id


def test_a_share_group_survives_a_kill_and_restart(tmp_path) -> None:
    node = BrokerProcess(tmp_path / "data", {"offsets.topic.num.partitions": "2"}, die_with_parent=True)
    node.start()
    try:
        topic, group = new_topic(node.bootstrap), unique("share")
        with RawClient(node.port) as c:
            member = Member(c, group, topic)
            member.beat()
            wait_until(lambda: settled([member], set(range(PARTITIONS))), 10, "the member's partitions")
        node.kill()
        node.restart()
        with RawClient(node.port) as c:

            def heard() -> bool:
                response = heartbeat(c, group, member.member_id, member.epoch)
                if response.error_code in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator):
                    return False
                assert (response.error_code, response.member_epoch) == (ErrorCode.none, member.epoch)
                return True

            wait_until(heard, 15, "the restarted coordinator to know the member")
            (m,) = describe(c, group).members
            assert {p for tp in m.assignment.topic_partitions for p in tp.partitions} == set(range(PARTITIONS))
    finally:
        node.stop()


def test_every_share_api_is_refused_when_group_share_enable_is_false(tmp_path) -> None:
    """As Kafka's KafkaApis when share groups are off: UNSUPPORTED_VERSION from ShareGroupHeartbeat, ShareFetch,
    ShareAcknowledge, AlterShareGroupOffsets and DeleteShareGroupOffsets, and for each group of ShareGroupDescribe
    and DescribeShareGroupOffsets."""
    off = BrokerProcess(tmp_path / "data", {"group.share.enable": "false"}, die_with_parent=True)
    off.start()
    try:
        with RawClient(off.port) as c:
            assert heartbeat(c, "g", "m", 0, ("t",)).error_code == ErrorCode.unsupported_version
            described = c.request(DESCRIBE, 1, req(DESCRIBE, 1, group_ids=("g",), include_authorized_operations=False))
            assert described.groups[0].error_code == ErrorCode.unsupported_version
            limits = {"max_wait": 0, "min_bytes": 1, "max_bytes": 1024, "max_records": 10, "batch_size": 10}
            fetched = c.request(78, 1, req(78, 1, group_id="g", member_id="m", share_session_epoch=0, topics=(),
                                           forgotten_topics_data=(), **limits))  # fmt: skip
            assert fetched.error_code == ErrorCode.unsupported_version
            acked = c.request(79, 1, req(79, 1, group_id="g", member_id="m", share_session_epoch=1, topics=()))
            assert acked.error_code == ErrorCode.unsupported_version
            group = part(90, 1, "DescribeShareGroupOffsetsRequestGroup", group_id="g", topics=None)
            assert c.request(90, 1, req(90, 1, groups=(group,))).groups[0].error_code == ErrorCode.unsupported_version
            assert c.request(91, 0, req(91, 0, group_id="g", topics=())).error_code == ErrorCode.unsupported_version
            assert c.request(92, 0, req(92, 0, group_id="g", topics=())).error_code == ErrorCode.unsupported_version
    finally:
        off.stop()
