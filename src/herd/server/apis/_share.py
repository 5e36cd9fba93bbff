"""What ShareFetch (share_fetch.py) and ShareAcknowledge (share_acknowledge.py) share: the checks before the session
and the acknowledgements (KafkaApis.handleShareFetchRequest / handleShareAcknowledgeRequest,
validateAcknowledgementBatches, handleAcknowledgements; docs/kip-932/share-fetch-rules.md sections 1, 5 and 6)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator.responses import ShareOffsetsAnswer
from herd.runtime.shares import Staged
from herd.server.apis._authorize import GROUP, READ, TOPIC, authorized
from herd.server.apis._groups import call
from herd.server.broker import RequestContext

TopicPartition = tuple[uuid.UUID, int]
AckBatch = tuple[int, int, tuple[int, ...]]
MAX_MEMBER_ID = 36
MAX_ACK_TYPE_V1 = 3  # Reject
RENEW = 4  # v2 (KIP-1222): with IsRenewAck


def refused(ctx: RequestContext, group_id: str | None, member_id: str | None) -> ErrorCode | None:
    """The request-wide refusals before the session, in Kafka's order: share groups off (UNSUPPORTED_VERSION), no
    READ on the group (GROUP_AUTHORIZATION_FAILED), a member id empty or longer than 36 characters or a group id
    missing (INVALID_REQUEST). The broker never checks that the member is in the group."""
    broker = ctx.broker
    if not broker.config.get("group.share.enable"):
        return ErrorCode.unsupported_version
    if broker.authorizer is not None and not authorized(ctx, READ, GROUP, group_id or ""):
        return ErrorCode.group_authorization_failed
    if group_id is None or not member_id or len(member_id) > MAX_MEMBER_ID:
        return ErrorCode.invalid_request
    return None


def partitions_and_acks(topics: Iterable[Any]) -> tuple[list[TopicPartition], dict[TopicPartition, list[AckBatch]]]:
    """The request's partitions in order (a topic named twice is merged: librdkafka does that) and their
    acknowledgement batches."""
    named: dict[TopicPartition, None] = {}
    acks: dict[TopicPartition, list[AckBatch]] = {}
    for topic in topics:
        for p in topic.partitions:
            tp = (topic.topic_id, p.partition_index)
            named[tp] = None
            batches = acks.setdefault(tp, [])
            batches.extend(
                (b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in p.acknowledgement_batches
            )
    return list(named), acks


def _valid(batches: list[AckBatch], max_type: int, renew: bool) -> bool:
    """validateAcknowledgementBatches: ordered (a batch may start at the previous one's last offset, as Kafka's
    check lets it), each with types, one per offset or one for the range, each a known type; a Renew only with
    IsRenewAck."""
    previous_end = -1
    for first, last, types in batches:
        if first > last or first < previous_end or not types:
            return False
        if len(types) > 1 and last - first + 1 != len(types):
            return False
        if any(t < 0 or t > max_type for t in types) or (RENEW in types and not renew):
            return False
        previous_end = last
    return True


async def acknowledge(
    ctx: RequestContext,
    group_id: str,
    member_id: str,
    acks: dict[TopicPartition, list[AckBatch]],
    now_ms: int,
    staged: list[Staged] | None = None,
    renew: bool = False,
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    """Apply the acknowledgements, partition by partition: each partition's error and message (UNKNOWN_TOPIC_ID,
    INVALID_REQUEST for a bad batch, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, then the share
    partition's). Every partition named answers when any has batches; none when none has."""
    if not any(acks.values()):
        return {}
    broker = ctx.broker
    out: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
    touched: list[tuple[str, int]] = []
    for tp, batches in acks.items():
        topic_id, index = tp
        topic = broker.cluster.by_id(topic_id)
        if topic is None:
            out[tp] = (ErrorCode.unknown_topic_id, None)
        elif not _valid(batches, RENEW if ctx.api_version >= 2 else MAX_ACK_TYPE_V1, renew):
            out[tp] = (ErrorCode.invalid_request, "Invalid acknowledgement batches.")
        elif broker.authorizer is not None and not authorized(ctx, READ, TOPIC, topic.name):
            out[tp] = (ErrorCode.topic_authorization_failed, None)
        elif not 0 <= index < len(topic.partitions):
            out[tp] = (ErrorCode.unknown_topic_or_partition, None)
        elif not batches:
            out[tp] = (ErrorCode.none, None)
        else:
            out[tp] = await broker.shares.acknowledge(group_id, member_id, topic.name, index, batches, now_ms, staged)
            touched.append((topic.name, index))
    for key in touched:  # records acknowledged or released: fetches waiting on the partition look again
        broker.notify_append(key)
    return out


def offsets_refused(ctx: RequestContext, group_id: str, operation: Any) -> ErrorCode | None:
    """The request-wide refusals of AlterShareGroupOffsets and DeleteShareGroupOffsets, in Kafka's order: share
    groups off, no `operation` on the group (READ to alter, DELETE to delete), an empty group id, no coordinator."""
    broker = ctx.broker
    if not broker.config.get("group.share.enable"):
        return ErrorCode.unsupported_version
    if broker.authorizer is not None and not authorized(ctx, operation, GROUP, group_id):
        return ErrorCode.group_authorization_failed
    if not group_id:
        return ErrorCode.invalid_group_id
    if broker.coordinator is None:
        return ErrorCode.coordinator_not_available
    return None


async def ask_shard(ctx: RequestContext, group_id: str, handler: Any, req: Any) -> ShareOffsetsAnswer:
    """A share-group offset operation on the group's coordinator shard: its answer, or the coordinator's refusal
    (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) as one."""
    outcome = call(ctx, group_id, handler, req, lambda code: ShareOffsetsAnswer(error_code=code))
    answer = await outcome if isinstance(outcome, asyncio.Future) else outcome
    assert isinstance(answer, ShareOffsetsAnswer)
    return answer
