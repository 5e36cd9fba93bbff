"""The runtime of one coordinator shard as a synchronous state machine, which the asyncio shell
(runtime/shard.py) and the coordinator simulator (tests/simulation/runtime.py) both drive.

Kafka's CoordinatorRuntime keeps the same concerns in one class with its event loop and its log (apache/kafka
coordinator-common/src/main/java/org/apache/kafka/coordinator/common/runtime/CoordinatorRuntime.java); here they
are split: `ShardMachine` decides, a driver does the I/O. The machine holds one shard's state: its life
(`ShardState`), the Results staged but not yet written (`staged`), the ones being written (`in_flight`), whether
its driver has a writer running (`writing`). It never awaits, reads a clock only to stamp batches, and touches no
log: the driver tells it what happened (a Result to apply, a write taken, a write durable or failed, a batch
loaded, the load done, an unload asked for) and it answers through three calls it was given: `release`
(these replies may go out), `start_writing` (something is staged and no writer runs: start one, which takes
`begin_write()` until nothing is staged) and `on_failed` (the shard failed: reload it).

The rules, for every Result of a request handler or a timer operation (`apply`):
- with records: they are encoded as one v2 batch (transactional, of the Result's producer, for a
  TxnOffsetCommit), replayed into the shard at once (so the next request sees them) and staged; the Result's
  replies wait until its batch is durable;
- with a transaction marker: a control batch, replayed with `replay_end_transaction_marker` and staged the same
  way, in order with every other write (Kafka's CoordinatorRuntime.completeTransaction);
- without records: its replies go out at once if nothing is staged or being written, else they queue behind
  (a Result never overtakes an earlier write: CoordinatorRuntime's deferred events);
- a batch the driver refuses before it is written (`refuse`: over the partition's max message size; the
  simulator's armed fault) goes through the shard's `on_append_failed(result, MESSAGE_TOO_LARGE)`, whose Result
  is applied in turn; if the refused Result had changed live state that no rollback undoes (`StateDiverged`),
  the shard fails, so that live state is always what replaying the log gives;
- while the shard is neither active nor unloading a Result is rejected: its requests get the shard's mapped
  KAFKA_STORAGE_ERROR.

A write is group commit: `begin_write()` takes everything staged at once; `written()` releases the replies of
those entries in order; `write_failed(error)` fails the shard. Failing (`fail`) answers everything staged (and,
for a failed write, what it held) with `on_append_failed(KAFKA_STORAGE_ERROR)`, unloads the shard's groups
(`on_unloaded`: parked requests get NOT_COORDINATOR), cancels its timers and calls `on_failed`; the driver
reloads the partition from its log, as Kafka reverts a shard to its last written offset
(CoordinatorRuntime.revertLastWrittenOffset). A write already in flight when the shard failed for another reason
(a refused batch, a failed compaction) still lands and is answered.

Loading replays each batch of the log (`load_batch`) and then goes active (`loaded`, which applies
`on_loaded()`); an unload asked for while loading wins. Unloading (`unload`, then `unloaded()` once the driver's
writer has finished) lets pending writes finish and be answered, then answers parked requests NOT_COORDINATOR.

What a shard must offer is `CoordinatorShard`, Kafka's interface of that name (coordinator-common/.../runtime/
CoordinatorShard.java: replay, replayEndTransactionMarker, onLoaded, onUnloaded), with herd's batch replay for
loading and the rollback of a failed append; the group coordinator's shard and the transaction coordinator's
both implement it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from herd.coordinator import ErrorCode, Record, Result
from herd.coordinator.result import Reply
from herd.coordinator.timer import Clock
from herd.log.records import control_batch
from herd.runtime.batches import LoadedBatch, encode_batch


class CoordinatorShard(Protocol):
    """What the runtime needs of a coordinator's shard (Kafka's CoordinatorShard)."""

    def replay(self, record: Record, producer_id: int = -1, producer_epoch: int = -1) -> None:
        """Apply one record of a Result being written (skipped if live state already reflects it)."""

    def replay_loaded_batch(
        self, records: list[tuple[bytes, bytes | None]], producer_id: int = -1, producer_epoch: int = -1
    ) -> int:
        """Apply one batch read back from the log; returns how many records were skipped."""
        ...

    def replay_end_transaction_marker(self, producer_id: int, commit: bool, producer_epoch: int = -1) -> None:
        """A COMMIT or ABORT marker of `producer_id` is in the log."""

    def on_loaded(self) -> Result:
        """The log is replayed: arm timers, resume what the log left under way."""
        ...

    def on_unloaded(self) -> Result:
        """The shard stops: parked requests are answered."""
        ...

    def on_append_failed(self, result: Result, error: ErrorCode) -> Result:
        """`result`'s records were not written: undo what can be undone, answer its requests with errors."""
        ...


class Timers(Protocol):
    """The part of the shard's timer the machine uses."""

    def cancel_all(self) -> None: ...


S = TypeVar("S", bound=CoordinatorShard)


class ShardState(Enum):
    LOADING = "loading"
    ACTIVE = "active"
    UNLOADING = "unloading"
    UNLOADED = "unloaded"
    FAILED = "failed"


class StateDiverged(Exception):
    """A refused batch carried a change live state had already made and nothing undoes (a group that became Empty
    when its last sessions expired: Kafka only logs that failed write, GroupMetadataManager's
    completeClassicGroupJoin). The shard fails and is reloaded from its log, so that live state is again what a
    replay of the log gives (found by the coordinator simulator, tests/simulation)."""


@dataclass(slots=True)
class Pending:
    """A staged Result and its encoded batch (None: a Result without records, queued behind a write)."""

    result: Result
    batch: bytes | None


class ShardMachine(Generic[S]):
    """One shard's staging, ordering, reply release, failure and reload logic (see the module docstring)."""

    __slots__ = (
        "shard",
        "state",
        "staged",
        "in_flight",
        "writing",
        "_clock",
        "_timers",
        "_release",
        "_start_writing",
        "_refuse",
        "_on_failed",
        "_was_loading",
    )

    def __init__(
        self,
        shard: S,
        *,
        clock: Clock,
        timers: Timers,
        release: Callable[[tuple[Reply, ...]], None],
        start_writing: Callable[[], None],
        refuse: Callable[[bytes], bool],
        on_failed: Callable[[BaseException, int], None],
    ) -> None:
        self.shard = shard
        self.state = ShardState.LOADING
        self.staged: list[Pending] = []
        self.in_flight: list[Pending] = []
        self.writing = False
        self._clock = clock
        self._timers = timers
        self._release = release
        self._start_writing = start_writing
        self._refuse = refuse
        self._on_failed = on_failed  # (error, requests answered with errors)
        self._was_loading = False

    @property
    def pending(self) -> bool:
        """Something is staged or being written."""
        return bool(self.staged) or self.writing

    def unavailable_error(self) -> ErrorCode | None:
        """None if the shard serves requests, else what they get."""
        state = self.state
        if state is ShardState.ACTIVE:
            return None
        if state is ShardState.LOADING:
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.not_coordinator

    # -- results -----------------------------------------------------------------------------------------------

    def apply(self, result: Result) -> None:
        """Stage, replay or release one Result (see the module docstring)."""
        state = self.state
        if state is not ShardState.ACTIVE and state is not ShardState.UNLOADING:
            self._reject(result)
        elif result.marker is not None:
            marker = result.marker
            self.shard.replay_end_transaction_marker(marker.producer_id, marker.commit, marker.producer_epoch)
            self._stage(Pending(result, control_batch(*marker, self._clock.now_ms(), 0)))
        elif result.records:
            transaction = result.transaction
            if transaction is None:
                batch = encode_batch(result.records, self._clock.now_ms())
            else:  # TxnOffsetCommit: one transactional batch of the producer
                batch = encode_batch(result.records, self._clock.now_ms(), *transaction)
            if self._refuse(batch):
                self.apply(self.shard.on_append_failed(result, ErrorCode.message_too_large))
                if result.rollback is None and any(record.applied for record in result.records):
                    self.fail(
                        StateDiverged(f"a refused {len(batch)}-byte batch left groups in a state its log does not hold")
                    )
                return
            replay = self.shard.replay
            if transaction is None:
                for record in result.records:
                    replay(record)
            else:
                for record in result.records:
                    replay(record, *transaction)
            self._stage(Pending(result, batch))
        elif self.staged or self.writing:
            self.staged.append(Pending(result, None))
        else:
            self._release(result.replies)

    def _stage(self, pending: Pending) -> None:
        self.staged.append(pending)
        if not self.writing:
            self.writing = True
            self._start_writing()

    def _reject(self, result: Result) -> None:
        """A Result that can no longer be written: its requests get the mapped storage error."""
        self._release(self.shard.on_append_failed(result, ErrorCode.kafka_storage_error).replies)

    # -- writes ------------------------------------------------------------------------------------------------

    def begin_write(self) -> list[Pending]:
        """Take everything staged for one write (group commit); the driver appends the batches in order."""
        entries, self.staged = self.staged, []
        self.in_flight = entries
        return entries

    def written(self) -> None:
        """The write taken by `begin_write` is durable: release its replies, in order."""
        entries, self.in_flight = self.in_flight, []
        release = self._release
        for entry in entries:
            release(entry.result.replies)

    def write_failed(self, error: BaseException) -> None:
        """The write taken by `begin_write` failed (a disk error): the shard fails with it."""
        entries, self.in_flight = self.in_flight, []
        if self.state is ShardState.FAILED:  # failed already (a refused batch): answer what the write held
            for entry in entries:
                self._reject(entry.result)
            return
        self._fail(entries + self.staged, error)

    def writer_stopped(self) -> None:
        """The driver's writer has stopped (nothing staged, or the shard failed)."""
        self.writing = False

    def fail(self, error: BaseException) -> None:
        """Fail the shard (a refused batch that diverged, a failed compaction): what is staged is answered with
        errors; a write in flight still lands and is answered (`written`)."""
        self._fail(self.staged, error)

    def _fail(self, entries: list[Pending], error: BaseException) -> None:
        if self.state is ShardState.FAILED:
            return
        self.state = ShardState.FAILED
        self.staged = []
        for entry in entries:
            self._reject(entry.result)
        self._release(self.shard.on_unloaded().replies)
        self._timers.cancel_all()
        self._on_failed(error, len(entries))

    # -- loading and unloading ---------------------------------------------------------------------------------

    def load_batch(self, batch: LoadedBatch) -> None:
        """Replay one batch read back from the log."""
        if batch.marker is not None:
            self.shard.replay_end_transaction_marker(batch.producer_id, batch.marker, batch.producer_epoch)
        else:
            self.shard.replay_loaded_batch(batch.records, batch.producer_id, batch.producer_epoch)

    def loaded(self) -> bool:
        """The log is replayed: go active and apply `on_loaded()`. False if the shard was unloaded meanwhile."""
        if self.state is not ShardState.LOADING:
            return False
        self.state = ShardState.ACTIVE
        self.apply(self.shard.on_loaded())
        return True

    def load_failed(self, error: BaseException | None) -> None:
        """The log could not be replayed: the shard fails; `on_failed` is told unless `error` is None (nothing
        a reload would help: a corrupt record, a bug)."""
        self.state = ShardState.FAILED
        if error is not None:
            self._on_failed(error, 0)

    def unload(self) -> bool:
        """Stop serving (new Results are rejected once the writer is done); timers are cancelled. False if there
        is nothing to unload (unloaded or failed already). The driver lets its writer finish, then `unloaded()`."""
        if self.state is ShardState.UNLOADED or self.state is ShardState.FAILED:
            return False
        self._was_loading = self.state is ShardState.LOADING
        self.state = ShardState.UNLOADING
        self._timers.cancel_all()
        return True

    def unloaded(self) -> None:
        """The writer has finished: parked requests are answered (`on_unloaded`), the shard is unloaded. Nothing
        happens if it failed meanwhile."""
        if self.state is not ShardState.UNLOADING:
            return
        if not self._was_loading:
            self._release(self.shard.on_unloaded().replies)
        self._timers.cancel_all()
        self.state = ShardState.UNLOADED
