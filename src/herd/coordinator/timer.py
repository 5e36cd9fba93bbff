"""Injected time: the `Clock` and keyed `Timer` protocols, and their manual twins for tests.

The core never reads the wall clock. It asks a `Clock` for `now_ms()` and arms a `Timer` with
`schedule(key, deadline_ms, operation)`; scheduling a key again replaces the previous timer of that key,
`cancel(key)` removes it. When a deadline passes, the runtime calls `operation()`, which runs like a
request handler and returns a `Result` (records to append, replies to release); an operation never
changes state outside such a call.

`ManualClock` and `ManualTimer` play Kafka's MockTime/MockTimer (GroupMetadataManagerTestContext):
`ManualTimer.advance(ms)` moves the clock forward, firing due operations in deadline order (ties in
scheduling order) with the clock set to each deadline, and returns their Results. Operations scheduled
by a firing operation are fired too if they fall inside the window.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from herd.coordinator.result import Result

Operation = Callable[[], "Result"]


class Clock(Protocol):
    def now_ms(self) -> int: ...


class Timer(Protocol):
    def schedule(self, key: str, deadline_ms: int, operation: Operation) -> None: ...

    def cancel(self, key: str) -> None: ...


class ManualClock:
    def __init__(self, now_ms: int = 0) -> None:
        self._now = now_ms

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError("a manual clock never goes back")
        self._now = now_ms


@dataclass(order=True)
class _Entry:
    deadline_ms: int
    seq: int
    key: str = field(compare=False)
    operation: Operation = field(compare=False)
    live: bool = field(default=True, compare=False)


class ManualTimer:
    """A keyed timer driven by `advance`; the clock it moves is shared with the shard under test."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._heap: list[_Entry] = []
        self._by_key: dict[str, _Entry] = {}
        self._seq = itertools.count()

    def schedule(self, key: str, deadline_ms: int, operation: Operation) -> None:
        self.cancel(key)
        entry = _Entry(deadline_ms, next(self._seq), key, operation)
        self._by_key[key] = entry
        heapq.heappush(self._heap, entry)

    def cancel(self, key: str) -> None:
        entry = self._by_key.pop(key, None)
        if entry is not None:
            entry.live = False

    def deadline(self, key: str) -> int | None:
        entry = self._by_key.get(key)
        return entry.deadline_ms if entry else None

    def keys(self) -> set[str]:
        return set(self._by_key)

    def advance(self, ms: int) -> list[Result]:
        """Move the clock `ms` forward, run every operation that came due, return their Results."""
        end = self.clock.now_ms() + ms
        results: list[Result] = []
        while self._heap and self._heap[0].deadline_ms <= end:
            entry = heapq.heappop(self._heap)
            if not entry.live:
                continue
            del self._by_key[entry.key]
            self.clock.set(max(entry.deadline_ms, self.clock.now_ms()))
            results.append(entry.operation())
        self.clock.set(end)
        return results
