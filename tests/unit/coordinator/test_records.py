"""Record codecs: byte strings derived by hand from Kafka's schemas, and Hypothesis round trips."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from kio.static.primitive import i32, i64

from herd.coordinator.records import (
    GroupMetadataValueV3,
    MemberMetadataV3,
    OffsetValue,
    Record,
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_offset_commit,
    decode_offset_commit_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_offset_commit_key,
    group_metadata_record,
    offset_commit_record,
    offset_tombstone,
)


def s(text: str) -> bytes:
    return len(text).to_bytes(2, "big") + text.encode()


def test_offset_commit_key_bytes() -> None:
    # int16 record type 1 | string group | string topic | int32 partition
    expected = b"\x00\x01" + s("grp") + s("topic") + (7).to_bytes(4, "big")
    assert encode_offset_commit_key("grp", "topic", 7) == expected
    assert decode_offset_commit_key(expected).partition == 7


def test_group_metadata_key_bytes() -> None:
    expected = b"\x00\x02" + s("grp")
    assert encode_group_metadata_key("grp") == expected
    assert decode_group_metadata_key(expected).group == "grp"


def test_offset_commit_value_v3_bytes() -> None:
    record = offset_commit_record(
        "g", "t", 0, OffsetValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    )
    expected = b"\x00\x03" + (42).to_bytes(8, "big") + (5).to_bytes(4, "big") + s("m") + (1000).to_bytes(8, "big")
    assert record.value == expected
    assert decode_offset_commit_value(expected) == OffsetValue(
        offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000
    )


def test_offset_commit_value_v1_only_with_expire_timestamp() -> None:
    record = offset_commit_record(
        "g", "t", 0, OffsetValue(offset=1, leader_epoch=9, metadata="", commit_timestamp=10, expire_timestamp=20)
    )
    expected = b"\x00\x01" + (1).to_bytes(8, "big") + s("") + (10).to_bytes(8, "big") + (20).to_bytes(8, "big")
    assert record.value == expected
    assert decode_offset_commit_value(expected).expire_timestamp == 20


def test_offset_commit_value_v0_v2_decode() -> None:
    body = (3).to_bytes(8, "big") + s("x") + (4).to_bytes(8, "big")
    for version in (b"\x00\x00", b"\x00\x02"):
        assert decode_offset_commit_value(version + body) == OffsetValue(offset=3, metadata="x", commit_timestamp=4)


def test_group_metadata_value_v3_bytes() -> None:
    member = MemberMetadataV3(
        member_id="m",
        group_instance_id=None,
        client_id="c",
        client_host="/h",
        rebalance_timeout=i32(300),
        session_timeout=i32(100),
        subscription=b"S",
        assignment=b"A",
    )
    value = GroupMetadataValueV3(
        protocol_type="consumer",
        generation=i32(2),
        protocol="range",
        leader="m",
        current_state_timestamp=i64(77),
        members=(member,),
    )
    expected = (
        b"\x00\x03"
        + s("consumer")
        + (2).to_bytes(4, "big")
        + s("range")
        + s("m")
        + (77).to_bytes(8, "big")
        + (1).to_bytes(4, "big")
        + s("m")
        + b"\xff\xff"
        + s("c")
        + s("/h")
        + (300).to_bytes(4, "big")
        + (100).to_bytes(4, "big")
        + (1).to_bytes(4, "big")
        + b"S"
        + (1).to_bytes(4, "big")
        + b"A"
    )
    record = group_metadata_record("g", value, applied=False)
    assert record.value == expected
    assert decode_group_metadata_value(expected) == value


def test_group_metadata_value_v0_decodes_with_defaults() -> None:
    raw = (
        b"\x00\x00"
        + s("consumer")
        + (1).to_bytes(4, "big")
        + b"\xff\xff"
        + b"\xff\xff"
        + (1).to_bytes(4, "big")
        + s("m")
        + s("c")
        + s("h")
        + (50).to_bytes(4, "big")
        + (0).to_bytes(4, "big")
        + (0).to_bytes(4, "big")
    )
    value = decode_group_metadata_value(raw)
    assert value.protocol is None and value.leader is None and value.current_state_timestamp == -1
    assert value.members[0].rebalance_timeout == -1 and value.members[0].group_instance_id is None


def test_tombstone_has_no_value() -> None:
    assert offset_tombstone("g", "t", 1) == Record(encode_offset_commit_key("g", "t", 1), None)


text = st.text(max_size=20)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)


@given(text, text, st.integers(0, 2**31 - 1), ints64, ints32, text, ints64)
def test_offset_commit_round_trip(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, ts: int
) -> None:
    record = offset_commit_record(
        group, topic, partition, OffsetValue(offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=ts)
    )
    key = decode_offset_commit_key(record.key)
    assert (key.group, key.topic, key.partition) == (group, topic, partition)
    assert decode_offset_commit_value(record.value) == OffsetValue(
        offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=ts
    )


@given(text, text, st.integers(0, 2**31 - 1), ints64, ints32, text, ints64, st.integers(-5, 2**40))
def test_a_written_offset_commit_carries_what_its_bytes_hold(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, ts: int, expire: int
) -> None:
    """The shard replays its own commits from `OffsetCommitRecord.decoded`, not their bytes: the two must agree for
    v3 and for v1 (an explicit expire timestamp: no leader epoch), or a reload would see other offsets."""
    record = offset_commit_record(group, topic, partition, OffsetValue(offset, epoch, metadata, ts, expire))
    assert record.decoded == decode_offset_commit(record.key, record.value)


members = st.builds(
    MemberMetadataV3,
    member_id=text,
    group_instance_id=st.none() | text,
    client_id=text,
    client_host=text,
    rebalance_timeout=ints32.map(i32),
    session_timeout=ints32.map(i32),
    subscription=st.binary(max_size=30),
    assignment=st.binary(max_size=30),
)


@given(text, text, ints32, st.none() | text, st.none() | text, ints64, st.lists(members, max_size=4))
def test_group_metadata_round_trip(
    group: str, ptype: str, gen: int, protocol: str | None, leader: str | None, ts: int, ms: list[MemberMetadataV3]
) -> None:
    value = GroupMetadataValueV3(
        protocol_type=ptype,
        generation=i32(gen),
        protocol=protocol,
        leader=leader,
        current_state_timestamp=i64(ts),
        members=tuple(ms),
    )
    record = group_metadata_record(group, value, applied=True)
    assert decode_group_metadata_key(record.key).group == group
    assert decode_group_metadata_value(record.value) == value
