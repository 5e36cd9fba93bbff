"""DescribeProducers (key 61), v0.

v0: the only version (KIP-664, Kafka 2.8), flexible. Kafka 4.x serves v0.

For each partition asked for, the idempotent producers whose state the partition's leader keeps (the log's
`active_producers`, herd.log.producer_state: those not expired by producer.id.expiration.ms, restored after a
restart from the partition's snapshots): producer id, epoch, last sequence and the max timestamp of its last
batch, as Kafka's
UnifiedLog.activeProducers answers them (apache/kafka core/src/main/scala/kafka/log/UnifiedLog.scala; the request
is handled by KafkaApis.handleDescribeProducersRequest and ReplicaManager.activeProducerState). The coordinator
epoch of a producer's last marker and the first offset of its ongoing transaction come from the log's own
transaction state (herd.log.transactions), which also adds the producers known only from it (-1 for what it
does not know: last sequence and timestamp).

Errors, as Kafka's: a topic name Kafka refuses gets INVALID_TOPIC_EXCEPTION and an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, both with a message, for each partition asked for; a partition the topic does not
have UNKNOWN_TOPIC_OR_PARTITION; a partition offline after a disk error KAFKA_STORAGE_ERROR. In cluster mode a
partition another node leads gets NOT_LEADER_OR_FOLLOWER (Kafka answers from a follower replica too; herd has
none), and so does one whose state is still being rebuilt after this node took it over (retriable).

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
READ on each topic, else TOPIC_AUTHORIZATION_FAILED per partition.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import UNKNOWN_TOPIC_MESSAGE, TopicError, check_topic_name
from herd.log.api import NotLeaderError
from herd.server.apis._authorize import READ, TOPIC, authorized
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._topics import led_partition
from herd.server.broker import RequestContext

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    topics = tuple(
        b("TopicResponse", name=entry.name, partitions=tuple(_topic(b, ctx, entry))) for entry in request.topics
    )
    return b.response(throttle_time=0, topics=topics)


def _topic(b: Builder, ctx: RequestContext, entry: Any) -> list[Any]:
    if not authorized(ctx, READ, TOPIC, entry.name):
        return [_error(b, index, ErrorCode.topic_authorization_failed) for index in entry.partition_indexes]
    try:
        check_topic_name(entry.name)
    except TopicError as e:
        return [_error(b, index, ErrorCode.invalid_topic_exception, str(e)) for index in entry.partition_indexes]
    topic = ctx.broker.cluster.get(entry.name)
    if topic is None:
        return [
            _error(b, index, ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_MESSAGE)
            for index in entry.partition_indexes
        ]
    return [_partition(b, ctx, topic, index) for index in entry.partition_indexes]


def _partition(b: Builder, ctx: RequestContext, topic: Any, index: int) -> Any:
    log = led_partition(topic, ErrorCode.none, index)
    if isinstance(log, ErrorCode):
        return _error(b, index, log)
    if log.failure is not None:
        return _error(b, index, ErrorCode.kafka_storage_error, log.failure)
    broker = ctx.broker
    try:
        producers = log.active_producers(broker.now_ms())
    except NotLeaderError:
        return _error(b, index, ErrorCode.not_leader_or_follower)
    states = tuple(
        b(
            "ProducerState",
            producer_id=p.producer_id,
            producer_epoch=p.epoch,
            last_sequence=p.last_sequence,
            last_timestamp=p.last_timestamp,
            coordinator_epoch=p.coordinator_epoch,
            current_txn_start_offset=p.current_txn_start_offset,
        )
        for p in producers
    )
    return b(
        "PartitionResponse",
        partition_index=index,
        error_code=ErrorCode.none,
        error_message=None,
        active_producers=states,
    )


def _error(b: Builder, index: int, error: ErrorCode, message: str | None = None) -> Any:
    return b("PartitionResponse", partition_index=index, error_code=error, error_message=message, active_producers=())
