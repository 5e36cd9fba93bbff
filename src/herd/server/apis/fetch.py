"""Fetch (key 1), v4-v18.

v4: isolation level, last stable offset, aborted transactions. v5: log start offset. v7: fetch sessions
(KIP-227). v9: current leader epoch. v11: rack id and preferred read replica (KIP-392). v12: flexible,
diverging epoch. v13: topics by id. v15: replica state. v16-v17: KIP-951 leader discovery and directory ids.
v18: high watermark in the request (used by replicas). Kafka 4.x accepts v4 and up (KIP-896).

Long polling: when fewer than min_bytes are ready and max_wait is positive, the answer waits until an append to
one of the fetched partitions brings enough bytes, or max_wait passes. The response never exceeds max_bytes (capped
by the broker's fetch.max.bytes, as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala caps it) or a
partition's partition_max_bytes, except that the first batch of the first partition with data is always sent
whole (KIP-74), so a batch larger than the limits cannot stall a consumer.

Transactions: every answer carries the partition's last stable offset (`PartitionLog.last_stable_offset`).
With isolation_level 1 (READ_COMMITTED) a read stops before the first batch at or above it, a fetch offset at or
above it (up to the high watermark) gets no records and no error, and the answer lists the aborted transactions
(producer id, first offset) that overlap the offsets returned, from the fetch offset to the end of the last batch
returned (Kafka's LocalLog.read with maxOffsetMetadata = the last stable offset and addAbortedTransactions, apache/kafka
core/src/main/scala/kafka/log/LocalLog.scala; Kafka's upper bound comes from its sparse offset index and may
reach a little further, which adds only transactions the consumer has no batch of). With isolation_level 0 the
aborted transactions are null, as in Kafka.

What herd does not do: fetch sessions (every answer has session id 0, which tells clients to send full fetch
requests; all of them handle that), follower fetching.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
READ on each topic, else TOPIC_AUTHORIZATION_FAILED per partition (replica fetches, which
Kafka checks for CLUSTER_ACTION, do not exist in herd).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Coroutine, Iterator
from typing import Any

from kio.schema.errors import ErrorCode

from herd.log.api import (
    LogError,
    NotInMemoryError,
    OffsetOutOfRangeError,
    PartitionLog,
    RemotePartitionLog,
    as_remote,
)
from herd.log.batch import INT32_MAX, LOG_OVERHEAD
from herd.server.apis._authorize import READ, topic_denied
from herd.server.apis._build import Builder, ctx_builder, ms
from herd.server.apis._topics import led_partition, resolve_topic
from herd.server.broker import RequestContext

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18
READ_COMMITTED = 1
_LAST_OFFSET_DELTA = 23  # where a batch's lastOffsetDelta (int32) sits
_PREFIX = struct.Struct(">qi")  # base offset, batch length (the bytes after it)
_DELTA = struct.Struct(">i")
Aborted = list[tuple[int, int]]
_Read = tuple[PartitionLog, int, int, bool]  # a partition's read: log, offset, byte limit, min_one


def handle(ctx: RequestContext, request: Any) -> Any:
    reads = _read(ctx, request)
    if not isinstance(reads, _Reads):  # a log had to go to its store (cluster mode: PostgreSQL)
        return _answer_later(ctx, request, reads)
    wait_ms = ms(request.max_wait)
    if reads.total >= request.min_bytes or wait_ms <= 0 or not reads.keys:
        return reads.response()
    return _long_poll(ctx, request, wait_ms, reads.keys)


async def _answer_later(ctx: RequestContext, request: Any, reading: Coroutine[Any, Any, _Reads]) -> Any:
    reads = await reading
    wait_ms = ms(request.max_wait)
    if reads.total >= request.min_bytes or wait_ms <= 0 or not reads.keys:
        return reads.response()
    return await _long_poll(ctx, request, wait_ms, reads.keys)


async def _long_poll(ctx: RequestContext, request: Any, wait_ms: int, keys: list[tuple[str, int]]) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        await ctx.broker.wait_for_append(keys, remaining)
        reads = await _settled(_read(ctx, request))
        if reads.total >= request.min_bytes:
            return reads.response()
        keys = reads.keys
    return (await _settled(_read(ctx, request))).response()


async def _settled(reads: _Reads | Coroutine[Any, Any, _Reads]) -> _Reads:
    return reads if isinstance(reads, _Reads) else await reads


def _read(ctx: RequestContext, request: Any) -> _Reads | Coroutine[Any, Any, _Reads]:
    """One pass over the request, read from what the logs hold in memory (the page cache of a segment log, the
    tail a remote log keeps): the `_Reads` with the response, its size in record bytes and the partitions that
    could still get data. A log that does not hold a range in memory says so (NotInMemoryError: a remote log,
    for older data or aborted transactions stored in PostgreSQL); that read and the ones after it are then
    awaited, and a coroutine of the `_Reads` is returned instead."""
    reads = _Reads(ctx, request)
    pending = reads.pending()
    for read in pending:
        log, offset, limit, min_one = read
        try:
            if reads.committed:
                reads.done(*_read_committed(log, offset, limit, min_one))
            else:
                reads.done(log.read(offset, limit, min_one=min_one))
        except NotInMemoryError:
            return _read_from_store(reads, pending, read)
        except LogError as e:
            reads.failed(e)
    return reads


async def _read_from_store(reads: _Reads, pending: Iterator[_Read], read: _Read | None) -> _Reads:
    """The rest of `_read`'s pass from `read` on, each read awaited (`read_async`: the log's memory when it holds
    the range, else its store)."""
    while read is not None:
        log, offset, limit, min_one = read
        remote = as_remote(log)
        try:
            if reads.committed:
                reads.done(*await _read_committed_async(remote, offset, limit, min_one))
            else:
                reads.done(await remote.read_async(offset, limit, min_one=min_one))
        except LogError as e:
            reads.failed(e)
        read = next(pending, None)
    return reads


def _read_committed(log: PartitionLog, offset: int, limit: int, min_one: bool) -> tuple[bytes, Aborted]:
    """A READ_COMMITTED read: the batches below the last stable offset and the aborted transactions among them.
    The batches are walked only when there is something to cut (a transaction open below the high watermark) or
    aborted transactions in [offset, last stable offset) to narrow to the range read."""
    lso = log.last_stable_offset
    if offset >= lso:
        _check_range(log, offset)
        return b"", []
    data = log.read(offset, limit, min_one=min_one)
    return _committed_part(data, lso, log.log_end_offset, log.aborted_transactions(offset, lso) if data else [])


async def _read_committed_async(log: RemotePartitionLog, offset: int, limit: int,
                                min_one: bool) -> tuple[bytes, Aborted]:  # fmt: skip
    lso = log.last_stable_offset
    if offset >= lso:
        _check_range(log, offset)
        return b"", []
    data = await log.read_async(offset, limit, min_one=min_one)
    aborted = await log.aborted_transactions_async(offset, lso) if data else []
    return _committed_part(data, lso, log.log_end_offset, aborted)


def _committed_part(data: bytes, lso: int, high_watermark: int, aborted: Aborted) -> tuple[bytes, Aborted]:
    """`data` cut before the last stable offset, and those of the `aborted` transactions (overlapping [fetch
    offset, lso)) that began before the end of what is returned."""
    if lso >= high_watermark and not aborted:
        return data, []
    data, end = _below(data, lso)
    return data, [(pid, first) for pid, first in aborted if first < end]


def _check_range(log: PartitionLog, offset: int) -> None:
    """Raises OffsetOutOfRangeError outside [log start, high watermark] (Kafka checks it before the isolation)."""
    if offset < log.log_start_offset or offset > log.log_end_offset:
        raise OffsetOutOfRangeError(
            f"offset {offset} outside [{log.log_start_offset}, {log.log_end_offset}] of {log.topic}-{log.partition}"
        )


def _below(data: bytes, lso: int) -> tuple[bytes, int]:
    """The whole batches of `data` whose base offset is below `lso`, and the offset after the last of them. The
    last stable offset always falls on a batch boundary (a transaction's first batch, or the high watermark)."""
    prefix = _PREFIX.unpack_from
    pos, last, length = 0, -1, len(data)
    while pos < length:
        base, size = prefix(data, pos)
        if base >= lso:
            break
        last = pos
        pos += LOG_OVERHEAD + size
    if last < 0:
        return data[:0], -1
    end = _PREFIX.unpack_from(data, last)[0] + _DELTA.unpack_from(data, last + _LAST_OFFSET_DELTA)[0] + 1
    return (data if pos == length else data[:pos]), end


class _Reads:
    """One pass over a Fetch request: `pending()` yields each partition's read (log, offset, byte limit,
    min_one) in order, and the caller reports its outcome with `done(data)` or `failed(error)` before taking
    the next, so that each read's limit knows what the ones before it returned."""

    def __init__(self, ctx: RequestContext, request: Any) -> None:
        self.ctx = ctx
        self.request = request
        self.b = ctx_builder(ctx)
        self.budget = min(getattr(request, "max_bytes", INT32_MAX), ctx.broker.config.get("fetch.max.bytes"))
        self.total = 0
        self.keys: list[tuple[str, int]] = []
        self.topics: list[Any] = []
        self._outcome: bytes | LogError | None = None  # the read just yielded, as the caller reported it
        self._aborted: Aborted | None = None  # and its aborted transactions (READ_COMMITTED)
        self.committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
        self.counts: list[int] | None = None  # the per-topic counters of the topic being read
        self.checked = ctx.broker.authorizer is not None

    def done(self, data: bytes, aborted: Aborted | None = None) -> None:
        self._outcome = data
        self._aborted = aborted

    def failed(self, error: LogError) -> None:
        self._outcome = error

    def pending(self) -> Iterator[_Read]:
        b = self.b
        for entry in self.request.topics:
            topic, topic_error = resolve_topic(self.ctx.broker, entry)
            if self.checked and topic_denied(self.ctx, entry, topic, READ):
                topic, topic_error = None, ErrorCode.topic_authorization_failed
            self.counts = None if topic is None else self.ctx.broker.metrics.topic(topic.name)
            partitions = []
            for p in entry.partitions:
                log = led_partition(topic, topic_error, p.partition, getattr(p, "current_leader_epoch", -1))
                if isinstance(log, ErrorCode):
                    partitions.append(_partition(b, p.partition, log))
                    continue
                limit = min(p.partition_max_bytes, self.budget - self.total)
                aborted: Aborted | None = [] if self.committed else None
                if limit <= 0 and self.total > 0:
                    data: bytes | LogError = b""
                else:
                    self._outcome = None
                    yield log, p.fetch_offset, max(limit, 0), self.total == 0
                    assert self._outcome is not None, "each read's outcome is reported before the next"
                    data, aborted = self._outcome, self._aborted
                if isinstance(data, LogError):
                    partitions.append(_partition(b, p.partition, ErrorCode(data.error_code), log))
                    continue
                self.total += len(data)
                if data and self.counts is not None:
                    self.counts[2] += len(data)  # herd_topic_bytes_out_total (herd.server.metrics)
                self.keys.append((topic.name, p.partition))
                partitions.append(_partition(b, p.partition, ErrorCode.none, log, data, aborted))
            self.topics.append(
                b(
                    "FetchableTopicResponse",
                    topic=getattr(entry, "topic", None),
                    topic_id=getattr(entry, "topic_id", None),
                    partitions=tuple(partitions),
                )
            )

    def response(self) -> Any:
        return self.b.response(
            throttle_time=0, error_code=ErrorCode.none, session_id=0, responses=tuple(self.topics), node_endpoints=()
        )


def _partition(b: Builder, index: int, error: ErrorCode, log: Any = None, records: bytes = b"",
               aborted: Aborted | None = None) -> Any:  # fmt: skip
    hw = log.log_end_offset if log is not None else -1
    lso = log.last_stable_offset if log is not None else -1
    start = log.log_start_offset if log is not None else -1
    txns = (
        None
        if aborted is None
        else tuple(b("AbortedTransaction", producer_id=pid, first_offset=first) for pid, first in aborted)
    )
    return b(
        "PartitionData",
        partition_index=index,
        error_code=error,
        high_watermark=hw,
        last_stable_offset=lso,
        log_start_offset=start,
        aborted_transactions=txns,
        preferred_read_replica=-1,
        records=records,
    )
