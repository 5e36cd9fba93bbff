"""Coordinator records <-> Kafka v2 record batches, through kio's record codec.

Each `Result` of a shard becomes one uncompressed batch (`encode_batch`): its records in order, offsets
0..n-1 relative to the batch (the log rewrites the base offset), all stamped with the append time, no
producer id. Loading walks the partition's batches with kio's reader (`decode_batches`) and yields
`Record(key, value)` for every record; control batches (transaction markers) are skipped, and so are
records without a key, which no coordinator writes.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Iterator, Sequence

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from herd.coordinator import Record

CONTROL_BIT = 0x20
_NO_HEADERS: tuple = ()


def encode_batch(records: Sequence[Record], now_ms: int) -> bytes:
    """One v2 batch holding `records` (at least one), stamped `now_ms`."""
    stamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC))
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        base_sequence=i32(-1),
        attributes=i16(0),
        records=tuple(
            KioRecord(attributes=i8(0), timestamp=stamp, offset=i64(i), key=r.key, value=r.value,
                      headers=_NO_HEADERS)
            for i, r in enumerate(records)
        ),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def decode_batches(data: bytes) -> Iterator[tuple[int, list[Record]]]:
    """(next offset, records) for every whole batch in `data`; raises ValueError on a corrupt batch."""
    position = 0
    while position < len(data):
        batch, size = read_batch(data, position)
        position += size
        next_offset = batch.base_offset + batch.last_offset_delta + 1
        if batch.attributes & CONTROL_BIT:
            yield next_offset, []
            continue
        yield next_offset, [Record(r.key, r.value) for r in batch.records if r.key is not None]
