"""OffsetCommit (key 8), v2-v10.

v2: retention time (v2-v4 only; -1 is the broker default). v3: throttle time. v4: no body change. v5:
retention time removed. v6: committed leader epoch. v7: group instance id (KIP-345 fencing). v8: flexible.
v9: an unknown group committed to with a generation gets GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION
(KIP-848). v10: topics by id (KAFKA-19186). Kafka 4.x serves v2-v10 (v0-v1 went with KIP-896).

As in Kafka's KafkaApis, a topic or partition the cluster does not have gets UNKNOWN_TOPIC_OR_PARTITION
(an unknown topic id UNKNOWN_TOPIC_ID) and is not committed; when nothing is left to commit the coordinator
is not asked at all. The empty string is a valid group id here (Kafka keeps it for backwards compatibility;
only a null one, which the schema cannot carry, is INVALID_GROUP_ID). The rest goes to the group's
coordinator shard, which fences by generation, member and instance id and writes one OffsetCommit record per
partition; the answer is sent once they are durable.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
READ on the group (else GROUP_AUTHORIZATION_FAILED on every partition), READ on each topic
(else TOPIC_AUTHORIZATION_FAILED on its partitions, before its existence is looked at).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import CommitPartition, CommitTopic, OffsetCommit
from herd.coordinator.responses import CommitPartitionResponse, CommitTopicResponse, OffsetCommitResponse
from herd.server.apis._authorize import GROUP, READ, TOPIC, authorized
from herd.server.apis._build import ctx_builder, ms
from herd.server.apis._groups import client_host, client_id, route
from herd.server.apis._requests import OffsetCommitRequest
from herd.server.broker import RequestContext

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 10

Errors = dict[tuple[int, int], int]  # (topic entry index, partition index) -> error code


def handle(ctx: RequestContext, request: OffsetCommitRequest) -> Any:
    if ctx.broker.authorizer is not None and not authorized(ctx, READ, GROUP, request.group_id):
        return _response(
            ctx,
            request,
            [None] * len(request.topics),
            every_partition(request, ErrorCode.group_authorization_failed),
            OffsetCommitResponse(),
        )
    names, local = resolve(ctx, request)
    topics = tuple(
        CommitTopic(
            names[i], tuple(commit_partition(p) for p in entry.partitions if (i, p.partition_index) not in local)
        )
        for i, entry in enumerate(request.topics)
        if names[i] is not None
    )
    req = OffsetCommit(
        group_id=request.group_id,
        generation_id_or_member_epoch=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        retention_time_ms=ms(getattr(request, "retention_time", -1)),
        topics=tuple(t for t in topics if t.partitions),
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )

    def respond(response: OffsetCommitResponse) -> Any:
        return _response(ctx, request, names, local, response)

    def on_error(code: int) -> OffsetCommitResponse:
        return all_failed(req, code)

    if not req.topics:
        return respond(OffsetCommitResponse())
    return route(ctx, req.group_id, GroupCoordinatorShard.offset_commit, req, respond, on_error)


def resolve(ctx: RequestContext, request: Any) -> tuple[list[str | None], Errors]:
    """Each topic entry's name (None if unknown or not authorized) and the errors of partitions that cannot be
    committed: TOPIC_AUTHORIZATION_FAILED without READ on the topic (apache/kafka core/src/main/scala/kafka/server/
    KafkaApis.scala handleOffsetCommitRequest, handleTxnOffsetCommitRequest: before existence is looked at), else
    unknown topics and partitions. TxnOffsetCommit uses it too: it names its topics, as OffsetCommit below v10."""
    cluster = ctx.broker.cluster
    checked = ctx.broker.authorizer is not None
    names: list[str | None] = []
    local: Errors = {}
    for i, entry in enumerate(request.topics):
        if ctx.api_version >= 10:
            topic = cluster.by_id(entry.topic_id)
            missing = ErrorCode.unknown_topic_id
        else:
            topic = cluster.get(entry.name)
            missing = ErrorCode.unknown_topic_or_partition
        name = topic.name if topic is not None else None
        if checked and not _readable(ctx, name or getattr(entry, "name", None)):
            names.append(None)
            local.update(every_partition_of(i, entry, ErrorCode.topic_authorization_failed))
            continue
        names.append(name)
        for p in entry.partitions:
            if topic is None:
                local[(i, p.partition_index)] = missing
            elif not 0 <= p.partition_index < len(topic.partitions):
                local[(i, p.partition_index)] = ErrorCode.unknown_topic_or_partition
    return names, local


def _readable(ctx: RequestContext, name: str | None) -> bool:
    """May the principal READ the topic (an entry naming no topic is not denied: it is unknown)?"""
    return not name or authorized(ctx, READ, TOPIC, name)


def commit_partition(p: Any) -> CommitPartition:
    return CommitPartition(
        p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), -1, p.committed_metadata
    )


def all_failed(req: OffsetCommit, code: int) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=tuple(
            CommitTopicResponse(t.name, tuple(CommitPartitionResponse(p.partition_index, code) for p in t.partitions))
            for t in req.topics
        )
    )


# A consumer commits the same partitions over and over, and the answer depends only on them and their error
# codes: each distinct answer is built once and shared (kio responses are immutable), and the connection
# encodes its body once too (herd.protocol.messages.CACHED_BODY_APIS). Building and encoding one through
# kio took ~40 us, a good part of a commit's cost.
_RESPONSES: dict[tuple[Any, ...], Any] = {}
_RESPONSES_MAX = 4096


def _response(
    ctx: RequestContext, request: Any, names: list[str | None], local: Errors, response: OffsetCommitResponse
) -> Any:
    decided = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    ctx.broker.metrics.offset_commits += sum(1 for code in decided.values() if not code)
    shape = (
        ctx.api_version,
        tuple(
            (
                getattr(entry, "name", None),
                getattr(entry, "topic_id", None),
                tuple(
                    (
                        p.partition_index,
                        local.get((i, p.partition_index), decided.get((names[i], p.partition_index), 0)),
                    )
                    for p in entry.partitions
                ),
            )
            for i, entry in enumerate(request.topics)
        ),
    )
    cached = _RESPONSES.get(shape)
    if cached is None:
        if len(_RESPONSES) >= _RESPONSES_MAX:
            _RESPONSES.clear()
        cached = _RESPONSES[shape] = _build_response(ctx, shape[1])
    return cached


def _build_response(ctx: RequestContext, topics: tuple[Any, ...]) -> Any:
    b = ctx_builder(ctx)
    return b.response(
        throttle_time=0,
        topics=tuple(
            b(
                "OffsetCommitResponseTopic",
                name=name,
                topic_id=topic_id,
                partitions=tuple(
                    b("OffsetCommitResponsePartition", partition_index=index, error_code=code) for index, code in parts
                ),
            )
            for name, topic_id, parts in topics
        ),
    )


def every_partition(request: Any, code: int) -> Errors:
    """`code` for every partition of the request (Kafka's getErrorResponse)."""
    errors: Errors = {}
    for i, entry in enumerate(request.topics):
        errors.update(every_partition_of(i, entry, code))
    return errors


def every_partition_of(i: int, entry: Any, code: int) -> Errors:
    return {(i, p.partition_index): code for p in entry.partitions}
