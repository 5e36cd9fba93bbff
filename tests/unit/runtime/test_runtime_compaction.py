"""The coordinator runtime compacts its `__consumer_offsets` partitions in the background, and acknowledged
commits survive crashes with torn writes on the fault-injecting filesystem, compaction included.
Each test runs its own loop (`asyncio.run`); nothing is mocked."""

from __future__ import annotations

import asyncio
import random

import pytest

from herd.coordinator import GroupCoordinatorShard as Shard
from herd.coordinator.requests import CommitPartition, CommitTopic, OffsetCommit
from herd.log.fs import MemoryFileSystem
from herd.runtime.batches import decode_batches
from herd.runtime.shard import LOAD_CHUNK_BYTES

from .helpers import fetch, group_on, make_runtime, offsets_of, resolve, started, until

SMALL_SEGMENTS = {"offsets.topic.segment.bytes": "4096"}


def commit_req(group: str, offsets: dict[int, int]) -> OffsetCommit:
    return OffsetCommit(
        group_id=group, topics=(CommitTopic("t", tuple(CommitPartition(p, o) for p, o in offsets.items())),)
    )


def records_in(log) -> int:  # noqa: ANN001 - a PartitionLog
    count, offset = 0, log.log_start_offset
    while offset < log.log_end_offset:
        for next_offset, records in decode_batches(log.read(offset, 1 << 20)):
            count += len(records)
            offset = next_offset
    return count


def test_commits_are_compacted_in_the_background_and_a_reload_replays_only_live_records(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path, **SMALL_SEGMENTS))
        group = group_on(runtime, 0)
        shard = runtime.shards[0]
        for i in range(400):
            response = await resolve(runtime.call(group, Shard.offset_commit, commit_req(group, {0: i, 1: 2 * i})))
            assert response.topics[0].partitions[0].error_code == 0
        await until(lambda: shard.compactor.passes >= 1 and not shard.compactor.running, timeout=20)
        await shard.compactor.run_now()
        written, kept = 400, records_in(shard.log)
        assert kept < written / 4, (kept, written)
        assert offsets_of(await resolve(runtime.call(group, Shard.offset_fetch, fetch(group, (0, 1))))) == {
            0: 399,
            1: 798,
        }
        await runtime.close()
        runtime._cluster.close()

        again = await started(make_runtime(tmp_path, **SMALL_SEGMENTS))
        assert offsets_of(await resolve(again.call(group, Shard.offset_fetch, fetch(group, (0, 1))))) == {
            0: 399,
            1: 798,
        }
        await again.close()

    asyncio.run(main())


def test_a_partition_larger_than_a_load_chunk_reloads_whole(tmp_path):
    """The loader reads 1 MiB at a time; the log answers reads inside a segment with views of its buffer."""

    async def main() -> None:
        runtime = await started(make_runtime(tmp_path), partitions=[2])
        group = group_on(runtime, 2)
        calls = [
            runtime.call(group, Shard.offset_commit, commit_req(group, {p: 1000 * i + p for p in range(50)}))
            for i in range(1000)
        ]
        for call in calls:
            await resolve(call)
        assert runtime.shards[2].log.size_in_bytes > 2 * LOAD_CHUNK_BYTES
        await runtime.close()
        runtime._cluster.close()

        again = await started(make_runtime(tmp_path), partitions=[2])
        fetched = await resolve(again.call(group, Shard.offset_fetch, fetch(group, tuple(range(50)))))
        assert offsets_of(fetched) == {p: 999_000 + p for p in range(50)}
        await again.close()

    asyncio.run(main())


def test_commits_go_on_while_a_pass_runs_and_all_of_them_count(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path, **SMALL_SEGMENTS))
        group = group_on(runtime, 1)
        shard = runtime.shards[1]
        for i in range(200):
            await resolve(runtime.call(group, Shard.offset_commit, commit_req(group, {i % 7: i})))
        task = shard.compactor.poll(force=True)
        assert task is not None and shard.compactor.running
        during = [runtime.call(group, Shard.offset_commit, commit_req(group, {i % 7: 1000 + i})) for i in range(50)]
        answers = [await resolve(r) for r in during]
        assert all(a.topics[0].partitions[0].error_code == 0 for a in answers)
        await task
        await until(lambda: shard.compactor.passes >= 1)
        expected = {p: max(1000 + i for i in range(50) if i % 7 == p) for p in range(7)}
        assert (
            offsets_of(await resolve(runtime.call(group, Shard.offset_fetch, fetch(group, tuple(range(7))))))
            == expected
        )
        await runtime.close()

    asyncio.run(main())


@pytest.mark.parametrize("seed", range(3))
def test_acknowledged_commits_survive_crashes_with_torn_writes_and_compaction(tmp_path, seed):
    """Rounds of: reload the partition from what the last crash left, check it, commit continuously, crash
    (keep a random prefix of every file's unsynced tail) at a random moment, possibly mid-write or mid-pass.
    After every crash each partition's offset is the last acknowledged one or one sent after it (a write in
    flight may land), never one that was not sent."""
    rng = random.Random(seed)
    fs = MemoryFileSystem()
    sent: dict[int, list[int]] = {p: [] for p in range(4)}
    acked: dict[int, int] = {}

    def check(found: dict[int, int]) -> None:
        for p, offset in found.items():  # values sent to a partition only grow
            assert offset >= acked.get(p, -1), (p, offset, acked.get(p))
            assert offset == -1 or offset in sent[p], (p, offset)

    async def round_(fs: MemoryFileSystem) -> MemoryFileSystem:
        runtime = await started(make_runtime(tmp_path, fs=fs, **SMALL_SEGMENTS), partitions=[0])
        group = group_on(runtime, 0)
        check(offsets_of(await resolve(runtime.call(group, Shard.offset_fetch, fetch(group, (0, 1, 2, 3))))))
        pending: list[tuple[asyncio.Future | object, int, int]] = []
        for _ in range(rng.randrange(20, 120)):
            p = rng.randrange(4)
            value = sent[p][-1] + 1 if sent[p] else 0
            sent[p].append(value)
            pending.append((runtime.call(group, Shard.offset_commit, commit_req(group, {p: value})), p, value))
            if rng.random() < 0.3:
                await asyncio.sleep(0)
            if rng.random() < 0.1 and isinstance(pending[0][0], asyncio.Future):
                await pending[0][0]  # let the fsync thread catch up now and then: some commits are answered
            if rng.random() < 0.05:
                runtime.shards[0].compactor.poll(force=True)
            for entry in [x for x in pending if not isinstance(x[0], asyncio.Future) or x[0].done()]:
                outcome, q, v = entry
                response = outcome.result() if isinstance(outcome, asyncio.Future) else outcome
                if response.topics[0].partitions[0].error_code == 0:
                    acked[q] = max(acked.get(q, -1), v)
                pending.remove(entry)
        crashed = fs.crash(lambda path, tail: rng.randrange(len(tail) + 1))
        await runtime.close()
        runtime._cluster._store.close()
        return crashed

    for _ in range(12):
        fs = asyncio.run(round_(fs))
    final = asyncio.run(_read(tmp_path, fs))
    check(final)
    assert acked, "no commit was ever acknowledged"


async def _read(tmp_path, fs: MemoryFileSystem) -> dict[int, int]:  # noqa: ANN001
    runtime = await started(make_runtime(tmp_path, fs=fs, **SMALL_SEGMENTS), partitions=[0])
    group = group_on(runtime, 0)
    found = offsets_of(await resolve(runtime.call(group, Shard.offset_fetch, fetch(group, (0, 1, 2, 3)))))
    await runtime.close()
    return found
