"""`__consumer_offsets` records in Kafka's exact key/value schemas: the one module that knows their bytes.

Framing (apache/kafka coordinator-common/.../CoordinatorRecordSerde.java):
    key   = int16 record_type (the key version) ‖ key struct
    value = int16 value_version ‖ value struct, or None for a tombstone

Record types: 0 and 1 are OffsetCommitKey {group, topic, partition} (writers use 1), 2 is
GroupMetadataKey {group}. herd adds types of its own, from 0x7E00 (32256), far above Kafka's (0-15 for
offsets, classic, consumer and share groups; streams groups take the next few):
- 0x7E00 ExpectedMembersKey {group} with ExpectedMembersValue v0 {instance_ids: [string]}, the group's
  pre-registered static members (KIP-469, see preregistration.py); a tombstone clears them;
- 0x7E01 RebalanceHistoryKey {group} with RebalanceHistoryValue v0 {rebalances: [RebalanceEntry]}, the
  group's last rebalances, oldest first (history.py); a tombstone goes with the group's GroupMetadata
  tombstone;
- 0x7E02 GroupConfigKey {group} with GroupConfigValue v0 {configs: [{name, value}]}, the group's overrides of
  Kafka's group configs (consumer.session.timeout.ms, ...: kafka_group_configs.py), which Kafka keeps in its
  metadata log and herd keeps beside the group; a tombstone clears them.
Kafka's loader skips record types it does not know (apache/kafka coordinator-common/.../
CoordinatorLoaderImpl.java: an unknown record type is logged and skipped), so a Kafka reading herd's
partitions ignores these records; log compaction keys them by their key bytes like every other record.
Writers emit GroupMetadataValue v3 and OffsetCommitValue v3, or v1 when the commit carries an explicit
expire timestamp (OffsetCommit v2-4 RetentionTimeMs). Readers accept every
version 0-4 of both values (v4 is the first flexible version, KIP-915).

The schemas are declared as kio-style frozen dataclasses (kio has no classes for these internal
records), from group-coordinator/src/main/resources/common/message/{OffsetCommitKey,OffsetCommitValue,
GroupMetadataKey,GroupMetadataValue}.json in apache/kafka, and encoded with kio's generic `entity_writer` /
`entity_reader`, except the hot ones: every offset commit encodes an OffsetCommitKey and an OffsetCommitValue
and replays them, and loading decodes one of each per record, which through kio cost 30 us per commit and
7 us per loaded record (34 s to load 1,000,000 offsets). Those layouts are fixed and non-flexible, so they
are written and read here with `struct` (OffsetCommitValue v4, flexible, is read by kio):

    key   = int16 type (0 or 1) | string group | string topic | int32 partition
    value = int16 version | int64 offset | [v3: int32 leader epoch] | string metadata |
            int64 commit timestamp | [v1: int64 expire timestamp]

where a string is an int16 byte length and UTF-8 bytes; tests/unit/coordinator/test_offsets_codec.py checks
them against kio's generic codec on the declared schemas, byte for byte. `decode_offset_commit` reads one
record, `load_offset_commits` a whole batch read back from the log (loading is mostly that loop). Values
decode normalised: `OffsetValue` for every OffsetCommitValue version, the v3 shape for GroupMetadataValue.
"""

import io
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, TypeVar

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64
from kio.static.protocol import Entity

log = logging.getLogger(__name__)

OFFSET_COMMIT_KEY_TYPES = (0, 1)
OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
EXPECTED_MEMBERS_KEY_TYPE = 0x7E00
"""herd's own record type: pre-registered static members of a group (KIP-469)."""
REBALANCE_HISTORY_KEY_TYPE = 0x7E01
"""herd's own record type: the rebalance history of a group (history.py)."""
GROUP_CONFIG_KEY_TYPE = 0x7E02
"""herd's own record type: a group's overrides of Kafka's group configs (kafka_group_configs.py)."""
HERD_KEY_TYPES = (EXPECTED_MEMBERS_KEY_TYPE, REBALANCE_HISTORY_KEY_TYPE, GROUP_CONFIG_KEY_TYPE)

# --- keys -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey:
    """The schema the struct codec below writes and reads (`encode_offset_commit_key`)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})
    topic: str = field(metadata={"kafka_type": "string"})
    partition: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


# --- OffsetCommitValue v0-v4 -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValueV0:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValueV1:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    expire_timestamp: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValueV2:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValueV3:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValueV4:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    offset: i64 = field(metadata={"kafka_type": "int64"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    metadata: str = field(metadata={"kafka_type": "string"})
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})


# --- GroupMetadataValue v0-v4 ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    rebalance_timeout: i32 = field(metadata={"kafka_type": "int32"})
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataV3:
    """MemberMetadata as written in GroupMetadataValue v3 (v2 has the v1 member shape)."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    rebalance_timeout: i32 = field(metadata={"kafka_type": "int32"})
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataV4:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    member_id: str = field(metadata={"kafka_type": "string"})
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    rebalance_timeout: i32 = field(metadata={"kafka_type": "int32"})
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV0:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    members: tuple[MemberMetadataV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV1:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    members: tuple[MemberMetadataV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV2:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    members: tuple[MemberMetadataV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV3:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    members: tuple[MemberMetadataV3, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValueV4:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    protocol_type: str = field(metadata={"kafka_type": "string"})
    generation: i32 = field(metadata={"kafka_type": "int32"})
    protocol: str | None = field(metadata={"kafka_type": "string"})
    leader: str | None = field(metadata={"kafka_type": "string"})
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    members: tuple[MemberMetadataV4, ...]


OFFSET_COMMIT_VALUES: dict[int, type] = {
    0: OffsetCommitValueV0,
    1: OffsetCommitValueV1,
    2: OffsetCommitValueV2,
    3: OffsetCommitValueV3,
    4: OffsetCommitValueV4,
}
GROUP_METADATA_VALUES: dict[int, type] = {
    0: GroupMetadataValueV0,
    1: GroupMetadataValueV1,
    2: GroupMetadataValueV2,
    3: GroupMetadataValueV3,
    4: GroupMetadataValueV4,
}

# --- framing ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One `__consumer_offsets` record. `applied` is True when live state already reflects it.

    Handlers of classic-group operations change the group in memory and then emit the GroupMetadata
    record describing it (as Kafka does: CoordinatorResult(..., replayRecords=false)); those records
    carry applied=True and `replay` skips them. Records read back from the log are built with
    `Record(key, value)` and are therefore always applied by `replay`.
    """

    key: bytes
    value: bytes | None
    applied: bool = field(default=False, compare=False)


E = TypeVar("E", bound=Entity)


def encode_versioned(version: int, entity: Entity) -> bytes:
    """`entity` after its int16 version, as every coordinator record key and value is written."""
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def decode_versioned(cls: type[E], data: bytes) -> E:
    """The `cls` after the int16 version of `data`; raises ValueError when the bytes do not hold one (kio's decode
    errors, e.g. on truncated bytes, are raised as ValueError too, so that a loader skipping unreadable records
    with `except ValueError` skips these)."""
    try:
        entity, size = entity_reader(cls)(data, 2)
    except DecodeError as error:
        raise ValueError(f"{cls.__name__}: {type(error).__name__}: {error}") from None
    if 2 + size != len(data):
        raise ValueError(f"{cls.__name__}: {len(data) - 2 - size} trailing bytes")
    return entity


def record_type(key: bytes) -> int:
    kind: int = struct.unpack_from(">h", key)[0]
    return kind


def value_version(value: bytes) -> int:
    version: int = struct.unpack_from(">h", value)[0]
    return version


# --- OffsetCommit keys and values, with struct --------------------------------------------------------


class OffsetKey(NamedTuple):
    """An OffsetCommitKey, decoded."""

    group: str
    topic: str
    partition: int


class OffsetValue(NamedTuple):
    """An OffsetCommitValue of any version, normalised. A NamedTuple rather than a frozen dataclass: loading
    a partition builds one per committed offset, and a tuple is built about five times faster."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


_H = struct.Struct(">h")
_I = struct.Struct(">i")
_KEY_TYPE = _H.pack(OFFSET_COMMIT_KEY_TYPE)
_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length
_V0_HEAD = struct.Struct(">hqh")  # version, offset, metadata length (v0, v1, v2)
_TAIL_V3 = struct.Struct(">q")  # commit timestamp
_TAIL_V1 = struct.Struct(">qq")  # commit timestamp, expire timestamp
_V3_NO_METADATA = struct.Struct(">hqihq")  # version 3, offset, epoch, metadata length 0, commit timestamp
_EMPTY = ""
_new_tuple = tuple.__new__  # builds a NamedTuple from a tuple without its keyword-parsing __new__


def _string(text: str) -> bytes:
    data = text.encode()
    return _H.pack(len(data)) + data


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey as written by Kafka (record type 1)."""
    return b"".join((_KEY_TYPE, _string(group), _string(topic), _I.pack(partition)))


def encode_offset_commit_value(value: OffsetValue) -> bytes:
    """OffsetCommitValue v3, or v1 when the commit carries an explicit expire timestamp (as Kafka writes)."""
    metadata = value.metadata.encode()
    if value.expire_timestamp >= 0:
        return b"".join(
            (
                _V0_HEAD.pack(1, value.offset, len(metadata)),
                metadata,
                _TAIL_V1.pack(value.commit_timestamp, value.expire_timestamp),
            )
        )
    return b"".join(
        (
            _V3_HEAD.pack(3, value.offset, value.leader_epoch, len(metadata)),
            metadata,
            _TAIL_V3.pack(value.commit_timestamp),
        )
    )


def decode_offset_commit(key: bytes, value: bytes | None) -> tuple[str, str, int, OffsetValue | None]:
    """(group, topic, partition, value) of an OffsetCommit record, value None for a tombstone (the key's type,
    0 or 1, is not checked). Raises ValueError if the key or the value is malformed. A plain tuple: every
    committed offset is decoded again when it is replayed."""
    try:
        topic_at = 4 + ((key[2] << 8) | key[3])
        partition_at = topic_at + 2 + ((key[topic_at] << 8) | key[topic_at + 1])
    except IndexError:
        raise ValueError("malformed OffsetCommitKey: cut short") from None
    if key[2] & 0x80 or key[topic_at] & 0x80 or partition_at + 4 != len(key):  # a negative length, bytes left
        raise ValueError("malformed OffsetCommitKey: bad lengths")
    (partition,) = _I.unpack_from(key, partition_at)
    return (
        key[4:topic_at].decode(),
        key[topic_at + 2 : partition_at].decode(),
        partition,
        None if value is None else decode_offset_commit_value(value),
    )


def decode_offset_commit_key(key: bytes) -> OffsetKey:
    """An OffsetCommitKey alone (`decode_offset_commit` without a value); raises ValueError if malformed."""
    return _new_tuple(OffsetKey, decode_offset_commit(key, None)[:3])


def decode_offset_commit_value(value: bytes) -> OffsetValue:
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
    return _decode_offset_commit_value_kio(value)


def _check(value: bytes, metadata_size: int, end: int) -> None:
    if metadata_size < 0 or end != len(value):
        raise ValueError(f"malformed OffsetCommitValue: {len(value) - end} bytes left over")


def _decode_offset_commit_value_kio(value: bytes) -> OffsetValue:
    """Any OffsetCommitValue version through kio's generic reader (what `decode_offset_commit_value` does with
    struct for v0-v3)."""
    version = value_version(value)
    cls = OFFSET_COMMIT_VALUES.get(version)
    if cls is None:
        raise ValueError(f"unknown OffsetCommitValue version {version}")
    raw: Any = decode_versioned(cls, value)  # one of several versions: the fields are read by name
    return OffsetValue(
        offset=raw.offset,
        leader_epoch=getattr(raw, "leader_epoch", -1),
        metadata=raw.metadata,
        commit_timestamp=raw.commit_timestamp,
        expire_timestamp=getattr(raw, "expire_timestamp", -1),
    )


# --- loading: a batch of records at once ------------------------------------------------------------

GroupOffsets = dict[tuple[str, int], OffsetValue]
# Topic names as decoded: a loaded partition holds the same few topics for thousands of groups, so each name
# is decoded once and every offset key shares one string (faster, and ~56 bytes less per offset in memory).
_TOPIC_NAMES: dict[bytes, str] = {}
_TOPIC_NAMES_MAX = 100_000


# (topic, partition) by an OffsetCommitKey's tail (topic length, topic, partition): see load_offset_commits
_TOPIC_PARTITIONS: dict[bytes, tuple[str, int]] = {}


def _topic_partition(tail: bytes, topic_names: dict[bytes, str]) -> tuple[str, int]:
    """(topic, partition) of an OffsetCommitKey's tail; ValueError if it is malformed."""
    partition_at = 2 + ((tail[0] << 8) | tail[1])
    if partition_at + 4 != len(tail) or tail[0] & 0x80:
        raise ValueError("malformed OffsetCommitKey")
    raw_topic = tail[2:partition_at]
    topic = topic_names.get(raw_topic)
    if topic is None:
        topic = topic_names[raw_topic] = raw_topic.decode()
    return topic, _I.unpack_from(tail, partition_at)[0]


def load_offset_commits(
    records: list[tuple[bytes, bytes | None]],
    offsets_of: Callable[[str], GroupOffsets],
    remove: Callable[[str, str, int], None],
    other: Callable[[bytes, bytes | None], None],
) -> int:
    """Decode the records of one batch read back from the log and hand each on, in order: the value of an
    OffsetCommit record is stored in `offsets_of(group)[(topic, partition)]`, an OffsetCommit tombstone calls
    `remove(group, topic, partition)`, any other record `other(key, value)`. A record that does not decode
    (or that `other` refuses with ValueError, IndexError or KeyError) is skipped with a warning; returns how
    many were skipped.

    The same as `decode_offset_commit` on each record, inlined: topic names decoded once, `offsets_of` called
    once per run of records of the same group, and the commonest value (v3 without metadata, what consumers
    commit) unpacked in one call. Loading a million offsets is mostly this loop;
    tests/unit/coordinator/test_offsets_replay.py checks it builds the state record-by-record replay builds."""
    unpack_value, new_value = _V3_NO_METADATA.unpack, _new_tuple
    no_metadata_size = _V3_NO_METADATA.size
    if len(_TOPIC_NAMES) > _TOPIC_NAMES_MAX:
        _TOPIC_NAMES.clear()
    topic_names = _TOPIC_NAMES
    if len(_TOPIC_PARTITIONS) > _TOPIC_NAMES_MAX:
        _TOPIC_PARTITIONS.clear()
    topic_partitions = _TOPIC_PARTITIONS
    skipped = 0
    last_group = b""  # with last_topic_at, the group of the previous record (-1: none)
    last_topic_at = -1
    group_offsets: GroupOffsets = {}
    for key, value in records:
        try:
            if key[0] or key[1] > 1:  # not an OffsetCommitKey (types 0 and 1)
                last_group, last_topic_at = b"", -1
                other(key, value)
                continue
            if key[2] & 0x80:
                raise ValueError("malformed OffsetCommitKey")
            topic_at = 4 + ((key[2] << 8) | key[3])
            # (topic, partition) by the key's tail (topic and partition bytes): the same few pairs recur for
            # every group, so each is checked and decoded once, and every offset of it shares one tuple
            tail = key[topic_at:]
            topic_partition = topic_partitions.get(tail)
            if topic_partition is None:
                topic_partition = _topic_partition(tail, topic_names)
                topic_partitions[tail] = topic_partition
            if value is None:
                last_group, last_topic_at = b"", -1
                remove(key[4:topic_at].decode(), *topic_partition)
                continue
            if len(value) == no_metadata_size and value[1] == 3 and not value[0] | value[14] | value[15]:
                _, offset, epoch, _, stamp = unpack_value(value)
                decoded = new_value(OffsetValue, (offset, epoch, "", stamp, -1))
            else:
                decoded = decode_offset_commit_value(value)
            # another group unless its name has the same length and bytes (no slice, no copy, to compare)
            if topic_at != last_topic_at or not key.startswith(last_group, 4):
                raw_group = key[4:topic_at]
                group_offsets = offsets_of(raw_group.decode())
                last_group, last_topic_at = raw_group, topic_at
            group_offsets[topic_partition] = decoded
        except (ValueError, IndexError, KeyError) as error:
            skipped += 1
            last_group, last_topic_at = b"", -1
            log.warning("skipping an unreadable __consumer_offsets record: %s", error)
    return skipped


# --- GroupMetadata keys and values, with kio ----------------------------------------------------------


def encode_group_metadata_key(group: str) -> bytes:
    return encode_versioned(GROUP_METADATA_KEY_TYPE, GroupMetadataKey(group=group))


def encode_group_metadata_value(value: GroupMetadataValueV3) -> bytes:
    return encode_versioned(3, value)


def decode_group_metadata_key(key: bytes) -> GroupMetadataKey:
    return decode_versioned(GroupMetadataKey, key)


def _member_v3(raw: object) -> MemberMetadataV3:
    return MemberMetadataV3(
        member_id=raw.member_id,  # type: ignore[attr-defined]
        group_instance_id=getattr(raw, "group_instance_id", None),
        client_id=raw.client_id,  # type: ignore[attr-defined]
        client_host=raw.client_host,  # type: ignore[attr-defined]
        rebalance_timeout=i32(getattr(raw, "rebalance_timeout", -1)),
        session_timeout=raw.session_timeout,  # type: ignore[attr-defined]
        subscription=raw.subscription,  # type: ignore[attr-defined]
        assignment=raw.assignment,  # type: ignore[attr-defined]
    )


def decode_group_metadata_value(value: bytes) -> GroupMetadataValueV3:
    """Any GroupMetadataValue version, normalised to the v3 shape (schema defaults fill the gaps)."""
    version = value_version(value)
    cls = GROUP_METADATA_VALUES.get(version)
    if cls is None:
        raise ValueError(f"unknown GroupMetadataValue version {version}")
    raw: Any = decode_versioned(cls, value)  # one of several versions: the fields are read by name
    return GroupMetadataValueV3(
        protocol_type=raw.protocol_type,
        generation=raw.generation,
        protocol=raw.protocol,
        leader=raw.leader,
        current_state_timestamp=i64(getattr(raw, "current_state_timestamp", -1)),
        members=tuple(_member_v3(m) for m in raw.members),
    )


# --- record builders (GroupCoordinatorRecordHelpers) -----------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord(Record):
    """An OffsetCommit record the coordinator writes, with what its bytes hold (`decode_offset_commit` of them):
    the shard replays each record as it writes it, and a commit of many partitions need not decode again what it
    has just encoded. Records read back from the log are plain Records, decoded."""

    decoded: tuple[str, str, int, OffsetValue] = field(default=("", "", -1, OffsetValue(-1)), compare=False)


def offset_commit_record(group: str, topic: str, partition: int, value: OffsetValue) -> OffsetCommitRecord:
    """Kafka's newOffsetCommitRecord: OffsetCommitValue v3, or v1 when the commit has an explicit expire
    timestamp. It carries the value as a decode of its bytes gives it back (v1 has no leader epoch, v3 no expire
    timestamp: tests/unit/coordinator/test_records.py checks the two are the same)."""
    if value.expire_timestamp >= 0:
        written = OffsetValue(value.offset, -1, value.metadata, value.commit_timestamp, value.expire_timestamp)
    else:
        written = OffsetValue(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp)
    return OffsetCommitRecord(
        encode_offset_commit_key(group, topic, partition),
        encode_offset_commit_value(value),
        decoded=(group, topic, partition, written),
    )


def offset_tombstone(group: str, topic: str, partition: int) -> Record:
    return Record(encode_offset_commit_key(group, topic, partition), None)


def group_metadata_record(group: str, value: GroupMetadataValueV3, *, applied: bool) -> Record:
    return Record(encode_group_metadata_key(group), encode_group_metadata_value(value), applied)


def group_tombstone(group: str) -> Record:
    return Record(encode_group_metadata_key(group), None)


# --- herd's pre-registered static members (KIP-469) -------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedMembersKey:
    """Key of record type 0x7E00 (non-flexible, like every Kafka record key)."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(EXPECTED_MEMBERS_KEY_TYPE)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedMembersValueV0:
    """Flexible from v0 (as Kafka's newer record values are), so fields can be added as tagged fields."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_ids: tuple[str, ...] = field(metadata={"kafka_type": "string"})


def encode_expected_members_key(group: str) -> bytes:
    return encode_versioned(EXPECTED_MEMBERS_KEY_TYPE, ExpectedMembersKey(group=group))


def decode_expected_members_key(key: bytes) -> ExpectedMembersKey:
    return decode_versioned(ExpectedMembersKey, key)


def decode_expected_members_value(value: bytes) -> tuple[str, ...]:
    version = value_version(value)
    if version != 0:
        raise ValueError(f"unknown ExpectedMembersValue version {version}")
    return decode_versioned(ExpectedMembersValueV0, value).instance_ids


def expected_members_record(group: str, instance_ids: tuple[str, ...], *, applied: bool) -> Record:
    """The group's pre-registered instance ids; no ids is a tombstone (compaction then drops the key)."""
    key = encode_expected_members_key(group)
    if not instance_ids:
        return Record(key, None, applied)
    return Record(key, encode_versioned(0, ExpectedMembersValueV0(instance_ids=tuple(instance_ids))), applied)


# --- herd's rebalance history (history.py) ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceHistoryKey:
    """Key of record type 0x7E01."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(REBALANCE_HISTORY_KEY_TYPE)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceMemberV0:
    """A member of the generation a rebalance produced; -1 stands for null in the int fields."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_id: str = field(metadata={"kafka_type": "string"})
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    joined_after_ms: i32 = field(metadata={"kafka_type": "int32"})
    partitions: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceLateV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_id: str = field(metadata={"kafka_type": "string"})
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    after_ms: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceDroppedV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_id: str = field(metadata={"kafka_type": "string"})
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    phase: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceEntryV0:
    """One rebalance (history.Rebalance); -1 stands for null in the int fields."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    generation: i32 = field(metadata={"kafka_type": "int32"})
    from_generation: i32 = field(metadata={"kafka_type": "int32"})
    cause: str = field(metadata={"kafka_type": "string"})
    reason: str = field(metadata={"kafka_type": "string"})
    member_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    started_ms: i64 = field(metadata={"kafka_type": "int64"})
    join_completed_ms: i64 = field(metadata={"kafka_type": "int64"})
    completed_ms: i64 = field(metadata={"kafka_type": "int64"})
    protocol: str | None = field(metadata={"kafka_type": "string"}, default=None)
    leader: str | None = field(metadata={"kafka_type": "string"}, default=None)
    join_end: str | None = field(metadata={"kafka_type": "string"}, default=None)
    outcome: str | None = field(metadata={"kafka_type": "string"}, default=None)
    members_total: i32 = field(metadata={"kafka_type": "int32"})
    members: tuple[RebalanceMemberV0, ...]
    late: tuple[RebalanceLateV0, ...]
    dropped: tuple[RebalanceDroppedV0, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceHistoryValueV0:
    """Flexible from v0, so fields can be added as tagged fields."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    rebalances: tuple[RebalanceEntryV0, ...]


def encode_rebalance_history_key(group: str) -> bytes:
    return encode_versioned(REBALANCE_HISTORY_KEY_TYPE, RebalanceHistoryKey(group=group))


def decode_rebalance_history_key(key: bytes) -> RebalanceHistoryKey:
    return decode_versioned(RebalanceHistoryKey, key)


def decode_rebalance_history_value(value: bytes) -> tuple[RebalanceEntryV0, ...]:
    """The entries, oldest first; raises ValueError for a version herd does not know."""
    version = value_version(value)
    if version != 0:
        raise ValueError(f"unknown RebalanceHistoryValue version {version}")
    return decode_versioned(RebalanceHistoryValueV0, value).rebalances


def rebalance_entry_size(entry: RebalanceEntryV0) -> int:
    """The bytes `entry` takes in a RebalanceHistoryValue."""
    buffer = io.BytesIO()
    entity_writer(RebalanceEntryV0)(buffer, entry)
    return len(buffer.getvalue())


def rebalance_history_record(group: str, entries: list[RebalanceEntryV0], *, applied: bool) -> Record:
    """The group's whole history; no entries is a tombstone (compaction then drops the key)."""
    key = encode_rebalance_history_key(group)
    if not entries:
        return Record(key, None, applied)
    return Record(key, encode_versioned(0, RebalanceHistoryValueV0(rebalances=tuple(entries))), applied)


def rebalance_history_tombstone(group: str) -> Record:
    return Record(encode_rebalance_history_key(group), None)


# --- herd's store of a group's Kafka group configs (kafka_group_configs.py) ----------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfigKey:
    """Key of record type 0x7E02."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(GROUP_CONFIG_KEY_TYPE)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfigEntryV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    value: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfigValueV0:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    configs: tuple[GroupConfigEntryV0, ...]


def decode_group_config_key(key: bytes) -> GroupConfigKey:
    return decode_versioned(GroupConfigKey, key)


def decode_group_config_value(value: bytes) -> dict[str, str]:
    """The overrides, name -> value; raises ValueError for a version herd does not know."""
    version = value_version(value)
    if version != 0:
        raise ValueError(f"unknown GroupConfigValue version {version}")
    return {e.name: e.value for e in decode_versioned(GroupConfigValueV0, value).configs}


def group_config_record(group: str, configs: dict[str, str], *, applied: bool) -> Record:
    """The group's whole set of overrides; none is a tombstone (compaction then drops the key)."""
    key = encode_versioned(GROUP_CONFIG_KEY_TYPE, GroupConfigKey(group=group))
    if not configs:
        return Record(key, None, applied)
    entries = tuple(GroupConfigEntryV0(name=n, value=v) for n, v in sorted(configs.items()))
    return Record(key, encode_versioned(0, GroupConfigValueV0(configs=entries)), applied)
