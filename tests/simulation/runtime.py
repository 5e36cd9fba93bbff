"""The runtime half of the simulation: herd's `ShardRuntime` protocol, mirrored over simulated time.

`Host` is one `__consumer_offsets` partition: its durable log (a list of real v2 record batches, made with
herd.runtime.batches.encode_batch and read back with decode_batches) and the successive `Incarnation`s
that serve it. Each incarnation owns a real `GroupCoordinatorShard` and drives it as
src/herd/runtime/shard.py does. Mirrored, step for step:

- `apply(result)`: records are encoded as one batch, *replayed into the shard at once* and staged; replies
  wait until everything staged up to them is durable; a Result without records queues behind pending
  writes or is delivered at once (ShardRuntime.apply).
- A batch refused before it is written (the runtime's MESSAGE_TOO_LARGE check) goes through
  `on_append_failed(result, MESSAGE_TOO_LARGE)`, whose Result runs the core's rollback, and is applied in
  turn. The simulation refuses a batch when a fault armed it, not by size. When the refused Result changed live
  state that no rollback undoes (a group that became Empty), the shard fails as for a disk error
  (ShardRuntime's StateDiverged), except that a write already in flight lands and is answered.
- Group commit: one write at a time takes every staged batch (ShardRuntime._write_loop); it completes after
  a simulated fsync delay, then the replies of its entries are released in order.
- A failed write (a disk error) fails the shard (ShardRuntime._fail): the entries of that write and
  everything staged get `on_append_failed(KAFKA_STORAGE_ERROR)` replies (the rollback's records are not
  written), `on_unloaded` answers parked requests NOT_COORDINATOR, timers are cancelled, and the partition is
  reloaded from the durable log after a backoff (herd.runtime.recovery).
- Requests to a shard that is not active: COORDINATOR_LOAD_IN_PROGRESS while loading (Heartbeat NONE,
  blindly, as server/apis/heartbeat.py answers), NOT_COORDINATOR otherwise (ShardRuntime._check_available).
- Heartbeats take the fast path (`heartbeat_error`) when nothing is pending, else the general path.
- Load: the new shard replays every durable batch (`replay_loaded_batch`), then `on_loaded()` is applied.
- A graceful move (ShardRuntime.unload): no new requests, timers cancelled, the write in flight and the staged
  ones finish and are acknowledged, then `on_unloaded`.

Not mirrored: compaction (the log is never compacted; replay of the full log is what a compacted one must be
equal to), chunked loading and the load's yielding to the loop (a load is one step after a delay), the
heartbeat fast path's byte-level response caching, max-batch-size arithmetic. A node crash (kill -9) is not
ShardRuntime behaviour but a process death: staged results vanish without replies, the write in flight
lands or not (seeded), every connection drops; the next incarnation loads what is durable.
"""

from __future__ import annotations

import enum
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from herd.coordinator import CoordinatorConfig, ErrorCode, GroupCoordinatorShard, Result
from herd.coordinator.result import Reply
from herd.coordinator.timer import Operation
from herd.runtime.batches import decode_batches, encode_batch

from .loop import EventLoop, SimTimer

Deliver = Callable[[object, object], None]


class State(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    UNLOADING = "unloading"
    UNLOADED = "unloaded"
    FAILED = "failed"


@dataclass(slots=True)
class Pending:
    result: Result
    batch: bytes | None


class Observer:
    """What the invariant checker hears from the runtime (no-ops here)."""

    def core_call(self, shard: GroupCoordinatorShard, kind: str, detail: object) -> Callable[[], None]:
        """Called before a core call; the returned function is called after it."""
        return _nothing

    def durable(self, batch: bytes, entries: list[Pending]) -> None:
        """A batch became durable (before its replies are released)."""

    def loaded(self, shard: GroupCoordinatorShard) -> None:
        """A new incarnation replayed the durable log (before on_loaded is applied)."""


def _nothing() -> None:
    return None


class Faults:
    """Armed storage faults: the next batch is refused, the next write fails (set by the schedule)."""

    def __init__(self) -> None:
        self.refuse_next = 0
        self.fail_next = 0

    def take_refusal(self) -> bool:
        if self.refuse_next:
            self.refuse_next -= 1
            return True
        return False

    def take_failure(self) -> bool:
        if self.fail_next:
            self.fail_next -= 1
            return True
        return False


class Incarnation:
    """One ShardRuntime's life: a shard, its staged writes and its state."""

    def __init__(self, host: Host, number: int) -> None:
        self.host = host
        self.number = number
        self.state = State.LOADING
        self.timer = SimTimer(host.loop, self._fire)
        ids = itertools.count()
        self.shard = GroupCoordinatorShard(
            clock=host.loop.clock, timer=self.timer, config=host.config, uuid_factory=lambda: f"u{number}-{next(ids)}"
        )
        self.staged: list[Pending] = []
        self.in_flight: list[Pending] = []
        self.draining = False  # failed for a refused batch while a write was in flight (see `_drained`)
        self.writing = False

    @property
    def pending(self) -> bool:
        return bool(self.staged) or self.writing

    # -- requests -------------------------------------------------------------------------------

    def call(self, method: str, request: object, handle: object, detail: object) -> None:
        after = self.host.observer.core_call(self.shard, method, detail)
        result = getattr(self.shard, method)(request, handle)
        after()
        self.apply(result)

    def heartbeat(self, request: object, handle: object, respond: Callable[[int], object]) -> None:
        if self.pending:
            self.call("heartbeat", request, handle, request)
            return
        after = self.host.observer.core_call(self.shard, "heartbeat", request)
        r = request
        code = self.shard.heartbeat_error(r.group_id, r.generation_id, r.member_id, r.group_instance_id)  # type: ignore[attr-defined]
        after()
        self.host.deliver(handle, respond(code))

    def _fire(self, key: str, operation: Operation) -> None:
        self.host.note(f"timer {key}")
        after = self.host.observer.core_call(self.shard, "timer", key)
        result = operation()
        after()
        self.apply(result)

    # -- results (ShardRuntime.apply) -------------------------------------------------------------

    def apply(self, result: Result) -> None:
        if self.state not in (State.ACTIVE, State.UNLOADING):
            self._reject(result)
        elif result.records:
            batch = encode_batch(result.records, self.host.loop.now())
            if self.host.faults.take_refusal():
                self.host.note("refused a batch before writing it (MESSAGE_TOO_LARGE path)")
                after = self.host.observer.core_call(self.shard, "append-failed", result)
                out = self.shard.on_append_failed(result, ErrorCode.message_too_large)
                after()
                self.apply(out)
                if result.rollback is None and any(record.applied for record in result.records):
                    self.host.note("nothing undoes what the refused batch changed: the shard fails (StateDiverged)")
                    self.draining = self.writing  # the write in flight still lands and is answered
                    self._fail(self.staged)
                return
            for record in result.records:
                self.shard.replay(record)
            self.staged.append(Pending(result, batch))
            self._start_writer()
        elif self.pending:
            self.staged.append(Pending(result, None))
        else:
            self.host.deliver_all(result.replies)

    def _reject(self, result: Result) -> None:
        after = self.host.observer.core_call(self.shard, "append-failed", result)
        out = self.shard.on_append_failed(result, ErrorCode.kafka_storage_error)
        after()
        self.host.deliver_all(out.replies)

    def _start_writer(self) -> None:
        if not self.writing:
            self.writing = True
            self.host.loop.after(0, self._write, "write")

    def _write(self) -> None:
        """One group-commit round: take everything staged, complete after the fsync delay."""
        if self.state in (State.FAILED, State.UNLOADED):
            return
        entries, self.staged = self.staged, []
        self.in_flight = entries
        delay = self.host.rng.randint(0, 4)
        self.host.loop.after(delay, lambda: self._written(entries), "written")

    def _written(self, entries: list[Pending]) -> None:
        if self.draining:
            self._drained(entries)
            return
        if self.state in (State.FAILED, State.UNLOADED):
            return  # the node crashed meanwhile
        if self.host.faults.take_failure():
            self.host.note("a write failed: the shard fails")
            self._fail(entries + self.staged)
            return
        for entry in entries:
            if entry.batch is not None:
                self.host.append_durable(entry.batch, entries)
        for entry in entries:
            self.host.deliver_all(entry.result.replies)
        self.writing = False
        if self.staged:
            self._start_writer()
        elif self.state is State.UNLOADING:
            self._finish_unload()

    def _drained(self, entries: list[Pending]) -> None:
        """The write that was in flight when the shard failed for a refused batch (ShardRuntime's writer finishes
        its round: the batch lands and its replies go out; nothing staged is written any more)."""
        self.draining = self.writing = False
        for entry in entries:
            if entry.batch is not None:
                self.host.append_durable(entry.batch, entries)
        for entry in entries:
            self.host.deliver_all(entry.result.replies)

    def _fail(self, entries: list[Pending]) -> None:
        """ShardRuntime._fail: error replies, groups unloaded, timers cancelled; the host reloads."""
        self.state = State.FAILED
        self.staged = []
        self.writing = False
        for entry in entries:
            self._reject(entry.result)
        self.host.deliver_all(self.shard.on_unloaded().replies)
        self.timer.cancel_all()
        self.host.failed(self)

    # -- load and unload --------------------------------------------------------------------------

    def load(self) -> None:
        for batch in self.host.durable:
            for _, records in decode_batches(batch):
                self.shard.replay_loaded_batch(records)
        self.host.observer.loaded(self.shard)
        self.state = State.ACTIVE
        after = self.host.observer.core_call(self.shard, "loaded", None)
        result = self.shard.on_loaded()
        after()
        self.apply(result)

    def unload(self) -> None:
        self.state = State.UNLOADING
        self.timer.cancel_all()
        if not self.writing and not self.staged:
            self._finish_unload()

    def _finish_unload(self) -> None:
        after = self.host.observer.core_call(self.shard, "unloaded", None)
        replies = self.shard.on_unloaded().replies
        after()
        self.host.deliver_all(replies)
        self.timer.cancel_all()
        self.state = State.UNLOADED

    def crash(self) -> bool:
        """kill -9: nothing more is answered; returns whether the write in flight landed (its fsync completed
        just before the process died, its replies never left)."""
        landed = self.writing and bool(self.in_flight) and self.host.rng.random() < 0.5
        if landed:
            for entry in self.in_flight:
                if entry.batch is not None:
                    self.host.append_durable(entry.batch, self.in_flight)
        self.state = State.FAILED
        self.timer.cancel_all()
        return landed


class Host:
    """One coordinator partition: its durable log and the incarnation serving it (see the module docstring)."""

    def __init__(
        self,
        loop: EventLoop,
        rng: random.Random,
        config: CoordinatorConfig,
        deliver: Deliver,
        observer: Observer,
        note: Callable[[str], None],
    ) -> None:
        self.loop, self.rng, self.config = loop, rng, config
        self._deliver = deliver
        self.observer = observer
        self.note = note
        self.faults = Faults()
        self.durable: list[bytes] = []
        self.loads = 0
        self.current = self._new_incarnation()
        self.current.load()

    def _new_incarnation(self) -> Incarnation:
        self.loads += 1
        return Incarnation(self, self.loads)

    # -- requests ---------------------------------------------------------------------------------

    def unavailable(self) -> ErrorCode | None:
        state = self.current.state
        if state is State.ACTIVE:
            return None
        return ErrorCode.coordinator_load_in_progress if state is State.LOADING else ErrorCode.not_coordinator

    def deliver(self, handle: object, response: object) -> None:
        self._deliver(handle, response)

    def deliver_all(self, replies: tuple[Reply, ...]) -> None:
        for reply in replies:
            self._deliver(reply.handle, reply.response)

    def append_durable(self, batch: bytes, entries: list[Pending]) -> None:
        self.durable.append(batch)
        self.observer.durable(batch, entries)

    # -- moves, failures, crashes -----------------------------------------------------------------

    def move(self, load_ms: int) -> None:
        """A graceful move: the old incarnation unloads (its writes finish), a new one loads."""
        old = self.current
        if old.state is not State.ACTIVE:
            return
        old.unload()
        self._reload_when_unloaded(old, load_ms)

    def _reload_when_unloaded(self, old: Incarnation, load_ms: int) -> None:
        if old.state is State.UNLOADING:
            self.loop.after(1, lambda: self._reload_when_unloaded(old, load_ms), "await-unload")
            return
        self._reload(load_ms)

    def crash(self, load_ms: int) -> tuple[bool, list[Pending]]:
        """kill -9 of the coordinator: (whether the write in flight landed, the entries that vanished)."""
        old = self.current
        if old.state is not State.ACTIVE:
            return False, []
        lost = list(old.staged)
        landed = old.crash()
        self.loop.after(self.rng.randint(0, 300), lambda: self._reload(load_ms), "restart")
        return landed, lost

    def failed(self, old: Incarnation) -> None:
        """The shard failed: NOT_COORDINATOR for a backoff, then a reload (herd.runtime.recovery), unless the
        partition was unloaded and loaded again meanwhile (a move under way when the write failed), as
        CoordinatorRuntime._reload returns when the failed shard is no longer the one it hosts."""
        load_ms = self.rng.randint(1, 200)
        self.loop.after(
            self.rng.randint(20, 500), lambda: self._reload(load_ms) if old is self.current else None, "recover"
        )

    def _reload(self, load_ms: int) -> None:
        # Two live incarnations would both run timers and write to one log, which no real node does (embedded: one
        # shard per partition; cluster: the old leader's writes are fenced): a harness bug, not herd's.
        assert self.current.state is not State.ACTIVE, "a reload while the current incarnation is active"
        self.current = self._new_incarnation()
        incarnation = self.current
        self.loop.after(load_ms, lambda: incarnation.load() if incarnation is self.current else None, "load")
