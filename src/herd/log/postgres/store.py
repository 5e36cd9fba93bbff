"""Partition logs stored in PostgreSQL (cluster mode): the leader keeps the tail in memory and commits batches,
fenced by its leader epoch.

Appending is synchronous and in memory, as on a single node: `append` checks the batches as `SegmentLog`
does (framing, CRC32C, counts, max.message.bytes; LogAppendTime), gives them offsets from the next offset to
assign, stamps each with the partition leader epoch (bytes 12-16, outside the CRC) and queues it. Each
partition has one commit task, with one transaction in flight at a time: everything queued when it starts
goes into that transaction (group commit), so a partition under load commits many batches per round trip.
A commit is one statement, run in autocommit (so the reply to it is the COMMIT's):

    WITH fence AS (UPDATE herd_partitions SET log_end_offset = <new end> WHERE pid = .. AND leader = <this
                   node> AND leader_epoch = <this epoch> AND log_end_offset = <committed end> RETURNING pid)
    INSERT INTO herd_batches SELECT .., r[i][1..8], substring(<the batches end to end> FROM r[i][9] ..)
                             FROM fence, <one row per batch: a binary two-dimensional int8[] r>,
                                  generate_subscripts(r, 1) AS i

The UPDATE takes the partition's row lock, and under READ COMMITTED re-checks its condition on the newest
version of the row, so a node whose epoch was bumped by the controller inserts nothing, whenever it wakes
up. `flushed_offset` and `log_end_offset` are the committed end (the high watermark): readers never see a
batch before the transaction that stored it returned. `wait_durable(end)` returns once the committed end
passed `end`.

Failures:
- fenced (the UPDATE found no row): every pending and later append gets NotLeaderError, for good;
- the database failed (connection lost, server gone, a commit whose outcome is unknown): the waiters get
  KafkaStorageError (retriable; the write may or may not be stored), the log refuses appends until
  `reload()` re-read the partition's row: same leader and epoch, it goes on from the stored end (an
  idempotent producer's retry of a batch that was stored after all is recognised once the caller rebuilt
  the producer state from `producer_state()`); another leader or epoch, NotLeaderError for good.

Transactions (herd.log.transactions): `append` checks and records the producers' transactional batches and
markers as `SegmentLog` does; an aborted transaction is stored in `herd_aborted_txns` by the statement that
commits its marker (`sql.COMMIT_ABORTS`). The last stable offset is computed against the committed end, so a
transaction whose marker is not yet committed stays unstable (Kafka's unreplicated transactions). This leader
keeps the aborts it appended in memory; older ones are queried (`aborted_transactions_async`). A new leader
rebuilds the state from the batches' `attributes` (`load_transactions`, awaited with the producer state), and
takes no marker meanwhile (`append_control` raises NotLeaderError): the rebuild would undo it.

Idempotent producers (herd.log.producer_state): a client's append (`append(..., client=True)`) passes through the
store's `ProducerStates`, which a new leader (or one that reloaded) rebuilds from `producer_state()` before the
partition takes a client's append (`ProducerStates.rebuild`).

Reads: a bounded `TailCache` of committed batches answers consumers at the tail; `read_async` queries
whatever it does not hold (binary results, whole batches in offset order, cut at max_bytes in the query;
KIP-74's first batch). `read` (sync) answers from the cache only and raises `NotInMemoryError` otherwise.
ListOffsets by time and MAX_TIMESTAMP find the batch with SQL and the record in it as segments do
(`herd.log.records.search_timestamp`, `find_offset_of_timestamp`). Retention by time (a batch's max timestamp,
as Kafka uses a segment's) and by bytes, and DeleteRecords, move the log start and delete the rows wholly below
it; `compact` compacts `__consumer_offsets` (see `herd.log.postgres.compact`). All writes check the epoch in
their own statement.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import struct
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, NamedTuple

import psycopg
import psycopg.adapt
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from herd.log.api import (
    RETAINED_PRODUCER_BATCHES,
    ActiveProducer,
    AppendResult,
    CompactionStats,
    EpochHistory,
    KafkaStorageError,
    LogConfig,
    LogError,
    NotInMemoryError,
    NotLeaderError,
    OffsetOutOfRangeError,
    PartitionLog,
    ProducerBatch,
    TimestampOffset,
    deletes,
    deletion_start,
)
from herd.log.batch import INT32_MAX, parse_header, set_log_append_time, validate_batches
from herd.log.compaction import dirty_enough
from herd.log.postgres import compact as compaction
from herd.log.postgres import sql
from herd.log.postgres.tail import TailCache
from herd.log.producer_state import NO_PRODUCERS, ProducerStates, client_append
from herd.log.records import control_batch, control_marker, find_offset_of_timestamp, search_timestamp
from herd.log.transactions import AbortedTxn, TransactionState

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 4 * 1024 * 1024  # per partition
# One transaction carries at most this much (but at least one batch). PostgreSQL's backend allocates fresh
# memory for each message and bytea this large (faulted in and zeroed by the kernel, handed back after), so
# large transactions cost it more per MB: 16 MB -> 1 MB took PostgreSQL from ~17 to ~7.5 ms of CPU per MB stored
# and cluster produce from ~72 to ~125 MB/s (bench_cluster.py;
# the measurements are in bench/HISTORY.md); 512 KB-4 MB measure alike.
MAX_COMMIT_BYTES = 1024 * 1024
READ_ROWS = 10_000  # batches one read query returns at most
SCAN_BYTES = 4 * 1024 * 1024  # what compaction reads per query
PRODUCER_SCAN_BATCHES = 100_000  # producer state is rebuilt from the most recent batches only
CLOSE_WAIT_S = 5.0  # how long closing waits for a commit in flight
ACQUIRE_TIMEOUT_S = 10.0  # how long a commit or read waits for a pooled connection
INT8_OID, INT8_ARRAY_OID = 20, 1016
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_DB_ERRORS = (psycopg.Error, PoolTimeout, OSError)
NOT_LEADER = "not leader"
CLOSED = "closed"


class _Batch(NamedTuple):
    """A batch appended and waiting for its commit: the values of its herd_batches row."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    data: bytes
    attributes: int = 0
    aborted: AbortedTxn | None = None  # the transaction its ABORT marker ended (stored with it)


class Int8Rows:
    """Rows of `columns` int64s each, sent as a binary two-dimensional int8[] encoded in one `struct.pack`
    (psycopg's list dumper spends ~10 us of Python per array; a commit sends one of these instead of nine). Its
    dumper is registered with psycopg's global adapters below, which every connection copies when it is made:
    so this module is imported before the pool is opened (anyone opening a pool for a PgLogStore imports it)."""

    __slots__ = ("data",)
    _HEAD = struct.Struct(">iiiiiii")  # ndim 2, no nulls, element oid, (rows, lower bound), (columns, lower bound)

    def __init__(self, rows: Sequence[Sequence[int]], columns: int) -> None:
        values = [v for row in rows for item in row for v in (8, item)]  # each element: its length, its value
        self.data = self._HEAD.pack(2, 0, INT8_OID, len(rows), 1, columns, 1) + struct.pack(
            ">" + "iq" * (len(rows) * columns), *values
        )


class _Int8RowsDumper(psycopg.adapt.Dumper):
    format = psycopg.pq.Format.BINARY
    oid = INT8_ARRAY_OID

    def dump(self, obj: Int8Rows) -> bytes:
        return obj.data


psycopg.adapters.register_dumper(Int8Rows, _Int8RowsDumper)


class PgLogStore:
    """The partition logs this node leads, over one connection pool. Create it on the running loop."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        node_id: int,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        producers: ProducerStates | None = None,
    ) -> None:
        """`producers`: the node's producer state (herd.log.producer_state), handed to every partition opened; None:
        the partitions keep none (a client's append is then checked by the log alone)."""
        self.pool = pool
        self.node_id = node_id
        self.cache_bytes = cache_bytes
        self.producers = producers
        self._logs: set[PgPartitionLog] = set()

    def open_partition(self, topic: str, partition: int, config: LogConfig, *, pid: int, leader_epoch: int,
                       log_start_offset: int, log_end_offset: int) -> PgPartitionLog:  # fmt: skip
        """The log of a partition this node leads at `leader_epoch`, as the caller's read of its herd_partitions
        row said (the same snapshot that named this node leader)."""
        opened = PgPartitionLog(
            self,
            topic,
            partition,
            config,
            pid=pid,
            leader_epoch=leader_epoch,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
        )
        opened.producers = self.producers
        self._logs.add(opened)
        return opened

    async def close_partition(self, partition_log: PartitionLog, *, flush: bool) -> None:
        """Stop leading the partition here (one this store opened). With `flush` (a controlled handoff) what is
        pending is committed first; otherwise it is dropped (its waiters get NotLeaderError). Either way a commit
        in flight is waited for (at most CLOSE_WAIT_S, then its waiters get KafkaStorageError: its outcome is
        unknown)."""
        assert isinstance(partition_log, PgPartitionLog), "a log this store opened"
        self._logs.discard(partition_log)
        await partition_log.close_async(flush=flush)

    async def close(self) -> None:
        """Close every partition without committing what is pending (the pool is the caller's)."""
        for partition_log in list(self._logs):
            await self.close_partition(partition_log, flush=False)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection in autocommit mode (each statement its own transaction), put back as it was.
        Raises PoolTimeout when none is to be had within ACQUIRE_TIMEOUT_S (the database is gone: the pool
        keeps trying to reconnect, but a write waiting for it should be answered with a retriable error)."""
        async with self.pool.connection(timeout=ACQUIRE_TIMEOUT_S) as conn:
            if conn.autocommit:
                yield conn
                return
            await conn.set_autocommit(True)
            try:
                yield conn
            finally:
                if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                    await conn.set_autocommit(False)


class PgPartitionLog:
    """A `RemotePartitionLog` over PostgreSQL; see the module docstring. Open it with `PgLogStore.open_partition`."""

    commits_itself = True  # `wait_durable`: the commit task stores what is appended

    def __init__(self, store: PgLogStore, topic: str, partition: int, config: LogConfig, *, pid: int,
                 leader_epoch: int, log_start_offset: int, log_end_offset: int) -> None:  # fmt: skip
        self.topic, self.partition, self.config = topic, partition, config
        self.pid, self.leader_epoch = pid, leader_epoch
        self.report_errors = True
        self._store = store
        self._log_start = log_start_offset
        self._committed = log_end_offset  # everything below is stored (the high watermark)
        self._next_offset = log_end_offset  # the offset the next appended record gets
        self._pending: list[_Batch] = []  # appended, not yet in a transaction
        self._in_flight_end = log_end_offset  # the end the transaction in flight will commit
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []  # heap of (end offset, seq, future)
        self._seq = itertools.count()
        self._cache = TailCache(store.cache_bytes)
        self._commit_task: asyncio.Task[None] | None = None
        self._failed: str | None = None
        self._accepting = True  # False once closing started
        self._maintenance = asyncio.Lock()  # one retention or compaction pass at a time
        self._sizes: tuple[int, int] | None = None  # (bytes stored, bytes not yet compacted), once known
        self._cleaner_offset = 0  # where the last compaction pass ended (read with `_sizes`)
        self._average_batch = 1024  # bytes, as the last read from the database found (sizes its next query)
        self._epochs: EpochHistory | None = None  # the epoch history up to this leader's: fixed while it leads
        self.transactions = TransactionState()  # herd.log.transactions; rebuilt by `load_transactions`
        # the idempotent producers' state a client's append passes through (the store's; `ProducerStates.rebuild`
        # reloads this partition's from the stored batches); None: no checks
        self.producers: ProducerStates | None = None
        self._aborted: list[AbortedTxn] = []  # those whose markers this leader appended, in marker order
        self._aborted_from = log_end_offset  # markers from here on are in `_aborted`; below, in the database
        self._stored_aborts_end: int | None = None  # every stored abort's marker is below this (None: not known)
        self.commits = 0  # transactions committed (for tests and benchmarks)

    # -- offsets -----------------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The committed end (what readers may see: the high watermark), not the next offset to assign."""
        return self._committed

    @property
    def flushed_offset(self) -> int:
        return self._committed

    @property
    def next_offset(self) -> int:
        """The offset the next appended record gets (appended batches above the committed end wait for their
        commit)."""
        return self._next_offset

    @property
    def failure(self) -> str | None:
        """Why the log refuses appends: a database error (until `reload`), "not leader", or "closed"."""
        return self._failed

    # -- appending ---------------------------------------------------------------------------------------------

    def append(self, records: bytes, now_ms: int, *, client: bool = False) -> AppendResult:
        """Append in memory; the result's `durable_end` is what to `wait_durable` for before acknowledging. A
        retried batch answered from the producer state waits for its original's commit the same way."""
        if not client:
            return self._append(records, now_ms, 0)
        result = client_append(self, self.producers, records, self.config, now_ms)
        if result.durable_end is None:  # a duplicate, answered from the producer state: its original's commit
            result = replace(result, durable_end=result.last_offset + 1)
        return result

    def append_control(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
        *,
        transaction_version: int = 0,
    ) -> AppendResult:
        """PartitionLog.append_control; acknowledge it once `wait_durable(result.last_offset + 1)` returns. Until
        the marker is committed the transaction stays unstable (the last stable offset does not pass it). Raises
        NotLeaderError (retriable) while a new leader rebuilds the partition's state (`ProducerStates.check_loaded`):
        the rebuild would restore the marker's transaction as ongoing."""
        self._check_writable()
        if self.producers is not None:
            self.producers.check_loaded(self.topic, self.partition)
        batch = control_batch(producer_id, producer_epoch, commit, coordinator_epoch, now_ms, self.leader_epoch)
        return self._append(batch, now_ms, transaction_version)

    def active_producers(self, now_ms: int) -> list[ActiveProducer]:
        producers = NO_PRODUCERS if self.producers is None else self.producers
        return producers.active(self.topic, self.partition, now_ms, self.transactions)

    @property
    def last_stable_offset(self) -> int:
        """Never below the log start: a transaction whose first offset retention or DeleteRecords passed is
        unstable from the log start on (UnifiedLog.maybeIncrementFirstUnstableOffset)."""
        return max(self.transactions.last_stable_offset(self._committed), self._log_start)

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """From memory: the aborts this leader committed; raises NotInMemoryError when `start` is below what it
        holds and stored aborts may lie there (use `aborted_transactions_async`)."""
        if start < self._aborted_from and (self._stored_aborts_end is None or start < self._stored_aborts_end):
            raise NotInMemoryError(f"{self._name}: aborted transactions below {self._aborted_from} are in the database")
        return self._aborted_in_memory(start, end)

    async def aborted_transactions_async(self, start: int, end: int) -> list[tuple[int, int]]:
        """The aborted transactions overlapping [start, end): from the database for markers below what this
        leader appended, then from memory."""
        older: list[tuple[int, int]] = []
        stored_end = self._stored_aborts_end
        if start < self._aborted_from and (stored_end is None or start < stored_end):
            self._check_leading()
            rows = await self._run(
                sql.ABORTED, {"pid": self.pid, "start": start, "below": self._aborted_from, "end": end}, binary=False
            )
            older = [(int(pid), int(first)) for pid, first in rows]
        return older + self._aborted_in_memory(start, end)

    def _aborted_in_memory(self, start: int, end: int) -> list[tuple[int, int]]:
        committed = self._committed
        return [
            (t.producer_id, t.first_offset)
            for t in self._aborted
            if start <= t.last_offset < committed and t.first_offset < end
        ]

    async def load_transactions(self) -> None:
        """Rebuild the transaction state from the stored batches (a new leader, or one that reloaded, before it
        appends; herd.log.producer_state `rebuild` awaits it): per producer that wrote transactional batches among
        the most recent PRODUCER_SCAN_BATCHES, its latest epoch, its last marker's coordinator epoch and the
        transaction it has open, if any (a transaction open since before those batches is not found). Raises
        KafkaStorageError or NotLeaderError (also when the log was let go while it read: nothing is restored)."""
        self._check_leading()
        start, end = self._log_start, self._committed
        rows = await self._run(
            sql.TRANSACTIONS, {"pid": self.pid, "end": end, "start": start, "scan": PRODUCER_SCAN_BATCHES}
        )
        stored = await self._run(sql.LAST_ABORT, {"pid": self.pid}, binary=False)
        self._check_still_led()  # a rebuild from a log let go meanwhile restores nothing (`resume`)
        self._stored_aborts_end = start if stored[0][0] is None else int(stored[0][0]) + 1
        entries = []
        for producer_id, epoch, first_open, marker in rows:
            coordinator_epoch = -1
            if marker is not None:
                try:
                    found = control_marker(bytes(marker))
                except LogError:
                    found = None
                coordinator_epoch = found[1] if found is not None else -1
            entries.append((int(producer_id), int(epoch), coordinator_epoch, int(first_open)))
        self.transactions.restore(entries)
        self._aborted, self._aborted_from = [], end

    def _append(self, records: bytes, now_ms: int, transaction_version: int) -> AppendResult:
        self._check_writable()
        headers = validate_batches(records, self.config.max_message_bytes)
        producing = self.transactions.producing(records, headers)
        if producing:
            self.transactions.check(producing, transaction_version)
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        if log_append:
            buf = bytearray(records)
            for header in headers:
                set_log_append_time(buf, header, now_ms)
            records = buf
        view = memoryview(records)
        first = offset = self._next_offset
        epoch = _INT32.pack(self.leader_epoch)
        batches = []
        for header in headers:
            at = header.position
            # the batch with its base offset and partition leader epoch set, in one copy
            data = b"".join((_INT64.pack(offset), view[at + 8 : at + 12], epoch, view[at + 16 : header.end]))
            batches.append(
                _Batch(
                    offset,
                    offset + header.last_offset_delta,
                    now_ms if log_append else header.max_timestamp,
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence,
                    header.record_count,
                    data,
                    header.attributes,
                )
            )
            offset += header.record_count
        if producing:
            self._apply_transactions(producing, headers, batches, now_ms)
        self._pending.extend(batches)
        self._next_offset = offset
        if self._commit_task is None:
            self._commit_task = asyncio.get_running_loop().create_task(self._commit_loop())
        return AppendResult(
            first, offset - 1, now_ms if log_append else -1, self._log_start, offset - first, durable_end=offset
        )

    def _apply_transactions(self, producing: list[Any], headers: list[Any], batches: list[_Batch],
                            now_ms: int) -> None:  # fmt: skip
        """Record the producers' batches in the transaction state; each transaction an ABORT marker ended rides
        with the marker's batch into its commit (the aborted-transaction index is stored with it)."""
        at = {h.position: b for h, b in zip(headers, batches, strict=True)}
        self.transactions.expire(now_ms)
        aborted = self.transactions.apply(producing, [at[h.position].base_offset for h, _ in producing], now_ms)
        by_base = {b.base_offset: i for i, b in enumerate(batches)}
        for txn in aborted:
            i = by_base[txn.last_offset]  # the marker's batch: one record, at the offset that ended it
            batches[i] = batches[i]._replace(aborted=txn)
            self._aborted.append(txn)

    async def wait_durable(self, end_offset: int) -> None:
        if self._committed >= end_offset:
            return
        if self._failed is not None or end_offset > self._next_offset:
            self._check_writable()
            raise KafkaStorageError(f"{self._name}: offset {end_offset - 1} was never appended")
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (end_offset, next(self._seq), future))
        await future

    def _check_writable(self) -> None:
        if self._failed is None and self._accepting:
            return
        self._check_leading()
        if not self._accepting:
            raise self._not_leader()
        raise KafkaStorageError(f"{self._name} is unusable until reloaded: {self._failed}")

    async def _commit_loop(self) -> None:
        try:
            while self._pending and self._failed is None:
                batches = self._take_pending()
                self._in_flight_end = batches[-1].last_offset + 1
                try:
                    stored = await self._store_batches(batches)
                except Exception as error:  # not only the database's: after a bug too, reload() resets
                    if not isinstance(error, _DB_ERRORS):
                        log.exception("%s: a commit failed", self._name)
                    self._fail_storage(error)  # the waiters must not wait for ever
                    return
                if not stored:
                    self._fail_not_leader()
                    return
                self._committed_batches(batches)
        finally:
            self._commit_task = None

    def _take_pending(self) -> list[_Batch]:
        total, n = 0, 0
        for batch in self._pending:
            if n and total + len(batch.data) > MAX_COMMIT_BYTES:
                break
            total += len(batch.data)
            n += 1
        taken, self._pending = self._pending[:n], self._pending[n:]
        return taken

    async def _store_batches(self, batches: list[_Batch]) -> bool:
        at = 0
        rows = []
        for b in batches:
            size = len(b.data)
            rows.append(
                (
                    b.base_offset,
                    b.last_offset,
                    b.max_timestamp,
                    b.producer_id,
                    b.producer_epoch,
                    b.base_sequence,
                    b.record_count,
                    size,
                    at,
                    b.attributes,
                )
            )
            at += size
        aborted = [
            (t.last_offset, t.producer_id, t.first_offset, t.last_stable_offset)
            for t in (b.aborted for b in batches)
            if t is not None
        ]
        params = {
            "pid": self.pid,
            "node": self._store.node_id,
            "epoch": self.leader_epoch,
            "end": self._committed,
            "new_end": batches[-1].last_offset + 1,
            "rows": Int8Rows(rows, 10),
            # one bytea holding the batches end to end (sent as it is when there is one): a bytea[] costs a
            # copy on both sides and fresh memory for it (measured: 1 MB batches, 2.5 -> 1.0 ms of this
            # process's CPU per MB and 7.3 -> 4.5 ms of the PostgreSQL backend's)
            "blob": batches[0].data if len(batches) == 1 else b"".join(b.data for b in batches),
        }
        if aborted:
            params["aborted"] = Int8Rows(aborted, 4)
        async with self._store.connection() as conn:
            cursor = await conn.execute(sql.COMMIT_ABORTS if aborted else sql.COMMIT, params)
            return cursor.rowcount == len(batches)

    def _committed_batches(self, batches: list[_Batch]) -> None:
        self._committed = batches[-1].last_offset + 1
        self.commits += 1
        added = 0
        for batch in batches:
            self._cache.add(batch.base_offset, batch.last_offset, batch.data)
            added += len(batch.data)
        if self._sizes is not None:
            self._sizes = (self._sizes[0] + added, self._sizes[1] + added)
        waiters = self._waiters
        while waiters and waiters[0][0] <= self._committed:
            future = heapq.heappop(waiters)[2]
            if not future.done():
                future.set_result(None)

    def _fail_storage(self, error: BaseException) -> None:
        what = _describe(error)
        if self._failed is None and self.report_errors:
            log.error(
                "%s: the database failed under a commit (%s); produce answers KAFKA_STORAGE_ERROR until "
                "the partition is reloaded",
                self._name,
                what,
            )
        self._failed = self._failed or f"database error: {what}"
        self._fail_waiters(KafkaStorageError(f"{self._name}: {what}"))

    def _fail_not_leader(self) -> None:
        log.warning(
            "%s: leader epoch %d is no longer current (fenced); nothing more is written here",
            self._name,
            self.leader_epoch,
        )
        self._failed = NOT_LEADER
        self._fail_waiters(NotLeaderError(f"{self._name}: fenced, epoch {self.leader_epoch} is not current"))

    def _fail_waiters(self, error: LogError, keep: Callable[[int], bool] | None = None) -> None:
        """Fail the waiters, but those for the end offsets `keep` accepts; without `keep`, also drop what is
        pending (nothing will commit it)."""
        kept = []
        for end, seq, future in self._waiters:
            if keep is not None and keep(end):
                kept.append((end, seq, future))
            elif not future.done():
                future.set_exception(type(error)(str(error)))
                future.exception()  # a waiter that went away must not leave an unretrieved exception
        heapq.heapify(kept)
        self._waiters = kept
        if keep is None:
            self._pending = []

    # -- recovering and closing ----------------------------------------------------------------------------------

    async def reload(self) -> None:
        """After a database error: re-read the partition's row and go on from its stored end (what was pending
        is dropped; the caller rebuilds the producer state of this partition). Raises KafkaStorageError if the
        database still fails (the log stays failed), NotLeaderError (for good) if another leader or epoch is
        there, or if the log was closed while the reload waited for the database (it is not revived: its
        `producer_state()` would be read for a partition this node no longer leads with it). A no-op unless
        the log failed on a database error."""
        if self._failed is None:
            return
        self._check_leading()
        if self._commit_task is not None:
            await asyncio.gather(self._commit_task, return_exceptions=True)
        rows = await self._run(sql.PARTITION, (self.pid,), binary=False)
        self._check_still_led()  # let go while it waited (the lease ran out during an outage): it stays closed,
        # another log leads it if any
        row = rows[0] if rows else None
        if row is None or row[0] != self._store.node_id or row[1] != self.leader_epoch:
            self._failed = NOT_LEADER
            raise NotLeaderError(
                f"{self._name}: led by node {row[0] if row else None} at epoch {row[1] if row else None} now"
            )
        self._log_start, self._committed = row[2], row[3]
        self._next_offset = self._in_flight_end = self._committed
        self._pending, self._sizes = [], None
        self._aborted, self._aborted_from, self._stored_aborts_end = [], self._committed, None
        self.transactions = TransactionState()  # until `load_transactions` (herd.log.producer_state `rebuild`)
        self._cache.clear()
        self._fail_waiters(KafkaStorageError(f"{self._name}: reloaded"))
        self._failed = None
        log.warning("%s: reloaded from the database, offsets %d to %d", self._name, self._log_start, self._committed)

    async def resume(self) -> None:
        """PartitionLog.resume: `reload`, then the producers' state rebuilt from the stored batches (what a failed
        commit stored, if anything, is only known there), the partition taking no client append meanwhile. A log
        let go while this waited for the database raises NotLeaderError, before its state is restored (`reload`
        checks it, and `load_transactions` once the rows are read), so the state of a partition this node took
        back meanwhile is never overwritten from it (issue 30). A rebuild that fails on a database error leaves the
        log failed, so that the next `resume` reloads and rebuilds again: taking client appends without its
        producers' state, the partition would accept any sequence, and append again a retry of a batch already
        stored (as herd.server.node retries the rebuild of a partition it takes over)."""
        if self._failed is None:
            return
        await self.reload()
        if self.producers is None:
            return
        try:
            await self.producers.rebuild(self, self.producers.clock)
        except KafkaStorageError as error:
            if self._failed is None:
                self._failed = f"database error: the producers' state was not loaded ({error})"
                self._fail_waiters(KafkaStorageError(f"{self._name}: the producers' state was not loaded"))
            raise

    def _check_still_led(self) -> None:
        """After an await: raises NotLeaderError if the log was closed, or its closing begun, meanwhile."""
        if self._failed in (NOT_LEADER, CLOSED) or not self._accepting:
            raise self._not_leader()

    def recover(self) -> None:
        """The sync form of recovery has nothing to reopen: raises KafkaStorageError while the log is failed
        (the runtime awaits `resume()`)."""
        if self._failed is not None and self._failed not in (NOT_LEADER, CLOSED):
            raise KafkaStorageError(f"{self._name}: reload() it: {self._failed}")

    async def close_async(self, *, flush: bool) -> None:
        self._accepting = False
        if not flush:
            self._drop_unsent()
        task = self._commit_task
        if task is not None:
            done, _ = await asyncio.wait([task], timeout=CLOSE_WAIT_S * (3 if flush else 1))
            if not done:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                in_flight_end = self._in_flight_end
                self._fail_waiters(
                    KafkaStorageError(f"{self._name}: closed with a commit in flight"),
                    keep=lambda end: end > in_flight_end,
                )
        self._failed = self._failed if self._failed == NOT_LEADER else CLOSED
        self._fail_waiters(NotLeaderError(f"{self._name} is no longer led here"))
        self._cache.clear()

    def _drop_unsent(self) -> None:
        """Closing without flush: what is pending is never sent; its waiters learn it now."""
        self._pending = []
        sent_end = self._in_flight_end if self._commit_task is not None else self._committed
        self._fail_waiters(NotLeaderError(f"{self._name} is no longer led here"), keep=lambda end: end <= sent_end)

    def close(self) -> None:
        """Close at once, without waiting for anything (`PgLogStore.close_partition` is the orderly way)."""
        self._accepting = False
        if self._commit_task is not None:
            self._commit_task.cancel()
        self._fail_waiters(KafkaStorageError(f"{self._name}: closed"))
        self._failed = CLOSED

    def set_config(self, config: LogConfig) -> None:
        """PartitionLog.set_config: appends, retention and compaction read `config` when they act (segment and
        flush settings mean nothing here: PostgreSQL stores each batch as it is committed)."""
        self.config = config

    def flush(self) -> None:
        """Nothing to do: the commit task stores appended batches as soon as it can (`wait_durable`)."""

    def maybe_flush(self, now_ms: int) -> None:
        """Nothing to do (see `flush`)."""

    # -- reading -----------------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        """From the tail cache; raises NotInMemoryError when it does not hold `offset` (use `read_async`)."""
        found = self._cached(offset, max_bytes, min_one)
        if found is None:
            raise NotInMemoryError(f"{self._name}: offset {offset} is not in memory")
        return found

    async def read_async(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        found = self._cached(offset, max_bytes, min_one)
        if found is None:
            return b"".join(await self._read_rows(offset, self._committed, max_bytes, min_one))
        return found

    def _cached(self, offset: int, max_bytes: int, min_one: bool) -> bytes | None:
        """What a read gets without the database (b"" at the committed end), None if the cache does not hold
        `offset`; raises NotLeaderError, or OffsetOutOfRangeError outside [start, end]."""
        end = self._check_range(offset)
        if offset == end:
            return b""
        if self._cache.covers(offset):
            return self._cache.read(offset, max_bytes, min_one)
        return None

    async def _read_rows(self, offset: int, end: int, max_bytes: int, min_one: bool) -> list[bytes]:
        """The batches of a read from the database. The query stops after a number of rows (its window sum
        cannot stop the scan at max_bytes): twice what max_bytes holds at the partition's average batch size."""
        rows = min(READ_ROWS, max(16, 2 * max_bytes // max(self._average_batch, 1) + 1))
        found = await self._run(
            sql.READ,
            {"pid": self.pid, "end": end, "offset": offset, "rows": rows, "max_bytes": max_bytes, "min_one": min_one},
        )
        batches = [row[0] for row in found]
        if batches:
            self._average_batch = sum(len(b) for b in batches) // len(batches)
        return batches

    def _check_range(self, offset: int) -> int:
        """The committed end; raises NotLeaderError, or OffsetOutOfRangeError outside [start, end]."""
        self._check_leading()
        end = self._committed
        if offset < self._log_start or offset > end:
            raise OffsetOutOfRangeError(f"offset {offset} outside [{self._log_start}, {end}] of {self._name}")
        return end

    def _check_leading(self) -> None:
        if self._failed in (NOT_LEADER, CLOSED):
            raise self._not_leader()

    def _not_leader(self) -> NotLeaderError:
        return NotLeaderError(f"{self._name} is no longer led here at epoch {self.leader_epoch}")

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        raise NotInMemoryError(f"{self._name}: timestamps are looked up in the database")

    def max_timestamp(self) -> TimestampOffset | None:
        raise NotInMemoryError(f"{self._name}: timestamps are looked up in the database")

    async def offset_for_timestamp_async(self, timestamp: int) -> TimestampOffset | None:
        """The first record, in offset order, stamped >= `timestamp` (Kafka's searchForTimestamp over the
        batches whose max timestamp reaches it)."""
        self._check_leading()
        start, end, after = self._log_start, self._committed, -1
        while True:
            rows = await self._run(
                sql.BY_TIMESTAMP, {"pid": self.pid, "after": after, "end": end, "start": start, "timestamp": timestamp}
            )
            if not rows:
                return None
            batch = rows[0][0]
            header = parse_header(batch)
            found = search_timestamp(batch, header, timestamp, start)
            if found is not None:
                return TimestampOffset(offset=found[0], timestamp=found[1])
            after = header.base_offset

    async def max_timestamp_async(self) -> TimestampOffset | None:
        """The first record holding the largest timestamp (ListOffsets MAX_TIMESTAMP)."""
        self._check_leading()
        rows = await self._run(sql.MAX_TIMESTAMP, {"pid": self.pid, "end": self._committed, "start": self._log_start})
        if not rows:
            return None
        batch = rows[0][0]
        header = parse_header(batch)
        offset = find_offset_of_timestamp(batch, header, header.max_timestamp)
        return TimestampOffset(offset=header.base_offset if offset is None else offset, timestamp=header.max_timestamp)

    async def _run(self, statement: str, params: dict[str, Any] | Sequence[Any], *,
                   binary: bool = True) -> list[tuple[Any, ...]]:  # fmt: skip
        """Run one statement and return its rows, in binary unless told otherwise (bytea arrives as bytes,
        undecoded); raises KafkaStorageError."""
        try:
            async with self._store.connection() as conn:
                cursor = conn.cursor(binary=binary)
                await cursor.execute(statement, params)
                return await cursor.fetchall()
        except _DB_ERRORS as error:
            raise KafkaStorageError(f"{self._name}: {_describe(error)}") from error

    async def _fenced(self, statement: str, params: dict[str, Any]) -> tuple[Any, ...]:
        """Run a write whose first column counts the partition rows its fence matched (this node leads the
        partition at this epoch), and return its row; raises NotLeaderError, for good, when it matched none."""
        row = (
            await self._run(
                statement,
                {"pid": self.pid, "node": self._store.node_id, "epoch": self.leader_epoch, **params},
                binary=False,
            )
        )[0]
        if not row[0]:
            self._fail_not_leader()
            raise NotLeaderError(f"{self._name}: fenced, epoch {self.leader_epoch} is not current")
        return row

    # -- retention and compaction ------------------------------------------------------------------------------

    def apply_retention(self, now_ms: int) -> int:
        """The database is written by `apply_retention_async`, which the server awaits; this raises."""
        raise NotInMemoryError(f"{self._name}: retention deletes in the database")

    async def apply_retention_async(self, now_ms: int) -> int:
        """Delete the batches beyond retention.ms (by their max timestamp) and retention.bytes from the start of
        the log and move the log start past them (fenced); returns how many batches were deleted. Raises
        NotLeaderError or KafkaStorageError."""
        self._check_leading()
        if not deletes(self.config.cleanup_policy):
            return 0
        async with self._maintenance:
            end, start = self._committed, self._log_start
            new_start = start
            if self.config.retention_ms >= 0:
                rows = await self._run(
                    sql.RETAIN_BY_TIME,
                    {"pid": self.pid, "end": end, "start": start, "oldest": now_ms - self.config.retention_ms},
                )
                new_start = max(new_start, end if rows[0][0] is None else rows[0][0])
            if self.config.retention_bytes >= 0:
                stored = (await self._load_sizes())[0]
                excess = stored - self.config.retention_bytes
                if excess > 0:
                    rows = await self._run(
                        sql.RETAIN_BY_BYTES, {"pid": self.pid, "end": end, "start": start, "excess": excess}
                    )
                    new_start = max(new_start, rows[0][0] or start)
            if new_start <= start:
                return 0
            return await self._move_start(new_start)

    async def delete_records_async(self, offset: int) -> int:
        """DeleteRecords: see `RemotePartitionLog.delete_records_async`. The high watermark is the committed end
        (batches appended but not yet committed are above it); a batch that straddles the new start stays whole,
        as in a segment, and readers below the start get OffsetOutOfRangeError."""
        self._check_leading()
        async with self._maintenance:
            new_start = deletion_start(self._name, offset, self._log_start, self._committed, self.config.cleanup_policy)
            if new_start > self._log_start:
                await self._move_start(new_start)
            return self._log_start

    def delete_records(self, offset: int) -> int:
        """The database is written by `delete_records_async`, which the server awaits; this raises."""
        raise NotInMemoryError(f"{self._name}: records are deleted in the database")

    async def _move_start(self, new_start: int) -> int:
        _, deleted, freed = await self._fenced(sql.MOVE_START, {"start": new_start})
        self._log_start = max(self._log_start, new_start)
        self._aborted = [t for t in self._aborted if t.last_offset >= self._log_start]
        self._cache.drop_below(self._log_start)
        if self._sizes is not None:
            self._sizes = (self._sizes[0] - freed, max(0, self._sizes[1] - freed))
        return int(deleted)

    async def compact(self, delete_retention_ms: int, now_ms: int, *, force: bool = False) -> CompactionStats | None:
        """One compaction pass (cleanup.policy=compact) over every batch but the last one, if at least half the
        bytes were written since the last pass (or `force`); None when there was nothing to do. Fenced; raises
        NotLeaderError or KafkaStorageError (what was written before stays: every step leaves a valid log)."""
        self._check_leading()
        async with self._maintenance:
            stored, dirty = await self._load_sizes()
            if not dirty_enough(dirty, stored, force=force):
                return None
            end = (await self._run(sql.LAST_BASE, {"pid": self.pid, "end": self._committed}))[0][0]
            if end is not None:  # never past the first open transaction (Kafka's LogCleanerManager.cleanableOffsets)
                end = min(end, self.last_stable_offset)
            if end is None or end <= self._log_start:
                return None
            try:
                stats = await self._compact_below(end, delete_retention_ms, now_ms)
            except BaseException:
                self._sizes = None  # rows changed before the failure: counted again by the next pass
                raise
            return CompactionStats(*stats, stored, (await self._load_sizes())[0])

    async def _compact_below(self, end: int, delete_retention_ms: int, now_ms: int) -> tuple[int, int, int, int]:
        """Compact the batches below `end` (a base offset); (records read, kept, batches deleted, rewritten)."""
        loop = asyncio.get_running_loop()
        latest: dict[bytes, int] = {}
        mapped = 0  # the dirty bytes this pass cleans
        # the transactions of each pass's range (herd.log.postgres.compact): the aborted ones whose markers are in
        # it (from the index), the active producers
        start = max(self._cleaner_offset, self._log_start)
        active = [pid for pid, *_ in self.transactions.entries()]
        last: dict[int, int] = {}
        mapping = compaction.CleanedTransactions(await self.aborted_transactions_async(start, end), active, last)
        async for chunk in self._scan(start, end):
            await loop.run_in_executor(None, compaction.map_latest, chunk, latest, mapping)
            mapped += sum(len(data) for data in chunk)
        totals = [0, 0, 0, 0]
        freed = 0
        cleaning = compaction.CleanedTransactions(
            await self.aborted_transactions_async(self._log_start, end), active, last
        )
        async for chunk in self._scan(self._log_start, end):
            changes = await loop.run_in_executor(
                None, compaction.filter_batches, chunk, latest, now_ms, delete_retention_ms, cleaning
            )
            totals[0] += changes.records_read
            totals[1] += changes.records_kept
            if changes:
                await self._apply_changes(changes, cleaned=0)
                totals[2] += len(changes.deleted)
                totals[3] += len(changes.rewritten)
                freed += changes.bytes_freed
        await self._apply_changes(compaction.Changes(), cleaned=end)
        self._cache.drop_below(end)
        self._cleaner_offset = max(self._cleaner_offset, end)
        if self._sizes is not None:
            self._sizes = (self._sizes[0] - freed, max(0, self._sizes[1] - mapped))
        return totals[0], totals[1], totals[2], totals[3]

    async def _apply_changes(self, changes: compaction.Changes, *, cleaned: int) -> None:
        """Delete and rewrite rows, and move the cleaner offset up to `cleaned` (fenced)."""
        headers = [parse_header(data) for data in changes.rewritten]
        await self._fenced(
            sql.COMPACT,
            {
                "cleaned": cleaned,
                "deleted": changes.deleted,
                "bases": [h.base_offset for h in headers],
                "datas": changes.rewritten,
                "counts": [h.record_count for h in headers],
                "tss": [h.max_timestamp for h in headers],
            },
        )

    async def _scan(self, start: int, end: int) -> AsyncIterator[list[bytes]]:
        """The batches with base offsets in [start, end), in chunks of about SCAN_BYTES (whole batches)."""
        offset = start
        while offset < end:
            chunk = await self._read_rows(offset, end, SCAN_BYTES, True)
            if not chunk:
                return
            yield chunk
            last = parse_header(chunk[-1])
            offset = last.last_offset + 1

    async def _load_sizes(self) -> tuple[int, int]:
        """(bytes stored, bytes at or above the cleaner offset) of the committed batches, read with the cleaner
        offset the first time (or after a reload) and kept up to date in memory from then on."""
        if self._sizes is None:
            rows = await self._run(sql.SIZES, {"pid": self.pid, "end": self._committed, "start": self._log_start})
            self._cleaner_offset = int(rows[0][0]) if rows else 0
            self._sizes = (int(rows[0][1]), int(rows[0][2])) if rows else (0, 0)
        return self._sizes

    # -- producer state ------------------------------------------------------------------------------------------

    async def epoch_history(self) -> EpochHistory:
        """Read once: what came before this leader's epoch cannot change while it leads."""
        if self._epochs is None:
            self._check_leading()
            rows = await self._run(sql.EPOCHS, (self.pid,), binary=False)
            if not rows or (rows[0][0], rows[0][1]) != (self._store.node_id, self.leader_epoch):
                raise self._not_leader()
            self._epochs = tuple(
                (epoch, start)
                for epoch, start in zip(rows[0][2], rows[0][3], strict=True)
                if epoch <= self.leader_epoch
            )
        return self._epochs

    async def producer_state(self) -> list[ProducerBatch]:
        """The last batches (up to five) of every idempotent producer among the most recent
        PRODUCER_SCAN_BATCHES batches, in offset order: what `ProducerStates.restore` rebuilds the dedupe state
        from when this node takes the partition over. Raises KafkaStorageError or NotLeaderError."""
        self._check_leading()
        start, end = self._log_start, self._committed
        rows = await self._run(
            sql.PRODUCERS,
            {
                "pid": self.pid,
                "end": end,
                "start": start,
                "scan": PRODUCER_SCAN_BATCHES,
                "keep": RETAINED_PRODUCER_BATCHES,
            },
        )
        log_append = self.config.message_timestamp_type == "LogAppendTime"
        out = []
        for producer_id, epoch, sequence, count, base, last, max_ts in rows:
            last_sequence = (sequence + last - base) % (INT32_MAX + 1)
            out.append(
                ProducerBatch(
                    producer_id,
                    epoch,
                    sequence,
                    last_sequence,
                    base,
                    last,
                    count,
                    max_ts,
                    max_ts if log_append else -1,
                    start,
                )
            )
        return out

    @property
    def _name(self) -> str:
        return f"{self.topic}-{self.partition}"


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
