"""What the share coordinator's five APIs share (InitializeShareGroupState 83, ReadShareGroupState 84,
WriteShareGroupState 85, DeleteShareGroupState 86, ReadShareGroupStateSummary 87): the requests Kafka's brokers
send each other, from a share partition's leader (its DefaultStatePersister) to the share coordinator of the
`__share_group_state` partition that keeps the share partition's state (herd.runtime.share_state), and which a
herd node sends another in cluster mode (herd.server.share_state_peers).

As Kafka 4.2's KafkaApis.handle*ShareGroupStateRequest and ShareCoordinatorService/ShareCoordinatorShard
(confluentinc/kafka core/src/main/scala/kafka/server/KafkaApis.scala, share-coordinator/src/main/java/org/apache/
kafka/coordinator/share/ShareCoordinatorService.java and ShareCoordinatorShard.java):
- with authorizer.class.name set, CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED on every
  partition asked for;
- no topics, a topic with no partitions or an empty group id: an empty answer (no results);
- the share coordinator not running: COORDINATOR_NOT_AVAILABLE "Share coordinator is not available." on each;
- per partition, one request to the shard hosting its key: a null topic id or a negative partition INVALID_REQUEST
  ("The topic id cannot be null." / "The partition id cannot be a negative number."), a topic or partition the
  cluster does not have UNKNOWN_TOPIC_OR_PARTITION (Kafka checks it after the state's epochs; herd first, which
  differs only for a request wrong in both ways), NOT_COORDINATOR when this node does not host the key's
  partition, COORDINATOR_LOAD_IN_PROGRESS while it loads, and otherwise the shard's answer (FENCED_LEADER_EPOCH,
  FENCED_STATE_EPOCH, INVALID_REQUEST for a read or write of a partition never initialized, ...).
The partitions of one request are handled concurrently; the answer lists them per topic in the request's order.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator.share_state.records import StateBatch
from herd.coordinator.share_state.shard import Delete, Initialize, Read, ShareStateResponse, Write
from herd.runtime.share_state import ShareStateRequest, coordinator_key
from herd.server.apis._authorize import CLUSTER_ACTION, authorized_cluster
from herd.server.apis._build import Builder, ctx_builder
from herd.server.broker import RequestContext

NOT_AVAILABLE = "Share coordinator is not available."
NULL_TOPIC_ID = "The topic id cannot be null."
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."

# (the group id, a topic's id, one of its partitions' data) -> the shard's request
ToRequest = Callable[[str, uuid.UUID, Any], ShareStateRequest]
# (the response's builder, the partition's data, the shard's answer) -> the partition's result
Answer = Callable[[Builder, Any, ShareStateResponse], Any]


def initialize_request(group_id: str, topic_id: uuid.UUID, p: Any) -> Initialize:
    return Initialize(group_id, topic_id, p.partition, p.state_epoch, p.start_offset)


def read_request(group_id: str, topic_id: uuid.UUID, p: Any) -> Read:
    return Read(group_id, topic_id, p.partition, p.leader_epoch)


def write_request(group_id: str, topic_id: uuid.UUID, p: Any) -> Write:
    batches = tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
    )
    return Write(group_id, topic_id, p.partition, p.state_epoch, p.leader_epoch, p.start_offset, batches)


def delete_request(group_id: str, topic_id: uuid.UUID, p: Any) -> Delete:
    return Delete(group_id, topic_id, p.partition)


def error_result(b: Builder, p: Any, answer: ShareStateResponse) -> Any:
    """The partition's result with only an error (Initialize, Write and Delete answer nothing else)."""
    return b("PartitionResult", partition=p.partition, error_code=answer.error_code, error_message=answer.error_message)


def serve(ctx: RequestContext, request: Any, result: str, to_request: ToRequest, handler: Any, answer: Answer) -> Any:
    """The answer to one of the five requests: `result` names the per-topic result class of its response,
    `to_request` makes the shard's request of each partition, `handler` is the ShareStateShard method, `answer`
    makes each partition's result."""
    b = ctx_builder(ctx)
    group_id = request.group_id
    if not request.topics or any(not t.partitions for t in request.topics) or not group_id:
        return b.response(results=())
    broker = ctx.broker
    refusal = None
    if broker.authorizer is not None and not authorized_cluster(ctx, CLUSTER_ACTION):
        refusal = ShareStateResponse(ErrorCode.cluster_authorization_failed)
    elif broker.share_state is None:
        refusal = ShareStateResponse(ErrorCode.coordinator_not_available, NOT_AVAILABLE)
    if refusal is not None:
        return b.response(results=tuple(_topic_result(b, result, t, [answer(b, p, refusal) for p in t.partitions])
                                        for t in request.topics))  # fmt: skip
    return _served(ctx, b, request, result, to_request, handler, answer)


async def _served(
    ctx: RequestContext, b: Builder, request: Any, result: str, to_request: ToRequest, handler: Any, answer: Answer
) -> Any:
    group_id = request.group_id

    async def one(topic_id: uuid.UUID | None, p: Any) -> Any:
        return answer(b, p, await _one(ctx, group_id, topic_id, p, to_request, handler))

    topics = []
    for t in request.topics:
        partitions = await asyncio.gather(*(one(t.topic_id, p) for p in t.partitions))
        topics.append(_topic_result(b, result, t, partitions))
    return b.response(results=tuple(topics))


async def _one(
    ctx: RequestContext, group_id: str, topic_id: uuid.UUID | None, p: Any, to_request: ToRequest, handler: Any
) -> ShareStateResponse:
    if topic_id is None:
        return ShareStateResponse(ErrorCode.invalid_request, NULL_TOPIC_ID)
    if p.partition < 0:
        return ShareStateResponse(ErrorCode.invalid_request, NEGATIVE_PARTITION_ID)
    broker = ctx.broker
    topic = broker.cluster.by_id(topic_id)
    if topic is None or p.partition >= len(topic.partitions):
        return ShareStateResponse(ErrorCode.unknown_topic_or_partition)
    share_state = broker.share_state
    assert share_state is not None  # checked by `serve`
    key = coordinator_key(group_id, topic_id, p.partition)
    return await share_state.call_local(key, handler, to_request(group_id, topic_id, p))


def _topic_result(b: Builder, result: str, t: Any, partitions: list[Any]) -> Any:
    return b(result, topic_id=t.topic_id, partitions=tuple(partitions))
