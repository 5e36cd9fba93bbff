"""The broker-wide flusher on real logs: writes of many partitions share rounds, each gets its own outcome,
a failing disk fails only the write that hit it, and closing finishes what is queued."""

from __future__ import annotations

import asyncio

import pytest

from herd.coordinator import Record
from herd.log.api import KafkaStorageError, LogConfig
from herd.log.fs import MemoryFileSystem
from herd.log.store import SegmentStore
from herd.runtime.batches import encode_batch
from herd.runtime.flusher import Flusher

BATCH = encode_batch([Record(b"key", b"value")], 1_700_000_000_000)


def logs(fs: MemoryFileSystem, n: int) -> list:
    store = SegmentStore("/data", fs)
    return [store.open_partition("__consumer_offsets", p, LogConfig()) for p in range(n)]


def test_writes_queued_together_share_a_round_and_are_durable() -> None:
    async def main() -> None:
        fs = MemoryFileSystem()
        partitions = logs(fs, 8)
        flusher = Flusher(asyncio.get_running_loop(), threads=4)
        futures = [flusher.write(log, BATCH, 0) for log in partitions]
        results = await asyncio.gather(*futures)
        assert [r.base_offset for r in results] == [0] * 8
        assert all(log.flushed_offset == 1 for log in partitions)
        assert flusher.rounds <= 2  # the first round may start before the others are queued
        again = await asyncio.gather(*(flusher.write(log, BATCH, 0) for log in partitions))
        assert [r.base_offset for r in again] == [1] * 8
        await asyncio.get_running_loop().run_in_executor(None, flusher.close)
        crashed = fs.crash()
        assert [log.log_end_offset for log in logs(crashed, 8)] == [2] * 8

    asyncio.run(main())


def test_a_disk_error_fails_the_write_that_hit_it() -> None:
    async def main() -> None:
        fs = MemoryFileSystem()
        first, second = logs(fs, 2)
        flusher = Flusher(asyncio.get_running_loop(), threads=1)
        fs.fail("fsync")
        outcomes = await asyncio.gather(
            flusher.write(first, BATCH, 0), flusher.write(second, BATCH, 0), return_exceptions=True
        )
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], KafkaStorageError)
        await asyncio.get_running_loop().run_in_executor(None, flusher.close)

    asyncio.run(main())


def test_closing_finishes_the_queue_and_refuses_more() -> None:
    async def main() -> None:
        (log,) = logs(MemoryFileSystem(), 1)
        flusher = Flusher(asyncio.get_running_loop())
        pending = flusher.write(log, BATCH, 0)
        await asyncio.get_running_loop().run_in_executor(None, flusher.close)
        assert (await pending).base_offset == 0
        with pytest.raises(RuntimeError):
            flusher.write(log, BATCH, 0)

    asyncio.run(main())


def test_a_round_with_more_batches_than_writev_takes_buffers(tmp_path) -> None:
    """A group commit of thousands of small batches is appended in several writev calls (IOV_MAX)."""

    async def main() -> None:
        store = SegmentStore(str(tmp_path))
        log = store.open_partition("__consumer_offsets", 0, LogConfig())
        flusher = Flusher(asyncio.get_running_loop())
        appended = await flusher.write(log, BATCH * 3000, 0)
        assert (appended.base_offset, appended.last_offset, log.flushed_offset) == (0, 2999, 3000)
        await asyncio.get_running_loop().run_in_executor(None, flusher.close)
        store.close()  # and releases log.dirs' lock, as the broker process would by exiting
        reopened = SegmentStore(str(tmp_path)).open_partition("__consumer_offsets", 0, LogConfig())
        assert reopened.log_end_offset == 3000

    asyncio.run(main())


def test_writers_that_take_a_turn_while_a_round_runs_share_the_next_round() -> None:
    """What writers queue when their turn comes goes into one round, sealed only after all of them queued."""

    async def main() -> None:
        fs = MemoryFileSystem()
        partitions = logs(fs, 6)
        flusher = Flusher(asyncio.get_running_loop(), threads=2)
        first = flusher.write(partitions[0], BATCH, 0)

        async def writer(log) -> object:
            await flusher.turn()
            return await flusher.write(log, BATCH * 2, 0)

        others = [asyncio.ensure_future(writer(log)) for log in partitions[1:]]
        assert (await first).base_offset == 0
        results = await asyncio.gather(*others)
        assert [(r.base_offset, r.last_offset) for r in results] == [(0, 1)] * 5
        assert flusher.rounds == 2
        assert [log.flushed_offset for log in partitions] == [1, 2, 2, 2, 2, 2]
        await asyncio.get_running_loop().run_in_executor(None, flusher.close)
        assert [log.log_end_offset for log in logs(fs.crash(), 6)] == [1, 2, 2, 2, 2, 2]

    asyncio.run(main())


def test_a_failed_fsync_fails_only_the_writes_of_its_log_in_a_shared_round() -> None:
    async def main() -> None:
        fs = MemoryFileSystem()
        partitions = logs(fs, 4)
        flusher = Flusher(asyncio.get_running_loop(), threads=4)
        await flusher.turn()  # the writes below are queued before the round is sealed
        fs.fail("fsync")
        outcomes = await asyncio.gather(*(flusher.write(log, BATCH, 0) for log in partitions), return_exceptions=True)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(failed) == 1 and isinstance(failed[0], KafkaStorageError)
        assert flusher.rounds == 1
        assert sum(log.flushed_offset for log in partitions) == 3
        await asyncio.get_running_loop().run_in_executor(None, flusher.close)

    asyncio.run(main())
