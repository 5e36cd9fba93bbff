"""Log compaction (cleanup.policy=compact) of segment logs: keep the latest record of every key.

A pass, as Kafka's LogCleaner does it, simplified to cleaning every sealed segment each time:

1. `plan(log, now_ms, delete_retention_ms)`, on the loop: the log's sealed segments that are wholly flushed
   (never the active one) and wholly below the last stable offset (never past the first open transaction), if
   the dirty ratio says so: the bytes written since the last pass are at least `MIN_CLEANABLE_DIRTY_RATIO`
   (Kafka's min.cleanable.dirty.ratio default) of the cleanable bytes. It takes the aborted transactions of
   those segments from the log's index and the producers of its transaction state (`CleanedTransactions`).
2. `clean(plan)`, in a worker thread; it only reads sealed files and writes new ones, so the log keeps
   serving:
   - pass 1 reads every record of those segments and maps each key to the offset of its last record, the
     records of aborted transactions left out (so an aborted record never hides a committed one);
   - pass 2 groups consecutive segments (input bytes <= segment.bytes, offsets within an int32) and writes
     each group as one segment named after its first base offset, `<base>.log.cleaned` with its
     `.index.cleaned` and `.timeindex.cleaned`. A record stays if it is the latest of its key and either has
     a value or is a tombstone younger than delete.retention.ms. A batch keeps its base offset and offset
     range with fewer records (new CRC; a compressed batch is rewritten uncompressed); a batch left without
     records is dropped; keyless records go (Kafka drops them too). Transactions as Kafka's Cleaner treats them
     (`clean_batch`): records of aborted transactions go, a COMMIT marker goes once no batch of its
     transaction is left and delete.retention.ms passed, an ABORT marker stays, the last batch of an active
     producer stays (emptied if need be). An empty batch covers the offsets from the last kept batch to the
     end of the group, so every segment still ends where the next one starts and recovery's contiguity checks
     hold. The group's transaction indexes become `<base>.txnindex.cleaned` (`_write_txn_index`). Every file
     is fsynced, then a manifest `<base>.swap.cleaned` holding the group's end offset.
3. `install(log, cleaned)`, on the loop, group by group in offset order, with a protocol a crash at any
   step leaves recoverable:
   a. the data files are renamed `.cleaned` -> `.swap`; directory fsync;
   b. the manifest is renamed to `<base>.swap`; directory fsync: the commit point;
   c. the group's old segment files are removed; directory fsync; the `.swap` files get their final names
      (the log file, then the optional `.txnindex`, last); directory fsync; the manifest is removed; directory
      fsync.
   Then the log's segment list takes the new segment (`SegmentLog.replace_segments`). The caller must make
   sure no flush of the same log runs meanwhile (the coordinator runtime installs between writes).
4. `herd.log.swap.recover(fs, directory)`, called by `SegmentLog.open` before it lists the segments:
   `.cleaned` files are removed (an unfinished pass); every manifest `<base>.swap` is finished as in (c),
   removing the old segments in [base, end) unless `<base>.log.swap` is gone already (then they were removed
   before it was renamed); `.swap` data files without a manifest are removed (a pass that never reached its
   commit point).

Tombstones differ from Kafka in one detail: Kafka keeps a tombstone until delete.retention.ms after the
pass that first cleaned it (KIP-534 stores that horizon in the batch); herd keeps it delete.retention.ms
after the tombstone's own timestamp, which for `__consumer_offsets` is when it was written. Either way a
reader of the log sees a deletion for at least delete.retention.ms. Offsets never move: compaction leaves
gaps, as in Kafka. COMMIT markers are timed like tombstones, from their own timestamp, once their
transaction's batches are gone (Kafka: from the pass that found them so, KIP-534). ABORT markers are never
removed, where Kafka removes them (and their `.txnindex` entries) once their transaction's batches are gone and
delete.retention.ms passed: herd.log.segments keeps every index entry of the segments a pass merges, and an
entry must not outlive its marker (see `clean_batch`). Their cost: one control batch (about 80 bytes) and one
34-byte index entry per aborted transaction, for the life of the log.

The file names and steps 3a-c and 4 are in herd.log.swap, which the log imports for its recovery; this module
imports the log, never the other way round.
"""

from __future__ import annotations

import struct
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import crc32c

from herd.log.api import LogError
from herd.log.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    HEADER,
    HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    parse_header,
)
from herd.log.fs import FileSystem, read_whole
from herd.log.index import OffsetIndex, TimeIndex
from herd.log.records import Buffer, control_marker, iter_records, records_section
from herd.log.segments import SegmentLog
from herd.log.swap import CLEANED, MANIFEST, commit_swap, remove_leftovers, segment_file
from herd.log.transactions import TXN_INDEX_SUFFIX, decode_aborted, encode_aborted

DEFAULT_DELETE_RETENTION_MS = 86_400_000  # delete.retention.ms [log.cleaner.delete.retention.ms]
MIN_CLEANABLE_DIRTY_RATIO = 0.5  # min.cleanable.dirty.ratio [log.cleaner.min.cleanable.ratio]
READ_CHUNK = 8 * 1024 * 1024
_EMPTY_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


class CompactionCancelled(Exception):
    """The pass was cancelled (the partition is being closed); its files were removed."""


@dataclass(frozen=True, slots=True)
class SegmentSpan:
    base: int
    end: int  # the next segment's base offset
    size: int


@dataclass(slots=True)
class Plan:
    fs: FileSystem
    directory: str
    segments: list[SegmentSpan]
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval_bytes: int
    cancelled: threading.Event = field(default_factory=threading.Event)
    # the log's transactions as the pass was planned: (producer id, first offset) of the aborted transactions
    # overlapping the segments, and the producers its transaction state holds (see CleanedTransactions)
    aborted: list[tuple[int, int]] = field(default_factory=list)
    active_producers: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    base: int
    end: int
    replaced: tuple[int, ...]  # base offsets of the segments it replaces
    size: int


@dataclass(slots=True)
class Stats:
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_written: int = 0


@dataclass(slots=True)
class Cleaned:
    plan: Plan
    groups: list[CleanedGroup]
    stats: Stats


# --- what a pass keeps (one batch at a time; the PostgreSQL log's compaction uses these too) ----------------


def dirty_enough(dirty: int, total: int, *, force: bool = False) -> bool:
    """Whether a pass is worth its cost: `dirty` (bytes written since the last pass) is at least
    MIN_CLEANABLE_DIRTY_RATIO of `total` (the bytes a pass would read), as Kafka's cleaner decides. With
    `force` the answer is yes, whatever the ratio (even when nothing is dirty)."""
    return force or (dirty > 0 and dirty >= MIN_CLEANABLE_DIRTY_RATIO * total)


def map_keys(batch: Buffer, header: BatchHeader, latest: dict[bytes, int]) -> int:
    """Record in `latest` the offset of every keyed record of the batch (batches are mapped in offset order,
    so a key ends at its last record); returns how many records were read (none in a control batch, whose
    records are markers, not keys)."""
    if header.attributes & CONTROL_BIT:
        return 0
    for _, _, offset, _, key, _ in iter_records(records_section(batch, header), header):
        if key is not None:
            latest[key] = offset
    return header.record_count


def filter_batch(batch: Buffer, header: BatchHeader, latest: dict[bytes, int], now_ms: int,
                 delete_retention_ms: int) -> tuple[Buffer | None, int]:  # fmt: skip
    """The batch with only the records that stay, and how many stay: `batch` itself when all do (and it is
    uncompressed), a rebuilt batch when some do, None when none does. A record stays if it has a key, `latest`
    holds no later offset of its key (a key `latest` does not hold was compacted by an earlier pass), and it
    is not a tombstone older than `delete_retention_ms`. Control batches are the caller's: they stay whole."""
    kept: list[memoryview] = []
    max_timestamp = -1
    section = records_section(batch, header)
    for start, end, offset, stamp, key, has_value in iter_records(section, header):
        if key is None or latest.get(key, offset) != offset:
            continue
        if not has_value and now_ms - stamp >= delete_retention_ms:
            continue
        kept.append(memoryview(section)[start:end])
        max_timestamp = max(max_timestamp, stamp)
    if not kept:
        return None, 0
    if len(kept) == header.record_count and not header.attributes & COMPRESSION_MASK:
        return batch, len(kept)
    if header.attributes & TIMESTAMP_TYPE_BIT:
        max_timestamp = header.max_timestamp
    return _rebuild(header, kept, max_timestamp), len(kept)


class CleanedTransactions:
    """What a pass knows of the transactions in the range it cleans, batch by batch in offset order: Kafka's
    CleanedTransactionMetadata (apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/log/
    CleanedTransactionMetadata.java), with the producers whose last batch must stay (Cleaner.java,
    `isBatchLastRecordOfProducer`).

    - `aborted`: (producer id, first offset) of the aborted transactions whose ABORT markers lie at or after the
      first batch this object is fed (and that began before the range's end), from the log's aborted-transaction
      index: `PartitionLog.aborted_transactions(first fed offset, end)`, Kafka's `collectAbortedTransactions`.
      Not one whose marker comes before: its producer's later batches would be taken for aborted ones. A
      transactional batch of a producer is aborted from its transaction's first offset up to that producer's next
      ABORT marker (a producer has one transaction at a time), so the first offsets suffice.
    - `active`: the producers the log's transaction state still holds (`log.transactions.entries()`, Kafka's
      active producers): the last batch of each in the range stays, emptied of its records if none is kept, so
      that their epochs survive in the log (fencing after a reload: herd.log.transactions rebuilds them from the
      batch headers, and the group coordinator's loader from its transactional batches and markers).
    - `last`: producer id -> base offset of its last batch, filled by the mapping pass (`map_batch`) and read by
      the cleaning pass (`clean_batch`); share one dict between the two passes' objects. A producer with no batch
      in the mapped part (PostgreSQL maps only the dirty part) keeps every one of its batches, emptied.

    One object per pass over the range (the mapping pass and the cleaning pass each make their own), fed every
    batch in offset order."""

    __slots__ = ("_pending", "_aborted", "_committed", "active", "last")

    def __init__(self, aborted: Iterable[tuple[int, int]] = (), active: Iterable[int] = (),
                 last: dict[int, int] | None = None) -> None:  # fmt: skip
        self._pending = deque(sorted(aborted, key=lambda txn: txn[1]))
        self._aborted: dict[int, bool] = {}  # producer id -> a batch of its aborted transaction was read
        self._committed: set[int] = set()  # producers whose (not aborted) transactional batches were read
        self.active = frozenset(active)
        self.last = {} if last is None else last

    def _consume(self, offset: int) -> None:
        while self._pending and self._pending[0][1] <= offset:
            pid, _ = self._pending.popleft()
            self._aborted.setdefault(pid, False)

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch was read; True if it belongs to an aborted transaction (Kafka's onBatchRead). A batch
        that is not transactional need not be fed: the aborted transactions are taken up lazily, by offset."""
        self._consume(header.last_offset)
        if not header.attributes & TRANSACTIONAL_BIT:
            return False
        if header.producer_id in self._aborted:
            self._aborted[header.producer_id] = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control(self, header: BatchHeader, marker: tuple[bool, int] | None) -> bool:
        """A control batch was read (`marker`: its decoded marker, None if it holds none); True if it may go
        (Kafka's onControlBatchRead): a COMMIT marker none of whose transaction's batches were read in this pass,
        an ABORT marker likewise, an emptied control batch; another control record type stays."""
        self._consume(header.last_offset)
        if marker is None:
            return header.record_count == 0
        if marker[0]:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        return not self._aborted.pop(header.producer_id, False)

    def note(self, header: BatchHeader) -> None:
        """Remember `header` as the latest batch of its producer (mapping pass)."""
        if header.producer_id in self.active:
            self.last[header.producer_id] = header.base_offset

    def retains(self, header: BatchHeader) -> bool:
        """Whether `header`'s batch is the last of an active producer, so it stays even without records."""
        pid, base = header.producer_id, header.base_offset
        return pid in self.active and self.last.get(pid, base) == base


def _marker(batch: Buffer, header: BatchHeader) -> tuple[bool, int] | None | bool:
    """The batch's marker, None if it holds none, False if its control record cannot be read (it stays)."""
    try:
        return control_marker(batch, header)
    except LogError:  # CorruptRecordError, InvalidRecordError
        return False


def map_batch(batch: Buffer, header: BatchHeader, latest: dict[bytes, int], txns: CleanedTransactions) -> int:
    """The mapping pass over one batch (Kafka's Cleaner.buildOffsetMapForSegment): the records of a batch of an
    aborted transaction are not mapped, so an aborted record never hides a committed one of its key; control
    batches only move the transaction state. Returns how many records were read."""
    if header.producer_id >= 0:
        txns.note(header)
    if not header.attributes & (TRANSACTIONAL_BIT | CONTROL_BIT):  # the state only moves at these (lazily)
        return map_keys(batch, header, latest)
    if header.attributes & CONTROL_BIT:
        marker = _marker(batch, header)
        txns.on_control(header, marker if marker is not False else None)
        return 0
    if txns.on_batch(header):
        return header.record_count
    return map_keys(batch, header, latest)


def clean_batch(batch: Buffer, header: BatchHeader, latest: dict[bytes, int], txns: CleanedTransactions,
                now_ms: int, delete_retention_ms: int) -> tuple[Buffer | None, int]:  # fmt: skip
    """The cleaning pass over one batch (Kafka's Cleaner.cleanInto with its checkBatchRetention and
    shouldRetainRecord): the batch as it stays (itself, rebuilt with fewer or no records) or None when it goes,
    and how many records stay.

    - a batch of an aborted transaction loses all its records;
    - other data batches keep the records `filter_batch` keeps;
    - a batch left without records goes, unless it is the last of an active producer (`txns.retains`): then it
      stays empty, its offsets, producer id, epoch and sequence as they were (Kafka's RETAIN_EMPTY);
    - a COMMIT marker stays while any batch of its transaction does (`on_control`), and then until
      delete.retention.ms after its own timestamp, like a tombstone here (see the module docstring); an emptied
      control batch likewise; a control batch whose record cannot be read or is no marker stays;
    - an ABORT marker always stays (Kafka drops it once its transaction's batches are gone and delete.retention.ms
      passed, and with it the transaction's entry of the cleaned `.txnindex`; herd keeps the index entries of
      the segments it merges, herd.log.segments `replace_segments`, so it keeps the markers they point at: a
      read_committed consumer told of an aborted transaction skips its producer's batches until that marker)."""
    if header.attributes & CONTROL_BIT:
        marker = _marker(batch, header)
        if marker is False:
            return batch, 0
        discardable = txns.on_control(header, marker)
        aborting = marker is not None and not marker[0]
        if (discardable and not aborting and not txns.retains(header)
                and now_ms - header.max_timestamp >= delete_retention_ms):  # fmt: skip
            return None, 0
        return batch, 0
    if header.attributes & TRANSACTIONAL_BIT and txns.on_batch(header):
        kept, count = None, 0
    else:
        kept, count = filter_batch(batch, header, latest, now_ms, delete_retention_ms)
    if kept is None and header.producer_id >= 0 and txns.retains(header):
        if header.record_count == 0 and not header.attributes & COMPRESSION_MASK:
            return batch, 0
        return _rebuild(header, [], header.max_timestamp), 0
    return kept, count


# --- planning (on the loop) ------------------------------------------------------------------------------------


def plan(log: SegmentLog, now_ms: int, delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS, *,
         force: bool = False) -> Plan | None:  # fmt: skip
    """What to clean now, or None: no sealed flushed segment wholly below the last stable offset, or (unless
    `force`) not dirty enough. Kafka never cleans past the last stable offset (LogCleanerManager.cleanableOffsets,
    apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/log/LogCleanerManager.java: the first
    uncleanable offset is the least of the LSO and the active segment's base), so the records of an open
    transaction, and everything after its first offset, stay as they are until its marker is written."""
    stable = log.last_stable_offset
    spans = []
    for base, end, size in log.cleanable_segments():
        if end > stable:
            break
        spans.append(SegmentSpan(base, end, size))
    if not spans:
        return None
    dirty = sum(s.size for s in spans if s.end > log.cleaner_offset)
    if not dirty_enough(dirty, sum(s.size for s in spans), force=force):
        return None
    return Plan(
        log.filesystem,
        log.directory,
        spans,
        now_ms,
        delete_retention_ms,
        log.config.segment_bytes,
        log.config.index_interval_bytes,
        aborted=log.aborted_transactions(spans[0].base, spans[-1].end),
        active_producers=frozenset(pid for pid, *_ in log.transactions.entries()),
    )


# --- cleaning (in a worker thread) ------------------------------------------------------------------------------


def clean(p: Plan) -> Cleaned:
    """Write the cleaned segments and their manifests; raises CompactionCancelled or OSError (after removing
    what it wrote)."""
    stats = Stats()
    written: list[CleanedGroup] = []
    last: dict[int, int] = {}
    try:
        latest = _latest_offsets(p, stats, CleanedTransactions(p.aborted, p.active_producers, last))
        txns = CleanedTransactions(p.aborted, p.active_producers, last)
        for group in _groups(p):
            written.append(_write_group(p, group, latest, txns, stats))
    except BaseException:
        remove_leftovers(p.fs, p.directory, (CLEANED,))
        raise
    return Cleaned(p, written, stats)


def _batches(p: Plan, span: SegmentSpan) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of a sealed segment: (header, the batch's bytes); the header's position is 0."""
    f = p.fs.open(segment_file(p.directory, span.base, ".log"), "r")
    try:
        position = 0
        while position < span.size:
            if p.cancelled.is_set():
                raise CompactionCancelled(f"compaction of {p.directory} cancelled")
            chunk = memoryview(f.pread(position, min(READ_CHUNK, span.size - position)))
            at = 0
            while at + HEADER_SIZE <= len(chunk):
                size = LOG_OVERHEAD + int.from_bytes(chunk[at + 8 : at + 12], "big", signed=True)
                if at + size > len(chunk):
                    break
                batch = chunk[at : at + size]
                yield parse_header(batch), batch
                at += size
            if at == 0:  # one batch larger than the chunk
                size = LOG_OVERHEAD + int.from_bytes(chunk[8:12], "big", signed=True)
                batch = memoryview(f.pread(position, size))
                yield parse_header(batch), batch
                at = size
            position += at
    finally:
        f.close()


def _latest_offsets(p: Plan, stats: Stats, txns: CleanedTransactions) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for span in p.segments:
        for header, batch in _batches(p, span):
            stats.bytes_read += len(batch)
            stats.records_read += map_batch(batch, header, latest, txns)
    return latest


def _groups(p: Plan) -> Iterator[list[SegmentSpan]]:
    """Consecutive segments whose input fits one segment (Kafka's groupSegmentsBySize)."""
    group: list[SegmentSpan] = []
    for span in p.segments:
        if group and (sum(s.size for s in group) + span.size > p.segment_bytes
                      or span.end - 1 - group[0].base > INT32_MAX):  # fmt: skip
            yield group
            group = []
        group.append(span)
    if group:
        yield group


class _SegmentWriter:
    """Appends batches to a `.cleaned` segment and indexes them as `Segment` does."""

    def __init__(self, p: Plan, base: int) -> None:
        self.p, self.base = p, base
        self.file = p.fs.open(segment_file(p.directory, base, ".log" + CLEANED), "w")
        self.index, self.time_index = OffsetIndex(), TimeIndex()
        self.size = self.bytes_since_index = 0
        self.max_timestamp = self.max_timestamp_offset = -1
        self.next_offset = base

    def append(self, batch: bytes | memoryview, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp, self.max_timestamp_offset = header.max_timestamp, header.base_offset
        if self.bytes_since_index > self.p.index_interval_bytes:
            self.index.append(header.last_offset - self.base, self.size)
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset - self.base)
            self.bytes_since_index = 0
        self.file.append(batch)
        self.size += len(batch)
        self.bytes_since_index += len(batch)
        self.next_offset = header.next_offset

    def finish(self, end: int) -> int:
        """Cover the offsets up to `end` with an empty batch if needed, write the indexes, fsync everything."""
        if self.next_offset < end:
            filler = _empty_batch(self.next_offset, end - 1)
            self.append(filler, parse_header(filler))
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset - self.base)
        for suffix, data in ((".index", self.index.pending()), (".timeindex", self.time_index.pending())):
            _write_file(self.p.fs, segment_file(self.p.directory, self.base, suffix + CLEANED), data)
        self.file.fsync()
        self.file.close()
        return self.size


def _write_group(p: Plan, group: list[SegmentSpan], latest: dict[bytes, int], txns: CleanedTransactions,
                 stats: Stats) -> CleanedGroup:  # fmt: skip
    base, end = group[0].base, group[-1].end
    writer = _SegmentWriter(p, base)
    try:
        for span in group:
            for header, batch in _batches(p, span):
                kept, count = clean_batch(batch, header, latest, txns, p.now_ms, p.delete_retention_ms)
                stats.records_kept += count
                if kept is not None:
                    writer.append(kept, parse_header(kept) if kept is not batch else header)
        size = writer.finish(end)
    except BaseException:
        writer.file.close()
        raise
    _write_txn_index(p, group)
    stats.bytes_written += size
    _write_file(p.fs, segment_file(p.directory, base, MANIFEST + CLEANED), f"{end}\n".encode())
    return CleanedGroup(base, end, tuple(s.base for s in group), size)


def _write_txn_index(p: Plan, group: list[SegmentSpan]) -> None:
    """`<base>.txnindex.cleaned`: the entries of the group's transaction indexes, one after the other (each
    segment's in marker order, the segments in offset order, so the whole stays in marker order). Every ABORT
    marker stays (`clean_batch`), so every entry still points at its marker; herd.log.segments
    `replace_segments` merges its in-memory copies the same way. Not written when no segment has an entry. The
    swap renames it with the group's other files (herd.log.swap), so a crash leaves either the old indexes or
    this one."""
    entries = []
    for span in group:
        path = segment_file(p.directory, span.base, TXN_INDEX_SUFFIX)
        if p.fs.exists(path):
            entries += decode_aborted(read_whole(p.fs, path))
    if entries:
        path = segment_file(p.directory, group[0].base, TXN_INDEX_SUFFIX + CLEANED)
        _write_file(p.fs, path, encode_aborted(entries))


def _rebuild(header: BatchHeader, records: list[memoryview], max_timestamp: int) -> bytes:
    """A batch with `records` (raw, their deltas relative to the header's base offset and timestamp), the
    header's offset range, producer fields and attributes (uncompressed), and a new CRC."""
    body = b"".join(records)
    fields = HEADER.pack(
        header.base_offset,
        _EMPTY_BATCH_LENGTH + len(body),
        header.partition_leader_epoch,
        2,
        0,
        header.attributes & ~COMPRESSION_MASK,
        header.last_offset_delta,
        header.base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(records),
    )
    return _with_crc(fields + body)


def _empty_batch(first_offset: int, last_offset: int) -> bytes:
    """A batch with no records covering [first_offset, last_offset], stamped -1 (no timestamp)."""
    return _with_crc(
        HEADER.pack(first_offset, _EMPTY_BATCH_LENGTH, 0, 2, 0, 0, last_offset - first_offset, -1, -1, -1, -1, -1, 0)
    )


def _with_crc(batch: bytes) -> bytes:
    crc = crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])
    return batch[:17] + struct.pack(">I", crc) + batch[21:]


# --- installing (on the loop) ---------------------------------------------------------------------------------


def install(log: SegmentLog, cleaned: Cleaned) -> int:
    """Swap the cleaned groups into `log`, oldest first; returns how many were installed. A group whose
    segments changed meanwhile is not installed (its files are removed). Raises KafkaStorageError, failing the
    log, if the disk fails half-way (reopening it finishes or undoes the swap)."""
    p = cleaned.plan
    installed = 0
    for group in cleaned.groups:
        if not log.holds_segments(group.replaced, group.end):
            break
        log.run_storage(lambda g=group: commit_swap(p.fs, p.directory, g.base, g.end))
        log.replace_segments(group.replaced, group.end)
        installed += 1
    if installed == len(cleaned.groups) and installed:
        log.cleaner_offset = max(log.cleaner_offset, cleaned.groups[-1].end)
    else:
        remove_leftovers(p.fs, p.directory, (CLEANED,))
    return installed


def _write_file(fs: FileSystem, path: str, data: bytes) -> None:
    f = fs.open(path, "w")
    try:
        if data:
            f.append(data)
        f.fsync()
    finally:
        f.close()
