"""SegmentLog / SegmentStore behaviour: offsets, reads, rolling, indexes, timestamps, retention, reopen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from batches import (
    BASE_TS,
    GZIP,
    LZ4,
    SNAPPY,
    ZSTD,
    client_batch,
    kio_batch,
    make_batch,
    max_timestamp_of,
    read_all,
    records_of,
    with_attributes,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from herd.log.api import CorruptRecordError, LogConfig, OffsetOutOfRangeError, TimestampOffset
from herd.log.batch import CONTROL_BIT
from herd.log.fs import FileSystem, MemoryFileSystem, OsFileSystem
from herd.log.segments import SegmentLog
from herd.log.store import SegmentStore

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=200)


def open_log(fs: FileSystem, config: LogConfig = SMALL, root: str = "/data") -> SegmentLog:
    return SegmentStore(root, fs).open_partition("t", 0, config)


@pytest.fixture(params=["memory", "os"])
def make_fs(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], tuple[FileSystem, str]]:
    def make() -> tuple[FileSystem, str]:
        if request.param == "memory":
            return MemoryFileSystem(), "/data"
        return OsFileSystem(), str(tmp_path / "data")

    return make


def test_round_trip_assigns_offsets_across_appends(make_fs: Callable[[], tuple[FileSystem, str]]) -> None:
    fs, root = make_fs()
    log = open_log(fs, root=root)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    first = log.append(make_batch([b"a", b"b"]), now_ms=0)
    second = log.append(make_batch([b"c"]), now_ms=0)
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 1, 2)
    assert (second.base_offset, second.last_offset, second.log_append_time) == (2, 2, -1)
    assert log.log_end_offset == 3
    assert read_all(log) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_multi_batch_append_numbers_batches_consecutively() -> None:
    log = open_log(MemoryFileSystem())
    log.append(make_batch([b"x"]), 0)
    result = log.append(make_batch([b"a", b"b"]) + make_batch([b"c"]) + make_batch([b"d", b"e", b"f"]), 0)
    assert (result.base_offset, result.last_offset, result.record_count) == (1, 6, 6)
    assert result.durable_end is None  # nothing to wait for: its caller answers at once
    assert [o for o, _ in read_all(log)] == list(range(7))


def test_a_bad_batch_stores_nothing() -> None:
    log = open_log(MemoryFileSystem())
    bad = bytearray(make_batch([b"b"]))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(make_batch([b"a"]) + bytes(bad), 0)
    assert log.log_end_offset == 0
    assert log.read(0, 1000) == b""


def test_read_returns_stored_bytes_unchanged_apart_from_the_base_offset() -> None:
    log = open_log(MemoryFileSystem())
    batch = make_batch([b"hello"])
    log.append(make_batch([b"first"]), 0)
    log.append(batch, 0)
    stored = log.read(1, 1000)
    assert stored[8:] == batch[8:]
    assert int.from_bytes(stored[:8], "big") == 1


def test_rolls_by_size_and_reads_span_segments(make_fs: Callable[[], tuple[FileSystem, str]]) -> None:
    fs, root = make_fs()
    log = open_log(fs, root=root)
    expected = []
    for i in range(40):
        log.append(make_batch([b"v%03d" % i] * 3), 0)
        expected += [(3 * i + j, b"v%03d" % i) for j in range(3)]
    assert len(log._segments) >= 3
    assert all(s.size <= SMALL.segment_bytes for s in log._segments)
    assert read_all(log) == expected
    assert read_all(log, max_bytes=1) == expected  # one batch at a time (KIP-74)
    for start in range(0, 120, 7):  # every start offset, including ones inside a batch
        assert read_all(log, start)[0] == expected[start]


def test_min_one_returns_an_oversized_first_batch_only_when_asked() -> None:
    log = open_log(MemoryFileSystem())
    big = make_batch([b"x" * 500])
    log.append(big, 0)
    log.append(make_batch([b"y"]), 0)
    assert log.read(0, 10) == log.read(0, len(big))
    assert len(log.read(0, 10)) == len(big)
    assert log.read(0, 10, min_one=False) == b""
    assert len(log.read(0, len(big) + 10, min_one=False)) == len(big)


def test_out_of_range_reads() -> None:
    log = open_log(MemoryFileSystem())
    log.append(make_batch([b"a", b"b"]), 0)
    assert log.read(2, 1000) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)


def first_at_or_after(stamped: list[tuple[int, int]], target: int) -> TimestampOffset | None:
    """Kafka's answer, record by record: the first record in offset order stamped >= `target`."""
    return next((TimestampOffset(o, s) for o, s in stamped if s >= target), None)


def first_max(stamped: list[tuple[int, int]]) -> TimestampOffset | None:
    """Kafka's MAX_TIMESTAMP answer: the first record in offset order holding the largest timestamp."""
    if not stamped:
        return None
    top = max(s for _, s in stamped)
    return next(TimestampOffset(o, s) for o, s in stamped if s == top)


def test_timestamps_lookup_and_max() -> None:
    log = open_log(MemoryFileSystem())
    assert log.max_timestamp() is None and log.offset_for_timestamp(0) is None
    stamps = [BASE_TS + 1000 * i for i in (1, 5, 3, 9, 9, 12)] * 5  # not monotonic, several segments
    stamped: list[tuple[int, int]] = []
    for stamp in stamps:  # each batch: a record 400 ms before its max, then the max
        result = log.append(kio_batch([stamp - 400, stamp], value=b"v" * 40), 0)
        stamped += [(result.base_offset, stamp - 400), (result.last_offset, stamp)]
    assert len(log._segments) > 1
    for target in range(BASE_TS, BASE_TS + 13_000, 100):
        assert log.offset_for_timestamp(target) == first_at_or_after(stamped, target), target
    assert log.max_timestamp() == TimestampOffset(2 * 5 + 1, BASE_TS + 12_000)


def test_timestamp_lookup_finds_the_record_not_the_batch() -> None:
    log = open_log(MemoryFileSystem())
    log.append(kio_batch([BASE_TS + 100, BASE_TS + 1, BASE_TS + 60, BASE_TS + 200, BASE_TS + 60]), 0)
    log.append(kio_batch([BASE_TS + 50, BASE_TS + 300]), 0)
    assert log.offset_for_timestamp(BASE_TS) == TimestampOffset(0, BASE_TS + 100)
    assert log.offset_for_timestamp(BASE_TS + 101) == TimestampOffset(3, BASE_TS + 200)
    assert log.offset_for_timestamp(BASE_TS + 201) == TimestampOffset(6, BASE_TS + 300)
    assert log.offset_for_timestamp(BASE_TS + 301) is None
    assert log.max_timestamp() == TimestampOffset(6, BASE_TS + 300)
    log.append(kio_batch([BASE_TS + 10, BASE_TS + 300, BASE_TS + 300]), 0)  # ties the max: the first one wins
    assert log.max_timestamp() == TimestampOffset(6, BASE_TS + 300)
    log.append(kio_batch([BASE_TS + 10, BASE_TS + 999, BASE_TS + 999]), 0)
    assert log.max_timestamp() == TimestampOffset(11, BASE_TS + 999)


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.lists(st.integers(0, 60), min_size=1, max_size=6), st.sampled_from([0, GZIP, SNAPPY, LZ4, ZSTD])),
        min_size=1, max_size=25,
    ),
    interval=st.sampled_from([1, 200, 4096]),
)  # fmt: skip
def test_timestamp_lookups_match_kafka_record_by_record(batches: list[tuple[list[int], int]], interval: int) -> None:
    """Any mix of codecs, out-of-order and repeated timestamps, segments and index densities, before and
    after a reopen: the answers are Kafka's, record by record."""
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=600, index_interval_bytes=interval)
    store = SegmentStore("/data", fs)
    log = store.open_partition("t", 0, config)
    stamped: list[tuple[int, int]] = []
    for deltas, codec in batches:
        result = log.append(client_batch([BASE_TS + d for d in deltas], codec), 0)
        stamped += [(result.base_offset + i, BASE_TS + d) for i, d in enumerate(deltas)]
        assert log.max_timestamp() == first_max(stamped)
    for _ in range(2):
        for target in range(BASE_TS - 1, BASE_TS + 62):
            assert log.offset_for_timestamp(target) == first_at_or_after(stamped, target), target
        assert log.max_timestamp() == first_max(stamped)
        store.close()
        store = SegmentStore("/data", fs)
        log = store.open_partition("t", 0, config)


def test_timestamp_lookups_skip_segments_removed_by_retention() -> None:
    log = open_log(MemoryFileSystem(), LogConfig(segment_bytes=600, retention_bytes=1200, retention_ms=-1))
    for i in range(20):
        log.append(client_batch([BASE_TS + 1000 * i + 5, BASE_TS + 1000 * i], LZ4), 0)
    assert log.apply_retention(0) > 0
    start = log.log_start_offset
    assert log.offset_for_timestamp(0) == TimestampOffset(start, BASE_TS + 1000 * (start // 2) + 5)
    assert log.max_timestamp() == TimestampOffset(38, BASE_TS + 19_005)


def test_log_append_time_lookups_answer_with_each_batch_first_record() -> None:
    log = open_log(MemoryFileSystem(), LogConfig(message_timestamp_type="LogAppendTime"))
    log.append(client_batch([BASE_TS + 900, BASE_TS + 1], GZIP), now_ms=BASE_TS + 100)
    log.append(client_batch([BASE_TS + 5, BASE_TS + 999, BASE_TS + 7]), now_ms=BASE_TS + 200)
    log.append(client_batch([BASE_TS + 3, BASE_TS]), now_ms=BASE_TS + 200)
    assert log.offset_for_timestamp(0) == TimestampOffset(0, BASE_TS + 100)
    assert log.offset_for_timestamp(BASE_TS + 101) == TimestampOffset(2, BASE_TS + 200)
    assert log.offset_for_timestamp(BASE_TS + 201) is None
    assert log.max_timestamp() == TimestampOffset(2, BASE_TS + 200)


def test_control_batches_take_part_in_timestamp_lookups() -> None:
    """As in Kafka (FileRecords.searchForTimestamp, offsetOfMaxTimestamp), transaction markers are not skipped."""
    log = open_log(MemoryFileSystem())
    log.append(client_batch([BASE_TS]), 0)
    log.append(with_attributes(kio_batch([BASE_TS + 50]), CONTROL_BIT), 0)
    log.append(client_batch([BASE_TS + 20]), 0)
    assert log.offset_for_timestamp(BASE_TS + 1) == TimestampOffset(1, BASE_TS + 50)
    assert log.max_timestamp() == TimestampOffset(1, BASE_TS + 50)


def test_a_batch_whose_records_cannot_be_read_answers_for_itself() -> None:
    """Records are not checked on append; a lookup that meets unreadable ones falls back to the batch header."""
    log = open_log(MemoryFileSystem())
    log.append(client_batch([BASE_TS, BASE_TS + 1]), 0)
    log.append(with_attributes(kio_batch([BASE_TS + 30, BASE_TS + 10]), 5), 0)  # codec 5 does not exist
    assert log.offset_for_timestamp(BASE_TS + 2) == TimestampOffset(2, BASE_TS + 30)
    assert log.max_timestamp() == TimestampOffset(2, BASE_TS + 30)


def test_log_append_time_topics_stamp_batches() -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    log = open_log(MemoryFileSystem(), config)
    result = log.append(make_batch([b"a"]), now_ms=BASE_TS + 5000)
    assert result.log_append_time == BASE_TS + 5000
    stored = log.read(0, 1000)
    assert max_timestamp_of(stored) == BASE_TS + 5000
    assert records_of(stored) == [(0, b"a")]  # kio re-checks the recomputed CRC
    assert log.max_timestamp() == TimestampOffset(0, BASE_TS + 5000)


def test_retention_by_bytes_keeps_the_active_segment() -> None:
    log = open_log(
        MemoryFileSystem(),
        LogConfig(segment_bytes=1000, retention_bytes=1500, retention_ms=-1, cleanup_policy="compact"),
    )
    for _ in range(30):
        log.append(make_batch([b"v" * 100]), 0)
    assert log.apply_retention(now_ms=0) == 0  # compact only: retention deletes nothing, as in Kafka
    log.set_config(LogConfig(segment_bytes=1000, retention_bytes=1500, retention_ms=-1, cleanup_policy=""))
    assert log.apply_retention(now_ms=0) == 0  # no policy (Kafka 4.2, KAFKA-19112): kept for ever
    log.set_config(
        LogConfig(segment_bytes=1000, retention_bytes=1500, retention_ms=-1, cleanup_policy="compact , delete")
    )
    deleted = log.apply_retention(now_ms=0)
    assert deleted > 0
    assert log.size_in_bytes <= 1500 + 1000
    assert log.log_start_offset == log._segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1000)
    assert [o for o, _ in read_all(log)] == list(range(log.log_start_offset, 30))
    log = open_log(MemoryFileSystem(), LogConfig(segment_bytes=1000, retention_bytes=0, retention_ms=-1))
    log.append(make_batch([b"v" * 100]), 0)
    assert log.apply_retention(0) == 0  # only the active segment: never deleted


def test_retention_by_time_persists_the_log_start() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, LogConfig(segment_bytes=1000, retention_ms=60_000))
    for i in range(20):
        log.append(make_batch([b"v" * 100], timestamp_ms=BASE_TS + 10_000 * i), 0)
    assert log.apply_retention(now_ms=BASE_TS) == 0
    now = BASE_TS + 10_000 * 10 + 60_001
    deleted = log.apply_retention(now_ms=now)
    assert deleted > 0
    start = log.log_start_offset
    assert all(now - s.max_timestamp <= 60_000 for s in log._segments[1:-1])
    assert log._segments[0].max_timestamp >= now - 60_000 or len(log._segments) == 1
    lost = open_log(fs.crash(), LogConfig(segment_bytes=1000, retention_ms=60_000))
    assert (lost.log_start_offset, lost.log_end_offset) == (start, start)  # nothing was flushed
    log.flush()
    reopened = open_log(fs.crash(), LogConfig(segment_bytes=1000, retention_ms=60_000))
    assert reopened.log_start_offset == start
    assert [o for o, _ in read_all(reopened)] == list(range(start, 20))


def test_reopen_after_close_keeps_everything(make_fs: Callable[[], tuple[FileSystem, str]]) -> None:
    fs, root = make_fs()
    store = SegmentStore(root, fs)
    log = store.open_partition("orders", 3, SMALL)
    for i in range(50):
        log.append(make_batch([b"%d" % i], timestamp_ms=BASE_TS + 1000 * i), 0)
    before = (read_all(log), log.max_timestamp(), log.offset_for_timestamp(BASE_TS + 20_500))
    store.close()
    store = SegmentStore(root, fs)
    assert store.existing_partitions() == [("orders", 3)]
    log = store.open_partition("orders", 3, SMALL)
    assert (read_all(log), log.max_timestamp(), log.offset_for_timestamp(BASE_TS + 20_500)) == before
    log.append(make_batch([b"more"]), 0)
    assert log.log_end_offset == 51
    store.delete_partition("orders", 3)
    assert store.existing_partitions() == []


def test_flush_policy_by_messages_and_time() -> None:
    log = open_log(MemoryFileSystem(), LogConfig(flush_interval_messages=3, flush_interval_ms=1000))
    log.append(make_batch([b"a", b"b"]), now_ms=10)
    log.maybe_flush(now_ms=20)
    assert log.flushed_offset == 0
    log.append(make_batch([b"c"]), now_ms=30)
    log.maybe_flush(now_ms=30)
    assert log.flushed_offset == 3
    log.append(make_batch([b"d"]), now_ms=100)
    log.maybe_flush(now_ms=1099)
    assert log.flushed_offset == 3
    log.maybe_flush(now_ms=1100)
    assert log.flushed_offset == 4


@settings(max_examples=40, deadline=None)
@given(
    appends=st.lists(st.lists(st.integers(1, 300), min_size=1, max_size=3), min_size=1, max_size=25),
    segment_bytes=st.integers(300, 3000),
    interval=st.integers(0, 1000),
    max_bytes=st.integers(1, 4000),
)
def test_any_append_sequence_reads_back(appends: list[list[int]], segment_bytes: int, interval: int,
                                        max_bytes: int) -> None:  # fmt: skip
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    log = open_log(fs, config)
    expected = []
    for sizes in appends:
        values = [bytes([len(expected) % 251]) * size for size in sizes]
        log.append(make_batch(values), 0)
        expected += list(enumerate(values, start=len(expected)))
    assert read_all(log, max_bytes=max_bytes) == expected
    for start in range(0, len(expected), 3):
        assert read_all(log, start, max_bytes)[0] == expected[start]
    log.close()
    assert read_all(open_log(fs, config), max_bytes=max_bytes) == expected
