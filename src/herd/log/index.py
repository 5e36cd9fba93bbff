"""Sparse offset and time indexes of one segment, held in compact arrays and stored as Kafka lays them out.

Offset index (`.index`): 8-byte entries (relative offset int32, file position int32), big-endian. An entry
(r, p) says the batch starting at byte p ends with offset base + r; one entry is added each time more than
`index.interval.bytes` were appended since the last one, so the entry with the largest r <= target - base gives
a position at or before the batch holding `target`.

Time index (`.timeindex`): 12-byte entries (timestamp int64, relative offset int32). Timestamps strictly grow:
an entry is added next to an offset-index entry only when the segment's max timestamp grew, and once more when
the segment is sealed, so the last entry is the segment's max timestamp. The offset is the base offset of the
first batch that reached that timestamp, so every batch before it has a smaller max timestamp.

Entries not yet in the files are `pending`; the owner writes them out on flush, roll and close. Index files are
a cache: recovery rebuilds them from the log whenever they may be stale or inconsistent.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left, bisect_right

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


def _big_endian(values: array) -> bytes:
    if sys.byteorder == "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _from_big_endian(typecode: str, data: bytes) -> array:
    values = array(typecode, data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


class OffsetIndex:
    __slots__ = ("rel_offsets", "positions", "written")

    def __init__(self, rel_offsets: array | None = None, positions: array | None = None) -> None:
        self.rel_offsets = rel_offsets if rel_offsets is not None else array("i")
        self.positions = positions if positions is not None else array("i")
        self.written = len(self.rel_offsets)  # entries already in the file

    def __len__(self) -> int:
        return len(self.rel_offsets)

    def append(self, rel_offset: int, position: int) -> None:
        self.rel_offsets.append(rel_offset)
        self.positions.append(position)

    def lookup(self, rel_offset: int) -> int:
        """A file position at or before the batch holding `rel_offset` (0 if no entry is small enough)."""
        i = bisect_right(self.rel_offsets, rel_offset) - 1
        return self.positions[i] if i >= 0 else 0

    def pending(self) -> bytes:
        """The entries not yet written out, in file format; `mark_written` after writing them."""
        flat = array("i")
        for i in range(self.written, len(self.rel_offsets)):
            flat.append(self.rel_offsets[i])
            flat.append(self.positions[i])
        return _big_endian(flat)

    def mark_written(self) -> None:
        self.written = len(self.rel_offsets)

    @classmethod
    def from_bytes(cls, data: bytes, log_size: int) -> OffsetIndex | None:
        """The index stored in `data`, or None if it cannot be right for a log of `log_size` bytes."""
        if len(data) % OFFSET_ENTRY.size:
            return None
        flat = _from_big_endian("i", data)
        index = cls(flat[0::2], flat[1::2])
        if not _strictly_increasing(index.rel_offsets) or not _strictly_increasing(index.positions):
            return None
        if index.positions and (index.positions[0] < 0 or index.positions[-1] >= log_size):
            return None
        return index


class TimeIndex:
    __slots__ = ("timestamps", "rel_offsets", "written")

    def __init__(self) -> None:
        self.timestamps = array("q")
        self.rel_offsets = array("i")
        self.written = 0

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, timestamp: int, rel_offset: int) -> None:
        """Add an entry if `timestamp` is larger than the last one."""
        if timestamp > self.last_timestamp:
            self.timestamps.append(timestamp)
            self.rel_offsets.append(rel_offset)

    def lookup(self, timestamp: int) -> int:
        """A relative offset at or before the first batch whose max timestamp is >= `timestamp` (0 if none)."""
        i = bisect_left(self.timestamps, timestamp) - 1
        return self.rel_offsets[i] if i >= 0 else 0

    def pending(self) -> bytes:
        return b"".join(
            TIME_ENTRY.pack(self.timestamps[i], self.rel_offsets[i]) for i in range(self.written, len(self))
        )

    def mark_written(self) -> None:
        self.written = len(self.timestamps)

    @classmethod
    def from_bytes(cls, data: bytes) -> TimeIndex | None:
        if len(data) % TIME_ENTRY.size:
            return None
        index = cls()
        for timestamp, rel_offset in TIME_ENTRY.iter_unpack(data):
            index.timestamps.append(timestamp)
            index.rel_offsets.append(rel_offset)
        if not _strictly_increasing(index.timestamps):
            return None
        index.mark_written()
        return index


def _strictly_increasing(values: array) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))
