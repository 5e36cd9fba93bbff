"""DeleteRecords on the segment log (SegmentLog.delete_records), on the in-memory filesystem: the log start moves,
reads below it are out of range, segments wholly below it go, the start survives a crash, and Kafka's refusals
(beyond the high watermark, negative offsets, compacted topics) change nothing."""

from __future__ import annotations

import pytest
from batches import BASE_TS, make_batch, records_of

from herd.log.api import (
    HIGH_WATERMARK,
    KafkaStorageError,
    LogConfig,
    OffsetOutOfRangeError,
    PolicyViolationError,
    deletion_start,
)
from herd.log.fs import MemoryFileSystem
from herd.log.segments import CHECKPOINT, SegmentLog
from herd.log.store import SegmentStore

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=200)


def open_log(fs: MemoryFileSystem, config: LogConfig = SMALL) -> SegmentLog:
    return SegmentStore("/data", fs).open_partition("t", 0, config)


def filled(fs: MemoryFileSystem, records: int = 30, config: LogConfig = SMALL) -> SegmentLog:
    """A log of `records` records of 100 bytes each, one per batch: several segments of about 7 batches."""
    log = open_log(fs, config)
    for i in range(records):
        log.append(make_batch([b"v" * 100], timestamp_ms=BASE_TS + 1000 * i), 0)
    return log


def segment_files(fs: MemoryFileSystem) -> list[int]:
    return sorted(int(name[:20]) for name in fs.listdir("/data/t-0") if name.endswith(".log"))


def test_the_start_moves_reads_below_it_are_out_of_range_and_segments_wholly_below_it_go() -> None:
    fs = MemoryFileSystem()
    log = filled(fs)
    bases = segment_files(fs)
    assert len(bases) > 3
    middle = bases[2] + 1  # inside the third segment
    assert log.delete_records(middle) == middle
    assert log.log_start_offset == middle
    assert segment_files(fs) == bases[2:]  # the third segment holds offsets from the start on: kept
    with pytest.raises(OffsetOutOfRangeError):
        log.read(middle - 1, 1 << 20)
    assert records_of(log.read(middle, 1 << 20))[0][0] <= middle  # whole batches, from the one holding it
    assert log.offset_for_timestamp(0).offset == middle  # by time: never below the start
    assert log.append(make_batch([b"w"]), 0).log_start_offset == middle


def test_an_offset_at_or_below_the_start_changes_nothing_and_answers_the_start() -> None:
    fs = MemoryFileSystem()
    log = filled(fs, 10)
    assert log.delete_records(5) == 5
    files = segment_files(fs)
    assert log.delete_records(3) == 5
    assert log.delete_records(5) == 5
    assert (log.log_start_offset, segment_files(fs)) == (5, files)


def test_the_high_watermark_empties_the_log_but_keeps_the_active_segment() -> None:
    fs = MemoryFileSystem()
    log = filled(fs)
    active = segment_files(fs)[-1]
    assert log.delete_records(HIGH_WATERMARK) == 30
    assert (log.log_start_offset, log.log_end_offset) == (30, 30)
    assert segment_files(fs) == [active]  # as Kafka: the active segment has no next segment to go by
    assert log.read(30, 1000) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(29, 1000)
    assert log.append(make_batch([b"after"]), 0).base_offset == 30
    assert records_of(log.read(30, 1000)) == [(30, b"after")]


@pytest.mark.parametrize("offset", [31, 1000, -2])
def test_offsets_beyond_the_high_watermark_or_below_minus_one_are_refused_and_change_nothing(offset: int) -> None:
    fs = MemoryFileSystem()
    log = filled(fs)
    files = segment_files(fs)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(offset)
    assert (log.log_start_offset, segment_files(fs)) == (0, files)


@pytest.mark.parametrize(
    ("policy", "allowed"), [("compact", False), ("compact,delete", True), ("delete,compact", True), ("delete", True)]
)
def test_only_a_cleanup_policy_with_delete_allows_it(policy: str, allowed: bool) -> None:
    log = filled(MemoryFileSystem(), 5, LogConfig(cleanup_policy=policy))
    if allowed:
        assert log.delete_records(3) == 3
    else:
        with pytest.raises(PolicyViolationError, match="can not be deleted due to the configured policy"):
            log.delete_records(3)
        assert log.log_start_offset == 0


def test_the_new_start_is_durable_before_it_is_answered_and_a_reopen_keeps_it() -> None:
    fs = MemoryFileSystem()
    log = filled(fs)  # nothing flushed yet
    assert log.delete_records(12) == 12
    crashed = open_log(fs.crash())  # a power cut right after the answer
    assert (crashed.log_start_offset, crashed.log_end_offset) == (12, 30)
    assert [o for o, _ in records_of(crashed.read(12, 1 << 20)) if o >= 12][0] == 12
    with pytest.raises(OffsetOutOfRangeError):
        crashed.read(11, 1000)
    log.close()
    assert open_log(fs).log_start_offset == 12
    assert fs.open(f"/data/t-0/{CHECKPOINT}", "r").pread(0, 100).split()[1] == b"12"


def test_a_crash_between_the_checkpoint_and_the_deletions_leaves_files_the_next_open_deletes() -> None:
    fs = MemoryFileSystem()
    log = filled(fs)
    bases = segment_files(fs)
    fs.fail("remove", path_endswith=".log")  # the first segment's file stays
    with pytest.raises(KafkaStorageError):
        log.delete_records(bases[2])
    crashed = fs.crash(keep_unsynced_entries=True)
    assert segment_files(crashed) == bases  # the two segments below the new start are still there
    reopened = open_log(crashed)
    assert reopened.log_start_offset == bases[2]
    assert reopened._bases[0] == bases[2]
    assert segment_files(crashed) == bases[2:]  # and the open deleted them, with their index files
    assert [n for n in crashed.listdir("/data/t-0") if n[:20].isdigit() and int(n[:20]) < bases[2]] == []


def test_retention_after_delete_records_starts_from_the_moved_start() -> None:
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=1000, retention_ms=-1, retention_bytes=0)
    log = filled(fs, 30, config)
    bases = segment_files(fs)
    log.delete_records(bases[1] + 2)
    assert log.apply_retention(0) == len(bases) - 2  # every sealed segment left
    assert log.log_start_offset == bases[-1]


def test_a_failed_flush_moves_nothing() -> None:
    fs = MemoryFileSystem()
    log = filled(fs)
    fs.fail("fsync")
    with pytest.raises(KafkaStorageError):
        log.delete_records(12)
    assert log.log_start_offset == 0


def test_deletion_start_follows_kafkas_order_of_checks() -> None:
    assert deletion_start("t-0", HIGH_WATERMARK, 2, 9, "delete") == 9
    assert deletion_start("t-0", 1, 2, 9, "delete") == 2
    with pytest.raises(PolicyViolationError):  # the policy before the offset, as Partition.deleteRecordsOnLeader
        deletion_start("t-0", 100, 2, 9, "compact")
    with pytest.raises(OffsetOutOfRangeError, match="larger than the high watermark 9"):
        deletion_start("t-0", 10, 2, 9, "delete")
    with pytest.raises(OffsetOutOfRangeError, match="The offset -5 for partition t-0 is not valid"):
        deletion_start("t-0", -5, 2, 9, "delete")
