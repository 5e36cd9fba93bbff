"""The struct codec of the hot offset schemas (records.py) agrees with kio's generic codec on the declared
schemas, byte for byte."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.static.primitive import i32, i64

from herd.coordinator.records import (
    OffsetCommitKey,
    OffsetCommitValueV0,
    OffsetCommitValueV1,
    OffsetCommitValueV2,
    OffsetCommitValueV3,
    OffsetCommitValueV4,
    OffsetValue,
    Record,
    _decode_offset_commit_value_kio,
    decode_offset_commit_key,
    decode_offset_commit_value,
    decode_versioned,
    encode_offset_commit_key,
    encode_offset_commit_value,
    encode_versioned,
)


def kio_record(group: str, topic: str, partition: int, value: OffsetValue) -> Record:
    """An OffsetCommit record written by kio: value v3, or v1 with an expire timestamp."""
    key = encode_versioned(1, OffsetCommitKey(group=group, topic=topic, partition=i32(partition)))
    encoded: OffsetCommitValueV1 | OffsetCommitValueV3
    if value.expire_timestamp >= 0:
        encoded = OffsetCommitValueV1(
            offset=i64(value.offset),
            metadata=value.metadata,
            commit_timestamp=i64(value.commit_timestamp),
            expire_timestamp=i64(value.expire_timestamp),
        )
    else:
        encoded = OffsetCommitValueV3(
            offset=i64(value.offset),
            leader_epoch=i32(value.leader_epoch),
            metadata=value.metadata,
            commit_timestamp=i64(value.commit_timestamp),
        )
    return Record(key, encode_versioned(type(encoded).__version__, encoded))


text = st.text(max_size=40)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)
expire = st.just(-1) | st.integers(0, 2**62)


@given(text, text, ints32, ints64, ints32, text, ints64, expire)
def test_encoding_matches_kio(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, stamp: int, expire_ts: int
) -> None:
    value = OffsetValue(offset, epoch, metadata, stamp, expire_ts)
    reference = kio_record(group, topic, partition, value)
    assert encode_offset_commit_key(group, topic, partition) == reference.key
    assert encode_offset_commit_value(value) == reference.value
    assert decode_offset_commit_key(reference.key) == (group, topic, partition)
    # v1 carries no leader epoch: the decoded value has the default.
    expected = value if expire_ts == -1 else value._replace(leader_epoch=-1)
    assert decode_offset_commit_value(reference.value) == expected
    assert _decode_offset_commit_value_kio(reference.value) == expected


@given(ints64, text, ints64, ints64, ints32)
def test_every_value_version_decodes_like_kio(
    offset: int, metadata: str, stamp: int, expire_ts: int, epoch: int
) -> None:
    o, m, t = i64(offset), metadata, i64(stamp)
    for version, value in (
        (0, OffsetCommitValueV0(offset=o, metadata=m, commit_timestamp=t)),
        (1, OffsetCommitValueV1(offset=o, metadata=m, commit_timestamp=t, expire_timestamp=i64(expire_ts))),
        (2, OffsetCommitValueV2(offset=o, metadata=m, commit_timestamp=t)),
        (3, OffsetCommitValueV3(offset=o, leader_epoch=i32(epoch), metadata=m, commit_timestamp=t)),
        (4, OffsetCommitValueV4(offset=o, leader_epoch=i32(epoch), metadata=m, commit_timestamp=t)),
    ):
        data = encode_versioned(version, value)
        assert decode_offset_commit_value(data) == _decode_offset_commit_value_kio(data)


def test_type_0_keys_decode_like_type_1() -> None:
    key = encode_offset_commit_key("g", "t", 3)
    legacy = b"\x00\x00" + key[2:]
    assert decode_offset_commit_key(legacy) == ("g", "t", 3)
    reference = decode_versioned(OffsetCommitKey, legacy)
    assert (reference.group, reference.topic, reference.partition) == ("g", "t", 3)


@pytest.mark.parametrize(
    "key",
    [
        b"\x00\x01",  # nothing after the type
        b"\x00\x01\x00\x05ab",  # a group longer than the key
        encode_offset_commit_key("g", "t", 1) + b"x",  # trailing bytes
        b"\x00\x01\xff\xff" + b"\x00" * 8,  # a negative length
    ],
)
def test_malformed_keys_raise_value_error(key: bytes) -> None:
    with pytest.raises(ValueError):
        decode_offset_commit_key(key)


@pytest.mark.parametrize(
    "value",
    [
        b"\x00\x03" + b"\x00" * 10,  # cut short
        encode_offset_commit_value(OffsetValue(1, 2, "m", 3)) + b"x",  # trailing bytes
        encode_offset_commit_value(OffsetValue(1, 2, "", 3, 9))[:-1],  # v1 without its expire timestamp
        b"\x00\x09" + b"\x00" * 30,  # an unknown version
    ],
)
def test_malformed_values_raise_value_error(value: bytes) -> None:
    with pytest.raises(ValueError):
        decode_offset_commit_value(value)
