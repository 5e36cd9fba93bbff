"""The embedded consumer protocol: what consumers put in JoinGroup metadata and SyncGroup assignments.

A member of a group with protocol type "consumer" sends a ConsumerProtocolSubscription as its JoinGroup
protocol metadata, and the leader hands each member a ConsumerProtocolAssignment through SyncGroup. Both
are Kafka "data" schemas (clients/src/main/resources/common/message/ConsumerProtocol*.json in
apache/kafka) whose wire form is an int16 version followed by the struct at that version, exactly as
Java's org.apache.kafka.clients.consumer.internals.ConsumerProtocol writes them.

Versions: subscription v0 (topics, user data), v1 (+ owned partitions, KIP-429), v2 (+ generation id,
KIP-792), v3 (+ rack id, KIP-881); assignment v0-v3 share one layout. Encoding and decoding go through
kio's generated classes. A version newer than 3 is read with the v3 schema and trailing bytes are
ignored, as Java does, so newer clients can join a group led by herd. Fields a version cannot carry are
dropped when encoding at that version (again as Java does).

The public types (Subscription, Assignment, TopicPartition) do not depend on the version.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.consumer_protocol_subscription.v2 import data as subscription_v2
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int16
from kio.serial.writers import write_int16
from kio.static.primitive import i16, i32

__all__ = [
    "LATEST_VERSION",
    "Assignment",
    "ConsumerProtocolError",
    "Subscription",
    "TopicPartition",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "group_by_topic",
    "read_version",
]

LATEST_VERSION: Final = 3
NO_GENERATION: Final = -1

_SUBSCRIPTION: Final = (subscription_v0, subscription_v1, subscription_v2, subscription_v3)
_ASSIGNMENT: Final = (assignment_v0, assignment_v1, assignment_v2, assignment_v3)


class ConsumerProtocolError(ValueError):
    """Malformed consumer protocol bytes (the remote member's fault) or an unencodable version."""


class TopicPartition(NamedTuple):
    """One partition of one topic.

    A NamedTuple rather than a dataclass: assignors hash and sort tens of thousands of these, and tuple
    comparison and hashing run in C.
    """

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Subscription:
    """A member's JoinGroup metadata, whatever version it travelled as (missing fields take defaults)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = NO_GENERATION
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """The partitions the leader gave one member, and the assignor's user data."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition numbers per topic, topics in order of first appearance."""
    grouped: dict[str, list[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, []).append(partition)
    return grouped


def _check_encodable(version: int) -> None:
    if not 0 <= version <= LATEST_VERSION:
        raise ConsumerProtocolError(f"cannot encode consumer protocol version {version}")


def _with_version(version: int, entity_type: Any, entity: Any) -> bytes:
    buffer = io.BytesIO()
    write_int16(buffer, i16(version))
    entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


def _owned_partitions(module: Any, partitions: Iterable[TopicPartition]) -> tuple[Any, ...]:
    return tuple(
        module.TopicPartition(topic=TopicName(topic), partitions=tuple(i32(p) for p in numbers))
        for topic, numbers in group_by_topic(partitions).items()
    )


def encode_subscription(subscription: Subscription, version: int = LATEST_VERSION) -> bytes:
    """Encode as `version` (0-3); raises ConsumerProtocolError for another version."""
    _check_encodable(version)
    module = _SUBSCRIPTION[version]
    fields: dict[str, Any] = {"topics": subscription.topics, "user_data": subscription.user_data}
    if version >= 1:
        fields["owned_partitions"] = _owned_partitions(module, subscription.owned_partitions)
    if version >= 2:
        fields["generation_id"] = i32(subscription.generation_id)
    if version >= 3:
        fields["rack_id"] = subscription.rack_id
    entity_type = module.ConsumerProtocolSubscription
    return _with_version(version, entity_type, entity_type(**fields))


def encode_assignment(assignment: Assignment, version: int = LATEST_VERSION) -> bytes:
    """Encode as `version` (0-3); raises ConsumerProtocolError for another version."""
    _check_encodable(version)
    module = _ASSIGNMENT[version]
    entity = module.ConsumerProtocolAssignment(
        assigned_partitions=_owned_partitions(module, assignment.partitions),
        user_data=assignment.user_data,
    )
    return _with_version(version, module.ConsumerProtocolAssignment, entity)


def read_version(data: bytes | memoryview) -> int:
    """The version prefix of encoded subscription or assignment bytes; raises ConsumerProtocolError."""
    try:
        version, _ = read_int16(data, 0)
    except Exception as exc:  # kio raises BufferUnderflow; any failure here is malformed input
        raise ConsumerProtocolError("consumer protocol data shorter than its version prefix") from exc
    if version < 0:
        raise ConsumerProtocolError(f"unsupported consumer protocol version {version}")
    return int(version)


def _read_struct(data: bytes | memoryview, modules: tuple[Any, ...], class_name: str) -> tuple[int, Any]:
    version = read_version(data)
    module = modules[min(version, LATEST_VERSION)]
    try:
        entity, _ = entity_reader(getattr(module, class_name))(data, 2)
    except Exception as exc:  # truncated or garbled bytes from a remote member
        raise ConsumerProtocolError(f"malformed {class_name} v{version}: {exc}") from exc
    return version, entity


def _partitions(topic_partitions: Iterable[Any]) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(str(tp.topic), int(p)) for tp in topic_partitions for p in tp.partitions)


def decode_subscription(data: bytes | memoryview) -> Subscription:
    """Decode any version (>3 read as v3); raises ConsumerProtocolError on malformed bytes."""
    _, entity = _read_struct(data, _SUBSCRIPTION, "ConsumerProtocolSubscription")
    return Subscription(
        topics=tuple(entity.topics),
        user_data=entity.user_data,
        owned_partitions=_partitions(getattr(entity, "owned_partitions", ())),
        generation_id=int(getattr(entity, "generation_id", NO_GENERATION)),
        rack_id=getattr(entity, "rack_id", None),
    )


def decode_assignment(data: bytes | memoryview) -> Assignment:
    """Decode any version (>3 read as v3); raises ConsumerProtocolError on malformed bytes.

    Empty bytes decode as an empty assignment: the coordinator sends them to members the leader left
    out, and librdkafka and kafka-python read them that way.
    """
    if len(data) == 0:
        return Assignment(partitions=())
    _, entity = _read_struct(data, _ASSIGNMENT, "ConsumerProtocolAssignment")
    return Assignment(partitions=_partitions(entity.assigned_partitions), user_data=entity.user_data)
