"""ListOffsets (key 2), v1-v11.

v1: one timestamp per partition (Kafka 4.x's lowest, KIP-896). v2: isolation level. v4: leader epochs. v6:
flexible. v7: MAX_TIMESTAMP (-3). v8: EARLIEST_LOCAL (-4). v9: LATEST_TIERED (-5). v10: timeout. v11:
EARLIEST_PENDING_UPLOAD (-6).

Special timestamps: -1 latest (the log end offset), -2 earliest (the log start offset), -3 the record with the
largest timestamp, -4 earliest local (herd keeps everything locally, so the log start), -5 latest tiered and -6
earliest pending upload (herd has no tiered storage: offset -1). A non-negative timestamp finds the first offset
whose timestamp is at least that (offset -1 when there is none).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.log.api import LogError, PartitionLog
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._topics import resolve_topic
from herd.server.broker import RequestContext

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    topics = []
    for entry in request.topics:
        topic, error = resolve_topic(ctx.broker, entry)
        partitions = []
        for p in entry.partitions:
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                partitions.append(_answer(b, p.partition_index, error if topic is None
                                          else ErrorCode.unknown_topic_or_partition))
            else:
                try:
                    partitions.append(_lookup(b, p.partition_index, topic.partitions[p.partition_index],
                                              p.timestamp))
                except LogError as e:  # e.g. KAFKA_STORAGE_ERROR from a failed partition
                    partitions.append(_answer(b, p.partition_index, ErrorCode(e.error_code)))
        topics.append(b("ListOffsetsTopicResponse", name=entry.name, partitions=tuple(partitions)))
    return b.response(throttle_time=0, topics=tuple(topics))


def _lookup(b: Builder, index: int, log: PartitionLog, timestamp: int) -> Any:
    if timestamp == LATEST:
        return _answer(b, index, ErrorCode.none, -1, log.log_end_offset)
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return _answer(b, index, ErrorCode.none, -1, log.log_start_offset)
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return _answer(b, index, ErrorCode.none, -1, -1)
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp()
    elif timestamp >= 0:
        found = log.offset_for_timestamp(timestamp)
    else:
        return _answer(b, index, ErrorCode.invalid_request)
    if found is None:
        return _answer(b, index, ErrorCode.none, -1, -1)
    return _answer(b, index, ErrorCode.none, found.timestamp, found.offset)


def _answer(b: Builder, index: int, error: ErrorCode, timestamp: int = -1, offset: int = -1) -> Any:
    return b("ListOffsetsPartitionResponse", partition_index=index, error_code=error, timestamp=timestamp,
             offset=offset, leader_epoch=0 if error is ErrorCode.none else -1)
