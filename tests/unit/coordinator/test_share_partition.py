"""The state of a share partition (herd.coordinator.share.partition), synchronously with explicit times: cases
from Kafka's SharePartitionTest (confluentinc/kafka, branch 4.2, core/src/test/java/kafka/server/share/), named
after them where they are Kafka's."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from kio.schema.errors import ErrorCode

from herd.coordinator.errors import CoordinatorError
from herd.coordinator.share.partition import (
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    AckType,
    AcquiredRecords,
    SharePartition,
    StateBatch,
)

LOCK = 30_000
ACCEPT, RELEASE, REJECT, GAP = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP


def states(partition: SharePartition) -> list[tuple[int, int, str, int, str | None]]:
    return [(f, last, s.state.name, s.delivery_count, s.member_id) for f, last, s in partition.records()]


def acked(partition: SharePartition, member: str, *batches: tuple[int, int, list[int]], now: int = 0) -> None:
    """Acknowledge and have the write succeed."""
    partition.complete(partition.acknowledge(member, list(batches)), True, now)


def test_new_records_are_acquired_with_delivery_count_one_and_a_lock() -> None:
    p = SharePartition(0)
    assert p.acquire("m1", [(0, 9)], 500, now_ms=100, lock_ms=LOCK) == [AcquiredRecords(0, 9, 1)]
    assert (p.start_offset, p.end_offset, p.in_flight(), p.next_fetch_offset()) == (0, 9, 10, 10)
    assert states(p) == [(0, 9, "ACQUIRED", 1, "m1")]
    assert p.next_lock_deadline() == 100 + LOCK
    assert p.acquire("m2", [(0, 9)], 500, now_ms=200, lock_ms=LOCK) == []  # all taken


def test_acknowledge_multiple_record_batch() -> None:
    """testAcknowledgeMultipleRecordBatch: acquire 5-14, accept them: nothing in flight, SPSO = SPEO = 15."""
    p = SharePartition(5)
    p.acquire("m1", [(5, 14)], 500, 0, LOCK)
    acked(p, "m1", (5, 14, [ACCEPT]))
    assert (p.start_offset, p.end_offset, p.next_fetch_offset(), states(p)) == (15, 15, 15, [])


def test_acknowledge_multiple_record_batch_with_gap_offsets() -> None:
    """testAcknowledgeMultipleRecordBatchWithGapOffsets: 5-6 released; 10-18 as 5 releases, 3 gaps, 1 accept."""
    p = SharePartition(5)
    p.acquire("m1", [(5, 6)], 500, 0, LOCK)
    p.acquire("m1", [(10, 18)], 500, 0, LOCK)
    acked(p, "m1", (5, 6, [RELEASE]), (10, 18, [RELEASE] * 5 + [GAP] * 3 + [ACCEPT]))
    assert states(p)[0] == (5, 6, "AVAILABLE", 1, None)
    by_offset = {f: (s, dc) for f, last, s, dc, _ in states(p)[1:]}
    assert by_offset == {
        **{o: ("AVAILABLE", 1) for o in range(10, 15)},
        **{o: ("ARCHIVED", 1) for o in range(15, 18)},
        18: ("ACKNOWLEDGED", 1),
    }
    assert p.next_fetch_offset() == 5 and p.start_offset == 5


def test_a_partial_acknowledgement_splits_the_batch_and_moves_the_start_offset_within_it() -> None:
    p = SharePartition(0)
    p.acquire("m1", [(0, 9)], 500, 0, LOCK)
    acked(p, "m1", (0, 4, [ACCEPT]))
    assert p.start_offset == 5 and p.end_offset == 9
    assert p.state_batches()[0] == StateBatch(0, 0, ACKNOWLEDGED, 1)  # the batch stays until all of it is done
    acked(p, "m1", (5, 9, [REJECT]))
    assert (p.start_offset, p.end_offset, states(p)) == (10, 10, [])


def test_released_records_are_delivered_again_and_archived_at_the_delivery_limit() -> None:
    p = SharePartition(0, max_delivery_count=2)
    p.acquire("m1", [(0, 0)], 500, 0, LOCK)
    acked(p, "m1", (0, 0, [RELEASE]))
    assert states(p) == [(0, 0, "AVAILABLE", 1, None)]
    assert p.acquire("m2", [(0, 0)], 500, 0, LOCK) == [AcquiredRecords(0, 0, 2)]
    acked(p, "m2", (0, 0, [RELEASE]))  # released on its last delivery: archived
    assert states(p) == [] and p.start_offset == 1


def test_an_expired_lock_makes_the_records_available_again() -> None:
    """testAcquisitionLockForAcquiringSingleRecord: the lock runs out, the record is AVAILABLE, count unchanged."""
    p = SharePartition(0)
    p.acquire("m1", [(0, 0)], 500, now_ms=1_000, lock_ms=LOCK)
    assert p.expire_locks(1_000 + LOCK - 1) == []
    assert p.expire_locks(1_000 + LOCK) == [StateBatch(0, 0, AVAILABLE, 1)]
    assert states(p) == [(0, 0, "AVAILABLE", 1, None)] and p.next_fetch_offset() == 0
    with pytest.raises(CoordinatorError) as refused:  # no longer the member's
        p.acknowledge("m1", [(0, 0, [ACCEPT])])
    assert refused.value.code == ErrorCode.invalid_record_state


def test_an_expired_lock_at_the_delivery_limit_archives_and_moves_the_start_offset() -> None:
    p = SharePartition(0, max_delivery_count=2)
    for now in (0, LOCK):
        p.acquire("m1", [(0, 4)], 500, now, LOCK)
        p.expire_locks(now + LOCK)
    assert states(p) == [] and p.start_offset == 5


def test_acknowledgements_are_all_or_nothing() -> None:
    p = SharePartition(0)
    p.acquire("m1", [(0, 4)], 500, 0, LOCK)
    p.acquire("m2", [(5, 9)], 500, 0, LOCK)
    with pytest.raises(CoordinatorError) as refused:
        p.acknowledge("m1", [(0, 4, [ACCEPT]), (5, 9, [ACCEPT])])  # 5-9 are m2's
    assert refused.value.code == ErrorCode.invalid_record_state and "not the owner" in str(refused.value)
    assert states(p) == [(0, 4, "ACQUIRED", 1, "m1"), (5, 9, "ACQUIRED", 1, "m2")]
    acked(p, "m1", (0, 4, [ACCEPT]))
    assert p.start_offset == 5


@pytest.mark.parametrize(
    ("batch", "code"),
    [
        ((3, 2, [ACCEPT]), ErrorCode.invalid_request),  # inverted
        ((0, 4, []), ErrorCode.invalid_request),  # no type
        ((0, 4, [ACCEPT, REJECT]), ErrorCode.invalid_request),  # neither one type nor one per offset
        ((0, 4, [7]), ErrorCode.invalid_request),  # no such type
        ((0, 12, [ACCEPT]), ErrorCode.invalid_request),  # past what is in flight
        ((20, 22, [ACCEPT]), ErrorCode.invalid_record_state),  # nothing there
    ],
)
def test_malformed_or_unknown_acknowledgements_are_refused(batch, code) -> None:
    p = SharePartition(0)
    p.acquire("m1", [(0, 9)], 500, 0, LOCK)
    with pytest.raises(CoordinatorError) as refused:
        p.acknowledge("m1", [batch])
    assert refused.value.code == code
    assert states(p) == [(0, 9, "ACQUIRED", 1, "m1")]


def test_acknowledging_records_not_acquired_is_an_invalid_record_state() -> None:
    p = SharePartition(0)
    p.acquire("m1", [(0, 9)], 500, 0, LOCK)
    acked(p, "m1", (5, 9, [RELEASE]))
    with pytest.raises(CoordinatorError) as refused:
        p.acknowledge("m1", [(5, 5, [ACCEPT])])
    assert refused.value.code == ErrorCode.invalid_record_state


def test_a_failed_write_rolls_the_change_back_and_an_expired_lock_still_counts() -> None:
    """completeStateTransition(false): back to ACQUIRED by the member under its lock; if the lock ran out while the
    write was pending, AVAILABLE (the delivery count is not given back, KAFKA-19476)."""
    p = SharePartition(0)
    p.acquire("m1", [(0, 4)], 500, 0, LOCK)
    pending = p.acknowledge("m1", [(0, 4, [ACCEPT])])
    assert pending.batches == [StateBatch(0, 4, ACKNOWLEDGED, 1)]
    assert p.expire_locks(LOCK) == []  # in transition: the timeout waits for the write
    p.complete(pending, False, now_ms=10)
    assert states(p) == [(0, 4, "ACQUIRED", 1, "m1")] and p.start_offset == 0
    pending = p.acknowledge("m1", [(0, 4, [ACCEPT])])
    p.complete(pending, False, now_ms=LOCK + 1)
    assert states(p) == [(0, 4, "AVAILABLE", 1, None)]


def test_records_in_transition_are_not_acquired_again() -> None:
    """testAcquireWhenBatchHasOngoingTransition: a release waiting for its write is not handed out yet."""
    p = SharePartition(0)
    p.acquire("m1", [(0, 4)], 500, 0, LOCK)
    pending = p.acknowledge("m1", [(0, 4, [RELEASE])])
    assert p.acquire("m2", [(0, 4)], 500, 0, LOCK) == []
    assert p.next_fetch_offset() == 5
    p.complete(pending, True, 0)
    assert p.acquire("m2", [(0, 4)], 500, 0, LOCK) == [AcquiredRecords(0, 4, 2)]


def test_a_leaving_member_gives_its_records_back_undelivered() -> None:
    """testMaxDeliveryCountLimitNotExceededForRecordsSubsetAfterReleaseAcquiredRecords: released on leave, the
    delivery count goes down by one and the limit does not archive them."""
    p = SharePartition(0, max_delivery_count=2)
    p.acquire("m1", [(0, 4)], 500, 0, LOCK)
    p.expire_locks(LOCK)
    p.acquire("m1", [(0, 4)], 500, LOCK, LOCK)  # second delivery: count 2, the limit
    p.acquire("m2", [(5, 9)], 500, LOCK, LOCK)
    pending = p.release_member("m1")
    assert pending.batches == [StateBatch(0, 4, AVAILABLE, 1)]
    p.complete(pending, True, LOCK)
    assert states(p) == [(0, 4, "AVAILABLE", 1, None), (5, 9, "ACQUIRED", 1, "m2")]


def test_the_in_flight_limit_takes_whole_log_batches_and_then_refuses() -> None:
    p = SharePartition(0, max_in_flight=7)
    fetched = [(0, 4), (5, 9), (10, 14)]
    assert p.acquire("m1", fetched, 500, 0, LOCK) == [AcquiredRecords(0, 9, 1)]  # up to the end of 5-9
    assert not p.can_acquire()
    assert p.acquire("m1", [(10, 14)], 500, 0, LOCK) == []
    acked(p, "m1", (0, 9, [ACCEPT]))
    assert p.can_acquire()


def test_maybe_initialize_without_gaps() -> None:
    """testMaybeInitializeStateBatchesWithoutGaps: everything persisted is terminal: nothing in flight."""
    p = SharePartition.load(15, [StateBatch(15, 20, ACKNOWLEDGED, 1), StateBatch(21, 30, ARCHIVED, 2)])
    assert (p.start_offset, p.end_offset, states(p)) == (31, 31, [])


def test_maybe_initialize_and_acquire_with_gaps() -> None:
    """testMaybeInitializeAndAcquire*: persisted SPSO 10 with 15-18 AVAILABLE (2 deliveries), 20-22 ARCHIVED,
    26-30 AVAILABLE (1); the holes were in flight when the leader went away. One log batch 10-49."""
    p = SharePartition.load(
        10,
        [StateBatch(15, 18, AVAILABLE, 2), StateBatch(20, 22, ARCHIVED, 1), StateBatch(26, 30, AVAILABLE, 1)],
        state_epoch=3,
    )
    assert (p.start_offset, p.end_offset, p.state_epoch) == (10, 30, 3)
    assert p.acquire("m1", [(10, 49)], 1, 0, LOCK) == [AcquiredRecords(10, 14, 1)]
    assert p.acquire("m1", [(10, 49)], 10, 0, LOCK) == [
        AcquiredRecords(15, 18, 3),
        AcquiredRecords(19, 19, 1),
        AcquiredRecords(23, 25, 1),
        AcquiredRecords(26, 30, 2),
    ]
    assert p.acquire("m1", [(10, 49)], 10, 0, LOCK) == [AcquiredRecords(31, 49, 1)]


def test_a_persisted_acquired_state_loads_as_available_and_bad_state_is_refused() -> None:
    p = SharePartition.load(0, [StateBatch(0, 3, ACQUIRED, 1)])
    assert states(p) == [(0, 3, "AVAILABLE", 1, None)]
    with pytest.raises(ValueError, match="below the start offset"):
        SharePartition.load(5, [StateBatch(2, 3, AVAILABLE, 1)])


def test_acquiring_part_of_a_split_batch_merges_consecutive_offsets() -> None:
    p = SharePartition(0)
    p.acquire("m1", [(0, 9)], 500, 0, LOCK)
    acked(p, "m1", (0, 9, [RELEASE, RELEASE, ACCEPT, RELEASE, RELEASE, RELEASE, ACCEPT, ACCEPT, RELEASE, RELEASE]))
    assert p.start_offset == 0
    assert p.acquire("m2", [(0, 9)], 500, 0, LOCK) == [
        AcquiredRecords(0, 1, 2),
        AcquiredRecords(3, 5, 2),
        AcquiredRecords(8, 9, 2),
    ]
    assert ACQUIRED in {s.state for _, _, s in p.records()}


# -- a model-based check: any sequence of operations keeps Kafka's guarantees ---------------------------------------

MEMBERS = ("m1", "m2", "m3")
LIMIT = 3


class SharePartitionMachine(RuleBasedStateMachine):
    """Members acquire, acknowledge (with writes that may fail), leave, locks run out and the log's start moves, over a
    log of 40 offsets in batches of 4. Checked after every step: no record is held by two members or acquired past
    the delivery limit, nothing acknowledged or archived is handed out again, nothing before the log start is
    acquired once it moved, and the start offset never goes back."""

    def __init__(self) -> None:
        super().__init__()
        self.p = SharePartition(0, max_delivery_count=LIMIT, max_in_flight=16)
        self.now = 0
        self.done: set[int] = set()  # offsets that reached a terminal state through a committed write or expiry
        self.spso = 0
        self.held: dict[int, str] = {}
        self.log_start = 0  # DeleteRecords or retention moves it: nothing before it can be read any more

    @rule(member=st.sampled_from(MEMBERS), start=st.integers(0, 9), max_records=st.integers(1, 12))
    def acquire(self, member: str, start: int, max_records: int) -> None:
        if self.p.next_fetch_offset() < self.log_start:  # the runtime's reaction to the log's start (shares.py)
            self.p.move_start(self.log_start)
        fetched = [(b * 4, b * 4 + 3) for b in range(max(start, self.log_start // 4), 10)]
        for r in self.p.acquire(member, fetched, max_records, self.now, 1_000):
            assert r.delivery_count <= LIMIT
            assert r.first >= self.log_start, f"{r.first} acquired after the log start moved to {self.log_start}"
            for offset in range(r.first, r.last + 1):
                assert offset not in self.done, f"{offset} handed out again after it was done"
                assert offset not in self.held, f"{offset} acquired by {member} while {self.held[offset]} has it"
                self.held[offset] = member

    @rule(
        member=st.sampled_from(MEMBERS),
        kind=st.sampled_from(list(AckType)),
        width=st.integers(1, 5),
        ok=st.booleans(),
        pick=st.integers(0, 1000),
    )
    def acknowledge(self, member: str, kind: AckType, width: int, ok: bool, pick: int) -> None:
        mine = sorted(o for o, m in self.held.items() if m == member)
        if not mine:
            return
        first = mine[pick % len(mine)]
        last = first
        while last + 1 in mine and last - first + 1 < width:
            last += 1
        pending = self.p.acknowledge(member, [(first, last, [kind])], renew_until=self.now + LOCK)
        self.p.complete(pending, ok, self.now)
        if kind is AckType.RENEW:  # still the member's, its lock restarted; nothing written
            assert pending.batches == [] and all(self.held.get(o) == member for o in range(first, last + 1))
        if ok:
            for b in pending.batches:
                for offset in range(b.first, b.last + 1):
                    self.held.pop(offset, None)
                    if b.state in (ACKNOWLEDGED, ARCHIVED):
                        self.done.add(offset)

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        pending = self.p.release_member(member)
        self.p.complete(pending, True, self.now)
        for b in pending.batches:
            for offset in range(b.first, b.last + 1):
                self.held.pop(offset, None)

    @rule(ms=st.integers(1, 1_500))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        for b in self.p.expire_locks(self.now):
            for offset in range(b.first, b.last + 1):
                self.held.pop(offset, None)
                if b.state is ARCHIVED:
                    self.done.add(offset)

    @rule(by=st.integers(1, 8))
    def log_start_moves(self, by: int) -> None:
        self.log_start = min(40, self.log_start + by)

    @invariant()
    def consistent(self) -> None:
        assert self.p.start_offset >= self.spso, "the start offset went back"
        self.spso = self.p.start_offset
        for first, last, state in self.p.records():
            for offset in range(first, last + 1):
                if state.state is ACQUIRED:
                    assert self.held.get(offset) == state.member_id, (offset, state)
                    assert state.delivery_count <= LIMIT
                elif offset >= self.p.start_offset:
                    assert offset not in self.held, (offset, state)


SharePartitionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_share_partition_model = SharePartitionMachine.TestCase


def test_a_renew_restarts_the_lock_and_writes_nothing() -> None:
    p = SharePartition(0)
    p.acquire("m1", [(0, 4)], 500, now_ms=0, lock_ms=LOCK)
    pending = p.acknowledge("m1", [(1, 2, [AckType.RENEW])], renew_until=20_000 + LOCK)
    assert pending.batches == []
    expired = p.expire_locks(LOCK + 1)  # per offset: the batch was split by the renew
    assert [(b.first, b.last, b.state) for b in expired] == [(0, 0, AVAILABLE), (3, 3, AVAILABLE), (4, 4, AVAILABLE)]
    assert [(first, last, st.state, st.lock_deadline) for first, last, st in p.records() if first in (1, 2)] == [
        (1, 1, ACQUIRED, 20_000 + LOCK),
        (2, 2, ACQUIRED, 20_000 + LOCK),
    ]
    with pytest.raises(CoordinatorError) as refused:
        p.acknowledge("m2", [(1, 1, [AckType.RENEW])], renew_until=1)
    assert refused.value.code == ErrorCode.invalid_record_state  # not m2's
    with pytest.raises(CoordinatorError) as no_lock:
        p.acknowledge("m1", [(1, 1, [AckType.RENEW])])
    assert no_lock.value.code == ErrorCode.invalid_request  # v1 has no Renew


def test_record_limit_is_a_hard_cap_and_leaves_the_rest_of_the_batch_available() -> None:
    p = SharePartition(0)
    assert p.acquire("m1", [(0, 9)], 4, now_ms=0, lock_ms=LOCK, record_limit=True) == [AcquiredRecords(0, 3, 1)]
    assert p.acquire("m2", [(0, 9)], 4, now_ms=0, lock_ms=LOCK, record_limit=True) == [AcquiredRecords(4, 7, 1)]
    assert p.acquire("m3", [(0, 9)], 500, now_ms=0, lock_ms=LOCK) == [AcquiredRecords(8, 9, 1)]  # never delivered: dc 1
    soft = SharePartition(0)
    assert soft.acquire("m1", [(0, 9)], 4, now_ms=0, lock_ms=LOCK) == [AcquiredRecords(0, 9, 1)]  # whole batch


# -- the log's start offset moving past the SPSO (SharePartition.updateCacheAndOffsets) ---------------------------


def test_available_records_before_a_moved_log_start_are_archived() -> None:
    """testAcquireWithLogStartOffsetMovement-like: 0-9 released, the log starts at 5: 0-4 archived and dropped, the
    SPSO at 5, the next fetch from 5."""
    p = SharePartition(0)
    p.acquire("m1", [(0, 9)], 500, 0, LOCK)
    acked(p, "m1", (0, 9, [RELEASE]))
    p.move_start(5)
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (5, 9, 5)
    assert states(p) == [(o, o, "AVAILABLE", 1, None) for o in range(5, 10)]
    assert p.acquire("m2", [(0, 9)], 500, 0, LOCK) == [AcquiredRecords(5, 9, 2)]


def test_acquired_records_before_a_moved_log_start_keep_their_lock() -> None:
    """Records acquired before the new log start stay acquired until their lock runs out (an acknowledgement below
    the SPSO is skipped, as Kafka's); the records after it are fetched from the new SPSO meanwhile."""
    p = SharePartition(0)
    p.acquire("m1", [(0, 4)], 500, 0, LOCK)
    p.move_start(8)
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (8, 8, 8)
    assert states(p) == [(0, 4, "ACQUIRED", 1, "m1")]
    acked(p, "m1", (0, 4, [ACCEPT]))
    assert states(p) == [(0, 4, "ACQUIRED", 1, "m1")]
    assert p.acquire("m2", [(8, 9)], 500, 1_000, LOCK) == [AcquiredRecords(8, 9, 1)]
    assert [(b.first, b.last, b.state) for b in p.expire_locks(LOCK)] == [(0, 4, ARCHIVED)]
    assert states(p) == [(8, 9, "ACQUIRED", 1, "m2")] and (p.start_offset, p.end_offset) == (8, 9)


def test_an_expired_lock_before_a_moved_log_start_archives() -> None:
    p = SharePartition(0)
    p.acquire("m1", [(0, 4)], 500, 0, LOCK)
    p.move_start(3)
    expired = [(b.first, b.last, b.state) for b in p.expire_locks(LOCK)]
    assert expired == [(0, 0, ARCHIVED), (1, 1, ARCHIVED), (2, 2, ARCHIVED), (3, 3, AVAILABLE), (4, 4, AVAILABLE)]
    assert states(p) == [(3, 3, "AVAILABLE", 1, None), (4, 4, "AVAILABLE", 1, None)]  # 0-2 gone
    assert p.acquire("m2", [(3, 4)], 500, LOCK, LOCK) == [AcquiredRecords(3, 4, 2)]


def test_a_log_start_past_everything_in_flight_empties_the_partition() -> None:
    p = SharePartition(0)
    p.acquire("m1", [(0, 9)], 500, 0, LOCK)
    acked(p, "m1", (0, 9, [RELEASE]))
    p.move_start(20)
    assert (p.start_offset, p.end_offset, p.in_flight(), states(p)) == (20, 20, 0, [])
    empty = SharePartition(3)
    empty.move_start(7)
    assert (empty.start_offset, empty.end_offset) == (7, 7)


def test_a_log_start_not_past_the_spso_changes_nothing() -> None:
    p = SharePartition(5)
    p.acquire("m1", [(5, 9)], 500, 0, LOCK)
    acked(p, "m1", (5, 9, [RELEASE]))
    p.move_start(5)
    p.move_start(2)
    assert (p.start_offset, states(p)) == (5, [(5, 9, "AVAILABLE", 1, None)])


# -- throttling near the delivery limit (SharePartition.shouldThrottleRecordsDelivery, acquireSubsetBatchRecords) --


def _delivered(p: SharePartition, first: int, last: int, times: int) -> None:
    """Acquire first..last and release it, `times` times (each a delivery)."""
    for _ in range(times):
        assert p.acquire("x", [(first, last)], 500, 0, LOCK)
        acked(p, "x", (first, last, [RELEASE]))


def test_a_batch_at_the_throttling_count_is_handed_out_in_halves() -> None:
    """Limit 5: throttling from 3 deliveries. A batch of 10 delivered 3 times comes back 5 records at a time, then
    on its last attempt one record at a time."""
    p = SharePartition(0, max_delivery_count=5)
    assert p.throttle_delivery_count == 3
    _delivered(p, 0, 9, 2)
    assert p.acquire("m", [(0, 9)], 500, 0, LOCK) == [AcquiredRecords(0, 9, 3)]  # below the count: whole
    acked(p, "m", (0, 9, [RELEASE]))
    assert p.acquire("m", [(0, 9)], 500, 0, LOCK) == [AcquiredRecords(0, 4, 4)]  # 10 >> 1
    assert p.acquire("n", [(0, 9)], 500, 0, LOCK) == [AcquiredRecords(5, 9, 4)]
    acked(p, "m", (0, 4, [RELEASE]))
    assert p.acquire("m", [(0, 9)], 500, 0, LOCK) == [AcquiredRecords(0, 0, 5)]  # the last attempt: alone
    assert p.acquire("m", [(0, 9)], 500, 0, LOCK) == [AcquiredRecords(1, 1, 5)]


def test_a_throttled_batch_after_others_waits_for_the_next_fetch() -> None:
    """Records taken from a batch below the count end the acquisition at a throttled one, and nothing new is
    taken after a throttled batch."""
    p = SharePartition(0, max_delivery_count=5)
    p.acquire("x", [(0, 4)], 500, 0, LOCK)
    p.acquire("x", [(5, 9)], 500, 0, LOCK)
    acked(p, "x", (0, 4, [RELEASE]), (5, 9, [RELEASE]))
    _delivered(p, 5, 9, 2)  # 5-9 at 3 deliveries, 0-4 at 1
    assert p.acquire("m", [(0, 4), (5, 9), (10, 14)], 500, 0, LOCK) == [AcquiredRecords(0, 4, 2)]
    assert p.acquire("n", [(5, 9), (10, 14)], 500, 0, LOCK) == [AcquiredRecords(5, 6, 4)]  # 5 >> 1, then stop
    assert p.end_offset == 9  # 10-14 not taken
    assert p.acquire("o", [(5, 9), (10, 14)], 500, 0, LOCK) == [AcquiredRecords(7, 8, 4)]


def test_a_limit_of_two_throttles_from_the_second_delivery() -> None:
    p = SharePartition(0, max_delivery_count=2)
    assert p.throttle_delivery_count == 2
    _delivered(p, 0, 7, 1)
    assert p.acquire("m", [(0, 7)], 500, 0, LOCK) == [AcquiredRecords(0, 7, 2)]  # below the count: whole
    acked(p, "m", (0, 7, [RELEASE]))  # at the limit: archived
    assert states(p) == [] and p.start_offset == 8
