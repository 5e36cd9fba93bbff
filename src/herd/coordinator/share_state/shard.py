"""`ShareStateShard`: the share coordinator of one `__share_group_state` partition (KIP-932; Kafka 4.2's
ShareCoordinatorShard, confluentinc/kafka share-coordinator/src/main/java/org/apache/kafka/coordinator/share/
ShareCoordinatorShard.java and PersisterStateBatchCombiner.java), pure as the group coordinator's shards are.

It keeps the durable state of share partitions, keyed by (group id, topic id, partition): state epoch, leader epoch,
start offset and the state batches of the records in flight (AVAILABLE ones with their delivery counts,
ACKNOWLEDGED, ARCHIVED). Requests, each answered once its records are durable:
- `initialize`: a fresh state (a snapshot of snapshot epoch one more than before, or 0) at a state epoch and start
  offset; FENCED_STATE_EPOCH if the stored state epoch is newer;
- `read`: the state, or None when the partition has none; a newer leader epoch is recorded (an update record);
  FENCED_LEADER_EPOCH for an older one (a `ReadSummary` is a read at leader epoch -1);
- `write`: the batches that changed and the start offset (-1: unchanged), as a ShareUpdate, or as a new snapshot
  merging everything once `updates_per_snapshot` updates followed the last one
  (share.coordinator.snapshot.update.records.per.snapshot, 500); FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for a
  writer behind the stored epochs; INVALID_REQUEST for a partition never initialized;
- `delete`: the tombstone.
Replay: a snapshot replaces a partition's state, an update is merged into it (its batches override what they
overlap; batches below the start offset go), a tombstone removes it. Loading may meet updates of a partition whose
snapshot before them is gone: the log is pruned up to the oldest of the partitions' latest snapshots
(runtime/share_state.py, Kafka's ShareCoordinatorOffsetsManager), so a partition's earlier snapshot may be deleted
while updates that followed it remain, made redundant by its later snapshot further on; they are skipped.

Cold snapshots (ShareCoordinatorShard.snapshotColdPartitions): every `cold_snapshot_interval_ms`
(share.coordinator.cold.partition.snapshot.interval.ms) a timer writes a new snapshot of each partition whose last
snapshot is that old, with its create timestamp kept, so that a partition no longer written does not hold the
pruning of its `__share_group_state` partition back for ever; when every partition's last snapshot is such a cold
one already, nothing is written (the coordinator is quiet, and the log no longer grows).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from herd.coordinator.errors import ErrorCode, append_error_to_response_error
from herd.coordinator.records import Record
from herd.coordinator.result import Reply, Result
from herd.coordinator.share_state import records as rec
from herd.coordinator.share_state.records import StateBatch
from herd.coordinator.timer import Clock, Timer

log = logging.getLogger(__name__)

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


@dataclass(slots=True)
class ShareState:
    """One share partition's durable state (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: list[StateBatch] = field(default_factory=list)
    create_timestamp: int = 0
    write_timestamp: int = 0
    updates: int = 0  # update records since the last snapshot


@dataclass(frozen=True, slots=True)
class Initialize:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    state_epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class Read:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ReadSummary(Read):
    """ReadShareGroupStateSummary's request: a read that records no leader epoch (`read` with leader epoch -1)."""


@dataclass(frozen=True, slots=True)
class Write:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int  # -1: unchanged
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class Delete:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareStateResponse:
    error_code: int = ErrorCode.none
    error_message: str | None = None
    state: ShareState | None = None  # a read's answer (a copy)
    delivery_complete: int = -1  # a summary's: the offsets from the start offset on that are done (KIP-1226)


def combine(current: list[StateBatch], new: list[StateBatch] | tuple[StateBatch, ...], start: int) -> list[StateBatch]:
    """`new` laid over `current` in order (each batch wins over what it overlaps), without what lies below `start`,
    adjacent batches of the same state and delivery count merged (PersisterStateBatchCombiner)."""
    out = sorted(current)
    for batch in new:
        kept: list[StateBatch] = []
        for old in out:
            if old.last < batch.first or old.first > batch.last:
                kept.append(old)
                continue
            if old.first < batch.first:
                kept.append(old._replace(last=batch.first - 1))
            if old.last > batch.last:
                kept.append(old._replace(first=batch.last + 1))
        kept.append(batch)
        out = sorted(kept)
    merged: list[StateBatch] = []
    for batch in out:
        if start >= 0:
            if batch.last < start:
                continue
            if batch.first < start:
                batch = batch._replace(first=start)
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and previous.last + 1 == batch.first
            and (previous.state, previous.delivery_count) == (batch.state, batch.delivery_count)
        ):
            merged[-1] = previous._replace(last=batch.last)
        else:
            merged.append(batch)
    return merged


COLD_SNAPSHOTS = "share-cold-snapshots"  # the timer key of the cold-snapshot job
# the most bytes of snapshots one cold-snapshot run writes, a batch well below the default max.message.bytes (1 MiB)
COLD_SNAPSHOT_BATCH_BYTES = 512 * 1024


class ShareStateShard:
    def __init__(
        self,
        *,
        clock: Clock,
        updates_per_snapshot: int = 500,
        timer: Timer | None = None,
        cold_snapshot_interval_ms: int = 300_000,
    ) -> None:
        self._clock = clock
        self.updates_per_snapshot = updates_per_snapshot
        self._timer = timer  # None: no cold snapshots (a shard only replayed, in tests)
        self.cold_snapshot_interval_ms = cold_snapshot_interval_ms
        self._cold_round: list[Key] = []  # the partitions the current cold-snapshot round has still to look at
        self._states: dict[Key, ShareState] = {}

    # --- requests ------------------------------------------------------------------------------------------

    def initialize(self, req: Initialize, reply: object) -> Result:
        key = (req.group_id, req.topic_id, req.partition)
        current = self._states.get(key)
        if current is not None and current.state_epoch > req.state_epoch:
            return _answer(reply, ShareStateResponse(ErrorCode.fenced_state_epoch))
        now = self._clock.now_ms()
        record = rec.snapshot_record(
            *key,
            snapshot_epoch=current.snapshot_epoch + 1 if current is not None else 0,
            state_epoch=req.state_epoch,
            leader_epoch=0,  # a fresh state (ShareGroupOffset.fromRequest)
            start_offset=req.start_offset,
            create_timestamp=now,
            write_timestamp=now,
            batches=(),
        )
        return Result(records=(record,), replies=(Reply(reply, ShareStateResponse()),))

    def read(self, req: Read, reply: object) -> Result:
        key = (req.group_id, req.topic_id, req.partition)
        current = self._states.get(key)
        if current is None:
            return _answer(reply, ShareStateResponse())
        if req.leader_epoch != -1 and current.leader_epoch > req.leader_epoch:
            return _answer(reply, ShareStateResponse(ErrorCode.fenced_leader_epoch))
        answer = ShareStateResponse(state=_copy(current))
        if req.leader_epoch == -1 or req.leader_epoch == current.leader_epoch:
            return _answer(reply, answer)
        update = Write(*key, current.state_epoch, req.leader_epoch, current.start_offset, ())
        return Result(records=(self._state_record(key, current, update),), replies=(Reply(reply, answer),))

    def write(self, req: Write, reply: object) -> Result:
        key = (req.group_id, req.topic_id, req.partition)
        current = self._states.get(key)
        if current is None:
            message = "Write operation on uninitialized share partition not allowed."
            return _answer(reply, ShareStateResponse(ErrorCode.invalid_request, message))
        if req.leader_epoch != -1 and current.leader_epoch > req.leader_epoch:
            return _answer(reply, ShareStateResponse(ErrorCode.fenced_leader_epoch))
        if req.state_epoch != -1 and current.state_epoch > req.state_epoch:
            return _answer(reply, ShareStateResponse(ErrorCode.fenced_state_epoch))
        return Result(records=(self._state_record(key, current, req),), replies=(Reply(reply, ShareStateResponse()),))

    def delete(self, req: Delete, reply: object) -> Result:
        key = (req.group_id, req.topic_id, req.partition)
        if key not in self._states:
            return _answer(reply, ShareStateResponse())
        return Result(records=(rec.tombstone(*key),), replies=(Reply(reply, ShareStateResponse()),))

    def _state_record(self, key: Key, current: ShareState, req: Write) -> Record:
        """generateShareStateRecord: an update, or a snapshot merging everything when enough updates followed the
        last snapshot."""
        leader_epoch = req.leader_epoch if req.leader_epoch != -1 else current.leader_epoch
        if current.updates >= self.updates_per_snapshot:
            start = req.start_offset if req.start_offset != -1 else current.start_offset
            now = self._clock.now_ms()
            return rec.snapshot_record(
                *key,
                snapshot_epoch=current.snapshot_epoch + 1,
                state_epoch=current.state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start,
                create_timestamp=now,
                write_timestamp=now,
                batches=combine(current.batches, req.batches, start),
            )
        return rec.update_record(
            *key,
            snapshot_epoch=current.snapshot_epoch,
            leader_epoch=leader_epoch,
            start_offset=req.start_offset,
            batches=combine([], req.batches, req.start_offset),
        )

    def snapshot_cold(self) -> Result:
        """Timer operation: a new snapshot of every partition whose last snapshot is at least
        `cold_snapshot_interval_ms` old (see the module docstring); re-arms itself. The snapshots of one run are
        one batch, so a run stops at COLD_SNAPSHOT_BATCH_BYTES and the next one follows at once (the partition's
        max.message.bytes would refuse a larger batch, and pruning would then wait for ever)."""
        states = self._states
        if not self._cold_round:  # a new round: the partitions to snapshot, taken in turn by this run and the next
            if all(state.create_timestamp != state.write_timestamp for state in states.values()):
                self._schedule_cold_snapshots()
                return Result()  # every last snapshot a cold one already (or no state at all): quiet
            self._cold_round = list(reversed(states))  # taken with pop(): in the states' order
        now = self._clock.now_ms()
        records: list[Record] = []
        size = 0
        while self._cold_round:
            if size >= COLD_SNAPSHOT_BATCH_BYTES:  # the rest in the next run, at once
                self._schedule_cold_snapshots(now)
                return Result(records=tuple(records))
            key = self._cold_round.pop()
            state = states.get(key)
            if state is None or now - state.write_timestamp < self.cold_snapshot_interval_ms:
                continue
            record = rec.snapshot_record(
                *key,
                snapshot_epoch=state.snapshot_epoch + 1,
                state_epoch=state.state_epoch,
                leader_epoch=state.leader_epoch,
                start_offset=state.start_offset,
                create_timestamp=state.create_timestamp,
                write_timestamp=now,
                batches=state.batches,
            )
            records.append(record)
            size += len(record.key) + len(record.value or b"")
        self._schedule_cold_snapshots()
        return Result(records=tuple(records))

    def _schedule_cold_snapshots(self, deadline: int | None = None) -> None:
        """The next cold-snapshot run: at `deadline`, by default one interval from now."""
        if self._timer is not None:
            if deadline is None:
                deadline = self._clock.now_ms() + self.cold_snapshot_interval_ms
            self._timer.schedule(COLD_SNAPSHOTS, deadline, self.snapshot_cold)

    # --- replay and load ---------------------------------------------------------------------------------

    def replay(self, record: Record, producer_id: int = -1, producer_epoch: int = -1) -> None:
        decoded = record.decoded if isinstance(record, rec.StateRecord) else None
        self._apply(decoded if decoded is not None else rec.decode(record.key, record.value))

    def replay_loaded(self, key: bytes, value: bytes | None) -> None:
        self._apply(rec.decode(key, value))

    def _apply(self, decoded: rec.Decoded) -> None:
        k = decoded.key
        if decoded.value is None:
            if decoded.kind == rec.SHARE_SNAPSHOT:
                self._states.pop(k, None)
            return
        v = decoded.value
        if isinstance(v, rec.ShareSnapshotValue):
            self._states[k] = ShareState(
                int(v.snapshot_epoch),
                int(v.state_epoch),
                int(v.leader_epoch),
                int(v.start_offset),
                rec.batches_of(v.state_batches),
                int(v.create_timestamp),
                int(v.write_timestamp),
            )
            return
        current = self._states.get(k)
        if current is None:  # its snapshot was pruned, a later one follows (see the module docstring)
            return
        start = int(v.start_offset) if v.start_offset != -1 else current.start_offset
        current.start_offset = start
        if v.leader_epoch != -1:
            current.leader_epoch = max(current.leader_epoch, int(v.leader_epoch))
        current.batches = combine(current.batches, rec.batches_of(v.state_batches), start)
        current.updates += 1

    def replay_loaded_batch(
        self, records: list[tuple[bytes, bytes | None]], producer_id: int = -1, producer_epoch: int = -1
    ) -> int:
        skipped = 0
        for key, value in records:
            try:
                self.replay_loaded(key, value)
            except (ValueError, IndexError, KeyError) as error:
                skipped += 1
                log.warning("skipping an unreadable __share_group_state record: %s", error)
        return skipped

    def replay_end_transaction_marker(self, producer_id: int, commit: bool, producer_epoch: int = -1) -> None:
        """The share coordinator writes no transactions."""

    def on_loaded(self) -> Result:
        self._schedule_cold_snapshots()
        return Result()

    def on_unloaded(self) -> Result:
        self._states.clear()
        self._cold_round.clear()
        return Result()

    def on_append_failed(self, result: Result, error: ErrorCode) -> Result:
        """Nothing to undo (state changes only when records are replayed): each request is answered with the
        error the write maps to."""
        mapped = append_error_to_response_error(error)
        return Result(replies=tuple(Reply(r.handle, ShareStateResponse(mapped)) for r in result.replies))

    # --- inspection ----------------------------------------------------------------------------------------

    def state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ShareState | None:
        """One partition's state (read it, never change it)."""
        return self._states.get((group_id, topic_id, partition))

    def size(self) -> int:
        return len(self._states)


def _answer(reply: object, response: ShareStateResponse) -> Result:
    return Result(replies=(Reply(reply, response),))


def delivery_complete(state: ShareState) -> int:
    """The offsets from the start offset on that are ACKNOWLEDGED or ARCHIVED (KIP-1226's delivery-complete count)."""
    start = state.start_offset
    return sum(b.last - max(b.first, start) + 1 for b in state.batches if b.state in _DONE and b.last >= start)


_DONE = frozenset({2, 4})  # ACKNOWLEDGED, ARCHIVED


def _copy(state: ShareState) -> ShareState:
    return ShareState(
        state.snapshot_epoch,
        state.state_epoch,
        state.leader_epoch,
        state.start_offset,
        list(state.batches),
        state.create_timestamp,
        state.write_timestamp,
        state.updates,
    )
