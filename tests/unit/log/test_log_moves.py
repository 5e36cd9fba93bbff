"""Several log.dirs: placement, locking, a partition in two directories, and moves between them
(herd.log.store, herd.log.moves) on the in-memory filesystem, crashed at every step of a move."""

from __future__ import annotations

import pytest
from batches import make_batch, records_of

from herd.config import BrokerConfig, ConfigError
from herd.log.api import LogConfig
from herd.log.fs import DirectoryLockedError, MemoryFileSystem
from herd.log.segments import SegmentLog
from herd.log.store import LogDirNotFoundError, LogDirsError, SegmentStore

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=100)
ROOTS = ["/a", "/b"]


def values(log: SegmentLog) -> list[bytes | None]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        records = records_of(log.read(offset, 1 << 20))
        out += [v for o, v in records if o >= offset]
        offset = records[-1][0] + 1
    return out


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
        "t-0." + "0" * 32 + "-delete"]


# Every filesystem operation of a move that can fail, and how many times the move calls it at most: a failure at
# each call stops the move there (abandoned, or left for the next start); a crash then must leave one good copy.
STEPS = [(op, nth) for op, calls in (("open", 30), ("write", 20), ("fsync", 30), ("rename", 3), ("remove", 3))
         for nth in range(1, calls + 1)]


@pytest.mark.parametrize(("op", "nth"), STEPS)
def test_a_crash_at_any_step_of_a_move_leaves_exactly_one_good_copy(op: str, nth: int) -> None:
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
    for survivor in (fs.crash(), fs.crash(keep_unsynced_entries=True)):
        reopened = SegmentStore(ROOTS, survivor)
        assert reopened.existing_partitions() == [("t", 0)]
        assert values(reopened.open_partition("t", 0, CONFIG)) == expected(15)
        reopened.close()
        assert len(partition_dirs(survivor)) == 1, partition_dirs(survivor)
