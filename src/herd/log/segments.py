"""The embedded log backend: each partition a directory of segment files, laid out as Kafka does.

    <root>/<topic>-<partition>/00000000000000000000.log         record batches as sent, broker offsets
                               00000000000000000000.index       sparse offset index
                               00000000000000000000.timeindex   time index
                               00000000000000000000.snapshot    idempotent producers' state below that offset
                               00000000000000000000.txnindex    aborted transactions whose markers are here
                               partition.checkpoint             "0 <log start offset> <recovery point>"

Append: validate every batch (framing, magic, CRC32C, counts, size) before touching the disk, copy the request
bytes once into a bytearray, rewrite base offsets in place, roll to a new segment if `segment.bytes` would be
exceeded, write the bytes with one call, and index them in memory. `append` never fsyncs; `flush` does and
`maybe_flush(now_ms)` applies `flush.messages` / `flush.ms`.

Durability: `flushed_offset` (Kafka's recovery point) is the offset below which everything was fsynced. It is
written to the checkpoint (tmp file, fsync, rename, fsync directory) when it crosses into a newer segment, when
retention or DeleteRecords moves the log start, and on close. On open, segments wholly below the checkpointed
recovery point are trusted (indexes checked lazily); every later segment, and always the last one, is scanned
batch by batch and truncated after its last whole, CRC-correct batch with contiguous offsets; segments after a
truncation are dropped. So a torn tail is cut back to the last whole batch, and nothing `flush` reported durable
is lost.

Disk failures (Kafka's KafkaStorageException; each is logged once, at ERROR, with the path and the OS error):
- a failed write is cut back and raised as KafkaStorageError; the partition stays readable and the next append
  tries again. So does a failed roll: the new segment is created only after the old one's indexes are written,
  and a new segment that could not be created is removed again, so the old segment simply stays the active one;
- so does a failed index write or checkpoint of a flush (indexes and the recovery point are rebuilt or rescanned
  from the log if need be);
- a failed fsync, a failed cut-back, or a failed checkpoint of retention (whose segment deletions depend on it)
  leaves the partition *failed* (`failure` says why):
  every call raises KafkaStorageError, reads included (what the page cache holds is no longer known to match the
  disk), until `recover()` reopens it from disk with the same recovery as at start. The broker retries that
  with a backoff (herd.runtime.recovery).
The first error after a success is logged; the next success after an error is logged too (WARNING).

Producer state (herd.log.producer_state), kept with the log as Kafka's UnifiedLog keeps its ProducerStateManager:
the store hands each partition it opens the node's `ProducerStates` (`use_producers`, again after `recover`), which
restores the partition's state from the log; a client's append (`append(..., client=True)`) passes through it, and
it is the `snapshot_source`. The state is written to `<offset>.snapshot` at every roll (the new segment's base;
fsynced with the next flush, as Kafka flushes it with the rolled segment) and on close (the log end, fsynced).
`producer_state()` reads the state back from the latest readable snapshot and the batch headers after it.
Snapshots outside [log start, log end] are deleted at open, and below the log start when retention or
DeleteRecords moves it (`_delete_snapshots_below_start`).

Transactions (herd.log.transactions; Kafka's ProducerStateManager, TransactionIndex, UnifiedLog.lastStableOffset):
every append checks and records the producers' transactional batches and markers (`append_control`, or a control
batch appended as bytes by a coordinator's writer); `last_stable_offset` is the first offset of the earliest
ongoing transaction, or the log end. An aborted transaction is appended to the active segment's `.txnindex`
(Kafka's 34-byte AbortedTxn entries) when its marker is, fsynced with the segment by the next flush, deleted with
the segment by retention, merged when compaction merges segments, and kept in memory (a few ints per aborted
transaction) for `aborted_transactions`. The producer snapshots also hold the transaction state (who has a
transaction open since which offset, their epochs); at open it is rebuilt from the latest snapshot and the batch
headers after it (markers read), index entries a crash lost are added again and entries beyond the log end
dropped (`_load_transactions`).

Timestamps (ListOffsets): each segment keeps its max timestamp and the base offset of the first batch that
reached it. A lookup by time finds the first segment whose max reaches the target, the time index and batch
headers find the batch, and that batch's records are decoded for the exact first record stamped >= the target
(later batches only if none is). MAX_TIMESTAMP decodes the one batch holding the max, once per new max.

Memory per partition: a few ints per segment; the active segment's indexes (8-12 bytes per
`index.interval.bytes` of data); one sealed segment's offset index while it is being read.
"""

from __future__ import annotations

import errno
import logging
import posixpath
import struct
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from typing import TypeVar

from herd.log import producer_snapshots, swap
from herd.log.api import (
    RETAINED_PRODUCER_BATCHES,
    SINGLE_NODE_EPOCHS,
    ActiveProducer,
    AppendResult,
    EpochHistory,
    KafkaStorageError,
    LogConfig,
    LogError,
    OffsetOutOfRangeError,
    ProducerBatch,
    TimestampOffset,
    deletes,
    deletion_start,
)
from herd.log.batch import (
    CONTROL_BIT,
    INT32_MAX,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    validate_batches,
)
from herd.log.fs import FileSystem, fsync_file, read_whole, write_atomically
from herd.log.producer_state import NO_PRODUCERS, ProducerStates, client_append
from herd.log.records import control_batch, control_marker
from herd.log.segment import CutBackFailed, Parts, Segment, segment_name
from herd.log.transactions import (
    ABORTED_ENTRY,
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    TransactionState,
    collect_aborted,
    decode_aborted,
    encode_aborted,
)

log = logging.getLogger(__name__)
_INT64 = struct.Struct(">q")


CHECKPOINT = "partition.checkpoint"
T = TypeVar("T")


class SegmentLog:
    """A `PartitionLog` on local segment files. Open it with `SegmentLog.open` (or `herd.log.store.SegmentStore`)."""

    commits_itself = False  # an append is durable once `flush` (fsync) returns; every read is answered here
    leader_epoch = 0  # a single node leads every partition, at epoch 0

    def __init__(self, fs: FileSystem, directory: str, topic: str, partition: int, config: LogConfig,
                 segments: list[Segment], log_start_offset: int) -> None:  # fmt: skip
        self.topic, self.partition, self.config = topic, partition, config
        self._fs, self._dir = fs, directory
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._log_start = log_start_offset
        self._flushed = self.log_end_offset
        self._checkpointed_segment = self._bases[-1]
        self._unflushed_messages = 0
        self._first_unflushed_ms = -1
        self._dir_dirty = False
        self._failed: str | None = None
        self._write_error: str | None = None  # the last (logged) non-fatal error, until an append succeeds
        self.report_errors = True  # False when the owner logs them (the coordinator runtime, for its partitions)
        self._cold: Segment | None = None  # the one sealed segment whose index is loaded for reading
        # (segment base, its max timestamp, offset of the batch holding it) -> offset of the record holding it
        self._max_record: tuple[tuple[int, int, int], int] | None = None
        self.cleaner_offset = log_start_offset  # compaction: offsets below this were cleaned by the last pass
        # the idempotent producers' state to snapshot at roll and close (set by its owner); None: no snapshots
        self.snapshot_source: Callable[[], list[ProducerBatch]] | None = None
        # the producers' state a client's append passes through (`use_producers`); None: no checks, no snapshots
        self.producers: ProducerStates | None = None
        self._snapshots: list[int] = []  # offsets of the snapshot files, ascending
        self._unsynced_snapshots: list[int] = []  # offsets of those written at a roll, fsynced by the next flush
        self.transactions = TransactionState()  # ongoing transactions, producers' epochs (herd.log.transactions)
        self._aborted: dict[int, list[AbortedTxn]] = {}  # segment base -> its transaction index, in marker order
        self._unsynced_txn_indexes: set[int] = set()  # segment bases whose .txnindex was appended to since a flush

    # -- opening -------------------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        directory: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        report_errors: bool = True,
    ) -> SegmentLog:
        """Open (recovering) or create the partition in `directory`."""
        fs.makedirs(directory)
        swap.recover(fs, directory)  # finish or undo a compaction swap a crash interrupted
        log_start, recovery_point = _read_checkpoint(fs, directory)
        bases = _segment_bases(fs, directory)
        segments = _recover_segments(fs, directory, bases, log_start, recovery_point, config.index_interval_bytes)
        if not segments:
            segments = [Segment.create(fs, directory, log_start)]
        opened = cls(fs, directory, topic, partition, config, segments, max(log_start, segments[0].base_offset))
        if recovery_point > opened.log_end_offset:
            log.warning("%s: the checkpoint's recovery point %d is beyond the log's end %d; using the end",
                           directory, recovery_point, opened.log_end_offset)  # fmt: skip
        opened._flushed = min(recovery_point, opened.log_end_offset)
        opened._checkpointed_segment = opened._bases[opened._segment_index(opened._flushed)]
        opened._dir_dirty = True
        opened.report_errors = report_errors
        opened._snapshots = _usable_snapshots(fs, directory, opened.log_start_offset, opened.log_end_offset)
        opened._load_transactions()
        opened.flush()  # makes the recovered state (truncations, rebuilt indexes) durable, writes the checkpoint
        return opened

    # -- the PartitionLog contract -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def append(self, records: bytes, now_ms: int, *, client: bool = False) -> AppendResult:
        if client:
            return client_append(self, self.producers, records, self.config, now_ms)
        return self._append(records, now_ms, 0)

    def append_control(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
        *,
        transaction_version: int = 0,
    ) -> AppendResult:
        """PartitionLog.append_control: one marker batch, appended as any batch (so durable with the next flush)."""
        self._check_usable()
        batch = control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms, self.leader_epoch)
        return self._append(batch, now_ms, transaction_version)

    def active_producers(self, now_ms: int) -> list[ActiveProducer]:
        producers = NO_PRODUCERS if self.producers is None else self.producers
        return producers.active(self.topic, self.partition, now_ms, self.transactions)

    @property
    def last_stable_offset(self) -> int:
        """Never below the log start: a transaction whose first offset retention or DeleteRecords passed is
        unstable from the log start on (UnifiedLog.maybeIncrementFirstUnstableOffset)."""
        return max(self.transactions.last_stable_offset(self.log_end_offset), self._log_start)

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """PartitionLog.aborted_transactions, from the segments' transaction indexes (kept in memory) from the
        segment holding `start` on, stopping where an entry's last stable offset shows the rest is later
        (LocalLog.collectAbortedTransactions)."""
        out: list[tuple[int, int]] = []
        if not self._aborted:
            return out
        for base in self._bases[self._segment_index(start) :]:
            found, complete = collect_aborted(self._aborted.get(base, ()), start, end)
            out.extend(found)
            if complete:
                break
        return out

    def _append(self, records: bytes, now_ms: int, transaction_version: int) -> AppendResult:
        self._check_usable()
        headers = validate_batches(records, self.config.max_message_bytes)
        producing = self.transactions.producing(records, headers)
        if producing:
            self.transactions.check(producing, transaction_version)
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        first = offset = self.log_end_offset
        buf: bytearray | Parts
        if log_append:
            buf = bytearray(records)
            for header in headers:
                set_base_offset(buf, header, offset)
                set_log_append_time(buf, header, now_ms)
                offset += header.record_count
            nbytes = len(buf)
        else:  # only the 8-byte base offsets change: write them and views of the rest, no copy of the batches
            view = memoryview(records)
            buf = Parts()
            for header in headers:
                buf.add(_INT64.pack(offset))
                buf.add(view[header.position + 8 : header.end])
                offset += header.record_count
            nbytes = buf.nbytes
        append_time = now_ms if log_append else -1
        segment = self._segment_with_room(nbytes, offset - 1)
        try:
            segment.append(buf, headers, first, append_time, self.config.index_interval_bytes)
        except OSError as error:  # cut back, so the partition stays usable, unless the cut-back failed too
            raise self._storage_error(error, fatal=isinstance(error, CutBackFailed)) from error
        if self._write_error is not None:
            self._write_error = None
            log.warning("%s-%d: writes succeed again", self.topic, self.partition)
        self._unflushed_messages += offset - first
        if self._first_unflushed_ms < 0:
            self._first_unflushed_ms = now_ms
        if producing:
            self._apply_transactions(producing, headers, first, now_ms)
        return AppendResult(first, offset - 1, append_time, self._log_start, offset - first)

    def _apply_transactions(self, producing: list[tuple[BatchHeader, tuple[bool, int] | None]],
                            headers: list[BatchHeader], first: int, now_ms: int) -> None:  # fmt: skip
        """Record the producers' batches just appended from offset `first` in the transaction state, and the
        transactions they aborted in the active segment's transaction index. A failed index write fails the
        partition (KafkaStorageError; the batches are in the log): the recovery from disk rebuilds the index from
        the markers after the last snapshot, which precedes this segment."""
        bases, offset = {}, first
        for header in headers:
            bases[header.position] = offset
            offset += header.record_count
        self.transactions.expire(now_ms)
        aborted = self.transactions.apply(producing, [bases[h.position] for h, _ in producing], now_ms)
        if any(marker is not None for _, marker in producing):
            self.transactions.last_stable_offset(self.log_end_offset)  # markers below the end are stable at once
        if aborted:
            base = self._bases[-1]
            self._storage(lambda: self._add_aborted(base, aborted))

    def _add_aborted(self, base: int, txns: list[AbortedTxn]) -> None:
        """Append `txns` to the transaction index of the segment at `base` (file and memory). Raises OSError."""
        path = self._txn_index_path(base)
        if not self._fs.exists(path):
            self._dir_dirty = True  # its directory entry is made durable by the next flush
        f = self._fs.open(path, "a")
        try:
            f.append(encode_aborted(txns))
        finally:
            f.close()
        self._aborted.setdefault(base, []).extend(txns)
        self._unsynced_txn_indexes.add(base)

    def _txn_index_path(self, base: int) -> str:
        return posixpath.join(self._dir, segment_name(base) + TXN_INDEX_SUFFIX)

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        self._check_usable()
        end = self.log_end_offset
        if offset < self._log_start or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self._log_start}, {end}] of {self.topic}-{self.partition}"
            )
        if offset == end:
            return b""
        segment = self._segments[self._segment_index(offset)]  # segments are contiguous: it holds `offset`
        return self._storage(lambda: self._readable(segment).read(
            offset, max_bytes, min_one, self.config.index_interval_bytes), fatal=False)  # fmt: skip

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        self._check_usable()
        for segment in self._segments:
            if segment.max_timestamp >= timestamp:
                found = self._storage(lambda: self._readable(segment).find_timestamp(
                    timestamp, self.config.index_interval_bytes, self._log_start), fatal=False)  # fmt: skip
                if found is not None:
                    return TimestampOffset(offset=found[0], timestamp=found[1])
        return None

    def max_timestamp(self) -> TimestampOffset | None:
        self._check_usable()
        best: Segment | None = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        return TimestampOffset(offset=self._max_record_offset(best), timestamp=best.max_timestamp)

    def flush(self) -> None:
        """fsync every segment holding unflushed data, then the directory if segments were created; raises
        KafkaStorageError (and fails the partition) if the disk does."""
        self._check_usable()
        end = self.log_end_offset
        for segment in self._segments[self._segment_index(self._flushed) :]:
            self._storage_undone(segment.write_indexes)
            self._storage(segment.fsync)
        while self._unsynced_txn_indexes:
            path = self._txn_index_path(self._unsynced_txn_indexes.pop())
            self._storage(lambda: fsync_file(self._fs, path))
        self._sync_snapshots()
        if self._dir_dirty:
            self._storage(lambda: self._fs.fsync_dir(self._dir))
            self._dir_dirty = False
        self._flushed = end
        self._unflushed_messages, self._first_unflushed_ms = 0, -1
        if self._bases[self._segment_index(end)] != self._checkpointed_segment:
            self._write_checkpoint(fatal=False)  # the old one is still right, only more of the log is rescanned

    def maybe_flush(self, now_ms: int) -> None:
        if self._unflushed_messages == 0:
            return
        if (self._unflushed_messages >= self.config.flush_interval_messages
                or now_ms - self._first_unflushed_ms >= self.config.flush_interval_ms):  # fmt: skip
            self.flush()

    def apply_retention(self, now_ms: int) -> int:
        self._check_usable()
        if not deletes(self.config.cleanup_policy):
            return 0
        count = max(self._expired_by_time(now_ms), self._expired_by_size())
        if count == 0:
            return 0
        return self._move_log_start(self._bases[count])

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: see `PartitionLog.delete_records`. What lies below the new start is flushed first, so
        a crash cannot cut the log back below a start that is already checkpointed."""
        self._check_usable()
        new_start = deletion_start(
            f"{self.topic}-{self.partition}", offset, self._log_start, self.log_end_offset, self.config.cleanup_policy
        )
        if new_start > self._log_start:
            if new_start > self._flushed:
                self.flush()
            self._move_log_start(new_start)
        return self._log_start

    def close(self) -> None:
        """Flush, snapshot the producer state at the log end, checkpoint and close; raises KafkaStorageError if
        the disk fails (files are closed anyway)."""
        try:
            if self._failed is None:
                self.flush()
                self._take_snapshot(self.log_end_offset, durable=True)
                self._write_checkpoint()
        finally:
            self.close_without_flush()

    @property
    def failure(self) -> str | None:
        """Why the partition refuses all work (a disk error, or "closed"); None while it is usable."""
        return self._failed

    def recover(self) -> None:
        """Reopen a failed partition from disk, recovering it as at start (the torn tail after the last whole
        batch is cut, everything before it kept). Raises KafkaStorageError (the partition stays failed) if the
        disk still fails; a no-op unless the partition failed on a disk error."""
        if self._failed is None or self._failed == "closed":
            return
        self._reopen(self._dir)
        log.warning(
            "%s-%d recovered from %s: offsets %d to %d",
            self.topic,
            self.partition,
            self._dir,
            self._log_start,
            self.log_end_offset,
        )
        if self.producers is not None:  # what survived is the log's, not memory's
            self.use_producers(self.producers)

    async def resume(self) -> None:
        """PartitionLog.resume: `recover`, which restores the producers' state with the files."""
        self.recover()

    async def load_transactions(self) -> None:
        """Nothing to load: the transaction state was read with the files (at open, or by `recover`)."""

    async def epoch_history(self) -> EpochHistory:
        return SINGLE_NODE_EPOCHS

    def reopen_in(self, directory: str) -> None:
        """Go on from the partition's files in `directory`, in place (whoever holds this object keeps it), after
        `close`: herd.log.store moves a partition to another log directory so. Raises KafkaStorageError (the
        partition stays closed)."""
        self._reopen(directory)

    def roll(self) -> None:
        """Seal the active segment and start a new one, unless it is empty (Kafka's UnifiedLog.roll); raises
        KafkaStorageError (the active segment then stays active)."""
        self._check_usable()
        if self._segments[-1].size > 0:
            self._roll(self._segments[-1])

    def _reopen(self, directory: str) -> None:
        for segment in self._segments:
            segment.close()
        self._cold = None
        try:  # the caller logs a failed attempt, once: the fresh log stays quiet
            fresh = SegmentLog.open(self._fs, directory, self.topic, self.partition, self.config, report_errors=False)
        except OSError as error:
            raise KafkaStorageError(f"{self.topic}-{self.partition}: {_describe(error)}") from error
        cleaner_offset, report_errors, snapshot_source = self.cleaner_offset, self.report_errors, self.snapshot_source
        producers = self.producers
        vars(self).update(vars(fresh))
        self.report_errors, self.snapshot_source, self.producers = report_errors, snapshot_source, producers
        self.cleaner_offset = max(cleaner_offset, self._log_start)

    def close_without_flush(self) -> None:
        """Close the files; what was not flushed is recovered (or lost) on the next open."""
        for segment in self._segments:
            segment.close()
        self._cold = None
        self._failed = self._failed or "closed"

    # -- transactions ----------------------------------------------------------------------------------------------

    def _load_transactions(self) -> None:
        """At open: read the segments' transaction indexes (entries beyond the log end, whose markers a crash cut
        off, are dropped and the file rewritten, as Kafka's TransactionIndex.truncateTo), then rebuild the
        transaction state as Kafka's LogLoader rebuilds its producer state: from the latest snapshot holding it
        and the batch headers after it, markers read (a few dozen bytes each). A transaction aborted after that
        snapshot whose entry is missing from its segment's index (written, but not durable, before a crash) is
        added again. Without a snapshot the headers of the whole log are read once (the next roll or close writes
        one). Raises OSError."""
        end = self.log_end_offset
        for base, following in zip(self._bases, [*self._bases[1:], end], strict=True):
            path = self._txn_index_path(base)
            if not self._fs.exists(path):
                continue
            data = read_whole(self._fs, path)
            entries = decode_aborted(data)
            kept = [txn for txn in entries if base <= txn.last_offset < min(following, end)]
            if len(kept) != len(entries) or len(data) != len(kept) * ABORTED_ENTRY.size:
                log.warning(
                    "%s: %d entries of %s lie beyond the log (cut back after a crash) or are torn; dropped",
                    self._dir,
                    len(entries) - len(kept),
                    path,
                )
                write_atomically(self._fs, path, encode_aborted(kept))
            if kept:
                self._aborted[base] = kept
        start, entries = self._transactions_snapshot()
        self.transactions.restore(entries)
        for header in self._headers_from(start):
            if header.producer_id < 0:
                continue
            marker = None
            if header.attributes & CONTROL_BIT:
                try:
                    batch = self.read(header.base_offset, 0, min_one=True)
                    marker = control_marker(batch)
                except LogError as error:
                    log.error(
                        "%s-%d: the control batch at offset %d cannot be read (%s); its transaction stays as it was",
                        self.topic,
                        self.partition,
                        header.base_offset,
                        error,
                    )
                    continue
            for txn in self.transactions.apply([(header, marker)], [header.base_offset], -1):
                base = self._bases[self._segment_index(txn.last_offset)]
                if txn not in self._aborted.get(base, ()):
                    self._add_aborted(base, [txn])
        self.transactions.last_stable_offset(end)

    def _transactions_snapshot(self) -> tuple[int, list[tuple[int, int, int, int]]]:
        """(offset, transaction state entries) of the latest snapshot that reads; (log start, []) if none does
        (`producer_state` deletes the unreadable ones)."""
        for offset in reversed(self._snapshots):
            try:
                return offset, producer_snapshots.read_transactions(self._fs, self._dir, offset)
            except (producer_snapshots.CorruptSnapshotError, OSError):
                continue
        return self._log_start, []

    # -- idempotent producers' state ----------------------------------------------------------------------------

    def use_producers(self, producers: ProducerStates, now_ms: int | None = None) -> None:
        """Keep this partition's producer state in `producers` (the node's): restore it from what the log holds
        (`producer_state`), aged at `now_ms` (default: the state's clock), check a client's appends with it and
        snapshot it at rolls and on close. The store calls this when it opens the partition, `recover` again.
        Raises KafkaStorageError."""
        producers.restore(
            self.topic,
            self.partition,
            self.producer_state(),
            now_ms=producers.clock() if now_ms is None else now_ms,
        )
        self.producers = producers
        topic, partition = self.topic, self.partition
        self.snapshot_source = lambda: producers.batches(topic, partition)

    def producer_state(self) -> list[ProducerBatch]:
        """The last batches (at most five) of every idempotent producer, in offset order, from which the
        producer state is rebuilt at open (herd.log.producer_state `ProducerStates.restore`), as Kafka's
        LogLoader does (apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/log/UnifiedLog.java,
        `rebuildProducerState`): the latest snapshot is read (one that fails its checks is deleted, with a
        warning, and the one before it tried), then the headers of the batches after it up to the log end.

        What this reads: one snapshot file, plus the 61-byte header of every batch after it (in 64 KiB windows;
        records are not read). After a clean close the snapshot is at the log end, so nothing more; after a
        crash, the batches since the last roll (at most one segment, `segment.bytes`); with no snapshot at all
        (a log written before herd kept them, or every snapshot corrupt), the headers of the whole log, once:
        the next roll or close writes one. Raises KafkaStorageError (the partition stays usable)."""
        self._check_usable()
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        kept: dict[int, deque[ProducerBatch]] = {}
        snapshot_end, stored = self._latest_snapshot(log_append)
        for batch in stored:
            kept.setdefault(batch.producer_id, deque(maxlen=RETAINED_PRODUCER_BATCHES)).append(batch)
        try:
            for h in self._headers_from(snapshot_end):
                if h.producer_id >= 0 and not h.attributes & CONTROL_BIT:
                    batch = ProducerBatch(
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.last_sequence,
                        h.base_offset,
                        h.last_offset,
                        h.record_count,
                        h.max_timestamp,
                        h.max_timestamp if log_append else -1,
                        self._log_start,
                    )
                    kept.setdefault(h.producer_id, deque(maxlen=RETAINED_PRODUCER_BATCHES)).append(batch)
        except OSError as error:
            raise self._storage_error(error, fatal=False) from error
        return sorted((b for batches in kept.values() for b in batches), key=lambda b: b.base_offset)

    def _latest_snapshot(self, log_append: bool) -> tuple[int, list[ProducerBatch]]:
        """(offset, batches) of the latest snapshot that passes its checks; (log start, []) if there is none."""
        while self._snapshots:
            offset = self._snapshots[-1]
            try:
                return offset, producer_snapshots.read(
                    self._fs, self._dir, offset, log_append_time=log_append, log_start_offset=self._log_start
                )
            except (producer_snapshots.CorruptSnapshotError, OSError) as error:
                log.warning(
                    "%s-%d: the producer state snapshot at offset %d is unusable (%s); deleting it and "
                    "reading the log from an older snapshot or its start",
                    self.topic,
                    self.partition,
                    offset,
                    error,
                )
                self._snapshots.pop()
                self._remove_snapshot(offset)
        return self._log_start, []

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """The headers of the batches from `offset` to the log end, segment by segment."""
        for segment in self._segments[self._segment_index(offset) :]:
            yield from self._readable(segment).batch_headers(max(offset, segment.base_offset))

    def _take_snapshot(self, offset: int, *, durable: bool) -> None:
        """Snapshot `snapshot_source` at `offset`, unless there is no source or the latest snapshot is there
        already. A failure is logged, not raised: without it the next open reads more of the log."""
        if self.snapshot_source is None or (self._snapshots and self._snapshots[-1] >= offset):
            return
        try:
            producer_snapshots.write(
                self._fs,
                self._dir,
                offset,
                self.snapshot_source(),
                durable=durable,
                transactions=self.transactions.entries(),
            )
        except OSError as error:
            log.warning(
                "%s-%d: the producer state snapshot at offset %d could not be written (%s); the next open "
                "reads the log from an older one",
                self.topic,
                self.partition,
                offset,
                _describe(error),
            )
            return
        self._snapshots.append(offset)
        if not durable:
            self._unsynced_snapshots.append(offset)
            self._dir_dirty = True

    def _sync_snapshots(self) -> None:
        """fsync the snapshots written at rolls since the last flush; one that fails is deleted (logged)."""
        while self._unsynced_snapshots:
            offset = self._unsynced_snapshots.pop()
            try:
                producer_snapshots.sync(self._fs, self._dir, offset)
            except OSError as error:
                log.warning(
                    "%s-%d: the producer state snapshot at offset %d could not be synced (%s); deleting it",
                    self.topic,
                    self.partition,
                    offset,
                    _describe(error),
                )
                if offset in self._snapshots:
                    self._snapshots.remove(offset)
                self._remove_snapshot(offset)

    def _delete_snapshots_below_start(self) -> None:
        """Delete the producer state snapshots below the log start offset, once retention (or DeleteRecords) has
        moved it (Kafka's ProducerStateManager.deleteSnapshotsBefore). A failure is logged: the next open
        deletes what is left."""
        while self._snapshots and self._snapshots[0] < self._log_start:
            self._remove_snapshot(self._snapshots.pop(0))

    def _remove_snapshot(self, offset: int) -> None:
        path = producer_snapshots.snapshot_path(self._dir, offset)
        if offset in self._unsynced_snapshots:
            self._unsynced_snapshots.remove(offset)
        try:
            if self._fs.exists(path):
                self._fs.remove(path)
        except OSError as error:
            log.warning(
                "%s-%d: the producer state snapshot %s could not be deleted (%s)",
                self.topic,
                self.partition,
                path,
                _describe(error),
            )
        self._dir_dirty = True

    # -- compaction hooks (herd.log.compaction) --------------------------------------------------------------------

    @property
    def filesystem(self) -> FileSystem:
        return self._fs

    @property
    def directory(self) -> str:
        return self._dir

    def cleanable_segments(self) -> list[tuple[int, int, int]]:
        """(base, end, size) of the sealed segments wholly below the flushed offset; never the active one."""
        self._check_usable()
        out = []
        for segment, end in zip(self._segments[:-1], self._bases[1:]):
            if end > self._flushed:
                break
            out.append((segment.base_offset, end, segment.size))
        return out

    def holds_segments(self, bases: tuple[int, ...], end: int) -> bool:
        """True if `bases` are consecutive segments of this log, sealed, the last one ending at `end`."""
        if self._failed is not None or bases[0] not in self._bases:
            return False
        i = self._bases.index(bases[0])
        following = self._bases[i + len(bases)] if i + len(bases) < len(self._bases) else None
        return tuple(self._bases[i : i + len(bases)]) == bases and following == end

    def replace_segments(self, bases: tuple[int, ...], end: int) -> None:
        """Put the segment now stored at `bases[0]` (compacted, ending at `end`) in place of the segments
        `bases`, whose files are gone. The caller makes sure no flush of this log runs meanwhile."""
        i = self._bases.index(bases[0])
        for old in self._segments[i : i + len(bases)]:
            if old is self._cold:
                self._cold = None
            old.close()
        segment = self._storage(lambda: Segment.open_sealed(self._fs, self._dir, bases[0], end,
                                                            self.config.index_interval_bytes))  # fmt: skip
        self._segments[i : i + len(bases)] = [segment]
        self._bases[i : i + len(bases)] = [bases[0]]
        self._max_record = None
        self._merge_txn_indexes(bases)

    def _merge_txn_indexes(self, bases: tuple[int, ...]) -> None:
        """After compaction put one segment in place of `bases`: their transaction indexes become its one in memory
        (the cleaner keeps markers, so the aborted transactions stay as they were). The files are the swap's: it
        installed the merged `<base>.txnindex` with the cleaned segment and removed the replaced ones (herd.log.
        compaction `_write_txn_index`, herd.log.swap)."""
        merged = [txn for base in bases for txn in self._aborted.pop(base, [])]
        for base in bases:
            self._unsynced_txn_indexes.discard(base)
        if merged:
            self._aborted[bases[0]] = merged

    def set_config(self, config: LogConfig) -> None:
        """PartitionLog.set_config: every use reads `config` when it acts, so the next append, roll, flush check
        or retention check follows the new one."""
        self.config = config

    def run_storage(self, operation: Callable[[], T]) -> T:
        """Run a disk operation on this log's files; an OSError fails the log (KafkaStorageError)."""
        return self._storage(operation)

    # -- internals -----------------------------------------------------------------------------------------------

    def _segment_with_room(self, size: int, last_offset: int) -> Segment:
        active = self._segments[-1]
        too_big = active.size > 0 and active.size + size > self.config.segment_bytes
        if too_big or last_offset - active.base_offset > INT32_MAX:
            active = self._roll(active)
        return active

    def _roll(self, active: Segment) -> Segment:
        """Seal `active` and start a new segment. Nothing of the log changes until both succeeded: if either
        raises, `active` stays the active segment (its index files cut back, a half-created new segment removed)
        and the error is not fatal, so the partition stays readable and the next append rolls again."""
        try:
            active.seal()
            new = Segment.create(self._fs, self._dir, self.log_end_offset)
        except OSError as error:
            raise self._storage_error(error, fatal=isinstance(error, CutBackFailed)) from error
        active.unload()  # a sealed segment keeps no file or index open until it is read
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._dir_dirty = True
        self._take_snapshot(new.base_offset, durable=False)
        return new

    def _readable(self, segment: Segment) -> Segment:
        """`segment` with its file open and offset index loaded (only one sealed segment is kept loaded)."""
        if segment is self._segments[-1] or segment is self._cold:
            return segment
        if self._cold is not None:
            self._cold.unload()
        segment.load(self.config.index_interval_bytes)
        self._cold = segment
        return segment

    def _max_record_offset(self, segment: Segment) -> int:
        """Offset of the first record holding `segment`'s max timestamp, remembered until that max changes."""
        key = (segment.base_offset, segment.max_timestamp, segment.max_timestamp_offset)
        if self._max_record is None or self._max_record[0] != key:
            found = self._storage(lambda: self._readable(segment).max_timestamp_record(
                self.config.index_interval_bytes), fatal=False)  # fmt: skip
            self._max_record = key, segment.max_timestamp_offset if found is None else found[0]
        return self._max_record[1]

    def _move_log_start(self, new_start: int) -> int:
        """Move the log start offset up to `new_start` (retention, DeleteRecords) and delete the segments wholly
        below it, never the active one, as Kafka's UnifiedLog.deleteLogStartOffsetBreachedSegments does (a
        segment goes once the next one's base offset is at most the log start). The checkpoint holding the new
        start is durable before any file goes; files a crash left behind are deleted by the next open. Returns
        how many segments were deleted."""
        count = max(bisect_right(self._bases, new_start) - 1, 0)  # the segments the next one's base allows to go
        doomed, self._segments = self._segments[:count], self._segments[count:]
        self._bases = self._bases[count:]
        self._log_start = max(self._log_start, new_start)
        self._flushed = max(self._flushed, self._log_start)
        self._write_checkpoint()
        for segment in doomed:
            if segment is self._cold:
                self._cold = None
            self._aborted.pop(segment.base_offset, None)
            self._unsynced_txn_indexes.discard(segment.base_offset)
            self._storage(segment.delete)
        self._dir_dirty = self._dir_dirty or bool(doomed)
        self._delete_snapshots_below_start()
        return count

    def _expired_by_time(self, now_ms: int) -> int:
        if self.config.retention_ms < 0:
            return 0
        count = 0
        for segment in self._segments[:-1]:
            if segment.max_timestamp < 0 or now_ms - segment.max_timestamp <= self.config.retention_ms:
                break
            count += 1
        return count

    def _expired_by_size(self) -> int:
        if self.config.retention_bytes < 0:
            return 0
        excess = self.size_in_bytes - self.config.retention_bytes
        count = 0
        for segment in self._segments[:-1]:
            if excess < segment.size:
                break
            excess -= segment.size
            count += 1
        return count

    def _write_checkpoint(self, *, fatal: bool = True) -> None:
        text = f"0 {self._log_start} {self._flushed}\n".encode()
        path = posixpath.join(self._dir, CHECKPOINT)
        self._storage(lambda: write_atomically(self._fs, path, text), fatal=fatal)
        self._checkpointed_segment = self._bases[self._segment_index(self._flushed)]

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise KafkaStorageError(f"{self.topic}-{self.partition} is unusable: {self._failed}")

    def _storage(self, operation: Callable[[], T], *, fatal: bool = True) -> T:
        """Run a disk operation; an OSError becomes KafkaStorageError, and with `fatal` fails the partition."""
        try:
            return operation()
        except OSError as error:
            raise self._storage_error(error, fatal=fatal) from error

    def _storage_undone(self, operation: Callable[[], T]) -> T:
        """`_storage` for an operation that undoes a failed write itself: fatal only if that failed too."""
        try:
            return operation()
        except OSError as error:
            raise self._storage_error(error, fatal=isinstance(error, CutBackFailed)) from error

    def _storage_error(self, error: OSError, *, fatal: bool) -> KafkaStorageError:
        """The KafkaStorageError for `error`; logged (ERROR) if it is the first since the last success."""
        what = _describe(error)
        name = f"{self.topic}-{self.partition}"
        quiet = not self.report_errors
        if fatal and self._failed is None and not quiet:
            log.error(
                "%s is offline after a disk error: %s; it answers KAFKA_STORAGE_ERROR until it is recovered "
                "from disk (retried automatically)",
                name,
                what,
            )
        elif not fatal and self._failed is None and self._write_error is None and not quiet:
            log.error(
                "%s: a disk operation failed and was undone: %s; the partition stays readable, writes answer "
                "KAFKA_STORAGE_ERROR while this lasts",
                name,
                what,
            )
        if fatal:
            self._failed = self._failed or f"disk error: {what}"
        else:
            self._write_error = what
        return KafkaStorageError(f"{name}: {what}")

    def _segment_index(self, offset: int) -> int:
        """Index of the segment holding `offset` (the first one for offsets below the log)."""
        return max(bisect_right(self._bases, offset) - 1, 0)


def _describe(error: OSError) -> str:
    """ "No space left on device (ENOSPC) on /data/t-0/00000000000000000000.log": the OS error and the path."""
    code = errno.errorcode.get(error.errno or 0)
    text = error.strerror or str(error)
    return f"{text}{f' ({code})' if code else ''}" + (f" on {error.filename}" if error.filename else "")


def _read_checkpoint(fs: FileSystem, directory: str) -> tuple[int, int]:
    """(log start offset, recovery point); (0, 0) when missing or unreadable, which makes recovery scan all
    (logged: a partition directory with segments but no readable checkpoint was not written by a clean herd)."""
    path = posixpath.join(directory, CHECKPOINT)
    if not fs.exists(path):
        if any(name.endswith(".log") for name in fs.listdir(directory)):
            log.warning("%s is missing; scanning every segment of %s", path, directory)
        return 0, 0
    f = fs.open(path, "r")
    try:
        raw = f.pread(0, 256)
    finally:
        f.close()
    fields = raw.split()
    if len(fields) != 3 or fields[0] != b"0" or not all(x.isdigit() for x in fields[1:]):
        log.warning("%s is unreadable (%r); scanning every segment, keeping every offset", path, raw[:64])
        return 0, 0
    return int(fields[1]), int(fields[2])


def _usable_snapshots(fs: FileSystem, directory: str, log_start: int, log_end: int) -> list[int]:
    """The offsets of the producer state snapshots in [log_start, log_end]; the others are deleted (below the
    start: retention moved it past them; beyond the end: the log was cut back below them after a crash), as
    Kafka's ProducerStateManager.truncateAndReload does."""
    usable = []
    for offset in producer_snapshots.snapshot_offsets(fs, directory):
        if log_start <= offset <= log_end:
            usable.append(offset)
        else:
            fs.remove(producer_snapshots.snapshot_path(directory, offset))
    return usable


def _segment_bases(fs: FileSystem, directory: str) -> list[int]:
    """Base offsets of the segment logs in `directory`; stray files (tmp, orphan indexes) are removed."""
    names = fs.listdir(directory)
    bases = sorted(int(n[:20]) for n in names if n.endswith(".log") and len(n) == 24 and n[:20].isdigit())
    logs = {f"{b:020d}" for b in bases}
    for name in names:
        stem, _, suffix = name.partition(".")
        if name.endswith(".tmp") or (suffix in ("index", "timeindex", "txnindex") and stem not in logs):
            fs.remove(posixpath.join(directory, name))
    return bases


def _recover_segments(fs: FileSystem, directory: str, bases: list[int], log_start: int, recovery_point: int,
                      interval: int) -> list[Segment]:  # fmt: skip
    """Open the segments that hold offsets >= `log_start`, scanning those not wholly below `recovery_point`
    and the last; a segment whose end does not meet the next one's base ends the log (later ones are deleted)."""
    segments: list[Segment] = []
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        if next_base is not None and next_base <= log_start:
            Segment(fs, directory, base).delete()  # retention removed it from the log; finish deleting it
            continue
        if segments and segments[-1].next_offset != base:
            if base > recovery_point:  # after a torn tail was cut: never flushed, dropped as Kafka's LogLoader does
                log.warning("%s: dropping segment %d, unflushed data after the incomplete batch cut at offset %d",
                               directory, base, segments[-1].next_offset)  # fmt: skip
                Segment(fs, directory, base).delete()
                continue
            log.error("%s: offsets %d-%d are missing (no segment file holds them); the segments after them are "
                         "kept", directory, segments[-1].next_offset, base - 1)  # fmt: skip
        if next_base is not None and next_base <= recovery_point:
            segments.append(Segment.open_sealed(fs, directory, base, next_base, interval))
            end = segments[-1].end_on_disk()
            if end is not None and end < next_base:  # the next segment file was deleted (or renamed)
                log.error("%s: offsets %d-%d are missing (no segment file holds them); the segments after "
                             "them are kept", directory, end, next_base - 1)  # fmt: skip
        else:
            segments.append(Segment.recover(fs, directory, base, interval, recovery_point))
    for segment in segments[:-1]:
        if segment.file is not None:  # scanned: seal it like a roll would have
            segment.seal()
            segment.unload()
    return segments
