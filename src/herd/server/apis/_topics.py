"""Finding the partition a request names, by topic name (older versions) or topic id (newer ones), and whether
this node may answer for it."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import Topic
from herd.log.api import PartitionLog
from herd.server.broker import Broker


def resolve_topic(broker: Broker, entry: Any) -> tuple[Topic | None, ErrorCode]:
    """The topic an entry of a request names (its `name`, or its `topic_id` where the version has one)."""
    name = getattr(entry, "name", None) or getattr(entry, "topic", None)
    if name:
        topic = broker.cluster.get(name)
        return topic, (ErrorCode.none if topic else ErrorCode.unknown_topic_or_partition)
    topic_id = getattr(entry, "topic_id", None)
    if topic_id is not None:
        topic = broker.cluster.by_id(topic_id)
        return topic, (ErrorCode.none if topic else ErrorCode.unknown_topic_id)
    return None, ErrorCode.unknown_topic_or_partition


def led_partition(topic: Topic | None, topic_error: ErrorCode, index: int,
                  current_leader_epoch: int = -1) -> PartitionLog | ErrorCode:  # fmt: skip
    """The log of partition `index` of `topic` (as `resolve_topic` found it, with its error) when this node leads
    it at the epoch the client names; else the error to answer: the topic's, UNKNOWN_TOPIC_OR_PARTITION for an
    index the topic does not have, NOT_LEADER_OR_FOLLOWER when another node leads it (cluster mode), or the
    `epoch_error`."""
    if topic is None:
        return topic_error
    if not 0 <= index < len(topic.partitions):
        return ErrorCode.unknown_topic_or_partition
    log = topic.partitions[index]
    if log is None:
        return ErrorCode.not_leader_or_follower
    fenced = epoch_error(current_leader_epoch, log.leader_epoch)
    return log if fenced is None else fenced


def epoch_error(requested: int, epoch: int) -> ErrorCode | None:
    """Kafka's check of the client's current leader epoch (-1: not given) against the leader's:
    FENCED_LEADER_EPOCH when the client's is older (it refreshes its metadata), UNKNOWN_LEADER_EPOCH when newer
    (this node has not yet seen the change; the client retries). A single node leads at epoch 0."""
    if requested < 0:
        return None
    if requested < epoch:
        return ErrorCode.fenced_leader_epoch
    if requested > epoch:
        return ErrorCode.unknown_leader_epoch
    return None


def topic_ref(entry: Any) -> dict[str, Any]:
    """The identifying fields to echo back in a response entry."""
    return {"name": getattr(entry, "name", None), "topic_id": getattr(entry, "topic_id", None)}
