"""The runtime half of the simulation: herd's own shard runtime (`ShardMachine`, src/herd/runtime/machine.py),
driven over simulated time.

`Host` is one `__consumer_offsets` partition: its durable log (a list of real v2 record batches, made by the
machine with herd.runtime.batches.encode_batch and read back with read_batches) and the successive
`Incarnation`s that serve it. Each incarnation owns a real `GroupCoordinatorShard` and the same `ShardMachine`
that herd.runtime.shard.ShardRuntime drives on asyncio: staging, replay before the write, the order in which
replies are released, the rollback of a refused batch and `StateDiverged`, failing the shard, loading and
unloading are herd's code, not a copy of it. What is here is the driver, which stands for ShardRuntime's I/O:

- the writer: one write at a time; it starts a zero delay after something is staged, takes every staged batch
  (`begin_write`), completes after a simulated fsync delay of 0-4 ms, then the batches become durable and the
  machine releases their replies in order (`written`); if a fault armed it, the write fails instead
  (`write_failed`: the shard fails). A write in flight when the shard failed for a refused batch still lands and
  is answered, as ShardRuntime's writer finishes its round;
- refusal: a batch is refused (the machine's `refuse`, MESSAGE_TOO_LARGE in herd) when a fault armed it, not
  by its size;
- the timer: the core's keyed timer on the event loop (loop.SimTimer); a Result of a timer operation goes to
  the machine like a handler's;
- requests: to a shard that is not active, COORDINATOR_LOAD_IN_PROGRESS while loading (Heartbeat NONE,
  blindly, as server/apis/heartbeat.py answers), NOT_COORDINATOR otherwise (the server asks `Host.unavailable`);
  heartbeats take the fast path (`heartbeat_error`) when nothing is pending, else the general path, as
  ShardRuntime.heartbeat does;
- load: one step after a delay, every durable batch (`load_batch`), then `loaded` (which applies `on_loaded`);
- a failed shard is reloaded from the durable log after a backoff (herd.runtime.recovery), unless the partition
  was unloaded and loaded again meanwhile (herd.runtime.host.ShardHost._reload);
- a graceful move (ShardRuntime.unload): `unload`, the writer finishes, `unloaded`, a new incarnation loads.

The checker hears every core call the machine makes (`on_append_failed`, `on_loaded`, `on_unloaded`) through
`ObservedShard`, which the machine gets in place of the shard.

Not simulated: compaction (the log is never compacted; replay of the full log is what a compacted one must be
equal to), chunked loading and the load's yielding to the loop, the heartbeat fast path's byte-level response
caching. A node crash (kill -9) is not runtime behaviour but a process death: staged results vanish without
replies, the write in flight lands or not (seeded), every connection drops; the next incarnation loads what is
durable.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

from herd.coordinator import CoordinatorConfig, ErrorCode, GroupCoordinatorShard, Result
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.errors import CoordinatorError
from herd.coordinator.responses import ConsumerGroupHeartbeatResponse
from herd.coordinator.result import Reply
from herd.coordinator.timer import Operation
from herd.log.api import KafkaStorageError
from herd.runtime.batches import read_batches
from herd.runtime.machine import Pending, ShardMachine, ShardState, StateDiverged

from .loop import EventLoop, SimTimer

__all__ = ["Faults", "Host", "Incarnation", "Observer", "Pending", "ShardState"]

Deliver = Callable[[object, object], None]


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


class ObservedShard:
    """The shard as its machine sees it: the calls that can start or end rebalances are reported to the observer
    (kinds "append-failed", "loaded", "unloaded"); replays go straight through."""

    def __init__(self, shard: GroupCoordinatorShard, observer: Observer) -> None:
        self._shard = shard
        self._observer = observer
        self.replay = shard.replay
        self.replay_loaded_batch = shard.replay_loaded_batch
        self.replay_end_transaction_marker = shard.replay_end_transaction_marker

    def on_loaded(self) -> Result:
        after = self._observer.core_call(self._shard, "loaded", None)
        result = self._shard.on_loaded()
        after()
        return result

    def on_unloaded(self) -> Result:
        after = self._observer.core_call(self._shard, "unloaded", None)
        result = self._shard.on_unloaded()
        after()
        return result

    def on_append_failed(self, result: Result, error: ErrorCode) -> Result:
        after = self._observer.core_call(self._shard, "append-failed", result)
        out = self._shard.on_append_failed(result, error)
        after()
        return out


class Faults:
    """Armed storage faults: the next batch is refused, the next write fails (set by the schedule). An armed fault
    strikes when the next write comes, which may be long after the schedule stopped arming faults: `struck_at` is
    when the last one struck (the simulation's liveness bound runs from then)."""

    def __init__(self, now: Callable[[], int]) -> None:
        self.refuse_next = 0
        self.fail_next = 0
        self.struck_at = 0
        self._now = now

    def take_refusal(self) -> bool:
        if self.refuse_next:
            self.refuse_next -= 1
            self.struck_at = self._now()
            return True
        return False

    def take_failure(self) -> bool:
        if self.fail_next:
            self.fail_next -= 1
            self.struck_at = self._now()
            return True
        return False


class Incarnation:
    """One ShardRuntime's life: a shard, its machine, its timer and its writer."""

    def __init__(self, host: Host, number: int) -> None:
        self.host = host
        self.number = number
        self.crashed = False
        self.timer = SimTimer(host.loop, self._fire)
        ids = itertools.count()
        self.shard = GroupCoordinatorShard(
            clock=host.loop.clock,
            timer=self.timer,
            config=host.config,
            uuid_factory=lambda: f"u{number}-{next(ids)}",
        )
        self.shard.set_topics(host.topics)
        self.machine = ShardMachine(
            ObservedShard(self.shard, host.observer),
            clock=host.loop.clock,
            timers=self.timer,
            release=host.deliver_all,
            start_writing=self._start_writer,
            refuse=self._refuse,
            on_failed=self._failed,
        )

    @property
    def state(self) -> ShardState:
        return self.machine.state

    @property
    def pending(self) -> bool:
        return self.machine.pending

    @property
    def staged(self) -> list[Pending]:
        return self.machine.staged

    # -- requests -------------------------------------------------------------------------------

    def call(self, method: str, request: object, handle: object, detail: object) -> None:
        after = self.host.observer.core_call(self.shard, method, detail)
        result = getattr(self.shard, method)(request, handle)
        after()
        self.machine.apply(result)

    def heartbeat(self, request: object, handle: object, respond: Callable[[int], object]) -> None:
        if self.machine.pending:
            self.call("heartbeat", request, handle, request)
            return
        after = self.host.observer.core_call(self.shard, "heartbeat", request)
        r = request
        code = self.shard.heartbeat_error(r.group_id, r.generation_id, r.member_id, r.group_instance_id)  # type: ignore[attr-defined]
        after()
        self.host.deliver(handle, respond(code))

    def consumer_heartbeat(self, request: object, handle: object) -> None:
        """ConsumerGroupHeartbeat as server/apis/consumer_group_heartbeat.py routes it: a keep-alive (no instance,
        rack, rebalance timeout, subscription or assignor in it) takes the fast path when nothing is pending."""
        r = request
        keep_alive = (
            r.instance_id is None  # type: ignore[attr-defined]
            and r.rack_id is None  # type: ignore[attr-defined]
            and r.rebalance_timeout_ms == -1  # type: ignore[attr-defined]
            and r.subscribed_topic_names is None  # type: ignore[attr-defined]
            and r.subscribed_topic_regex is None  # type: ignore[attr-defined]
            and r.server_assignor is None  # type: ignore[attr-defined]
        )
        if keep_alive and not self.machine.pending:
            after = self.host.observer.core_call(self.shard, "heartbeat", request)
            try:
                kept = self.shard.consumer_group_keep_alive(
                    r.group_id,
                    r.member_id,
                    r.member_epoch,
                    r.client_id,
                    r.client_host,  # type: ignore[attr-defined]
                )
            except CoordinatorError as error:
                after()
                self.host.deliver(handle, ConsumerGroupHeartbeatResponse(error_code=error.code))
                return
            after()
            if kept is not None:
                member_id, epoch, interval = kept
                answer = ConsumerGroupHeartbeatResponse(
                    member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=interval
                )
                self.host.deliver(handle, answer)
                return
        self.call("consumer_group_heartbeat", request, handle, request)

    def _fire(self, key: str, operation: Operation) -> None:
        self.host.note(f"timer {key}")
        after = self.host.observer.core_call(self.shard, "timer", key)
        result = operation()
        after()
        self.machine.apply(result)

    # -- what the machine asks for ----------------------------------------------------------------

    def _refuse(self, batch: bytes) -> bool:
        if self.host.faults.take_refusal():
            self.host.note("refused a batch before writing it (MESSAGE_TOO_LARGE path)")
            return True
        return False

    def _failed(self, error: BaseException, answered: int) -> None:
        if isinstance(error, StateDiverged):
            self.host.note("nothing undoes what the refused batch changed: the shard fails (StateDiverged)")
        self.host.failed(self)

    def _start_writer(self) -> None:
        self.host.loop.after(0, self._write, "write")

    # -- the writer -------------------------------------------------------------------------------

    def _write(self) -> None:
        """One group-commit round: take everything staged, complete after the fsync delay."""
        if self.crashed:
            return
        if not self.machine.begin_write():  # the shard failed before the round began
            self.machine.writer_stopped()
            return
        delay = self.host.rng.randint(0, 4)
        self.host.loop.after(delay, self._written, "written")

    def _written(self) -> None:
        if self.crashed:
            return  # the node died meanwhile
        machine = self.machine
        if machine.state is ShardState.FAILED:  # failed for a refused batch while this write was in flight
            self._land()
            machine.written()
            machine.writer_stopped()
            return
        if self.host.faults.take_failure():
            self.host.note("a write failed: the shard fails")
            machine.write_failed(KafkaStorageError("a simulated disk failure"))
            machine.writer_stopped()
            return
        self._land()
        machine.written()
        if machine.staged:
            self._start_writer()
            return
        machine.writer_stopped()
        if machine.state is ShardState.UNLOADING:
            machine.unloaded()

    def _land(self) -> None:
        """The batches of the write in flight are durable."""
        entries = self.machine.in_flight
        for entry in entries:
            if entry.batch is not None:
                self.host.append_durable(entry.batch, entries)

    # -- load, unload, crash ----------------------------------------------------------------------

    def load(self) -> None:
        machine = self.machine
        for batch in self.host.durable:
            for loaded in read_batches(batch):
                machine.load_batch(loaded)
        self.host.observer.loaded(self.shard)
        machine.loaded()

    def unload(self) -> None:
        self.machine.unload()
        if not self.machine.pending:
            self.machine.unloaded()

    def crash(self) -> bool:
        """kill -9: nothing more is answered; returns whether the write in flight landed (its fsync completed
        just before the process died, its replies never left)."""
        machine = self.machine
        landed = machine.writing and bool(machine.in_flight) and self.host.rng.random() < 0.5
        if landed:
            self._land()
        self.crashed = True
        machine.state = ShardState.FAILED  # no machine event: the process is gone with it
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
        topics: TopicsImage | None = None,
    ) -> None:
        self.loop, self.rng, self.config = loop, rng, config
        self.topics = topics or TopicsImage({})  # the cluster's topics, as consumer groups see them
        self._deliver = deliver
        self.observer = observer
        self.note = note
        self.faults = Faults(loop.now)
        self.durable: list[bytes] = []
        self.loads = 0
        self.current = self._new_incarnation()
        self.current.load()

    def _new_incarnation(self) -> Incarnation:
        self.loads += 1
        return Incarnation(self, self.loads)

    # -- requests ---------------------------------------------------------------------------------

    def unavailable(self) -> ErrorCode | None:
        return self.current.machine.unavailable_error()

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
        if old.state is not ShardState.ACTIVE:
            return
        old.unload()
        self._reload_when_unloaded(old, load_ms)

    def _reload_when_unloaded(self, old: Incarnation, load_ms: int) -> None:
        if old.state is ShardState.UNLOADING:
            self.loop.after(1, lambda: self._reload_when_unloaded(old, load_ms), "await-unload")
            return
        self._reload(load_ms)

    def crash(self, load_ms: int) -> tuple[bool, list[Pending]]:
        """kill -9 of the coordinator: (whether the write in flight landed, the entries that vanished)."""
        old = self.current
        if old.state is not ShardState.ACTIVE:
            return False, []
        lost = list(old.staged)
        landed = old.crash()
        self.loop.after(self.rng.randint(0, 300), lambda: self._reload(load_ms), "restart")
        return landed, lost

    def failed(self, old: Incarnation) -> None:
        """The shard failed: NOT_COORDINATOR for a backoff, then a reload (herd.runtime.recovery), unless the
        partition was unloaded and loaded again meanwhile (a move under way when the write failed), as
        ShardHost._reload (herd.runtime.host) returns when the failed shard is no longer the one it hosts."""
        load_ms = self.rng.randint(1, 200)
        self.loop.after(
            self.rng.randint(20, 500), lambda: self._reload(load_ms) if old is self.current else None, "recover"
        )

    def _reload(self, load_ms: int) -> None:
        # Two live incarnations would both run timers and write to one log, which no real node does (embedded: one
        # shard per partition; cluster: the old leader's writes are fenced): a harness bug, not herd's.
        assert self.current.state is not ShardState.ACTIVE, "a reload while the current incarnation is active"
        self.current = self._new_incarnation()
        incarnation = self.current
        self.loop.after(load_ms, lambda: incarnation.load() if incarnation is self.current else None, "load")
