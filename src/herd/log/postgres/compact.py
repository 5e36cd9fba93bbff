"""Compaction of a partition stored in PostgreSQL, record by record: which records a pass keeps.

Which records stay is decided batch by batch by the segment compaction's own functions
(`herd.log.compaction.map_keys` and `filter_batch`); what differs is the bookkeeping around them, since a
partition here is rows, not files:

- the pass is incremental, as Kafka's cleaner: only the *dirty* part of the log (from the partition's cleaner
  offset, where the last pass ended) is read to map each key to the offset of its last record there; then
  every batch below the pass's end is filtered with that map. The part below the cleaner offset was compacted
  by an earlier pass, so it holds each key at most once, and the map holds only the keys written since
  (memory bounded by what changed, not by the whole log);
- a batch keeps its base offset and offset range with fewer records (rebuilt: new CRC, uncompressed), and a
  batch left without records is deleted, leaving a gap in the offsets as Kafka does. Offsets never move.
  Control batches stay whole; keyless records go.

These functions are pure (bytes in, bytes out) and run in a worker thread, one chunk of rows per call;
`PgPartitionLog.compact` reads the rows and writes the changes, fenced by the leader epoch, in offset order
(so a tombstone is never dropped before the older values of its key are).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from herd.log.batch import CONTROL_BIT, parse_header
from herd.log.compaction import filter_batch, map_keys


@dataclass(slots=True)
class Changes:
    """What a pass does to a run of batches: rows to delete (by base offset) and rows to rewrite (the new
    batches, which keep their base offsets), with the bytes that frees."""

    deleted: list[int] = field(default_factory=list)
    rewritten: list[bytes] = field(default_factory=list)
    records_read: int = 0
    records_kept: int = 0
    bytes_freed: int = 0

    def __bool__(self) -> bool:
        return bool(self.deleted or self.rewritten)


def map_latest(batches: Iterable[bytes], latest: dict[bytes, int]) -> None:
    """Record in `latest` the offset of the last record of every key in `batches` (one whole batch each, in
    offset order)."""
    for data in batches:
        map_keys(data, parse_header(data), latest)


def filter_batches(batches: Iterable[bytes], latest: dict[bytes, int], now_ms: int,
                   delete_retention_ms: int) -> Changes:  # fmt: skip
    """The changes that compact `batches` (one whole batch each) against `latest`."""
    changes = Changes()
    for data in batches:
        header = parse_header(data)
        if header.attributes & CONTROL_BIT:
            continue
        kept, count = filter_batch(data, header, latest, now_ms, delete_retention_ms)
        changes.records_read += header.record_count
        changes.records_kept += count
        if kept is None:
            changes.deleted.append(header.base_offset)
            changes.bytes_freed += len(data)
        elif kept is not data:
            changes.rewritten.append(bytes(kept))
            changes.bytes_freed += len(data) - len(kept)
    return changes
