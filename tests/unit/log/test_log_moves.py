"""Several log.dirs: placement, locking, a partition in two directories, and moves between them
(herd.log.store, herd.log.moves) on the in-memory filesystem, crashed at every step of a move."""

from __future__ import annotations

import pytest
from batches import make_batch, read_all

from herd.config import BrokerConfig, ConfigError
from herd.log.api import LogConfig
from herd.log.fs import DirectoryLockedError, MemoryFileSystem
from herd.log.segments import SegmentLog
from herd.log.store import LogDirNotFoundError, LogDirsError, SegmentStore

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=100)
ROOTS = ["/a", "/b"]


def values(log: SegmentLog) -> list[bytes | None]:
    return [v for _, v in read_all(log)]


def fill(log: SegmentLog, start: int, count: int) -> None:
    for i in range(start, start + count):
        log.append(make_batch([b"r%d" % i, b"x" * 200]), 0)


def expected(count: int) -> list[bytes]:
    return [v for i in range(count) for v in (b"r%d" % i, b"x" * 200)]


def partition_dirs(fs: MemoryFileSystem) -> list[str]:
    return sorted(f"{root}/{name}" for root in ROOTS for name in fs.listdir(root) if name.startswith("t-"))


def test_log_dirs_is_a_comma_separated_list_without_repeats(tmp_path) -> None:
    config = BrokerConfig.from_properties({"log.dirs": f"{tmp_path}/a, {tmp_path}/b"})
    assert config.log_dirs == [f"{tmp_path}/a", f"{tmp_path}/b"]
    with pytest.raises(ConfigError, match="a directory is named twice"):
        BrokerConfig.from_properties({"log.dirs": f"{tmp_path}/a,{tmp_path}/x/../a"})


def test_new_partitions_go_to_the_root_with_the_fewest_the_first_on_a_tie() -> None:
    fs = MemoryFileSystem()
    store = SegmentStore(ROOTS, fs)
    for index in range(3):
        store.open_partition("t", index, CONFIG)
    assert [store.log_dir("t", i) for i in range(3)] == ["/a", "/b", "/a"]
    store.close()
    again = SegmentStore(["/b", "/a"], fs)  # found wherever they are; the next goes where fewer are
    assert again.existing_partitions() == [("t", 0), ("t", 1), ("t", 2)]
    again.open_partition("u", 0, CONFIG)
    assert again.log_dir("u", 0) == "/b"


def test_a_partition_in_two_roots_refuses_the_store_naming_both_and_deletes_neither() -> None:
    fs = MemoryFileSystem()
    store = SegmentStore(ROOTS, fs)
    fill(store.open_partition("t", 0, CONFIG), 0, 3)
    store.close()
    fs.makedirs("/b/t-0")  # a hand edit
    with pytest.raises(LogDirsError, match="Duplicate log directories for t-0 are found in both /a/t-0 and /b/t-0"):
        SegmentStore(ROOTS, fs)
    assert partition_dirs(fs) == ["/a/t-0", "/b/t-0"] and fs.listdir("/a/t-0")


def test_every_root_is_locked_and_a_refused_store_keeps_no_lock(tmp_path) -> None:
    one, two, three = (str(tmp_path / n) for n in ("one", "two", "three"))
    first = SegmentStore([one, two])
    with pytest.raises(DirectoryLockedError, match="two"):
        SegmentStore([three, two])
    SegmentStore([three]).close()  # the refused store released the lock it had taken on `three`
    first.close()
    SegmentStore([two, one]).close()


def test_a_move_keeps_serving_and_loses_no_record_appended_during_it() -> None:
    fs = MemoryFileSystem()
    store = SegmentStore(ROOTS, fs)
    log = store.open_partition("t", 0, CONFIG)
    fill(log, 0, 20)
    with pytest.raises(LogDirNotFoundError):
        store.start_move("t", 0, "/elsewhere")
    assert store.start_move("t", 0, "/a") is None  # already there
    move = store.start_move("t", 0, "/b")
    assert move is not None and store.start_move("t", 0, "/b") is None  # already under way
    fill(log, 20, 5)  # while the sealed segments are copied
    move.copy_sealed()
    assert [p.is_future for p in store.stored_partitions()["/b"]] == [True]
    fill(log, 25, 5)
    assert move.finish() is True
    assert store.log_dir("t", 0) == "/b" and store.stored_partitions()["/a"] == []
    assert values(log) == expected(30)  # the same object goes on from the new directory
    fill(log, 30, 2)
    store.close()
    assert partition_dirs(fs) == ["/b/t-0"] and fs.listdir("/a") == []
    assert values(SegmentStore(ROOTS, fs).open_partition("t", 0, CONFIG)) == expected(32)


def test_a_segment_retention_deletes_during_the_copy_is_left_out_of_it() -> None:
    fs = MemoryFileSystem()
    store = SegmentStore(ROOTS, fs)
    log = store.open_partition("t", 0, LogConfig(segment_bytes=1500, retention_bytes=2000))
    fill(log, 0, 20)
    move = store.start_move("t", 0, "/b")
    assert move is not None
    log.apply_retention(0)
    start = log.log_start_offset
    move.copy_sealed()
    assert move.finish() is True
    assert start > 0 and log.log_start_offset == start
    assert all(int(name[:20]) >= start for name in fs.listdir("/b/t-0") if name.endswith(".log"))
    assert values(log) == expected(20)[start:]


def test_deleting_a_partition_during_its_move_leaves_no_copy_that_a_crash_could_revive() -> None:
    fs = MemoryFileSystem()
    store = SegmentStore(ROOTS, fs)
    fill(store.open_partition("t", 0, CONFIG), 0, 10)
    move = store.start_move("t", 0, "/b")
    assert move is not None
    move.copy_sealed()
    marker = store.mark_deleted("t", 0, "0" * 32)
    store.sync()
    assert marker is not None and move.finish() is False
    after = SegmentStore(ROOTS, fs.crash())
    assert after.existing_partitions() == [] and [n for n, _ in after.marked_for_deletion()] == [
        "t-0." + "0" * 32 + "-delete"
    ]


# Every filesystem operation of a move that can fail, and how many times the move below calls it (from
# `copy_sealed` to the end of `finish`): a failure at each call stops the move there (abandoned, or left for the
# next start); a crash then must leave one good copy. That the failure fired is checked in each case; that there
# is no further call, by test_the_move_calls_each_operation_exactly_as_often_as_steps_says. `remove` is not
# called by this move (its copy holds no file the source lost): see the retention case after these.
CALLS = {"open": 48, "write": 16, "fsync": 22, "rename": 3}
STEPS = [(op, nth) for op, calls in CALLS.items() for nth in range(1, calls + 1)]


def move_failing_at(op: str, nth: int) -> MemoryFileSystem:
    """A partition moved from /a to /b (12 batches flushed before the move starts, 3 during the copy) with the
    `nth` call of `op` from the copy on failing; the filesystem after `finish`."""
    fs = MemoryFileSystem()
    store = SegmentStore(ROOTS, fs)
    log = store.open_partition("t", 0, CONFIG)
    fill(log, 0, 12)
    log.flush()
    move = store.start_move("t", 0, "/b")
    assert move is not None
    fill(log, 12, 3)
    log.flush()
    fs.fail(op, nth)
    error = None
    try:
        move.copy_sealed()
    except OSError as failed:
        error = failed
    move.finish(error)
    return fs


def assert_one_good_copy(fs: MemoryFileSystem, values_expected: list[bytes]) -> None:
    """After a crash (with the durable directory entries, and with the live ones) exactly one copy of the
    partition is found and it holds `values_expected`."""
    for survivor in (fs.crash(), fs.crash(keep_unsynced_entries=True)):
        reopened = SegmentStore(ROOTS, survivor)
        assert reopened.existing_partitions() == [("t", 0)]
        assert values(reopened.open_partition("t", 0, CONFIG)) == values_expected
        reopened.close()
        assert len(partition_dirs(survivor)) == 1, partition_dirs(survivor)


@pytest.mark.parametrize(("op", "nth"), STEPS)
def test_a_crash_at_any_step_of_a_move_leaves_exactly_one_good_copy(op: str, nth: int) -> None:
    fs = move_failing_at(op, nth)
    assert op not in fs.faults.countdown, f"call {nth} of {op} never came: the failure was not injected"
    assert_one_good_copy(fs, expected(15))


@pytest.mark.parametrize("op", sorted(CALLS))
def test_the_move_calls_each_operation_exactly_as_often_as_steps_says(op: str) -> None:
    fs = move_failing_at(op, CALLS[op] + 1)
    assert fs.faults.countdown == {op: 1}  # the last call came (the countdown went down to 1), no call after it
    assert partition_dirs(fs) == ["/b/t-0"]  # so nothing failed: the move completed


@pytest.mark.parametrize("nth", range(1, 7))
def test_a_failed_remove_of_a_file_retention_deleted_from_the_copy_abandons_the_move_and_a_crash_keeps_one_copy(
    nth: int,
) -> None:
    """Retention deletes two sealed segments (three files each) after they were copied: `finish` removes those
    six files from the copy; a failure at each removal abandons the move, and the partition stays in /a."""
    fs = MemoryFileSystem()
    store = SegmentStore(ROOTS, fs)
    log = store.open_partition("t", 0, LogConfig(segment_bytes=1500, index_interval_bytes=100, retention_bytes=2000))
    fill(log, 0, 20)
    log.flush()
    move = store.start_move("t", 0, "/b")
    assert move is not None
    move.copy_sealed()
    log.apply_retention(0)
    start = log.log_start_offset
    assert start > 0
    fs.fail("remove", nth)
    assert move.finish() is False
    assert "remove" not in fs.faults.countdown
    assert partition_dirs(fs) == ["/a/t-0"]
    assert values(log) == expected(20)[start:]
    assert_one_good_copy(fs, expected(20)[start:])
