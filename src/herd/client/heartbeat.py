"""Clocks and the heartbeat timing object of the membership machine.

`Clock` is anything with `now_ms()`: `SystemClock` reads the monotonic clock, `ManualClock` is moved by
tests. `HeartbeatTimer` keeps the timing of one member's heartbeats, as kafka-python's
kafka/coordinator/heartbeat.py and Java's Heartbeat do, but reads an injected Clock instead of the wall
clock: when the next heartbeat is due (an interval after the last one was sent, or a backoff after one
failed), whether one is in flight, and whether the session has expired on the client's side (no answer
for a whole session timeout, after which the coordinator has most likely removed the member).
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "HeartbeatTimer", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    """Milliseconds of the monotonic clock."""

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        self._now += ms
        return self._now


class HeartbeatTimer:
    """When to heartbeat and when the session is gone, for one member."""

    __slots__ = (
        "clock",
        "session_timeout_ms",
        "interval_ms",
        "retry_backoff_ms",
        "_next_at",
        "_last_receive",
        "_in_flight",
    )

    def __init__(self, clock: Clock, session_timeout_ms: int, interval_ms: int, retry_backoff_ms: int) -> None:
        self.clock = clock
        self.session_timeout_ms = session_timeout_ms
        self.interval_ms = interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        now = clock.now_ms()
        self._next_at = now + interval_ms
        self._last_receive = now
        self._in_flight = False

    def reset(self) -> None:
        """A generation was just joined: the session starts now, the first heartbeat is an interval away."""
        now = self.clock.now_ms()
        self._last_receive = now
        self._next_at = now + self.interval_ms
        self._in_flight = False

    def sent(self) -> None:
        self._in_flight = True
        self._next_at = self.clock.now_ms() + self.interval_ms

    def received(self) -> None:
        """A heartbeat was answered (whatever the error, the coordinator is alive)."""
        self._in_flight = False
        self._last_receive = self.clock.now_ms()

    def failed(self) -> None:
        """No answer (connection lost) or a coordinator error: try again after the backoff."""
        self._in_flight = False
        self._next_at = min(self._next_at, self.clock.now_ms() + self.retry_backoff_ms)

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    def should_heartbeat(self) -> bool:
        return not self._in_flight and self.clock.now_ms() >= self._next_at

    def next_at(self) -> int:
        """When the next heartbeat is due (meaningless while one is in flight)."""
        return self._next_at

    def session_deadline(self) -> int:
        return self._last_receive + self.session_timeout_ms

    def session_expired(self) -> bool:
        return self.clock.now_ms() >= self.session_deadline()
