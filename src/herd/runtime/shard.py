"""One coordinator shard on the event loop: load, serve, write durably, unload.

A `ShardRuntime` owns one `__consumer_offsets` partition's `GroupCoordinatorShard`, its log and its timer.
Its life: LOADING (every record of the partition is replayed; requests get COORDINATOR_LOAD_IN_PROGRESS)
-> ACTIVE -> UNLOADING (no new requests: NOT_COORDINATOR; pending writes finish) -> UNLOADED, or FAILED
when the disk fails under the partition: everything pending is answered with the mapped error (a storage
error becomes NOT_COORDINATOR, as in Kafka's GroupCoordinatorService), the groups are unloaded, new requests
get NOT_COORDINATOR and FindCoordinator COORDINATOR_NOT_AVAILABLE, and `on_failed` tells the coordinator
runtime, which reloads the partition from its log after a backoff (herd.runtime.recovery). Kafka reverts a
shard's state to the last written offset when an append fails (CoordinatorRuntime, revertLastWrittenOffset);
herd replays before it writes, so replaying the log again is its way back to the durable state.

Every Result, whether from a request handler or a timer operation, goes through `apply`, on the loop
thread, synchronously:
- with records: they are encoded as one v2 batch (transactional, of the Result's producer, for a
  TxnOffsetCommit), replayed into the shard at once (so the next request sees them), and staged for the
  writer; the Result's replies wait for the write to be durable;
- without records: its replies are delivered at once if nothing is pending, else they queue behind the
  pending writes (a Result never overtakes an earlier write).

Compaction (`compactor.Compactor`) runs in the background: after loading and after each durable write it may
start a pass in a worker thread, and a finished pass is installed only between two writes, never while the
writer's fsync runs in its thread.

The writer is group commit. While a write is in flight everything that arrives is staged; when it
completes, the writer takes *all* staged batches and has them appended with one call and fsynced once in
another thread (the broker-wide `flusher.Flusher`, which writes every waiting partition in one round and gives
each writer its turn just before a round starts, so the batch holds everything staged until then), so the
loop keeps serving, checks `flushed_offset` covers them and releases their replies in order. One write at a
time: the log is never appended to while its fsync runs, so it needs no locking. A batch over the partition's
max message size is refused before it is replayed (`on_append_failed` with MESSAGE_TOO_LARGE), so a write can
only fail for a disk error, which fails the shard: replaying first cannot leave acknowledged state that is
not in the log. A refused batch whose
change live state had already made and no rollback undoes (`StateDiverged`) fails the shard too, so live state
is always what replaying the log gives.

Transactions: a Result with a `marker` (the core's `complete_transaction`, which the transaction coordinator
asks for through `CoordinatorRuntime.complete_transaction`) is written as a control batch like any other
batch, in order with the shard's other writes (never appended to the log from outside while the flusher
writes it), and replayed with `replay_end_transaction_marker` when it is staged, as Kafka's
CoordinatorRuntime.completeTransaction does. Loading replays control batches (`batches.read_batches`) the same
way and transactional batches with their producer id. Every core this runtime drives (the group coordinator's,
the transaction coordinator's) takes the same calls: `replay(record, producer_id=-1, producer_epoch=-1)`,
`replay_loaded_batch(records, producer_id=-1, producer_epoch=-1)`, `replay_end_transaction_marker(producer_id,
commit, producer_epoch=-1)`, `on_loaded()`, `on_append_failed(result, code)`.

Replies are `ReplyHandle`s: a handle answered before its request's handler returned is returned as a
plain response (no task, no future); otherwise the caller gets a future. Heartbeats, the most frequent
request by far, have a path of their own (`heartbeat`): with nothing waiting to be written the core's
`heartbeat_error` is called directly and its code returned, without the request, Result and handle objects;
behind a pending write they take the general path, so their answer still waits for it, as in Kafka.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from herd.coordinator import CoordinatorConfig, CoordinatorError, ErrorCode, GroupCoordinatorShard, Result
from herd.coordinator.result import Reply
from herd.log.api import KafkaStorageError, LogError, PartitionLog, RemotePartitionLog
from herd.log.batch import LOG_OVERHEAD, parse_header, peek_prefix
from herd.log.compaction import DEFAULT_DELETE_RETENTION_MS
from herd.log.records import control_batch
from herd.runtime.batches import LoadedBatch, encode_batch, read_batches
from herd.runtime.commits import Writer
from herd.runtime.compactor import Compactor
from herd.runtime.timer import AsyncioTimer, WallClock

log = logging.getLogger(__name__)

LOAD_CHUNK_BYTES = 1024 * 1024
REMOTE_LOAD_CHUNK_BYTES = 4 * 1024 * 1024  # a query per chunk: fewer, larger ones

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


class StateDiverged(Exception):
    """A refused batch carried a change live state had already made and nothing undoes (a group that became Empty
    when its last sessions expired: Kafka only logs that failed write, GroupMetadataManager's
    completeClassicGroupJoin). The shard fails and is reloaded from its log, so that live state is again what a
    replay of the log gives (found by the coordinator simulator, tests/simulation)."""


class ShardState(Enum):
    LOADING = "loading"
    ACTIVE = "active"
    UNLOADING = "unloading"
    UNLOADED = "unloaded"
    FAILED = "failed"


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


@dataclass(slots=True)
class _Pending:
    result: Result
    batch: bytes | None


class ShardRuntime:
    def __init__(
        self,
        partition: int,
        partition_log: PartitionLog,
        *,
        config: CoordinatorConfig,
        clock: WallClock,
        loop: asyncio.AbstractEventLoop,
        max_batch_bytes: int,
        flusher: Writer,
        delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
        on_failed: Callable[[ShardRuntime, BaseException, int], None] | None = None,
        on_written: Callable[[ShardRuntime], None] | None = None,
    ) -> None:
        self.partition = partition
        self.log = partition_log
        self.state = ShardState.LOADING
        self._loop = loop
        self._clock = clock
        self._max_batch_bytes = max_batch_bytes
        self._flusher = flusher
        self._on_failed = on_failed  # (shard, error, requests answered with errors): the runtime reloads it
        self._on_written = on_written  # called after the first durable write, then cleared (recovery)
        self.timer = AsyncioTimer(loop, clock, self.apply)
        self.shard = self._new_shard(clock, config)
        self._staged: list[_Pending] = []
        self._writer: asyncio.Task[None] | None = None
        self.writes = 0  # batches made durable (for tests and benchmarks)
        self.fsyncs = 0
        self.compactor = Compactor(
            partition_log,
            loop=loop,
            clock=clock,
            delete_retention_ms=delete_retention_ms,
            idle=lambda: self._writer is None,
            on_failure=self._compaction_failed,
        )

    topic = "__consumer_offsets"  # the partition's topic, for messages (runtime/transactions.py hosts another)

    def _new_shard(self, clock: WallClock, config: CoordinatorConfig) -> GroupCoordinatorShard:
        """The core this runtime drives (a subclass hosts another coordinator's: runtime/transactions.py)."""
        return GroupCoordinatorShard(clock=clock, timer=self.timer, config=config)

    def _deliver(self, replies: tuple[Reply, ...]) -> None:
        """Release the replies of a Result whose records are durable (a subclass also acts on handles of its own)."""
        deliver(replies)

    # -- requests ----------------------------------------------------------------------------------------------

    def unavailable_error(self) -> ErrorCode | None:
        if self.state is ShardState.ACTIVE:
            return None
        if self.state is ShardState.LOADING:
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.not_coordinator

    def call(self, handler: Handler[Request], request: Request) -> object:
        """Run one request handler of the shard (`handler(self.shard, request, reply)`, e.g.
        `GroupCoordinatorShard.join_group`); returns its response or a future of it.

        Raises CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR) unless the shard is active.
        """
        self._check_available()
        handle = ReplyHandle()
        self.apply(handler(self.shard, request, handle))
        return handle.outcome(self._loop)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """The heartbeat fast path: the answer's error code, or None when writes are pending (the caller then
        goes through `call`, whose answer waits for them: Kafka completes a write operation that produced no
        records at once only if nothing is pending, CoordinatorRuntime.CoordinatorWriteEvent). Raises
        CoordinatorError like `call`."""
        self._check_available()
        if self.pending:
            return None
        return self.shard.heartbeat_error(group_id, generation_id, member_id, instance_id)

    def on_topics_deleted(self, topics: frozenset[str]) -> bool:
        """Tombstones for the offsets committed on `topics`, written in the background; False (nothing done)
        unless the shard is active."""
        if self.state is not ShardState.ACTIVE:
            return False
        self.apply(self.shard.on_topics_deleted(topics))
        return True

    def _check_available(self) -> None:
        """Raises CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR) unless the shard is active."""
        error = self.unavailable_error()
        if error is not None:
            raise CoordinatorError(error, f"{self.topic}-{self.partition} is {self.state.value}")

    @property
    def pending(self) -> bool:
        return bool(self._staged) or self._writer is not None

    @property
    def records(self) -> int:
        """How many records the partition's log holds (compaction's tombstones and duplicates included)."""
        return self.log.log_end_offset - self.log.log_start_offset

    # -- results -----------------------------------------------------------------------------------------------

    def apply(self, result: Result) -> None:
        """Append (staged), replay and answer one Result; see the module docstring."""
        if self.state not in (ShardState.ACTIVE, ShardState.UNLOADING):
            self._reject(result)
        elif result.marker is not None:
            marker = result.marker
            self.shard.replay_end_transaction_marker(marker.producer_id, marker.commit, marker.producer_epoch)
            self._stage(_Pending(result, control_batch(*marker, self._clock.now_ms(), 0)))
        elif result.records:
            transaction = result.transaction
            if transaction is None:
                batch = encode_batch(result.records, self._clock.now_ms())
            else:  # TxnOffsetCommit: one transactional batch of the producer
                batch = encode_batch(result.records, self._clock.now_ms(), *transaction)
            if len(batch) > self._max_batch_bytes:
                log.warning(
                    "%s-%d: refusing a %d-byte batch (max %d)",
                    self.topic,
                    self.partition,
                    len(batch),
                    self._max_batch_bytes,
                )
                self.apply(self.shard.on_append_failed(result, ErrorCode.message_too_large))
                if result.rollback is None and any(record.applied for record in result.records):
                    self._fail(
                        self._staged,
                        StateDiverged(
                            f"a refused {len(batch)}-byte batch left groups in a state its log does not hold"
                        ),
                    )
                return
            producer = transaction or ()
            for record in result.records:
                self.shard.replay(record, *producer)
            self._stage(_Pending(result, batch))
        elif self.pending:
            self._staged.append(_Pending(result, None))
        else:
            self._deliver(result.replies)

    def _stage(self, pending: _Pending) -> None:
        self._staged.append(pending)
        if self._writer is None:
            self._writer = self._loop.create_task(self._write_loop())

    def _reject(self, result: Result) -> None:
        """A Result that can no longer be written: its requests get the mapped storage error."""
        out = self.shard.on_append_failed(result, ErrorCode.kafka_storage_error)
        deliver(out.replies)

    async def _write_loop(self) -> None:
        entries: list[_Pending] = []
        try:
            while self._staged:
                self.compactor.install_ready()  # between two fsyncs: the only time the log may change under it
                await self._flusher.turn()  # all that is staged when the next round starts goes into it
                entries, self._staged = self._staged, []
                await self._write(entries)
                for entry in entries:
                    self._deliver(entry.result.replies)
                entries = []
                if self._on_written is not None:
                    on_written, self._on_written = self._on_written, None
                    on_written(self)
                self.compactor.poll()
        except Exception as error:  # a LogError or OSError from the disk; anything else is a bug, same remedy
            self._fail(entries + self._staged, error)
        finally:
            self._writer = None
            self.compactor.install_ready()

    def _compaction_failed(self, error: BaseException) -> None:
        """Installing a compacted segment failed on the disk: the log refuses work; so does the shard."""
        self._fail(self._staged, error)

    async def _write(self, entries: list[_Pending]) -> None:
        data = b"".join(e.batch for e in entries if e.batch is not None)
        if not data:
            return
        appended = await self._flusher.write(self.log, data, self._clock.now_ms())
        target = appended.last_offset + 1
        self.fsyncs += 1
        if self.log.flushed_offset < target:
            raise KafkaStorageError(f"flushed to {self.log.flushed_offset}, wanted {target}")
        self.writes += sum(1 for e in entries if e.batch is not None)

    def _fail(self, entries: list[_Pending], error: BaseException) -> None:
        if self.state is ShardState.FAILED:
            return
        self.state = ShardState.FAILED
        self._staged = []
        self.compactor.stop()
        for entry in entries:
            self._reject(entry.result)
        deliver(self.shard.on_unloaded().replies)
        self.timer.cancel_all()
        self._failed(error, len(entries))

    def _failed(self, error: BaseException, answered: int) -> None:
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

    # -- loading and unloading ---------------------------------------------------------------------------------

    async def load(self) -> None:
        """Replay the whole partition, then go active (`on_loaded`). Yields to the loop between chunks.

        The cyclic garbage collector is paused while any partition loads: replay allocates a few objects per
        offset and none of them form cycles, yet each collection would walk the whole growing state (with
        it, a million offsets loaded in twice the time)."""
        try:
            with _gc_paused():
                await self._replay_log()
        except LogError as error:  # the disk: the runtime retries
            self.state = ShardState.FAILED
            self._failed(error, 0)
            return
        except ValueError as error:  # a corrupt record: reloading would not help
            log.error("%s-%d cannot be loaded: %s", self.topic, self.partition, error)
            self.state = ShardState.FAILED
            return
        except Exception:  # a bug; the partition must not stay "loading" for ever
            log.exception("%s-%d cannot be loaded", self.topic, self.partition)
            self.state = ShardState.FAILED
            return
        if self.state is not ShardState.LOADING:
            return
        self.state = ShardState.ACTIVE
        log.debug(
            "%s-%d loaded (%d records up to offset %d)",
            self.topic,
            self.partition,
            self.records,
            self.log.log_end_offset,
        )
        self.apply(self.shard.on_loaded())
        self.compactor.poll()

    async def _replay_log(self) -> None:
        if self.log.remote:
            await self._replay_remote_log()
            return
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset and self.state is ShardState.LOADING:
            data = self.log.read(offset, LOAD_CHUNK_BYTES)
            start = offset
            for batch in read_batches(data):
                self._replay_loaded(batch)
                offset = batch.next_offset
            if offset == start:
                raise ValueError(f"no batch readable at offset {offset}")
            await asyncio.sleep(0)

    async def _replay_remote_log(self) -> None:
        """A log in the database (cluster mode) is read with `read_async`, in larger chunks, and the next chunk
        is already on its way while one is replayed, so the database's work and the replay overlap. A
        compacted log may end in a gap (its last batches emptied): the reads then come back empty."""
        partition_log: RemotePartitionLog = self.log  # type: ignore[assignment]
        load_transactions = getattr(partition_log, "load_transactions", None)
        if load_transactions is not None:  # its open transactions and epochs, which its last stable offset (and so
            await load_transactions()  # compaction's limit) and the producer epochs of its appends depend on
        end = partition_log.log_end_offset
        offset = partition_log.log_start_offset
        reading = (
            self._loop.create_task(partition_log.read_async(offset, REMOTE_LOAD_CHUNK_BYTES)) if offset < end else None
        )
        try:
            while reading is not None and self.state is ShardState.LOADING:
                data = await reading
                reading = None
                if not data:
                    return
                offset = _end_of_batches(data)
                if offset < end:
                    reading = self._loop.create_task(partition_log.read_async(offset, REMOTE_LOAD_CHUNK_BYTES))
                for batch in read_batches(data):
                    self._replay_loaded(batch)
                await asyncio.sleep(0)
        finally:
            if reading is not None:
                reading.cancel()

    def _replay_loaded(self, batch: LoadedBatch) -> None:
        if batch.marker is not None:
            self.shard.replay_end_transaction_marker(batch.producer_id, batch.marker, batch.producer_epoch)
        else:
            self.shard.replay_loaded_batch(batch.records, batch.producer_id, batch.producer_epoch)

    async def unload(self) -> None:
        """Stop serving: finish and acknowledge pending writes, answer parked requests NOT_COORDINATOR."""
        if self.state in (ShardState.UNLOADED, ShardState.FAILED):
            return
        was_loading = self.state is ShardState.LOADING
        self.state = ShardState.UNLOADING
        self.timer.cancel_all()
        while self._writer is not None:
            await asyncio.shield(self._writer)
        await self.compactor.close()
        if self.state is ShardState.UNLOADING:
            if not was_loading:
                deliver(self.shard.on_unloaded().replies)
            self.timer.cancel_all()
            self.state = ShardState.UNLOADED


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
