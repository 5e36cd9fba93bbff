"""The share coordinator's core (herd.coordinator.share_state): the records of `__share_group_state` in Kafka's
schemas, batches combined as PersisterStateBatchCombiner combines them, and ShareCoordinatorShard's rules for
initialize, read, write (updates, then a snapshot every `updates_per_snapshot`), delete and replay."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from herd.coordinator import ManualClock
from herd.coordinator.errors import ErrorCode
from herd.coordinator.records import Record, record_type
from herd.coordinator.result import Result
from herd.coordinator.share_state import records as rec
from herd.coordinator.share_state.records import StateBatch
from herd.coordinator.share_state.shard import (
    COLD_SNAPSHOTS,
    Delete,
    Initialize,
    Read,
    ShareStateResponse,
    ShareStateShard,
    Write,
    combine,
)
from herd.coordinator.timer import ManualTimer

T = uuid.UUID(int=9)
AV, ACK, ARCH = 0, 2, 4


class Log:
    """A shard and the records it wrote, replayed as the runtime replays them."""

    def __init__(self, updates_per_snapshot: int = 500, cold_snapshot_interval_ms: int | None = None) -> None:
        """With `cold_snapshot_interval_ms`, the shard has a timer (`timer`) and is loaded: its cold snapshots run."""
        self.clock = ManualClock()
        self.timer = ManualTimer(self.clock)
        timed = cold_snapshot_interval_ms is not None
        self.shard = ShareStateShard(
            clock=self.clock,
            updates_per_snapshot=updates_per_snapshot,
            timer=self.timer if timed else None,
            cold_snapshot_interval_ms=cold_snapshot_interval_ms or 300_000,
        )
        if timed:
            self.shard.on_loaded()
        self.records: list[Record] = []

    def write(self, records: tuple[Record, ...]) -> None:
        """Records written and replayed (a timer's, answering no one)."""
        for record in records:
            self.records.append(record)
            self.shard.replay(record)

    def run(self, result: Result) -> ShareStateResponse:
        self.write(result.records)
        (reply,) = result.replies
        assert isinstance(reply.response, ShareStateResponse)
        return reply.response

    def reloaded(self) -> ShareStateShard:
        shard = ShareStateShard(clock=self.clock, updates_per_snapshot=self.shard.updates_per_snapshot)
        assert shard.replay_loaded_batch([(r.key, r.value) for r in self.records]) == 0
        return shard


def test_combine_lays_new_batches_over_old_ones_and_drops_what_is_below_the_start() -> None:
    old = [StateBatch(0, 9, AV, 1)]
    assert combine(old, [StateBatch(3, 4, ACK, 1)], -1) == [
        StateBatch(0, 2, AV, 1),
        StateBatch(3, 4, ACK, 1),
        StateBatch(5, 9, AV, 1),
    ]
    assert combine(old, [StateBatch(3, 4, AV, 1)], -1) == [StateBatch(0, 9, AV, 1)]  # merged again
    assert combine(old, [StateBatch(8, 12, ARCH, 2)], 5) == [StateBatch(5, 7, AV, 1), StateBatch(8, 12, ARCH, 2)]


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 8), st.sampled_from([AV, ACK, ARCH]), st.integers(0, 3))))
def test_combine_is_the_last_writer_of_each_offset(writes) -> None:
    batches = [StateBatch(first, first + length, state, count) for first, length, state, count in writes]
    expected: dict[int, tuple[int, int]] = {}
    for b in batches:
        for offset in range(b.first, b.last + 1):
            expected[offset] = (b.state, b.delivery_count)
    got: dict[int, tuple[int, int]] = {}
    combined = combine([], batches, -1)
    for b in combined:
        for offset in range(b.first, b.last + 1):
            assert offset not in got
            got[offset] = (b.state, b.delivery_count)
    assert got == expected
    assert all(a.last < b.first for a, b in zip(combined, combined[1:], strict=False))


def test_initialize_read_write_and_reload() -> None:
    log = Log()
    assert log.run(log.shard.read(Read("g", T, 0), "r")).state is None  # nothing yet
    refused = log.run(log.shard.write(Write("g", T, 0, 0, 0, 5, (StateBatch(5, 6, ACK, 1),)), "w"))
    assert refused.error_code == ErrorCode.invalid_request
    assert log.run(log.shard.initialize(Initialize("g", T, 0, 0, 5), "i")).error_code == ErrorCode.none
    assert log.run(log.shard.write(Write("g", T, 0, 0, 0, -1, (StateBatch(5, 9, AV, 1),)), "w")).error_code == 0
    assert log.run(log.shard.write(Write("g", T, 0, 0, 0, 7, (StateBatch(5, 6, ACK, 1),)), "w")).error_code == 0
    state = log.run(log.shard.read(Read("g", T, 0), "r")).state
    assert state is not None and (state.start_offset, state.batches) == (7, [StateBatch(7, 9, AV, 1)])
    assert [record_type(r.key) for r in log.records] == [rec.SHARE_SNAPSHOT, rec.SHARE_UPDATE, rec.SHARE_UPDATE]
    again = log.reloaded().state("g", T, 0)
    assert again is not None and (again.start_offset, again.batches, again.updates) == (7, state.batches, 2)


def test_the_records_written_carry_what_their_bytes_hold() -> None:
    """The shard replays its own records from what they carry (`StateRecord.decoded`), not from their bytes: the two
    must be the same, snapshots (of a fresh state, of a merged one, cold) and updates alike."""
    log = Log(updates_per_snapshot=2, cold_snapshot_interval_ms=1_000)
    log.run(log.shard.initialize(Initialize("g", T, 0, 0, 5), "i"))
    for first in range(5, 15, 2):
        log.run(log.shard.write(Write("g", T, 0, 0, 1, first, (StateBatch(first, first + 3, ACK, 2),)), "w"))
    for cold in log.timer.advance(1_000):
        log.write(cold.records)
    kinds = [rec.decode(r.key, r.value).kind for r in log.records]
    assert rec.SHARE_UPDATE in kinds and kinds.count(rec.SHARE_SNAPSHOT) >= 3  # the cold one among them
    for record in log.records:
        assert isinstance(record, rec.StateRecord) and record.decoded == rec.decode(record.key, record.value)


def test_a_snapshot_follows_every_so_many_updates() -> None:
    log = Log(updates_per_snapshot=2)
    log.run(log.shard.initialize(Initialize("g", T, 0, 0, 0), "i"))
    for offset in range(4):
        log.run(log.shard.write(Write("g", T, 0, 0, 0, -1, (StateBatch(offset, offset, ARCH, 1),)), "w"))
    kinds = [record_type(r.key) for r in log.records]
    assert kinds == [rec.SHARE_SNAPSHOT, rec.SHARE_UPDATE, rec.SHARE_UPDATE, rec.SHARE_SNAPSHOT, rec.SHARE_UPDATE]
    state = log.shard.state("g", T, 0)
    assert state is not None and state.snapshot_epoch == 1 and state.batches == [StateBatch(0, 3, ARCH, 1)]
    assert log.reloaded().state("g", T, 0) == state


def test_older_epochs_are_fenced_and_a_newer_leader_epoch_is_recorded() -> None:
    log = Log()
    log.run(log.shard.initialize(Initialize("g", T, 0, 3, 0), "i"))
    assert log.run(log.shard.initialize(Initialize("g", T, 0, 2, 0), "i")).error_code == ErrorCode.fenced_state_epoch
    assert log.run(log.shard.read(Read("g", T, 0, leader_epoch=4), "r")).state is not None
    assert log.shard.state("g", T, 0).leader_epoch == 4  # recorded by an update
    assert log.run(log.shard.read(Read("g", T, 0, leader_epoch=3), "r")).error_code == ErrorCode.fenced_leader_epoch
    stale = log.run(log.shard.write(Write("g", T, 0, 3, 3, -1, ()), "w"))
    assert stale.error_code == ErrorCode.fenced_leader_epoch
    assert log.run(log.shard.write(Write("g", T, 0, 2, 4, -1, ()), "w")).error_code == ErrorCode.fenced_state_epoch


def test_delete_leaves_a_tombstone() -> None:
    log = Log()
    log.run(log.shard.initialize(Initialize("g", T, 0, 0, 0), "i"))
    log.run(log.shard.delete(Delete("g", T, 0), "d"))
    assert log.shard.state("g", T, 0) is None and log.records[-1].value is None
    assert log.reloaded().state("g", T, 0) is None


def test_a_failed_write_is_answered_with_its_error() -> None:
    log = Log()
    result = log.shard.initialize(Initialize("g", T, 0, 0, 0), "i")
    failed = log.shard.on_append_failed(result, ErrorCode.kafka_storage_error)
    assert failed.replies[0].response.error_code != ErrorCode.none and log.shard.state("g", T, 0) is None


def test_a_partition_whose_last_snapshot_is_old_is_snapshotted_again_until_all_are_cold() -> None:
    """snapshotColdPartitions: every cold_snapshot_interval_ms, a new snapshot (create timestamp kept) of each
    partition whose last snapshot is that old; nothing once every last snapshot is such a cold one."""
    log = Log(cold_snapshot_interval_ms=1000)
    clock, timer = log.clock, log.timer
    assert timer.deadline(COLD_SNAPSHOTS) == 1000
    assert [r.records for r in timer.advance(1000)] == [()]  # no state: quiet
    log.run(log.shard.initialize(Initialize("g", T, 0, 0, 0), "i"))  # at 1000
    clock.set(1500)
    log.run(log.shard.initialize(Initialize("g", T, 1, 0, 0), "i"))  # at 1500
    log.run(log.shard.write(Write("g", T, 0, 0, 0, -1, (StateBatch(0, 4, ACK, 1),)), "w"))  # an update, not a snapshot
    (cold,) = timer.advance(500)  # at 2000: partition 0's snapshot is 1000 ms old, partition 1's 500 ms
    (record,) = cold.records
    assert record_type(record.key) == rec.SHARE_SNAPSHOT
    log.write(cold.records)
    state = log.shard.state("g", T, 0)
    assert state is not None
    assert (state.snapshot_epoch, state.create_timestamp, state.write_timestamp) == (1, 1000, 2000)
    assert state.batches == [StateBatch(0, 4, ACK, 1)] and log.reloaded().state("g", T, 0) == state
    # at 3000 partition 1's first snapshot is 1500 ms old and partition 0's cold one 1000: both (one not cold yet)
    (cold,) = timer.advance(1000)
    assert [rec.decode(r.key, r.value).key for r in cold.records] == [("g", T, 0), ("g", T, 1)]
    log.write(cold.records)
    quiet = timer.advance(5000)  # every last snapshot a cold one: nothing more is written
    assert len(quiet) == 5 and all(r.records == () for r in quiet)


def test_updates_whose_snapshot_was_pruned_are_skipped_on_load() -> None:
    """After pruning, a partition's updates may remain whose snapshot before them is gone; its later snapshot,
    further on, is its state."""
    log = Log(updates_per_snapshot=1)
    log.run(log.shard.initialize(Initialize("g", T, 0, 0, 0), "i"))
    log.run(log.shard.write(Write("g", T, 0, 0, 0, -1, (StateBatch(0, 1, ACK, 1),)), "w"))  # an update
    log.run(log.shard.write(Write("g", T, 0, 0, 0, -1, (StateBatch(2, 3, ACK, 1),)), "w"))  # a snapshot
    assert [record_type(r.key) for r in log.records] == [rec.SHARE_SNAPSHOT, rec.SHARE_UPDATE, rec.SHARE_SNAPSHOT]
    del log.records[0]  # pruned
    assert log.reloaded().state("g", T, 0) == log.shard.state("g", T, 0)


def test_cold_snapshots_of_many_large_states_are_written_in_batches_of_bounded_size() -> None:
    """One run's snapshots are one batch: past COLD_SNAPSHOT_BATCH_BYTES the rest go in runs that follow at once,
    so that no batch is refused for max.message.bytes and every partition is snapshotted."""
    from herd.coordinator.share_state.shard import COLD_SNAPSHOT_BATCH_BYTES

    log = Log(cold_snapshot_interval_ms=1000)
    timer = log.timer
    fragmented = tuple(StateBatch(2 * i, 2 * i, ACK, 1) for i in range(1000))  # ~20 KB a snapshot
    for p in range(100):  # states as a load leaves them (a write would combine 1,000 batches: slow)
        log.shard.replay(
            rec.snapshot_record(
                "g",
                T,
                p,
                snapshot_epoch=0,
                state_epoch=0,
                leader_epoch=0,
                start_offset=0,
                create_timestamp=0,
                write_timestamp=0,
                batches=fragmented,
            )  # fmt: skip
        )
    runs = [r for r in timer.advance(1000) if r.records]
    assert len(runs) > 2
    for run in runs:
        size = sum(len(r.key) + len(r.value or b"") for r in run.records)
        last = len(run.records[-1].key) + len(run.records[-1].value or b"")
        assert size - last < COLD_SNAPSHOT_BATCH_BYTES
        log.write(run.records)
    assert sorted(rec.decode(r.key, r.value).key[2] for run in runs for r in run.records) == list(range(100))
    assert all(r.records == () for r in timer.advance(1000))  # every one a cold snapshot now: quiet
