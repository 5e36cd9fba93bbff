"""Per-group rebalance history (herd's observability goal; KIP-800 reasons kept with their rebalance).

Every PreparingRebalance opens an entry with its cause and reason; the join phase closing records the
new generation, who was in it and who was late (removed for not rejoining); Stable closes it. Each
group keeps the last `rebalance_history_size` entries. History is in memory only: it is not part of
`__consumer_offsets` and does not survive a coordinator move.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class Rebalance:
    cause: str
    reason: str
    from_generation: int
    started_ms: int
    generation: int | None = None
    join_completed_ms: int | None = None
    completed_ms: int | None = None
    members: tuple[str, ...] = ()
    late_members: list[str] = field(default_factory=list)
    outcome: str | None = None
    """None while running; "stable", "empty", or why it was superseded."""


class RebalanceHistory:
    def __init__(self, size: int) -> None:
        self._size = size
        self._by_group: dict[str, deque[Rebalance]] = {}

    def of(self, group_id: str) -> tuple[Rebalance, ...]:
        return tuple(self._by_group.get(group_id, ()))

    def current(self, group_id: str) -> Rebalance | None:
        entries = self._by_group.get(group_id)
        if entries and entries[-1].outcome is None:
            return entries[-1]
        return None

    def start(self, group_id: str, cause: str, reason: str, generation: int, now_ms: int) -> None:
        running = self.current(group_id)
        if running is not None:
            running.outcome = f"superseded by {cause}"
            running.completed_ms = now_ms
        entries = self._by_group.setdefault(group_id, deque(maxlen=self._size))
        entries.append(Rebalance(cause, reason, generation, now_ms))

    def late(self, group_id: str, member_ids: list[str]) -> None:
        running = self.current(group_id)
        if running is not None:
            running.late_members.extend(member_ids)

    def join_completed(self, group_id: str, generation: int, members: tuple[str, ...], now_ms: int) -> None:
        running = self.current(group_id)
        if running is not None:
            running.generation = generation
            running.members = members
            running.join_completed_ms = now_ms
            if not members:
                running.outcome = "empty"
                running.completed_ms = now_ms

    def finish(self, group_id: str, outcome: str, now_ms: int) -> None:
        running = self.current(group_id)
        if running is not None:
            running.outcome = outcome
            running.completed_ms = now_ms

    def forget(self, group_id: str) -> None:
        self._by_group.pop(group_id, None)
