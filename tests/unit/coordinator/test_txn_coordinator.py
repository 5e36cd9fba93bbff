"""The pure transaction coordinator, driven synchronously with a manual clock: every state change and refusal of
Kafka's TransactionCoordinator (apache/kafka core/src/main/scala/kafka/coordinator/transaction/
TransactionCoordinator.scala and TransactionMetadata.scala) with its error codes, fencing, KIP-360 recovery,
timeouts, expiration, replay of what was written, and failed appends."""

from __future__ import annotations

import itertools

import pytest

from herd.coordinator import ErrorCode, IllegalStateTransition, ManualClock, ManualTimer, Result
from herd.coordinator.transactions import (
    AddPartitions,
    EndTxn,
    InitProducerId,
    PartitionErrors,
    ProducerIdAndEpoch,
    TransactionCoordinatorShard,
    TxnConfig,
    TxnState,
    WriteMarkers,
)
from herd.coordinator.transactions.metadata import TransactionMetadata
from herd.coordinator.transactions.records import TxnLogValue, decode_key, decode_value, encode_key, encode_value
from herd.coordinator.transactions.state import VALID_PREVIOUS

S = TxnState
TID = "tx-1"
T0 = 1_700_000_000_000
A, B, OFFSETS = ("in", 0), ("in", 1), ("__consumer_offsets", 7)


class Ctx:
    def __init__(self, config: TxnConfig | None = None) -> None:
        self.clock = ManualClock(T0)
        self.timer = ManualTimer(self.clock)
        self.ids = itertools.count(5000)
        self.config = config or TxnConfig()
        self.shard = self._new_shard()
        self.log: list[tuple[bytes, bytes | None]] = []
        self.jobs: list[WriteMarkers] = []

    def _new_shard(self) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(
            clock=self.clock,
            timer=self.timer,
            new_producer_id=lambda: next(self.ids),
            config=self.config,
            coordinator_epoch=3,
        )

    def apply(self, result: Result) -> list[object]:
        """What the runtime does with a durable Result: records to the log, replies out, marker jobs collected."""
        for record in result.records:
            self.shard.replay(record)
            self.log.append((record.key, record.value))
        responses = []
        for reply in result.replies:
            if isinstance(reply.handle, WriteMarkers):
                self.jobs.append(reply.handle)
            else:
                responses.append(reply.response)
        return responses

    def one(self, result: Result) -> object:
        responses = self.apply(result)
        assert len(responses) == 1, responses
        return responses[0]

    def init(self, timeout: int = 60_000, pid: int = -1, epoch: int = -1, tid: str = TID) -> ProducerIdAndEpoch:
        return self.one(self.shard.init_producer_id(InitProducerId(tid, timeout, pid, epoch), "r"))

    def add(
        self, pid: int, epoch: int, *partitions: tuple[str, int], verify: bool = False, tid: str = TID
    ) -> PartitionErrors:
        return self.one(self.shard.add_partitions(AddPartitions(tid, pid, epoch, frozenset(partitions), verify), "r"))

    def end(self, pid: int, epoch: int, commit: bool, tid: str = TID) -> ProducerIdAndEpoch:
        return self.one(self.shard.end_txn(EndTxn(tid, pid, epoch, commit), "r"))

    def finish_markers(self) -> None:
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            assert self.apply(self.shard.markers_written(job)) == []

    def md(self, tid: str = TID) -> TransactionMetadata:
        md = self.shard.transaction(tid)
        assert md is not None
        return md

    def advance(self, ms: int) -> None:
        for result in self.timer.advance(ms):
            self.apply(result)

    def written_states(self) -> list[str]:
        return [S.from_status(decode_value(v).status).kafka_name if v else "tombstone" for _, v in self.log]


def errors(result: PartitionErrors) -> set[ErrorCode]:
    return set(result.errors.values())


@pytest.fixture
def ctx() -> Ctx:
    return Ctx()


def ongoing(ctx: Ctx, *partitions: tuple[str, int]) -> ProducerIdAndEpoch:
    p = ctx.init()
    assert errors(ctx.add(p.producer_id, p.producer_epoch, *(partitions or (A,)))) == {ErrorCode.none}
    return p


# --- the state table -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", list(TxnState))
@pytest.mark.parametrize("current", list(TxnState))
def test_state_table_is_kafkas(current: TxnState, target: TxnState) -> None:
    kafka = {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }
    assert VALID_PREVIOUS[target] == kafka[target]
    md = TransactionMetadata("t", 1, 2, 1000, current, 10)
    if current in kafka[target]:
        md.transition(target, 20, producer_epoch=3)
        assert (md.state, md.producer_epoch, md.last_update_ms) == (target, 3, 20)
    else:
        with pytest.raises(IllegalStateTransition):
            md.transition(target, 20, producer_epoch=3)
        assert (md.state, md.producer_epoch, md.last_update_ms) == (current, 2, 10)


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.status, s.kafka_name) for s in TxnState] == [
        (0, "Empty"),
        (1, "Ongoing"),
        (2, "PrepareCommit"),
        (3, "PrepareAbort"),
        (4, "CompleteCommit"),
        (5, "CompleteAbort"),
        (6, "Dead"),
        (7, "PrepareEpochFence"),
    ]
    with pytest.raises(ValueError):
        S.from_status(8)


# --- InitProducerId ------------------------------------------------------------------------------------------


def test_init_gives_a_new_id_epoch_0_then_bumps_the_epoch(ctx: Ctx) -> None:
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.none, 5000, 0)
    assert ctx.init(timeout=30_000) == ProducerIdAndEpoch(ErrorCode.none, 5000, 1)
    md = ctx.md()
    assert (md.state, md.timeout_ms, md.partitions, md.start_ms) == (S.EMPTY, 30_000, frozenset(), -1)
    assert ctx.written_states() == ["Empty", "Empty"]
    assert decode_key(ctx.log[0][0]) == TID


@pytest.mark.parametrize(
    ("tid", "timeout", "pid", "epoch", "error"),
    [
        ("", 60_000, -1, -1, ErrorCode.invalid_request),
        (TID, 0, -1, -1, ErrorCode.invalid_transaction_timeout),
        (TID, 900_001, -1, -1, ErrorCode.invalid_transaction_timeout),
        (TID, 60_000, 5, -1, ErrorCode.invalid_request),
        (TID, 60_000, -1, 5, ErrorCode.invalid_request),
    ],
)
def test_init_refuses_bad_requests(ctx: Ctx, tid: str, timeout: int, pid: int, epoch: int, error: ErrorCode) -> None:
    assert ctx.init(timeout, pid, epoch, tid=tid) == ProducerIdAndEpoch(error)
    assert ctx.log == [] and ctx.shard.size() == 0


def test_init_accepts_the_configured_maximum_timeout() -> None:
    ctx = Ctx(TxnConfig(transaction_max_timeout_ms=1000))
    assert ctx.init(timeout=1000).error == ErrorCode.none
    assert ctx.init(timeout=1001).error == ErrorCode.invalid_transaction_timeout


def test_init_while_ongoing_fences_the_producer_and_aborts(ctx: Ctx) -> None:
    p = ongoing(ctx, A, B)
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.concurrent_transactions)
    md = ctx.md()
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, 1)
    assert ctx.jobs == [WriteMarkers(TID, 5000, 1, False, 3, frozenset({A, B}))]
    assert ctx.written_states() == ["Empty", "Ongoing", "PrepareAbort"]  # PrepareEpochFence is never written
    assert ctx.end(p.producer_id, p.producer_epoch, True) == ProducerIdAndEpoch(ErrorCode.producer_fenced)
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.concurrent_transactions)  # markers still being written
    ctx.finish_markers()
    assert ctx.md().state is S.COMPLETE_ABORT
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.none, 5000, 2)
    assert errors(ctx.add(5000, 0, A)) == {ErrorCode.producer_fenced}


def test_init_during_prepare_commit_is_concurrent(ctx: Ctx) -> None:
    p = ongoing(ctx)
    ctx.end(p.producer_id, p.producer_epoch, True)
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.concurrent_transactions)
    assert ctx.md().state is S.PREPARE_COMMIT


# --- KIP-360 -------------------------------------------------------------------------------------------------


def test_kip360_bump_with_the_current_epoch_and_its_lost_answer_retried(ctx: Ctx) -> None:
    p = ctx.init()
    assert ctx.init(pid=p.producer_id, epoch=0) == ProducerIdAndEpoch(ErrorCode.none, 5000, 1)
    assert ctx.md().last_producer_epoch == 0
    assert ctx.init(pid=p.producer_id, epoch=0) == ProducerIdAndEpoch(ErrorCode.none, 5000, 1)  # retry: no bump
    assert ctx.init(pid=p.producer_id, epoch=1) == ProducerIdAndEpoch(ErrorCode.none, 5000, 2)


def test_kip360_a_new_producer_resets_the_last_epoch_so_the_old_one_is_fenced(ctx: Ctx) -> None:
    ctx.init()
    ctx.init(pid=5000, epoch=0)  # epoch 1, last 0
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.none, 5000, 2)  # a new producer: last epoch -1
    assert ctx.init(pid=5000, epoch=0) == ProducerIdAndEpoch(ErrorCode.producer_fenced)
    assert ctx.init(pid=5000, epoch=1) == ProducerIdAndEpoch(ErrorCode.producer_fenced)


def test_kip360_another_producer_id_is_fenced(ctx: Ctx) -> None:
    ctx.init()
    assert ctx.init(pid=4999, epoch=0) == ProducerIdAndEpoch(ErrorCode.producer_fenced)
    assert ctx.md().producer_epoch == 0


def test_kip360_after_the_id_expired_the_producer_gets_a_new_id(ctx: Ctx) -> None:
    """A producer whose id expired (UNKNOWN_PRODUCER_ID) names its old producer id: a freshly created id accepts
    it (epoch -1) and hands out its own producer id."""
    assert ctx.init(pid=42, epoch=7) == ProducerIdAndEpoch(ErrorCode.none, 5000, 0)


def loaded_with_epoch(ctx: Ctx, epoch: int, state: TxnState = S.EMPTY) -> None:
    value = TxnLogValue(next(ctx.ids), epoch, 60_000, state.status, frozenset(), T0, -1)  # producer id 5000
    ctx.shard.replay_loaded(encode_key(TID), encode_value(value))


def test_an_exhausted_epoch_rotates_the_producer_id(ctx: Ctx) -> None:
    loaded_with_epoch(ctx, 32766)
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.none, 5001, 0)
    md = ctx.md()
    assert (md.previous_producer_id, md.last_producer_epoch) == (5000, -1)


def test_kip360_rotation_and_its_retry_by_the_previous_producer_id(ctx: Ctx) -> None:
    loaded_with_epoch(ctx, 32766)
    assert ctx.init(pid=5000, epoch=32766) == ProducerIdAndEpoch(ErrorCode.none, 5001, 0)
    assert ctx.md().last_producer_epoch == 32766
    assert ctx.init(pid=5000, epoch=32766) == ProducerIdAndEpoch(ErrorCode.none, 5001, 0)  # its answer was lost
    assert ctx.init(pid=5000, epoch=32765) == ProducerIdAndEpoch(ErrorCode.producer_fenced)


def test_fencing_an_exhausted_epoch_uses_the_last_one_then_rotates(ctx: Ctx) -> None:
    loaded_with_epoch(ctx, 32766)
    ctx.shard.replay_loaded(
        encode_key(TID), encode_value(TxnLogValue(5000, 32766, 60_000, S.ONGOING.status, frozenset({A}), T0, T0))
    )
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.concurrent_transactions)
    assert ctx.md().producer_epoch == 32767
    ctx.finish_markers()
    assert ctx.init() == ProducerIdAndEpoch(ErrorCode.none, 5001, 0)


# --- AddPartitionsToTxn --------------------------------------------------------------------------------------


def test_add_partitions_starts_a_transaction(ctx: Ctx) -> None:
    p = ctx.init()
    ctx.clock.set(T0 + 5)
    assert ctx.add(p.producer_id, 0, A, OFFSETS).errors == {A: ErrorCode.none, OFFSETS: ErrorCode.none}
    md = ctx.md()
    assert (md.state, md.partitions, md.start_ms) == (S.ONGOING, frozenset({A, OFFSETS}), T0 + 5)
    ctx.clock.set(T0 + 9)
    assert errors(ctx.add(p.producer_id, 0, B)) == {ErrorCode.none}
    assert (ctx.md().partitions, ctx.md().start_ms) == (frozenset({A, B, OFFSETS}), T0 + 5)
    written = len(ctx.log)
    assert errors(ctx.add(p.producer_id, 0, A, B)) == {ErrorCode.none}  # already in it: nothing written
    assert len(ctx.log) == written
    assert decode_value(ctx.log[-1][1]).partitions == frozenset({A, B, OFFSETS})


@pytest.mark.parametrize(
    ("tid", "pid", "epoch", "error"),
    [
        ("", 5000, 0, ErrorCode.invalid_request),
        ("other", 5000, 0, ErrorCode.invalid_producer_id_mapping),
        (TID, 4999, 0, ErrorCode.invalid_producer_id_mapping),
        (TID, 5000, 1, ErrorCode.producer_fenced),
    ],
)
def test_add_partitions_refusals(ctx: Ctx, tid: str, pid: int, epoch: int, error: ErrorCode) -> None:
    ctx.init()
    ctx.init()  # epoch 1
    if epoch == 1:
        epoch = 0  # the stale one
    result = ctx.add(pid, epoch, A, B, tid=tid)
    assert result.errors == {A: error, B: error}
    assert ctx.md().state is S.EMPTY


def test_add_partitions_while_completing_is_concurrent(ctx: Ctx) -> None:
    p = ongoing(ctx)
    ctx.end(p.producer_id, 0, False)
    assert errors(ctx.add(p.producer_id, 0, B)) == {ErrorCode.concurrent_transactions}
    ctx.finish_markers()
    ctx.clock.set(T0 + 100)
    assert errors(ctx.add(p.producer_id, 0, B)) == {ErrorCode.none}  # the next transaction
    assert (ctx.md().partitions, ctx.md().start_ms) == (frozenset({B}), T0 + 100)


def test_verify_only_checks_membership_and_writes_nothing(ctx: Ctx) -> None:
    p = ongoing(ctx, A)
    written = len(ctx.log)
    assert ctx.add(p.producer_id, 0, A, B, verify=True).errors == {
        A: ErrorCode.none,
        B: ErrorCode.transaction_abortable,
    }
    assert errors(ctx.add(p.producer_id + 1, 0, A, verify=True)) == {ErrorCode.invalid_producer_id_mapping}
    assert errors(ctx.add(p.producer_id, 1, A, verify=True)) == {ErrorCode.producer_fenced}
    assert errors(ctx.add(p.producer_id, 0, A, verify=True, tid="nope")) == {ErrorCode.invalid_producer_id_mapping}
    ctx.end(p.producer_id, 0, True)
    written += 1
    assert errors(ctx.add(p.producer_id, 0, A, verify=True)) == {ErrorCode.concurrent_transactions}
    assert len(ctx.log) == written and ctx.md().partitions == frozenset({A})


# --- EndTxn --------------------------------------------------------------------------------------------------


def test_commit_prepares_writes_markers_then_completes(ctx: Ctx) -> None:
    p = ongoing(ctx, A, OFFSETS)
    assert ctx.end(p.producer_id, 0, True) == ProducerIdAndEpoch(ErrorCode.none, 5000, 0)
    assert ctx.md().state is S.PREPARE_COMMIT
    assert decode_value(ctx.log[-1][1]).partitions == frozenset({A, OFFSETS})
    assert ctx.jobs == [WriteMarkers(TID, 5000, 0, True, 3, frozenset({A, OFFSETS}))]
    assert ctx.end(p.producer_id, 0, True) == ProducerIdAndEpoch(ErrorCode.concurrent_transactions)
    assert ctx.end(p.producer_id, 0, False) == ProducerIdAndEpoch(ErrorCode.invalid_txn_state)
    ctx.finish_markers()
    md = ctx.md()
    assert (md.state, md.partitions, md.producer_epoch) == (S.COMPLETE_COMMIT, frozenset(), 0)
    assert ctx.written_states() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert ctx.end(p.producer_id, 0, True) == ProducerIdAndEpoch(ErrorCode.none, 5000, 0)  # a retry
    assert ctx.end(p.producer_id, 0, False) == ProducerIdAndEpoch(ErrorCode.invalid_txn_state)


def test_abort_completes_abort_and_retries(ctx: Ctx) -> None:
    p = ongoing(ctx)
    assert ctx.end(p.producer_id, 0, False).error == ErrorCode.none
    assert ctx.end(p.producer_id, 0, False) == ProducerIdAndEpoch(ErrorCode.concurrent_transactions)
    assert ctx.end(p.producer_id, 0, True) == ProducerIdAndEpoch(ErrorCode.invalid_txn_state)
    ctx.finish_markers()
    assert ctx.md().state is S.COMPLETE_ABORT
    assert ctx.end(p.producer_id, 0, False) == ProducerIdAndEpoch(ErrorCode.none, 5000, 0)
    assert ctx.end(p.producer_id, 0, True) == ProducerIdAndEpoch(ErrorCode.invalid_txn_state)


@pytest.mark.parametrize(
    ("tid", "pid", "epoch", "error"),
    [
        ("", 5000, 0, ErrorCode.invalid_request),
        ("other", 5000, 0, ErrorCode.invalid_producer_id_mapping),
        (TID, 4999, 0, ErrorCode.invalid_producer_id_mapping),
        (TID, 5000, 1, ErrorCode.producer_fenced),
    ],
)
def test_end_txn_refusals(ctx: Ctx, tid: str, pid: int, epoch: int, error: ErrorCode) -> None:
    ongoing(ctx)
    assert ctx.end(pid, epoch, True, tid=tid) == ProducerIdAndEpoch(error)
    assert ctx.md().state is S.ONGOING


def test_end_txn_with_no_transaction_is_an_invalid_state(ctx: Ctx) -> None:
    ctx.init()
    assert ctx.end(5000, 0, True) == ProducerIdAndEpoch(ErrorCode.invalid_txn_state)
    assert ctx.end(5000, 0, False) == ProducerIdAndEpoch(ErrorCode.invalid_txn_state)


def test_markers_written_for_a_transaction_that_moved_on_change_nothing(ctx: Ctx) -> None:
    p = ongoing(ctx)
    ctx.end(p.producer_id, 0, True)
    job = ctx.jobs[0]
    ctx.finish_markers()
    written = len(ctx.log)
    for stale in (
        job,
        WriteMarkers(TID, 5000, 0, False, 3, job.partitions),
        WriteMarkers(TID, 5000, 0, True, 2, job.partitions),
    ):
        assert ctx.shard.markers_written(stale) == Result()
    assert len(ctx.log) == written and ctx.md().state is S.COMPLETE_COMMIT


# --- timeouts and expiration ---------------------------------------------------------------------------------


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    ctx = Ctx(TxnConfig(abort_timed_out_interval_ms=1000))
    ctx.apply(ctx.shard.on_loaded())
    p = ctx.init(timeout=5000)
    ctx.add(p.producer_id, 0, A)
    ctx.advance(5000)
    assert ctx.md().state is S.ONGOING  # not past it yet (start + timeout < now)
    ctx.advance(1000)
    md = ctx.md()
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, 1)
    assert ctx.jobs == [WriteMarkers(TID, 5000, 1, False, 3, frozenset({A}))]
    assert ctx.end(p.producer_id, 0, True) == ProducerIdAndEpoch(ErrorCode.producer_fenced)
    assert errors(ctx.add(p.producer_id, 0, B)) == {ErrorCode.producer_fenced}
    ctx.finish_markers()
    ctx.advance(10_000)
    assert ctx.md().state is S.COMPLETE_ABORT
    assert ctx.written_states() == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort"]


def test_idle_transactional_ids_expire_but_not_open_transactions() -> None:
    day = 86_400_000
    ctx = Ctx(
        TxnConfig(
            transactional_id_expiration_ms=day,
            remove_expired_interval_ms=3_600_000,
            abort_timed_out_interval_ms=10 * day,
            transaction_max_timeout_ms=10 * day,
        )
    )
    ctx.apply(ctx.shard.on_loaded())
    ctx.init(tid="idle")
    p = ctx.init(tid="open", timeout=5 * day)
    ctx.add(p.producer_id, 0, A, tid="open")
    q = ctx.init(tid="done")
    ctx.add(q.producer_id, 0, A, tid="done")
    ctx.end(q.producer_id, 0, True, tid="done")
    ctx.finish_markers()
    ctx.advance(day - 1)
    assert ctx.shard.size() == 3
    ctx.advance(3_600_000)
    assert ctx.shard.transaction("idle") is None and ctx.shard.transaction("done") is None
    assert ctx.md("open").state is S.ONGOING
    assert sorted(decode_key(k) for k, v in ctx.log if v is None) == ["done", "idle"]
    assert ctx.init(tid="idle") == ProducerIdAndEpoch(ErrorCode.none, 5003, 0)  # a new producer id


# --- replay, load and unload ---------------------------------------------------------------------------------


def fields(md: TransactionMetadata) -> tuple[object, ...]:
    return (md.producer_id, md.producer_epoch, md.timeout_ms, md.state, md.partitions, md.start_ms, md.last_update_ms)


def test_replaying_the_log_rebuilds_what_live_state_holds(ctx: Ctx) -> None:
    p = ongoing(ctx, A, OFFSETS)
    ctx.end(p.producer_id, 0, True)
    ctx.finish_markers()
    ctx.init(tid="t2")
    q = ctx.init(tid="t3")
    ctx.add(q.producer_id, 0, B, tid="t3")
    ctx.end(q.producer_id, 0, False, tid="t3")  # left in PrepareAbort
    fresh = Ctx()
    for key, value in ctx.log:
        fresh.shard.replay_loaded(key, value)
    for tid in (TID, "t2", "t3"):
        assert fields(fresh.md(tid)) == fields(ctx.md(tid))
        assert fresh.md(tid).last_producer_epoch == -1  # memory only, as in Kafka
    out = fresh.shard.on_loaded()
    assert out.records == () and [r.handle for r in out.replies] == [
        WriteMarkers("t3", q.producer_id, 0, False, 3, frozenset({B}))
    ]


def test_a_tombstone_forgets_the_id_and_bad_records_are_skipped(ctx: Ctx) -> None:
    ctx.init()
    ctx.shard.replay_loaded(encode_key(TID), None)
    assert ctx.shard.transaction(TID) is None
    assert (
        ctx.shard.replay_loaded_batch(
            [(b"\x00\x01\x00\x01x", None), (encode_key("a"), b"\x00\x07junk"), (encode_key("b"), b"\x00")]
        )
        == 3
    )
    with pytest.raises(ValueError):
        ctx.shard.replay_loaded(encode_key("c"), encode_value(TxnLogValue(1, 0, 10, 1, frozenset(), 0, 0))[:-3])


def test_unload_forgets_everything_and_stops_the_timers(ctx: Ctx) -> None:
    ctx.apply(ctx.shard.on_loaded())
    assert ctx.timer.keys() == {"txn-abort-timed-out", "txn-expire-ids"}
    ongoing(ctx)
    assert ctx.shard.on_unloaded() == Result()
    assert ctx.shard.size() == 0 and ctx.timer.keys() == set()


# --- failed appends ------------------------------------------------------------------------------------------


def test_a_failed_append_undoes_the_change_and_answers_the_mapped_error(ctx: Ctx) -> None:
    result = ctx.shard.init_producer_id(InitProducerId(TID, 60_000), "r")
    out = ctx.shard.on_append_failed(result, ErrorCode.kafka_storage_error)
    assert [r.response for r in out.replies] == [ProducerIdAndEpoch(ErrorCode.not_coordinator)]
    assert ctx.shard.transaction(TID) is None
    p = ongoing(ctx, A)
    result = ctx.shard.end_txn(EndTxn(TID, p.producer_id, 0, True), "r")
    assert ctx.md().state is S.PREPARE_COMMIT
    out = ctx.shard.on_append_failed(result, ErrorCode.message_too_large)
    assert [r.response for r in out.replies] == [ProducerIdAndEpoch(ErrorCode.unknown_server_error)]  # no markers
    assert (ctx.md().state, ctx.md().partitions) == (S.ONGOING, frozenset({A}))
    result = ctx.shard.add_partitions(AddPartitions(TID, p.producer_id, 0, frozenset({B})), "r")
    out = ctx.shard.on_append_failed(result, ErrorCode.request_timed_out)
    assert [r.response.errors for r in out.replies] == [{B: ErrorCode.coordinator_not_available}]
    assert ctx.md().partitions == frozenset({A})


def test_a_failed_fence_restores_the_epoch(ctx: Ctx) -> None:
    ongoing(ctx)
    result = ctx.shard.init_producer_id(InitProducerId(TID, 60_000), "r")
    assert ctx.md().producer_epoch == 1
    ctx.shard.on_append_failed(result, ErrorCode.not_leader_or_follower)
    assert (ctx.md().state, ctx.md().producer_epoch) == (S.ONGOING, 0)
