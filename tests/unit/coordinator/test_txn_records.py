"""`__transaction_state` records against the byte layout of Kafka's TransactionLogKey/TransactionLogValue schemas
(apache/kafka transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json), written
out by hand here with struct rather than through the kio declarations the codec uses."""

from __future__ import annotations

import struct

import pytest
from kio.static.primitive import i8, i16, i32, i64

from herd.coordinator.records import encode_versioned
from herd.coordinator.transactions.records import (
    EMPTY_STATUS,
    PartitionsSchemaV1,
    TransactionLogValueV1,
    TxnLogValue,
    _grouped,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    txn_record,
)


def encode_value_v1(value: TxnLogValue) -> bytes:
    """TransactionLogValue v1, which herd does not write (its transaction.version is 0; a Kafka broker with TV 1
    or 2 does), for the tests of the reader."""
    partitions = (
        None
        if value.status == EMPTY_STATUS
        else tuple(
            PartitionsSchemaV1(topic=topic, partition_ids=tuple(i32(p) for p in ids))
            for topic, ids in _grouped(value.partitions).items()
        )
    )
    return encode_versioned(
        1,
        TransactionLogValueV1(
            producer_id=i64(value.producer_id),
            previous_producer_id=i64(value.previous_producer_id),
            next_producer_id=i64(value.next_producer_id),
            producer_epoch=i16(value.producer_epoch),
            transaction_timeout_ms=i32(value.timeout_ms),
            transaction_status=i8(value.status),
            transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=i64(value.last_update_ms),
            transaction_start_timestamp_ms=i64(value.start_ms),
            client_transaction_version=i16(value.client_transaction_version),
        ),
    )


def string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_key_v0_bytes() -> None:
    assert encode_key("tx-é") == b"\x00\x00" + struct.pack(">h", 5) + "tx-é".encode()
    assert decode_key(encode_key("tx-é")) == "tx-é"
    with pytest.raises(ValueError):
        decode_key(b"\x00\x01" + string("x"))  # no key version 1
    with pytest.raises(ValueError):
        decode_key(b"\x00")


def test_value_v0_bytes_with_partitions_grouped_by_topic() -> None:
    value = TxnLogValue(
        producer_id=77,
        producer_epoch=3,
        timeout_ms=60_000,
        status=1,
        partitions=frozenset({("b", 2), ("a", 1), ("a", 0)}),
        last_update_ms=1000,
        start_ms=900,
    )
    expected = (
        struct.pack(">hqhib", 0, 77, 3, 60_000, 1)
        + struct.pack(">i", 2)
        + string("a")
        + struct.pack(">iii", 2, 0, 1)
        + string("b")
        + struct.pack(">ii", 1, 2)
        + struct.pack(">qq", 1000, 900)
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_an_empty_transaction_is_written_with_null_partitions() -> None:
    value = TxnLogValue(77, 0, 60_000, 0, frozenset(), 1000, -1)
    assert encode_value(value) == struct.pack(">hqhibiqq", 0, 77, 0, 60_000, 0, -1, 1000, -1)
    assert decode_value(encode_value(value)) == value
    with pytest.raises(ValueError):
        encode_value(TxnLogValue(77, 0, 60_000, 0, frozenset({("a", 0)}), 1000, -1))


def test_value_v1_is_read_with_its_tagged_fields() -> None:
    value = TxnLogValue(
        77,
        3,
        60_000,
        2,
        frozenset({("a", 1)}),
        1000,
        900,
        previous_producer_id=76,
        next_producer_id=78,
        client_transaction_version=2,
    )
    data = encode_value_v1(value)
    # flexible: compact array (n+1) of {compact string, compact int32 array, no tags}, then three tagged fields
    assert data == (
        struct.pack(">hqhib", 1, 77, 3, 60_000, 2)
        + b"\x02"
        + b"\x02a"
        + b"\x02"
        + struct.pack(">i", 1)
        + b"\x00"
        + struct.pack(">qq", 1000, 900)
        + b"\x03"
        + b"\x00\x08"
        + struct.pack(">q", 76)
        + b"\x01\x08"
        + struct.pack(">q", 78)
        + b"\x02\x02"
        + struct.pack(">h", 2)
    )
    assert decode_value(data) == value
    defaults = TxnLogValue(77, 3, 60_000, 0, frozenset(), 1000, -1)
    assert decode_value(encode_value_v1(defaults)) == defaults


def test_unknown_or_truncated_values_raise() -> None:
    good = encode_value(TxnLogValue(77, 3, 60_000, 1, frozenset({("a", 1)}), 1000, 900))
    for bad in (b"\x00\x02" + good[2:], good[:-1], good + b"\x00", b"\x00"):
        with pytest.raises(ValueError):
            decode_value(bad)


def test_records_are_applied_and_a_tombstone_has_no_value() -> None:
    record = txn_record("t", None)
    assert (record.key, record.value, record.applied) == (encode_key("t"), None, True)
