"""OffsetForLeaderEpoch (key 23), v2-v4.

v2: the client's current leader epoch (checked as Fetch checks it) and throttle time (Kafka 4.x's lowest,
KIP-896). v3: replica id. v4: flexible.

A consumer that sees a partition's leader epoch change (KIP-320) asks the new leader where the epoch of its
position ended, and finds out whether the log was truncated under it; kafka-python's consumer does not fetch from
the partition again until it has an answer. For each partition the answer is the largest epoch at most the one
asked for and the offset where the next epoch began, or the high watermark for the current epoch (Kafka answers
its log end offset, which on herd's leader is the committed end: nothing above it is ever read), as Kafka's
leader-epoch cache does (`herd.log.api.end_offset_for_epoch`). A single node leads every partition at epoch 0
from offset 0; in cluster mode every leadership change starts an epoch at the log end offset of the moment
(herd.log.postgres.schema), read from PostgreSQL on the first request to the leader. Either way the log gives
its history (`herd.log.api.PartitionLog.epoch_history`), and the answer waits for it. A partition another node
leads gets NOT_LEADER_OR_FOLLOWER; a current leader epoch older than the leader's FENCED_LEADER_EPOCH, a newer
one UNKNOWN_LEADER_EPOCH (-1: not checked). herd has no follower replicas: a request with a replica id is
answered as a consumer's.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED per partition (all of them with CLUSTER_ACTION on
the cluster).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.log.api import LogError, PartitionLog, end_offset_for_epoch
from herd.server.apis._authorize import CLUSTER_ACTION, DESCRIBE, authorized_cluster, topic_denied
from herd.server.apis._build import Builder, LaterAnswers, ctx_builder
from herd.server.apis._topics import led_partition, resolve_topic
from herd.server.broker import RequestContext

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    later = LaterAnswers()  # the epoch history, which a remote log reads from its database
    topics = []
    # KafkaApis: everything with CLUSTER_ACTION on the cluster (the brokers'), else DESCRIBE on each topic
    checked = ctx.broker.authorizer is not None and not authorized_cluster(ctx, CLUSTER_ACTION)
    for entry in request.topics:
        topic, topic_error = resolve_topic(ctx.broker, entry)
        if checked and topic_denied(ctx, entry, topic, DESCRIBE):
            topic, topic_error = None, ErrorCode.topic_authorization_failed
        answers: list[Any] = []
        for p in entry.partitions:
            log = led_partition(topic, topic_error, p.partition, p.current_leader_epoch)
            if isinstance(log, ErrorCode):
                answers.append(_answer(b, p.partition, log))
            else:
                later.add(answers, _epoch_answer(b, p.partition, log, p.leader_epoch))
        topics.append(b("OffsetForLeaderTopicResult", topic=entry.topic, partitions=answers))
    return later.respond(b.response(throttle_time=0, topics=tuple(topics)))


async def _epoch_answer(b: Builder, index: int, log: PartitionLog, requested: int) -> Any:
    try:
        history = await log.epoch_history()
    except LogError as e:  # NOT_LEADER_OR_FOLLOWER if it moved meanwhile, KAFKA_STORAGE_ERROR
        return _answer(b, index, ErrorCode(e.error_code))
    epoch, end = end_offset_for_epoch(history, requested, log.log_end_offset)
    return _answer(b, index, ErrorCode.none, epoch, end)


def _answer(b: Builder, index: int, error: ErrorCode, epoch: int = -1, end_offset: int = -1) -> Any:
    return b("EpochEndOffset", error_code=error, partition=index, leader_epoch=epoch, end_offset=end_offset)
