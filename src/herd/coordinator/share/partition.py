"""The state of one share partition (KIP-932), as its leader keeps it: which records are handed to which member,
under which lock, how often they were delivered, and how far the share-partition start offset (SPSO) has moved.

Kafka's rules (confluentinc/kafka, branch 4.2: core/src/main/java/kafka/server/share/SharePartition.java and
server/src/main/java/org/apache/kafka/server/share/fetch/{InFlightState,InFlightBatch,RecordState}.java), pure: no
timers, no log, no persister. The caller passes the time, reads the log, writes the state batches this returns and
says whether the write succeeded.

- A record is AVAILABLE, ACQUIRED (by one member, under a lock of `lock_ms`), ACKNOWLEDGED or ARCHIVED (the last two
  are terminal). Records in flight are kept in batches of consecutive offsets, as they were acquired; an operation
  on part of a batch splits it into per-offset states for good (InFlightBatch.maybeInitializeOffsetStateUpdate).
- `acquire` hands AVAILABLE records (and new ones the fetch read) to a member: the delivery count goes up by one,
  the lock starts. It writes nothing (Kafka never persists an acquisition).
- `acknowledge` moves a member's ACQUIRED records: Accept to ACKNOWLEDGED, Reject and Gap to ARCHIVED, Release to
  AVAILABLE, which becomes ARCHIVED once the delivery count has reached `max_delivery_count`. All or nothing per
  partition; the changes are *in transition* until `complete` says whether their write succeeded: committed, or
  rolled back (to ACQUIRED, or to AVAILABLE/ARCHIVED if the lock expired meanwhile; the delivery count is never
  given back, KAFKA-19476). INVALID_RECORD_STATE for records that are not the member's acquired ones, INVALID_REQUEST
  for a malformed range.
- `release_member` (a member left, its share session closed) gives its ACQUIRED records back, the delivery count one
  less, since they were not delivered (KAFKA-17541); also in transition until `complete`.
- `expire_locks` gives back records whose lock ran out, with the delivery-count limit applied; applied at once,
  whatever becomes of the write (SharePartition.releaseAcquisitionLockOnTimeout).
- After a committed write and after an expiry the SPSO moves over the terminal records at its head, and the batches
  behind it are dropped (maybeUpdateCachedStateAndOffsets).

Where herd differs, and why:
- Holes in the persisted state below its last offset (records in flight at a crash, never written) become AVAILABLE
  batches with delivery count 0 when the state is loaded, where Kafka keeps a "gap window" and acquires them as new
  records: the same records are delivered with the same counts, with one mechanism instead of two.
- Consecutive offsets acquired from a split batch with the same delivery count are returned as one range (Kafka
  returns one range per offset, with a TODO to merge them).
- Not yet: delivery throttling of records near the limit, the `record_limit` acquire mode and Renew (4.2, KIP-1206
  and KIP-1222), the delivery-complete count and log-start-offset movement. read_committed reads are cut and
  filtered by the caller (herd.runtime.shares), which archives the aborted records acquired (`archive_acquired`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from herd.coordinator.errors import CoordinatorError, ErrorCode


class RecordState(IntEnum):
    """RecordState.java: the wire and persisted ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """AcknowledgeType (ShareFetch/ShareAcknowledge AcknowledgeTypes): 0 is a gap (no record at the offset); 4 renews
    the acquisition lock (v2, KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = RecordState
_TERMINAL = frozenset({ACKNOWLEDGED, ARCHIVED})
_LEGAL = {AVAILABLE: frozenset({ACQUIRED}), ACQUIRED: frozenset({AVAILABLE, ACKNOWLEDGED, ARCHIVED})}
_ACK_TO_STATE = {
    AckType.GAP: ARCHIVED,
    AckType.ACCEPT: ACKNOWLEDGED,
    AckType.RELEASE: AVAILABLE,
    AckType.REJECT: ARCHIVED,
}


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A persisted range (ShareSnapshot/ShareUpdate StateBatches): its state and delivery count."""

    first: int
    last: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """A range handed to a member (ShareFetch's AcquiredRecords)."""

    first: int
    last: int
    delivery_count: int


@dataclass(slots=True)
class _Previous:
    state: RecordState
    member_id: str | None
    lock_deadline: int | None
    delivery_count: int
    max_delivery_count: int


@dataclass(slots=True)
class InFlightState:
    """One record's state, or a whole batch's (InFlightState.java)."""

    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline: int | None = None  # ms; while ACQUIRED
    previous: _Previous | None = None  # while a change waits for its write

    @property
    def in_transition(self) -> bool:
        return self.previous is not None

    def copy(self) -> InFlightState:
        return InFlightState(self.state, self.delivery_count, self.member_id, self.lock_deadline)

    def try_update(self, new: RecordState, delta: int, max_delivery_count: int, member_id: str | None) -> bool:
        """InFlightState.tryUpdateState: False if the record is in transition or the move is not legal. A move back
        to AVAILABLE becomes ARCHIVED once the delivery count reached the limit, unless it gives the delivery back
        (`delta` -1); an archive leaves the count as it is."""
        if self.previous is not None:
            return False
        if new is AVAILABLE and delta >= 0 and self.delivery_count >= max_delivery_count:
            new = ARCHIVED
        if new not in _LEGAL.get(self.state, ()):
            return False
        if new is not ARCHIVED:
            self.delivery_count += delta
        self.state, self.member_id = new, member_id
        if new is not ACQUIRED:
            self.lock_deadline = None
        return True

    def start_transition(self, new: RecordState, delta: int, max_delivery_count: int) -> bool:
        previous = _Previous(self.state, self.member_id, self.lock_deadline, self.delivery_count, max_delivery_count)
        deadline = self.lock_deadline
        if not self.try_update(new, delta, max_delivery_count, None):
            return False
        self.previous, self.lock_deadline = previous, deadline  # the lock runs on until the write is known
        return True

    def complete_transition(self, committed: bool, now_ms: int) -> None:
        """InFlightState.completeStateTransition: keep the change, or go back, unless the lock ran out meanwhile."""
        previous, self.previous = self.previous, None
        if previous is None:
            return
        if committed:
            self.lock_deadline = None
            return
        if previous.lock_deadline is not None and previous.lock_deadline <= now_ms:
            over = previous.delivery_count >= previous.max_delivery_count
            self.state, self.member_id, self.lock_deadline = (ARCHIVED if over else AVAILABLE), None, None
            return
        self.state, self.member_id, self.lock_deadline = previous.state, previous.member_id, previous.lock_deadline


@dataclass(slots=True)
class InFlightBatch:
    """Consecutive offsets acquired together (InFlightBatch.java): one state for all, or one per offset once
    split."""

    first: int
    last: int
    whole: InFlightState | None
    offsets: dict[int, InFlightState] | None = None

    def split(self) -> dict[int, InFlightState]:
        """Per-offset states from now on (never a batch in transition: its pending change holds the whole one)."""
        if self.offsets is None:
            assert self.whole is not None and not self.whole.in_transition
            self.offsets = {o: self.whole.copy() for o in range(self.first, self.last + 1)}
            self.whole = None
        return self.offsets

    def states(self) -> Iterator[tuple[int, int, InFlightState]]:
        """(first, last, state) of the whole batch, or of each offset."""
        if self.offsets is None:
            assert self.whole is not None
            yield self.first, self.last, self.whole
        else:
            for offset, state in self.offsets.items():
                yield offset, offset, state


@dataclass(slots=True)
class Pending:
    """Changes in transition, waiting for the write of their `batches`."""

    batches: list[StateBatch]
    changed: list[InFlightState] = field(default_factory=list)


# Kafka's SharePartition.MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT: throttling starts at a delivery count of at least 2
MIN_THROTTLE_DELIVERY_COUNT = 2


class SharePartition:
    """The in-flight records of one share partition of one share group."""

    def __init__(self, start_offset: int, max_delivery_count: int = 5, max_in_flight: int = 2000) -> None:
        self.start_offset = start_offset  # SPSO: the first offset not known to be terminal
        self.end_offset = start_offset  # SPEO: the last offset in flight, or SPSO when none is
        self.max_delivery_count = max_delivery_count
        self.max_in_flight = max_in_flight
        # from this delivery count on, records are handed out in ever smaller pieces (see `acquire`)
        self.throttle_delivery_count = max(MIN_THROTTLE_DELIVERY_COUNT, -(-max_delivery_count // 2))
        self.state_epoch = 0
        self.leader_epoch = -1  # the leader epoch it was read at, which its writes carry (-1: not fenced)
        self._batches: list[InFlightBatch] = []
        self._firsts: list[int] = []

    # -- loading ---------------------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        start_offset: int,
        batches: Sequence[StateBatch],
        state_epoch: int = 0,
        max_delivery_count: int = 5,
        max_in_flight: int = 2000,
    ) -> SharePartition:
        """The partition from its persisted state (ReadShareGroupState): `start_offset` resolved already (a
        persisted -1 goes through share.auto.offset.reset, which needs the log). A persisted ACQUIRED is read as
        AVAILABLE (Kafka never writes one); holes below the last persisted offset are AVAILABLE, never delivered.
        ValueError for a batch below the start offset or inverted (Kafka fails the partition)."""
        partition = cls(start_offset, max_delivery_count, max_in_flight)
        partition.state_epoch = state_epoch
        expected = start_offset
        for batch in sorted(batches, key=lambda b: b.first):
            if batch.first < start_offset or batch.last < batch.first or batch.first < expected:
                raise ValueError(f"persisted state batch {batch} is below the start offset or overlaps")
            if batch.first > expected:
                partition._append(InFlightBatch(expected, batch.first - 1, InFlightState(AVAILABLE, 0)))
            state = AVAILABLE if batch.state is ACQUIRED else RecordState(batch.state)
            partition._append(InFlightBatch(batch.first, batch.last, InFlightState(state, batch.delivery_count)))
            expected = batch.last + 1
        if partition._batches:
            partition.end_offset = partition._batches[-1].last
            partition._advance()
        return partition

    # -- reading -----------------------------------------------------------------------------------------------

    def in_flight(self) -> int:
        """Records between SPSO and SPEO, terminal ones and holes included (numInFlightRecords)."""
        return 0 if not self._batches else self.end_offset - self.start_offset + 1

    def next_fetch_offset(self) -> int:
        """Where the next fetch should read: the first AVAILABLE record in flight, else past the last (the SPSO when
        nothing in flight reaches it: all there is lies before a log start that moved past it)."""
        for first, _, state in self.records():
            if state.state is AVAILABLE and not state.in_transition and first >= self.start_offset:
                return first
        return self.end_offset + 1 if self._batches and self._batches[-1].last >= self.start_offset else self.end_offset

    def can_acquire(self) -> bool:
        """canAcquireRecords: records to hand out again, or room for new ones under the in-flight limit."""
        return self.next_fetch_offset() != self.end_offset + 1 or self.in_flight() < self.max_in_flight

    def state_batches(self) -> list[StateBatch]:
        """Every in-flight range as it would be persisted (a snapshot's StateBatches; ACQUIRED is written as the
        AVAILABLE it becomes if the leader goes away)."""
        return [
            StateBatch(first, last, AVAILABLE if state.state is ACQUIRED else state.state, state.delivery_count)
            for first, last, state in self.records()
        ]

    def records(self) -> Iterator[tuple[int, int, InFlightState]]:
        for batch in self._batches:
            yield from batch.states()

    def next_lock_deadline(self) -> int | None:
        """When the earliest lock runs out, for the caller's timer."""
        deadlines = [s.lock_deadline for _, _, s in self.records() if s.lock_deadline is not None]
        return min(deadlines, default=None)

    # -- acquire -----------------------------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        fetched: Sequence[tuple[int, int]],
        max_records: int,
        now_ms: int,
        lock_ms: int,
        fetch_offset: int | None = None,
        record_limit: bool = False,
    ) -> list[AcquiredRecords]:
        """Hand records to `member_id`: AVAILABLE ones in flight and new ones, within the log batches the fetch read
        (`fetched`: their (base offset, last offset), in order) and at most `max_records` (whole batches, so a
        soft limit; with `record_limit`, ShareFetch v2's record_limit acquire mode (KIP-1206), a hard one: a
        batch is split and its rest stays AVAILABLE, never delivered) and the in-flight limit. Each delivery count
        goes up by one and each lock ends at now_ms + lock_ms.

        Records near their delivery limit are isolated, as Kafka 4.2's SharePartition.acquire does, so that one
        record a consumer keeps failing on does not take a whole batch to the limit with it: a batch holding an
        AVAILABLE record at `throttle_delivery_count` (half the limit, at least 2) or more ends the acquisition when
        records were taken before it, and is otherwise handed out record by record, at most the batch's size halved
        once per delivery past that count (shouldThrottleRecordsDelivery, acquireSubsetBatchRecords); a record on
        its last attempt goes alone; nothing new is taken after a throttled batch."""
        if max_records <= 0 or not fetched or fetched[-1][1] < self.start_offset:
            return []
        base = max(fetched[0][0], self.start_offset)
        last = fetched[-1][1]
        budget = min(max_records, self.max_in_flight - self.in_flight())
        if budget <= 0:
            offset = base if fetch_offset is None else fetch_offset
            if not self._batches or offset > self.end_offset:
                return []
            budget, last = min(max_records, self.end_offset - offset + 1), min(last, self.end_offset)
        deadline = now_ms + lock_ms
        out: list[AcquiredRecords] = []
        taken = 0
        throttled = False
        for batch in self._overlapping(base, last):
            if taken >= budget:
                break
            throttled = self._throttled(batch, base, last)
            if throttled and taken:
                break  # isolated in a later fetch
            fits = not record_limit or batch.last - batch.first + 1 <= budget - taken
            if batch.offsets is None and base <= batch.first and batch.last <= last and fits and not throttled:
                state = batch.whole
                assert state is not None
                if state.state is AVAILABLE and state.try_update(ACQUIRED, 1, self.max_delivery_count, member_id):
                    state.lock_deadline = deadline
                    out.append(AcquiredRecords(batch.first, batch.last, state.delivery_count))
                    taken += batch.last - batch.first + 1
                continue
            whole = batch.whole
            if whole is not None and (whole.state is not AVAILABLE or whole.in_transition):
                continue  # nothing to take in it: leave it whole
            got = self._acquire_offsets(batch, member_id, base, last, budget - taken, record_limit, deadline, out)
            taken += got
            if throttled and got:
                break
        if throttled and taken:
            return out
        tail = self._batches[-1].last + 1 if self._batches else self.end_offset
        if taken < budget and last >= max(tail, base):
            first = max(tail, base)
            end = _whole_batches_end(fetched, first, budget - taken, last)
            limit = first + budget - taken - 1
            if record_limit and end > limit:  # the records past the budget stay AVAILABLE, never delivered
                batch = InFlightBatch(first, end, None, {
                    o: InFlightState(ACQUIRED, 1, member_id, deadline) if o <= limit else InFlightState(AVAILABLE, 0)
                    for o in range(first, end + 1)
                })  # fmt: skip
                self._append(batch)
                out.append(AcquiredRecords(first, limit, 1))
            else:
                self._append(InFlightBatch(first, end, InFlightState(ACQUIRED, 1, member_id, deadline)))
                out.append(AcquiredRecords(first, end, 1))
            if len(self._batches) == 1:
                self.start_offset = first
            self.end_offset = max(self.end_offset, end)
        return out

    def _throttled(self, batch: InFlightBatch, first: int, last: int) -> bool:
        """shouldThrottleRecordsDelivery: an AVAILABLE record of `batch` in first..last is at the throttling count."""
        limit = self.throttle_delivery_count
        if batch.offsets is None:
            whole = batch.whole
            assert whole is not None
            return whole.state is AVAILABLE and not whole.in_transition and whole.delivery_count >= limit
        return any(
            first <= offset <= last and s.state is AVAILABLE and not s.in_transition and s.delivery_count >= limit
            for offset, s in batch.offsets.items()
        )

    def _acquire_offsets(
        self,
        batch: InFlightBatch,
        member_id: str,
        first: int,
        last: int,
        budget: int,
        record_limit: bool,
        deadline: int,
        out: list[AcquiredRecords],
    ) -> int:
        """acquireSubsetBatchRecords: the AVAILABLE offsets of `batch` in first..last one by one (at most `budget`
        with `record_limit`), a record on its last attempt alone, and from the first at the throttling count on at
        most the batch's size halved once per delivery past it. How many were taken."""
        offsets = batch.split()
        limit, cap, got = self.throttle_delivery_count, -1, 0
        last_try = self.max_delivery_count - 1 if self.max_delivery_count > 2 else None
        for offset, state in offsets.items():
            if record_limit and got >= budget:
                break
            if offset < first or offset > last or state.state is not AVAILABLE or state.in_transition:
                continue
            count = state.delivery_count
            if count == last_try and got:
                break  # delivered alone, in the next fetch
            if count >= limit and cap < 0:
                cap = max(1, len(offsets) >> (count - limit + 1))
            if not state.try_update(ACQUIRED, 1, self.max_delivery_count, member_id):
                continue
            state.lock_deadline = deadline
            _add_range(out, offset, state.delivery_count)
            got += 1
            if last_try is not None and state.delivery_count == self.max_delivery_count:
                break  # its last attempt: alone
            if got == cap:
                break
        return got

    # -- acknowledge and release ---------------------------------------------------------------------------------

    def acknowledge(
        self, member_id: str, batches: Sequence[tuple[int, int, Sequence[int]]], renew_until: int | None = None
    ) -> Pending:
        """Stage `member_id`'s acknowledgements ((first, last, types): one type for the range or one per offset)
        and return what to write; CoordinatorError (nothing changed) when one of them is refused. A Renew
        (type 4, KIP-1222) keeps the records ACQUIRED and their lock runs on until `renew_until`: nothing to write
        (INVALID_REQUEST without a `renew_until`)."""
        pending = Pending([])
        renewed: list[tuple[InFlightState, int | None]] = []
        try:
            for first, last, types in batches:
                if AckType.RENEW in types:
                    self._renew_one(member_id, first, last, types, renew_until, renewed)
                    continue
                self._acknowledge_one(member_id, first, last, types, pending)
        except CoordinatorError:
            for state in pending.changed:
                state.complete_transition(False, -1)
            for state, deadline in renewed:
                state.lock_deadline = deadline
            raise
        return pending

    def _renew_one(
        self,
        member_id: str,
        first: int,
        last: int,
        types: Sequence[int],
        renew_until: int | None,
        renewed: list[tuple[InFlightState, int | None]],
    ) -> None:
        """A Renew: `member_id`'s ACQUIRED records of first..last keep their state; their lock restarts."""
        if renew_until is None or any(t != AckType.RENEW for t in types) or last < first:
            raise CoordinatorError(ErrorCode.invalid_request, f"invalid renew of {first}-{last}")
        if last < self.start_offset:  # gone from the log (its start moved past them): skipped, as an acknowledgement
            return
        covered = [b for b in self._overlapping(first, last) if b.last >= self.start_offset]
        if not covered or covered[0].first > max(first, self.start_offset) or covered[-1].last < last:
            raise CoordinatorError(ErrorCode.invalid_record_state, f"records {first}-{last} are not in flight")
        for batch in covered:
            if batch.offsets is None and first <= batch.first and batch.last <= last:
                states = [(batch.first, batch.whole)]
            else:
                states = [(o, st) for o, st in batch.split().items() if first <= o <= last]
            for offset, state in states:
                if offset < self.start_offset:
                    continue
                _check_owned(state, member_id, offset, offset)
                assert state is not None
                renewed.append((state, state.lock_deadline))
                state.lock_deadline = renew_until

    def _acknowledge_one(self, member_id: str, first: int, last: int, types: Sequence[int], pending: Pending) -> None:
        if last < first or not types or (len(types) > 1 and len(types) != last - first + 1):
            raise CoordinatorError(ErrorCode.invalid_request, f"invalid acknowledgement batch {first}-{last}")
        try:
            states = [_ACK_TO_STATE[AckType(t)] for t in types]
        except ValueError:
            raise CoordinatorError(ErrorCode.invalid_request, f"invalid acknowledge type in {list(types)}") from None
        if last < self.start_offset:
            return
        covered = self._overlapping(first, last)
        if not covered or covered[0].first > max(first, self.start_offset):
            raise CoordinatorError(ErrorCode.invalid_record_state, f"batch record not found for {first}-{last}")
        if covered[-1].last < last:
            raise CoordinatorError(ErrorCode.invalid_request, f"offsets up to {last} are not in flight")
        for batch in covered:
            if batch.last < self.start_offset:
                continue
            whole = batch.offsets is None and first <= batch.first and batch.last <= last and len(states) == 1
            if whole and batch.first >= self.start_offset:
                assert batch.whole is not None
                self._transition(batch.whole, member_id, states[0], 0, batch.first, batch.last, pending)
                continue
            if batch.offsets is None:
                _check_owned(batch.whole, member_id, batch.first, batch.last)
            for offset, state in batch.split().items():
                if first <= offset <= last and offset >= self.start_offset:
                    new = states[0] if len(states) == 1 else states[offset - first]
                    self._transition(state, member_id, new, 0, offset, offset, pending)

    def release_member(self, member_id: str) -> Pending:
        """Stage giving back every record `member_id` holds (it left, or its share session closed): AVAILABLE, its
        delivery given back, or ARCHIVED below the SPSO."""
        pending = Pending([])
        for batch in self._batches:
            whole = batch.whole
            if whole is not None:
                if whole.member_id != member_id or whole.state is not ACQUIRED or whole.in_transition:
                    continue
                if not batch.first < self.start_offset <= batch.last:  # else split: part of it is below the SPSO
                    new = ARCHIVED if batch.last < self.start_offset else AVAILABLE
                    self._transition(whole, member_id, new, -1, batch.first, batch.last, pending)
                    continue
            for offset, state in batch.split().items():
                if state.member_id == member_id and state.state is ACQUIRED and not state.in_transition:
                    new = ARCHIVED if offset < self.start_offset else AVAILABLE
                    self._transition(state, member_id, new, -1, offset, offset, pending)
        return pending

    def complete(self, pending: Pending, committed: bool, now_ms: int) -> None:
        """The write of `pending.batches` succeeded (keep the changes, move the SPSO) or failed (undo them)."""
        for state in pending.changed:
            state.complete_transition(committed, now_ms)
        if committed:
            self._advance()

    def _transition(
        self, state: InFlightState, member_id: str, new: RecordState, delta: int, first: int, last: int, out: Pending
    ) -> None:
        _check_owned(state, member_id, first, last)
        if not state.start_transition(new, delta, self.max_delivery_count):
            raise CoordinatorError(ErrorCode.invalid_record_state, f"records {first}-{last} cannot become {new.name}")
        out.changed.append(state)
        out.batches.append(StateBatch(first, last, state.state, state.delivery_count))

    # -- locks -------------------------------------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> list[StateBatch]:
        """Records whose lock ran out by `now_ms` go back (AVAILABLE, or ARCHIVED at the delivery limit or below
        the SPSO), at once; the returned batches are to be written, and the SPSO moves whatever the write does."""
        out: list[StateBatch] = []
        for batch in self._batches:
            for first, last, state in list(batch.states()):
                if state.state is not ACQUIRED or state.in_transition:
                    continue
                if state.lock_deadline is None or state.lock_deadline > now_ms:
                    continue
                if batch.offsets is None and first < self.start_offset <= last:
                    for offset, one in batch.split().items():
                        if one.state is ACQUIRED and not one.in_transition:
                            new = ARCHIVED if offset < self.start_offset else AVAILABLE
                            one.try_update(new, 0, self.max_delivery_count, None)
                            out.append(StateBatch(offset, offset, one.state, one.delivery_count))
                    break
                new = ARCHIVED if last < self.start_offset else AVAILABLE
                state.try_update(new, 0, self.max_delivery_count, None)
                out.append(StateBatch(first, last, state.state, state.delivery_count))
        if out:
            self._advance()
        return out

    # -- aborted transactions -----------------------------------------------------------------------------------

    def archive_acquired(self, member_id: str, first: int, last: int) -> None:
        """`member_id`'s ACQUIRED records in first..last become ARCHIVED at once, never to be delivered: a
        read_committed fetch acquired records of an aborted transaction (SharePartition's archival of
        fetchAbortedTransactionRecordBatches). Not written: the SPSO carries them once it passes them."""
        for batch in self._overlapping(first, last):
            whole = batch.whole
            if whole is not None and first <= batch.first and batch.last <= last:
                if whole.state is ACQUIRED and whole.member_id == member_id and not whole.in_transition:
                    whole.state, whole.member_id, whole.lock_deadline = ARCHIVED, None, None
                continue
            if whole is not None and (whole.state is not ACQUIRED or whole.in_transition):
                continue
            for offset, state in batch.split().items():
                if first <= offset <= last and state.state is ACQUIRED and state.member_id == member_id:
                    if not state.in_transition:
                        state.state, state.member_id, state.lock_deadline = ARCHIVED, None, None
        self._advance()

    # -- the start offset --------------------------------------------------------------------------------------

    def move_start(self, log_start_offset: int) -> None:
        """updateCacheAndOffsets: the log's start offset moved past the SPSO (DeleteRecords, retention) and a fetch
        would read below it (Kafka's fetch answers OFFSET_OUT_OF_RANGE, ShareFetchUtils). The AVAILABLE records
        before it are archived (they are gone from the log), the SPSO moves to it, and the SPEO too when nothing in
        flight lies beyond it. ACQUIRED records keep their locks: their member may still acknowledge them, and a
        release or an expiry below the SPSO archives them. Nothing is written: the new SPSO goes with the next
        write, as in Kafka."""
        if log_start_offset <= self.start_offset:
            return
        if not self._batches:
            self.start_offset = self.end_offset = log_start_offset
            return
        for batch in self._overlapping(self.start_offset, log_start_offset - 1):
            whole = batch.whole
            if whole is not None and (whole.state is not AVAILABLE or whole.in_transition):
                continue
            if whole is not None and batch.last < log_start_offset:
                whole.state = ARCHIVED
                continue
            for offset, state in batch.split().items():
                if offset < log_start_offset and state.state is AVAILABLE and not state.in_transition:
                    state.state = ARCHIVED
        self.start_offset = log_start_offset
        if self.end_offset < log_start_offset:
            self.end_offset = log_start_offset
        self._advance()

    def _advance(self) -> None:
        """maybeUpdateCachedStateAndOffsets: move the SPSO past the terminal records at the head of the batches in
        flight, dropping the batches that end behind it (all of them when everything in flight is terminal)."""
        self._drop_before_start()
        if not self._batches or self._batches[0].first > self.start_offset:
            return
        last_done = -1
        for batch in self._batches:
            done = True
            for _, last, state in batch.states():
                if state.state not in _TERMINAL or state.in_transition:
                    done = False
                    break
                last_done = last
            if not done:
                break
        if last_done < self.start_offset:
            return
        if last_done == self._batches[-1].last:
            self.start_offset = self.end_offset = last_done + 1
            self._batches.clear()
            self._firsts.clear()
            return
        keep = bisect.bisect_right(self._firsts, last_done) - 1  # the batch holding last_done
        if self._batches[keep].last == last_done:
            keep += 1
            self.start_offset = max(self.start_offset, self._batches[keep].first)
        else:
            self.start_offset = max(self.start_offset, last_done + 1)
        del self._batches[:keep]
        del self._firsts[:keep]

    def _drop_before_start(self) -> None:
        """The terminal records at the head that lie before the SPSO go (only after the log start moved past them,
        `move_start`: otherwise the SPSO is never past a record in flight); the SPEO is the SPSO when none is
        left."""
        while self._batches:
            head = self._batches[0]
            if head.first >= self.start_offset or not _terminal_before(head, self.start_offset):
                break
            if head.last < self.start_offset:
                del self._batches[0]
                del self._firsts[0]
                continue
            if head.offsets is not None:  # split, terminal up to the SPSO: it starts there now
                for offset in range(head.first, self.start_offset):
                    del head.offsets[offset]
                head.first = self._firsts[0] = self.start_offset
            break
        if not self._batches:
            self.end_offset = max(self.end_offset, self.start_offset)

    # -- the batches -------------------------------------------------------------------------------------------

    def _append(self, batch: InFlightBatch) -> None:
        self._batches.append(batch)
        self._firsts.append(batch.first)

    def _overlapping(self, first: int, last: int) -> list[InFlightBatch]:
        """The batches that hold any offset in first..last, in order."""
        start = max(bisect.bisect_right(self._firsts, first) - 1, 0)
        end = bisect.bisect_right(self._firsts, last)
        return [b for b in self._batches[start:end] if b.last >= first]


def _terminal_before(batch: InFlightBatch, offset: int) -> bool:
    """Whether every record of `batch` before `offset` is terminal and settled."""
    return all(
        state.state in _TERMINAL and not state.in_transition for first, _, state in batch.states() if first < offset
    )


def _check_owned(state: InFlightState | None, member_id: str, first: int, last: int) -> None:
    assert state is not None
    if state.member_id is None or state.state is not ACQUIRED:
        raise CoordinatorError(ErrorCode.invalid_record_state, f"records {first}-{last} are not acquired")
    if state.member_id != member_id:
        raise CoordinatorError(ErrorCode.invalid_record_state, f"member is not the owner of records {first}-{last}")
    if state.in_transition:
        raise CoordinatorError(ErrorCode.invalid_record_state, f"records {first}-{last} are in transition")


def _add_range(out: list[AcquiredRecords], offset: int, delivery_count: int) -> None:
    """Append `offset`, merged into the last range when it follows it with the same delivery count."""
    if out and out[-1].last == offset - 1 and out[-1].delivery_count == delivery_count:
        out[-1] = AcquiredRecords(out[-1].first, offset, delivery_count)
    else:
        out.append(AcquiredRecords(offset, offset, delivery_count))


def _whole_batches_end(fetched: Sequence[tuple[int, int]], first: int, budget: int, last: int) -> int:
    """The last offset to acquire from `first` with `budget` records: the end of the log batch that holds the
    budget's last record (whole batches: a soft limit), at most `last`."""
    if budget >= last - first + 1:
        return last
    target = first + budget - 1
    for base, batch_last in fetched:
        if base <= target <= batch_last:
            return min(batch_last, last)
    return min(target, last)
