"""Background compaction of one coordinator shard's `__consumer_offsets` partition.

`herd.log.compaction` does the work; this decides when it runs and keeps it off the request path:
- `poll()` is called by the shard runtime whenever its log may have a newly sealed segment (after loading
  and after each durable write). If no pass is running and `compaction.plan` finds the sealed segments
  dirty enough (half their bytes written since the last pass), a pass starts: the cleaning runs in a worker
  thread (`run_in_executor`), so the loop keeps serving requests and writes.
- A finished pass is installed on the loop, and only while no fsync of the log is running in another thread
  (the runtime's writer fsyncs in a worker thread; `idle()` says whether it is between writes). If the
  writer is busy, the runtime calls `install_ready()` between two of its writes.
- A disk error while installing fails the log; `on_failure` hands it to the runtime, which fails the shard
  as for a failed write. A failed or cancelled cleaning only logs: nothing was changed.
- `close()` cancels a running pass and waits for its thread to stop (it checks between batches).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from herd.log import compaction
from herd.log.api import RemotePartitionLog, as_remote
from herd.runtime.timer import WallClock

log = logging.getLogger(__name__)

REMOTE_INTERVAL_MS = 30_000  # how often a partition stored in PostgreSQL is checked for compaction


class Compactor:
    def __init__(self, partition_log: object, *, loop: asyncio.AbstractEventLoop, clock: WallClock,
                 delete_retention_ms: int, idle: Callable[[], bool],
                 on_failure: Callable[[BaseException], None], enabled: bool = True) -> None:  # fmt: skip
        self.log = partition_log
        self._loop = loop
        self._clock = clock
        self._delete_retention_ms = delete_retention_ms
        self._idle = idle
        self._on_failure = on_failure
        self._task: asyncio.Task[None] | None = None
        self._plan: compaction.Plan | None = None
        self._ready: compaction.Cleaned | None = None
        self._closed = False
        # A log that compacts itself (`RemotePartitionLog.compact`: PostgreSQL's, fenced like every write): this
        # only decides when, at most every REMOTE_INTERVAL_MS, since deciding reads its rows. A segment log is
        # compacted here (herd.log.compaction over its `cleanable_segments`).
        self._remote: RemotePartitionLog | None = (
            as_remote(partition_log) if callable(getattr(partition_log, "compact", None)) else None
        )
        self._remote_checked_ms = -REMOTE_INTERVAL_MS
        # `enabled` False: a topic that is not compacted (host.CoordinatorKind.compacted)
        self.supported = enabled and (self._remote is not None or hasattr(partition_log, "cleanable_segments"))
        self.passes = 0  # passes installed (for tests and benchmarks)

    @property
    def running(self) -> bool:
        return self._task is not None

    def poll(self, *, force: bool = False) -> asyncio.Task[None] | None:
        """Start a pass if none is running and the log is dirty enough (or `force`); returns its task."""
        if self._closed or not self.supported or self._task is not None or self._ready is not None:
            return self._task
        if self._remote is not None:
            now = self._clock.now_ms()
            if not force and now - self._remote_checked_ms < REMOTE_INTERVAL_MS:
                return None
            self._remote_checked_ms = now
            self._task = self._loop.create_task(self._run_remote(self._remote, force))
            return self._task
        p = compaction.plan(self.log, self._clock.now_ms(), self._delete_retention_ms, force=force)
        if p is None:
            return None
        self._plan = p
        self._task = self._loop.create_task(self._run(p))
        return self._task

    async def run_now(self, *, force: bool = True) -> None:
        """Run a pass to its end (installed, or abandoned) — for tests and benchmarks."""
        while self._task is not None:
            await asyncio.shield(self._task)
        task = self.poll(force=force)
        if task is not None:
            await asyncio.shield(task)
        while self._ready is not None and not self._closed:
            await asyncio.sleep(0.001)

    async def _run_remote(self, remote: RemotePartitionLog, force: bool) -> None:
        started = time.monotonic()
        try:
            stats = await remote.compact(self._delete_retention_ms, self._clock.now_ms(), force=force)
        except Exception as error:  # taken over, or the database failed: the log is valid as it is
            log.warning(
                "compaction of %s-%d stopped, the log stays valid as it is: %s", remote.topic, remote.partition, error
            )
            return
        finally:
            self._task = None
        if stats is not None:
            self.passes += 1
            log.info(
                "compacted %s-%d: %s, in %.2f s", remote.topic, remote.partition, stats, time.monotonic() - started
            )

    async def _run(self, p: compaction.Plan) -> None:
        started = time.monotonic()
        try:
            cleaned = await self._loop.run_in_executor(None, compaction.clean, p)
        except compaction.CompactionCancelled:
            return
        except OSError as error:
            log.warning("compaction of %s failed, the log is unchanged: %s", p.directory, error)
            return
        finally:
            self._task = None
            self._plan = None
        if self._closed:
            compaction.remove_leftovers(p.fs, p.directory, (compaction.CLEANED,))
            return
        self._ready = cleaned
        log.info(
            "compacted %s: %d of %d records kept, %d -> %d bytes, in %.2f s",
            p.directory,
            cleaned.stats.records_kept,
            cleaned.stats.records_read,
            cleaned.stats.bytes_read,
            cleaned.stats.bytes_written,
            time.monotonic() - started,
        )
        if self._idle():
            self.install_ready()

    def install_ready(self) -> None:
        """Install a finished pass. Call only while no flush of the log runs."""
        cleaned, self._ready = self._ready, None
        if cleaned is None or self._closed:
            return
        try:
            compaction.install(self.log, cleaned)
        except Exception as error:  # a KafkaStorageError: the log failed half-way and refuses further work
            self._on_failure(error)
            return
        self.passes += 1

    def stop(self) -> None:
        """Start no more passes and ask a running one to stop: a local pass notices between two batches; a
        remote one is cancelled (each of its statements is atomic and fenced, so the log stays valid), so that
        unloading the shard does not wait for a whole pass over the database."""
        self._closed = True
        if self._plan is not None:
            self._plan.cancelled.set()
        if self._remote is not None and self._task is not None:
            self._task.cancel()

    async def close(self) -> None:
        """`stop`, then wait for the worker thread; a finished pass is dropped."""
        self.stop()
        task = self._task
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        if self._ready is not None:
            p = self._ready.plan
            self._ready = None
            compaction.remove_leftovers(p.fs, p.directory, (compaction.CLEANED,))
