"""Compaction of a `__consumer_offsets` partition holding transactional offset commits, then a reload: the group
coordinator's loader sees what it saw before (every committed offset the same, pending offsets of an open
transaction still pending, nothing of an aborted one). Real runtime and log on the in-memory filesystem."""

from __future__ import annotations

import asyncio

from herd.coordinator import ErrorCode
from herd.coordinator import GroupCoordinatorShard as Shard
from herd.coordinator.requests import CommitPartition, CommitTopic, FetchGroup, FetchTopic, OffsetFetch, TxnOffsetCommit
from herd.log.fs import MemoryFileSystem

from .helpers import commit, group_on, make_runtime, resolve, started

P, Q, EPOCH = 4242, 4343, 2


def txn_commit(group: str, pid: int, offsets: dict[int, int]) -> TxnOffsetCommit:
    return TxnOffsetCommit(
        transactional_id=f"tx-{pid}",
        group_id=group,
        producer_id=pid,
        producer_epoch=EPOCH,
        topics=(CommitTopic("t", tuple(CommitPartition(p, o) for p, o in offsets.items())),),
    )


async def fetch(runtime, group: str, stable: bool) -> dict[int, tuple[int, int]]:  # noqa: ANN001
    request = OffsetFetch(groups=(FetchGroup(group, (FetchTopic("t", (0, 1)),)),), require_stable=stable)
    response = await resolve(runtime.call(group, Shard.offset_fetch, request))
    return {p.partition_index: (p.committed_offset, p.error_code) for p in response.groups[0].topics[0].partitions}


def test_compaction_keeps_what_the_loader_sees_with_aborted_and_open_transactional_commits() -> None:
    async def main() -> None:
        runtime = await started(make_runtime("/data", MemoryFileSystem()), partitions=[1])
        group, other = group_on(runtime, 1), group_on(runtime, 1, prefix="other")
        log = runtime.shards[1].log
        await resolve(runtime.call(group, Shard.offset_commit, commit(group, {0: 5, 1: 6})))
        await resolve(runtime.call(group, Shard.txn_offset_commit, txn_commit(group, P, {0: 42})))
        await runtime.complete_transaction(1, P, EPOCH, False)  # aborted: 0 stays at 5
        log.roll()
        await resolve(runtime.call(group, Shard.txn_offset_commit, txn_commit(group, Q, {1: 77})))  # open
        log.roll()
        await resolve(runtime.call(other, Shard.offset_commit, commit(other, {0: 1})))
        stable, latest = {0: (5, 0), 1: (-1, ErrorCode.unstable_offset_commit)}, {0: (5, 0), 1: (6, 0)}
        assert (await fetch(runtime, group, True), await fetch(runtime, group, False)) == (stable, latest)

        await runtime.shards[1].compactor.run_now()
        assert runtime.shards[1].compactor.passes >= 1
        await runtime.move_away_and_back(1)
        await runtime.wait_loaded()
        assert (await fetch(runtime, group, True), await fetch(runtime, group, False)) == (stable, latest)

        await runtime.complete_transaction(1, Q, EPOCH, True)
        log = runtime.shards[1].log
        log.roll()
        await resolve(runtime.call(other, Shard.offset_commit, commit(other, {0: 2})))
        await runtime.shards[1].compactor.run_now()  # now the whole log: Q's commit replaces 6
        await runtime.move_away_and_back(1)
        await runtime.wait_loaded()
        assert await fetch(runtime, group, True) == {0: (5, 0), 1: (77, 0)}
        await runtime.close()

    asyncio.run(main())
