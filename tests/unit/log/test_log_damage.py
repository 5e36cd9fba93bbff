"""Damaged segment files (issue 11, item 5): a flipped byte, an edited index or checkpoint, a deleted segment.
Whatever is damaged, every intact batch is kept and what was found is logged; only a torn tail of data that
was never flushed is cut (test_log_crash.py). Run on MemoryFileSystem and on real files (OsFileSystem)."""

from __future__ import annotations

import logging
import posixpath

import pytest
from batches import make_batch, records_of

from herd.log.api import CorruptRecordError, LogConfig
from herd.log.batch import HEADER_SIZE, iter_headers
from herd.log.fs import FileSystem, MemoryFileSystem, OsFileSystem
from herd.log.segments import SegmentLog
from herd.log.store import SegmentStore

BIG = LogConfig(index_interval_bytes=100)  # one segment: the last one, which recovery always looks at
SMALL = LogConfig(segment_bytes=1500, index_interval_bytes=100)
FIRST = "00000000000000000000.log"


_stores: dict[tuple[int, str], SegmentStore] = {}


def open_log(fs: FileSystem, root: str, config: LogConfig = BIG) -> SegmentLog:
    """The partition, opened as a broker (re)starting on `root` would: the store a previous call opened there
    is closed first, which releases the directory's lock (its logs were closed, or abandoned as in a crash,
    by the test)."""
    previous = _stores.pop((id(fs), root), None)
    if previous is not None:
        previous.close()
    store = _stores[(id(fs), root)] = SegmentStore(root, fs)
    return store.open_partition("t", 0, config)


def fill(log: SegmentLog, batches: int = 100, per_batch: int = 10) -> None:
    for i in range(batches):
        log.append(make_batch([b"%d-%d" % (i, j) for j in range(per_batch)]), 0)


def readable(log: SegmentLog) -> tuple[list[int], list[tuple[int, str]]]:
    """Every offset a reader gets, skipping (as an operator's consumer would, one offset at a time) the offsets
    whose read fails; and the failures."""
    got, failures, offset = [], [], log.log_start_offset
    while offset < log.log_end_offset:
        try:
            data = log.read(offset, 1 << 20)
        except CorruptRecordError as error:
            failures.append((offset, str(error)))
            offset += 1
            continue
        records = [o for o, _ in records_of(bytes(data)) if o >= offset]
        got += records
        offset = records[-1] + 1
    return got, failures


def damage(fs: FileSystem, path: str, position: int, xor: int = 0xFF) -> None:
    """Flip bits of one byte of a file that is durable (bit rot, or an editor), on either filesystem."""
    if isinstance(fs, MemoryFileSystem):
        inode = fs.files[path]
        inode.data[position] ^= xor
        inode.durable = bytes(inode.data)
        return
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes((byte ^ xor,)))


def batch_positions(fs: FileSystem, path: str) -> list[int]:
    f = fs.open(path, "r")
    try:
        data = f.pread(0, f.size())
    finally:
        f.close()
    return [h.position for h in iter_headers(data)]


@pytest.fixture(params=["memory", "os"])
def disk(request, tmp_path) -> tuple[FileSystem, str]:
    if request.param == "memory":
        return MemoryFileSystem(), "/data"
    return OsFileSystem(), str(tmp_path / "data")


def test_a_flipped_byte_after_a_clean_shutdown_loses_only_its_batch(disk, caplog) -> None:
    """The case found: 1,000 records, clean stop, one byte flipped mid-segment; the next start used to cut
    the log there (500 records gone, nothing logged)."""
    fs, root = disk
    log = open_log(fs, root)
    fill(log)
    log.close()
    path = posixpath.join(root, "t-0", FIRST)
    start = batch_positions(fs, path)[50]
    damage(fs, path, start + HEADER_SIZE + 5)  # in the records of batch 50 (offsets 500-509)
    with caplog.at_level(logging.WARNING):
        log = open_log(fs, root)
    assert log.log_end_offset == 1000
    got, failures = readable(log)
    assert got == list(range(500)) + list(range(510, 1000))
    assert [offset for offset, _ in failures] == list(range(500, 510))
    assert "offsets 500-509" in failures[0][1] and FIRST in failures[0][1]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and FIRST in errors[0] and "offsets 500-509" in errors[0], errors
    log.append(make_batch([b"after"]), 0)  # and the log goes on
    assert log.log_end_offset == 1001
    log.close()
    assert open_log(fs, root).log_end_offset == 1001  # the damage stays, nothing is cut on the next start


def test_a_damaged_length_is_skipped_by_finding_the_next_batch(caplog) -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, "/data")
    fill(log, 20)
    log.close()
    path = "/data/t-0/" + FIRST
    damage(fs, path, batch_positions(fs, path)[7] + 9, 0x40)  # batch 7's length field
    with caplog.at_level(logging.WARNING):
        log = open_log(fs, "/data")
    got, failures = readable(log)
    assert got == list(range(70)) + list(range(80, 200))
    assert failures[0][0] == 70 and failures[-1][0] == 79
    assert any("offsets 70-79" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_the_last_batch_damaged_after_a_clean_shutdown_is_kept() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, "/data")
    fill(log, 5)
    log.close()
    path = "/data/t-0/" + FIRST
    damage(fs, path, batch_positions(fs, path)[4] + HEADER_SIZE + 1)
    log = open_log(fs, "/data")
    assert log.log_end_offset == 50
    got, failures = readable(log)
    assert got == list(range(40)) and [o for o, _ in failures] == list(range(40, 50))


def test_damage_in_unflushed_data_followed_by_valid_batches_keeps_them(caplog) -> None:
    """After a crash the unflushed region is scanned; an invalid batch with valid batches after it is not a torn
    tail: herd keeps them all (Kafka would truncate there, see docs/compatibility.md)."""
    fs = MemoryFileSystem()
    log = open_log(fs, "/data")
    fill(log, 3)
    log.flush()
    fill(log, 3)  # offsets 30-59, never flushed
    path = "/data/t-0/" + FIRST
    where = batch_positions(fs, path)[4] + HEADER_SIZE + 2
    fs.files[path].data[where] ^= 0xFF
    crashed = fs.crash(lambda p, tail: len(tail))  # the whole unflushed tail reached the disk, damaged
    with caplog.at_level(logging.WARNING):
        log = open_log(crashed, "/data")
    got, failures = readable(log)
    assert got == list(range(40)) + list(range(50, 60))
    assert any("offsets 40-49" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_a_torn_tail_is_still_cut_and_said(caplog) -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, "/data")
    fill(log, 3)
    log.flush()
    fill(log, 1)
    with caplog.at_level(logging.WARNING):
        log = open_log(fs.crash(lambda p, tail: 20 if p.endswith(".log") else len(tail)), "/data")
    assert log.log_end_offset == 30
    assert any("cut 20 bytes" in r.getMessage() and FIRST in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("content", [b"garbage\n", b"0 0 999999999\n", b""])
def test_an_edited_checkpoint_keeps_the_data(disk, caplog, content) -> None:
    fs, root = disk
    log = open_log(fs, root, SMALL)
    fill(log, 30)
    log.close()
    f = fs.open(posixpath.join(root, "t-0", "partition.checkpoint"), "w")
    f.append(content)
    f.close()
    with caplog.at_level(logging.WARNING):
        log = open_log(fs, root, SMALL)
    assert readable(log) == (list(range(300)), [])
    assert any("partition.checkpoint" in r.getMessage() or "recovery point" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)  # fmt: skip


def test_a_truncated_index_is_rebuilt(disk, caplog) -> None:
    fs, root = disk
    log = open_log(fs, root, SMALL)
    fill(log, 30)
    log.close()
    index = posixpath.join(root, "t-0", "00000000000000000000.index")
    f = fs.open(index, "a")
    f.truncate(5)
    f.close()
    with caplog.at_level(logging.WARNING):
        log = open_log(fs, root, SMALL)
    assert readable(log) == (list(range(300)), [])
    assert any("index files missing or malformed" in r.getMessage() for r in caplog.records)


def test_a_deleted_segment_in_the_middle_keeps_the_others(disk, caplog) -> None:
    fs, root = disk
    log = open_log(fs, root, SMALL)
    fill(log, 30)
    log.close()
    directory = posixpath.join(root, "t-0")
    logs = sorted(n for n in fs.listdir(directory) if n.endswith(".log"))
    assert len(logs) >= 4
    gone = logs[2]
    fs.remove(posixpath.join(directory, gone))
    with caplog.at_level(logging.WARNING):
        log = open_log(fs, root, SMALL)
    missing = range(int(gone[:20]), int(logs[3][:20]))
    got, failures = readable(log)
    assert got == [o for o in range(300) if o not in missing]
    assert [o for o, _ in failures] == list(missing)
    assert any("are missing" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
