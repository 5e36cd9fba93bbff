"""The coordinator's writer for partitions stored in PostgreSQL (cluster mode).

A shard's writer (`ShardRuntime._write_loop`) asks its writer for a `turn()` and then `write(log, data, now_ms)`,
and awaits the AppendResult once the batch is durable. On local segment files that is `flusher.Flusher` (append
and fsync in a thread, shared across partitions). A remote log appends in memory on the loop and commits in its
own background transaction, which already takes everything appended while the previous one ran (group commit),
and is fenced by the leader epoch: so here `write` appends at once and waits for that commit, and `turn` has
nothing to wait for.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from herd.log.api import AppendResult, PartitionLog, as_remote
from herd.runtime.stats import Histogram


class Writer(Protocol):
    """What a shard needs of its writer (`flusher.Flusher` or `RemoteWriter`)."""

    def turn(self) -> asyncio.Future[None]: ...

    def write(self, log: PartitionLog, data: bytes, now_ms: int) -> asyncio.Future[AppendResult]: ...


class RemoteWriter:
    def __init__(self, loop: asyncio.AbstractEventLoop, commits: Histogram | None = None) -> None:
        """`commits`: where the time from each append to its commit is recorded."""
        self._loop = loop
        self._commits = commits

    def turn(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self._loop.create_future()
        future.set_result(None)
        return future

    def write(self, log: PartitionLog, data: bytes, now_ms: int) -> asyncio.Future[AppendResult]:
        """Append `data` to the remote `log`; the future holds the AppendResult once it is committed, or the
        LogError of the append or the commit (NotLeaderError when another node took the partition over)."""
        return self._loop.create_task(self._write(log, data, now_ms))

    async def _write(self, log: PartitionLog, data: bytes, now_ms: int) -> AppendResult:
        remote = as_remote(log)
        started = time.perf_counter_ns()
        result = remote.append(data, now_ms)
        await remote.wait_durable(result.last_offset + 1)
        if self._commits is not None:
            self._commits.observe_ns(time.perf_counter_ns() - started)
        return result
