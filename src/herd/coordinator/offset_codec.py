"""The hot `__consumer_offsets` schemas, encoded and decoded with `struct`: OffsetCommitKey v0/v1 and
OffsetCommitValue v0-v3.

Why this exists next to records.py: every offset commit encodes one key and one value, and loading a
partition decodes one of each per record. Through kio's generic entity reader and writer that costs
about 30 us per commit and 7 us per loaded record (measured with pyinstrument on 1,000,000 commits:
34 s to load), which alone would keep herd far from 10,000 commits/s and from loading a million offsets
in a few seconds. These layouts are fixed and non-flexible (apache/kafka group-coordinator/src/main/
resources/common/message/OffsetCommitKey.json and OffsetCommitValue.json):

    key   = int16 type (0 or 1) | string group | string topic | int32 partition
    value = int16 version | int64 offset | [v3: int32 leader epoch] | string metadata |
            int64 commit timestamp | [v1: int64 expire timestamp]

where a string is an int16 byte length and UTF-8 bytes. Everything else (GroupMetadata, the flexible
OffsetCommitValue v4, herd's own record types) still goes through kio in records.py, and
tests/unit/coordinator/test_offsets_codec.py checks both codecs agree byte for byte on arbitrary input.
"""

from __future__ import annotations

import struct

from herd.coordinator.records import OFFSET_COMMIT_KEY_TYPE, OffsetValue, decode_offset_commit_value

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_V0_HEAD = struct.Struct(">hqh")  # version, offset, metadata length (v0, v1, v2)
_TAIL_V3 = struct.Struct(">q")  # commit timestamp
_TAIL_V1 = struct.Struct(">qq")  # commit timestamp, expire timestamp
_EMPTY = ""


def _string(text: str) -> bytes:
    data = text.encode()
    return _H.pack(len(data)) + data


def encode_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey as written by Kafka (record type 1)."""
    return b"".join((_H.pack(OFFSET_COMMIT_KEY_TYPE), _string(group), _string(topic), _I.pack(partition)))


def encode_value(value: OffsetValue) -> bytes:
    """OffsetCommitValue v3, or v1 when the commit carries an explicit expire timestamp (as Kafka writes)."""
    metadata = value.metadata.encode()
    if value.expire_timestamp >= 0:
        return b"".join((_V0_HEAD.pack(1, value.offset, len(metadata)), metadata,
                         _TAIL_V1.pack(value.commit_timestamp, value.expire_timestamp)))
    return b"".join((_V3_HEAD.pack(3, value.offset, value.leader_epoch, len(metadata)), metadata,
                     _TAIL_V3.pack(value.commit_timestamp)))


def decode_key(key: bytes) -> tuple[str, str, int]:
    """(group, topic, partition) of an OffsetCommitKey of type 0 or 1; raises ValueError if malformed."""
    try:
        group_len = _H.unpack_from(key, 2)[0]
        topic_at = 4 + group_len
        topic_len = _H.unpack_from(key, topic_at)[0]
        partition_at = topic_at + 2 + topic_len
        (partition,) = _I.unpack_from(key, partition_at)
    except struct.error as error:
        raise ValueError(f"malformed OffsetCommitKey: {error}") from None
    if group_len < 0 or topic_len < 0 or partition_at + 4 != len(key):
        raise ValueError("malformed OffsetCommitKey: bad lengths")
    return key[4:topic_at].decode(), key[topic_at + 2:partition_at].decode(), partition


def decode_value(value: bytes) -> OffsetValue:
    """Any OffsetCommitValue version, normalised; v4 (flexible) is read by kio. Raises ValueError."""
    version = _H.unpack_from(value)[0]
    try:
        if version == 3:
            _, offset, epoch, size = _V3_HEAD.unpack_from(value)
            end = 16 + size
            (stamp,) = _TAIL_V3.unpack_from(value, end)
            _check(value, size, end + 8)
            return OffsetValue(offset, epoch, value[16:end].decode() if size else _EMPTY, stamp)
        if version in (0, 1, 2):
            _, offset, size = _V0_HEAD.unpack_from(value)
            end = 12 + size
            metadata = value[12:end].decode() if size else _EMPTY
            if version == 1:
                stamp, expire = _TAIL_V1.unpack_from(value, end)
                _check(value, size, end + 16)
                return OffsetValue(offset, -1, metadata, stamp, expire)
            (stamp,) = _TAIL_V3.unpack_from(value, end)
            _check(value, size, end + 8)
            return OffsetValue(offset, -1, metadata, stamp)
    except struct.error as error:
        raise ValueError(f"malformed OffsetCommitValue v{version}: {error}") from None
    return decode_offset_commit_value(value)


def _check(value: bytes, metadata_size: int, end: int) -> None:
    if metadata_size < 0 or end != len(value):
        raise ValueError(f"malformed OffsetCommitValue: {len(value) - end} bytes left over")
