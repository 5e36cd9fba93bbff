"""TailCache, the PostgreSQL log's bounded memory of its committed tail: what it answers for as batches enter
it and the oldest leave."""

from __future__ import annotations

from herd.log.postgres.tail import TailCache


def filled(limit: int, sizes: list[int]) -> TailCache:
    """Batches of one record each at offsets 0, 1, ..., the i-th `sizes[i]` bytes of the byte i % 256."""
    cache = TailCache(limit)
    for offset, size in enumerate(sizes):
        cache.add(offset, offset, bytes([offset % 256]) * size)
    return cache


def test_the_oldest_batches_leave_first_once_the_bound_is_passed() -> None:
    cache = filled(100, [40, 40, 40])
    assert cache.start == 1 and cache.nbytes == 80
    assert not cache.covers(0) and cache.covers(1) and cache.covers(5)
    assert cache.read(1, 1000, True) == bytes([1]) * 40 + bytes([2]) * 40


def test_a_batch_larger_than_the_bound_is_not_kept_and_everything_before_it_leaves() -> None:
    cache = filled(100, [10, 20, 150])
    assert cache.start is None and cache.nbytes == 0 and not cache.covers(2)
    cache.add(3, 3, b"x" * 10)
    assert cache.start == 3 and cache.read(3, 100, True) == b"x" * 10


def test_reads_cut_at_max_bytes_but_return_a_larger_first_batch_with_min_one() -> None:
    cache = filled(1000, [30, 30, 30])
    assert cache.read(0, 65, True) == bytes([0]) * 30 + bytes([1]) * 30
    assert cache.read(0, 10, True) == bytes([0]) * 30
    assert cache.read(0, 10, False) == b""


def test_a_read_starts_at_the_batch_holding_the_offset_or_the_next_one_past_a_gap() -> None:
    cache = TailCache(1000)
    cache.add(0, 4, b"a" * 10)
    cache.add(10, 12, b"b" * 10)  # offsets 5-9 compacted away
    assert cache.read(3, 100, True) == b"a" * 10 + b"b" * 10
    assert cache.read(7, 100, True) == b"b" * 10


def test_drop_below_and_many_evictions_keep_the_accounting_right() -> None:
    cache = filled(10_000, [10] * 500)
    cache.drop_below(450)
    assert cache.start == 450 and cache.nbytes == 500
    assert cache.read(499, 100, True) == bytes([499 % 256]) * 10
    cache.clear()
    assert cache.start is None and cache.nbytes == 0
