"""Offsets in transactions on the coordinator runtime: a TxnOffsetCommit is written as one transactional batch of
its producer, stays pending until `complete_transaction` writes the transaction's marker (a control batch), and
survives a reload pending; a reload replays the marker as Kafka's CoordinatorLoaderImpl does. Real runtime and
log on the log's in-memory filesystem; nothing is mocked."""

from __future__ import annotations

import asyncio

import pytest

from herd.coordinator import CoordinatorError, ErrorCode
from herd.coordinator import GroupCoordinatorShard as Shard
from herd.coordinator.requests import CommitPartition, CommitTopic, FetchGroup, FetchTopic, OffsetFetch, TxnOffsetCommit
from herd.log.batch import CONTROL_BIT, TRANSACTIONAL_BIT, iter_headers
from herd.log.fs import MemoryFileSystem
from herd.runtime.batches import read_batches

from .helpers import commit, group_on, make_runtime, resolve, started

PID, EPOCH = 4242, 2
UNSTABLE = ErrorCode.unstable_offset_commit


def txn_commit(group: str, offsets: dict[int, int]) -> TxnOffsetCommit:
    return TxnOffsetCommit(
        transactional_id="tx",
        group_id=group,
        producer_id=PID,
        producer_epoch=EPOCH,
        topics=(CommitTopic("t", tuple(CommitPartition(p, o) for p, o in offsets.items())),),
    )


async def fetch(runtime, group: str, stable: bool = True) -> dict[int, tuple[int, int]]:  # noqa: ANN001
    request = OffsetFetch(groups=(FetchGroup(group, (FetchTopic("t", (0, 1)),)),), require_stable=stable)
    response = await resolve(runtime.call(group, Shard.offset_fetch, request))
    return {p.partition_index: (p.committed_offset, p.error_code) for p in response.groups[0].topics[0].partitions}


def test_a_txn_offset_commit_is_a_transactional_batch_pending_until_completed_and_across_a_reload() -> None:
    async def main() -> None:
        fs = MemoryFileSystem()
        runtime = await started(make_runtime("/data", fs), partitions=[1])
        group = group_on(runtime, 1)
        await resolve(runtime.call(group, Shard.offset_commit, commit(group, {0: 5, 1: 6})))
        answer = await resolve(runtime.call(group, Shard.txn_offset_commit, txn_commit(group, {0: 42})))
        assert [p.error_code for p in answer.topics[0].partitions] == [0]
        log = runtime.shards[1].log
        headers = list(iter_headers(log.read(log.log_start_offset, 1 << 20)))
        assert [(h.attributes & TRANSACTIONAL_BIT, h.producer_id, h.producer_epoch) for h in headers] == [
            (0, -1, -1),
            (TRANSACTIONAL_BIT, PID, EPOCH),
        ]
        assert await fetch(runtime, group) == {0: (-1, UNSTABLE), 1: (6, 0)}
        assert await fetch(runtime, group, stable=False) == {0: (5, 0), 1: (6, 0)}

        await runtime.move_away_and_back(1)  # reload from the log: the offset is still pending
        await runtime.wait_loaded()
        assert await fetch(runtime, group) == {0: (-1, UNSTABLE), 1: (6, 0)}

        await runtime.complete_transaction(1, PID, EPOCH, True, coordinator_epoch=3)
        assert await fetch(runtime, group) == {0: (42, 0), 1: (6, 0)}
        headers = list(iter_headers(log.read(log.log_start_offset, 1 << 20)))
        assert (headers[-1].attributes, headers[-1].producer_id, headers[-1].producer_epoch) == (
            TRANSACTIONAL_BIT | CONTROL_BIT,
            PID,
            EPOCH,
        )
        with pytest.raises(CoordinatorError) as error:
            await runtime.complete_transaction(0, PID, EPOCH, True)
        assert error.value.code == ErrorCode.not_coordinator
        await runtime.close()

    asyncio.run(main())


@pytest.mark.parametrize("commit_", [True, False])
def test_a_reload_replays_the_transactions_marker(commit_: bool) -> None:
    async def main() -> None:
        fs = MemoryFileSystem()
        runtime = await started(make_runtime("/data", fs), partitions=[1])
        group = group_on(runtime, 1)
        await resolve(runtime.call(group, Shard.offset_commit, commit(group, {0: 5})))
        await resolve(runtime.call(group, Shard.txn_offset_commit, txn_commit(group, {0: 42, 1: 43})))
        log = runtime.shards[1].log
        assert log.last_stable_offset == 1  # the log sees the transaction open at the batch after the plain commit
        await runtime.complete_transaction(1, PID, EPOCH, commit_)
        assert log.last_stable_offset == log.log_end_offset == 4  # plain 0, transactional 1-2, marker 3
        assert log.aborted_transactions(0, 4) == ([] if commit_ else [(PID, 1)])
        expected = {0: (42, 0), 1: (43, 0)} if commit_ else {0: (5, 0), 1: (-1, 0)}
        assert await fetch(runtime, group) == expected
        batches = list(read_batches(log.read(log.log_start_offset, 1 << 20)))
        assert [(b.producer_id, b.marker) for b in batches] == [(-1, None), (PID, None), (PID, commit_)]

        await runtime.move_away_and_back(1)
        await runtime.wait_loaded()
        assert await fetch(runtime, group) == expected
        await runtime.close()

    asyncio.run(main())
