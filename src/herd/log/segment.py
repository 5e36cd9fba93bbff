"""One segment: `<base>.log` holding record batches, with its `.index` and `.timeindex`.

A segment is opened in one of three ways:

- `Segment.create`: a new, empty active segment (files created empty);
- `Segment.recover`: the log is scanned batch by batch (framing, magic, CRC32C, contiguous offsets), the file is
  truncated after the last whole batch, and both indexes are rebuilt in memory and rewritten;
- `Segment.open_sealed`: a segment below the recovery point, known to be durable. Only its size and the last
  time-index entry are read; indexes are loaded on demand (`load`) and dropped again (`unload`), so a closed-over
  partition costs a few ints of memory per segment. If its index files look wrong it is recovered instead.

Reads use the offset index to find a position at or before the wanted batch, then one `pread` of a window that
usually covers both the few headers to skip and the batches to return. Timestamp lookups go one step further:
the time index and batch headers find the batch, and only that batch's records are decoded (`herd.log.records`)
to answer with the exact record, as Kafka does.
"""

from __future__ import annotations

import logging
import posixpath
import struct
from collections.abc import Callable, Iterator

from herd.log.api import CorruptRecordError, UnsupportedMagicError
from herd.log.batch import (
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    check_crc,
    parse_header,
    valid_prefix,
)
from herd.log.fs import Bytes, File, FileSystem, read_whole
from herd.log.index import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex
from herd.log.records import find_offset_of_timestamp, search_timestamp

logger = logging.getLogger(__name__)

SCAN_CHUNK = 8 * 1024 * 1024
# base offset, batch length, (epoch, magic, crc skipped), attributes, last offset delta, base ts, max ts
_SCAN = struct.Struct(">qi9xhiqq")
SCAN_SIZE = _SCAN.size  # 43


class CutBackFailed(OSError):
    """A write failed and could not be undone: the file holds part of it (the log must be recovered from disk)."""


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Parts:
    """Buffers to write one after the other without joining them (a batch's new base offset, then the rest of the
    batch as a view of the request); `nbytes` is their total length."""

    __slots__ = ("buffers", "nbytes")

    def __init__(self) -> None:
        self.buffers: list[Bytes] = []
        self.nbytes = 0

    def add(self, buffer: Bytes) -> None:
        self.buffers.append(buffer)
        self.nbytes += len(buffer)


class Segment:
    __slots__ = (
        "fs", "path", "base_offset", "next_offset", "size", "max_timestamp", "max_timestamp_offset",
        "file", "index", "time_index", "bytes_since_index", "damaged",
    )  # fmt: skip

    def __init__(self, fs: FileSystem, directory: str, base_offset: int) -> None:
        self.fs = fs
        self.path = posixpath.join(directory, segment_name(base_offset))
        self.base_offset = base_offset
        self.next_offset = base_offset  # exact for the active segment; the next segment's base for sealed ones
        self.size = 0
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.file: File | None = None
        self.index: OffsetIndex | None = None
        self.time_index: TimeIndex | None = None
        self.bytes_since_index = 0
        # damaged byte ranges kept in the file: start position -> (end position, first offset, next offset)
        self.damaged: dict[int, tuple[int, int, int]] = {}

    # -- opening -------------------------------------------------------------------------------------------------

    @classmethod
    def create(cls, fs: FileSystem, directory: str, base_offset: int) -> Segment:
        """A new, empty segment. If a file cannot be created, those that were are removed again and the OSError
        is raised (CutBackFailed if they cannot be: then an empty segment file may be left behind)."""
        segment = cls(fs, directory, base_offset)
        created: list[str] = []
        try:
            for suffix in (".index", ".timeindex", ".log"):
                f = fs.open(segment.path + suffix, "w")
                created.append(segment.path + suffix)
                if suffix == ".log":
                    segment.file = f
                else:
                    f.close()
        except OSError:
            segment.close()
            try:
                for path in created:
                    fs.remove(path)
            except OSError as error:
                raise CutBackFailed(
                    error.errno, f"cannot remove a half-created segment: {error.strerror}", error.filename
                ) from error
            raise
        segment.index, segment.time_index = OffsetIndex(), TimeIndex()
        return segment

    @classmethod
    def recover(cls, fs: FileSystem, directory: str, base_offset: int, interval: int,
                recovery_point: int = 0) -> Segment:  # fmt: skip
        """Scan the log and rebuild and rewrite both indexes. A batch that fails its checks is a torn tail, cut
        off, only when it holds offsets at or above `recovery_point` (never fsynced) and no valid batch follows
        it; otherwise (damage to data that was durable, or valid batches after it) its bytes are kept in place,
        skipped, remembered in `damaged` (reads of its offsets raise CorruptRecordError) and logged as an error.
        See docs/compatibility.md, "Damaged segment files"."""
        segment = cls(fs, directory, base_offset)
        segment.file = fs.open(segment.path + ".log", "a")
        segment.index, segment.time_index = OffsetIndex(), TimeIndex()
        file_size = segment.file.size()
        indexer = segment._indexer(interval)
        position, expected = 0, base_offset
        while True:
            position = scan_batches(segment.file, file_size, expected, indexer, start=position)
            expected = segment.next_offset
            if position >= file_size:
                break
            resume = _next_valid_batch(segment.file, position, file_size, expected)
            if resume is None and expected >= recovery_point:
                segment._cut_torn_tail(position, file_size, expected, recovery_point)
                file_size = position
                break
            position, expected = segment._keep_damaged(position, resume, file_size, expected, recovery_point)
        segment.size = file_size
        segment.rewrite_indexes()
        return segment

    def _cut_torn_tail(self, position: int, file_size: int, expected: int, recovery_point: int) -> None:
        assert self.file is not None
        logger.warning("%s.log: cut %d bytes of an incomplete or invalid batch at byte %d (offset %d onwards, "
                       "not yet flushed: recovery point %d), as after a crash", self.path, file_size - position,
                       position, expected, recovery_point)  # fmt: skip
        self.file.truncate(position)

    def _keep_damaged(self, position: int, resume: tuple[int, int] | None, file_size: int, expected: int,
                      recovery_point: int) -> tuple[int, int]:  # fmt: skip
        """Remember the damaged bytes from `position` up to the next valid batch (`resume`: its position and base
        offset) or the end of the file, log them, and return where the scan goes on."""
        assert self.file is not None
        if resume is not None:
            end, next_offset = resume
        else:
            end, next_offset = file_size, _damaged_tail_end(self.file, position, file_size, expected, recovery_point)
        self.damaged[position] = (end, expected, next_offset)
        self.next_offset = max(self.next_offset, next_offset)
        what = "valid batches follow it" if resume is not None else "it ends the file"
        logger.error("%s.log: damaged batch at bytes %d-%d (offsets %d-%d): kept as it is, %s; fetches of these "
                     "offsets answer CORRUPT_MESSAGE (see docs/operations.md, Damaged segment files)", self.path,
                     position, end, expected, next_offset - 1, what)  # fmt: skip
        return end, next_offset

    @classmethod
    def open_sealed(cls, fs: FileSystem, directory: str, base_offset: int, next_offset: int,
                    interval: int) -> Segment:  # fmt: skip
        """A durable segment ending just before `next_offset` (the next segment's base). It is not scanned: as in
        Kafka, damage below the recovery point shows when the damaged batch is read (the client's CRC check)."""
        segment = cls(fs, directory, base_offset)
        if not segment._read_sealed_metadata():
            logger.warning("%s: index files missing or malformed; rebuilding them from the log", segment.path)
            return cls.recover(fs, directory, base_offset, interval, recovery_point=next_offset)
        segment.next_offset = next_offset
        return segment

    def _read_sealed_metadata(self) -> bool:
        """Size and max timestamp from the files; False if the index files are missing or malformed."""
        try:
            self.size = self.fs.size(self.path + ".log")
            index_size = self.fs.size(self.path + ".index")
            time_size = self.fs.size(self.path + ".timeindex")
        except FileNotFoundError:
            return False
        if index_size % 8 or time_size % TIME_ENTRY.size:
            return False
        if time_size:
            f = self.fs.open(self.path + ".timeindex", "r")
            try:
                timestamp, rel = TIME_ENTRY.unpack(f.pread(time_size - TIME_ENTRY.size, TIME_ENTRY.size))
            finally:
                f.close()
            self.max_timestamp, self.max_timestamp_offset = timestamp, self.base_offset + rel
        return True

    def end_on_disk(self) -> int | None:
        """The offset after the last batch of a sealed segment's file, found from its last offset-index entry
        (a few headers read); None if the file's framing does not say."""
        index = self.fs.open(self.path + ".index", "r")
        try:
            size = index.size()
            entry = index.pread(size - OFFSET_ENTRY.size, OFFSET_ENTRY.size) if size else b""
        finally:
            index.close()
        position = OFFSET_ENTRY.unpack(entry)[1] if entry else 0
        f = self.fs.open(self.path + ".log", "r")
        try:
            window, end = _Window(f, self.size, 64 * 1024), None
            while position + SCAN_SIZE <= self.size:
                header = window.header(position)
                if header[1] <= 0:
                    return None
                end, position = header[0] + header[3] + 1, position + LOG_OVERHEAD + header[1]
        finally:
            f.close()
        return end if position == self.size else None

    def load(self, interval: int) -> None:
        """Open the log and load the offset index of a sealed segment (rebuilt from the log if inconsistent)."""
        if self.file is None:
            self.file = self.fs.open(self.path + ".log", "r")
        if self.index is None:
            data = _read_all(self.fs, self.path + ".index")
            self.index = OffsetIndex.from_bytes(data, self.size)
            if self.index is None:
                self.index = OffsetIndex()
                scan_batches(self.file, self.size, self.base_offset, self._indexer(interval, time=False))

    def unload(self) -> None:
        """Drop what `load` brought in (sealed segments only)."""
        if self.file is not None:
            self.file.close()
        self.file, self.index, self.time_index = None, None, None
        self.bytes_since_index = 0

    def load_time_index(self) -> TimeIndex:
        if self.time_index is not None:
            return self.time_index
        return TimeIndex.from_bytes(_read_all(self.fs, self.path + ".timeindex")) or TimeIndex()

    # -- appending -----------------------------------------------------------------------------------------------

    def append(self, buf: bytearray | Parts, headers: list[BatchHeader], first_offset: int, append_time: int,
               interval: int) -> None:  # fmt: skip
        """Write `buf` (batches already given offsets from `first_offset`) and index it. On OSError the file is
        cut back to its previous size and the error raised; CutBackFailed if the cut-back fails too."""
        assert self.file is not None and self.index is not None
        position = self.size
        try:
            if isinstance(buf, Parts):
                nbytes = buf.nbytes
                append_parts = getattr(self.file, "append_parts", None)
                if append_parts is not None:
                    append_parts(buf.buffers)
                else:
                    self.file.append(b"".join(buf.buffers))
            else:
                nbytes = len(buf)
                self.file.append(buf)
        except OSError:
            _cut_back(self.file, position)
            raise
        self.size += nbytes
        record = self._indexer(interval)
        offset = first_offset
        for header in headers:
            timestamp = append_time if append_time >= 0 else header.max_timestamp
            record(position + header.position, offset, header.last_offset_delta, header.size, timestamp)
            offset += header.last_offset_delta + 1

    def _indexer(self, interval: int, time: bool = True) -> Callable[[int, int, int, int, int], None]:
        """A function recording one batch (position, base offset, last offset delta, size, max timestamp)."""

        def record(position: int, base: int, last_delta: int, size: int, timestamp: int) -> None:
            if timestamp > self.max_timestamp:
                self.max_timestamp, self.max_timestamp_offset = timestamp, base
            if self.bytes_since_index > interval:
                assert self.index is not None
                self.index.append(base + last_delta - self.base_offset, position)
                if time and self.time_index is not None:
                    self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset - self.base_offset)
                self.bytes_since_index = 0
            self.bytes_since_index += size
            self.next_offset = base + last_delta + 1

        return record

    # -- durability ----------------------------------------------------------------------------------------------

    def write_indexes(self) -> None:
        """Append the pending index entries to the index files (no fsync: see the module docstring)."""
        for suffix, index in ((".index", self.index), (".timeindex", self.time_index)):
            if index is None or index.written == len(index):
                continue
            f = self.fs.open(self.path + suffix, "a")
            try:
                _append_or_cut_back(f, index.pending())
            finally:
                f.close()
            index.mark_written()

    def rewrite_indexes(self) -> None:
        for suffix in (".index", ".timeindex"):
            self.fs.open(self.path + suffix, "w").close()
        for index in (self.index, self.time_index):
            if index is not None:
                index.written = 0
        self.write_indexes()

    def fsync(self) -> None:
        if self.file is not None:
            self.file.fsync()
            return
        f = self.fs.open(self.path + ".log", "r")
        try:
            f.fsync()
        finally:
            f.close()

    def seal(self) -> None:
        """Called before a newer segment takes over: final time-index entry, indexes written and fsynced (then
        `unload` releases the memory). The log file itself is fsynced by the next flush. If it raises, the index
        files were cut back to what they held (else CutBackFailed) and the segment can stay the active one."""
        if self.time_index is not None and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset - self.base_offset)
        self.write_indexes()
        for suffix in (".index", ".timeindex"):
            f = self.fs.open(self.path + suffix, "a")
            try:
                f.fsync()
            finally:
                f.close()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def delete(self) -> None:
        self.close()
        for suffix in (".log", ".index", ".timeindex", ".txnindex"):
            if self.fs.exists(self.path + suffix):
                self.fs.remove(self.path + suffix)

    # -- reading -------------------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, min_one: bool, interval: int) -> bytes:
        """Whole batches from the one holding `offset`, at most `max_bytes` (but one batch with `min_one`)."""
        assert self.file is not None and self.index is not None
        window = _Window(self.file, self.size, 2 * interval + max_bytes + SCAN_SIZE)
        start = self._find(window, self.index.lookup(offset - self.base_offset), lambda h: h[0] + h[3] >= offset,
                           offset)  # fmt: skip
        if start is None:
            if offset < self.next_offset:
                raise CorruptRecordError(f"offset {offset} is missing from {self.path}.log, which should hold "
                                         f"offsets {self.base_offset}-{self.next_offset - 1}")  # fmt: skip
            return b""
        end = start
        while end < self.size and end not in self.damaged:  # a read stops before a damaged batch
            size = LOG_OVERHEAD + window.header(end)[1]
            if end + size - start > max_bytes and not (min_one and end == start):
                break
            end += size
        return window.slice(start, end)

    def find_timestamp(self, timestamp: int, interval: int, min_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record, in offset order from `min_offset`, stamped >= `timestamp`.

        The time index skips the batches that cannot hold one; then, as Kafka's `searchForTimestamp`, every batch
        whose max timestamp is >= `timestamp` is searched record by record until one qualifies."""
        assert self.file is not None and self.index is not None
        rel = self.load_time_index().lookup(timestamp)
        window = _Window(self.file, self.size, interval + 64 * 1024)

        def wanted(h: tuple[int, ...]) -> bool:
            return h[5] >= timestamp and h[0] + h[3] >= min_offset

        position = self.index.lookup(rel)
        while (start := self._find(window, position, wanted)) is not None:
            batch = window.batch(start)
            found = search_timestamp(batch, parse_header(batch), timestamp, min_offset)
            if found is not None:
                return found
            position = start + len(batch)
        return None

    def max_timestamp_record(self, interval: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the segment's max timestamp (Kafka's
        `offsetOfMaxTimestamp` on the first batch that reached it); None if the segment is empty."""
        assert self.file is not None and self.index is not None
        if self.max_timestamp < 0:
            return None
        base, stamp = self.max_timestamp_offset, self.max_timestamp
        window = _Window(self.file, self.size, interval + 64 * 1024)
        position = self._find(window, self.index.lookup(base - self.base_offset), lambda h: h[0] + h[3] >= base)
        if position is None:
            return None
        batch = window.batch(position)
        offset = find_offset_of_timestamp(batch, parse_header(batch), stamp)
        return (base if offset is None else offset), stamp

    def batch_headers(self, offset: int) -> Iterator[BatchHeader]:
        """The headers of the batches from the one holding `offset` (or the first after it) to the end of the
        segment, damaged batches skipped (the producer state scan): only the 61-byte headers are used, read with
        their neighbours in windows of 64 KiB. Raises OSError."""
        assert self.file is not None and self.index is not None
        window = _Window(self.file, self.size, 64 * 1024)
        position = self._find(window, self.index.lookup(offset - self.base_offset), lambda h: h[0] + h[3] >= offset)
        while position is not None and position < self.size:
            damage = self.damaged.get(position)
            if damage is not None:
                position = damage[0]
                continue
            header = window.batch_header(position)
            yield header
            position += header.size

    def _find(self, window: _Window, position: int, wanted: Callable[[tuple[int, ...]], bool],
              offset: int | None = None) -> int | None:  # fmt: skip
        """Position of the first batch from `position` that is `wanted`, skipping damaged ones, unless `offset`
        is in one of them: then CorruptRecordError (a fetch answers CORRUPT_MESSAGE)."""
        while position < self.size:
            damage = self.damaged.get(position)
            if damage is not None:
                end, first, next_offset = damage
                if offset is not None and offset < next_offset:
                    raise CorruptRecordError(f"offsets {first}-{next_offset - 1} are in a damaged batch at bytes "
                                             f"{position}-{end} of {self.path}.log")  # fmt: skip
                position = end
                continue
            header = window.header(position)
            if wanted(header):
                return position
            position += LOG_OVERHEAD + header[1]
        return None


class _Window:
    """Bytes of a file fetched with as few preads as possible while a read walks batch headers."""

    __slots__ = ("file", "file_size", "want", "start", "data")

    def __init__(self, file: File, file_size: int, want: int) -> None:
        self.file, self.file_size, self.want = file, file_size, want
        self.start, self.data = 0, b""

    def _ensure(self, position: int, size: int) -> None:
        if self.start <= position and position + size <= self.start + len(self.data):
            return
        length = min(max(size, self.want), self.file_size - position)
        self.start, self.data = position, self.file.pread(position, length)

    def header(self, position: int) -> tuple[int, ...]:
        """(base offset, batch length, attributes, last offset delta, base timestamp, max timestamp)."""
        self._ensure(position, SCAN_SIZE)
        return _SCAN.unpack_from(self.data, position - self.start)

    def batch_header(self, position: int) -> BatchHeader:
        """The full header of the batch at `position` (its `position` is the file position)."""
        self._ensure(position, HEADER_SIZE)
        return BatchHeader(position, *HEADER.unpack_from(self.data, position - self.start))

    def batch(self, position: int) -> bytes:
        """The whole batch starting at `position`."""
        return self.slice(position, position + LOG_OVERHEAD + self.header(position)[1])

    def slice(self, start: int, end: int) -> bytes:
        """The bytes from `start` to `end`: a view into the window (no copy) unless it is the whole window."""
        self._ensure(start, end - start)
        if start == self.start and end == self.start + len(self.data):
            return self.data
        return memoryview(self.data)[start - self.start : end - self.start]  # type: ignore[return-value]


def scan_batches(file: File, file_size: int, first_offset: int,
                 record: Callable[[int, int, int, int, int], None], start: int = 0) -> int:  # fmt: skip
    """Walk the valid batches of a segment file from `start` (see `batch.valid_prefix`), calling
    `record(position, base offset, last offset delta, size, max timestamp)` for each; returns where the valid
    batches end."""
    position, expected, want = start, first_offset, SCAN_CHUNK
    while position < file_size:
        chunk = file.pread(position, min(want, file_size - position))
        headers = valid_prefix(chunk, expected)
        for h in headers:
            record(position + h.position, h.base_offset, h.last_offset_delta, h.size, h.max_timestamp)
        consumed = headers[-1].end if headers else 0
        if headers:
            expected = headers[-1].next_offset
        position += consumed
        needed = _cut_batch_size(chunk, consumed)
        if needed is None or position + needed > file_size:
            break  # a broken or torn batch: the valid part ends here
        want = max(SCAN_CHUNK, needed)
    return position


def _next_valid_batch(file: File, position: int, file_size: int, expected: int) -> tuple[int, int] | None:
    """(position, base offset) of the first valid batch after the invalid one at `position`, numbered from
    `expected` on; None if there is none. The invalid batch's own length is tried first (a damaged payload);
    if that length is damaged too, every later byte that could start a batch (magic 2 at the right place) is."""
    data = file.pread(position, file_size - position)
    if len(data) >= LOG_OVERHEAD:
        length = int.from_bytes(data[8:12], "big", signed=True)
        if 0 < length and LOG_OVERHEAD + length < len(data) and _batch_at(data, LOG_OVERHEAD + length, expected):
            return position + LOG_OVERHEAD + length, int.from_bytes(data[LOG_OVERHEAD + length :][:8], "big")
    candidate = data.find(b"\x02", MAGIC_OFFSET + 1)
    while candidate >= 0:
        at = candidate - MAGIC_OFFSET
        if _batch_at(data, at, expected):
            return position + at, int.from_bytes(data[at : at + 8], "big")
        candidate = data.find(b"\x02", candidate + 1)
    return None


def _batch_at(data: bytes, at: int, expected: int) -> bool:
    """True if a whole, CRC-correct batch numbered from `expected` on (and not absurdly far) starts at `at`."""
    try:
        header = parse_header(data, at)
        check_crc(data, header)
    except (CorruptRecordError, UnsupportedMagicError):
        return False
    return 0 <= header.base_offset - expected < 2**31 and 0 <= header.record_count <= header.last_offset_delta + 1


def _damaged_tail_end(file: File, position: int, file_size: int, expected: int, recovery_point: int) -> int:
    """The offset after a damaged batch that ends the file: its own header's, when its header is intact and it
    fills the rest of the file exactly; else the recovery point (everything below it was durable)."""
    try:
        header = parse_header(file.pread(position, file_size - position))
    except (CorruptRecordError, UnsupportedMagicError):
        return max(recovery_point, expected + 1)
    if header.base_offset == expected and header.end == file_size - position and header.last_offset_delta >= 0:
        return header.next_offset
    return max(recovery_point, expected + 1)


def _cut_batch_size(chunk: bytes, consumed: int) -> int | None:
    """If the batch at `consumed` was only cut off by the end of `chunk`, the size it needs; else None."""
    rest = len(chunk) - consumed
    if rest == 0:
        return 0 if consumed else None
    if rest < LOG_OVERHEAD:
        return LOG_OVERHEAD if consumed else None
    size = LOG_OVERHEAD + int.from_bytes(chunk[consumed + 8 : consumed + 12], "big", signed=True)
    return size if size > rest else None


def _append_or_cut_back(f: File, data: bytes) -> None:
    """Append `data`; if that fails, cut the file back to its previous size (CutBackFailed if that fails too)."""
    position = f.size()
    try:
        f.append(data)
    except OSError:
        _cut_back(f, position)
        raise


def _cut_back(f: File, position: int) -> None:
    """Truncate `f` back to `position` after a failed write (nothing to do if the write never reached the file,
    e.g. no descriptor could be had); raises CutBackFailed if that fails too."""
    try:
        if f.size() != position:
            f.truncate(position)
    except OSError as error:
        raise CutBackFailed(error.errno, f"cannot undo a failed write: {error.strerror}", error.filename) from error


def _read_all(fs: FileSystem, path: str) -> bytes:
    return read_whole(fs, path) if fs.exists(path) else b""
