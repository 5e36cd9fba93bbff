"""The records of `__share_group_state` (KIP-932), in Kafka 4.2's schemas (confluentinc/kafka
share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json): the durable state of
each share partition, keyed by (group id, topic id, partition).

- type 0, ShareSnapshotKey {group, topic id, partition}: {snapshot epoch, state epoch, leader epoch, start offset,
  tagged 0: delivery-complete count, create and write timestamps, state batches};
- type 1, ShareUpdateKey {group, topic id, partition}: {snapshot epoch, leader epoch, start offset (-1: unchanged),
  tagged 0: delivery-complete count, the state batches that changed}.

Framing as every coordinator record: key = int16 type ‖ key struct (version 0, not flexible), value = int16 version ‖
value struct (version 0, flexible); a snapshot's tombstone removes the partition's state.
"""

import uuid  # kio reads these annotations at run time: no `from __future__ import annotations` here
from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, NamedTuple

from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from herd.coordinator.records import Record, decode_versioned, encode_versioned, record_type, value_version

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1


class StateBatch(NamedTuple):
    """A range of a share partition's records in one state (0 available, 2 acknowledged, 4 archived) with its
    delivery count (PersisterStateBatch)."""

    first: int
    last: int
    state: int
    delivery_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partition: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StateBatchValue:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    first_offset: i64 = field(metadata={"kafka_type": "int64"})
    last_offset: i64 = field(metadata={"kafka_type": "int64"})
    delivery_state: i8 = field(metadata={"kafka_type": "int8"})
    delivery_count: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareSnapshotValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    snapshot_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    start_offset: i64 = field(metadata={"kafka_type": "int64"})
    delivery_complete_count: i32 = field(metadata={"kafka_type": "int32", "tag": 0}, default=i32(-1))
    create_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    write_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    state_batches: tuple[StateBatchValue, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareUpdateValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    snapshot_epoch: i32 = field(metadata={"kafka_type": "int32"})
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    start_offset: i64 = field(metadata={"kafka_type": "int64"})
    delivery_complete_count: i32 = field(metadata={"kafka_type": "int32", "tag": 0}, default=i32(-1))
    state_batches: tuple[StateBatchValue, ...]


@lru_cache(maxsize=4096)  # a share partition's keys are written at every acknowledgement of it
def key_bytes(kind: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return encode_versioned(kind, ShareKey(group_id=group_id, topic_id=topic_id, partition=i32(partition)))


class Decoded(NamedTuple):
    kind: int
    key: tuple[str, uuid.UUID, int]
    value: ShareSnapshotValue | ShareUpdateValue | None


@dataclass(frozen=True, slots=True)
class StateRecord(Record):
    """A record the share coordinator writes, with what its bytes hold: the shard replays each of its own records as
    it writes it, and the bytes it just encoded need not be decoded again for that (`decoded`). Records read back
    from the log are plain Records, decoded."""

    decoded: Decoded | None = field(default=None, compare=False)


def _batches(batches: tuple[StateBatch, ...] | list[StateBatch]) -> tuple[StateBatchValue, ...]:
    return tuple(
        StateBatchValue(
            first_offset=i64(b.first),
            last_offset=i64(b.last),
            delivery_state=i8(b.state),
            delivery_count=i16(b.delivery_count),
        )
        for b in batches
    )


def snapshot_record(
    group_id: str,
    topic_id: uuid.UUID,
    partition: int,
    *,
    snapshot_epoch: int,
    state_epoch: int,
    leader_epoch: int,
    start_offset: int,
    create_timestamp: int,
    write_timestamp: int,
    batches: tuple[StateBatch, ...] | list[StateBatch],
) -> Record:
    value = ShareSnapshotValue(
        snapshot_epoch=i32(snapshot_epoch),
        state_epoch=i32(state_epoch),
        leader_epoch=i32(leader_epoch),
        start_offset=i64(start_offset),
        create_timestamp=i64(create_timestamp),
        write_timestamp=i64(write_timestamp),
        state_batches=_batches(batches),
    )
    key = key_bytes(SHARE_SNAPSHOT, group_id, topic_id, partition)
    return StateRecord(
        key, encode_versioned(0, value), decoded=Decoded(SHARE_SNAPSHOT, (group_id, topic_id, partition), value)
    )


def update_record(
    group_id: str,
    topic_id: uuid.UUID,
    partition: int,
    *,
    snapshot_epoch: int,
    leader_epoch: int,
    start_offset: int,
    batches: tuple[StateBatch, ...] | list[StateBatch],
) -> Record:
    value = ShareUpdateValue(
        snapshot_epoch=i32(snapshot_epoch),
        leader_epoch=i32(leader_epoch),
        start_offset=i64(start_offset),
        state_batches=_batches(batches),
    )
    key = key_bytes(SHARE_UPDATE, group_id, topic_id, partition)
    return StateRecord(
        key, encode_versioned(0, value), decoded=Decoded(SHARE_UPDATE, (group_id, topic_id, partition), value)
    )


def tombstone(group_id: str, topic_id: uuid.UUID, partition: int) -> Record:
    return Record(key_bytes(SHARE_SNAPSHOT, group_id, topic_id, partition), None)


def decode(key: bytes, value: bytes | None) -> Decoded:
    """One record read back. ValueError for a type or version herd does not know, or bytes that do not decode."""
    kind = record_type(key)
    if kind not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        raise ValueError(f"unknown __share_group_state record type {kind}")
    k = decode_versioned(ShareKey, key)
    if value is None:
        return Decoded(kind, (k.group_id, k.topic_id, int(k.partition)), None)
    if value_version(value) != 0:
        raise ValueError(f"unknown __share_group_state value version {value_version(value)}")
    decoded: ShareSnapshotValue | ShareUpdateValue = (
        decode_versioned(ShareSnapshotValue, value)
        if kind == SHARE_SNAPSHOT
        else decode_versioned(ShareUpdateValue, value)
    )
    return Decoded(kind, (k.group_id, k.topic_id, int(k.partition)), decoded)


def batches_of(values: tuple[StateBatchValue, ...]) -> list[StateBatch]:
    return [
        StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
        for b in values
    ]
