"""Kafka record batches (magic v2) to Arrow columns, with at most one Python step per record.

Why: a Spark task's CPU goes into turning records into columns. Through librdkafka every record becomes
a Python Message object and then Python values (about 2 µs a record); here the fetched bytes are decoded
column-wise by Arrow kernels, so Python touches each record once, to find where it starts.

How, for the batches of one Fetch answer:
1. Batch headers are parsed (herd.log.batch); control batches are dropped; each batch's records section
   is read where it is when no batch is compressed; otherwise the sections, decompressed (herd.log.records:
   gzip, snappy, lz4, zstd), are joined into one buffer.
2. Where each record starts: records are length-prefixed, so in general a Python loop walks the records
   of a batch with kio's native varint reader (record i's body starts after its length varint, record
   i+1 starts `length` bytes later), the only per-record Python. A batch of fixed-size records (same key
   and value sizes, timestamp deltas of one size) skips the walk: the starts are guessed from the first
   record's size and the guess is checked for all records at once (`_record_starts`).
3. Arrow kernels do the rest for all records at once: each varint field (timestamp delta, offset delta,
   key length, value length, header count) is decoded at a vector of positions (a byte gather, then
   masked shifts for as many continuation bytes as the longest varint has, then zigzag); the position of
   the next field is the previous position plus the varint's size (and the key's length).
4. Keys and values are cut out of the buffer without a Python loop: an Arrow binary array is laid over
   the whole buffer with offsets [0, start0, end0, start1, end1, ..., len] (the gaps between fields are
   elements too) and `take` keeps the odd elements. Length -1 means null.
5. Offsets are base offset + offset delta and timestamps base timestamp + delta (or the batch's max
   timestamp for LogAppendTime batches), with the per-batch bases repeated over each batch's records.

Headers are rare and ragged: only records with a header count above zero are decoded, in Python.
"""

from __future__ import annotations

import array
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from kio._kio_native import read_signed_varint

from herd.log.batch import COMPRESSION_MASK, HEADER_SIZE, BatchHeader, parse_header
from herd.log.records import records_section

CONTROL_BIT = 0x20
LOG_APPEND_TIME_BIT = 0x08
_I64 = pa.int64()
_NULL_BINARY = pa.scalar(None, pa.binary())


def _i64(value: int) -> pa.Scalar:
    """A typed scalar for kernel arguments: a bare Python int makes Arrow infer its type, which tries
    (and, without python-dateutil installed, fails) an import on every call, about 60 us each."""
    return pa.scalar(value, _I64)


_ZERO, _ONE, _TWO, _LOW7, _HIGH = _i64(0), _i64(1), _i64(2), _i64(0x7F), _i64(0x80)
_SHIFTS = [_i64(s) for s in range(7, 70, 7)]  # of a varlong's continuation bytes
_RUNS = pa.run_end_encoded(_I64, _I64)


@dataclass(frozen=True, slots=True)
class Columns:
    """Decoded records, in offset order: the Arrow columns the source needs."""

    keys: pa.Array
    values: pa.Array
    offsets: pa.Array
    timestamps_ms: pa.Array
    timestamp_types: pa.Array
    headers: list[list[tuple[str, bytes | None]] | None] | None

    def __len__(self) -> int:
        return len(self.offsets)


def complete_batches(data: bytes | memoryview) -> tuple[list[BatchHeader], int]:
    """The whole batches at the start of a Fetch answer's records (a broker may cut the last one short),
    and the offset after the last of them (-1 when there is none)."""
    headers: list[BatchHeader] = []
    pos = 0
    while len(data) - pos >= HEADER_SIZE:
        try:
            header = parse_header(data, pos)
        except Exception:  # a truncated trailing batch: fetch it again from its start next time
            break
        headers.append(header)
        pos = header.end
    return headers, (headers[-1].next_offset if headers else -1)


def decode(data: bytes | memoryview, headers: Sequence[BatchHeader], with_headers: bool) -> Columns:
    """All records of the data batches among `headers` (parsed from `data`)."""
    batches = [h for h in headers if not h.attributes & CONTROL_BIT and h.record_count > 0]
    buf, bases, ends = _records_buffer(data, batches)
    u8 = pa.Array.from_buffers(pa.uint8(), len(buf), [None, pa.py_buffer(buf)])
    pos = _record_starts(buf, u8, bases, ends, batches)
    n = len(pos)
    ts_delta, size = _varints(u8, pc.add(pos, _ONE))  # after int8 attributes
    pos = pc.add(pc.add(pos, _ONE), size)
    offset_delta, size = _offset_deltas(u8, pos, batches, n)
    pos = pc.add(pos, size)
    keys, pos = _bytes_field(buf, u8, pos, n)
    values, pos = _bytes_field(buf, u8, pos, n)
    offsets = pc.add(_per_record(batches, "base_offset"), offset_delta)
    stamps, types = _timestamps(batches, ts_delta)
    header_lists = _headers(buf, u8, pos) if with_headers else None
    return Columns(keys, values, offsets, stamps, types, header_lists)


def _records_buffer(
    data: bytes | memoryview, batches: Sequence[BatchHeader]
) -> tuple[bytes | memoryview, list[int], list[int]]:
    """A buffer holding every batch's records, and where each batch's records start and end in it: `data`
    itself when nothing is compressed, else the records sections (decompressed) joined."""
    if all(h.attributes & COMPRESSION_MASK == 0 for h in batches):
        return data, [h.position + HEADER_SIZE for h in batches], [h.end for h in batches]
    sections = [records_section(data, h) for h in batches]
    bounds = list(itertools.accumulate((len(section) for section in sections), initial=0))
    return b"".join(sections), bounds[:-1], bounds[1:]


def _record_starts(
    buf: bytes | memoryview,
    u8: pa.Array,
    bases: Sequence[int],
    ends: Sequence[int],
    batches: Sequence[BatchHeader],
) -> pa.Array:
    """Where each record's body (its attributes byte) is in `buf`, in record order.

    Records are length-prefixed, so in general each start is found from the one before (`_walk`, one
    Python step per record). A batch of fixed-size records skips the walk. Its records differ in size
    only by their offset delta (0, 1, 2, ...: a varint of 1 byte below 64, 2 below 8192, ...), so from
    the first record's size every start is guessed (`_guess`), and the guess is checked for all records
    at once: the length varint at each guessed start must give the guessed size, so by induction every
    guess is a real start. A batch whose check fails is walked.
    """
    fixed = [_fixed_size(buf, base, end, h) for base, end, h in zip(bases, ends, batches)]
    checked = _check_guesses(u8, bases, fixed, batches)
    pieces: list[pa.Array] = []
    walked = array.array("q")
    for base, h in zip(bases, batches):
        found = checked.get(base)
        if found is None:
            _walk(buf, base, h.record_count, walked)
            continue
        if walked:
            pieces.append(pa.Array.from_buffers(_I64, len(walked), [None, pa.py_buffer(walked)]))
            walked = array.array("q")
        pieces.append(found)
    if walked or not pieces:
        pieces.append(pa.Array.from_buffers(_I64, len(walked), [None, pa.py_buffer(walked)]))
    return pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)


_MIN_GUESSED = 16  # batches with fewer records are walked: checking a guess costs more than that walk
_DELTA_GROWS = (64, 8192, 1 << 20, 1 << 27)  # the zigzag varint of offset delta d has one more byte from d


def _fixed_size(buf: bytes | memoryview, base: int, end: int, h: BatchHeader) -> int:
    """The size of the batch's first record without its offset delta's byte when its second record has
    the same and all records of that size fit in the batch; else 0 (the batch will be walked)."""
    n = h.record_count
    if n < _MIN_GUESSED or n != h.last_offset_delta + 1:  # deltas not 0..n-1: compacted
        return 0
    length, size = read_signed_varint(buf, base)
    fixed = size + length - 1
    if length < 0 or base + n * (fixed + 1) + sum(max(0, n - g) for g in _DELTA_GROWS) > end:
        return 0
    length, size = read_signed_varint(buf, base + fixed + 1)
    return fixed if size + length == fixed + 1 else 0


def _check_guesses(
    u8: pa.Array, bases: Sequence[int], fixed: Sequence[int], batches: Sequence[BatchHeader]
) -> dict[int, pa.Array]:
    """Record body starts of the batches whose guessed starts all hold, by the batch's base."""
    guessed = [(b, f, h.record_count) for b, f, h in zip(bases, fixed, batches) if f]
    if not guessed:
        return {}
    counts = [c for _, _, c in guessed]
    n = sum(counts)
    _Indexes.ensure(n)
    firsts = list(itertools.accumulate(counts[:-1], initial=0))
    index = pc.subtract(_Indexes.count.slice(0, n), _repeat_over(firsts, counts))  # 0.. in each batch
    bases_ = _repeat_over([b for b, _, _ in guessed], counts)
    pos, expected = _guess(index, bases_, _repeat_over([f for _, f, _ in guessed], counts))
    length, size = _varints(u8, pos)
    ok = pc.equal(pc.add(length, size), expected)
    bad = set()
    if not pc.all(ok).as_py():
        batch = _repeat_over(list(range(len(guessed))), counts)
        bad = set(pc.unique(pc.filter(batch, pc.invert(ok))).to_pylist())
    body = pc.add(pos, size)
    return {
        b: body.slice(first, count) for i, ((b, _, count), first) in enumerate(zip(guessed, firsts)) if i not in bad
    }


def _guess(index: pa.Array, base: pa.Array, fixed: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Record i of a batch of fixed-size records: (where it starts, its size with its length varint).
    Its size is fixed + the bytes of offset delta i; it starts after records 0..i-1."""
    size = pc.add(fixed, _ONE)
    start = pc.add(base, pc.multiply(index, size))
    for grows in _DELTA_GROWS:
        beyond = pc.subtract(index, _i64(grows))
        start = pc.add(start, pc.max_element_wise(beyond, _ZERO))
        size = pc.add(size, pc.cast(pc.greater_equal(beyond, _ZERO), _I64))
    return start, size


def _walk(buf: bytes | memoryview, pos: int, count: int, starts: array.array) -> None:
    """Append the body starts of `count` records from `pos`, one length varint at a time."""
    append, read = starts.append, read_signed_varint
    for _ in range(count):
        length, size = read(buf, pos)
        pos += size
        append(pos)
        pos += length


def _varints(u8: pa.Array, pos: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The zigzag varints (or varlongs) at `pos`: (values, sizes in bytes)."""
    last = _i64(len(u8) - 1)
    byte = pc.take(u8, pos).cast(_I64)
    value = pc.bit_wise_and(byte, _LOW7)
    size = pa.repeat(pa.scalar(1, _I64), len(pos))
    more = pc.greater_equal(byte, _HIGH)
    for shift in _SHIFTS:
        if not pc.any(more).as_py():
            break
        ahead = pc.min_element_wise(pc.add(pos, size), last)  # never past the buffer's end
        byte = pc.if_else(more, pc.take(u8, ahead).cast(_I64), _ZERO)
        value = pc.bit_wise_or(value, pc.shift_left(pc.bit_wise_and(byte, _LOW7), shift))
        size = pc.add(size, pc.cast(more, _I64))
        more = pc.and_(more, pc.greater_equal(byte, _HIGH))
    zigzag = pc.bit_wise_xor(pc.shift_right(value, _ONE), pc.negate(pc.bit_wise_and(value, _ONE)))
    return zigzag, size


def _offset_deltas(u8: pa.Array, pos: pa.Array, batches: Sequence[BatchHeader], n: int) -> tuple[pa.Array, pa.Array]:
    """Offset deltas and their varint sizes. When every batch is whole (record count = last offset delta + 1;
    brokers keep deltas 0, 1, 2, ... until compaction removes records) they are known without reading:
    each batch counts from 0, and a zigzag varint of d takes one byte per 7 bits of 2d."""
    if any(h.record_count != h.last_offset_delta + 1 for h in batches):
        return _varints(u8, pos)
    _Indexes.ensure(n)
    firsts = itertools.accumulate((h.record_count for h in batches[:-1]), initial=0)
    first = _repeated(list(firsts), batches)
    delta = pc.subtract(_Indexes.count.slice(0, n), first)
    zigzag = pc.multiply(delta, _TWO)
    size = pa.repeat(pa.scalar(1, _I64), n)
    for bound in (1 << 7, 1 << 14, 1 << 21, 1 << 28):
        size = pc.add(size, pc.cast(pc.greater_equal(zigzag, _i64(bound)), _I64))
    return delta, size


def _bytes_field(buf: bytes | memoryview, u8: pa.Array, pos: pa.Array, n: int) -> tuple[pa.Array, pa.Array]:
    """A varint length then that many bytes (-1: null): (the binary column, the position after it)."""
    length, size = _varints(u8, pos)
    start = pc.add(pos, size)
    nulls = pc.less(length, _ZERO)
    has_nulls = bool(pc.any(nulls).as_py())
    if has_nulls:
        length = pc.max_element_wise(length, _ZERO)
    column = _slices(buf, start, length, n)
    if has_nulls:
        column = pc.if_else(nulls, _NULL_BINARY, column)
    return column, pc.add(start, length)


class _Indexes:
    """Index vectors reused across calls: interleave [0, n, 1, n+1, ...], odd numbers, 0..n-1."""

    size = 0
    pair: pa.Array
    parity: pa.Array
    odd: pa.Array
    count: pa.Array

    @classmethod
    def ensure(cls, n: int) -> None:
        if n <= cls.size:
            return
        size = max(n, 2 * cls.size, 65_536)
        cls.pair = pa.array([i // 2 for i in range(2 * size)], _I64)
        cls.parity = pa.array([i % 2 for i in range(2 * size)], _I64)
        cls.odd = pa.array(range(1, 2 * size, 2), _I64)
        cls.count = pa.array(range(size), _I64)
        cls.size = size


def _slices(buf: bytes | memoryview, start: pa.Array, length: pa.Array, n: int) -> pa.Array:
    """Binary array of buf[start[i] : start[i] + length[i]], cut by Arrow (see the module notes)."""
    if n == 0:
        return pa.array([], pa.binary())
    _Indexes.ensure(n)
    bounds = pa.concat_arrays([start, pc.add(start, length)])
    order = pc.add(_Indexes.pair.slice(0, 2 * n), pc.multiply(_Indexes.parity.slice(0, 2 * n), _i64(n)))
    edges = pa.concat_arrays([pa.array([0], _I64), pc.take(bounds, order), pa.array([len(buf)], _I64)])
    whole = pa.BinaryArray.from_buffers(
        pa.binary(), 2 * n + 1, [None, edges.cast(pa.int32()).buffers()[1], pa.py_buffer(buf)]
    )
    return pc.take(whole, _Indexes.odd.slice(0, n))


def _per_record(batches: Sequence[BatchHeader], attr: str) -> pa.Array:
    return _repeated([getattr(h, attr) for h in batches], batches)


def _repeated(values: Sequence[int], batches: Sequence[BatchHeader]) -> pa.Array:
    """values[i] repeated over the records of batches[i]."""
    return _repeat_over(values, [h.record_count for h in batches])


def _repeat_over(values: Sequence[int], counts: Sequence[int]) -> pa.Array:
    """values[i] repeated counts[i] times (decoded from run ends: one kernel however many batches)."""
    if not counts:
        return pa.array([], _I64)
    ends = pa.array(itertools.accumulate(counts), _I64)
    runs = pa.RunEndEncodedArray.from_buffers(  # not from_arrays: it makes a scalar of an untyped value
        _RUNS, sum(counts), [None], 0, 0, [ends, pa.array(values, _I64)]
    )
    return pc.run_end_decode(runs)


def _timestamps(batches: Sequence[BatchHeader], delta: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(ms, Spark timestampType): CreateTime is base + delta (0); LogAppendTime the batch's max (1)."""
    create = pc.add(_per_record(batches, "base_timestamp"), delta)
    types = [1 if h.attributes & LOG_APPEND_TIME_BIT else 0 for h in batches]
    if not any(types):
        return create, pa.repeat(pa.scalar(0, pa.int32()), len(delta))
    log_append = _repeated(types, batches).cast(pa.int32())
    appended = pc.equal(log_append, pa.scalar(1, pa.int32()))
    return pc.if_else(appended, _per_record(batches, "max_timestamp"), create), log_append


def _headers(buf: bytes | memoryview, u8: pa.Array, pos: pa.Array) -> list[list[tuple[str, bytes | None]] | None]:
    """Each record's headers (None when it has none), decoded in Python for the records that have some."""
    counts, size = _varints(u8, pos)
    out: list[list[tuple[str, bytes | None]] | None] = [None] * len(counts)
    first = pc.add(pos, size)
    for i in pc.indices_nonzero(pc.greater(counts, _ZERO)).to_pylist():
        out[i] = _read_headers(buf, first[i].as_py(), counts[i].as_py())
    return out


def _read_headers(buf: bytes | memoryview, pos: int, count: int) -> list[tuple[str, bytes | None]]:
    headers = []
    for _ in range(count):
        key_length, size = read_signed_varint(buf, pos)
        pos += size
        key = bytes(buf[pos : pos + key_length]).decode()
        pos += key_length
        value_length, size = read_signed_varint(buf, pos)
        pos += size
        value = None if value_length < 0 else bytes(buf[pos : pos + value_length])
        pos += max(value_length, 0)
        headers.append((key, value))
    return headers
