"""OffsetFetch (key 9), v1-v10.

v1: per-partition errors only. v2: a top-level error code, and a null topic list fetches every committed
offset of the group. v3: throttle time. v4: no body change. v5: committed leader epoch. v6: flexible. v7:
require stable (KIP-447: a partition with a pending transactional offset, staged by TxnOffsetCommit and not yet
committed or aborted by its transaction's marker, answers UNSTABLE_OFFSET_COMMIT and offset -1; the client
retries). v8: many groups
in one request (KIP-709). v9: member id and epoch (KIP-848; a classic group does not check them, as in
Kafka). v10: topics by id. Kafka 4.x serves v1-v10.

Each group is asked of its own coordinator shard. A partition without a committed offset answers offset -1
with empty metadata and no error; on v10 an unknown topic id gets UNKNOWN_TOPIC_ID. The empty string is a
valid group id (as in Kafka, for backwards compatibility). A group-level error (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS) is the group's error on v8+, the top-level error on v2-v7 and every
partition's error on v1.

Answers of v1-v9 are packed directly (herd.protocol.offset_fetch_body, checked against kio's writer), v10's built
with kio.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED); named topics the principal may
not DESCRIBE get TOPIC_AUTHORIZATION_FAILED per partition, and are left out when all are asked for.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import FetchGroup, FetchTopic, OffsetFetch
from herd.coordinator.responses import FetchGroupResponse, FetchPartitionResponse, OffsetFetchResponse
from herd.protocol.messages import EncodedBody, response_class
from herd.protocol.offset_fetch_body import offset_fetch_body
from herd.server.apis._authorize import DESCRIBE, GROUP, TOPIC, authorized
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._groups import call, client_host, client_id, gather
from herd.server.broker import RequestContext

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 10
PACKED_MAX_VERSION = 9  # v10 names topics by id: answered through kio


def handle(ctx: RequestContext, request: Any) -> Any:
    entries = request.groups if ctx.api_version >= 8 else (request,)
    require_stable = getattr(request, "require_stable", False)
    outcomes = [_fetch_group(ctx, entry, require_stable) for entry in entries]
    return gather(outcomes, lambda responses: _response(ctx, request, entries, responses))


def _fetch_group(ctx: RequestContext, entry: Any, require_stable: bool) -> Any:
    group_id = entry.group_id
    topics = None if entry.topics is None else tuple(_topic(ctx, t) for t in entry.topics)

    def on_error(code: int) -> OffsetFetchResponse:
        return OffsetFetchResponse(groups=(FetchGroupResponse(group_id, error_code=code),))

    if ctx.broker.authorizer is not None:
        if not authorized(ctx, DESCRIBE, GROUP, group_id):
            return on_error(ErrorCode.group_authorization_failed)
        if topics is not None:  # the others are answered TOPIC_AUTHORIZATION_FAILED here
            topics = tuple(t for t in topics if not t.name or authorized(ctx, DESCRIBE, TOPIC, t.name))
    if topics is not None and ctx.api_version >= 10:
        topics = tuple(t for t in topics if t.name)  # unknown ids are answered here
    req = OffsetFetch(
        groups=(FetchGroup(group_id, topics, getattr(entry, "member_id", None), getattr(entry, "member_epoch", -1)),),
        require_stable=require_stable,
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )
    return call(ctx, group_id, GroupCoordinatorShard.offset_fetch, req, on_error)


def _topic(ctx: RequestContext, entry: Any) -> FetchTopic:
    """The topic by name; on v10 by id ("" when the id is unknown: answered UNKNOWN_TOPIC_ID locally)."""
    if ctx.api_version >= 10:
        topic = ctx.broker.cluster.by_id(entry.topic_id)
        return FetchTopic(topic.name if topic is not None else "", tuple(entry.partition_indexes))
    return FetchTopic(entry.name, tuple(entry.partition_indexes))


def _response(ctx: RequestContext, request: Any, entries: Any, responses: list[OffsetFetchResponse]) -> Any:
    v = ctx.api_version
    if v <= PACKED_MAX_VERSION:  # packed directly (herd.protocol.offset_fetch_body): the hot path of a rebalance
        groups = [
            (r.groups[0].group_id, _answered(ctx, entry, r.groups[0]), r.groups[0].error_code)
            for entry, r in zip(entries, responses, strict=True)
        ]
        return EncodedBody(response_class(API_KEY, v), offset_fetch_body(v, groups))
    b = ctx_builder(ctx)
    answers = [(r.groups[0], _topics(ctx, b, entry, r.groups[0])) for entry, r in zip(entries, responses, strict=True)]
    if ctx.api_version >= 8:
        return b.response(
            throttle_time=0,
            groups=tuple(
                b("OffsetFetchResponseGroup", group_id=group.group_id, topics=topics, error_code=group.error_code)
                for group, topics in answers
            ),
        )
    group, topics = answers[0]
    return b.response(throttle_time=0, topics=topics, error_code=group.error_code)


def _topics(ctx: RequestContext, b: Builder, entry: Any, group: FetchGroupResponse) -> tuple[Any, ...]:
    """The group's answer as kio topics (`_answered`)."""
    return tuple(_kio_topic(b, ctx.api_version, name, topic_id, partitions)
                 for name, topic_id, partitions in _answered_topics(ctx, entry, group))  # fmt: skip


def _answered(ctx: RequestContext, entry: Any, group: FetchGroupResponse) -> list[tuple[str, Any]]:
    """The group's answer as (name, partitions) of each topic (below v10, where topics have names)."""
    return [(name or "", partitions) for name, _, partitions in _answered_topics(ctx, entry, group)]


def _answered_topics(
    ctx: RequestContext, entry: Any, group: FetchGroupResponse
) -> list[tuple[str | None, Any, tuple[FetchPartitionResponse, ...]]]:
    """(name, topic id, partitions) of each topic of the group's answer, in the request's order when it named
    topics."""
    v = ctx.api_version
    if group.error_code and v >= 2:
        return []
    cluster = ctx.broker.cluster
    if entry.topics is None:
        known = [
            (t, cluster.get(t.name))
            for t in group.topics
            if ctx.broker.authorizer is None or authorized(ctx, DESCRIBE, TOPIC, t.name)
        ]
        return [(t.name, topic.topic_id if topic else None, t.partitions) for t, topic in known
                if v < 10 or topic is not None]  # fmt: skip
    answered = {t.name: t for t in group.topics}
    out = []
    for requested in entry.topics:
        name = _topic(ctx, requested).name
        denied = ctx.broker.authorizer is not None and bool(name) and not authorized(ctx, DESCRIBE, TOPIC, name)
        if group.error_code or (v >= 10 and not name) or denied:
            code = group.error_code or (ErrorCode.topic_authorization_failed if denied else ErrorCode.unknown_topic_id)
            partitions = tuple(FetchPartitionResponse(p, error_code=code) for p in requested.partition_indexes)
        else:
            partitions = answered[name].partitions
        out.append((getattr(requested, "name", None), getattr(requested, "topic_id", None), partitions))
    return out


def _kio_topic(
    b: Builder, version: int, name: str | None, topic_id: Any, partitions: tuple[FetchPartitionResponse, ...]
) -> Any:
    suffix = "s" if version >= 8 else ""
    topic_ids = {"topic_id": topic_id} if version >= 8 else {}  # v0-v7's OffsetFetchResponseTopic has no id field
    return b(
        "OffsetFetchResponseTopic" + suffix,
        name=name,
        **topic_ids,
        partitions=tuple(
            b(
                "OffsetFetchResponsePartition" + suffix,
                partition_index=p.partition_index,
                committed_offset=p.committed_offset,
                committed_leader_epoch=p.committed_leader_epoch,
                metadata=p.metadata,
                error_code=p.error_code,
            )
            for p in partitions
        ),
    )
