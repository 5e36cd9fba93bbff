"""Offsets in transactions in the core (TxnOffsetCommit, KIP-98/KIP-447): fencing in Kafka's order, the
transactional batch a commit writes, pending offsets invisible until the commit marker and gone on abort,
require_stable, the ordering rule between transactional and plain commits, tombstones, retention, and replay
from the log giving the same state (apache/kafka OffsetMetadataManagerTest#testGenericGroupTransactionalOffset*,
#testReplayTransactionEndMarker*, #testCleanupExpiredOffsetsWithPendingTransactionalOffsets and
ClassicGroupTest#testValidateTransactionalOffsetCommit are the models)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from herd.coordinator import CoordinatorConfig, ErrorCode, GroupState, ManualClock, ManualTimer, Result
from herd.coordinator.records import OffsetValue, group_tombstone, offset_commit_record, offset_tombstone
from herd.coordinator.requests import (
    CommitPartition,
    CommitTopic,
    CompleteTransaction,
    DeleteGroups,
    DeleteTopic,
    FetchGroup,
    FetchTopic,
    OffsetDelete,
    OffsetFetch,
    TxnOffsetCommit,
)
from herd.coordinator.responses import CompleteTransactionResponse
from herd.coordinator.result import Marker
from herd.coordinator.shard import GroupCoordinatorShard

from .context import Ctx, reply
from .test_offsets_fencing import commit, static_group

NOW = 1_000
PID, EPOCH = 7000, 3
UNSTABLE = ErrorCode.unstable_offset_commit


def ctx(**config: int) -> Ctx:
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=0, **config))
    c.clock.set(NOW)
    return c


def txn_req(
    group: str = "g",
    gen: int = -1,
    member: str = "",
    *,
    instance: str | None = None,
    pid: int = PID,
    offsets: dict[int, int] | None = None,
    topic: str = "t",
    v: int = 5,
    epoch: int = EPOCH,
    partitions: tuple[CommitPartition, ...] | None = None,
) -> TxnOffsetCommit:
    if partitions is None:
        partitions = tuple(CommitPartition(p, o, 5) for p, o in (offsets or {0: 42}).items())
    return TxnOffsetCommit(
        transactional_id="tx",
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=gen,
        member_id=member,
        group_instance_id=instance,
        topics=(CommitTopic(topic, partitions),),
        api_version=v,
    )


def txn_commit(c: Ctx, *args, **kw) -> tuple[list[int], Result]:
    handle, result = c.run("txn_offset_commit", txn_req(*args, **kw))
    return [p.error_code for t in reply(result, handle).topics for p in t.partitions], result


def fetch(
    c: Ctx, partitions: tuple[int, ...] = (0,), *, stable: bool = False, group: str = "g", topics: bool = True
) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (offset, error code)."""
    wanted = (FetchTopic("t", partitions),) if topics else None
    handle, result = c.run("offset_fetch", OffsetFetch(groups=(FetchGroup(group, wanted),), require_stable=stable))
    (g,) = reply(result, handle).groups
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in g.topics for p in t.partitions}


def marker(c: Ctx, commit_: bool, pid: int = PID, epoch: int = EPOCH) -> None:
    """The transaction coordinator completes `pid`'s transaction here (the marker is written and replayed)."""
    handle, result = c.run(
        "complete_transaction",
        CompleteTransaction(producer_id=pid, producer_epoch=epoch, commit=commit_, coordinator_epoch=4),
    )
    assert result.records == () and result.marker == Marker(pid, epoch, commit_, 4)
    assert reply(result, handle) == CompleteTransactionResponse()


def value(offset: int, epoch: int = 5) -> OffsetValue:
    return OffsetValue(offset, epoch, "", NOW)


# --- fencing (KIP-447) -------------------------------------------------------------------------------


def test_an_unknown_group_accepts_a_commit_without_generation_and_creates_a_simple_group() -> None:
    c = ctx()
    codes, result = txn_commit(c)
    assert codes == [ErrorCode.none]
    assert result.transaction == (PID, EPOCH)
    assert result.records == (offset_commit_record("g", "t", 0, value(42)),)
    group = c.shard.group("g")
    assert group.state is GroupState.EMPTY and group.protocol_type is None
    assert c.shard.committed_offsets("g") == {}
    assert c.shard.pending_offsets(PID, "g") == {("t", 0): value(42)}


@pytest.mark.parametrize("version", [3, 5])
def test_an_unknown_group_with_a_generation_is_illegal_generation_on_every_version(version: int) -> None:
    c = ctx()
    codes, result = txn_commit(c, gen=0, member="m", v=version)
    assert codes == [ErrorCode.illegal_generation] and result.records == ()
    assert c.shard.group("g") is None


def test_fencing_in_a_stable_group() -> None:
    c = ctx()
    a, b = c.stable_group(2)
    assert txn_commit(c, gen=1, member=a)[0] == [ErrorCode.none]
    assert txn_commit(c, gen=2, member=a)[0] == [ErrorCode.illegal_generation]
    assert txn_commit(c, gen=0, member=b)[0] == [ErrorCode.illegal_generation]
    assert txn_commit(c, gen=7, member="zombie")[0] == [ErrorCode.unknown_member_id]  # member before generation
    assert txn_commit(c, gen=-1, member=a)[0] == [ErrorCode.illegal_generation]
    # v0-2 carry neither member nor generation: accepted in any state (a plain commit is UNKNOWN_MEMBER_ID)
    assert txn_commit(c, v=2)[0] == [ErrorCode.none]
    assert commit(c)[0] == [ErrorCode.unknown_member_id]


def test_static_members_are_fenced_by_instance_id() -> None:
    c = ctx()
    i1, i2 = static_group(c)
    assert txn_commit(c, gen=1, member=i1, instance="i1")[0] == [ErrorCode.none]
    assert txn_commit(c, gen=9, member=i2, instance="i1")[0] == [ErrorCode.fenced_instance_id]
    assert txn_commit(c, gen=1, member=i1, instance="unknown")[0] == [ErrorCode.unknown_member_id]


def test_completing_rebalance_does_not_refuse_a_transactional_commit() -> None:
    c = ctx()
    member = c.join_dynamic()
    c.sleep(0)
    assert c.shard.group("g").state is GroupState.COMPLETING_REBALANCE
    assert commit(c, gen=1, member=member)[0] == [ErrorCode.rebalance_in_progress]
    assert txn_commit(c, gen=1, member=member)[0] == [ErrorCode.none]


def test_a_dead_group_answers_coordinator_not_available() -> None:
    c = ctx()
    commit(c)
    c.shard.group("g").transition_to(GroupState.DEAD, NOW)
    assert txn_commit(c)[0] == [ErrorCode.coordinator_not_available]


def test_metadata_over_the_limit_fails_only_its_partition_and_the_rest_is_one_transactional_batch() -> None:
    c = ctx()
    limit = c.config.offset_metadata_max_bytes
    codes, result = txn_commit(
        c, partitions=(CommitPartition(0, 1, -1, -1, "x" * (limit + 1)), CommitPartition(1, 2, -1, -1, "m"))
    )
    assert codes == [ErrorCode.offset_metadata_too_large, ErrorCode.none]
    assert result.records == (offset_commit_record("g", "t", 1, OffsetValue(2, -1, "m", NOW)),)
    assert result.transaction == (PID, EPOCH)


def test_a_failed_append_answers_every_partition_with_the_mapped_error() -> None:
    c = ctx()
    handle, result = "h", c.shard.txn_offset_commit(txn_req(offsets={0: 1, 1: 2}), "h")
    out = c.shard.on_append_failed(result, ErrorCode.message_too_large)
    assert [p.error_code for p in reply(out, handle).topics[0].partitions] == [ErrorCode.invalid_commit_offset_size] * 2


def test_results_of_different_producers_do_not_merge() -> None:
    record = offset_commit_record("g", "t", 0, value(1))
    with pytest.raises(ValueError):
        Result((record,), transaction=(1, 0)) + Result((record,))
    assert (Result(transaction=(1, 0)) + Result((record,))).transaction is None
    assert (Result((record,), transaction=(1, 0)) + Result()).transaction == (1, 0)
    marker_ = Result(marker=Marker(1, 0, True, 0))
    with pytest.raises(ValueError):
        marker_ + Result((record,))
    with pytest.raises(ValueError):
        marker_ + marker_
    assert (Result() + marker_).marker == Marker(1, 0, True, 0)


def test_a_marker_that_cannot_be_written_answers_the_mapped_error() -> None:
    c = ctx()
    result = c.shard.complete_transaction(CompleteTransaction(producer_id=PID, producer_epoch=EPOCH, commit=True), "h")
    out = c.shard.on_append_failed(result, ErrorCode.kafka_storage_error)
    assert reply(out, "h") == CompleteTransactionResponse(error_code=ErrorCode.not_coordinator)


def test_a_zombie_with_an_older_epoch_is_fenced_and_writes_nothing() -> None:
    """The producer was re-initialised (epoch bumped) and its old transaction aborted with the new epoch: the old
    epoch's TxnOffsetCommit gets INVALID_PRODUCER_EPOCH, as Kafka's log refuses its batch; the fence is in the
    log (the marker's epoch), so it holds after a reload."""
    c, log = ctx(), Log()
    run = c.apply
    c.apply = lambda result: run(log.batch(result))  # type: ignore[method-assign]
    txn_commit(c, offsets={0: 1})
    log.marker(c, False, epoch=EPOCH + 1)  # InitProducerId of the successor aborted the transaction
    limit = c.config.offset_metadata_max_bytes
    codes, result = txn_commit(c, offsets={0: 5, 1: 6})
    assert codes == [ErrorCode.invalid_producer_epoch] * 2 and result.records == ()
    codes, result = txn_commit(c, partitions=(CommitPartition(0, 5, -1, -1, "x" * (limit + 1)),))
    assert codes == [ErrorCode.offset_metadata_too_large]  # nothing to write, nothing refused by the log
    assert txn_commit(c, offsets={0: 7}, epoch=EPOCH + 1)[0] == [ErrorCode.none]  # the successor
    assert txn_commit(c, pid=PID + 1, offsets={1: 1}, epoch=0)[0] == [ErrorCode.none]  # another producer
    loaded = log.load()
    handle = "h"
    result = loaded.txn_offset_commit(txn_req(offsets={0: 5}), handle)
    assert [p.error_code for p in reply(result, handle).topics[0].partitions] == [ErrorCode.invalid_producer_epoch]
    assert loaded.pending_offsets(PID, "g") == {("t", 0): value(7)}


# --- pending, committed, aborted ---------------------------------------------------------------------


def test_pending_offsets_are_invisible_until_the_commit_marker() -> None:
    c = ctx()
    commit(c, partitions=(CommitPartition(0, 10), CommitPartition(1, 11)))
    txn_commit(c, offsets={0: 42, 2: 44})
    assert fetch(c, (0, 1, 2)) == {("t", 0): (10, 0), ("t", 1): (11, 0), ("t", 2): (-1, 0)}
    assert fetch(c, (0, 1, 2), stable=True) == {("t", 0): (-1, UNSTABLE), ("t", 1): (11, 0), ("t", 2): (-1, UNSTABLE)}
    # every offset of the group: only committed ones are listed, the open one answered unstable
    assert fetch(c, stable=True, topics=False) == {("t", 0): (-1, UNSTABLE), ("t", 1): (11, 0)}
    marker(c, True)
    assert fetch(c, (0, 1, 2), stable=True) == {("t", 0): (42, 0), ("t", 1): (11, 0), ("t", 2): (44, 0)}
    assert c.shard.open_transactions() == ()


def test_an_abort_drops_the_pending_offsets() -> None:
    c = ctx()
    commit(c, partitions=(CommitPartition(0, 10),))
    txn_commit(c, offsets={0: 42, 1: 43})
    marker(c, False)
    assert fetch(c, (0, 1), stable=True) == {("t", 0): (10, 0), ("t", 1): (-1, 0)}
    assert c.shard.pending_offsets(PID, "g") == {} and not c.shard.has_pending_offsets("g", "t", 0)
    marker(c, True)  # a second marker, or one of a producer without pending offsets, changes nothing
    assert fetch(c, (0, 1)) == {("t", 0): (10, 0), ("t", 1): (-1, 0)}


def test_a_plain_commit_written_after_the_transactional_one_wins() -> None:
    c = ctx()
    txn_commit(c, offsets={0: 42})
    commit(c, partitions=(CommitPartition(0, 50),))
    assert fetch(c, stable=True) == {("t", 0): (-1, UNSTABLE)}
    marker(c, True)
    assert fetch(c) == {("t", 0): (50, 0)}


def test_a_transactional_commit_written_after_the_plain_one_wins() -> None:
    c = ctx()
    commit(c, partitions=(CommitPartition(0, 50),))
    txn_commit(c, offsets={0: 42})
    marker(c, True)
    assert fetch(c) == {("t", 0): (42, 0)}


@pytest.mark.parametrize(("first", "second", "expected"), [(1, 2, 20), (2, 1, 10)])
def test_two_producers_on_one_partition_the_later_record_wins(first: int, second: int, expected: int) -> None:
    """Producer 1 stages 10, producer 2 stages 20 (`first` writes first); both commit, 2 before 1."""
    c = ctx()
    for pid in (first, second):
        txn_commit(c, pid=pid, offsets={0: pid * 10})
    marker(c, True, pid=2)
    assert fetch(c, stable=True) == {("t", 0): (-1, UNSTABLE)}  # producer 1 still holds it
    marker(c, True, pid=1)
    assert fetch(c, stable=True) == {("t", 0): (expected, 0)}


def test_a_tombstone_removes_the_pending_offsets_of_its_partition() -> None:
    c = ctx()
    txn_commit(c, offsets={0: 42, 1: 43})
    handle, result = c.run("offset_delete", OffsetDelete(group_id="g", topics=(DeleteTopic("t", (0,)),)))
    assert result.records == (offset_tombstone("g", "t", 0),)  # written for a pending-only partition too
    assert fetch(c, (0, 1), stable=True) == {("t", 0): (-1, 0), ("t", 1): (-1, UNSTABLE)}
    marker(c, True)
    assert fetch(c, (0, 1)) == {("t", 0): (-1, 0), ("t", 1): (43, 0)}


def test_delete_groups_writes_tombstones_for_pending_partitions_too() -> None:
    c = ctx()
    commit(c, partitions=(CommitPartition(1, 1),))
    txn_commit(c, offsets={0: 42, 1: 43})
    _, result = c.run("delete_groups", DeleteGroups(groups_names=("g",)))
    assert result.records == (offset_tombstone("g", "t", 0), offset_tombstone("g", "t", 1), group_tombstone("g"))
    assert c.shard.open_transactions() == ()
    marker(c, True)
    assert c.shard.committed_offsets("g") == {}


def test_deleted_topics_take_their_pending_offsets_along() -> None:
    c = ctx()
    commit(c, partitions=(CommitPartition(0, 1),))
    txn_commit(c, offsets={0: 42, 1: 43})
    txn_commit(c, offsets={0: 5}, topic="other")
    result = c.apply(c.shard.on_topics_deleted(frozenset({"t"})))
    assert result.records == (offset_tombstone("g", "t", 0), offset_tombstone("g", "t", 1))
    marker(c, True)
    assert c.shard.committed_offsets("g") == {("other", 0): value(5)}


def test_unloading_forgets_pending_offsets() -> None:
    c = ctx()
    txn_commit(c)
    c.shard.on_unloaded()
    assert c.shard.open_transactions() == () and not c.shard.has_pending_offsets("g", "t", 0)


# --- retention ---------------------------------------------------------------------------------------


def test_pending_offsets_never_expire_and_hold_back_their_partition_and_group() -> None:
    minute = 60_000
    c = ctx(offsets_retention_minutes=1, offsets_retention_check_interval_ms=minute)
    c.shard.on_loaded()
    commit(c, partitions=(CommitPartition(0, 10), CommitPartition(1, 11)))
    txn_commit(c, offsets={0: 42})
    txn_commit(c, pid=PID + 1, group="only-pending", offsets={0: 1})
    written = [r for _ in range(5) for res in c.sleep(minute) for r in res.records]
    assert written == [offset_tombstone("g", "t", 1)]  # partition 0 is held, and so is each group
    assert c.shard.group("g") is not None and c.shard.group("only-pending") is not None
    marker(c, False)
    marker(c, False, pid=PID + 1)
    written = [r for res in c.sleep(minute) for r in res.records]
    assert set(written) == {offset_tombstone("g", "t", 0), group_tombstone("g"), group_tombstone("only-pending")}


# --- replay from the log -----------------------------------------------------------------------------


class Log:
    """The partition as the runtime writes it: batches with their producer id, and markers."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, object, int]] = []

    def batch(self, result: Result) -> Result:
        if result.records:
            pid, epoch = result.transaction or (-1, -1)
            self.entries.append(("batch", [(r.key, r.value) for r in result.records], pid, epoch))
        return result

    def marker(self, c: Ctx, commit_: bool, pid: int = PID, epoch: int = EPOCH) -> None:
        self.entries.append(("marker", commit_, pid, epoch))
        marker(c, commit_, pid, epoch)

    def load(self) -> GroupCoordinatorShard:
        clock = ManualClock()
        clock.set(NOW)
        shard = GroupCoordinatorShard(clock=clock, timer=ManualTimer(clock))
        for kind, payload, pid, epoch in self.entries:
            if kind == "batch":
                assert shard.replay_loaded_batch(payload, pid, epoch) == 0  # type: ignore[arg-type]
            else:
                shard.replay_end_transaction_marker(pid, payload, epoch)  # type: ignore[arg-type]
        return shard


def state(shard: GroupCoordinatorShard, groups: tuple[str, ...] = ("g", "h")) -> tuple:
    return tuple(
        (shard.committed_offsets(g), {p: shard.pending_offsets(p, g) for p in shard.open_transactions()})
        for g in groups
    )


def test_loading_the_log_rebuilds_committed_and_pending_offsets() -> None:
    c, log = ctx(), Log()
    run = c.apply

    def logged(result: Result) -> Result:
        return run(log.batch(result))

    c.apply = logged  # type: ignore[method-assign]
    commit(c, partitions=(CommitPartition(0, 1), CommitPartition(1, 1)))
    txn_commit(c, offsets={0: 42, 1: 43})  # pending on 0 and 1
    commit(c, partitions=(CommitPartition(0, 50),))  # a plain commit later in the log: wins on 0
    txn_commit(c, pid=8, offsets={2: 9}, group="h")  # another producer, still open at the end
    c.run("offset_delete", OffsetDelete(group_id="g", topics=(DeleteTopic("t", (1,)),)))  # drops pending 1
    txn_commit(c, pid=9, offsets={3: 3})
    log.marker(c, True)
    log.marker(c, False, pid=9)
    txn_commit(c, offsets={0: 60})  # the same producer, its next transaction: open at the end
    live = state(c.shard)
    assert live == (
        ({("t", 0): value(50, -1)}, {PID: {("t", 0): value(60)}, 8: {}}),
        ({}, {PID: {}, 8: {("t", 2): value(9)}}),
    )
    assert state(log.load()) == live


def test_a_plain_batch_loaded_while_a_transaction_is_open_is_ordered_against_it() -> None:
    """The fast loading path does not see transactions: while one is open, records are replayed one by one."""
    pending, plain = offset_commit_record("g", "t", 0, value(42)), offset_commit_record("g", "t", 0, value(50))
    log = Log()
    log.entries = [
        ("batch", [(pending.key, pending.value)], PID, EPOCH),
        ("batch", [(plain.key, plain.value)], -1, -1),
        ("marker", True, PID, EPOCH),
    ]
    assert log.load().committed_offsets("g") == {("t", 0): value(50)}


# --- against Kafka's algorithm -------------------------------------------------------------------------


class KafkaModel:
    """OffsetMetadataManager's replay and replayEndTransactionMarker as Kafka writes them, with record offsets."""

    def __init__(self) -> None:
        self.offset = 0
        self.committed: dict[int, tuple[int, int]] = {}  # partition -> (value, record offset)
        self.pending: dict[int, dict[int, tuple[int, int]]] = {}  # producer -> partition -> (value, record offset)
        self.open: dict[int, set[int]] = {}  # partition -> producers

    def commit(self, partition: int, value: int, producer: int | None) -> None:
        self.offset += 1
        if producer is None:
            self.committed[partition] = (value, self.offset)
        else:
            self.pending.setdefault(producer, {})[partition] = (value, self.offset)
            self.open.setdefault(partition, set()).add(producer)

    def tombstone(self, partition: int) -> None:
        self.offset += 1
        self.committed.pop(partition, None)
        for producer in self.open.pop(partition, set()):
            self.pending.get(producer, {}).pop(partition, None)

    def marker(self, producer: int, commit: bool) -> None:
        self.offset += 1
        for partition, (value, offset) in self.pending.pop(producer, {}).items():
            self.open.get(partition, set()).discard(producer)
            if not self.open.get(partition, True):
                del self.open[partition]
            existing = self.committed.get(partition)
            if commit and (existing is None or offset > existing[1]):
                self.committed[partition] = (value, offset)


steps = st.lists(
    st.one_of(  # two partitions, two producers: enough to meet every case, often
        st.tuples(st.just("commit"), st.integers(0, 1), st.none() | st.integers(1, 2)),
        st.tuples(st.just("tombstone"), st.integers(0, 1), st.none()),
        st.tuples(st.just("marker"), st.booleans(), st.integers(1, 2)),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_committed_and_pending_offsets_are_kafkas_live_and_after_a_load(script: list[tuple]) -> None:
    c, log, model = ctx(), Log(), KafkaModel()
    run = c.apply
    c.apply = lambda result: run(log.batch(result))  # type: ignore[method-assign]
    for n, (kind, a, b) in enumerate(script):
        if kind == "commit":
            value = 100 + n
            if b is None:
                assert commit(c, partitions=(CommitPartition(a, value),))[0] == [ErrorCode.none]
            else:
                assert txn_commit(c, pid=b, offsets={a: value})[0] == [ErrorCode.none]
            model.commit(a, value, b)
        elif kind == "tombstone":
            c.run("offset_delete", OffsetDelete(group_id="g", topics=(DeleteTopic("t", (a,)),)))
            if a in model.committed or a in model.open:
                model.tombstone(a)
        else:
            log.marker(c, a, pid=b)
            model.marker(b, a)
    expected = {("t", p): v for p, (v, _) in model.committed.items()}
    for shard in (c.shard, log.load()):
        assert {k: v.offset for k, v in shard.committed_offsets("g").items()} == expected
        assert {p for p in range(2) if shard.has_pending_offsets("g", "t", p)} == set(model.open)
