"""Simulated time: one `ManualClock`, one queue of events, and the shard's keyed timer on that same queue.

Everything that happens in a simulation is an `Event` in one heap ordered by (time, sequence number): a
message arriving, a member's tick, a fault, a write completing, a coordinator timer coming due. `run_next`
pops the earliest live event, moves the clock to its time and runs it. Ties run in scheduling order, so a
run is a pure function of what was scheduled, which is a pure function of the seed.

`SimTimer` implements the core's `Timer` protocol (herd.coordinator.timer) on that queue: `schedule(key,
deadline, operation)` replaces the key's previous event, `cancel(key)` kills it. When one comes due the
owner's `fire(key, operation)` runs it, exactly once, and treats its Result as the runtime does
(herd.runtime.timer.AsyncioTimer hands it to ShardMachine.apply). herd's own `ManualTimer` fires every
operation due in a window before returning their Results; the simulation needs them one at a time,
interleaved with the other events, so it keeps its own small keyed timer over the shared clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from herd.coordinator import ManualClock
from herd.coordinator.timer import Operation


class Event:
    """One thing due at `time`; `live` False once cancelled."""

    __slots__ = ("time", "seq", "fn", "label", "live")

    def __init__(self, time: int, seq: int, fn: Callable[[], None], label: str) -> None:
        self.time, self.seq, self.fn, self.label, self.live = time, seq, fn, label, True


class EventLoop:
    """The simulation's only source of time and ordering."""

    def __init__(self) -> None:
        self.clock = ManualClock(0)
        self._heap: list[tuple[int, int, Event]] = []
        self._seq = 0

    def now(self) -> int:
        return self.clock.now_ms()

    def at(self, time: int, fn: Callable[[], None], label: str) -> Event:
        """Run `fn` at `time` (never in the past: the clock only moves forward)."""
        self._seq += 1
        event = Event(max(time, self.clock.now_ms()), self._seq, fn, label)
        heapq.heappush(self._heap, (event.time, self._seq, event))
        return event

    def after(self, delay: int, fn: Callable[[], None], label: str) -> Event:
        return self.at(self.clock.now_ms() + delay, fn, label)

    def run_next(self) -> Event | None:
        """Run the earliest live event; None when nothing is left."""
        while self._heap:
            event = heapq.heappop(self._heap)[2]
            if event.live:
                event.live = False
                self.clock.set(event.time)
                event.fn()
                return event
        return None


class SimTimer:
    """The core's keyed Timer on the event loop; `fire(key, operation)` is called when one comes due."""

    def __init__(self, loop: EventLoop, fire: Callable[[str, Operation], None]) -> None:
        self._loop = loop
        self._fire = fire
        self._by_key: dict[str, Event] = {}

    def schedule(self, key: str, deadline_ms: int, operation: Operation) -> None:
        self.cancel(key)
        event: Event

        def due() -> None:
            if self._by_key.get(key) is event:
                del self._by_key[key]
                self._fire(key, operation)

        event = self._loop.at(deadline_ms, due, "timer")
        self._by_key[key] = event

    def cancel(self, key: str) -> None:
        event = self._by_key.pop(key, None)
        if event is not None:
            event.live = False

    def cancel_all(self) -> None:
        for event in self._by_key.values():
            event.live = False
        self._by_key.clear()
