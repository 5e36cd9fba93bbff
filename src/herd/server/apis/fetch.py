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

What herd does not do: fetch sessions (every answer has session id 0, which tells clients to send full fetch
requests; all of them handle that), follower fetching, transactions (the last stable offset is the high
watermark and no transaction is ever aborted).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from herd.log.api import LogError
from herd.server.apis._build import Builder, ctx_builder, ms
from herd.server.apis._topics import resolve_topic
from herd.server.broker import RequestContext

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18

INT32_MAX = 2**31 - 1


def handle(ctx: RequestContext, request: Any) -> Any:
    response, size, keys = _read(ctx, request)
    wait_ms = ms(request.max_wait)
    if size >= request.min_bytes or wait_ms <= 0 or not keys:
        return response
    return _long_poll(ctx, request, wait_ms, keys)


async def _long_poll(ctx: RequestContext, request: Any, wait_ms: int, keys: list[tuple[str, int]]) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        await ctx.broker.wait_for_append(keys, remaining)
        response, size, keys = _read(ctx, request)
        if size >= request.min_bytes:
            return response
    return _read(ctx, request)[0]


def _read(ctx: RequestContext, request: Any) -> tuple[Any, int, list[tuple[str, int]]]:
    """The response as of now, its size in record bytes, and the partitions that could still get data."""
    b = ctx_builder(ctx)
    budget = min(getattr(request, "max_bytes", INT32_MAX), ctx.broker.config.get("fetch.max.bytes"))
    total = 0
    keys: list[tuple[str, int]] = []
    topics = []
    for entry in request.topics:
        topic, topic_error = resolve_topic(ctx.broker, entry)
        partitions = []
        for p in entry.partitions:
            if topic is None or not 0 <= p.partition < len(topic.partitions):
                error = topic_error if topic is None else ErrorCode.unknown_topic_or_partition
                partitions.append(_partition(b, p.partition, error))
                continue
            log = topic.partitions[p.partition]
            limit = min(p.partition_max_bytes, budget - total)
            try:
                data = log.read(p.fetch_offset, max(limit, 0), min_one=total == 0) if limit > 0 or total == 0 \
                    else b""
            except LogError as e:
                partitions.append(_partition(b, p.partition, ErrorCode(e.error_code), log))
                continue
            total += len(data)
            keys.append((topic.name, p.partition))
            partitions.append(_partition(b, p.partition, ErrorCode.none, log, data))
        topics.append(b("FetchableTopicResponse", topic=getattr(entry, "topic", None),
                        topic_id=getattr(entry, "topic_id", None), partitions=tuple(partitions)))
    response = b.response(throttle_time=0, error_code=ErrorCode.none, session_id=0, responses=tuple(topics),
                          node_endpoints=())
    return response, total, keys


def _partition(b: Builder, index: int, error: ErrorCode, log: Any = None, records: bytes = b"") -> Any:
    hw = log.log_end_offset if log is not None else -1
    start = log.log_start_offset if log is not None else -1
    return b("PartitionData", partition_index=index, error_code=error, high_watermark=hw, last_stable_offset=hw,
             log_start_offset=start, aborted_transactions=(), preferred_read_replica=-1, records=records)
