"""Record batches for the tests, written and read by real codecs (kio, kafka-python), never by hand, and
`read_all`, which reads a segment log back as a consumer does.

Compressed batches come from kafka-python's producer-side builder, as a real client sends them; the only
batches patched here are those no client library writes (raw snappy, control, unknown codec), and those get a
fresh CRC32C so the log accepts them. An idempotent producer's batches: `idempotent_batch`.

On sys.path through tests/conftest.py: `from batches import ...` in any test module.
"""

from __future__ import annotations

import datetime
import io
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from herd.log.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER, HEADER_SIZE

if TYPE_CHECKING:
    from herd.log.segments import SegmentLog

BASE_TS = 1_700_000_000_000
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def make_batch(values: list[bytes], *, timestamp_ms: int = BASE_TS, key: bytes | None = b"k") -> bytes:
    """One uncompressed v2 batch holding `values`, all stamped `timestamp_ms` (whole seconds survive kio)."""
    stamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(timestamp_ms // 1000, datetime.UTC))
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=stamp,
            offset=i64(i),
            key=key,
            value=value,
            headers=(RecordHeader(key=b"h", value=b"v"),),
        )
        for i, value in enumerate(values)
    )
    batch = NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1), records=records, attributes=i16(0)
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def max_timestamp_of(batch: bytes) -> int:
    return HEADER.unpack_from(batch)[8]


def records_of(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in the batches of `data`, decoded (and CRC-checked) by kio."""
    out: list[tuple[int, bytes | None]] = []
    pos = 0
    while pos < len(data):
        batch, size = read_batch(data, pos)
        out.extend((record.offset, record.value) for record in batch.records)
        pos += size
    return out


def read_all(log: SegmentLog, start: int | None = None, max_bytes: int = 1 << 20) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of `log` from `start` (default its log start) to its end, fetching the
    way a consumer does: each read from the offset after the last record returned; a read that returns no
    record before the end fails the test (instead of looping)."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[int, bytes | None]] = []
    while offset < log.log_end_offset:
        records = records_of(log.read(offset, max_bytes))
        assert records, f"no progress at {offset}"
        out.extend(r for r in records if r[0] >= offset)
        offset = records[-1][0] + 1
    return out


def _stamp(timestamp_ms: int) -> TZAwareMicros:
    """A kio timestamp that kio writes back as exactly `timestamp_ms`."""
    stamp = TZAwareMicros.parse(EPOCH + datetime.timedelta(milliseconds=timestamp_ms))
    assert int(stamp.timestamp() * 1000) == timestamp_ms, timestamp_ms  # kio's writer goes through a float
    return stamp


def kio_batch(stamps: Sequence[int], value: bytes = b"v") -> bytes:
    """One uncompressed batch written by kio, record i stamped `stamps[i]` (milliseconds kept)."""
    records = tuple(
        Record(attributes=i8(0), timestamp=_stamp(stamp), offset=i64(i), key=b"k%d" % i, value=value * (i + 1),
               headers=(RecordHeader(key=b"h", value=b"%d" % stamp),))
        for i, stamp in enumerate(stamps)
    )  # fmt: skip
    batch = NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1), records=records, attributes=i16(0)
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def client_batch(stamps: Sequence[int], codec: int = 0, offsets: Sequence[int] | None = None) -> bytes:
    """One batch as kafka-python's producer builds it, compressed with `codec` (asserted to be applied)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 24,
    )  # fmt: skip
    for i, stamp in enumerate(stamps):
        offset = i if offsets is None else offsets[i]
        builder.append(offset, timestamp=stamp, key=b"key-%d" % i, value=b"value " * 20, headers=[("h", b"x")])
    data = bytes(builder.build())
    assert HEADER.unpack_from(data)[5] & 0x07 == codec, "kafka-python sent it uncompressed"
    return data


def idempotent_batch(
    producer_id: int, epoch: int, base_sequence: int, count: int = 2, *, timestamp: int = 1000,
    timestamp_step: int = 1, value: bytes | Callable[[int], bytes] = b"v" * 100, transactional: bool = False,
) -> bytes:  # fmt: skip
    """One uncompressed batch of an idempotent producer (`producer_id`, `epoch`, sequences from
    `base_sequence`) as kafka-python's producer builds it: `count` records without key or headers, record i
    stamped `timestamp + i * timestamp_step` and holding `value` (or `value(i)`). With the defaults about 280
    bytes. With `transactional`, a transactional producer's batch (attribute bit 4)."""
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=transactional, producer_id=producer_id, producer_epoch=epoch,
        base_sequence=base_sequence, batch_size=1 << 20,
    )  # fmt: skip
    for i in range(count):
        builder.append(i, timestamp=timestamp + i * timestamp_step, key=None,
                       value=value(i) if callable(value) else value, headers=[])  # fmt: skip
    return bytes(builder.build())


def client_records(data: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of one batch, decoded by kafka-python (the oracle)."""
    return [(record.offset, record.timestamp) for record in DefaultRecordBatch(bytearray(data))]


def recompress(batch: bytes, codec: int, compress: Callable[[bytes], bytes]) -> bytes:
    """`batch` (uncompressed) with its records section replaced by `compress(section)`, marked `codec`."""
    out = bytearray(batch[:HEADER_SIZE] + compress(batch[HEADER_SIZE:]))
    struct.pack_into(">i", out, 8, len(out) - 12)
    return with_attributes(bytes(out), codec)


def with_attributes(batch: bytes, bits: int) -> bytes:
    """`batch` with attribute `bits` set and its CRC32C recomputed."""
    out = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", out, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, attributes | bits)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(bytes(out[ATTRIBUTES_OFFSET:])))
    return bytes(out)
