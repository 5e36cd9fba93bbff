"""The committed end of a partition, kept in memory so that consumers at the tail are served without a query.

A `TailCache` holds whole batches, in offset order, that are committed (a batch enters it only after the
transaction that stored it returned), and they run without a hole up to the partition's committed end: the
cache answers for any offset from its first batch's base offset on. It is bounded in bytes: the oldest batches
leave it first; a batch larger than the bound is not kept at all (and everything before it leaves).
"""

from __future__ import annotations

from bisect import bisect_left


class TailCache:
    __slots__ = ("limit", "nbytes", "_bases", "_lasts", "_data", "_head")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.nbytes = 0
        self._bases: list[int] = []
        self._lasts: list[int] = []
        self._data: list[bytes] = []
        self._head = 0  # entries before it were evicted (the lists are compacted now and then)

    @property
    def start(self) -> int | None:
        """The first offset the cache answers for, None when it is empty."""
        return self._bases[self._head] if self._head < len(self._bases) else None

    def covers(self, offset: int) -> bool:
        start = self.start
        return start is not None and offset >= start

    def add(self, base_offset: int, last_offset: int, data: bytes) -> None:
        """A batch just committed after the ones the cache holds."""
        self._bases.append(base_offset)
        self._lasts.append(last_offset)
        self._data.append(data)
        self.nbytes += len(data)
        while self.nbytes > self.limit and self._head < len(self._bases):
            self._evict_one()

    def read(self, offset: int, max_bytes: int, min_one: bool) -> bytes:
        """Whole batches from the one holding `offset` (or the first after it, past a compaction gap), at most
        `max_bytes` of them unless `min_one` and the first is larger; the caller checks `covers(offset)`."""
        i = bisect_left(self._lasts, offset, self._head)
        parts: list[bytes] = []
        total = 0
        while i < len(self._data):
            size = len(self._data[i])
            if total + size > max_bytes and not (min_one and not parts):
                break
            parts.append(self._data[i])
            total += size
            i += 1
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def drop_below(self, offset: int) -> None:
        """Forget the batches that start below `offset` (retention moved the log start, or compaction
        rewrote them)."""
        while self._head < len(self._bases) and self._bases[self._head] < offset:
            self._evict_one()

    def clear(self) -> None:
        self._bases, self._lasts, self._data = [], [], []
        self._head = self.nbytes = 0

    def _evict_one(self) -> None:
        self.nbytes -= len(self._data[self._head])
        self._data[self._head] = b""
        self._head += 1
        if self._head >= 64 and self._head * 2 >= len(self._bases):
            del self._bases[: self._head], self._lasts[: self._head], self._data[: self._head]
            self._head = 0
