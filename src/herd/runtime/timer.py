"""The wall clock and an asyncio implementation of the core's keyed `Timer`.

`AsyncioTimer.schedule(key, deadline_ms, operation)` arms one `loop.call_at` handle per key; scheduling a
key again cancels the old handle (O(1): asyncio only marks it cancelled and drops it lazily). Deadlines are wall-clock
milliseconds (the core's
clock); they are turned into loop time once, when scheduled, so a deadline fires after the wall-clock
duration it asked for. When a handle fires, its key is forgotten first (the operation may schedule the
same key again), then the operation runs on the loop thread and its `Result` goes to `on_result`, which
treats it exactly like a request handler's Result. The core already keeps heartbeats O(1): they move a
member's deadline without touching the timer; the expiry operation re-arms itself if the deadline moved.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from herd.coordinator import Result
from herd.coordinator.timer import Operation

log = logging.getLogger(__name__)


class WallClock:
    """The coordinator's `Clock`: Unix time in milliseconds (timestamps in records are wall-clock)."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)


class AsyncioTimer:
    def __init__(self, loop: asyncio.AbstractEventLoop, clock: WallClock, on_result: Callable[[Result], None]) -> None:
        self._loop = loop
        self._clock = clock
        self._on_result = on_result
        self._handles: dict[str, tuple[int, asyncio.TimerHandle]] = {}

    def __len__(self) -> int:
        return len(self._handles)

    def schedule(self, key: str, deadline_ms: int, operation: Operation) -> None:
        current = self._handles.get(key)
        if current is not None:
            current[1].cancel()
        delay_s = max(deadline_ms - self._clock.now_ms(), 0) / 1000
        handle = self._loop.call_at(self._loop.time() + delay_s, self._fire, key, operation)
        self._handles[key] = (deadline_ms, handle)

    def cancel(self, key: str) -> None:
        current = self._handles.pop(key, None)
        if current is not None:
            current[1].cancel()

    def cancel_all(self) -> None:
        for _, handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def deadline(self, key: str) -> int | None:
        current = self._handles.get(key)
        return None if current is None else current[0]

    def _fire(self, key: str, operation: Operation) -> None:
        self._handles.pop(key, None)
        try:
            result = operation()
        except Exception:
            log.exception("coordinator timer operation %s failed", key)
            return
        self._on_result(result)
