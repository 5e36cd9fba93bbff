"""Crash tests: the real log code on MemoryFileSystem, abandoned at a power cut and reopened."""

from __future__ import annotations

import pytest
from batches import make_batch, read_all, records_of
from hypothesis import given, settings
from hypothesis import strategies as st

from herd.log.api import KafkaStorageError, LogConfig
from herd.log.fs import MemoryFileSystem
from herd.log.segments import SegmentLog
from herd.log.store import SegmentStore

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=100)


def open_log(fs: MemoryFileSystem, config: LogConfig = CONFIG) -> SegmentLog:
    return SegmentStore("/data", fs).open_partition("t", 0, config)


def offsets(log: SegmentLog) -> list[int]:
    return [o for o, _ in read_all(log)]


def keep(n: int):  # noqa: ANN201 - a KeepTorn
    return lambda path, tail: n if path.endswith(".log") else len(tail)


@pytest.mark.parametrize("flushed", [0, 3, 12])
def test_torn_write_at_every_byte_recovers_to_the_last_whole_batch(flushed: int) -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    for i in range(flushed):
        log.append(make_batch([b"flushed-%d" % i, b"x" * 40]), 0)
    log.flush()
    last = make_batch([b"unflushed", b"y" * 70])
    log.append(last, 0)
    for k in range(len(last) + 1):
        recovered = open_log(fs.crash(keep(k)))
        whole = 2 * flushed + (2 if k == len(last) else 0)
        assert offsets(recovered) == list(range(whole)), f"kept {k} bytes"
        recovered.append(make_batch([b"after"]), 0)  # and the log goes on from there
        assert recovered.log_end_offset == whole + 1


def test_a_torn_tail_is_cut_and_stays_cut() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    log.append(make_batch([b"a"]), 0)
    log.flush()
    log.append(make_batch([b"b" * 100]), 0)
    crashed = fs.crash(keep(30))
    recovered = open_log(crashed)
    assert offsets(recovered) == [0]
    assert open_log(crashed.crash()).log_end_offset == 1  # the truncation itself was made durable


def test_garbage_after_the_last_batch_is_cut() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    log.append(make_batch([b"a"]), 0)
    log.flush()
    segment = log._segments[-1].path + ".log"
    fs.files[segment].data += b"\x00" * 100 + b"garbage"
    assert offsets(open_log(fs.crash(lambda p, t: len(t)))) == [0]


@pytest.mark.parametrize("entries", [False, True])
@pytest.mark.parametrize("cut", [0, 20, 61, 10_000])
def test_crash_in_the_middle_of_a_roll(entries: bool, cut: int) -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    while len(log._segments) == 1:
        log.append(make_batch([b"v" * 100]), 0)
    flushed_before_roll = log.log_end_offset - 1
    # The roll created the new segment; nothing after the roll (nor the old segment's tail) was fsynced.
    recovered = open_log(fs.crash(lambda p, t: min(cut, len(t)), keep_unsynced_entries=entries))
    got = offsets(recovered)
    assert got == list(range(len(got)))  # a prefix of what was appended, no hole
    assert len(got) <= flushed_before_roll + 1


def test_crash_after_a_flushed_roll_keeps_every_flushed_batch() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    for _ in range(40):
        log.append(make_batch([b"v" * 100]), 0)
    log.flush()
    assert len(log._segments) > 2
    log.append(make_batch([b"lost"]), 0)
    for entries in (False, True):
        recovered = open_log(fs.crash(keep_unsynced_entries=entries))
        assert offsets(recovered) == list(range(40))


@pytest.mark.parametrize("op", ["write", "fsync", "truncate", "rename"])
def test_fault_during_roll_loses_nothing_flushed(op: str) -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    log.append(make_batch([b"v" * 100]), 0)
    log.flush()
    flushed = log.flushed_offset
    fs.fail(op)
    try:
        for _ in range(30):
            log.append(make_batch([b"v" * 100]), 0)
        log.flush()
    except KafkaStorageError:
        pass
    got = offsets(open_log(fs.crash(keep_unsynced_entries=True)))
    assert got == list(range(len(got))) and len(got) >= flushed


def test_a_failing_fsync_is_raised_and_nothing_unflushed_is_reported_durable() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    log.append(make_batch([b"a"]), 0)
    log.flush()
    log.append(make_batch([b"b"]), 0)
    fs.fail("fsync")
    with pytest.raises(KafkaStorageError):
        log.flush()
    assert log.flushed_offset == 1
    with pytest.raises(KafkaStorageError):  # the partition refuses work until reopened
        log.append(make_batch([b"c"]), 0)
    with pytest.raises(KafkaStorageError):
        log.flush()
    assert log.flushed_offset == 1
    assert offsets(open_log(fs.crash())) == [0]


def test_a_failing_write_stores_nothing_and_the_log_goes_on() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    log.append(make_batch([b"a"]), 0)
    fs.fail("write")
    with pytest.raises(KafkaStorageError):
        log.append(make_batch([b"b"]), 0)
    assert log.log_end_offset == 1
    log.append(make_batch([b"c"]), 0)
    log.flush()
    assert records_of(open_log(fs.crash()).read(0, 1000)) == [(0, b"a"), (1, b"c")]


def test_a_failing_write_and_cut_back_fails_the_partition() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    fs.fail("write")
    fs.fail("truncate")
    with pytest.raises(KafkaStorageError):
        log.append(make_batch([b"b"]), 0)
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)


def test_deleting_a_partition_is_all_or_nothing() -> None:
    fs = MemoryFileSystem()
    store = SegmentStore("/data", fs)
    store.open_partition("t", 0, CONFIG).append(make_batch([b"a"]), 0)
    store.open_partition("t", 1, CONFIG)
    store.close()
    fs.fail("rename")
    with pytest.raises(OSError):
        store.delete_partition("t", 0)
    assert SegmentStore("/data", fs.crash()).existing_partitions() == [("t", 0), ("t", 1)]
    store.delete_partition("t", 0)
    assert SegmentStore("/data", fs.crash()).existing_partitions() == [("t", 1)]


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=30),
    flush_every=st.integers(1, 10),
    torn=st.integers(0, 2000),
    entries=st.booleans(),
)
def test_random_crashes_keep_every_flushed_record(sizes: list[int], flush_every: int, torn: int,
                                                  entries: bool) -> None:  # fmt: skip
    fs = MemoryFileSystem()
    log = open_log(fs)
    for i, size in enumerate(sizes):
        log.append(make_batch([b"%d" % i + b"." * size]), 0)
        if i % flush_every == 0:
            log.flush()
    flushed = log.flushed_offset
    recovered = open_log(fs.crash(lambda p, t: min(torn, len(t)), keep_unsynced_entries=entries))
    got = offsets(recovered)
    assert got == list(range(len(got)))
    assert flushed <= len(got) <= len(sizes)
