"""`__transaction_state` records in Kafka's exact key/value schemas: the one module that knows their bytes.

Schemas (apache/kafka transaction-coordinator/src/main/resources/common/message/TransactionLogKey.json and
TransactionLogValue.json), framed as every coordinator record (core/.../transaction/TransactionLog.scala,
`MessageUtil.toVersionPrefixedBytes`):

    key   = int16 key version (0) | string transactional_id
    value = int16 value version | TransactionLogValue, or None (a tombstone: the id expired)

    TransactionLogValue v0 = int64 producer_id | int16 producer_epoch | int32 transaction_timeout_ms |
        int8 transaction_status | [string topic, [int32 partition]] (nullable) |
        int64 last_update_timestamp_ms | int64 start_timestamp_ms
    v1 (flexible, KIP-890 TV2) adds tagged fields 0 previous_producer_id, 1 next_producer_id (both default -1)
    and 2 client_transaction_version (default 0).

Kafka writes the value version of its finalized `transaction.version` feature (TransactionVersion
`transactionLogValueVersion`): herd finalizes no transaction.version, so it is level 0 and herd writes v0, as a
Kafka broker with TV 0 does; it reads v0 and v1. An Empty transaction is written with a null partition list
(TransactionLog.valueToBytes), and on reading the partitions of an Empty value are ignored
(TransactionLog.readTxnRecordValue). The schemas are declared as kio-style frozen dataclasses (kio has no
classes for these internal records) and encoded with kio's generic `entity_writer` / `entity_reader`; a
transaction record is written once per state change, not per offset, so the generic codec is fast enough.
"""

from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64
from kio.static.protocol import Entity

from herd.coordinator.records import Record, decode_versioned, encode_versioned

KEY_VERSION = 0
WRITTEN_VALUE_VERSION = 0

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    transactional_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsSchemaV0:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    topic: str = field(metadata={"kafka_type": "string"})
    partition_ids: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsSchemaV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    topic: str = field(metadata={"kafka_type": "string"})
    partition_ids: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogValueV0:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    producer_id: i64 = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    transaction_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    transaction_status: i8 = field(metadata={"kafka_type": "int8"})
    transaction_partitions: tuple[PartitionsSchemaV0, ...] | None
    transaction_last_update_timestamp_ms: i64 = field(metadata={"kafka_type": "int64"})
    transaction_start_timestamp_ms: i64 = field(metadata={"kafka_type": "int64"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionLogValueV1:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    producer_id: i64 = field(metadata={"kafka_type": "int64"})
    previous_producer_id: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(-1))
    next_producer_id: i64 = field(metadata={"kafka_type": "int64", "tag": 1}, default=i64(-1))
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    transaction_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    transaction_status: i8 = field(metadata={"kafka_type": "int8"})
    transaction_partitions: tuple[PartitionsSchemaV1, ...] | None
    transaction_last_update_timestamp_ms: i64 = field(metadata={"kafka_type": "int64"})
    transaction_start_timestamp_ms: i64 = field(metadata={"kafka_type": "int64"})
    client_transaction_version: i16 = field(metadata={"kafka_type": "int16", "tag": 2}, default=i16(0))


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """A TransactionLogValue of any version, normalised (v0 values carry v1's tagged defaults)."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


E = TypeVar("E", bound=Entity)


def _decode(cls: type[E], data: bytes) -> E:
    """`decode_versioned`, with every error of undecodable bytes a ValueError (kio raises struct/index/unicode
    errors on truncated or garbled bytes), which the loader skips."""
    try:
        return decode_versioned(cls, data)
    except ValueError:
        raise
    except Exception as error:
        raise ValueError(f"undecodable {cls.__name__}: {error}") from error


def encode_key(transactional_id: str) -> bytes:
    return encode_versioned(KEY_VERSION, TransactionLogKey(transactional_id=transactional_id))


def decode_key(key: bytes) -> str:
    """The transactional id of a key; raises ValueError for another key version or undecodable bytes."""
    if len(key) < 2:
        raise ValueError(f"a {len(key)}-byte key has no version")
    version = int.from_bytes(key[:2], "big", signed=True)
    if version != KEY_VERSION:
        raise ValueError(f"unknown TransactionLogKey version {version}")
    return _decode(TransactionLogKey, key).transactional_id


def _grouped(partitions: frozenset[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    return by_topic


EMPTY_STATUS = 0


def encode_value(value: TxnLogValue) -> bytes:
    """TransactionLogValue v0 (see the module docstring); an Empty transaction's partitions are written null.
    Raises ValueError for an Empty value with partitions (Kafka's IllegalStateException)."""
    if value.status == EMPTY_STATUS and value.partitions:
        raise ValueError("an Empty transaction has no partitions")
    partitions = (
        None
        if value.status == EMPTY_STATUS
        else tuple(
            PartitionsSchemaV0(topic=topic, partition_ids=tuple(i32(p) for p in ids))
            for topic, ids in _grouped(value.partitions).items()
        )
    )
    return encode_versioned(
        WRITTEN_VALUE_VERSION,
        TransactionLogValueV0(
            producer_id=i64(value.producer_id),
            producer_epoch=i16(value.producer_epoch),
            transaction_timeout_ms=i32(value.timeout_ms),
            transaction_status=i8(value.status),
            transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=i64(value.last_update_ms),
            transaction_start_timestamp_ms=i64(value.start_ms),
        ),
    )


def decode_value(value: bytes) -> TxnLogValue:
    """A TransactionLogValue v0 or v1; raises ValueError for another version or undecodable bytes."""
    if len(value) < 2:
        raise ValueError(f"a {len(value)}-byte value has no version")
    version = int.from_bytes(value[:2], "big", signed=True)
    if version == 0:
        v0 = _decode(TransactionLogValueV0, value)
        return _normalised(v0, -1, -1, 0)
    if version == 1:
        v1 = _decode(TransactionLogValueV1, value)
        return _normalised(v1, v1.previous_producer_id, v1.next_producer_id, v1.client_transaction_version)
    raise ValueError(f"unknown TransactionLogValue version {version}")


def _normalised(
    v: TransactionLogValueV0 | TransactionLogValueV1, previous: int, next_id: int, client_version: int
) -> TxnLogValue:
    partitions: frozenset[TopicPartition] = frozenset()
    if v.transaction_status != EMPTY_STATUS and v.transaction_partitions:
        partitions = frozenset((p.topic, int(i)) for p in v.transaction_partitions for i in p.partition_ids)
    return TxnLogValue(
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        timeout_ms=v.transaction_timeout_ms,
        status=v.transaction_status,
        partitions=partitions,
        last_update_ms=v.transaction_last_update_timestamp_ms,
        start_ms=v.transaction_start_timestamp_ms,
        previous_producer_id=previous,
        next_producer_id=next_id,
        client_transaction_version=client_version,
    )


def txn_record(transactional_id: str, value: TxnLogValue | None, *, applied: bool = True) -> Record:
    """One `__transaction_state` record; `value` None is the tombstone of an expired id. Live state already holds
    what a handler writes, so its records are `applied` (replay skips them)."""
    return Record(encode_key(transactional_id), None if value is None else encode_value(value), applied=applied)
