"""Transactions in one partition: who has a transaction ongoing, the last stable offset, aborted transactions.

This is the transactional half of Kafka's ProducerStateManager / ProducerAppendInfo (apache/kafka
storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerAppendInfo.java, ProducerStateManager.java),
kept by the log itself (both backends) because markers reach the log directly (`PartitionLog.append_control`, or
a control batch a coordinator appends) and the log answers the last stable offset. Sequence numbers and duplicate
detection are herd.log.producer_state's. Pure: no files, no clock (times are passed in).

What a batch does, checked before anything is written (`check`) and applied once it is (`apply`):
- a data batch of a producer (producer id >= 0): refused with InvalidProducerEpochError when its epoch is older
  than the one the partition last saw from that producer (its batches or its markers); a non-transactional batch
  while that producer's transaction is ongoing is refused with InvalidTxnStateError; a transactional batch of a
  producer with no ongoing transaction begins one at its base offset (appendDataBatch);
- a marker (a control batch holding an EndTransactionMarker): its producer epoch must not be older than the last
  seen (transaction version 2, KIP-890: it must be newer, unless it repeats a marker already written for that
  epoch with no transaction ongoing, KAFKA-19999), nor its coordinator epoch (TransactionCoordinatorFencedError).
  It ends the producer's ongoing transaction, if any (a marker with none is still written and only moves the
  producer's epochs, as Kafka's `appendEndTxnMarker` returns no CompletedTxn then), and takes the producer to the
  marker's epoch: a bump by the coordinator (KIP-360, KIP-890) fences the older epoch's batches from then on.
  An aborted transaction becomes an `AbortedTxn` (producer id, first offset, marker offset, and the last stable
  offset once it is complete: the first offset of the next ongoing transaction of another producer, else the
  marker's offset + 1, as ProducerStateManager.lastStableOffset(CompletedTxn)).

The last stable offset (UnifiedLog.lastStableOffset): the first unstable offset when it is below the high
watermark, else the high watermark. An offset is unstable while its transaction is undecided, and, on a log
whose appends become visible only when committed (PostgreSQL), while its marker is above the high watermark
(ProducerStateManager.firstUnstableOffset with its `unreplicatedTxns`, dropped by onHighWatermarkUpdated).

The state a log must keep across restarts is `entries()`: per producer its epoch, coordinator epoch and the first
offset of its ongoing transaction (-1 if none), the fields Kafka's producer snapshot holds for it.

Memory: one small entry per producer that wrote transactional batches or markers here; an entry with no
transaction ongoing is forgotten after EXPIRATION_MS without appends (Kafka's producer.id.expiration.ms default;
Kafka never expires a producer whose transaction is ongoing, nor does this).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from herd.log.api import InvalidProducerEpochError, InvalidTxnStateError, TransactionCoordinatorFencedError
from herd.log.batch import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader
from herd.log.records import control_marker

EXPIRATION_MS = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms default
MAX_GUARDS = 10_000  # verifications in progress per partition (`start_verification`)
NO_EPOCH = -1

# One entry of a segment's transaction index (`<base>.txnindex`), as Kafka's AbortedTxn (apache/kafka
# storage/src/main/java/org/apache/kafka/storage/internals/log/AbortedTxn.java): version int16 (0), producer id
# int64, first offset int64, last offset int64 (the marker's), last stable offset int64; 34 bytes.
ABORTED_ENTRY = struct.Struct(">hqqqq")
TXN_INDEX_SUFFIX = ".txnindex"


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of its ABORT marker
    last_stable_offset: int  # the partition's last stable offset once it was complete


def encode_aborted(txns: Iterable[AbortedTxn]) -> bytes:
    return b"".join(
        ABORTED_ENTRY.pack(0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset) for t in txns
    )


def decode_aborted(data: bytes) -> list[AbortedTxn]:
    """The entries of a transaction index file; a torn last entry (a crash in its write) is left out."""
    whole = len(data) - len(data) % ABORTED_ENTRY.size
    return [AbortedTxn(pid, first, last, lso) for _, pid, first, last, lso in ABORTED_ENTRY.iter_unpack(data[:whole])]


def collect_aborted(txns: Iterable[AbortedTxn], start: int, end: int) -> tuple[list[tuple[int, int]], bool]:
    """(producer id, first offset) of the aborted transactions among `txns` (one segment's, in marker order) that
    overlap [start, end), and whether the search is complete (an entry's last stable offset reached `end`, so no
    later segment can hold one), as Kafka's TransactionIndex.collectAbortedTxns."""
    out = []
    for txn in txns:
        if txn.last_offset >= start and txn.first_offset < end:
            out.append((txn.producer_id, txn.first_offset))
        if txn.last_stable_offset >= end:
            return out, True
    return out, False


@dataclass(slots=True)
class _Producer:
    epoch: int
    coordinator_epoch: int = -1
    txn_first_offset: int = -1  # -1: no transaction ongoing
    last_ms: int = -1  # -1: restored, counted from its next use


Marker = tuple[bool, int]  # (commit, coordinator epoch)


class TransactionState:
    """The transactions of one partition (see the module docstring)."""

    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}
        self._ongoing: dict[int, int] = {}  # first offset -> producer id, ascending (appends come in offset order)
        self._unreplicated: dict[int, tuple[int, int]] = {}  # first offset -> (producer id, marker offset)
        self._expired_ms = -1  # when `expire` last looked
        self._guards: dict[int, int] = {}  # producer id -> verification token (KIP-890, `start_verification`)
        self._tokens = 0

    # -- checking and applying appends -------------------------------------------------------------------------

    def producing(self, records: bytes | bytearray | memoryview,
                  headers: Sequence[BatchHeader]) -> list[tuple[BatchHeader, Marker | None]]:  # fmt: skip
        """What `check` and `apply` take for an append of `headers` (in `records`): each producer's batch with its
        marker (None for a data batch). Empty when no producer used transactions in this partition and none of the
        batches is transactional or a control batch: an idempotent producer's batches alone change nothing here,
        so its appends pay nothing for transactions."""
        if not self._producers and not any(h.attributes & (CONTROL_BIT | TRANSACTIONAL_BIT) for h in headers):
            return []
        return [
            (h, control_marker(records, h) if h.attributes & CONTROL_BIT else None)
            for h in headers
            if h.producer_id >= 0
        ]

    def check(self, batches: Sequence[tuple[BatchHeader, Marker | None]], transaction_version: int = 0) -> None:
        """Raise what Kafka raises for these batches (in order, each seeing the ones before it), before any is
        written. `batches`: each header with its marker (None for data batches)."""
        seen: dict[int, tuple[int, int, bool]] = {}  # producer id -> (epoch, coordinator epoch, ongoing)
        for header, marker in batches:
            pid = header.producer_id
            if pid < 0:
                continue
            entry = self._producers.get(pid)
            epoch, coordinator_epoch, ongoing = seen.get(pid) or (
                (entry.epoch, entry.coordinator_epoch, entry.txn_first_offset >= 0) if entry else (NO_EPOCH, -1, False)
            )
            if header.attributes & CONTROL_BIT:
                if marker is None:
                    continue
                _check_marker_epoch(pid, header.producer_epoch, epoch, ongoing, transaction_version)
                if marker[1] < coordinator_epoch:
                    raise TransactionCoordinatorFencedError(
                        f"marker of producer {pid} has coordinator epoch {marker[1]}, older than {coordinator_epoch}"
                    )
                seen[pid] = (header.producer_epoch, marker[1], False)
                continue
            if header.producer_epoch < epoch:
                raise InvalidProducerEpochError(
                    f"producer {pid} has epoch {header.producer_epoch}, older than the last seen epoch {epoch}"
                )
            transactional = bool(header.attributes & TRANSACTIONAL_BIT)
            if ongoing and not transactional:
                raise InvalidTxnStateError(
                    f"expected a transactional write from producer {pid}: its transaction is ongoing"
                )
            seen[pid] = (header.producer_epoch, coordinator_epoch, ongoing or transactional)

    def apply(self, batches: Sequence[tuple[BatchHeader, Marker | None]], base_offsets: Sequence[int],
              now_ms: int) -> list[AbortedTxn]:  # fmt: skip
        """Record batches just appended at `base_offsets` (checked by `check`); the transactions they aborted."""
        aborted = []
        for (header, marker), base in zip(batches, base_offsets, strict=True):
            pid = header.producer_id
            if pid < 0:
                continue
            if header.attributes & CONTROL_BIT:
                if marker is not None:
                    done = self._end(pid, header.producer_epoch, marker, base, now_ms)
                    if done is not None:
                        aborted.append(done)
                continue
            entry = self._producers.get(pid)
            transactional = bool(header.attributes & TRANSACTIONAL_BIT)
            if entry is None:
                if not transactional:
                    continue  # an idempotent producer that never used transactions here: herd.log.producer_state's
                entry = self._producers[pid] = _Producer(header.producer_epoch)
            entry.epoch = max(entry.epoch, header.producer_epoch)
            entry.last_ms = now_ms
            if transactional and entry.txn_first_offset < 0:
                entry.txn_first_offset = base
                self._ongoing[base] = pid
        return aborted

    def _end(self, pid: int, epoch: int, marker: Marker, offset: int, now_ms: int) -> AbortedTxn | None:
        entry = self._producers.get(pid)
        if entry is None:
            entry = self._producers[pid] = _Producer(epoch)
        commit, coordinator_epoch = marker
        done = None
        first = entry.txn_first_offset
        if first >= 0:
            del self._ongoing[first]
            self._unreplicated[first] = (pid, offset)
            if not commit:
                later = next(iter(self._ongoing), None)  # the next ongoing transaction, of another producer
                done = AbortedTxn(pid, first, offset, offset + 1 if later is None else later)
        entry.epoch, entry.coordinator_epoch, entry.txn_first_offset, entry.last_ms = (
            epoch,
            coordinator_epoch,
            -1,
            now_ms,
        )
        self._guards.pop(pid, None)  # a verification made before this marker is stale
        return done

    # -- offsets ---------------------------------------------------------------------------------------------------

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's UnifiedLog.lastStableOffset given the high watermark (markers below it are stable)."""
        if self._unreplicated:
            # list() copies in one step, so a reader on another thread than the appender (a coordinator's
            # partition, appended by its flusher thread) never iterates a dict being changed
            for first, (_, marker) in list(self._unreplicated.items()):
                if marker < high_watermark:
                    self._unreplicated.pop(first, None)
        unstable = min(next(iter(self._ongoing), high_watermark), min(self._unreplicated, default=high_watermark))
        return min(unstable, high_watermark)

    def ongoing(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of the ongoing transactions, by first offset."""
        return [(pid, first) for first, pid in self._ongoing.items()]

    def producer_epoch(self, producer_id: int) -> int:
        """The latest epoch seen here from a producer that used transactions (NO_EPOCH if none)."""
        entry = self._producers.get(producer_id)
        return NO_EPOCH if entry is None else entry.epoch

    # -- keeping it ------------------------------------------------------------------------------------------------

    def expire(self, now_ms: int, expiration_ms: int = EXPIRATION_MS) -> None:
        """Forget the producers with no ongoing transaction that appended nothing for `expiration_ms` (looked at
        once a minute at most)."""
        if not self._producers or 0 <= now_ms - self._expired_ms < 60_000:
            return
        self._expired_ms = now_ms
        for pid in [p for p, e in self._producers.items() if e.txn_first_offset < 0 and e.last_ms >= 0
                    and now_ms - e.last_ms >= expiration_ms]:  # fmt: skip
            del self._producers[pid]
        for entry in self._producers.values():
            if entry.last_ms < 0:
                entry.last_ms = now_ms

    def entries(self) -> list[tuple[int, int, int, int]]:
        """(producer id, epoch, coordinator epoch, first offset of its ongoing transaction or -1) per producer."""
        return [(pid, e.epoch, e.coordinator_epoch, e.txn_first_offset) for pid, e in self._producers.items()]

    # -- KIP-890 part 1: verification guards ---------------------------------------------------------------------

    def start_verification(self, producer_id: int) -> int | None:
        """None when the producer's transaction is ongoing here (its write needs no verification); else a token
        that `verified` accepts until a marker of the producer is applied (Kafka's VerificationGuard,
        UnifiedLog.maybeStartTransactionVerification). At most MAX_GUARDS are kept (the oldest is dropped: its
        write is then refused INVALID_TXN_STATE and retried by the producer's next transaction)."""
        entry = self._producers.get(producer_id)
        if entry is not None and entry.txn_first_offset >= 0:
            return None
        self._tokens += 1
        self._guards.pop(producer_id, None)
        self._guards[producer_id] = self._tokens
        if len(self._guards) > MAX_GUARDS:
            del self._guards[next(iter(self._guards))]
        return self._tokens

    def verified(self, producer_id: int, token: int) -> bool:
        """Whether the guard `start_verification` gave still holds (no marker of the producer since); the guard is
        used up either way."""
        return self._guards.pop(producer_id, None) == token

    def restore(self, entries: Iterable[tuple[int, int, int, int]]) -> None:
        """Start again from `entries` (as `entries()` gave them, e.g. from a snapshot)."""
        self._guards.clear()
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        for pid, epoch, coordinator_epoch, first in sorted(entries, key=lambda e: e[3]):
            self._producers[pid] = _Producer(epoch, coordinator_epoch, first)
            if first >= 0:
                self._ongoing[first] = pid

    def __bool__(self) -> bool:
        return bool(self._producers)


def _check_marker_epoch(pid: int, epoch: int, current: int, ongoing: bool, transaction_version: int) -> None:
    """ProducerAppendInfo.checkProducerEpoch for a marker: TV0/1 refuse an older epoch; TV2 refuses one that is
    not newer, except the same epoch with no transaction ongoing (a retried marker, KAFKA-19999)."""
    if transaction_version >= 2:
        if epoch < current or (epoch == current and ongoing):
            raise InvalidProducerEpochError(f"marker of producer {pid} has epoch {epoch}, not newer than {current}")
    elif epoch < current:
        raise InvalidProducerEpochError(f"marker of producer {pid} has epoch {epoch}, older than {current}")
