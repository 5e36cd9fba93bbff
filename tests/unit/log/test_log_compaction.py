"""Compaction of segment logs (herd.log.compaction): what stays, offsets and reads afterwards, tombstones,
the dirty ratio, cancellation, and a crash at every step of the swap on the fault-injecting filesystem."""

from __future__ import annotations

import datetime
import io
import posixpath

import pytest
from batches import GZIP, with_attributes
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from herd.log import compaction
from herd.log.api import KafkaStorageError, LogConfig
from herd.log.fs import MemoryFileSystem
from herd.log.segments import SegmentLog
from herd.log.store import SegmentStore

T0 = 1_700_000_000_000
DAY = 86_400_000
CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100, cleanup_policy="compact")
Pairs = list[tuple[bytes, bytes | None]]


def kv_batch(pairs: Pairs, timestamp_ms: int = T0) -> bytes:
    stamp = TZAwareMicros.parse(datetime.datetime.fromtimestamp(timestamp_ms // 1000, datetime.UTC))
    records = tuple(
        Record(attributes=i8(0), timestamp=stamp, offset=i64(i), key=k, value=v, headers=())
        for i, (k, v) in enumerate(pairs)
    )
    buffer = io.BytesIO()
    write_new_batch(
        buffer,
        NewRecordBatch(
            producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1), records=records, attributes=i16(0)
        ),
    )
    return buffer.getvalue()


def open_log(fs: MemoryFileSystem, config: LogConfig = CONFIG) -> SegmentLog:
    return SegmentStore("/data", fs).open_partition("__consumer_offsets", 0, config)


def contents(log: SegmentLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, read through the log as a consumer would."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        pos = 0
        while pos < len(data):
            batch, size = read_batch(data, pos)
            out += [(r.offset, r.key, r.value) for r in batch.records if r.offset >= offset]
            offset = batch.base_offset + batch.last_offset_delta + 1
            pos += size
    return out


def latest(entries: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    state: dict[bytes | None, bytes | None] = {}
    for _, key, value in entries:
        state[key] = value
    return state


def live(entries: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes]:
    return {k: v for k, v in latest(entries).items() if v is not None}


def fill(log: SegmentLog, rounds: int = 30, keys: int = 4, tombstone_every: int = 0, ts: int = T0) -> None:
    """`rounds` batches, each setting every key; with `tombstone_every`, every n-th round deletes key 0."""
    for r in range(rounds):
        pairs: Pairs = [(b"k%d" % k, b"r%d-%d" % (r, k)) for k in range(keys)]
        if tombstone_every and r % tombstone_every == 0:
            pairs[0] = (b"k0", None)
        log.append(kv_batch(pairs, ts), 0)
    log.flush()


def compact(log: SegmentLog, now: int = T0, retention: int = DAY) -> compaction.Cleaned | None:
    p = compaction.plan(log, now, retention, force=True)
    if p is None:
        return None
    cleaned = compaction.clean(p)
    compaction.install(log, cleaned)
    return cleaned


def test_keeps_the_latest_record_of_every_key_and_every_offset_where_it_was() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    fill(log)
    before = contents(log)
    end, active = log.log_end_offset, log._segments[-1]
    segments_before = len(log._segments)
    cleaned = compact(log)
    after = contents(log)
    assert latest(after) == latest(before) and log.log_end_offset == end and log._segments[-1] is active
    assert set(after) <= set(before)  # offsets never move
    sealed_end = log._bases[-1]
    assert [e for e in after if e[0] < sealed_end] == [
        e for e in before if e[0] < sealed_end and max(o for o, k, _ in before if k == e[1] and o < sealed_end) == e[0]
    ]
    assert cleaned.stats.records_kept < cleaned.stats.records_read
    assert contents(open_log(fs.crash())) == after  # and it is durable
    compact(log)  # segments are grouped by their input size: the small cleaned ones now merge
    assert len(log._segments) < segments_before and contents(log) == after


def test_tombstones_stay_for_delete_retention_then_go_with_what_they_deleted() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    fill(log, rounds=30)
    log.append(kv_batch([(b"k0", None)], T0), 0)
    for _ in range(8):
        log.append(kv_batch([(b"pad", b"x" * 100)], T0), 0)  # seal the tombstone's segment
    log.flush()
    compact(log, now=T0 + DAY - 1)
    assert (b"k0", None) in {(k, v) for _, k, v in contents(log)}
    compact(log, now=T0 + DAY)
    entries = contents(log)
    assert b"k0" not in {k for _, k, _ in entries}
    assert live(entries) == live(contents(open_log(fs.crash())))


def test_a_compacted_log_recovers_without_a_checkpoint_by_scanning_every_segment() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    fill(log, tombstone_every=3)
    compact(log)
    after = contents(log)
    crashed = fs.crash()
    del crashed.files["/data/__consumer_offsets-0/partition.checkpoint"]
    for path in [p for p in crashed.files if p.endswith(".index")]:
        crashed.files[path].data[:] = b"bad"  # broken indexes are rebuilt by scanning
    reopened = open_log(crashed)
    assert contents(reopened) == after and reopened.log_end_offset == log.log_end_offset


def test_reads_at_an_offset_compaction_removed_get_the_next_batch() -> None:
    log = open_log(MemoryFileSystem())
    fill(log)
    compact(log)
    kept = [o for o, _, _ in contents(log)]
    removed = next(o for o in range(kept[-1]) if o not in kept)
    data = log.read(removed, 1 << 20)
    first, _ = read_batch(data, 0)
    assert first.base_offset + first.last_offset_delta >= removed


def test_timestamp_lookups_after_compaction() -> None:
    log = open_log(MemoryFileSystem())
    for i in range(20):
        log.append(kv_batch([(b"k%d" % (i % 3), b"v" * 60)], T0 + 1000 * i), 0)
    log.flush()
    compact(log)
    found = log.offset_for_timestamp(T0 + 15_500)
    assert found is not None and found.timestamp >= T0 + 15_500
    assert log.max_timestamp().timestamp == T0 + 19_000


def test_the_dirty_ratio_decides_when_to_clean() -> None:
    log = open_log(MemoryFileSystem())
    assert compaction.plan(log, T0) is None  # nothing sealed
    fill(log)
    p = compaction.plan(log, T0)
    assert p is not None
    compaction.install(log, compaction.clean(p))
    assert log.cleaner_offset == log._bases[-1] and compaction.plan(log, T0) is None
    fill(log, rounds=60)  # more dirty bytes than clean ones
    assert compaction.plan(log, T0) is not None


def gzip_batch(pairs: Pairs) -> bytes:
    """A gzip batch as kafka-python's producer builds it."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=GZIP,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=T0, key=key, value=value, headers=[])
    return bytes(builder.build())


def test_compressed_batches_are_rewritten_uncompressed_and_control_batches_stay() -> None:
    log = open_log(MemoryFileSystem())
    log.append(gzip_batch([(b"a", b"old"), (b"b", b"kept")]), 0)
    log.append(kv_batch([(b"a", b"new")]), 0)
    log.append(with_attributes(kv_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")]), 0x20), 0)
    for _ in range(8):
        log.append(kv_batch([(b"pad", b"x" * 100)]), 0)
    log.flush()
    compact(log)
    entries = contents(log)
    assert [(o, k, v) for o, k, v in entries if k in (b"a", b"b")] == [(1, b"b", b"kept"), (2, b"a", b"new")]
    assert any(o == 3 for o, _, _ in entries)  # the control batch
    assert log.read(0, 1 << 20)[21:23] == b"\x00\x00"  # the rewritten batch is no longer compressed


def test_a_cancelled_pass_leaves_nothing_behind() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    fill(log)
    before = contents(log)
    p = compaction.plan(log, T0, force=True)
    p.cancelled.set()
    with pytest.raises(compaction.CompactionCancelled):
        compaction.clean(p)
    assert not [f for f in fs.files if f.endswith((".cleaned", ".swap"))]
    assert contents(log) == before


def test_a_group_whose_segments_changed_is_not_installed() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    fill(log)
    compact(log)  # small cleaned segments, which the next pass merges
    stale = compaction.clean(compaction.plan(log, T0, force=True))
    assert any(len(g.replaced) > 1 for g in stale.groups)
    compact(log)  # another pass merged them first
    before = contents(log)
    assert compaction.install(log, stale) == 0 and contents(log) == before
    assert not [f for f in fs.files if f.endswith((".cleaned", ".swap"))]


@pytest.mark.parametrize("op", ["rename", "remove", "fsync"])
def test_a_crash_at_every_step_of_the_swap_leaves_the_old_or_the_new_log(op: str) -> None:
    steps = 0
    while True:
        steps += 1
        fs = MemoryFileSystem()
        log = open_log(fs)
        fill(log, tombstone_every=4)
        before = contents(log)
        cleaned = compaction.clean(compaction.plan(log, T0, force=True))
        fs.fail(op, steps)
        try:
            compaction.install(log, cleaned)
            finished = True
        except KafkaStorageError:
            finished = False
        for keep in (False, True):  # directory entries as of the last directory fsync, or as they were
            reopened = open_log(fs.crash(keep_unsynced_entries=keep))
            recovered = contents(reopened)
            assert latest(recovered) == latest(before)
            assert set(recovered) <= set(before)
            assert not [f for f in reopened.filesystem.files if f.endswith((".cleaned", ".swap"))]
        if finished:
            break
    assert steps > 3


def test_a_crash_while_cleaning_leaves_the_log_as_it_was() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    fill(log)
    before = contents(log)
    p = compaction.plan(log, T0, force=True)
    fs.fail("fsync", 2)
    with pytest.raises(OSError):
        compaction.clean(p)
    fs.fail("fsync", 1)  # a pass whose files were written but never installed
    try:
        compaction.clean(p)
    except OSError:
        pass
    reopened = open_log(fs.crash(keep_unsynced_entries=True))
    assert contents(reopened) == before
    assert not [f for f in fs.crash().files if f.endswith(".swap")]


ops = st.lists(st.tuples(st.integers(0, 5), st.none() | st.binary(min_size=1, max_size=40)), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ops, st.integers(0, 3)), min_size=1, max_size=40), st.integers(0, 3))
def test_any_history_compacts_to_the_same_state(
    batches: list[tuple[list[tuple[int, bytes | None]], int]], passes: int
) -> None:
    """The model: the latest value of every key. Tombstones older than delete.retention.ms may go."""
    log = open_log(MemoryFileSystem())
    for i, (pairs, age_days) in enumerate(batches):
        log.append(kv_batch([(b"k%d" % k, v) for k, v in pairs], T0 + 1000 * i - age_days * DAY), 0)
        if i % 3 == 0:
            log.flush()
    log.flush()
    before = contents(log)
    for _ in range(passes + 1):
        compact(log, now=T0)
    after = contents(log)
    assert live(after) == live(before)
    assert {o: (k, v) for o, k, v in after}.items() <= {o: (k, v) for o, k, v in before}.items()
    assert contents(open_log(log.filesystem.crash())) == after


def test_cleaned_files_are_named_after_the_first_segment_of_their_group() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    fill(log)
    p = compaction.plan(log, T0, force=True)
    cleaned = compaction.clean(p)
    names = sorted(posixpath.basename(f) for f in fs.files if f.endswith(".cleaned"))
    assert names and all(n[:20] in {"%020d" % g.base for g in cleaned.groups} for n in names)
