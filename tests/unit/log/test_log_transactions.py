"""Transactions in the embedded log (herd.log.transactions in herd.log.segments): markers as control batches, the
last stable offset, the aborted-transaction index in `.txnindex` files, and all of it after a restart or a
crash. On the in-memory filesystem; control batches are read back by kafka-python (the oracle)."""

from __future__ import annotations

import struct

import pytest
from batches import idempotent_batch, make_batch
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from herd.log import producer_snapshots
from herd.log.api import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    LogConfig,
    ProducerBatch,
    TransactionCoordinatorFencedError,
)
from herd.log.batch import parse_header
from herd.log.fs import MemoryFileSystem, read_whole
from herd.log.records import control_batch, control_marker
from herd.log.segments import SegmentLog

DIR = "/data/t-0"
P, Q = 1000, 2000


def open_log(fs: MemoryFileSystem, **config: int) -> SegmentLog:
    return SegmentLog.open(fs, DIR, "t", 0, LogConfig(**config))


def txn(log: SegmentLog, pid: int, seq: int, count: int = 2, epoch: int = 0) -> int:
    """Append a transactional batch of `pid`; its base offset."""
    return log.append(idempotent_batch(pid, epoch, seq, count, transactional=True), 0).base_offset


def plain(log: SegmentLog, n: int = 1) -> None:
    log.append(make_batch([b"x"] * n), 0)


def txn_index(fs: MemoryFileSystem, base: int) -> list[tuple[int, ...]]:
    data = read_whole(fs, f"{DIR}/{base:020d}.txnindex")
    return [entry for entry in struct.iter_unpack(">hqqqq", data)]


def test_a_marker_is_a_control_batch_as_kafka_writes_it() -> None:
    batch = DefaultRecordBatch(bytearray(control_batch(P, 3, True, 7, 1234, partition_leader_epoch=5)))
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (P, 3, -1)
    (record,) = list(batch)
    assert (record.key, record.value, record.timestamp) == (b"\0\0\0\1", b"\0\0\0\0\0\7", 1234)
    assert control_marker(control_batch(P, 3, False, 9, 0)) == (False, 9)
    assert control_marker(idempotent_batch(P, 0, 0, transactional=True)) is None


def test_the_last_stable_offset_waits_for_the_first_open_transaction() -> None:
    log = open_log(MemoryFileSystem())
    plain(log, 2)
    assert log.last_stable_offset == 2
    first_p = txn(log, P, 0)
    plain(log)
    first_q = txn(log, Q, 0)
    txn(log, P, 2)  # more of P's transaction: it began at first_p
    assert (first_p, first_q, log.log_end_offset) == (2, 5, 9)
    assert log.last_stable_offset == first_p  # below the high watermark
    log.append_control(P, 0, True, 0, 0)
    assert log.last_stable_offset == first_q
    marker = log.append_control(Q, 0, False, 0, 0)
    assert log.last_stable_offset == log.log_end_offset == marker.last_offset + 1 == 11
    assert log.aborted_transactions(0, 11) == [(Q, first_q)]
    assert log.aborted_transactions(first_q, first_q + 1) == [(Q, first_q)]
    assert log.aborted_transactions(marker.base_offset + 1, 11) == []  # its marker is before the range
    assert log.aborted_transactions(0, first_q) == []  # it began after the range
    # the index entry, in Kafka's AbortedTxn layout: the last stable offset after it is the end of the log
    assert txn_index(log.filesystem, 0) == [(0, Q, 5, 10, 11)]


def test_an_aborted_entry_records_the_next_open_transaction_of_another_producer() -> None:
    log = open_log(MemoryFileSystem())
    txn(log, P, 0)
    txn(log, Q, 0)
    log.append_control(P, 0, False, 0, 0)
    assert txn_index(log.filesystem, 0) == [(0, P, 0, 4, 2)]  # Q's transaction, from 2, is still open
    assert log.last_stable_offset == 2


def test_the_search_goes_on_into_later_segments_while_an_earlier_transaction_was_open() -> None:
    """P's entry records that Q's transaction (from 1) was open when P's abort completed, so a search of [0, 2)
    does not stop at P's segment: Q's abort, in a later segment, overlaps it too (collectAbortedTxns' stop)."""
    log = open_log(MemoryFileSystem(), segment_bytes=300)
    txn(log, P, 0, count=1)
    txn(log, Q, 0, count=1)
    log.append_control(P, 0, False, 0, 0)
    plain(log)
    plain(log)
    marker = log.append_control(Q, 0, False, 0, 0).base_offset
    assert log._segment_index(marker) > log._segment_index(2)
    assert log.aborted_transactions(0, 2) == [(P, 0), (Q, 1)]
    assert log.aborted_transactions(0, 1) == [(P, 0)]


def test_a_marker_without_a_transaction_is_written_and_ends_nothing() -> None:
    log = open_log(MemoryFileSystem())
    plain(log)
    result = log.append_control(P, 4, False, 1, 0)
    assert (result.base_offset, log.log_end_offset, log.last_stable_offset) == (1, 2, 2)
    assert log.aborted_transactions(0, 2) == []
    assert control_marker(log.read(1, 1000)) == (False, 1)
    with pytest.raises(InvalidProducerEpochError):  # ... but it moved the producer to epoch 4
        log.append(idempotent_batch(P, 3, 0, transactional=True), 0)


def test_epochs_are_checked_as_kafka_checks_them() -> None:
    log = open_log(MemoryFileSystem())
    txn(log, P, 0, epoch=2)
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        log.append_control(P, 1, True, 0, 0)
    log.append_control(P, 3, False, 5, 0)  # the coordinator bumped the epoch with the abort (KIP-360, KIP-890)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_control(P, 3, True, 4, 0)
    with pytest.raises(InvalidProducerEpochError):  # the zombie at epoch 2 is fenced
        log.append(idempotent_batch(P, 2, 2, transactional=True), 0)
    assert log.log_end_offset == end + 1  # only the abort was written
    txn(log, P, 0, epoch=3)
    with pytest.raises(InvalidTxnStateError):  # a non-transactional batch inside its own transaction
        log.append(idempotent_batch(P, 3, 2), 0)
    # transaction version 2: a marker must bump the epoch, unless it repeats one with no transaction open
    with pytest.raises(InvalidProducerEpochError):
        log.append_control(P, 3, True, 5, 0, transaction_version=2)
    log.append_control(P, 4, True, 5, 0, transaction_version=2)
    log.append_control(P, 4, True, 5, 0, transaction_version=2)
    assert log.last_stable_offset == log.log_end_offset


def test_batches_of_one_append_see_the_ones_before_them() -> None:
    log = open_log(MemoryFileSystem())
    both = idempotent_batch(P, 0, 0, transactional=True) + idempotent_batch(P, 0, 2)
    with pytest.raises(InvalidTxnStateError):
        log.append(both, 0)
    assert log.log_end_offset == 0
    log.append(idempotent_batch(P, 0, 0, transactional=True) + control_batch(P, 0, False, 0, 0) +
               idempotent_batch(P, 0, 2), 0)  # fmt: skip
    assert log.aborted_transactions(0, 10) == [(P, 0)]


def test_aborted_transactions_are_found_across_segments() -> None:
    log = open_log(MemoryFileSystem(), segment_bytes=400)
    aborted = []
    for i in range(6):
        first = txn(log, P, 4 * i)
        plain(log)
        if i % 2:
            log.append_control(P, 0, False, 0, 0)
            aborted.append((P, first))
        else:
            log.append_control(P, 0, True, 0, 0)
    assert len(log._bases) > 3
    assert log.aborted_transactions(0, log.log_end_offset) == aborted
    middle = aborted[1][1]
    assert log.aborted_transactions(middle, middle + 1) == [aborted[1]]
    # retention takes the segments' indexes with them
    log.delete_records(log.log_end_offset)
    log.apply_retention(0)
    names = log.filesystem.listdir(DIR)
    assert [n for n in names if n.endswith(".txnindex")] == [
        f"{b:020d}.txnindex" for b in log._bases if f"{b:020d}.txnindex" in names
    ]
    assert log.aborted_transactions(log.log_start_offset, log.log_end_offset) == []


def with_snapshots(log: SegmentLog) -> SegmentLog:
    log.snapshot_source = lambda: []
    return log


@pytest.mark.parametrize("how", ["close", "crash", "snapshot at a roll, then crash"])
def test_the_transactions_survive_a_restart(how: str) -> None:
    fs = MemoryFileSystem()
    log = with_snapshots(open_log(fs, segment_bytes=10_000 if how != "snapshot at a roll, then crash" else 600))
    first_q = txn(log, Q, 0)
    first_p = txn(log, P, 0, epoch=1)
    log.append_control(P, 1, False, 3, 0)
    txn(log, P, 0, epoch=1)  # P's next transaction
    plain(log, 3)
    log.flush()
    if how == "close":
        log.close()
    else:
        fs = fs.crash()
    reopened = with_snapshots(open_log(fs))
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == [(P, first_p)]
    assert reopened.last_stable_offset == first_q
    with pytest.raises(TransactionCoordinatorFencedError):  # the coordinator epoch of the marker is known
        reopened.append_control(P, 1, True, 2, 0)
    reopened.append_control(Q, 0, False, 0, 0)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == [(P, first_p), (Q, first_q)]
    assert reopened.last_stable_offset == first_p + 3  # P's second transaction is still open


def test_a_lost_index_entry_is_rebuilt_from_the_markers_and_entries_beyond_the_log_are_dropped() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    first = txn(log, P, 0)
    log.append_control(P, 0, False, 0, 0)
    log.close()
    path = f"{DIR}/{0:020d}.txnindex"
    fs.remove(path)
    assert open_log(fs).aborted_transactions(0, 100) == [(P, first)]  # no snapshot: the whole log is read
    f = fs.open(path, "a")
    f.append(struct.pack(">hqqqq", 0, Q, 50, 60, 61) + b"torn")
    f.close()
    reopened = open_log(fs)
    assert reopened.aborted_transactions(0, 100) == [(P, first)]
    assert txn_index(fs, 0) == [(0, P, 0, 2, 3)]


def test_snapshots_carry_the_transaction_state_beside_the_batches() -> None:
    batch = ProducerBatch(7, 1, 0, 1, 10, 11, 2, 500, -1, 0)
    data = producer_snapshots.encode([batch], [(7, 2, 4, 10), (9, 0, -1, -1)])
    assert producer_snapshots.decode(data, log_append_time=False, log_start_offset=0) == [batch]
    assert producer_snapshots.decode_transactions(data) == [(7, 2, 4, 10), (9, 0, -1, -1)]
    assert producer_snapshots.decode_transactions(producer_snapshots.encode([batch])) == []


def test_a_control_batch_appended_as_bytes_ends_the_transaction_too() -> None:
    """What a coordinator's own writer does (the group coordinator's `__consumer_offsets`)."""
    log = open_log(MemoryFileSystem())
    txn(log, P, 0)
    log.append(control_batch(P, 0, False, 0, 0), 0)
    assert log.aborted_transactions(0, 3) == [(P, 0)]
    assert parse_header(log.read(2, 100)).attributes & 0x30 == 0x30


def test_the_last_stable_offset_never_falls_below_the_log_start() -> None:
    log = open_log(MemoryFileSystem())
    txn(log, P, 0)
    plain(log, 3)
    assert log.last_stable_offset == 0
    log.delete_records(3)
    assert (log.log_start_offset, log.last_stable_offset) == (3, 3)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["txn", "commit", "abort", "plain"]), st.sampled_from([P, Q, 3000])), max_size=25
    ),
    st.sampled_from(["close", "crash"]),
)
def test_the_log_agrees_with_a_replay_of_its_batches_before_and_after_a_restart(steps, how) -> None:
    """Random transactional batches, markers and plain batches in small segments: the last stable offset and the
    aborted transactions of every range are those a plain replay of what was appended gives (the model), and
    stay so after a clean close or a crash."""
    fs = MemoryFileSystem()
    log = with_snapshots(open_log(fs, segment_bytes=500))
    ongoing: dict[int, int] = {}
    aborted: list[tuple[int, int, int]] = []  # (producer id, first offset, marker offset)
    seqs = {P: 0, Q: 0, 3000: 0}
    for kind, pid in steps:
        if kind == "txn":
            base = txn(log, pid, seqs[pid], count=1)
            seqs[pid] += 1
            ongoing.setdefault(pid, base)
        elif kind == "plain":
            plain(log)
        else:
            offset = log.append_control(pid, 0, kind == "commit", 0, 0).base_offset
            first = ongoing.pop(pid, None)
            if kind == "abort" and first is not None:
                aborted.append((pid, first, offset))
    end = log.log_end_offset

    def check(checked: SegmentLog) -> None:
        assert checked.last_stable_offset == min([*ongoing.values(), end])
        for start in range(end + 1):
            for stop in range(start + 1, end + 2):
                assert checked.aborted_transactions(start, stop) == [
                    (p, f) for p, f, m in aborted if m >= start and f < stop
                ], (start, stop)

    check(log)
    log.flush()
    if how == "close":
        log.close()
    check(with_snapshots(open_log(fs if how == "close" else fs.crash())))


def test_a_producer_without_an_open_transaction_is_forgotten_after_the_expiration_an_open_one_never() -> None:
    from herd.log.transactions import EXPIRATION_MS

    log = open_log(MemoryFileSystem())
    log.append(idempotent_batch(P, 0, 0, transactional=True), 1_000)
    log.append_control(P, 0, True, 0, 1_000)  # P's transaction ended: it can expire
    log.append(idempotent_batch(Q, 0, 0, transactional=True), 1_000)  # Q's stays open
    log.transactions.expire(1_000 + EXPIRATION_MS - 1)
    assert sorted(pid for pid, *_ in log.transactions.entries()) == [P, Q]
    log.transactions.expire(1_000 + 2 * EXPIRATION_MS)
    assert [(pid, first) for pid, _, _, first in log.transactions.entries()] == [(Q, 3)]  # after P's marker


def test_a_verification_guard_holds_until_a_marker_of_its_producer() -> None:
    """KIP-890 part 1 (Kafka's VerificationGuard): a write verified with the coordinator may be appended only if no
    marker of its producer came in between; a producer whose transaction is open here needs no verification."""
    from herd.log.transactions import MAX_GUARDS

    log = open_log(MemoryFileSystem())
    state = log.transactions
    token = state.start_verification(P)
    assert token is not None and state.verified(P, token)
    assert not state.verified(P, token)  # used up
    token = state.start_verification(P)
    log.append_control(P, 0, False, 0, 0)  # the transaction was aborted meanwhile
    assert not state.verified(P, token)
    txn(log, P, 0, epoch=1)
    assert state.start_verification(P) is None  # open here: nothing to verify
    first = state.start_verification(Q)
    for pid in range(MAX_GUARDS):
        state.start_verification(10_000 + pid)
    assert first is not None and not state.verified(Q, first)  # the oldest guard went
