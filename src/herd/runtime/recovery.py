"""Bringing back what a disk failure took offline: retries with a backoff, each outcome logged once.

Kafka has no way back for a failed log directory short of a restart: `LogManager.handleLogDirFailure` and
`ReplicaManager.handleLogDirFailure` take its partitions offline (the coordinator shards on them are unloaded),
and when the last log directory fails the broker halts (apache/kafka core/src/main/scala/kafka/log/LogManager.scala,
core/src/main/scala/kafka/server/ReplicaManager.scala). herd has one log directory, and a full disk is usually
freed again, so it keeps serving what works and retries what failed:

- a data partition whose log failed (`SegmentLog.failure`) is reopened with `recover()`, the same recovery as at
  start (`Server._recovery_loop`);
- a coordinator shard that failed is unloaded, its log recovered if it failed, and the partition loaded again by
  replaying it, as a coordinator move does (`host.ShardHost._reload`).

`Backoff` paces the attempts per key: the first retry after `initial_ms`, then doubling up to `max_ms` while
they keep failing; it says when a failure starts a streak (log it, at ERROR) and when a success ends one (log
that, at WARNING), so an operator sees one line when something breaks and one when it is back, not one per
attempt or per request.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(slots=True)
class _Streak:
    delay_ms: int
    next_ms: int


class Backoff:
    def __init__(self, initial_ms: int, max_ms: int) -> None:
        self.initial_ms = max(1, initial_ms)
        self.max_ms = max(self.initial_ms, max_ms)
        self._streaks: dict[Hashable, _Streak] = {}

    def failed(self, key: Hashable, now_ms: int) -> bool:
        """Record a failure of `key`; True if it starts a streak (the caller logs it)."""
        streak = self._streaks.get(key)
        if streak is None:
            self._streaks[key] = _Streak(self.initial_ms, now_ms + self.initial_ms)
            return True
        streak.delay_ms = min(streak.delay_ms * 2, self.max_ms)
        streak.next_ms = now_ms + streak.delay_ms
        return False

    def succeeded(self, key: Hashable) -> bool:
        """Record a success of `key`; True if it ends a streak of failures (the caller logs it)."""
        return self._streaks.pop(key, None) is not None

    def failing(self, key: Hashable) -> bool:
        return key in self._streaks

    def due(self, key: Hashable, now_ms: int) -> bool:
        """True if `key` may be tried again (never failed, or its delay has passed)."""
        streak = self._streaks.get(key)
        return streak is None or now_ms >= streak.next_ms

    def delay_ms(self, key: Hashable, now_ms: int) -> int:
        """How long until `key` may be tried again (0 if now)."""
        streak = self._streaks.get(key)
        return 0 if streak is None else max(0, streak.next_ms - now_ms)
