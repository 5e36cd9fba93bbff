"""The idempotent producers' state kept with the log (herd.log.producer_state with herd.log.producer_snapshots):
snapshots taken at every roll and on close, read back with the batch headers after them when the partition is
opened again, skipped when corrupt, deleted below the log start; and a restarted partition still recognising
duplicates and refusing gaps, after a clean close and after a crash. On the in-memory filesystem."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import pytest
from batches import idempotent_batch as batch

from herd.log import producer_snapshots
from herd.log.api import LogConfig, OutOfOrderSequenceError
from herd.log.batch import BatchHeader
from herd.log.fs import MemoryFileSystem
from herd.log.producer_state import ProducerStates
from herd.log.segments import SegmentLog
from herd.log.store import SegmentStore

DIR = "/data/t-0"


def open_log(fs: MemoryFileSystem, **config: int) -> SegmentLog:
    return SegmentLog.open(fs, DIR, "t", 0, LogConfig(**config))


def snapshots(fs: MemoryFileSystem) -> list[int]:
    return producer_snapshots.snapshot_offsets(fs, DIR)


def written(fs: MemoryFileSystem, batches: int, **config: int) -> tuple[SegmentLog, ProducerStates]:
    """A log in segments of 500 bytes (one batch of about 280 bytes each, so a roll, and a snapshot, at every
    batch after the first) holding `batches` batches of producer 7 (sequences 0, 2, ...; offsets alike),
    appended through a ProducerStates that is the log's snapshot source."""
    log = open_log(fs, segment_bytes=500, **config)
    states = ProducerStates()
    log.snapshot_source = lambda: states.batches("t", 0)
    for seq in range(0, 2 * batches, 2):
        states.append(log, batch(7, 0, seq), 0)
    return log, states


@dataclass
class Reads:
    """What `SegmentLog.producer_state` read: the snapshots it tried (offsets, in order, corrupt ones too),
    the offsets it scanned batch headers from, and the base offsets of the headers it scanned."""

    snapshots: list[int] = field(default_factory=list)
    headers_from: list[int] = field(default_factory=list)
    headers: list[int] = field(default_factory=list)


def spy_on_reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    """From now on, record every snapshot read and header scan (the real ones still run)."""
    seen = Reads()
    real_read, real_headers_from = producer_snapshots.read, SegmentLog._headers_from

    def read(fs: MemoryFileSystem, directory: str, offset: int, **kwargs: object) -> list:
        seen.snapshots.append(offset)
        return real_read(fs, directory, offset, **kwargs)  # type: ignore[arg-type]

    def headers_from(self: SegmentLog, offset: int) -> Iterator[BatchHeader]:
        seen.headers_from.append(offset)
        for header in real_headers_from(self, offset):
            seen.headers.append(header.base_offset)
            yield header

    monkeypatch.setattr(producer_snapshots, "read", read)
    monkeypatch.setattr(SegmentLog, "_headers_from", headers_from)
    return seen


def test_snapshots_are_taken_at_every_roll_and_on_close_and_reopening_reads_the_latest(monkeypatch) -> None:
    fs = MemoryFileSystem()
    log, states = written(fs, 6)
    rolls = [s.base_offset for s in log._segments[1:]]
    assert snapshots(fs) == rolls
    (at_first_roll,) = [producer_snapshots.read(fs, DIR, rolls[0], log_append_time=False, log_start_offset=0)]
    assert [b.last_offset for b in at_first_roll] == [o - 1 for o in range(2, rolls[0] + 1, 2)]
    log.close()
    assert snapshots(fs)[-1] == 12
    reopened = open_log(fs, segment_bytes=500)
    reads = spy_on_reads(monkeypatch)
    assert reopened.producer_state() == states.batches("t", 0)
    # the snapshot at the log end, and no batch header: the state came from the snapshot alone
    assert (reads.snapshots, reads.headers_from, reads.headers) == ([12], [12], [])


def test_after_a_crash_the_batches_since_the_last_snapshot_are_read_from_the_log(monkeypatch) -> None:
    fs = MemoryFileSystem()
    log, states = written(fs, 5)
    states.append(log, batch(8, 0, 0), 0)  # only in the active segment, after the last snapshot
    log.flush()
    crashed = fs.crash()
    assert snapshots(crashed)[-1] == 10 < log.log_end_offset  # the last roll's snapshot, not one at the end
    reopened = open_log(crashed, segment_bytes=500)
    reads = spy_on_reads(monkeypatch)
    assert reopened.producer_state() == states.batches("t", 0)
    # the last roll's snapshot, then the headers after it: producer 8's batch only
    assert (reads.snapshots, reads.headers_from, reads.headers) == ([10], [10], [10])


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_used(monkeypatch) -> None:
    fs = MemoryFileSystem()
    log, states = written(fs, 6)
    log.close()
    latest = snapshots(fs)[-1]
    path = posixpath.join(DIR, producer_snapshots.snapshot_name(latest))
    fs.files[path].data[-1] ^= 1
    reopened = open_log(fs, segment_bytes=500)
    reads = spy_on_reads(monkeypatch)
    assert reopened.producer_state() == states.batches("t", 0)
    assert latest not in snapshots(fs)
    # the latest tried, then the one before it, and the headers from there: the batch at 10
    assert (latest, reads.snapshots, reads.headers_from, reads.headers) == (12, [12, 10], [10], [10])


@pytest.mark.parametrize("how", ["retention", "delete-records"])
def test_retention_and_delete_records_delete_the_snapshots_below_the_new_log_start(how: str) -> None:
    fs = MemoryFileSystem()
    log, states = written(fs, 8, retention_bytes=600)
    assert snapshots(fs)[0] == 2
    if how == "retention":
        assert log.apply_retention(0) > 0
    else:
        log.delete_records(log.log_end_offset - 2)
    assert snapshots(fs) and min(snapshots(fs)) >= log.log_start_offset > 2
    assert [replace(b, log_start_offset=0) for b in log.producer_state()] == states.batches("t", 0)


# -- through the store and ProducerStates: a restart --------------------------------------------------------------


def restart(fs: MemoryFileSystem, *, crash: bool = False) -> tuple[MemoryFileSystem, SegmentLog, ProducerStates]:
    fs = fs.crash() if crash else fs
    store = SegmentStore("/data", fs)
    states = store.producers = ProducerStates(clock=lambda: 2000)  # each partition opened restores its state there
    return fs, store.open_partition("t", 0, LogConfig(segment_bytes=500)), states


@pytest.mark.parametrize("crash", [False, True], ids=["closed", "crashed"])
def test_a_restarted_partition_still_recognises_duplicates_and_gaps(crash: bool) -> None:
    fs, log, states = restart(MemoryFileSystem())
    firsts = [states.append(log, batch(7, 0, seq), 1000) for seq in range(0, 12, 2)]
    log.flush()
    if not crash:
        log.close()
    fs, log, states = restart(fs, crash=crash)
    end = log.log_end_offset
    retry = states.append(log, batch(7, 0, 10), 2000)
    assert (retry.base_offset, retry.last_offset) == (firsts[-1].base_offset, firsts[-1].last_offset)
    assert states.append(log, batch(7, 0, 2), 2000).base_offset == firsts[1].base_offset  # among the last five
    with pytest.raises(OutOfOrderSequenceError):
        states.append(log, batch(7, 0, 20), 2000)
    assert log.log_end_offset == end
    assert states.append(log, batch(7, 0, 12), 2000).base_offset == end
