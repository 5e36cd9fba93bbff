"""Finding the partition a request names, by topic name (older versions) or topic id (newer ones)."""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from herd.cluster.topics import Topic
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


T = TypeVar("T")


async def settled(value: T | Any) -> T:
    """`value`, awaited if it is awaitable: the embedded cluster changes topics synchronously, the shared one
    (cluster mode) with a database round trip, and the admin APIs serve both."""
    return await value if inspect.isawaitable(value) else value


def topic_ref(entry: Any) -> dict[str, Any]:
    """The identifying fields to echo back in a response entry."""
    return {"name": getattr(entry, "name", None), "topic_id": getattr(entry, "topic_id", None)}
