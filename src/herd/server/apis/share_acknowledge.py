"""ShareAcknowledge (key 79), v1: a share consumer's acknowledgements outside a fetch, and how it closes its share
session (epoch -1; librdkafka closes this way). Kafka 4.2's KafkaApis.handleShareAcknowledgeRequest
(docs/kip-932/share-fetch-rules.md section 5): share groups off UNSUPPORTED_VERSION, no READ on the group
GROUP_AUTHORIZATION_FAILED, a bad member id INVALID_REQUEST, then the session (epoch 0 INVALID_SHARE_SESSION_EPOCH,
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH); then each partition's acknowledgements (herd.server.apis.
_share.acknowledge). At epoch -1 the session closes and its member's records are given back. v2 (Kafka 4.2): with
IsRenewAck, acknowledgements of type 4 (Renew, KIP-1222) restart the records' locks; the answer carries the lock
duration (AcquisitionLockTimeoutMs).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.runtime.share_sessions import FINAL_EPOCH, ShareSessionError
from herd.server.apis._build import ctx_builder
from herd.server.apis._share import acknowledge, partitions_and_acks, refused
from herd.server.broker import RequestContext

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx: RequestContext, request: Any) -> Any:
    error = refused(ctx, request.group_id, request.member_id)
    if error is not None:
        return _error(ctx, error)
    return _serve(ctx, request)


async def _serve(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    await broker.remote_group_configs.refresh(group_id)  # cluster mode: the group's configs, if coordinated elsewhere
    try:
        if epoch == FINAL_EPOCH:
            session = broker.share_sessions.close(group_id, member_id)
        else:
            session = broker.share_sessions.acknowledge(group_id, member_id, epoch)
    except ShareSessionError as e:
        return _error(ctx, e.code, e.message)
    _, acks = partitions_and_acks(request.topics)
    renew = getattr(request, "is_renew_ack", False)
    results = await acknowledge(ctx, group_id, member_id, acks, broker.now_ms(), None, renew)
    if epoch == FINAL_EPOCH:
        await broker.release_share_session(session)
    b = ctx_builder(ctx)
    by_topic: dict[Any, list[Any]] = {}
    for (topic_id, index), (code, message) in results.items():
        by_topic.setdefault(topic_id, []).append(
            b(
                "PartitionData",
                partition_index=index,
                error_code=code,
                error_message=message,
                current_leader=b("LeaderIdAndEpoch", leader_id=0, leader_epoch=0),  # Kafka's default
            )
        )
    responses = tuple(
        b("ShareAcknowledgeTopicResponse", topic_id=topic_id, partitions=tuple(parts))
        for topic_id, parts in by_topic.items()
    )
    return b.response(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=broker.shares.lock_duration_ms(group_id),  # v2
        responses=responses,
        node_endpoints=(),
    )


def _error(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    """A top-level error: no partitions, a lock timeout of 0 (v2)."""
    return ctx_builder(ctx).response(
        throttle_time=0,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=0,
        responses=(),
        node_endpoints=(),
    )
