"""Offsets arithmetic (pure): canonical JSON, Spark's rate limit and Spark's range splitting."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from herd.spark.offsets import OffsetRange, from_json, rate_limit, split_ranges, to_json


def test_json_is_canonical() -> None:
    position = {("b", 10): 5, ("a", 2): 1, ("b", 9): 4, ("a", 10): 0}
    assert json.dumps(to_json(position)) == '{"a": {"2": 1, "10": 0}, "b": {"9": 4, "10": 5}}'
    assert from_json(json.loads(json.dumps(to_json(position)))) == position


def test_rate_limit_is_proportional_and_starves_nobody() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    latest = {("t", 0): 1000, ("t", 1): 10, ("t", 2): 0}
    # 100 * 1000/1010 = 99.0 -> 99; 100 * 10/1010 = 0.99 -> ceil 1; an empty partition stays put
    assert rate_limit(start, latest, 100) == {("t", 0): 99, ("t", 1): 1, ("t", 2): 0}


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=8),
    st.integers(1, 5000),
)
def test_rate_limit_never_passes_latest_and_always_progresses(sizes: list[tuple[int, int]], limit: int) -> None:
    start = {("t", i): s for i, (s, _) in enumerate(sizes)}
    latest = {("t", i): s + n for i, (s, n) in enumerate(sizes)}
    end = rate_limit(start, latest, limit)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)
    if latest != start:
        assert end != start
    # a share below one rounds up (no partition starves), so the total may pass the limit by that much
    assert sum(end[tp] - start[tp] for tp in end) <= limit + len(sizes)


def test_split_ranges_follows_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None, None) == ranges[:2]
    parts = split_ranges(ranges, 5, None)
    # the small range stays whole; the big one takes the other four parts
    assert parts == [
        OffsetRange("t", 0, 0, 250),
        OffsetRange("t", 0, 250, 500),
        OffsetRange("t", 0, 500, 750),
        OffsetRange("t", 0, 750, 1000),
        OffsetRange("t", 1, 0, 10),
    ]


def test_split_ranges_caps_records_per_partition() -> None:
    parts = split_ranges([OffsetRange("t", 0, 0, 25)], None, 10)
    assert [(p.start, p.end) for p in parts] == [(0, 8), (8, 16), (16, 25)]


@given(st.lists(st.integers(0, 500), min_size=1, max_size=6), st.integers(1, 20), st.none() | st.integers(1, 200))
def test_split_ranges_tile_the_input(sizes: list[int], min_partitions: int, max_records: int | None) -> None:
    ranges = [OffsetRange("t", i, 100, 100 + n) for i, n in enumerate(sizes)]
    parts = split_ranges(ranges, min_partitions, max_records)
    assert parts == split_ranges(ranges, min_partitions, max_records)  # deterministic
    for r in ranges:
        mine = [(p.start, p.end) for p in parts if p.partition == r.partition]
        covered = [o for s, e in mine for o in range(s, e)]
        assert covered == list(range(r.start, r.end))
        if max_records is not None:
            assert all(e - s <= max_records for s, e in mine)
