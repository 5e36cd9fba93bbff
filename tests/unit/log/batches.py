"""Record batches for the log tests, written and read by kio's own codec (never by hand)."""

from __future__ import annotations

import datetime
import io

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from herd.log.batch import HEADER

BASE_TS = 1_700_000_000_000


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
