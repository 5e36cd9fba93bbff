"""The balancing rules of cluster mode (herd.cluster.placement): property tests over random clusters."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from herd.cluster.placement import Slot, assign_new, group_of, plan
from herd.cluster.topics import OFFSETS_TOPIC

TOPICS = [OFFSETS_TOPIC, "a", "b", "c"]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Slot], list[int], list[int]]:
    """Partitions led by nodes 0..9 or by no one, and the eligible and kept (shutting down) nodes."""
    nodes = draw(st.sets(st.integers(0, 9), min_size=0, max_size=6))
    keep = draw(st.sets(st.sampled_from(sorted(nodes)), max_size=2)) if nodes else set()
    leaders = st.one_of(st.none(), st.integers(0, 9))
    slots = [Slot(key, draw(st.sampled_from(TOPICS)), draw(leaders)) for key in range(draw(st.integers(0, 80)))]
    return slots, sorted(nodes - keep), sorted(keep)


def counts(slots: list[Slot], moves: dict[int, int], nodes: list[int], group: str) -> dict[int, int]:
    after = Counter(moves.get(s.key, s.leader) for s in slots if group_of(s.topic) == group)
    return {n: after[n] for n in nodes}


@given(clusters())
def test_every_partition_ends_on_an_eligible_or_kept_node_and_each_group_is_even(cluster) -> None:
    slots, eligible, keep = cluster
    moves = plan(slots, eligible, keep=keep)
    if not eligible:
        assert moves == {}
        return
    assert set(moves.values()) <= set(eligible)
    for slot in slots:
        assert moves.get(slot.key, slot.leader) in set(eligible) | set(keep)
        if slot.leader in keep:
            assert slot.key not in moves  # handed over only by the shutting-down node's own step
    for group in ("offsets", "data"):
        spread = counts([s for s in slots if s.leader not in keep], moves, eligible, group)
        assert max(spread.values()) - min(spread.values()) <= 1, (group, spread)


@given(clusters())
def test_no_partition_moves_needlessly(cluster) -> None:
    slots, eligible, keep = cluster
    moves = plan(slots, eligible, keep=keep)
    orphan = {s.key for s in slots if s.leader not in set(eligible) | set(keep)}
    for group in ("offsets", "data"):
        members = [s for s in slots if group_of(s.topic) == group]
        losers = {s.leader for s in members if s.key in moves and s.key not in orphan}
        gainers = {moves[s.key] for s in members if s.key in moves}
        assert not losers & gainers, "a node both gave and took partitions of one group"
        after = counts([s for s in members if s.leader not in keep], moves, eligible, group)
        if losers:  # a node gives partitions away only down to its fair share
            floor = sum(after.values()) // len(eligible)
            assert all(after[n] >= floor for n in losers)
    assert plan([Slot(s.key, s.topic, moves.get(s.key, s.leader)) for s in slots], eligible, keep=keep) == {}


@given(clusters())
def test_a_stable_cluster_is_left_alone(cluster) -> None:
    slots, eligible, keep = cluster
    moves = plan(slots, eligible, keep=keep)
    settled = [Slot(s.key, s.topic, moves.get(s.key, s.leader)) for s in slots]
    assert plan(settled, eligible, keep=keep) == {}


@given(clusters())
def test_without_balancing_only_orphans_move_and_each_to_a_least_loaded_node(cluster) -> None:
    """The steps of nodes that did not just join (`balance=False`): a partition on a live node stays, even where
    a move on demand left its group uneven; each orphan goes where its group is least loaded at that moment."""
    slots, eligible, keep = cluster
    moves = plan(slots, eligible, keep=keep, balance=False)
    orphans = [s for s in slots if s.leader not in set(eligible) | set(keep)]
    if not eligible:
        assert moves == {}
        return
    assert set(moves) == {s.key for s in orphans}
    placed = [s for s in slots if s.leader in eligible]
    for slot in sorted(orphans, key=lambda s: (s.topic, s.key)):
        before = counts(placed, {}, eligible, group_of(slot.topic))
        assert before[moves[slot.key]] == min(before.values())
        placed.append(Slot(slot.key, slot.topic, moves[slot.key]))


@given(st.integers(1, 7), st.integers(1, 60), st.integers(1, 60))
def test_a_joining_node_takes_its_share(nodes: int, offsets: int, data: int) -> None:
    everyone = list(range(nodes))
    slots = [Slot(k, OFFSETS_TOPIC, None) for k in range(offsets)]
    slots += [Slot(offsets + k, "t", None) for k in range(data)]
    first = plan(slots, everyone)
    slots = [Slot(s.key, s.topic, first[s.key]) for s in slots]
    moves = plan(slots, [*everyone, nodes])
    assert set(moves.values()) == ({nodes} if moves else set())
    for group, size in (("offsets", offsets), ("data", data)):
        got = counts(slots, moves, [*everyone, nodes], group)[nodes]
        assert got == size // (nodes + 1), (group, got)


@given(clusters(), st.sampled_from(TOPICS), st.integers(1, 30))
def test_new_partitions_keep_the_group_even_and_spread_the_topic(cluster, topic: str, count: int) -> None:
    slots, eligible, _ = cluster
    slots = [s for s in slots if s.topic != topic]
    settled = [Slot(s.key, s.topic, plan(slots, eligible).get(s.key, s.leader)) for s in slots]
    leaders = assign_new(topic, count, settled, eligible)
    if not eligible:
        assert leaders == [None] * count
        return
    new = [Slot(1000 + i, topic, leader) for i, leader in enumerate(leaders)]
    spread = counts([*settled, *new], {}, eligible, group_of(topic))
    assert max(spread.values()) - min(spread.values()) <= 1
    if len({spread[n] - Counter(leaders)[n] for n in eligible}) == 1:  # evenly loaded before: topic spread too
        per_node = Counter(leaders)
        assert max(per_node[n] for n in eligible) - min(per_node[n] for n in eligible) <= 1


def test_ties_go_to_the_lowest_node_id_whoever_computes_them() -> None:
    slots = [Slot(k, "t", None) for k in range(4)]
    assert plan(slots, [3, 1, 2]) == {0: 1, 1: 2, 2: 3, 3: 1}
    assert assign_new("t", 2, [], [2, 1]) == [1, 2]


def test_a_node_joining_ten_thousand_partitions_gets_its_share() -> None:
    """At max.broker.partitions scale (the step runs on the event loop, under the metadata lock): every group
    ends even, and only the joining node gains. Timing is in docs/benchmarks.md, not asserted here."""
    slots = [Slot(k, OFFSETS_TOPIC if k % 10 == 0 else f"t{k % 50}", (k // 10) % 2) for k in range(10_000)]
    moves = plan(slots, [0, 1, 2])
    assert set(moves.values()) == {2}
    for group in ("offsets", "data"):
        spread = counts(slots, moves, [0, 1, 2], group)
        assert max(spread.values()) - min(spread.values()) <= 1, (group, spread)
