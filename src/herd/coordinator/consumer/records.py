"""The consumer-group records of `__consumer_offsets` (KIP-848), in Kafka's schemas: record types 3-8 and 16
(confluentinc/kafka branch 4.2, group-coordinator/src/main/resources/common/message/ConsumerGroup*.json).

Framing as every coordinator record (herd.coordinator.records): key = int16 type ‖ key struct (version 0,
not flexible), value = int16 version ‖ value struct (version 0, flexible), None for a tombstone.

| type | key | value |
|---|---|---|
| 3 | ConsumerGroupMetadataKey {group} | {epoch, tagged 0: metadata hash (4.1, KIP-1101)} |
| 4 | ConsumerGroupPartitionMetadataKey {group} | herd never writes one; Kafka 4.1+ only tombstones it |
| 5 | ConsumerGroupMemberMetadataKey {group, member} | the member's subscription and client |
| 6 | ConsumerGroupTargetAssignmentMetadataKey {group} | {assignment epoch} |
| 7 | ConsumerGroupTargetAssignmentMemberKey {group, member} | {the member's target partitions} |
| 8 | ConsumerGroupCurrentMemberAssignmentKey {group, member} | {epochs, state, assigned, pending revocation} |
| 16 | ConsumerGroupRegularExpressionKey {group, regex} | {topics, version, timestamp} |

A group is written as Kafka's GroupCoordinatorRecordHelpers writes it and tombstoned in Kafka's order when it
goes (`group_tombstones`: current assignments, target assignments, members, then the target metadata and the
group metadata last, so that a log cut anywhere still replays to a consistent group).
"""

import io
import uuid  # kio reads these annotations at run time: no `from __future__ import annotations` here
from dataclasses import dataclass, field, replace
from typing import ClassVar, NamedTuple

from kio.serial import entity_writer
from kio.serial.writers import write_unsigned_varint
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64, uvarint

from herd.coordinator.consumer.assignment import Assignment, assignment
from herd.coordinator.consumer.member import ClassicMetadata, ConsumerMember, MemberState
from herd.coordinator.records import Record, decode_versioned, encode_versioned, value_version

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
CONSUMER_GROUP_KEY_TYPES = frozenset(
    {
        GROUP_METADATA,
        PARTITION_METADATA,
        MEMBER_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
        REGULAR_EXPRESSION,
    }
)


# --- keys -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupKey:
    """The key of types 3, 4 and 6: the group alone."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberKey:
    """The key of types 5, 7 and 8: the group and a member."""

    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class RegularExpressionKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    regular_expression: str = field(metadata={"kafka_type": "string"})


# --- values ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    metadata_hash: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicProtocol:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    metadata: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberMetadata:
    """What a classic member of a consumer group also needs (KIP-848's online migration)."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    session_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = field(metadata={"kafka_type": "string"})
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"})
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"})
    rebalance_timeout_ms: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    server_assignor: str | None = field(metadata={"kafka_type": "string"})
    classic_member_metadata: ClassicMemberMetadata | None = field(metadata={"tag": 0}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentMemberValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[TopicPartitions, ...]
    partitions_pending_revocation: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RegularExpressionValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topics: tuple[str, ...] = field(metadata={"kafka_type": "string"})
    version: i64 = field(metadata={"kafka_type": "int64"})
    timestamp: i64 = field(metadata={"kafka_type": "int64"})


# --- encoding -------------------------------------------------------------------------------------------


def topic_partitions_of(of: Assignment) -> tuple[TopicPartitions, ...]:
    """An assignment as the records write it: topics by id, partitions sorted."""
    return tuple(
        TopicPartitions(topic_id=topic_id, partitions=tuple(i32(p) for p in sorted(parts)))
        for topic_id, parts in sorted(of.items())
    )


def assignment_of(of: tuple[TopicPartitions, ...]) -> Assignment:
    return assignment((tp.topic_id, tp.partitions) for tp in of)


def group_key(kind: int, group_id: str) -> bytes:
    """The key of a record of the group itself (KIP-848's and KIP-932's types alike)."""
    return encode_versioned(kind, GroupKey(group_id=group_id))


def member_key(kind: int, group_id: str, member_id: str) -> bytes:
    """The key of a record of one member of the group."""
    return encode_versioned(kind, MemberKey(group_id=group_id, member_id=member_id))


def value_bytes(entity: object) -> bytes:
    """A value, version 0 (every KIP-848 and KIP-932 group record's)."""
    return encode_versioned(0, entity)  # type: ignore[arg-type]


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int = 0) -> Record:
    """Kafka's newConsumerGroupEpochRecord."""
    value = GroupMetadataValue(epoch=i32(epoch), metadata_hash=i64(metadata_hash))
    return Record(group_key(GROUP_METADATA, group_id), value_bytes(value))


def member_subscription_record(group_id: str, member: ConsumerMember) -> Record:
    """Kafka's newConsumerGroupMemberSubscriptionRecord."""
    value = MemberMetadataValue(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        subscribed_topic_regex=member.subscribed_topic_regex,
        rebalance_timeout_ms=i32(member.rebalance_timeout_ms),
        server_assignor=member.server_assignor,
    )
    data = value_bytes(value)
    if member.classic is not None:
        data = _with_classic_metadata(data, member.classic)
    return Record(member_key(MEMBER_METADATA, group_id, member.member_id), data)


def _with_classic_metadata(data: bytes, classic: ClassicMetadata) -> bytes:
    """A MemberMetadataValue written without tagged fields (its last byte, their count, is 0), given the
    ClassicMemberMetadata as tagged field 0. Written here because Kafka writes a nullable struct in a tagged field
    with a presence marker (its generator's generateStructReader: a varint > 0 before the struct), which kio reads
    but does not write."""
    assert data[-1] == 0, "a MemberMetadataValue with tagged fields"
    struct_buffer = io.BytesIO()
    entity_writer(ClassicMemberMetadata)(
        struct_buffer,
        ClassicMemberMetadata(
            session_timeout_ms=i32(classic.session_timeout_ms),
            supported_protocols=tuple(ClassicProtocol(name=name, metadata=meta) for name, meta in classic.protocols),
        ),
    )
    body = struct_buffer.getvalue()
    out = io.BytesIO()
    out.write(data[:-1])
    write_unsigned_varint(out, uvarint(1))  # one tagged field
    write_unsigned_varint(out, uvarint(0))  # tag 0
    write_unsigned_varint(out, uvarint(len(body) + 1))  # its size, with the presence marker
    write_unsigned_varint(out, uvarint(1))  # present
    out.write(body)
    return out.getvalue()


def target_assignment_record(group_id: str, member_id: str, target: Assignment) -> Record:
    """Kafka's newConsumerGroupTargetAssignmentRecord."""
    value = TargetAssignmentMemberValue(topic_partitions=topic_partitions_of(target))
    return Record(member_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), value_bytes(value))


def target_assignment_epoch_record(group_id: str, epoch: int) -> Record:
    """Kafka's newConsumerGroupTargetAssignmentEpochRecord."""
    value = TargetAssignmentMetadataValue(assignment_epoch=i32(epoch))
    return Record(group_key(TARGET_ASSIGNMENT_METADATA, group_id), value_bytes(value))


def current_assignment_record(group_id: str, member: ConsumerMember) -> Record:
    """Kafka's newConsumerGroupCurrentAssignmentRecord."""
    value = CurrentMemberAssignmentValue(
        member_epoch=i32(member.member_epoch),
        previous_member_epoch=i32(member.previous_member_epoch),
        state=i8(int(member.state)),
        assigned_partitions=topic_partitions_of(member.assigned),
        partitions_pending_revocation=topic_partitions_of(member.pending_revocation),
    )
    return Record(member_key(CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id), value_bytes(value))


def regular_expression_record(
    group_id: str, regex: str, topics: frozenset[str], version: int, timestamp: int
) -> Record:
    """Kafka's newConsumerGroupRegularExpressionRecord: what `regex` resolved to, against metadata `version`."""
    value = RegularExpressionValue(topics=tuple(sorted(topics)), version=i64(version), timestamp=i64(timestamp))
    key = encode_versioned(REGULAR_EXPRESSION, RegularExpressionKey(group_id=group_id, regular_expression=regex))
    return Record(key, value_bytes(value))


def regular_expression_tombstone(group_id: str, regex: str) -> Record:
    key = encode_versioned(REGULAR_EXPRESSION, RegularExpressionKey(group_id=group_id, regular_expression=regex))
    return Record(key, None)


def partition_metadata_tombstone(group_id: str) -> Record:
    """Kafka 4.1's tombstone for a 4.0 ConsumerGroupPartitionMetadata record (KIP-1101 replaced it)."""
    return Record(group_key(PARTITION_METADATA, group_id), None)


def member_tombstones(
    group_id: str,
    member_id: str,
    kinds: tuple[int, ...] = (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA),
) -> tuple[Record, ...]:
    """A member leaves: its current assignment, its target assignment and its subscription, in Kafka's order
    (GroupMetadataManager.removeMember); `kinds` are those three record types (a share group's are 14, 13, 10)."""
    return tuple(Record(member_key(kind, group_id, member_id), None) for kind in kinds)


def group_tombstones(group_id: str, member_ids: tuple[str, ...], regexes: tuple[str, ...] = ()) -> tuple[Record, ...]:
    """The whole group goes (ConsumerGroup.createGroupTombstoneRecords): every current assignment, every target
    assignment and then the target's epoch, every subscription, every resolved regular expression, the (4.0)
    partition metadata, and the group's epoch last."""
    records = [Record(member_key(CURRENT_MEMBER_ASSIGNMENT, group_id, m), None) for m in member_ids]
    records += [Record(member_key(TARGET_ASSIGNMENT_MEMBER, group_id, m), None) for m in member_ids]
    records.append(Record(group_key(TARGET_ASSIGNMENT_METADATA, group_id), None))
    records += [Record(member_key(MEMBER_METADATA, group_id, m), None) for m in member_ids]
    records += [regular_expression_tombstone(group_id, regex) for regex in regexes]
    records.append(partition_metadata_tombstone(group_id))
    records.append(Record(group_key(GROUP_METADATA, group_id), None))
    return tuple(records)


# --- decoding -------------------------------------------------------------------------------------------


class Decoded(NamedTuple):
    """One consumer-group (or share-group) record read back: its type, group, member (or regex, for type 16; None
    for the group's own records) and value (None for a tombstone, the decoded value otherwise)."""

    kind: int
    group_id: str
    member_id: str | None
    value: object | None


def group_and_member(key: bytes) -> tuple[str, str]:
    """The group and member of a member record's key."""
    keyed = decode_versioned(MemberKey, key)
    return keyed.group_id, keyed.member_id


def check_version(value: bytes, name: str) -> None:
    version = value_version(value)
    if version != 0:
        raise ValueError(f"unknown {name} version {version}")


_VALUES: dict[int, type] = {
    GROUP_METADATA: GroupMetadataValue,
    MEMBER_METADATA: MemberMetadataValue,
    TARGET_ASSIGNMENT_METADATA: TargetAssignmentMetadataValue,
    TARGET_ASSIGNMENT_MEMBER: TargetAssignmentMemberValue,
    CURRENT_MEMBER_ASSIGNMENT: CurrentMemberAssignmentValue,
    REGULAR_EXPRESSION: RegularExpressionValue,
}


def decode(kind: int, key: bytes, value: bytes | None) -> Decoded:
    """A consumer-group record of type `kind`; raises ValueError for one that cannot be read. A value of type 4
    (partition metadata, written by Kafka 4.0) is left undecoded, its bytes as the value: herd only notes that
    there is one, to tombstone it as Kafka 4.1 does."""
    if kind in (GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA):
        group_id, member_id = decode_versioned(GroupKey, key).group_id, None
    elif kind == REGULAR_EXPRESSION:
        regex_key = decode_versioned(RegularExpressionKey, key)
        group_id, member_id = regex_key.group_id, regex_key.regular_expression
    elif kind in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT):
        group_id, member_id = group_and_member(key)
    else:
        raise ValueError(f"record type {kind} is not a consumer-group record")
    if value is None or kind == PARTITION_METADATA:
        return Decoded(kind, group_id, member_id, value)
    cls = _VALUES[kind]
    check_version(value, cls.__name__)
    return Decoded(kind, group_id, member_id, decode_versioned(cls, value))


def target_of(value: TargetAssignmentMemberValue) -> Assignment:
    return assignment_of(value.topic_partitions)


def apply_subscription(member: ConsumerMember, value: MemberMetadataValue) -> ConsumerMember:
    """`member` with the subscription and client of a MemberMetadata record (Kafka's
    ConsumerGroupMember.Builder.updateWith(ConsumerGroupMemberMetadataValue))."""
    return replace(
        member,
        instance_id=value.instance_id,
        rack_id=value.rack_id,
        client_id=value.client_id,
        client_host=value.client_host,
        subscribed_topic_names=frozenset(value.subscribed_topic_names),
        subscribed_topic_regex=value.subscribed_topic_regex,
        rebalance_timeout_ms=int(value.rebalance_timeout_ms),
        server_assignor=value.server_assignor,
        classic=(
            None
            if (classic := value.classic_member_metadata) is None
            else ClassicMetadata(
                int(classic.session_timeout_ms), tuple((p.name, p.metadata) for p in classic.supported_protocols)
            )
        ),
    )


def apply_current_assignment(member: ConsumerMember, value: CurrentMemberAssignmentValue) -> ConsumerMember:
    """`member` with the epochs, state and partitions of a CurrentMemberAssignment record."""
    return replace(
        member,
        member_epoch=int(value.member_epoch),
        previous_member_epoch=int(value.previous_member_epoch),
        state=MemberState.of(int(value.state)),
        assigned=assignment_of(value.assigned_partitions),
        pending_revocation=assignment_of(value.partitions_pending_revocation),
    )
