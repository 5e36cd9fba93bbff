"""One coordinator shard on the event loop: load, serve, write durably, unload.

A `ShardRuntime` owns one coordinator partition's shard (a `GroupCoordinatorShard` for `__consumer_offsets`, a
`TransactionCoordinatorShard` for `__transaction_state`: any `machine.CoordinatorShard`), its log and its timer.
It is the asyncio driver of a `machine.ShardMachine`, which decides everything that is not I/O: staging and
replaying each Result, the order in which replies are released, failure and unloading (the rules are in
runtime/machine.py; the coordinator simulator, tests/simulation, drives the same machine over simulated time).
What is left here is what awaits: the writer, loading, unloading, and compaction in the background.

Its life: LOADING (every record of the partition is replayed; requests get COORDINATOR_LOAD_IN_PROGRESS)
-> ACTIVE -> UNLOADING (no new requests: NOT_COORDINATOR; pending writes finish) -> UNLOADED, or FAILED
when the disk fails under the partition: everything pending is answered with the mapped error (a storage
error becomes NOT_COORDINATOR, as in Kafka's GroupCoordinatorService), the groups are unloaded, new requests
get NOT_COORDINATOR and FindCoordinator COORDINATOR_NOT_AVAILABLE, and `on_failed` tells the shard's host
(runtime/host.py), which reloads the partition from its log after a backoff (herd.runtime.recovery). Kafka reverts a
shard's state to the last written offset when an append fails (CoordinatorRuntime, revertLastWrittenOffset);
herd replays before it writes, so replaying the log again is its way back to the durable state.

Compaction (`compactor.Compactor`) runs in the background: after loading and after each durable write it may
start a pass in a worker thread, and a finished pass is installed only between two writes, never while the
writer's fsync runs in its thread.

The writer is group commit. While a write is in flight everything that arrives is staged; when it
completes, the writer takes *all* staged batches (`ShardMachine.begin_write`) and has them appended with one
call and fsynced once in another thread (the broker-wide `flusher.Flusher`, which writes every waiting partition
in one round and gives each writer its turn just before a round starts, so the batch holds everything staged
until then), so the loop keeps serving, checks `flushed_offset` covers them and has the machine release their
replies in order (`written`). One write at a time: the log is never appended to while its fsync runs, so it
needs no locking. A batch over the partition's max message size is refused before it is replayed (the machine's
`refuse`, answered MESSAGE_TOO_LARGE), so a write can only fail for a disk error, which fails the shard
(`write_failed`): replaying first cannot leave acknowledged state that is not in the log.

Transactions: a Result with a `marker` (the core's `complete_transaction`, which the transaction coordinator
asks for through `CoordinatorRuntime.complete_transaction`) is written as a control batch like any other
batch, in order with the shard's other writes (never appended to the log from outside while the flusher
writes it). Loading replays control batches (`batches.read_batches`) with `replay_end_transaction_marker` and
transactional batches with their producer id.

Replies are `ReplyHandle`s: a handle answered before its request's handler returned is returned as a
plain response (no task, no future); otherwise the caller gets a future. What else a released reply means is
the owner's `release` (the transaction coordinator starts writing markers for its `WriteMarkers` handles).
Heartbeats, the most frequent request by far, have a path of their own (`heartbeat`): with nothing waiting to
be written the core's `heartbeat_error` is called directly and its code returned, without the request, Result
and handle objects; behind a pending write they take the general path, so their answer still waits for it, as
in Kafka.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from herd.cluster.topics import OFFSETS_TOPIC
from herd.coordinator import CoordinatorConfig, CoordinatorError, ErrorCode, GroupCoordinatorShard, Result
from herd.coordinator.result import Reply
from herd.log.api import KafkaStorageError, LogError, NotInMemoryError, PartitionLog, as_remote
from herd.log.batch import LOG_OVERHEAD, parse_header, peek_prefix
from herd.log.compaction import DEFAULT_DELETE_RETENTION_MS
from herd.runtime.batches import read_batches
from herd.runtime.commits import Writer
from herd.runtime.compactor import Compactor
from herd.runtime.machine import CoordinatorShard, Pending, ShardMachine, ShardState, StateDiverged
from herd.runtime.timer import AsyncioTimer, WallClock

__all__ = ["Handler", "ReplyHandle", "ShardRuntime", "ShardState", "StateDiverged", "deliver", "group_shard"]

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1024 * 1024
REMOTE_LOAD_CHUNK_BYTES = 4 * 1024 * 1024  # a query per chunk: fewer, larger ones

S = TypeVar("S", bound=CoordinatorShard)
Request = TypeVar("Request")
# A request handler of the core, named by the class's own function (`GroupCoordinatorShard.join_group`):
# called with the shard, the request and the reply handle.
Handler = Callable[[GroupCoordinatorShard, Request, object], Result]


class _GcPause:
    """Counts the loads in progress; the collector is off while there is one (see `ShardRuntime.load`)."""

    loads = 0
    reenable = False


@contextmanager
def _gc_paused() -> Iterator[None]:
    if _GcPause.loads == 0:
        _GcPause.reenable = gc.isenabled()
        gc.disable()
    _GcPause.loads += 1
    try:
        yield
    finally:
        _GcPause.loads -= 1
        if _GcPause.loads == 0 and _GcPause.reenable:
            gc.enable()


class ReplyHandle:
    """What the core gets as `reply`: the runtime delivers one response to it, once."""

    __slots__ = ("response", "future", "delivered")

    def __init__(self) -> None:
        self.response: object = None
        self.future: asyncio.Future[object] | None = None
        self.delivered = False

    def deliver(self, response: object) -> None:
        if self.delivered:
            return
        self.delivered = True
        self.response = response
        future = self.future
        if future is not None and not future.done():
            future.set_result(response)

    def outcome(self, loop: asyncio.AbstractEventLoop) -> object:
        """The response if it is already known, else a future of it."""
        if self.delivered:
            return self.response
        self.future = loop.create_future()
        return self.future


def deliver(replies: tuple[Reply, ...]) -> None:
    for reply in replies:
        handle = reply.handle
        if isinstance(handle, ReplyHandle):
            handle.deliver(reply.response)


def group_shard(config: CoordinatorConfig, clock: WallClock) -> Callable[[AsyncioTimer], GroupCoordinatorShard]:
    """What a `ShardRuntime` of a `__consumer_offsets` partition runs: the group coordinator's shard."""
    return lambda timer: GroupCoordinatorShard(clock=clock, timer=timer, config=config)


class ShardRuntime(Generic[S]):
    """The asyncio driver of one shard's `ShardMachine` (see the module docstring). `new_shard(timer)` makes the
    core it runs; `release` delivers the replies the machine releases (default: to their `ReplyHandle`s)."""

    def __init__(
        self,
        partition: int,
        partition_log: PartitionLog,
        new_shard: Callable[[AsyncioTimer], S],
        *,
        clock: WallClock,
        loop: asyncio.AbstractEventLoop,
        max_batch_bytes: int,
        flusher: Writer,
        topic: str = OFFSETS_TOPIC,
        release: Callable[[tuple[Reply, ...]], None] = deliver,
        delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
        compacted: bool = True,
        on_failed: Callable[[ShardRuntime[S], BaseException, int], None] | None = None,
        on_written: Callable[[ShardRuntime[S]], None] | None = None,
    ) -> None:
        self.partition = partition
        self.log = partition_log
        self.topic = topic  # the partition's topic, for messages
        self._loop = loop
        self._clock = clock
        self._max_batch_bytes = max_batch_bytes
        self._flusher = flusher
        self._on_failed = on_failed  # (shard, error, requests answered with errors): the runtime reloads it
        self._on_written = on_written  # called after the first durable write, then cleared (recovery)
        self.timer = AsyncioTimer(loop, clock, self._timer_result)
        self.shard: S = new_shard(self.timer)
        self.machine: ShardMachine[S] = ShardMachine(
            self.shard,
            clock=clock,
            timers=self.timer,
            release=release,
            start_writing=self._start_writing,
            refuse=self._too_large,
            on_failed=self._failed,
        )
        self.apply: Callable[[Result], None] = self.machine.apply  # stage, replay or release one Result
        self._writer: asyncio.Task[None] | None = None
        self.writes = 0  # batches made durable (for tests and benchmarks)
        self.fsyncs = 0
        self.compactor = Compactor(
            partition_log,
            loop=loop,
            clock=clock,
            delete_retention_ms=delete_retention_ms,
            enabled=compacted,
            idle=lambda: self._writer is None,
            on_failure=self.machine.fail,  # installing a compacted segment failed: the shard fails too
        )

    @property
    def state(self) -> ShardState:
        return self.machine.state

    # -- requests ----------------------------------------------------------------------------------------------

    def unavailable_error(self) -> ErrorCode | None:
        return self.machine.unavailable_error()

    def call(self, handler: Callable[[S, Request, object], Result], request: Request) -> object:
        """Run one request handler of the shard (`handler(self.shard, request, reply)`, e.g.
        `GroupCoordinatorShard.join_group`); returns its response or a future of it.

        Raises CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR) unless the shard is active.
        """
        if self.machine.state is not ShardState.ACTIVE:
            self._unavailable()
        handle = ReplyHandle()
        self.apply(handler(self.shard, request, handle))
        return handle.outcome(self._loop)

    def heartbeat(
        self: ShardRuntime[GroupCoordinatorShard],
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
    ) -> ErrorCode | None:
        """The heartbeat fast path: the answer's error code, or None when writes are pending (the caller then
        goes through `call`, whose answer waits for them: Kafka completes a write operation that produced no
        records at once only if nothing is pending, CoordinatorRuntime.CoordinatorWriteEvent). Raises
        CoordinatorError like `call`."""
        machine = self.machine
        if machine.state is not ShardState.ACTIVE:
            self._unavailable()
        if machine.staged or machine.writing:
            return None
        return self.shard.heartbeat_error(group_id, generation_id, member_id, instance_id)

    def consumer_group_keep_alive(
        self: ShardRuntime[GroupCoordinatorShard],
        group_id: str,
        member_id: str,
        member_epoch: int,
        client_id: str,
        client_host: str,
    ) -> tuple[str, int, int] | None:
        """The ConsumerGroupHeartbeat fast path, as `heartbeat`'s: the answer of a keep-alive, or None when writes
        are pending or the heartbeat must go through `call`. Raises CoordinatorError like `call`."""
        machine = self.machine
        if machine.state is not ShardState.ACTIVE:
            self._unavailable()
        if machine.staged or machine.writing:
            return None
        return self.shard.consumer_group_keep_alive(group_id, member_id, member_epoch, client_id, client_host)

    def on_topics_deleted(self: ShardRuntime[GroupCoordinatorShard], topics: frozenset[str]) -> bool:
        """Tombstones for the offsets committed on `topics`, written in the background; False (nothing done)
        unless the shard is active."""
        if self.machine.state is not ShardState.ACTIVE:
            return False
        self.apply(self.shard.on_topics_deleted(topics))
        return True

    def _unavailable(self) -> None:
        """Raises CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR) unless the shard is active."""
        error = self.machine.unavailable_error()
        if error is not None:
            raise CoordinatorError(error, f"{self.topic}-{self.partition} is {self.machine.state.value}")

    @property
    def pending(self) -> bool:
        return self.machine.pending

    @property
    def records(self) -> int:
        """How many records the partition's log holds (compaction's tombstones and duplicates included)."""
        return self.log.log_end_offset - self.log.log_start_offset

    # -- what the machine asks for -----------------------------------------------------------------------------

    def _timer_result(self, result: Result) -> None:
        self.machine.apply(result)

    def _too_large(self, batch: bytes) -> bool:
        if len(batch) <= self._max_batch_bytes:
            return False
        log.warning(
            "%s-%d: refusing a %d-byte batch (max %d)", self.topic, self.partition, len(batch), self._max_batch_bytes
        )
        return True

    def _start_writing(self) -> None:
        self._writer = self._loop.create_task(self._write_loop())

    def _failed(self, error: BaseException, answered: int) -> None:
        self.compactor.stop()
        if self._on_failed is not None:
            self._on_failed(self, error, answered)  # the runtime logs it (once) and reloads the partition
        else:
            log.error(
                "%s-%d failed (%s): %d pending requests answered with errors, its state unloaded",
                self.topic,
                self.partition,
                error,
                answered,
            )

    # -- the writer --------------------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        machine = self.machine
        try:
            while machine.staged:
                self.compactor.install_ready()  # between two fsyncs: the only time the log may change under it
                await self._flusher.turn()  # all that is staged when the next round starts goes into it
                await self._write(machine.begin_write())
                machine.written()
                if self._on_written is not None:
                    on_written, self._on_written = self._on_written, None
                    on_written(self)
                self.compactor.poll()
        except Exception as error:  # a LogError or OSError from the disk; anything else is a bug, same remedy
            machine.write_failed(error)
        finally:
            machine.writer_stopped()
            self._writer = None
            self.compactor.install_ready()

    async def _write(self, entries: list[Pending]) -> None:
        data = b"".join([e.batch for e in entries if e.batch is not None])
        if not data:
            return
        appended = await self._flusher.write(self.log, data, self._clock.now_ms())
        target = appended.last_offset + 1
        self.fsyncs += 1
        if self.log.flushed_offset < target:
            raise KafkaStorageError(f"flushed to {self.log.flushed_offset}, wanted {target}")
        self.writes += sum(1 for e in entries if e.batch is not None)

    # -- loading and unloading ---------------------------------------------------------------------------------

    async def load(self) -> None:
        """Replay the whole partition, then go active (`on_loaded`). Yields to the loop between chunks.

        The cyclic garbage collector is paused while any partition loads: replay allocates a few objects per
        offset and none of them form cycles, yet each collection would walk the whole growing state (with
        it, a million offsets loaded in twice the time)."""
        machine = self.machine
        try:
            with _gc_paused():
                await self._replay_log()
        except LogError as error:  # the disk: the runtime retries
            machine.load_failed(error)
            return
        except ValueError as error:  # a corrupt record: reloading would not help
            log.error("%s-%d cannot be loaded: %s", self.topic, self.partition, error)
            machine.load_failed(None)
            return
        except Exception:  # a bug; the partition must not stay "loading" for ever
            log.exception("%s-%d cannot be loaded", self.topic, self.partition)
            machine.load_failed(None)
            return
        if machine.state is not ShardState.LOADING:
            return
        log.debug(
            "%s-%d loaded (%d records up to offset %d)",
            self.topic,
            self.partition,
            self.records,
            self.log.log_end_offset,
        )
        machine.loaded()
        self.compactor.poll()

    async def _replay_log(self) -> None:
        """Replay the log from its start, reading what it holds in memory (a segment log: the page cache); a log
        that does not hold the rest says so (NotInMemoryError: a remote log, whose batches are in its database),
        and the rest is read from its store (`_replay_stored`)."""
        # its open transactions and epochs, which its last stable offset (and so compaction's limit) and the
        # producer epochs of its appends depend on (nothing to do for a segment log, read with its files)
        await self.log.load_transactions()
        machine = self.machine
        replay = machine.load_batch
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset and machine.state is ShardState.LOADING:
            try:
                data = self.log.read(offset, LOAD_CHUNK_BYTES)
            except NotInMemoryError:
                await self._replay_stored(offset)
                return
            start = offset
            for batch in read_batches(data):
                replay(batch)
                offset = batch.next_offset
            if offset == start:
                raise ValueError(f"no batch readable at offset {offset}")
            await asyncio.sleep(0)

    async def _replay_stored(self, offset: int) -> None:
        """The rest of the replay from `offset`, for a log whose batches are in a database (cluster mode): read
        with `read_async`, in larger chunks, and the next chunk is already on its way while one is replayed, so
        the database's work and the replay overlap. A compacted log may end in a gap (its last batches emptied):
        the reads then come back empty."""
        partition_log = as_remote(self.log)
        machine = self.machine
        replay = machine.load_batch
        end = partition_log.log_end_offset
        reading = (
            self._loop.create_task(partition_log.read_async(offset, REMOTE_LOAD_CHUNK_BYTES)) if offset < end else None
        )
        try:
            while reading is not None and machine.state is ShardState.LOADING:
                data = await reading
                reading = None
                if not data:
                    return
                offset = _end_of_batches(data)
                if offset < end:
                    reading = self._loop.create_task(partition_log.read_async(offset, REMOTE_LOAD_CHUNK_BYTES))
                for batch in read_batches(data):
                    replay(batch)
                await asyncio.sleep(0)
        finally:
            if reading is not None:
                reading.cancel()

    async def unload(self) -> None:
        """Stop serving: finish and acknowledge pending writes, answer parked requests NOT_COORDINATOR."""
        if not self.machine.unload():
            return
        while self._writer is not None:
            await asyncio.shield(self._writer)
        await self.compactor.close()
        self.machine.unloaded()


def _end_of_batches(data: bytes) -> int:
    """The offset after the last whole batch of `data` (only the batches' 12-byte prefixes are read on the way);
    raises ValueError if `data` does not start with a whole batch."""
    position = last = 0
    while position + LOG_OVERHEAD <= len(data):
        _, size = peek_prefix(data, position)
        if size <= LOG_OVERHEAD or position + size > len(data):
            break
        last, position = position, position + size
    if position == 0:
        raise ValueError("no whole batch in what the log returned")
    try:
        return parse_header(data, last).next_offset
    except LogError as error:
        raise ValueError(str(error)) from error
