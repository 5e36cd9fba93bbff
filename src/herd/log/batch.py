"""Kafka record batch v2 headers: parse, validate, give offsets. Records themselves are never decoded here.

A batch starts with a fixed 61-byte header (big-endian):

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
    producerEpoch int16 | baseSequence int32 | recordCount int32

`batchLength` counts the bytes after itself, so a batch occupies 12 + batchLength bytes. The CRC32C covers
`attributes` to the end of the batch: it does not cover the base offset (which the broker rewrites in place, so
the producer's CRC stays valid) nor the partition leader epoch. Magic sits at byte 16 in every message format
(v0/v1 message sets too), so old formats are recognised before anything else is read.

The hot path costs O(batches): one `struct.unpack_from` and one C CRC32C per batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from herd.log.api import CorruptRecordError, InvalidRecordError, RecordTooLargeError, UnsupportedMagicError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch
MAX_TIMESTAMP_OFFSET = 35
TIMESTAMP_TYPE_BIT = 0x08  # attributes bit 3: 0 CreateTime, 1 LogAppendTime
COMPRESSION_MASK = 0x07
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
INT32_MAX = 2**31 - 1  # the largest int32: offset deltas within a batch or segment, sequence numbers
_PREFIX = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class BatchHeader:
    position: int  # where the batch starts in the buffer it was parsed from
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """The sequence number of the batch's last record (an idempotent producer's sequences wrap from
        INT32_MAX to 0, as Kafka's DefaultRecordBatch.incrementSequence)."""
        return (self.base_sequence + self.record_count - 1) % (INT32_MAX + 1)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`, checking magic and that the whole batch is in `buf`.

    Raises UnsupportedMagicError (magic != 2) or CorruptRecordError (truncated or impossible framing)."""
    if len(buf) - pos < MAGIC_OFFSET + 1:
        raise CorruptRecordError(f"truncated batch at byte {pos}: {len(buf) - pos} bytes left")
    magic = buf[pos + MAGIC_OFFSET]
    if magic != 2:
        raise UnsupportedMagicError(f"batch at byte {pos} has magic {magic}; only record batch v2 is supported")
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at byte {pos}")
    header = BatchHeader(pos, *HEADER.unpack_from(buf, pos))
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch at byte {pos} has impossible length {header.batch_length}")
    if header.end > len(buf):
        raise CorruptRecordError(f"batch at byte {pos} needs {header.size} bytes, {len(buf) - pos} present")
    return header


def check_crc(buf: bytes | bytearray | memoryview, header: BatchHeader) -> None:
    """Raises CorruptRecordError unless the batch's CRC32C matches its bytes."""
    view = memoryview(buf)[header.position + ATTRIBUTES_OFFSET : header.end]
    if crc32c.crc32c(view) != header.crc:
        raise CorruptRecordError(f"CRC32C mismatch in batch at byte {header.position}")


def check_counts(header: BatchHeader) -> None:
    """Raises InvalidRecordError for an empty batch or one whose offset range disagrees with its count."""
    if header.record_count < 1:
        raise InvalidRecordError(f"batch at byte {header.position} has {header.record_count} records")
    if header.last_offset_delta + 1 != header.record_count:
        raise InvalidRecordError(
            f"batch at byte {header.position}: lastOffsetDelta {header.last_offset_delta} does not match "
            f"record count {header.record_count}"
        )


def iter_headers(buf: bytes | bytearray | memoryview, start: int = 0) -> Iterator[BatchHeader]:
    """Headers of the batches in `buf` from `start`, checking framing and magic only (no CRC)."""
    pos = start
    while pos < len(buf):
        header = parse_header(buf, pos)
        yield header
        pos = header.end


def validate_batches(buf: bytes | bytearray | memoryview, max_batch_bytes: int | None = None) -> list[BatchHeader]:
    """Every batch in `buf`, fully checked (framing, magic, CRC32C, counts, size); raises the first problem.

    Raises CorruptRecordError, UnsupportedMagicError, InvalidRecordError or RecordTooLargeError."""
    if not buf:
        raise InvalidRecordError("no record batches")
    headers = []
    for header in iter_headers(buf):
        if max_batch_bytes is not None and header.size > max_batch_bytes:
            raise RecordTooLargeError(f"batch of {header.size} bytes exceeds max.message.bytes {max_batch_bytes}")
        check_crc(buf, header)
        check_counts(header)
        headers.append(header)
    return headers


def valid_prefix(buf: bytes | bytearray | memoryview, first_offset: int | None = None) -> list[BatchHeader]:
    """The leading batches of `buf` that are whole, v2, CRC-correct and (if `first_offset` is given) numbered
    upwards from it. Recovery keeps exactly these and truncates the rest.

    A compacted segment (compaction.py) has gaps: batches whose records were all removed are gone, a batch
    keeps its original offset range with fewer records, and an empty batch covers the offsets up to the next
    segment. So a batch may start above the offset after the previous one and hold fewer records than its
    offset range (even none), but never overlap the previous one or hold more records than its range."""
    headers: list[BatchHeader] = []
    expected = first_offset
    pos = 0
    while pos < len(buf):
        try:
            header = parse_header(buf, pos)
            check_crc(buf, header)
        except (CorruptRecordError, UnsupportedMagicError):
            break
        if not 0 <= header.record_count <= header.last_offset_delta + 1:
            break
        if expected is not None and header.base_offset < expected:
            break
        headers.append(header)
        expected = header.next_offset
        pos = header.end
    return headers


def set_base_offset(buf: bytearray, header: BatchHeader, base_offset: int) -> None:
    """Rewrite the batch's base offset in place (outside the CRC, so no recompute)."""
    _INT64.pack_into(buf, header.position, base_offset)


def set_log_append_time(buf: bytearray, header: BatchHeader, now_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp `now_ms` and recompute its CRC (both are covered)."""
    attributes = header.attributes | TIMESTAMP_TYPE_BIT
    _INT16.pack_into(buf, header.position + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, header.position + MAX_TIMESTAMP_OFFSET, now_ms)
    crc = crc32c.crc32c(memoryview(buf)[header.position + ATTRIBUTES_OFFSET : header.end])
    _UINT32.pack_into(buf, header.position + CRC_OFFSET, crc)


def peek_prefix(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(base offset, total batch size) of the batch at `pos`; needs only 12 bytes."""
    base_offset, length = _PREFIX.unpack_from(buf, pos)
    return base_offset, LOG_OVERHEAD + length
