"""The consumer-group records (herd.coordinator.consumer.records): Kafka's bytes for types 3-8 and 16, read back
to what was written, tombstones in Kafka's order, and unreadable or unknown versions refused."""

from __future__ import annotations

import uuid

import pytest
from kio.static.primitive import i8, i32

from herd.coordinator.consumer import records as r
from herd.coordinator.consumer.assignment import assignment
from herd.coordinator.consumer.member import ConsumerMember, MemberState
from herd.coordinator.records import record_type

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)

MEMBER = ConsumerMember(
    "m1",
    member_epoch=3,
    previous_member_epoch=2,
    state=MemberState.UNREVOKED_PARTITIONS,
    instance_id="i",
    client_id="c",
    client_host="/127.0.0.1",
    subscribed_topic_names=frozenset({"b", "a"}),
    subscribed_topic_regex="x.*",
    rebalance_timeout_ms=300_000,
    server_assignor="uniform",
    assigned=assignment([(T1, [1, 0])]),
    pending_revocation=assignment([(T2, [3])]),
)


def read(record: r.Record) -> r.Decoded:
    return r.decode(record_type(record.key), record.key, record.value)


def test_the_group_epoch_is_kafka_s_bytes_with_the_metadata_hash_as_tag_0() -> None:
    record = r.group_epoch_record("g", 7)
    assert record.key == bytes.fromhex("00030001") + b"g"  # type 3, string "g"
    assert record.value == bytes.fromhex("00000000000700")  # v0, epoch, no tagged fields
    hashed = r.group_epoch_record("g", 7, metadata_hash=5)
    assert hashed.value == bytes.fromhex("0000000000070100080000000000000005")
    decoded = read(hashed)
    assert (decoded.kind, decoded.group_id, decoded.member_id) == (3, "g", None)
    assert decoded.value.epoch == 7 and decoded.value.metadata_hash == 5


def test_a_member_s_subscription_reads_back_as_written() -> None:
    record = r.member_subscription_record("g", MEMBER)
    assert record.key == bytes.fromhex("00050001") + b"g" + bytes.fromhex("0002") + b"m1"
    decoded = read(record)
    assert (decoded.kind, decoded.group_id, decoded.member_id) == (5, "g", "m1")
    assert decoded.value.subscribed_topic_names == ("a", "b")  # sorted, as written
    got = r.apply_subscription(ConsumerMember("m1"), decoded.value)
    for name in (
        "instance_id",
        "client_id",
        "client_host",
        "subscribed_topic_names",
        "subscribed_topic_regex",
        "rebalance_timeout_ms",
        "server_assignor",
    ):
        assert getattr(got, name) == getattr(MEMBER, name), name


def test_a_member_s_current_assignment_reads_back_as_written() -> None:
    decoded = read(r.current_assignment_record("g", MEMBER))
    assert decoded.kind == 8 and decoded.value.state == 1
    got = r.apply_current_assignment(ConsumerMember("m1"), decoded.value)
    assert (got.member_epoch, got.previous_member_epoch, got.state) == (3, 2, MemberState.UNREVOKED_PARTITIONS)
    assert got.assigned == MEMBER.assigned and got.pending_revocation == MEMBER.pending_revocation


def test_an_unknown_member_state_reads_as_unknown() -> None:
    value = r.CurrentMemberAssignmentValue(
        member_epoch=i32(1),
        previous_member_epoch=i32(0),
        state=i8(9),
        assigned_partitions=(),
        partitions_pending_revocation=(),
    )
    assert r.apply_current_assignment(ConsumerMember("m"), value).state is MemberState.UNKNOWN


def test_target_assignments_and_their_epoch_read_back() -> None:
    target = assignment([(T2, [5, 4]), (T1, [0])])
    decoded = read(r.target_assignment_record("g", "m1", target))
    assert decoded.kind == 7 and r.target_of(decoded.value) == target
    assert [tp.topic_id for tp in decoded.value.topic_partitions] == [T1, T2]  # sorted by topic id
    assert read(r.target_assignment_epoch_record("g", 9)).value.assignment_epoch == 9


def test_a_resolved_regular_expression_reads_back_keyed_by_its_text() -> None:
    decoded = read(r.regular_expression_record("g", "a.*", frozenset({"ab", "aa"}), 4, 5))
    assert (decoded.kind, decoded.group_id, decoded.member_id) == (16, "g", "a.*")
    assert (decoded.value.topics, decoded.value.version, decoded.value.timestamp) == (("aa", "ab"), 4, 5)
    assert read(r.regular_expression_tombstone("g", "a.*")).value is None


def test_a_group_goes_in_kafka_s_order_with_its_epoch_last() -> None:
    tombstones = r.group_tombstones("g", ("m1", "m2"), ("a.*",))
    assert [(read(t).kind, read(t).member_id) for t in tombstones] == [
        (8, "m1"),
        (8, "m2"),
        (7, "m1"),
        (7, "m2"),
        (6, None),
        (5, "m1"),
        (5, "m2"),
        (16, "a.*"),
        (4, None),
        (3, None),
    ]
    assert all(t.value is None for t in tombstones)


def test_a_partition_metadata_value_of_kafka_4_0_is_kept_undecoded() -> None:
    key = r.group_epoch_record("g", 1).key.replace(b"\x00\x03", b"\x00\x04", 1)
    assert r.decode(4, key, b"\x00\x00\x01\x00") == (4, "g", None, b"\x00\x00\x01\x00")
    assert r.decode(4, key, None).value is None


@pytest.mark.parametrize(
    "value", [b"\x00\x01\x00\x00\x00\x07\x00", b"\x00\x00\x00", b"\x00\x00\x00\x00\x00\x07\x00\xff"]
)
def test_unreadable_values_and_unknown_versions_are_refused(value: bytes) -> None:
    key = r.group_epoch_record("g", 7).key
    with pytest.raises(ValueError):
        r.decode(3, key, value)
