"""Compaction of segment logs holding transactions (herd.log.compaction, Kafka's Cleaner with its
CleanedTransactionMetadata): records of aborted transactions go and never hide a committed record of their key,
a pass stops at the first open transaction, COMMIT markers go once their data is gone and delete.retention.ms
passed, the last batch of an active producer stays, ABORT markers and the `.txnindex` entries stay, through the
swap and a crash at any step of it. On the in-memory filesystem; batches built by kafka-python."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.records.readers import read_batch

from herd.log import compaction
from herd.log.api import KafkaStorageError, LogConfig
from herd.log.batch import CONTROL_BIT, iter_headers
from herd.log.fs import MemoryFileSystem
from herd.log.records import control_marker
from herd.log.segments import SegmentLog

DIR = "/data/__consumer_offsets-0"
T0 = 1_700_000_000_000
DAY = 86_400_000
P, Q, R = 1000, 2000, 3000
CONFIG = LogConfig(segment_bytes=10_000, index_interval_bytes=100, cleanup_policy="compact")


def keyed(pairs: list[tuple[bytes, bytes | None]], pid: int = -1, epoch: int = -1, seq: int = -1,
          ts: int = T0) -> bytes:  # fmt: skip
    """One batch of keyed records; with `pid`, a transactional producer's."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=pid >= 0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 20,
    )
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


def open_log(fs: MemoryFileSystem, snapshots: bool = True) -> SegmentLog:
    log = SegmentLog.open(fs, DIR, "__consumer_offsets", 0, CONFIG)
    if snapshots:  # the latest snapshot is at the active segment: lost index entries are not rebuilt
        log.snapshot_source = list
    return log


def whole(log: SegmentLog) -> bytes:
    """Every batch of the log, end to end (a read stops at its segment's end)."""
    out, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 24)
        out += data
        offset = [h for h in iter_headers(data)][-1].last_offset + 1
    return out


def contents(log: SegmentLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record, as a read_uncommitted consumer reads them."""
    out, data, pos = [], whole(log), 0
    while pos < len(data):
        batch, size = read_batch(data, pos)
        if not batch.attributes & CONTROL_BIT:
            out += [(r.offset, r.key, r.value) for r in batch.records]
        pos += size
    return out


def batches(log: SegmentLog) -> list[tuple[int, int, int, object]]:
    """(base offset, producer id, record count, marker or None) of every batch."""
    data = whole(log)
    return [(h.base_offset, h.producer_id, h.record_count, control_marker(data, h)) for h in iter_headers(data)]


def committed_view(log: SegmentLog) -> dict[bytes, bytes | None]:
    """Latest value per key as a read_committed reader (the group coordinator's loader) sees the log: aborted
    transactions skipped, open ones left out, a committed one's records applied at its marker unless a later
    record of the key (by offset) is applied already (Kafka's OffsetMetadataManager.replayEndTransactionMarker:
    "we always keep the most recent committed offset", herd.coordinator.txn_offsets)."""
    state: dict[bytes, tuple[bytes | None, int]] = {}
    pending: dict[int, list[tuple[bytes, bytes | None, int]]] = {}
    data, pos = whole(log), 0
    while pos < len(data):
        batch, size = read_batch(data, pos)
        pos += size
        pid = batch.producer_id
        if batch.attributes & CONTROL_BIT:
            marker = control_marker(data[pos - size : pos])
            if marker is not None:
                for key, value, offset in pending.pop(pid, []) if marker[0] else []:
                    if offset > state.get(key, (None, -1))[1]:
                        state[key] = value, offset
                pending.pop(pid, None)
        elif batch.attributes & 0x10:
            pending.setdefault(pid, []).extend((r.key, r.value, r.offset) for r in batch.records)
        else:
            for r in batch.records:
                state[r.key] = r.value, r.offset
                if r.value is None:  # a tombstone: the key's pending values go too (Kafka's replay of a deletion)
                    del state[r.key]
                    for values in pending.values():
                        values[:] = [v for v in values if v[0] != r.key]
    return {key: value for key, (value, _) in state.items()}


def compact(log: SegmentLog, now: int = T0, retention: int = DAY) -> compaction.Cleaned | None:
    p = compaction.plan(log, now, retention, force=True)
    if p is None:
        return None
    cleaned = compaction.clean(p)
    compaction.install(log, cleaned)
    return cleaned


def transaction(log: SegmentLog, pid: int, pairs: list[tuple[bytes, bytes | None]], commit: bool | None,
                seq: int = 0, ts: int = T0) -> int:  # fmt: skip
    """A transactional batch of `pid`, then its marker unless `commit` is None (left open); its base offset."""
    base = log.append(keyed(pairs, pid, 0, seq, ts), ts).base_offset
    if commit is not None:
        log.append_control(pid, 0, commit, 0, ts)
    return base


def test_an_aborted_commit_never_hides_the_committed_one_and_goes() -> None:
    """The bug of bugs17.md (C 13:25, A 13:40): the aborted K=2 was kept as the latest of K and K=1 dropped."""
    fs = MemoryFileSystem()
    log = open_log(fs)
    log.append(keyed([(b"K", b"1"), (b"L", b"1")]), T0)
    first = transaction(log, P, [(b"K", b"2")], commit=False)
    transaction(log, Q, [(b"L", b"2")], commit=True)
    log.roll()
    log.append(keyed([(b"M", b"1")]), T0)
    log.flush()
    before = committed_view(log)
    assert compact(log) is not None
    assert committed_view(log) == before == {b"K": b"1", b"L": b"2", b"M": b"1"}
    assert (first, b"K", b"2") not in contents(log)
    markers = [(pid, m) for _, pid, _, m in batches(log) if m is not None]
    assert markers == [(P, (False, 0)), (Q, (True, 0))]  # Q's data is there: its marker too
    assert log.aborted_transactions(0, log.log_end_offset) == [(P, first)]
    reopened = open_log(fs.crash())
    assert committed_view(reopened) == before
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == [(P, first)]


def test_a_pass_stops_at_the_first_open_transaction() -> None:
    log = open_log(MemoryFileSystem())
    log.append(keyed([(b"K", b"1")]), T0)
    log.roll()
    first = transaction(log, P, [(b"K", b"2")], commit=None)  # open: the LSO
    log.roll()
    log.append(keyed([(b"K", b"3")]), T0)
    log.roll()
    log.flush()
    assert log.last_stable_offset == first
    p = compaction.plan(log, T0, force=True)
    assert [s.base for s in p.segments] == [0]  # the segments at or after the LSO wait
    compaction.install(log, compaction.clean(p))
    assert contents(log) == [(0, b"K", b"1"), (first, b"K", b"2"), (first + 1, b"K", b"3")]
    log.append_control(P, 0, False, 0, T0)
    log.roll()
    log.flush()
    compact(log)  # now the whole range: K=3 is the latest, K=1 goes, the aborted K=2 too
    assert contents(log) == [(first + 1, b"K", b"3")]


def test_commit_markers_go_after_their_data_and_delete_retention_but_a_producers_last_batch_stays() -> None:
    log = open_log(MemoryFileSystem())
    one = transaction(log, P, [(b"K", b"1")], commit=True)
    two = transaction(log, P, [(b"K", b"2")], commit=True, seq=1)
    log.append(keyed([(b"K", b"3")]), T0)
    log.roll()
    log.flush()
    compact(log)  # P's records are all replaced; its markers stay while this pass saw their data
    assert [b for b in batches(log) if b[1] == P] == [(one + 1, P, 1, (True, 0)), (two + 1, P, 1, (True, 0))]
    compact(log, now=T0 + DAY - 1)  # no data left, but delete.retention.ms has not passed
    assert len([b for b in batches(log) if b[1] == P]) == 2
    compact(log, now=T0 + DAY)  # the first goes; the second is P's last batch and P is active: it stays
    assert [b for b in batches(log) if b[1] == P] == [(two + 1, P, 1, (True, 0))]
    assert committed_view(log) == {b"K": b"3"}


def test_the_last_batch_of_an_active_producer_stays_and_keeps_its_epoch_across_a_reload() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, snapshots=False)  # the transaction state is rebuilt from the batches at open
    for seq in range(2):
        log.append(keyed([(b"K", b"%d" % seq)], P, 3, seq), T0)
        log.append_control(P, 3, True, 0, T0)
    log.append(keyed([(b"K", b"3")]), T0)
    log.roll()
    log.flush()
    compact(log, now=T0 + 2 * DAY)
    compact(log, now=T0 + 2 * DAY)
    assert [b[1:] for b in batches(log)] == [(P, 1, (True, 0)), (-1, 1, None)]
    assert committed_view(log) == {b"K": b"3"}
    assert open_log(fs.crash(), snapshots=False).transactions.producer_epoch(P) == 3


def aborted_history(log: SegmentLog) -> list[tuple[int, int]]:
    """Segments of 4 aborted and committed transactions each over the same keys; the aborted ones."""
    aborted = []
    for i in range(12):
        first = transaction(log, (P, Q, R)[i % 3], [(b"K%d" % (i % 2), b"v%d" % i)], commit=i % 4 != 1, seq=i)
        log.append(keyed([(b"X", b"%d" % i)]), T0)
        if i % 4 == 1:
            aborted.append(((P, Q, R)[i % 3], first))
        if i % 4 == 3:
            log.roll()
    log.append(keyed([(b"X", b"end")]), T0)
    log.flush()
    return aborted


@pytest.mark.parametrize("op", ["rename", "remove", "fsync"])
def test_the_txnindex_survives_a_crash_at_every_step_of_the_swap(op: str) -> None:
    steps = 0
    while True:
        steps += 1
        fs = MemoryFileSystem()
        log = open_log(fs)
        aborted = aborted_history(log)
        assert len(log._bases) == 4 and log.aborted_transactions(0, log.log_end_offset) == aborted
        view = committed_view(log)
        cleaned = compaction.clean(compaction.plan(log, T0, force=True))
        assert [g.replaced for g in cleaned.groups] == [(0, log._bases[1], log._bases[2])]
        fs.fail(op, steps)
        try:
            compaction.install(log, cleaned)
            finished = True
        except KafkaStorageError:
            finished = False
        for keep in (False, True):
            reopened = open_log(fs.crash(keep_unsynced_entries=keep))
            assert reopened.aborted_transactions(0, reopened.log_end_offset) == aborted
            assert committed_view(reopened) == view
            names = reopened.filesystem.listdir(DIR)
            assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
            indexes = sorted(n for n in names if n.endswith(".txnindex"))
            assert all(n[:20] + ".log" in names for n in indexes)
        if finished:
            break
    assert steps > 3
    assert log.aborted_transactions(0, log.log_end_offset) == aborted
    assert [n for n in fs.listdir(DIR) if n.endswith(".txnindex")] == [f"{0:020d}.txnindex"]


Step = tuple[str, int, int]  # (what, producer or key, value)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["plain", "delete", "txn", "commit", "abort", "roll"]), st.integers(0, 2), st.integers(0, 3)
        ),
        min_size=1,
        max_size=40,
    ),
    st.lists(st.integers(0, 2 * DAY), min_size=1, max_size=3),
)
def test_any_history_with_transactions_compacts_to_what_a_read_committed_reader_saw(
    steps: list[Step], passes: list[int]
) -> None:
    """Plain commits and deletions, transactions of three producers (committed, aborted or left open) over four keys,
    rolls
    anywhere; then passes at various times and a crash: a read_committed reader (the loader) sees the same
    state, every aborted transaction is still indexed with its marker, and the open ones are untouched."""
    fs = MemoryFileSystem()
    log = open_log(fs)
    seqs = [0, 0, 0]
    for i, (what, who, key) in enumerate(steps):
        pid = (P, Q, R)[who]
        if what in ("plain", "delete"):
            log.append(keyed([(b"K%d" % key, b"%d" % i if what == "plain" else None)]), T0)
        elif what == "txn":
            log.append(keyed([(b"K%d" % key, b"%d" % i), (b"K%d" % ((key + 1) % 4), b"%d" % i)], pid, 0, seqs[who]), T0)
            seqs[who] += 2
        elif what in ("commit", "abort") and any(p == pid for p, _ in log.transactions.ongoing()):
            log.append_control(pid, 0, what == "commit", 0, T0)
        elif what == "roll":
            log.roll()
    log.append(keyed([(b"end", b"")]), T0)
    log.roll()
    log.flush()
    view, aborted, ongoing = (
        committed_view(log),
        log.aborted_transactions(0, log.log_end_offset),
        log.transactions.ongoing(),
    )
    open_from = min((first for _, first in ongoing), default=log.log_end_offset)
    tail = [b for b in batches(log) if b[0] >= open_from]
    for now in sorted(passes):
        compact(log, T0 + now)
        assert committed_view(log) == view
    reopened = open_log(fs.crash())
    for each in (log, reopened):
        assert committed_view(each) == view
        assert each.aborted_transactions(0, each.log_end_offset) == aborted
        assert each.transactions.ongoing() == ongoing
        assert [b for b in batches(each) if b[0] >= open_from] == tail
        markers = {(pid, b) for b, pid, _, m in batches(each) if m == (False, 0)}
        assert len(markers) == len(aborted)
