"""DeleteRecords (key 21), v0-v2.

v1: the same request (on a quota violation Kafka answers before throttling). v2: flexible. Kafka 4.x still
serves v0 (KIP-896 left DeleteRecords whole).

Each partition's log start offset moves up to the offset asked for (-1: the high watermark), so that fetches
below it get OFFSET_OUT_OF_RANGE and ListOffsets EARLIEST answers it; the answer carries the low watermark,
which with no replicas is the leader's log start offset. The checks, in Kafka's order (apache/kafka
core/src/main/scala/kafka/server/KafkaApis.scala handleDeleteRecordsRequest, ReplicaManager.scala
deleteRecordsOnLocalLog, cluster/Partition.scala deleteRecordsOnLeader): an unknown topic or partition
UNKNOWN_TOPIC_OR_PARTITION; an internal topic (`__consumer_offsets`) INVALID_TOPIC_EXCEPTION; a partition
another node leads (cluster mode) NOT_LEADER_OR_FOLLOWER; a topic whose cleanup.policy lacks "delete" (a
compacted topic) POLICY_VIOLATION; an offset below -1 or beyond the high watermark OFFSET_OUT_OF_RANGE. An
offset at or below the log start changes nothing and succeeds. Every error answers low watermark -1.

`timeout_ms` is how long Kafka waits for the followers' log starts to reach the offset; herd has no followers,
so the low watermark has moved when the leader has (as on a Kafka partition with one replica) and the answer
never waits for it. The new start is durable before the answer: on the embedded node its checkpoint is written
and the segments wholly below it are deleted at once (Kafka checkpoints the start later and deletes the
segments at its next retention check); in cluster mode the start is stored in PostgreSQL with the rows below
it deleted, fenced by the leader's epoch.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED per partition.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import Topic
from herd.log.api import LogError, NotInMemoryError, PartitionLog, as_remote
from herd.server.apis._authorize import DELETE, topic_denied
from herd.server.apis._build import Builder, LaterAnswers, ctx_builder
from herd.server.apis._topics import led_partition, resolve_topic
from herd.server.broker import RequestContext

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

INVALID_LOW_WATERMARK = -1  # Kafka's DeleteRecordsResponse.INVALID_LOW_WATERMARK, with every error


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    later = LaterAnswers()  # a remote log stores the new start in its database
    topics = []
    checked = ctx.broker.authorizer is not None
    for entry in request.topics:
        topic, topic_error = resolve_topic(ctx.broker, entry)
        if checked and topic_denied(ctx, entry, topic, DELETE):
            topic, topic_error = None, ErrorCode.topic_authorization_failed
        partitions: list[Any] = []
        for p in entry.partitions:
            log = _deletable(topic, topic_error, p.partition_index)
            if isinstance(log, ErrorCode):
                partitions.append(_answer(b, p.partition_index, log))
            else:
                try:
                    partitions.append(_delete(b, p.partition_index, log, p.offset))
                except NotInMemoryError:  # a remote log deletes in its database
                    later.add(partitions, _delete_stored(b, p.partition_index, log, p.offset))
        topics.append(b("DeleteRecordsTopicResult", name=entry.name, partitions=partitions))
    return later.respond(b.response(throttle_time=0, topics=tuple(topics)))


def _deletable(topic: Topic | None, topic_error: ErrorCode, index: int) -> PartitionLog | ErrorCode:
    """The partition's log when this node may delete its records, else the error: Kafka refuses an internal
    topic once it knows the partition exists, before it asks who leads it."""
    if topic is not None and topic.internal and 0 <= index < len(topic.partitions):
        return ErrorCode.invalid_topic_exception
    return led_partition(topic, topic_error, index)


def _delete(b: Builder, index: int, log: PartitionLog, offset: int) -> Any:
    """Raises NotInMemoryError when the log deletes in its store (`_delete_stored`)."""
    try:
        return _answer(b, index, ErrorCode.none, log.delete_records(offset))
    except NotInMemoryError:
        raise
    except LogError as e:
        return _answer(b, index, ErrorCode(e.error_code))


async def _delete_stored(b: Builder, index: int, log: PartitionLog, offset: int) -> Any:
    try:
        return _answer(b, index, ErrorCode.none, await as_remote(log).delete_records_async(offset))
    except LogError as e:
        return _answer(b, index, ErrorCode(e.error_code))


def _answer(b: Builder, index: int, error: ErrorCode, low_watermark: int = INVALID_LOW_WATERMARK) -> Any:
    return b("DeleteRecordsPartitionResult", partition_index=index, low_watermark=low_watermark, error_code=error)
