"""ListOffsets (key 2), v1-v11.

v1: one timestamp per partition (Kafka 4.x's lowest, KIP-896). v2: isolation level. v4: leader epochs. v6:
flexible. v7: MAX_TIMESTAMP (-3). v8: EARLIEST_LOCAL (-4). v9: LATEST_TIERED (-5). v10: timeout. v11:
EARLIEST_PENDING_UPLOAD (-6).

Special timestamps: -1 latest (the log end offset), -2 earliest (the log start offset), -3 the record with the
largest timestamp, -4 earliest local (herd keeps everything locally, so the log start), -5 latest tiered and -6
earliest pending upload (herd has no tiered storage: offset -1). A non-negative timestamp finds the first offset
whose timestamp is at least that (offset -1 when there is none). In cluster mode a partition another node
leads gets NOT_LEADER_OR_FOLLOWER, and searches by timestamp in PostgreSQL are awaited. From v4 the client's current
leader epoch is checked as Fetch checks it (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH; -1: not checked).

Isolation (v2+), as Kafka's Partition.fetchOffsetForTimestamp and ReplicaManager.fetchOffset (apache/kafka
core/src/main/scala/kafka/cluster/Partition.scala, core/src/main/scala/kafka/server/ReplicaManager.scala): the last
fetchable offset is the last stable offset under READ_COMMITTED (1), the high watermark under READ_UNCOMMITTED;
latest (-1) answers it, and a search by timestamp (or MAX_TIMESTAMP) that finds a record at or beyond it answers
offset -1, timestamp -1, as if nothing were found. Earliest is the log start either way.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED per partition.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.log.api import LogError, NotInMemoryError, PartitionLog, TimestampOffset, as_remote
from herd.server.apis._authorize import DESCRIBE, topic_denied
from herd.server.apis._build import Builder, LaterAnswers, ctx_builder
from herd.server.apis._topics import led_partition, resolve_topic
from herd.server.broker import RequestContext

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
READ_COMMITTED = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    later = LaterAnswers()  # searches by timestamp a remote log makes in its database
    committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    topics = []
    checked = ctx.broker.authorizer is not None
    for entry in request.topics:
        topic, topic_error = resolve_topic(ctx.broker, entry)
        if checked and topic_denied(ctx, entry, topic, DESCRIBE):
            topic, topic_error = None, ErrorCode.topic_authorization_failed
        partitions: list[Any] = []
        for p in entry.partitions:
            index = p.partition_index
            log = led_partition(topic, topic_error, index, getattr(p, "current_leader_epoch", -1))
            if isinstance(log, ErrorCode):
                partitions.append(_answer(b, index, log))
            else:
                _lookup(b, partitions, later, index, log, p.timestamp, committed)
        topics.append(b("ListOffsetsTopicResponse", name=entry.name, partitions=partitions))
    return later.respond(b.response(throttle_time=0, topics=tuple(topics)))


def _fetchable(log: PartitionLog, committed: bool) -> int:
    """The last fetchable offset: the last stable offset under READ_COMMITTED, else the high watermark."""
    return log.last_stable_offset if committed else log.log_end_offset


def _lookup(b: Builder, answers: list[Any], later: LaterAnswers, index: int, log: PartitionLog, timestamp: int,
            committed: bool) -> None:  # fmt: skip
    """The partition's answer, added to `answers` now, or to `later` when its log searches its store (a remote
    log's timestamps are in the database: NotInMemoryError)."""
    try:
        answers.append(_lookup_now(b, index, log, timestamp, committed))
    except NotInMemoryError:
        later.add(answers, _search_stored(b, index, log, timestamp, committed))


def _lookup_now(b: Builder, index: int, log: PartitionLog, timestamp: int, committed: bool) -> Any:
    """Raises NotInMemoryError when the log must search its store."""
    try:
        if timestamp == LATEST:
            return _answer(b, index, ErrorCode.none, -1, _fetchable(log, committed), log)
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            return _answer(b, index, ErrorCode.none, -1, log.log_start_offset, log)
        if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            return _answer(b, index, ErrorCode.none, -1, -1, log)
        if timestamp == MAX_TIMESTAMP:
            found = log.max_timestamp()
        elif timestamp >= 0:
            found = log.offset_for_timestamp(timestamp)
        else:
            return _answer(b, index, ErrorCode.invalid_request)
    except NotInMemoryError:
        raise
    except LogError as e:  # e.g. KAFKA_STORAGE_ERROR from a failed partition
        return _answer(b, index, ErrorCode(e.error_code))
    return _found(b, index, found, log, committed)


async def _search_stored(b: Builder, index: int, log: PartitionLog, timestamp: int, committed: bool) -> Any:
    """A search by timestamp in a partition stored in PostgreSQL."""
    try:
        if timestamp == MAX_TIMESTAMP:
            found = await as_remote(log).max_timestamp_async()
        else:
            found = await as_remote(log).offset_for_timestamp_async(timestamp)
    except LogError as e:
        return _answer(b, index, ErrorCode(e.error_code))
    return _found(b, index, found, log, committed)


def _found(b: Builder, index: int, found: TimestampOffset | None, log: PartitionLog, committed: bool) -> Any:
    if found is None or found.offset >= _fetchable(log, committed):
        return _answer(b, index, ErrorCode.none, -1, -1, log)
    return _answer(b, index, ErrorCode.none, found.timestamp, found.offset, log)


def _answer(b: Builder, index: int, error: ErrorCode, timestamp: int = -1, offset: int = -1,
            log: PartitionLog | None = None) -> Any:  # fmt: skip
    """One partition's answer; with its log, the leader epoch it is led at (0 on a single node)."""
    epoch = log.leader_epoch if log is not None and error is ErrorCode.none else -1
    return b(
        "ListOffsetsPartitionResponse",
        partition_index=index,
        error_code=error,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=epoch,
    )
