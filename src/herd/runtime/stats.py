"""Cheap counters for the metrics of the coordinator runtime (herd.server.metrics exposes them to Prometheus).

What a hot path records is a plain Python int bumped in a list: no lock (everything runs on the loop thread), no
prometheus_client object, no label lookup. A `Histogram` keeps one count per power of two of nanoseconds
(`value.bit_length()` is the bucket: an int method, about 20 ns, where bisecting a list of bounds costs 100),
and its sum; the exporter turns that into cumulative Prometheus buckets at scrape time (`cumulative`).

`CoordinatorStats` is what one coordinator's `ShardHost` (runtime/host.py) records: partition load times, the
duration of each round of appends and fsyncs of its writer, and, for the group coordinator, through the rebalance
history's observer (`on_rebalance`, set on every shard's `RebalanceHistory` as `CoordinatorRuntime` creates it),
rebalances by cause and the durations of their join and sync phases. The core computes those durations from its
own clock; nothing here reads a clock.
"""

from __future__ import annotations

from typing import Any

BUCKETS = 64  # bit lengths of a nanosecond count: 2**63 ns is 292 years

# the upper bounds exported, in powers of two of nanoseconds: every second one from 2**10 (1.02 us) to 2**34
# (17.2 s), so each bucket is four times the one before
EXPORTED_BITS = tuple(range(10, 35, 2))


class Histogram:
    """Observations in nanoseconds, counted by bit length."""

    __slots__ = ("buckets", "sum_ns")

    def __init__(self) -> None:
        self.buckets = [0] * BUCKETS
        self.sum_ns = 0

    def observe_ns(self, value: int) -> None:
        if value < 0:
            value = 0
        self.buckets[value.bit_length()] += 1
        self.sum_ns += value

    def observe_ms(self, value: int) -> None:
        self.observe_ns(value * 1_000_000)

    @property
    def count(self) -> int:
        return sum(self.buckets)


def cumulative(buckets: list[int], offset: int = 0) -> list[tuple[str, int]]:
    """Prometheus buckets (upper bound in seconds as text, cumulative count) of the bit-length counts
    `buckets[offset:offset + BUCKETS]`, +Inf last. A count at bit length b holds values below 2**b ns."""
    out: list[tuple[str, int]] = []
    running = 0
    position = 0
    for bits in EXPORTED_BITS:
        while position <= bits:
            running += buckets[offset + position]
            position += 1
        out.append((repr((1 << bits) / 1e9), running))
    running += sum(buckets[offset + position : offset + BUCKETS])
    out.append(("+Inf", running))
    return out


class CoordinatorStats:
    """Recorded by one coordinator runtime; read by the exporter at scrape time."""

    def __init__(self) -> None:
        self.partition_load = Histogram()
        self.flush_round = Histogram()  # one round of the writer: appends and fsyncs (or a PostgreSQL commit)
        self.rebalances_started: dict[str, int] = {}  # by cause
        self.rebalances_completed: dict[tuple[str, str], int] = {}  # by (cause, outcome)
        self.join_phase = Histogram()
        self.sync_phase = Histogram()
        # KIP-848 consumer groups: a rebalance is a group epoch bump; it ends when every member reconciled
        self.consumer_rebalances_started: dict[str, int] = {}  # by cause
        self.consumer_rebalances_completed: dict[tuple[str, str], int] = {}  # by (cause, outcome)
        self.reconciliation = Histogram()

    def on_rebalance(self, event: str, group_id: str, entry: Any) -> None:
        """The rebalance history's observer (coordinator/history.py): `event` is "started", "joined" or
        "completed"; `entry` a `Rebalance`. Never raises (the core calls it synchronously)."""
        try:
            if getattr(entry, "group_type", "classic") == "consumer":
                self._on_consumer_rebalance(event, entry)
            elif event == "started":
                cause = str(entry.cause)
                self.rebalances_started[cause] = self.rebalances_started.get(cause, 0) + 1
            elif event == "joined":
                join_ms = getattr(entry, "join_ms", None)
                if join_ms is not None:
                    self.join_phase.observe_ms(join_ms)
            elif event == "completed":
                key = (str(entry.cause), _outcome(entry.outcome))
                self.rebalances_completed[key] = self.rebalances_completed.get(key, 0) + 1
                sync_ms = getattr(entry, "sync_ms", None)
                if sync_ms is not None:
                    self.sync_phase.observe_ms(sync_ms)
        except Exception:  # a metric must never break the coordinator
            pass

    def _on_consumer_rebalance(self, event: str, entry: Any) -> None:
        cause = str(entry.cause)
        if event == "started":
            self.consumer_rebalances_started[cause] = self.consumer_rebalances_started.get(cause, 0) + 1
        elif event == "completed":
            key = (cause, _outcome(entry.outcome))
            self.consumer_rebalances_completed[key] = self.consumer_rebalances_completed.get(key, 0) + 1
            reconcile_ms = getattr(entry, "sync_ms", None)
            if reconcile_ms is not None:
                self.reconciliation.observe_ms(reconcile_ms)


def _outcome(outcome: object) -> str:
    """The outcome as a bounded label: "superseded-by-<cause>" keeps only "superseded"."""
    text = str(outcome) if outcome is not None else "none"
    return "superseded" if text.startswith("superseded") else text
