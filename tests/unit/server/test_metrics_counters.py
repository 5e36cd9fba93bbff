"""The pure parts of the metrics: bit-length histograms exported as cumulative Prometheus buckets, rebalances counted
from the history's observer events, and the per-topic cap (herd.runtime.stats, herd.server.metrics)."""

from __future__ import annotations

from types import SimpleNamespace

from herd.runtime.stats import EXPORTED_BITS, CoordinatorStats, Histogram, cumulative
from herd.server.metrics import ServerCounters


def test_cumulative_buckets_hold_each_value_below_its_bound() -> None:
    histogram = Histogram()
    values = [0, 1, 1023, 1024, 1025, 4095, 4096, 10**6, 10**9, 10**12]
    for value in values:
        histogram.observe_ns(value)
    buckets = cumulative(histogram.buckets)
    assert [bound for bound, _ in buckets] == [repr((1 << bits) / 1e9) for bits in EXPORTED_BITS] + ["+Inf"]
    for bound, count in buckets[:-1]:
        assert count == sum(1 for v in values if v < float(bound) * 1e9), bound
    assert buckets[-1][1] == len(values) == histogram.count
    assert histogram.sum_ns == sum(values)
    counts = [count for _, count in buckets]
    assert counts == sorted(counts)


def test_rebalances_are_counted_by_cause_and_outcome_from_the_observer_events() -> None:
    stats = CoordinatorStats()
    first = SimpleNamespace(cause="member-join", join_ms=None, sync_ms=None, outcome=None)
    stats.on_rebalance("started", "g", first)
    first.join_ms = 120
    stats.on_rebalance("joined", "g", first)
    first.outcome = "superseded-by-member-leave"
    stats.on_rebalance("completed", "g", first)
    second = SimpleNamespace(cause="member-leave", join_ms=5, sync_ms=7, outcome="stable")
    stats.on_rebalance("started", "g", second)
    stats.on_rebalance("joined", "g", second)
    stats.on_rebalance("completed", "g", second)
    stats.on_rebalance("completed", "g", object())  # an entry it cannot read is ignored, never raised
    assert stats.rebalances_started == {"member-join": 1, "member-leave": 1}
    assert stats.rebalances_completed == {("member-join", "superseded"): 1, ("member-leave", "stable"): 1}
    assert stats.join_phase.count == 2 and stats.join_phase.sum_ns == 125_000_000
    assert stats.sync_phase.count == 1 and stats.sync_phase.sum_ns == 7_000_000


def test_topics_beyond_the_cap_are_not_counted_and_their_updates_are() -> None:
    counters = ServerCounters(max_series=2)
    assert counters.topic("a") is not None and counters.topic("b") is not None
    assert counters.topic("c") is None and counters.topic("c") is None
    assert counters.dropped_updates == 2 and set(counters.topics) == {"a", "b"}
    counters.topic("a")[0] += 5  # type: ignore[index]
    assert counters.topics["a"] == [5, 0, 0]
