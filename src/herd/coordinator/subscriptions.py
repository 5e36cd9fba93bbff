"""Which topics a classic "consumer" group is subscribed to, as Kafka's coordinator knows it.

Offset retention (retention.py) and OffsetDelete ask whether a group still consumes a topic. Kafka answers
from `ClassicGroup.subscribedTopics`, computed when a generation starts (`initNextGeneration`) and when a
group is loaded from its GroupMetadata record, never in between (apache/kafka group-coordinator/.../classic/
ClassicGroup.java `computeSubscribedTopics`, `isSubscribedToTopic`). herd stores it in
`ClassicGroup.subscribed_topics` at the same two points: `rebalance.complete_join` after the new generation
starts, and the shard when it loads the group. The rules:

- a group whose protocol type is not "consumer" (or a simple group, which has none) has no known topics;
- a "consumer" group without members is subscribed to nothing;
- otherwise each member's metadata for the selected protocol is read as a ConsumerProtocolSubscription
  **v0**, the prefix every later version shares (topics, user data; the rest is ignored), and the topics are
  united. If any member's bytes do not parse, the topics are unknown (None).

`is_subscribed` then treats unknown topics as "subscribed" for a consumer group (nothing may be deleted or
expired under it) and as "not subscribed" for any other group. The subscription is decoded with kio's
ConsumerProtocolSubscription v0 class, so nothing here depends on herd's client package.
"""

from __future__ import annotations

import logging
import struct

from kio.schema.consumer_protocol_subscription.v0.data import ConsumerProtocolSubscription
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from herd.coordinator.group import ClassicGroup

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
_read_v0 = entity_reader(ConsumerProtocolSubscription)


def uses_consumer_protocol(group: ClassicGroup) -> bool:
    return group.protocol_type == CONSUMER_PROTOCOL_TYPE


def subscription_topics(metadata: bytes) -> tuple[str, ...] | None:
    """The topics of one member's consumer-protocol metadata (any version, read as v0), or None."""
    if len(metadata) < 2 or struct.unpack_from(">h", metadata)[0] < 0:
        return None
    try:
        subscription, _ = _read_v0(metadata, 2)
    except (SerialError, ValueError, IndexError, struct.error):
        return None
    return tuple(subscription.topics)


def compute_subscribed_topics(group: ClassicGroup) -> frozenset[str] | None:
    """Kafka's computeSubscribedTopics: None when the group's topics cannot be known."""
    if not uses_consumer_protocol(group):
        return None
    if not group.members:
        return frozenset()
    if group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        parsed = subscription_topics(member.metadata(group.protocol_name))
        if parsed is None:
            log.warning(
                "failed to parse the consumer protocol %s of group %s: the coordinator is not aware "
                "of its subscribed topics",
                group.protocol_name,
                group.group_id,
            )
            return None
        topics.update(parsed)
    return frozenset(topics)


def is_subscribed(group: ClassicGroup, topic: str) -> bool:
    """Kafka's isSubscribedToTopic: unknown subscriptions count as subscribed for a consumer group."""
    if group.subscribed_topics is None:
        return uses_consumer_protocol(group)
    return topic in group.subscribed_topics
