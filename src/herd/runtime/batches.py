"""Coordinator records <-> Kafka v2 record batches.

Each `Result` of a shard becomes one uncompressed batch (`encode_batch`): its records in order, offsets
0..n-1 relative to the batch (the log rewrites the base offset), every record stamped with the append
time, partition leader epoch 0, and no producer id, except for a TxnOffsetCommit's Result: that batch is
transactional (attributes bit 4) with the producer's id and epoch and base sequence 0, as Kafka's
CoordinatorRuntime builds it (apache/kafka coordinator-common/src/main/java/org/apache/kafka/coordinator/
common/runtime/CoordinatorRuntime.java, the MemoryRecordsBuilder of a write with a producer id).

A transaction's marker, written when the transaction coordinator completes a transaction that holds offsets
here (`encode_control_batch`), is Kafka's MemoryRecords.withEndTransactionMarker: a control batch (attributes
bits 4 and 5) of the producer's id and epoch, base sequence -1, one record whose key is ControlRecordType
{version 0, type: ABORT 0, COMMIT 1} and whose value is EndTransactionMarker {version 0, coordinator epoch}
(clients/src/main/java/org/apache/kafka/common/record/{MemoryRecords,EndTransactionMarker,ControlRecordType}
.java).

Loading walks the partition's batches (`read_batches`, Kafka's CoordinatorLoaderImpl): each yields its
`(key, value)` records, its producer id if it is transactional (else -1), and for a control batch the
transaction marker it holds (COMMIT True, ABORT False; decoded by the log's `records.control_marker`) instead of
records. `decode_batches` is the same without the producer and the markers (control batches come out
empty). Records without a key, which no coordinator writes, are skipped. A compressed batch (which only
another writer could have put there) is decompressed with the log's codecs.

The layout is Kafka's (clients/.../record/DefaultRecordBatch.java and DefaultRecord.java):

    batch  = int64 base offset | int32 length | int32 leader epoch | int8 magic (2) | uint32 crc32c |
             int16 attributes | int32 last offset delta | int64 base timestamp | int64 max timestamp |
             int64 producer id | int16 producer epoch | int32 base sequence | int32 count | records
    record = varint length | int8 attributes | varlong timestamp delta | varint offset delta |
             varint key length | key | varint value length (-1: null) | value | varint header count

Both directions are written here with `struct` and kio's native varint readers rather than kio's record
classes: kio builds a datetime per record, which made a 1,000,000-offset load take 34 s and a one-record
batch 100 us to encode. tests/unit/runtime/test_batches.py checks the bytes against kio's own writer and
reader on arbitrary records. A batch that does not parse raises ValueError.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import crc32c
from kio._kio_native import read_signed_varint, read_signed_varlong

from herd.coordinator import Record
from herd.log.api import LogError
from herd.log.batch import COMPRESSION_MASK, CONTROL_BIT, HEADER_SIZE, TRANSACTIONAL_BIT, parse_header
from herd.log.records import control_marker, records_section

_PREFIX = struct.Struct(">qiib")  # base offset, length, leader epoch, magic
_BODY = struct.Struct(">hiqqqhii")  # attributes .. record count
_CRC = struct.Struct(">I")
_CRC_START = 21  # the CRC covers from the attributes to the end of the batch
KeyValue = tuple[bytes, bytes | None]
_new_tuple = tuple.__new__  # builds a NamedTuple from a tuple without its keyword-parsing __new__


def _varint(n: int) -> bytes:
    """Kafka's zig-zag varint (also used for varlongs)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_SMALL = [_varint(n) for n in range(64)]
_NULL = _varint(-1)
_RECORD_HEAD = b"\x00\x00"  # attributes 0, timestamp delta 0 (every record carries the batch time)


def _record(index: int, key: bytes, value: bytes | None) -> bytes:
    parts = [_RECORD_HEAD, _SMALL[index] if index < 64 else _varint(index), _varint(len(key)), key]
    if value is None:
        parts.append(_NULL)
    else:
        parts += (_varint(len(value)), value)
    parts.append(b"\x00")  # no headers
    body = b"".join(parts)
    return _varint(len(body)) + body


def encode_batch(records: Sequence[Record], now_ms: int, producer_id: int = -1, producer_epoch: int = -1) -> bytes:
    """One v2 batch holding `records` (at least one), stamped `now_ms`; transactional when `producer_id` >= 0."""
    if not records:
        raise ValueError("a batch needs at least one record")
    body = b"".join(_record(i, r.key, r.value) for i, r in enumerate(records))
    if producer_id >= 0:
        head = _BODY.pack(
            TRANSACTIONAL_BIT, len(records) - 1, now_ms, now_ms, producer_id, producer_epoch, 0, len(records)
        )
    else:
        head = _BODY.pack(0, len(records) - 1, now_ms, now_ms, -1, -1, -1, len(records))
    after_crc = head + body
    crc = crc32c.crc32c(after_crc)
    return _PREFIX.pack(0, len(after_crc) + 9, 0, 2) + _CRC.pack(crc) + after_crc


class LoadedBatch(NamedTuple):
    """One batch read back from a coordinator partition."""

    next_offset: int
    records: list[KeyValue]
    producer_id: int
    """-1 unless the batch is transactional"""
    producer_epoch: int
    """-1 unless the batch is transactional"""
    marker: bool | None
    """a control batch's marker: True COMMIT, False ABORT; None for any other batch"""


def read_batches(data: bytes | memoryview) -> Iterator[LoadedBatch]:
    """Every whole batch in `data`, for loading (see the module docstring); raises ValueError on a corrupt batch
    or an unreadable control batch. A control batch whose record is not a transaction marker (Kafka's loader
    ignores any other control type) comes out as a batch without records. A partition of single-commit batches
    spends a good part of its load here."""
    if not isinstance(data, bytes):
        data = bytes(data)
    new_batch, view, position = _new_tuple, memoryview(data), 0
    while position < len(data):
        try:
            header = parse_header(data, position)
        except LogError as error:
            raise ValueError(str(error)) from error
        if crc32c.crc32c(view[position + _CRC_START : header.end]) != header.crc:
            raise ValueError(f"CRC32C mismatch in the batch at offset {header.base_offset}")
        start, position, attributes = position, header.end, header.attributes
        next_offset = header.base_offset + header.last_offset_delta + 1
        if attributes & TRANSACTIONAL_BIT:
            producer_id, producer_epoch = header.producer_id, header.producer_epoch
        else:
            producer_id = producer_epoch = -1
        if attributes & CONTROL_BIT:
            try:
                marker = control_marker(data, header)
            except LogError as error:
                raise ValueError(str(error)) from error
            yield new_batch(
                LoadedBatch, (next_offset, [], producer_id, producer_epoch, None if marker is None else marker[0])
            )
        elif attributes & COMPRESSION_MASK:
            section = bytes(records_section(data, header))
            records = _records(section, 0, header.record_count, len(section))
            yield new_batch(LoadedBatch, (next_offset, records, producer_id, producer_epoch, None))
        else:
            records = _records(data, start + HEADER_SIZE, header.record_count, position)
            yield new_batch(LoadedBatch, (next_offset, records, producer_id, producer_epoch, None))


def decode_batches(data: bytes | memoryview) -> Iterator[tuple[int, list[KeyValue]]]:
    """(next offset, [(key, value), ...]) for every whole batch in `data` (`read_batches` without the producer
    and the markers: control batches come out without records); raises ValueError on a corrupt batch."""
    return ((batch.next_offset, batch.records) for batch in read_batches(data))


def _records(data: bytes, pos: int, count: int, end: int) -> list[KeyValue]:
    """The keyed (key, value) pairs of one batch's records section, which runs from `pos` to `end`.

    One-byte varints (almost every length here) are decoded inline; longer ones by kio's native reader. This
    loop is a third of the time it takes to load a partition, hence its shape."""
    out: list[KeyValue] = []
    append, varint, varlong = out.append, read_signed_varint, read_signed_varlong
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            record_end = pos + 1 + ((b >> 1) ^ -(b & 1))
            p = pos + 2  # past the length and the attributes
        else:
            length, n = varint(data, pos)
            record_end = pos + n + length
            p = pos + n + 1
        p += 1 if data[p] < 0x80 else varlong(data, p)[1]  # timestamp delta
        p += 1 if data[p] < 0x80 else varint(data, p)[1]  # offset delta
        b = data[p]
        if b < 0x80:
            key_len, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            key_len, n = varint(data, p)
            p += n
        if key_len >= 0:
            key: bytes | None = data[p : p + key_len]
            p += key_len
        else:
            key = None
        b = data[p]
        if b < 0x80:
            value_len, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            value_len, n = varint(data, p)
            p += n
        if p + value_len > record_end:
            raise ValueError("a record overruns its batch")
        if key is not None:
            append((key, data[p : p + value_len] if value_len >= 0 else None))
        pos = record_end
    if pos != end:
        raise ValueError(f"{end - pos} bytes left after the records of a batch")
    return out
