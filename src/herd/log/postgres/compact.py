"""Compaction of a partition stored in PostgreSQL, record by record: which records a pass keeps.

Which records stay is decided batch by batch by the segment compaction's own functions
(`herd.log.compaction.map_batch` and `clean_batch`, with the pass's transactions); what differs is the bookkeeping
around them, since a partition here is rows, not files:

- the pass is incremental, as Kafka's cleaner: only the *dirty* part of the log (from the partition's cleaner
  offset, where the last pass ended) is read to map each key to the offset of its last record there; then
  every batch below the pass's end is filtered with that map. The part below the cleaner offset was compacted
  by an earlier pass, so it holds each key at most once, and the map holds only the keys written since
  (memory bounded by what changed, not by the whole log);
- a batch keeps its base offset and offset range with fewer records (rebuilt: new CRC, uncompressed), and a
  batch left without records is deleted, leaving a gap in the offsets as Kafka does. Offsets never move.
  Keyless records go.
- transactions (Kafka's Cleaner with CleanedTransactionMetadata, see herd.log.compaction): with `txns` (a
  `CleanedTransactions` per pass, built from `aborted_transactions_async` over that pass's range (the mapping
  pass's starts at the cleaner offset, the cleaning pass's at the log start), the producers
  of `log.transactions.entries()` and one `last` dict shared by the mapping and the cleaning pass), the records
  of aborted transactions are neither mapped nor kept, COMMIT markers go once their transaction's batches are
  gone and delete.retention.ms passed, ABORT markers stay (so the rows of `herd_aborted_txns` keep pointing at
  them), the last batch of an active producer stays (emptied if need be). The caller must then stop the pass
  at the last stable offset (Kafka's LogCleanerManager.cleanableOffsets), and feed every batch of the mapped and
  of the cleaned range in offset order through the same object (it carries state from one chunk to the next).
  Without `txns` control batches stay whole and transactional records are compacted as any other (the
  behaviour before transactions: wrong for a log holding aborted or open transactions).

These functions are pure (bytes in, bytes out) and run in a worker thread, one chunk of rows per call;
`PgPartitionLog.compact` reads the rows and writes the changes, fenced by the leader epoch, in offset order
(so a tombstone is never dropped before the older values of its key are).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from herd.log.batch import CONTROL_BIT, parse_header
from herd.log.compaction import CleanedTransactions, clean_batch, map_batch


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


def map_latest(batches: Iterable[bytes], latest: dict[bytes, int], txns: CleanedTransactions) -> None:
    """Record in `latest` the offset of the last record of every key in `batches` (one whole batch each, in
    offset order), records of aborted transactions left out (`txns`: the mapping pass's)."""
    for data in batches:
        map_batch(data, parse_header(data), latest, txns)


def filter_batches(
    batches: Iterable[bytes], latest: dict[bytes, int], now_ms: int, delete_retention_ms: int, txns: CleanedTransactions
) -> Changes:
    """The changes that compact `batches` (one whole batch each) against `latest`; `txns`: the cleaning pass's
    (see the module docstring)."""
    changes = Changes()
    for data in batches:
        header = parse_header(data)
        kept, count = clean_batch(data, header, latest, txns, now_ms, delete_retention_ms)
        if not header.attributes & CONTROL_BIT:
            changes.records_read += header.record_count
        changes.records_kept += count
        if kept is None:
            changes.deleted.append(header.base_offset)
            changes.bytes_freed += len(data)
        elif kept is not data:
            changes.rewritten.append(bytes(kept))
            changes.bytes_freed += len(data) - len(kept)
    return changes
