"""The share-group records of `__consumer_offsets` (KIP-932), in Kafka's schemas: record types 10-15
(apache/kafka group-coordinator/src/main/resources/common/message/ShareGroup*.json, as Kafka 4.1 and 4.2 write
them).

Framing as every coordinator record (herd.coordinator.records): key = int16 type ‖ key struct (version 0, not
flexible), value = int16 version ‖ value struct (version 0, flexible), None for a tombstone. The keys, the
target-assignment values and their TopicPartitions have the consumer-group records' shapes and are shared with
them (herd.coordinator.consumer.records).

| type | key | value |
|---|---|---|
| 10 | ShareGroupMemberMetadataKey {group, member} | {rack, client id, client host, subscribed topic names} |
| 11 | ShareGroupMetadataKey {group} | {epoch, metadata hash} (the hash a plain field, not tagged as type 3's) |
| 12 | ShareGroupTargetAssignmentMetadataKey {group} | {assignment epoch} |
| 13 | ShareGroupTargetAssignmentMemberKey {group, member} | {the member's target partitions} |
| 14 | ShareGroupCurrentMemberAssignmentKey {group, member} | {epoch, previous epoch, state, assigned partitions} |
| 15 | ShareGroupStatePartitionMetadataKey {group} | {initializing, initialized and deleting topics} |

Type 9 (ShareGroupPartitionMetadata, Kafka 4.0's early access) is not written by Kafka 4.1+; herd neither writes
nor reads it. A group is tombstoned in Kafka's order (ShareGroup.createGroupTombstoneRecords): every current
assignment, every target assignment, the target's epoch, every member, the state metadata, the group's epoch last.
"""

import uuid  # kio reads these annotations at run time: no `from __future__ import annotations` here
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from herd.coordinator.consumer.assignment import Assignment
from herd.coordinator.consumer.records import (
    Decoded,
    GroupKey,
    TargetAssignmentMemberValue,
    TargetAssignmentMetadataValue,
    TopicPartitions,
    check_version,
    group_and_member,
    group_key,
    member_key,
    topic_partitions_of,
    value_bytes,
)
from herd.coordinator.consumer.records import member_tombstones as _member_tombstones
from herd.coordinator.records import Record, decode_versioned

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
SHARE_GROUP_KEY_TYPES = frozenset(range(MEMBER_METADATA, STATE_PARTITION_METADATA + 1))
_GROUP_KEYED = frozenset({GROUP_METADATA, TARGET_ASSIGNMENT_METADATA, STATE_PARTITION_METADATA})


# --- values ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    rack_id: str | None = field(metadata={"kafka_type": "string"})
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    metadata_hash: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitionsInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"})
    create_timestamp: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StatePartitionMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    deleting_topics: tuple[TopicInfo, ...]


# --- what the records say, in herd's terms --------------------------------------------------------------


class TopicState(NamedTuple):
    """A topic of the share-state metadata: its name, the partitions listed and when they were added."""

    name: str
    partitions: frozenset[int]
    timestamp: int


@dataclass(frozen=True, slots=True)
class StateMetadata:
    """Which share partitions of the group have their share state initialized, are being initialized, or whose
    topics' state is being deleted (Kafka's ShareGroupStatePartitionMetadataInfo), by topic id."""

    initializing: Mapping[uuid.UUID, TopicState] = field(default_factory=dict)
    initialized: Mapping[uuid.UUID, TopicState] = field(default_factory=dict)
    deleting: Mapping[uuid.UUID, str] = field(default_factory=dict)


# --- encoding -------------------------------------------------------------------------------------------


def member_subscription_record(
    group_id: str, member_id: str, rack_id: str | None, client_id: str, client_host: str, topics: Iterable[str]
) -> Record:
    """Kafka's newShareGroupMemberSubscriptionRecord (the topic names sorted)."""
    value = MemberMetadataValue(
        rack_id=rack_id, client_id=client_id, client_host=client_host, subscribed_topic_names=tuple(sorted(topics))
    )
    return Record(member_key(MEMBER_METADATA, group_id, member_id), value_bytes(value))


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    """Kafka's newShareGroupEpochRecord."""
    value = GroupMetadataValue(epoch=i32(epoch), metadata_hash=i64(metadata_hash))
    return Record(group_key(GROUP_METADATA, group_id), value_bytes(value))


def target_assignment_epoch_record(group_id: str, epoch: int) -> Record:
    """Kafka's newShareGroupTargetAssignmentEpochRecord."""
    value = TargetAssignmentMetadataValue(assignment_epoch=i32(epoch))
    return Record(group_key(TARGET_ASSIGNMENT_METADATA, group_id), value_bytes(value))


def target_assignment_record(group_id: str, member_id: str, target: Assignment) -> Record:
    """Kafka's newShareGroupTargetAssignmentRecord."""
    value = TargetAssignmentMemberValue(topic_partitions=topic_partitions_of(target))
    return Record(member_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), value_bytes(value))


def current_assignment_record(
    group_id: str, member_id: str, epoch: int, previous_epoch: int, assigned: Assignment
) -> Record:
    """Kafka's newShareGroupCurrentAssignmentRecord (a share member's state is always STABLE, 0)."""
    value = CurrentMemberAssignmentValue(
        member_epoch=i32(epoch),
        previous_member_epoch=i32(previous_epoch),
        state=i8(0),
        assigned_partitions=topic_partitions_of(assigned),
    )
    return Record(member_key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), value_bytes(value))


def state_metadata_record(group_id: str, metadata: StateMetadata) -> Record:
    """Kafka's newShareGroupStatePartitionMetadataRecord."""

    def infos(of: Mapping[uuid.UUID, TopicState]) -> tuple[TopicPartitionsInfo, ...]:
        return tuple(
            TopicPartitionsInfo(
                topic_id=topic_id,
                topic_name=topic.name,
                partitions=tuple(i32(p) for p in sorted(topic.partitions)),
                create_timestamp=i64(topic.timestamp),
            )
            for topic_id, topic in sorted(of.items())
        )

    value = StatePartitionMetadataValue(
        initializing_topics=infos(metadata.initializing),
        initialized_topics=infos(metadata.initialized),
        deleting_topics=tuple(
            TopicInfo(topic_id=topic_id, topic_name=name) for topic_id, name in sorted(metadata.deleting.items())
        ),
    )
    return Record(group_key(STATE_PARTITION_METADATA, group_id), value_bytes(value))


def member_tombstones(group_id: str, member_id: str) -> tuple[Record, ...]:
    """A member leaves or is fenced: its current assignment, its target assignment and its subscription, in
    Kafka's order (GroupMetadataManager.shareGroupFenceMember)."""
    return _member_tombstones(
        group_id, member_id, (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)
    )


def group_tombstones(group_id: str, member_ids: Iterable[str]) -> tuple[Record, ...]:
    """The whole group goes (ShareGroup.createGroupTombstoneRecords)."""
    members = tuple(member_ids)
    records = [Record(member_key(CURRENT_MEMBER_ASSIGNMENT, group_id, m), None) for m in members]
    records += [Record(member_key(TARGET_ASSIGNMENT_MEMBER, group_id, m), None) for m in members]
    records.append(Record(group_key(TARGET_ASSIGNMENT_METADATA, group_id), None))
    records += [Record(member_key(MEMBER_METADATA, group_id, m), None) for m in members]
    records.append(Record(group_key(STATE_PARTITION_METADATA, group_id), None))
    records.append(Record(group_key(GROUP_METADATA, group_id), None))
    return tuple(records)


# --- decoding -------------------------------------------------------------------------------------------


_VALUES: dict[int, type] = {
    MEMBER_METADATA: MemberMetadataValue,
    GROUP_METADATA: GroupMetadataValue,
    TARGET_ASSIGNMENT_METADATA: TargetAssignmentMetadataValue,
    TARGET_ASSIGNMENT_MEMBER: TargetAssignmentMemberValue,
    CURRENT_MEMBER_ASSIGNMENT: CurrentMemberAssignmentValue,
    STATE_PARTITION_METADATA: StatePartitionMetadataValue,
}


def decode(kind: int, key: bytes, value: bytes | None) -> Decoded:
    """A share-group record of type `kind` (as consumer-group records decode: consumer.records.Decoded); raises
    ValueError for one that cannot be read."""
    if kind not in SHARE_GROUP_KEY_TYPES:
        raise ValueError(f"record type {kind} is not a share-group record")
    if kind in _GROUP_KEYED:
        group_id, member_id = decode_versioned(GroupKey, key).group_id, None
    else:
        group_id, member_id = group_and_member(key)
    if value is None:
        return Decoded(kind, group_id, member_id, None)
    cls = _VALUES[kind]
    check_version(value, cls.__name__)
    return Decoded(kind, group_id, member_id, decode_versioned(cls, value))


def state_metadata_of(value: StatePartitionMetadataValue) -> StateMetadata:
    def topics(of: tuple[TopicPartitionsInfo, ...]) -> dict[uuid.UUID, TopicState]:
        return {
            t.topic_id: TopicState(t.topic_name, frozenset(int(p) for p in t.partitions), int(t.create_timestamp))
            for t in of
        }

    return StateMetadata(
        initializing=topics(value.initializing_topics),
        initialized=topics(value.initialized_topics),
        deleting={t.topic_id: t.topic_name for t in value.deleting_topics},
    )
