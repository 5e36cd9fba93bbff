"""The embedded consumer protocol of a classic member (ConsumerProtocolSubscription in its JoinGroup metadata,
ConsumerProtocolAssignment in its SyncGroup answer), read and written as Kafka's ConsumerProtocol does
(clients/.../consumer/internals/ConsumerProtocol.java, branch 4.2): an int16 version, then the message at that
version, a version above the highest known read and written as the highest (3), one below 0 refused.

The coordinator needs it for classic members inside a consumer group (KIP-848's online migration,
consumer_classic.py): their subscription and owned partitions come from the JoinGroup metadata, and their
assignment goes back in the version of that metadata.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v3.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v3.data import TopicPartition as AssignedTopic
from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription as SubscriptionV0
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription as SubscriptionV1
from kio.schema.consumer_protocol_subscription.v2.data import ConsumerProtocolSubscription as SubscriptionV2
from kio.schema.consumer_protocol_subscription.v3.data import ConsumerProtocolSubscription as SubscriptionV3
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import i32

HIGHEST_VERSION = 3


class MalformedProtocol(ValueError):
    """Kafka's SchemaException for the embedded protocol."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """A member's ConsumerProtocolSubscription: the topics, the partitions it owns (v1+), its rack (v3+)."""

    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]
    rack_id: str | None


def version(data: bytes) -> int:
    """Kafka's deserializeVersion, clamped as checkSubscriptionVersion/checkAssignmentVersion clamp it."""
    if len(data) < 2:
        raise MalformedProtocol("Buffer underflow while parsing consumer protocol's header")
    found: int = struct.unpack_from(">h", data)[0]
    if found < 0:
        raise MalformedProtocol(f"Unsupported version: {found}")
    return min(found, HIGHEST_VERSION)


_SUBSCRIPTION_READERS: dict[int, Any] = {
    0: entity_reader(SubscriptionV0),
    1: entity_reader(SubscriptionV1),
    2: entity_reader(SubscriptionV2),
    3: entity_reader(SubscriptionV3),
}
_ASSIGNMENT_READER = entity_reader(ConsumerProtocolAssignment)  # v1-3 are v0's fields: one reader for all
_ASSIGNMENT_WRITER = entity_writer(ConsumerProtocolAssignment)


def decode_subscription(metadata: bytes) -> Subscription:
    """Kafka's deserializeConsumerProtocolSubscription; MalformedProtocol when the bytes do not hold one."""
    at = version(metadata)
    try:
        data: SubscriptionV3 = _SUBSCRIPTION_READERS[at](metadata, 2)[0]
    except (SerialError, ValueError, IndexError, struct.error) as error:
        raise MalformedProtocol(f"Malformed consumer protocol subscription: {error}") from None
    owned: dict[str, frozenset[int]] = {}
    for topic in getattr(data, "owned_partitions", ()):
        owned[topic.topic] = owned.get(topic.topic, frozenset()) | frozenset(int(p) for p in topic.partitions)
    rack = getattr(data, "rack_id", None)
    return Subscription(at, tuple(data.topics), owned, rack or None)


def decode_assignment(data: bytes) -> tuple[dict[str, frozenset[int]], bytes | None]:
    """Kafka's deserializeConsumerProtocolAssignment: the partitions by topic name and the user data."""
    version(data)
    try:
        assignment, _ = _ASSIGNMENT_READER(data, 2)
    except (SerialError, ValueError, IndexError, struct.error) as error:
        raise MalformedProtocol(f"Malformed consumer protocol assignment: {error}") from None
    partitions: dict[str, frozenset[int]] = {}
    for topic in assignment.assigned_partitions:
        partitions[topic.topic] = partitions.get(topic.topic, frozenset()) | frozenset(int(p) for p in topic.partitions)
    return partitions, assignment.user_data


def encode_assignment(partitions: dict[str, frozenset[int]], at: int) -> bytes:
    """Kafka's serializeAssignment at version `at` (of the member's subscription), topics and partitions sorted,
    no user data."""
    at = max(0, min(at, HIGHEST_VERSION))
    out = io.BytesIO()
    out.write(struct.pack(">h", at))
    topics = tuple(
        AssignedTopic(topic=name, partitions=tuple(i32(p) for p in sorted(parts)))  # type: ignore[arg-type]
        for name, parts in sorted(partitions.items())
        if parts
    )
    _ASSIGNMENT_WRITER(out, ConsumerProtocolAssignment(assigned_partitions=topics, user_data=None))
    return out.getvalue()
