"""The producers' state of each partition, kept with its log as Kafka's ProducerStateManager is (apache/kafka
storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerStateManager.java, ProducerAppendInfo.java):
per-partition sequence checks and duplicate detection for idempotent producers.

A producer with an id (from InitProducerId) numbers its batches per partition. For each (partition, producer id)
herd remembers the epoch and the last five batches appended (first/last sequence and offsets): a retried batch
that matches one of them is not appended again, and the answer carries the offsets it got the first time
(Kafka answers a duplicate with NONE and the original base offset). A batch from an older epoch gets
INVALID_PRODUCER_EPOCH; a gap in the sequence gets OUT_OF_ORDER_SEQUENCE_NUMBER. Transactional batches are
checked here as any idempotent producer's; what is transactional about them (epochs moved by markers, the ongoing
transaction, INVALID_TXN_STATE) the log checks and keeps in its `transactions` (herd.log.transactions), since
markers reach the log without passing here.

Where it runs: a log's `append(records, now_ms, client=True)` (Produce, Kafka's AppendOrigin.CLIENT) is
`client_append`: the records checked as Kafka's LogValidator does, then `ProducerStates.append`, which checks the
batches, appends them with the log's plain `append` and records them, then the flush log.flush.* asks for. A
coordinator's appends (plain `append`) are not checked here, as Kafka checks sequences only for a client's
(ProducerAppendInfo.maybeValidateDataBatch: AppendOrigin.CLIENT). One `ProducerStates` holds the state of every
partition of a node, because its bound is the node's: the stores hand it to each log they open
(`SegmentStore.producers`, `PgLogStore(producers=...)`). The rest of a partition's producer state is the log's
too: its transaction state (herd.log.transactions) and, embedded, the snapshots of both
(herd.log.producer_snapshots).

The state is bounded, since every producer id a client invents costs an entry (about 1.5 KB): an entry not
appended to for `producer.id.expiration.ms` (Kafka's setting, one day by default) is forgotten, as Kafka's
ProducerStateManager.removeExpiredProducers does, and beyond `herd.producer.state.max.entries` the least recently
used entry is forgotten (Kafka has no such cap; it throttles InitProducerId instead, KIP-936). Entries are kept
in order of last use, so both cost O(1) per append. A forgotten producer is treated as a new one: its next batch
is accepted with whatever sequence it has, so only a retry of a batch older than that is not recognised.

The state survives a restart as Kafka's does (ProducerStateManager's snapshots): an embedded partition restores
its state when the segment store opens it, or when it is recovered from disk (`SegmentLog.use_producers`: the
latest snapshot and the batch headers after it), and snapshots it at every segment roll and on close
(herd.log.producer_snapshots). So after a clean stop or a kill -9 a retried batch written before it is still
answered as a duplicate, and a gap in the sequence still refused. In cluster mode the batches in PostgreSQL carry
the producer fields, so a node taking a partition over rebuilds its state from them (`rebuild`).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from herd.log.api import (
    RETAINED_PRODUCER_BATCHES,
    ActiveProducer,
    AppendResult,
    InvalidProducerEpochError,
    InvalidRecordError,
    LogConfig,
    NotLeaderError,
    OutOfOrderSequenceError,
    PartitionLog,
    ProducerBatch,
    RemotePartitionLog,
)
from herd.log.batch import CONTROL_BIT, INT32_MAX, BatchHeader, iter_headers
from herd.log.records import check_records, check_timestamps
from herd.log.transactions import TransactionState

log = logging.getLogger(__name__)

CACHED_BATCHES = RETAINED_PRODUCER_BATCHES  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
DEFAULT_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms (Kafka's default, one day)
DEFAULT_MAX_ENTRIES = 100_000  # herd.producer.state.max.entries
_WARN_EVERY_MS = 60_000


@dataclass(frozen=True, slots=True)
class _BatchMeta:
    first_seq: int
    last_seq: int
    max_timestamp: int  # the batch's (its append time on a LogAppendTime topic)
    result: AppendResult


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    last_append_ms: int = 0
    batches: deque[_BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None


def client_append(log: PartitionLog, producers: ProducerStates | None, records: bytes, config: LogConfig,
                  now_ms: int) -> AppendResult:  # fmt: skip
    """What `log.append(records, now_ms, client=True)` does for a Produce request's batches (Kafka's UnifiedLog.append
    with AppendOrigin.CLIENT): their records checked as Kafka's LogValidator does (`check_records`, bounded by the
    partition's `max_decompressed_bytes`; then, on a CreateTime topic, their timestamps: `check_timestamps`), the
    batches passed through the partition's `producers` around the log's plain `append` (without producer state,
    appended as they are), then the flush `flush.messages` or `flush.ms` asks for (`maybe_flush`). Raises the
    LogError subclasses of each step."""
    check_records(records, config.max_decompressed_bytes)
    if config.message_timestamp_type == "CreateTime":
        check_timestamps(records, now_ms, config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms)
    result = producers.append(log, records, now_ms) if producers is not None else log.append(records, now_ms)
    log.maybe_flush(now_ms)
    return result


class ProducerStates:
    """The producer state of every partition this node leads (each partition's log reaches it through its store).
    `clock`: the wall clock in ms, by which the state a log restores when it is opened or recovered is aged."""

    def __init__(
        self,
        expiration_ms: int = DEFAULT_EXPIRATION_MS,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        clock: Callable[[], int] | None = None,
    ) -> None:
        # (topic, partition, producer id) -> entry, least recently appended first; the same entries by partition
        self._entries: OrderedDict[tuple[str, int, int], _ProducerEntry] = OrderedDict()
        self._by_partition: dict[tuple[str, int], dict[int, _ProducerEntry]] = {}
        self.expiration_ms = expiration_ms
        self.max_entries = max_entries
        self.evicted = 0  # entries forgotten because of max_entries
        self._warned_ms: int | None = None
        # cluster mode: partitions just taken over whose state is being rebuilt (`restore`), each with the holds
        # and rebuilds still to finish; they take no append
        self.restoring: dict[tuple[str, int], int] = {}
        self.clock: Callable[[], int] = clock if clock is not None else _wall_ms

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, log: PartitionLog, records: bytes, now_ms: int) -> AppendResult:
        """Append a client's `records` to `log` (with its plain `append`) unless it is a retried duplicate; raises
        LogError subclasses (the log checks framing, CRC and max.message.bytes), NotLeaderError while the
        partition's state is being rebuilt. What `log.append(records, now_ms, client=True)` does."""
        self.check_loaded(log.topic, log.partition)
        self._expire(now_ms)
        headers = list(iter_headers(records))
        if any(h.attributes & CONTROL_BIT for h in headers):
            raise InvalidRecordError("control batches are written by the broker, not by producers")
        idempotent = [h for h in headers if h.producer_id >= 0]
        if not idempotent:
            return log.append(records, now_ms)
        if len(headers) == 1:
            duplicate = self._check(log, headers[0])
            if duplicate is not None:
                return duplicate
        else:
            for header in idempotent:
                self._check(log, header)
        result = log.append(records, now_ms)
        self._record(log, headers, result, now_ms)
        return result

    def _check(self, log: PartitionLog, header: BatchHeader) -> AppendResult | None:
        entry = self._entries.get((log.topic, log.partition, header.producer_id))
        if entry is None:
            return None  # unknown producer (new, or forgotten): accept any sequence
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than {entry.epoch}"
            )
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"new epoch {header.producer_epoch} must start at sequence 0, not {header.base_sequence}"
                )
            return None
        last = header.last_sequence
        for meta in entry.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == last:
                return meta.result
        expected = 0 if entry.last_seq in (None, INT32_MAX) else entry.last_seq + 1  # type: ignore[operator]
        if header.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id}: sequence {header.base_sequence}, expected {expected}"
            )
        return None

    def _record(self, log: PartitionLog, headers: list[BatchHeader], result: AppendResult, now_ms: int) -> None:
        offset = result.base_offset
        for header in headers:
            count = header.last_offset_delta + 1
            if header.producer_id >= 0:
                key = (log.topic, log.partition, header.producer_id)
                entry = self._entries.get(key)
                if entry is None or entry.epoch != header.producer_epoch:
                    entry = self._put(key, _ProducerEntry(header.producer_epoch))
                    self._bound(now_ms)
                entry.last_append_ms = now_ms
                self._entries.move_to_end(key)
                meta_result = AppendResult(
                    offset, offset + count - 1, result.log_append_time, result.log_start_offset, header.record_count
                )
                stamp = header.max_timestamp if result.log_append_time < 0 else result.log_append_time
                entry.batches.append(_BatchMeta(header.base_sequence, header.last_sequence, stamp, meta_result))
            offset += count

    def _expire(self, now_ms: int) -> None:
        """Forget the producers not appended to for expiration_ms (the oldest are first in line)."""
        entries = self._entries
        while entries:
            key, entry = next(iter(entries.items()))
            if now_ms - entry.last_append_ms < self.expiration_ms:
                return
            self._drop(key)

    def _bound(self, now_ms: int) -> None:
        """Forget the least recently used producers beyond max_entries; warn at most once a minute."""
        excess = len(self._entries) - self.max_entries
        for _ in range(excess):
            self._drop(next(iter(self._entries)))
            self.evicted += 1
        if excess > 0 and (self._warned_ms is None or now_ms - self._warned_ms >= _WARN_EVERY_MS):
            self._warned_ms = now_ms
            log.warning(
                "idempotent producer state is full (herd.producer.state.max.entries=%d): forgetting the "
                "least recently used producers (%d so far); a forgotten producer's retries of older "
                "batches are no longer recognised as duplicates",
                self.max_entries,
                self.evicted,
            )

    def restore(self, topic: str, partition: int, batches: Iterable[ProducerBatch], *, now_ms: int) -> None:
        """Replace the state of one partition with what its stored batches say (`PgPartitionLog.producer_state`:
        each idempotent producer's last batches, in offset order), as a new leader of the partition, or a
        leader that reloaded it, must before it appends: a retry of a batch the previous leader stored is then
        answered as a duplicate with its original offsets, and the next sequence is checked. A producer is
        restored with the epoch of its last batch and that epoch's batches (at most the last five); one whose
        last batch is older than expiration_ms (by the batch's max timestamp, as Kafka expires producers) is
        left out. Restored entries count as appended `now_ms`."""
        for producer_id in list(self._by_partition.get((topic, partition), ())):
            self._drop((topic, partition, producer_id))
        by_producer: dict[int, list[ProducerBatch]] = {}
        for batch in batches:
            by_producer.setdefault(batch.producer_id, []).append(batch)
        for producer_id, stored in by_producer.items():
            last = stored[-1]
            if now_ms - last.max_timestamp >= self.expiration_ms:
                continue
            entry = self._put((topic, partition, producer_id), _ProducerEntry(last.producer_epoch, now_ms))
            for b in stored:
                if b.producer_epoch == last.producer_epoch:
                    result = AppendResult(
                        b.base_offset, b.last_offset, b.log_append_time, b.log_start_offset, b.record_count
                    )
                    entry.batches.append(_BatchMeta(b.base_sequence, b.last_sequence, b.max_timestamp, result))
        self._bound(now_ms)

    def hold(self, topic: str, partition: int) -> None:
        """Refuse the partition's appends (NotLeaderError) until a `rebuild(..., held=True)` of it is done: a node
        that just took it over holds it from that moment, before the rebuild can start."""
        key = (topic, partition)
        self.restoring[key] = self.restoring.get(key, 0) + 1

    def check_loaded(self, topic: str, partition: int) -> None:
        """Raises NotLeaderError (retriable) while the partition is held for its `rebuild`: it then takes no append,
        neither a client's nor a transaction marker (the log's `append_control`), whose effect the rebuild's
        `restore`, from rows read before it, would undo. A marker applied to the state being replaced would leave
        its transaction ongoing in the log's memory once the rebuild ends, though its COMMIT or ABORT is stored:
        the last stable offset stuck below it for good. Kafka's partition leads only once its log and producer
        state are loaded, and answers WriteTxnMarkers NOT_LEADER_OR_FOLLOWER until then, which the transaction
        coordinator retries."""
        if self.restoring and (topic, partition) in self.restoring:
            raise NotLeaderError("the partition's producer state is being loaded")

    def _release(self, key: tuple[str, int]) -> None:
        left = self.restoring.get(key, 1) - 1
        if left > 0:
            self.restoring[key] = left
        else:
            self.restoring.pop(key, None)

    async def rebuild(self, log: RemotePartitionLog, now_ms: Callable[[], int], *, held: bool = False) -> None:
        """Rebuild one partition's state from its stored batches (a partition stored in PostgreSQL, just taken
        over or reloaded after a database error: what the previous leader or a failed commit stored is only
        known there). Until it is done the partition takes no append (`append` raises NotLeaderError, which is
        retriable), so a retry of a batch already stored is recognised as a duplicate, not appended again.
        `held`: the caller's `hold` of the partition, which this ends.

        Rebuilds of one partition may overlap (the node took it back while one begun for its earlier log still
        reads the database): the partition takes appends again only when the last of them is done. Opened when
        the first was done, an append accepted then is undone by the other's `restore` (of rows read before
        it), and the producer's next batch is refused as out of order although it follows the last one stored,
        which Kafka, whose new leader rebuilds the state from its log before it appends, never answers
        (ProducerStateManager, in apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/log/)."""
        key = (log.topic, log.partition)
        if not held:
            self.hold(*key)
        try:
            rows = await log.producer_state()
            await log.load_transactions()  # the log's own transaction state (herd.log.transactions)
            self.restore(log.topic, log.partition, rows, now_ms=now_ms())
        finally:
            self._release(key)

    def batches(self, topic: str, partition: int) -> list[ProducerBatch]:
        """The batches remembered for one partition, in offset order (what its snapshots hold)."""
        out = []
        for producer_id, entry in self._by_partition.get((topic, partition), {}).items():
            for meta in entry.batches:
                r = meta.result
                out.append(
                    ProducerBatch(
                        producer_id,
                        entry.epoch,
                        meta.first_seq,
                        meta.last_seq,
                        r.base_offset,
                        r.last_offset,
                        r.record_count,
                        meta.max_timestamp,
                        r.log_append_time,
                        r.log_start_offset,
                    )
                )
        out.sort(key=lambda b: b.base_offset)
        return out

    def active(self, topic: str, partition: int, now_ms: int,
               transactions: TransactionState | None = None) -> list[ActiveProducer]:  # fmt: skip
        """The producers of one partition whose state is kept (DescribeProducers), by producer id, after
        forgetting the expired ones; raises NotLeaderError while the partition's state is being rebuilt. With
        the log's `transactions` (herd.log.transactions), each producer also gets the coordinator epoch of its
        last marker and the start of its ongoing transaction, and the producers known only from transactional
        state there (markers, a transaction whose batches' state expired here) are listed too, with the epoch
        the log knows, as Kafka's ProducerStateEntry holds them."""
        self.check_loaded(topic, partition)
        self._expire(now_ms)
        entries = self._by_partition.get((topic, partition), {})
        txns = {
            pid: (epoch, coordinator_epoch, first)
            for pid, epoch, coordinator_epoch, first in (transactions.entries() if transactions else ())
        }
        out = {
            pid: ActiveProducer(pid, e.epoch, e.batches[-1].last_seq, e.batches[-1].max_timestamp)
            for pid, e in entries.items()
            if e.batches
        }
        for pid, (epoch, coordinator_epoch, first) in txns.items():
            known = out.get(pid)
            if known is None or epoch > known.epoch:  # a marker that bumped the epoch: its batches are older
                out[pid] = ActiveProducer(pid, epoch, -1, -1, coordinator_epoch, first)
            else:
                out[pid] = replace(known, coordinator_epoch=coordinator_epoch, current_txn_start_offset=first)
        return [out[pid] for pid in sorted(out)]

    def forget(self, topic: str) -> None:
        """Drop the state of a topic that is deleted."""
        for key in [k for k in self._by_partition if k[0] == topic]:
            for producer_id in list(self._by_partition[key]):
                self._drop((key[0], key[1], producer_id))

    def _put(self, key: tuple[str, int, int], entry: _ProducerEntry) -> _ProducerEntry:
        self._entries[key] = entry
        self._by_partition.setdefault(key[:2], {})[key[2]] = entry
        return entry

    def _drop(self, key: tuple[str, int, int]) -> None:
        del self._entries[key]
        partition = self._by_partition[key[:2]]
        del partition[key[2]]
        if not partition:
            del self._by_partition[key[:2]]


def _wall_ms() -> int:
    return int(time.time() * 1000)


NO_PRODUCERS = ProducerStates()  # what a log without the node's producer state answers from (always empty)
