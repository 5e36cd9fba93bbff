"""Reading the records of a v2 batch, just far enough to know each record's offset and timestamp.

The log otherwise never looks inside a batch; ListOffsets by timestamp and MAX_TIMESTAMP do, because Kafka
answers them per record (`FileRecords.searchForTimestamp`, `RecordBatch.offsetOfMaxTimestamp`), not per batch.

The records section is everything after the 61-byte header, compressed as a whole when attributes & 0x07 is
1 gzip, 2 snappy, 3 lz4 (LZ4 frame format) or 4 zstd. Snappy comes in two shapes: Java's and kafka-python's
xerial framing (b"\\x82SNAPPY\\x00", int32 version, int32 compatible version, then [int32 length][raw block]...)
and raw snappy from librdkafka and others; like Java's SnappyInputStream, a missing xerial magic means raw.

Each record starts: varint length | int8 attributes | varlong timestampDelta | varint offsetDelta | ...; the rest
(key, value, headers) is skipped using the length. A LogAppendTime batch (attributes bit 0x08) stamps every
record with the batch's max timestamp, whatever the record says. Control batches are read like any other:
Kafka's timestamp lookups do not skip them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

import cramjam
from kio._kio_native import read_signed_varint, read_signed_varlong
from kio.serial.errors import DecodeError

from herd.log.api import CorruptRecordError
from herd.log.batch import COMPRESSION_MASK, HEADER_SIZE, TIMESTAMP_TYPE_BIT, BatchHeader

Buffer = bytes | bytearray | memoryview
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = len(XERIAL_MAGIC) + 8  # magic, int32 version, int32 compatible version
_INT32 = struct.Struct(">i")


def _snappy(data: Buffer) -> bytes:
    """Xerial-framed snappy when the magic is there, else one raw snappy block."""
    view = memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    chunks, pos = [], XERIAL_HEADER_SIZE
    while pos < len(view):
        if pos + _INT32.size > len(view):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += _INT32.size
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes overruns the records")
        chunks.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(chunks)


_DECOMPRESSORS: dict[int, Callable[[Buffer], Buffer]] = {
    1: cramjam.gzip.decompress,
    2: _snappy,
    3: cramjam.lz4.decompress,
    4: cramjam.zstd.decompress,
}


def records_section(batch: Buffer, header: BatchHeader) -> Buffer:
    """The batch's records, decompressed; `batch` is the buffer `header` was parsed from."""
    raw = memoryview(batch)[header.position + HEADER_SIZE : header.end]
    codec = header.attributes & COMPRESSION_MASK
    if codec == 0:
        return raw
    decompress = _DECOMPRESSORS.get(codec)
    if decompress is None:
        raise CorruptRecordError(f"batch at offset {header.base_offset} uses unknown compression codec {codec}")
    try:
        return decompress(raw)
    except cramjam.DecompressionError as error:
        raise CorruptRecordError(f"batch at offset {header.base_offset} does not decompress: {error}") from error


def _read_record(data: Buffer, pos: int) -> tuple[int, int, int]:
    """(timestampDelta, offsetDelta, position of the next record) of the record at `pos`."""
    length, size = read_signed_varint(data, pos)
    body = pos + size
    end = body + length
    timestamp_delta, size = read_signed_varlong(data, body + 1)  # after the int8 attributes
    offset_delta, size2 = read_signed_varint(data, body + 1 + size)
    if body + 1 + size + size2 > end or end > len(data):
        raise CorruptRecordError(f"record of {length} bytes at byte {pos} of the records is cut short")
    return timestamp_delta, offset_delta, end


def iter_record_timestamps(batch: Buffer, header: BatchHeader) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of one v2 batch, in the batch's (offset) order.

    `batch` is the buffer `header` was parsed from (the batch sits at `header.position`). Raises
    CorruptRecordError when the records cannot be decompressed or parsed."""
    data = records_section(batch, header)
    log_append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT else None
    pos = 0
    for _ in range(header.record_count):
        try:
            timestamp_delta, offset_delta, pos = _read_record(data, pos)
        except DecodeError as error:
            raise CorruptRecordError(f"records of the batch at offset {header.base_offset}: {error}") from error
        timestamp = header.base_timestamp + timestamp_delta if log_append_time is None else log_append_time
        yield header.base_offset + offset_delta, timestamp


def first_record_at_or_after(batch: Buffer, header: BatchHeader, timestamp: int,
                             min_offset: int = 0) -> tuple[int, int] | None:  # fmt: skip
    """(offset, timestamp) of the first record (in offset order, from `min_offset`) stamped >= `timestamp`."""
    for offset, stamp in iter_record_timestamps(batch, header):
        if stamp >= timestamp and offset >= min_offset:
            return offset, stamp
    return None


def offset_of_timestamp(batch: Buffer, header: BatchHeader, timestamp: int) -> int | None:
    """Offset of the first record stamped exactly `timestamp` (Kafka's `offsetOfMaxTimestamp` with the max)."""
    return next((offset for offset, stamp in iter_record_timestamps(batch, header) if stamp == timestamp), None)
