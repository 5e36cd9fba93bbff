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
import threading
from collections.abc import Callable, Iterator

import cramjam
import crc32c
from kio._kio_native import read_signed_varint, read_signed_varlong
from kio.serial.errors import DecodeError

from herd.log.api import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)
from herd.log.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    check_crc,
    iter_headers,
    parse_header,
)

Buffer = bytes | bytearray | memoryview
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = len(XERIAL_MAGIC) + 8  # magic, int32 version, int32 compatible version
_INT32 = struct.Struct(">i")


def _snappy_blocks(data: Buffer) -> Iterator[memoryview]:
    """The raw snappy blocks of a section: its xerial blocks when the magic is there, else the whole of it.
    Raises CorruptRecordError when the xerial framing is broken."""
    view = memoryview(data)
    if bytes(view[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        yield view
        return
    pos = XERIAL_HEADER_SIZE
    while pos < len(view):
        if pos + _INT32.size > len(view):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += _INT32.size
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError(f"xerial snappy block of {length} bytes overruns the records")
        yield view[pos : pos + length]
        pos += length


def _snappy(data: Buffer) -> bytes:
    """Xerial-framed snappy when the magic is there, else one raw snappy block."""
    return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in _snappy_blocks(data))


_DECOMPRESSORS: dict[int, Callable[[Buffer], Buffer]] = {
    1: cramjam.gzip.decompress,
    2: _snappy,
    3: cramjam.lz4.decompress,
    4: cramjam.zstd.decompress,
}

# -- bounded decompression (produce) ---------------------------------------------------------------------------
#
# A batch of 1 MB can decompress to 1 GB (gzip) or far more (zstd), and cramjam's one-shot `decompress` would
# hold all of it: one produce request could take the broker's memory. Kafka's LogValidator streams the records
# (a buffer per record), so its memory stays small whatever the ratio; herd checks records on a whole section,
# so it decompresses into a scratch buffer of its own (`decompress_into`, which fails once the buffer is full),
# grown by doubling up to a limit, and refuses a batch whose records need more with MESSAGE_TOO_LARGE.

MAX_DECOMPRESSED_BYTES = DEFAULT_MAX_DECOMPRESSED_BYTES  # herd.message.max.decompressed.bytes
_INITIAL_SCRATCH = 1024 * 1024
_RETAINED_SCRATCH = 16 * 1024 * 1024  # a larger scratch buffer is dropped after use
_OUTPUT_FULL = ("failed to write whole buffer", "is smaller than required")  # cramjam 2.14's words for it
_INTO: dict[int, Callable[[Buffer, memoryview], int]] = {
    1: cramjam.gzip.decompress_into,
    3: cramjam.lz4.decompress_into,
    4: cramjam.zstd.decompress_into,
}


class _OutputFull(Exception):
    pass


def _snappy_into(data: Buffer, out: memoryview) -> int:
    """`_snappy` into `out`; the length of the output. Raises _OutputFull, CorruptRecordError or
    cramjam.DecompressionError."""
    written = 0
    for block in _snappy_blocks(data):
        if written == len(out):
            raise _OutputFull
        written += int(cramjam.snappy.decompress_raw_into(block, out[written:]))
    return written


class _Scratch(threading.local):
    buffer = bytearray()


_scratch = _Scratch()


def decompress_bounded(raw: Buffer, codec: int, base_offset: int, limit: int) -> tuple[bytearray, int]:
    """The records section `raw`, compressed with `codec`, decompressed into this thread's scratch buffer:
    (buffer, length of the records in it). The buffer is reused by the next call on this thread.

    Raises CorruptRecordError (an unknown codec, bytes that do not decompress) or RecordTooLargeError (the
    records would take more than `limit` bytes)."""
    into = _INTO.get(codec) if codec != 2 else _snappy_into
    if into is None:
        raise CorruptRecordError(f"batch at offset {base_offset} uses unknown compression codec {codec}")
    buffer = _scratch.buffer
    if not buffer:
        buffer = bytearray(min(limit, max(_INITIAL_SCRATCH, 4 * len(raw))))
    while True:
        room = min(len(buffer), limit)  # a buffer kept from a call with a higher limit is used only this far
        try:
            length = into(raw, memoryview(buffer)[:room])
        except (cramjam.DecompressionError, _OutputFull) as error:
            if not isinstance(error, _OutputFull) and not any(words in str(error) for words in _OUTPUT_FULL):
                raise CorruptRecordError(f"batch at offset {base_offset} does not decompress: {error}") from error
            if room >= limit:
                _scratch.buffer = bytearray()
                raise RecordTooLargeError(
                    f"batch at offset {base_offset} decompresses to more than {limit} bytes "
                    "(herd.message.max.decompressed.bytes)"
                ) from None
            buffer = bytearray(min(limit, 2 * len(buffer)))
            continue
        _scratch.buffer = buffer if len(buffer) <= _RETAINED_SCRATCH else bytearray()
        return buffer, length


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


RecordEntry = tuple[int, int, int, int, bytes | None, bool]  # start, end, offset, timestamp, key, has value


def iter_records(section: Buffer, header: BatchHeader) -> Iterator[RecordEntry]:
    """(start, end, offset, timestamp, key, has value) of each record of a batch's (decompressed) records
    `section` (`records_section`): what compaction needs to decide which records stay and to copy them as they
    are. The records are not checked: a batch is compacted only after it was stored."""
    append_time = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT else None
    pos = 0
    for _ in range(header.record_count):
        length, n = read_signed_varint(section, pos)
        start, body = pos, pos + n
        timestamp_delta, n = read_signed_varlong(section, body + 1)
        p = body + 1 + n
        offset_delta, n = read_signed_varint(section, p)
        p += n
        key_len, n = read_signed_varint(section, p)
        p += n
        key = bytes(section[p : p + key_len]) if key_len >= 0 else None
        p += max(key_len, 0)
        value_len, _ = read_signed_varint(section, p)
        pos = body + length
        stamp = append_time if append_time is not None else header.base_timestamp + timestamp_delta
        yield start, pos, header.base_offset + offset_delta, stamp, key, value_len >= 0


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


def search_timestamp(batch: Buffer, header: BatchHeader, timestamp: int,
                     min_offset: int = 0) -> tuple[int, int] | None:  # fmt: skip
    """`first_record_at_or_after`, for ListOffsets by time on a stored batch. A batch whose records cannot be
    decoded (it passed its CRC, but records are not checked on every path to the log: an unknown codec, a
    malformed record) answers for itself, as before records were read: its first offset from `min_offset` and
    its max timestamp."""
    try:
        return first_record_at_or_after(batch, header, timestamp, min_offset)
    except CorruptRecordError:
        return max(header.base_offset, min_offset), header.max_timestamp


def find_offset_of_timestamp(batch: Buffer, header: BatchHeader, timestamp: int) -> int | None:
    """`offset_of_timestamp`, for ListOffsets MAX_TIMESTAMP on a stored batch: None also when its records
    cannot be decoded (the caller answers with the batch's base offset)."""
    try:
        return offset_of_timestamp(batch, header, timestamp)
    except CorruptRecordError:
        return None


# -- validating the records of a produced batch ----------------------------------------------------------------------


def check_records(buf: Buffer, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES) -> None:
    """Check the records of every batch in `buf` as Kafka's LogValidator does before it appends them
    (apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/log/LogValidator.java and
    clients/.../record/DefaultRecordBatch.java): each batch decompresses, holds exactly `recordCount` records, and
    each record's fields fill exactly its declared length; in compressed batches the records' offset deltas must
    also run 0, 1, 2, ... (Kafka rebuilds such a batch; herd stores batches as sent, so it refuses one).
    Framing and CRC of the batches are the log's (`batch.validate_batches`); when records fail here the batch's
    CRC is checked first, so a batch damaged in transit is still reported as such.

    Compressed sections are decompressed with a bound (`decompress_bounded`): a batch whose records would take
    more than `max_decompressed_bytes` is refused.

    Raises CorruptRecordError (CRC mismatch, a section that does not decompress: CORRUPT_MESSAGE),
    InvalidRecordError (records that do not match their framing or count: INVALID_RECORD) or RecordTooLargeError
    (MESSAGE_TOO_LARGE), with the batch's position and the first bad record in the message."""
    data = buf if isinstance(buf, (bytes, bytearray)) else bytes(buf)  # strided slices of a memoryview are slow
    for header in iter_headers(data):
        if header.record_count < 1:
            continue  # the log refuses it (`check_counts`) with its own message
        try:
            codec = header.attributes & COMPRESSION_MASK
            if codec:
                raw = memoryview(data)[header.position + HEADER_SIZE : header.end]
                scratch, length = decompress_bounded(raw, codec, header.base_offset, max_decompressed_bytes)
                section = bytes(memoryview(scratch)[:length])  # kio's varint readers take read-only buffers
                check_framing(section, 0, length, header.record_count, sequential=True)
            else:
                check_framing(data, header.position + HEADER_SIZE, header.end, header.record_count)
        except (CorruptRecordError, InvalidRecordError, RecordTooLargeError) as error:
            check_crc(data, header)
            raise type(error)(f"batch at byte {header.position}: {error}") from error


def _java_long(value: int) -> int:
    """`value` wrapped to a signed 64-bit integer, as Java's long arithmetic wraps it."""
    return (value + 2**63) % 2**64 - 2**63


def check_timestamps(buf: Buffer, now_ms: int, before_max_ms: int, after_max_ms: int) -> None:
    """LogValidator.validateTimestamp for a CreateTime topic: a record whose timestamp is more than `after_max_ms`
    after `now_ms` or `before_max_ms` before it is refused (InvalidTimestampError, INVALID_TIMESTAMP, with Kafka's
    record errors: the record's index in its batch and its message); a record without a timestamp (-1) is not.
    A batch is only read record by record when its header cannot vouch for all of them: its max timestamp within
    `after_max_ms`, and `before_max_ms` too long for any timestamp to pass it (Kafka's default, Long.MAX_VALUE)."""
    lowest, highest = now_ms - before_max_ms, now_ms + after_max_ms
    any_age = lowest <= -1  # no timestamp (>= -1) can be more than before_max_ms before now
    errors: list[tuple[int, str]] = []
    data = buf if isinstance(buf, (bytes, bytearray)) else bytes(buf)
    for header in iter_headers(data):
        if any_age and header.max_timestamp <= highest:
            continue
        for index, (offset, timestamp) in enumerate(iter_record_timestamps(data, header)):
            if timestamp != -1 and (timestamp > highest or timestamp < lowest):
                errors.append(
                    (
                        index,
                        f"Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp "
                        f"should be within [{_java_long(lowest)}, {_java_long(highest)}]",
                    )
                )
    if errors:
        raise InvalidTimestampError(errors)


def check_framing(data: bytes | bytearray, start: int, end: int, count: int, *, sequential: bool = False) -> None:
    """Raises InvalidRecordError unless `data[start:end]` is exactly `count` well-framed records (with
    `sequential`, with offset deltas 0, 1, ..., count - 1).

    Records are length-prefixed, so finding each one is a walk, about 1.5 us a record in Python. A producer's
    batch usually holds records of one shape (same key and value sizes), and those are checked without a
    Python step per record: the first record of a run is parsed (`_Layout`), and every following record whose
    framing bytes are the same is accepted at once: the same bytes for its length and its key, value and header
    lengths, the continuation bits of its timestamp and offset deltas in the same places (and with `sequential`
    the expected offset delta). Each of these bytes is compared for all records of the run at once, on a
    strided slice (`data[i::size]`, a C loop), and the run ends at the first record that differs. Records of
    varying sizes are walked one by one (`_walk`)."""
    pos, index = start, 0
    while index < count:
        layout = _Layout.parse(data, pos, end, index, sequential)
        run = layout.run_length(data, pos, index, min(count - index, (end - pos) // layout.size))
        pos += run * layout.size
        index += run
        if run < _SHORT_RUN and index < count:  # records of varying sizes: walk a while
            walked = min(_WALK_AFTER_SHORT_RUN, count - index)
            pos = _walk(data, pos, end, index, walked, sequential)
            index += walked
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes after the {count} records the batch declares")


_SHORT_RUN = 8  # after a run shorter than this (records of varying sizes) ...
_WALK_AFTER_SHORT_RUN = 64  # ... this many records are walked one by one before a run is tried again


def _walk(data: bytes | bytearray, pos: int, end: int, index: int, count: int, sequential: bool) -> int:
    """Check `count` records from `pos` one by one (the `index`-th first); the position after them."""
    varint, varlong = read_signed_varint, read_signed_varlong
    try:
        for i in range(index, index + count):
            length, size = varint(data, pos)
            record_end = pos + size + length
            _, size2 = varlong(data, pos + size + 1)  # after the attributes byte
            p = pos + size + 1 + size2
            delta, size = varint(data, p)
            if sequential and delta != i:
                raise InvalidRecordError(f"record {i} has offset delta {delta}")
            p += size
            for _ in range(2):  # key, value
                field, size = varint(data, p)
                p += size + max(field, 0)
            headers, size = varint(data, p)
            p += size
            bad_header = False
            for _ in range(max(headers, 0)):
                field, size = varint(data, p)  # the header's key: never null
                bad_header = bad_header or field < 0
                p += size + max(field, 0)
                field, size = varint(data, p)
                p += size + max(field, 0)
            if p != record_end or length < 0 or record_end > end or headers < 0 or bad_header:
                _Layout.parse(data, pos, end, i, sequential)  # raises, with what is wrong
                raise InvalidRecordError(f"record {i} at byte {pos} is malformed")  # pragma: no cover
            pos = record_end
    except (DecodeError, ValueError) as error:
        raise InvalidRecordError(f"record {i} at byte {pos} is malformed: {error}") from error
    return pos


_HIGH = bytes(0x80 if b & 0x80 else 0 for b in range(256))  # translate table: keep only the continuation bit


class _Layout:
    """Where the framing bytes of one record are, and what they must be in the records of the same shape."""

    __slots__ = ("size", "exact", "continuation", "offset_delta")

    def __init__(self, size: int) -> None:
        self.size = size
        self.exact: list[tuple[int, int]] = []  # (position in the record, byte)
        self.continuation: list[tuple[int, int]] = []  # (position, 0x80 or 0) of varint bytes whose value varies
        self.offset_delta: tuple[int, int] | None = None  # (position, varint size) with `sequential`

    @classmethod
    def parse(cls, data: bytes | bytearray, pos: int, end: int, index: int, sequential: bool) -> _Layout:
        """The layout of the record at `pos` (the `index`-th); raises InvalidRecordError if it is malformed."""
        try:
            return cls._parse(data, pos, end, index, sequential)
        except (DecodeError, ValueError) as error:
            raise InvalidRecordError(f"record {index} at byte {pos} is malformed: {error}") from error

    @classmethod
    def _parse(cls, data: bytes | bytearray, pos: int, end: int, index: int, sequential: bool) -> _Layout:
        length, size = read_signed_varint(data, pos)
        record_end = pos + size + length
        if length < 0 or record_end > end:
            raise InvalidRecordError(f"record {index} at byte {pos} declares {length} bytes, "
                                     f"{end - pos - size} are left")  # fmt: skip
        layout = cls(size + length)
        layout.exact.extend((i, data[pos + i]) for i in range(size))
        p = pos + size + 1  # the attributes byte, unused by Kafka
        _, size = read_signed_varlong(data, p)
        layout._varies(pos, p, size)
        p += size
        delta, size = read_signed_varint(data, p)
        if sequential and delta != index:
            raise InvalidRecordError(f"record {index} has offset delta {delta}")
        if sequential:
            layout.offset_delta = (p - pos, size)
        else:
            layout._varies(pos, p, size)
        p += size
        for _ in range(2):  # key, value
            p = layout._sized(data, pos, p, record_end, index)
        headers, size = read_signed_varint(data, p)
        if headers < 0:
            raise InvalidRecordError(f"record {index} has {headers} headers")
        layout.exact.extend((i - pos, data[i]) for i in range(p, p + size))
        p += size
        for _ in range(headers):
            p = layout._sized(data, pos, p, record_end, index, nullable=False)  # the header's key
            p = layout._sized(data, pos, p, record_end, index)
        if p != record_end:
            raise InvalidRecordError(f"record {index} at byte {pos} declares {length} bytes, "
                                     f"its fields take {p - pos - (layout.size - length)}")  # fmt: skip
        return layout

    def _varies(self, pos: int, p: int, size: int) -> None:
        self.continuation.extend((i - pos, 0x80 if i < p + size - 1 else 0) for i in range(p, p + size))

    def _sized(self, data: bytes | bytearray, pos: int, p: int, end: int, index: int, nullable: bool = True) -> int:
        """Note the length varint of a key, value or header field at `p`; the position after the field. As in
        Kafka's DefaultRecord, a negative length is a null, except for a header's key."""
        length, size = read_signed_varint(data, p)
        if length < 0 and not nullable:
            raise InvalidRecordError(f"record {index} has a header key of {length} bytes")
        if p + size + max(length, 0) > end:
            raise InvalidRecordError(f"record {index}: a field of {length} bytes overruns the record")
        self.exact.extend((i - pos, data[i]) for i in range(p, p + size))
        return p + size + max(length, 0)

    def run_length(self, data: bytes | bytearray, pos: int, index: int, most: int) -> int:
        """How many of the `most` records from `pos` (the first being this layout's) have this layout. Windows
        of growing size are compared, so that a short run costs little and a long one about its own length."""
        run, window = 1, _SHORT_RUN
        while run < most:
            n = min(window, most - run)
            same = self._leading_matches(data, pos + run * self.size, index + run, n)
            run += same
            if same < n:
                break
            window *= 8
        return run

    def _leading_matches(self, data: bytes | bytearray, pos: int, index: int, n: int) -> int:
        """How many of the `n` records from `pos` (the `index`-th first) have this layout, before one differs."""
        size, run = self.size, n
        stop = pos + n * size
        for offset, byte in self.exact:
            run = _leading(data[pos + offset : stop : size], byte, run)
        for offset, high in self.continuation:
            run = _leading(data[pos + offset : stop : size].translate(_HIGH), high, run)
        if self.offset_delta is not None and run > 0:
            offset, width = self.offset_delta
            for j in range(width):
                column = data[pos + offset + j : pos + run * size : size]
                expected = _zigzag_column(index, run, width, j)
                if column != expected:  # the first record that differs ends the run
                    run = next(i for i, (a, b) in enumerate(zip(column, expected)) if a != b)
        return run


def _leading(column: bytes | bytearray, byte: int, most: int) -> int:
    """How many leading bytes of `column` equal `byte`, at most `most`."""
    single = bytes((byte,))
    if column == single * len(column):  # the common case, a memcmp
        return min(most, len(column))
    return min(most, len(column) - len(column.lstrip(single)))


def _zigzag_column(first: int, count: int, size: int, j: int) -> bytes:
    """Byte `j` of the `size`-byte zigzag varints of first, first + 1, ..., first + count - 1 (built from
    repeated blocks, without a Python step per value)."""
    more = 0 if j == size - 1 else 0x80
    if j <= 1:  # periodic: byte 0 over 64 values, byte 1 over 8192
        pattern = _GROUPS[j, more]
        start = first % len(pattern)
        return (pattern * ((start + count) // len(pattern) + 1))[start : start + count]
    step = 1 << (7 * j - 1)  # the group is constant over blocks of `step` values
    out = bytearray()
    value = first
    while value < first + count:
        block = min(first + count - value, step - value % step)
        out += bytes(((((2 * value) >> (7 * j)) & 0x7F) | more,)) * block
        value += block
    return bytes(out)


_GROUPS = {(j, more): bytes((((2 * v) >> (7 * j)) & 0x7F) | more for v in range(64 << (7 * j)))
           for j in (0, 1) for more in (0, 0x80)}  # fmt: skip


# -- control batches: transaction markers ----------------------------------------------------------------------------
#
# A transaction marker is a control batch (attributes: transactional | control) of the producer, with base sequence
# -1 and one record whose key is the ControlRecordType (int16 version 0, int16 type: ABORT 0, COMMIT 1) and whose
# value is the EndTransactionMarker (int16 version 0, int32 coordinator epoch): apache/kafka
# clients/src/main/java/org/apache/kafka/common/record/ControlRecordType.java and EndTransactionMarker.java, written
# as MemoryRecords.withEndTransactionMarker writes it (one record, offset and timestamp deltas 0, no headers).

CONTROL_ABORT, CONTROL_COMMIT = 0, 1
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch


def _varint(value: int) -> bytes:
    """`value` as a zigzag varint (Kafka's ByteUtils.writeVarint / writeVarlong)."""
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def control_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp: int,
                  partition_leader_epoch: int = -1) -> bytes:  # fmt: skip
    """The bytes of one transaction marker batch (base offset 0: the log gives it its offset), CRC included."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    body = (
        b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key + _varint(len(value)) + value + _varint(0)
    )  # attributes, timestamp delta, offset delta, key, value, no headers
    record = _varint(len(body)) + body
    length = HEADER_SIZE - LOG_OVERHEAD + len(record)
    header = bytearray(
        HEADER.pack(
            0,
            length,
            partition_leader_epoch,
            2,
            0,
            TRANSACTIONAL_BIT | CONTROL_BIT,
            0,
            timestamp,
            timestamp,
            producer_id,
            producer_epoch,
            -1,
            1,
        )
    )
    batch = header + record
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def control_marker(batch: Buffer, header: BatchHeader | None = None) -> tuple[bool, int] | None:
    """(commit, coordinator epoch) of a transaction marker batch; None for any other batch (not a control batch,
    another control record type such as KRaft's, or a control batch emptied by compaction). `batch` holds the
    batch at `header.position` (parsed here when `header` is None). Raises CorruptRecordError when the control
    record cannot be read, InvalidRecordError when its marker value is too short (Kafka's
    EndTransactionMarker.deserializeValue)."""
    if header is None:
        header = parse_header(batch)
    if not header.attributes & CONTROL_BIT or header.record_count < 1:
        return None
    data = records_section(batch, header)
    try:
        length, size = read_signed_varint(data, 0)
        pos = size + 1  # the attributes byte
        _, size = read_signed_varlong(data, pos)
        pos += size
        _, size = read_signed_varint(data, pos)
        pos += size
        key_length, size = read_signed_varint(data, pos)
        pos += size
        key = bytes(data[pos : pos + max(key_length, 0)])
        pos += max(key_length, 0)
        value_length, size = read_signed_varint(data, pos)
        pos += size
        value = bytes(data[pos : pos + max(value_length, 0)])
    except (DecodeError, ValueError) as error:
        raise CorruptRecordError(f"control batch at offset {header.base_offset}: {error}") from error
    if len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control batch at offset {header.base_offset} has a key of {len(key)} bytes")
    _, kind = _CONTROL_KEY.unpack_from(key)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    if len(value) < _MARKER_VALUE.size:
        raise InvalidRecordError(
            f"end transaction marker at offset {header.base_offset} has a value of "
            f"{len(value)} bytes, at least {_MARKER_VALUE.size} needed"
        )
    version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"end transaction marker at offset {header.base_offset} has version {version}")
    return kind == CONTROL_COMMIT, coordinator_epoch
