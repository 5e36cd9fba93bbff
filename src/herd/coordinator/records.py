"""`__consumer_offsets` records in Kafka's exact key/value schemas.

Framing (apache/kafka coordinator-common/.../CoordinatorRecordSerde.java):
    key   = int16 record_type (the key version) ‖ key struct
    value = int16 value_version ‖ value struct, or None for a tombstone

Record types: 0 and 1 are OffsetCommitKey {group, topic, partition} (writers use 1), 2 is
GroupMetadataKey {group}. herd adds one type of its own, 0x7E00 (32256), far above Kafka's (0-15 for
offsets, classic, consumer and share groups; streams groups take the next few): ExpectedMembersKey
{group} with ExpectedMembersValue v0 {instance_ids: [string]}, the group's pre-registered static
members (KIP-469, see preregistration.py); a tombstone clears them. Kafka's loader skips record types it
does not know (CoordinatorLoaderImpl), so a Kafka reading herd's partitions ignores these records.
Writers emit GroupMetadataValue v3 and OffsetCommitValue v3, or v1 when the commit carries an explicit
expire timestamp (OffsetCommit v2-4 RetentionTimeMs). Readers accept every
version 0-4 of both values (v4 is the first flexible version, KIP-915).

The schemas are declared as kio-style frozen dataclasses (kio has no classes for these internal
records) and encoded with kio's generic `entity_writer` / `entity_reader`: no hand-written codec. The
schemas are group-coordinator/src/main/resources/common/message/{OffsetCommitKey,OffsetCommitValue,
GroupMetadataKey,GroupMetadataValue}.json in apache/kafka.

`decode(record)` turns a `Record` into a typed (key, value) pair with the value normalised to the
newest non-flexible shape (missing fields take their schema defaults), or None for an unknown type.
"""


import io
import struct
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple, TypeVar

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

OFFSET_COMMIT_KEY_TYPES = (0, 1)
OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
EXPECTED_MEMBERS_KEY_TYPE = 0x7E00
"""herd's own record type: pre-registered static members of a group (KIP-469)."""

# --- keys -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey:
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


E = TypeVar("E")


def _encode(version: int, entity: object) -> bytes:
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _decode(cls: type[E], data: bytes) -> E:
    entity, size = entity_reader(cls)(data, 2)
    if 2 + size != len(data):
        raise ValueError(f"{cls.__name__}: {len(data) - 2 - size} trailing bytes")
    return entity


def record_type(key: bytes) -> int:
    return struct.unpack_from(">h", key)[0]


def value_version(value: bytes) -> int:
    return struct.unpack_from(">h", value)[0]


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return _encode(OFFSET_COMMIT_KEY_TYPE, OffsetCommitKey(group=group, topic=topic, partition=i32(partition)))


def encode_group_metadata_key(group: str) -> bytes:
    return _encode(GROUP_METADATA_KEY_TYPE, GroupMetadataKey(group=group))


def encode_offset_commit_value(value: OffsetCommitValueV1 | OffsetCommitValueV3) -> bytes:
    return _encode(type(value).__version__, value)


def encode_group_metadata_value(value: GroupMetadataValueV3) -> bytes:
    return _encode(3, value)


# --- normalised decoding ---------------------------------------------------------------------------


class OffsetValue(NamedTuple):
    """An OffsetCommitValue of any version, normalised. A NamedTuple rather than a frozen dataclass: loading
    a partition builds one per committed offset, and a tuple is built about five times faster."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


def decode_offset_commit_value(value: bytes) -> OffsetValue:
    version = value_version(value)
    cls = OFFSET_COMMIT_VALUES.get(version)
    if cls is None:
        raise ValueError(f"unknown OffsetCommitValue version {version}")
    raw = _decode(cls, value)
    return OffsetValue(
        offset=raw.offset,
        leader_epoch=getattr(raw, "leader_epoch", -1),
        metadata=raw.metadata,
        commit_timestamp=raw.commit_timestamp,
        expire_timestamp=getattr(raw, "expire_timestamp", -1),
    )


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
    raw = _decode(cls, value)
    return GroupMetadataValueV3(
        protocol_type=raw.protocol_type,
        generation=raw.generation,
        protocol=raw.protocol,
        leader=raw.leader,
        current_state_timestamp=i64(getattr(raw, "current_state_timestamp", -1)),
        members=tuple(_member_v3(m) for m in raw.members),
    )


def decode_offset_commit_key(key: bytes) -> OffsetCommitKey:
    return _decode(OffsetCommitKey, key)


def decode_group_metadata_key(key: bytes) -> GroupMetadataKey:
    return _decode(GroupMetadataKey, key)


# --- record builders (GroupCoordinatorRecordHelpers) -----------------------------------------------


def offset_commit_record(group: str, topic: str, partition: int, value: OffsetValue) -> Record:
    """OffsetCommitValue v3, or v1 when the commit has an explicit expire timestamp."""
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
    key = encode_offset_commit_key(group, topic, partition)
    return Record(key, encode_offset_commit_value(encoded))


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
    return _encode(EXPECTED_MEMBERS_KEY_TYPE, ExpectedMembersKey(group=group))


def decode_expected_members_key(key: bytes) -> ExpectedMembersKey:
    return _decode(ExpectedMembersKey, key)


def decode_expected_members_value(value: bytes) -> tuple[str, ...]:
    version = value_version(value)
    if version != 0:
        raise ValueError(f"unknown ExpectedMembersValue version {version}")
    return _decode(ExpectedMembersValueV0, value).instance_ids


def expected_members_record(group: str, instance_ids: tuple[str, ...], *, applied: bool) -> Record:
    """The group's pre-registered instance ids; no ids is a tombstone (compaction then drops the key)."""
    key = encode_expected_members_key(group)
    if not instance_ids:
        return Record(key, None, applied)
    return Record(key, _encode(0, ExpectedMembersValueV0(instance_ids=tuple(instance_ids))), applied)
