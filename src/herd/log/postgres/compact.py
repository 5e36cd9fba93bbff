"""Compaction of a partition stored in PostgreSQL, record by record: which records a pass keeps.

The records are read and rebuilt with the segment compaction's own helpers (`herd.log.compaction`); what
differs is the bookkeeping around them, since a partition here is rows, not files:

- the pass is incremental, as Kafka's cleaner: only the *dirty* part of the log (from the partition's cleaner
  offset, where the last pass ended) is read to map each key to the offset of its last record there; then
  every batch below the pass's end is filtered with that map. A record stays if it has a key, no later
  record of its key is in the dirty part, and it is not a tombstone older than delete.retention.ms. The
  part below the cleaner offset was compacted by an earlier pass, so it holds each key at most once, and the
  map holds only the keys written since (memory bounded by what changed, not by the whole log);
- a batch keeps its base offset and offset range with fewer records (`compaction._rebuild`: new CRC,
  uncompressed), and a batch left without records is deleted, leaving a gap in the offsets as Kafka does.
  Offsets never move. Control batches stay whole; keyless records go.

These functions are pure (bytes in, bytes out) and run in a worker thread; `PgPartitionLog.compact` reads
the rows and writes the changes, fenced by the leader epoch, in offset order (so a tombstone is never dropped
before the older values of its key are).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from herd.log.batch import COMPRESSION_MASK, CONTROL_BIT, TIMESTAMP_TYPE_BIT, iter_headers, parse_header
from herd.log.compaction import _rebuild, _records
from herd.log.records import records_section

MIN_CLEANABLE_DIRTY_RATIO = 0.5  # min.cleanable.dirty.ratio [log.cleaner.min.cleanable.ratio]


@dataclass(slots=True)
class Changes:
    """What a pass does to a run of batches: rows to delete (by base offset) and rows to rewrite."""

    deleted: list[int] = field(default_factory=list)
    rewritten: list[tuple[int, bytes, int, int]] = field(default_factory=list)  # base, data, records, max ts
    records_read: int = 0
    records_kept: int = 0

    def __bool__(self) -> bool:
        return bool(self.deleted or self.rewritten)


def map_latest(batches: Iterable[bytes], latest: dict[bytes, int]) -> int:
    """Record in `latest` the offset of the last record of every key in `batches` (whole batches, in offset
    order); returns how many records were read."""
    count = 0
    for data in batches:
        for header in iter_headers(data):
            if header.attributes & CONTROL_BIT:
                continue
            for _, _, offset, _, key, _ in _records(records_section(data, header), header):
                count += 1
                if key is not None:
                    latest[key] = offset
    return count


def filter_batches(batches: Iterable[bytes], latest: dict[bytes, int], now_ms: int,
                   delete_retention_ms: int) -> Changes:  # fmt: skip
    """The changes that compact `batches` (each one whole batch) against `latest`."""
    changes = Changes()
    for data in batches:
        header = parse_header(data)
        if header.attributes & CONTROL_BIT:
            continue
        kept: list[memoryview] = []
        max_timestamp = -1
        section = records_section(data, header)
        for start, end, offset, stamp, key, has_value in _records(section, header):
            changes.records_read += 1
            if key is None or latest.get(key, offset) != offset:
                continue
            if not has_value and now_ms - stamp >= delete_retention_ms:
                continue
            kept.append(memoryview(section)[start:end])
            max_timestamp = max(max_timestamp, stamp)
        changes.records_kept += len(kept)
        if not kept:
            changes.deleted.append(header.base_offset)
        elif len(kept) < header.record_count or header.attributes & COMPRESSION_MASK:
            if header.attributes & TIMESTAMP_TYPE_BIT:
                max_timestamp = header.max_timestamp
            changes.rewritten.append((header.base_offset, _rebuild(header, kept, max_timestamp), len(kept),
                                      max_timestamp))
    return changes
