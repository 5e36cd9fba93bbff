"""Offset requests shared by the consumer and the admin operations: ListOffsets, OffsetFetch, OffsetCommit.

Each function builds its request at the version negotiated with the broker (OffsetFetch asks for one group
in the v8+ batch shape or the older single-group shape) and answers per partition. ListOffsets goes to
each partition's leader; OffsetFetch and OffsetCommit go to the group's coordinator through
`KafkaClient.call_coordinator`, so they find the coordinator again and retry on coordinator errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from herd.client.connection import KafkaClient
from herd.client.consumer_protocol import TopicPartition, group_by_topic
from herd.client.errors import KafkaError
from herd.client.wire import RequestBuilder

__all__ = ["EARLIEST", "LATEST", "Committed", "commit_offsets", "fetch_committed", "list_offsets"]

LIST_OFFSETS: Final = 2
OFFSET_COMMIT: Final = 8
OFFSET_FETCH: Final = 9
LATEST: Final = -1
EARLIEST: Final = -2


@dataclass(frozen=True, slots=True)
class Committed:
    offset: int
    metadata: str | None = None


async def list_offsets(
    client: KafkaClient, partitions: Iterable[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    """The offset for `timestamp` (LATEST, EARLIEST or milliseconds) of each partition (-1: none).

    Raises KafkaError for a partition the broker answers with an error.
    """
    parts = sorted(set(partitions))
    if not parts:
        return {}
    metadata = await client.metadata(sorted({tp.topic for tp in parts}))
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in parts:
        topic = metadata.topics.get(tp.topic)
        if topic is None or topic.error_code or tp.partition not in topic.partitions:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"unknown partition {tp.topic}-{tp.partition}")
        by_leader.setdefault(topic.partitions[tp.partition], []).append(tp)
    result: dict[TopicPartition, int] = {}
    for leader, leader_parts in by_leader.items():
        result.update(await _list_offsets_at(client, leader, leader_parts, timestamp))
    return result


async def _list_offsets_at(
    client: KafkaClient, node: int, parts: list[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    def build(b: RequestBuilder) -> Any:
        topics = tuple(
            b(
                "ListOffsetsTopic",
                name=topic,
                partitions=tuple(
                    b("ListOffsetsPartition", partition_index=p, current_leader_epoch=-1, timestamp=timestamp)
                    for p in numbers
                ),
            )
            for topic, numbers in group_by_topic(parts).items()
        )
        return b.request(replica_id=-1, isolation_level=0, topics=topics)

    _, body = await client.send(LIST_OFFSETS, build, node=node)
    result = {}
    for topic in body.topics:
        for p in topic.partitions:
            if p.error_code:
                raise KafkaError(
                    p.error_code,
                    f"ListOffsets {topic.name}-{p.partition_index}: {ErrorCode(p.error_code).name.upper()}",
                )
            result[TopicPartition(topic.name, int(p.partition_index))] = int(p.offset)
    return result


def _fetch_error(version: int, body: Any) -> int:
    if version >= 8:
        return int(body.groups[0].error_code) if body.groups else 0
    if version >= 2 and body.error_code:
        return int(body.error_code)
    codes = [int(p.error_code) for t in body.topics for p in t.partitions if p.error_code]
    return codes[0] if codes else 0


async def fetch_committed(
    client: KafkaClient, group_id: str, partitions: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, Committed]:
    """The committed offsets of `group_id` (every committed partition when `partitions` is None).

    Partitions without a committed offset are left out. Raises KafkaError for a group-level error.
    """
    wanted = None if partitions is None else sorted(set(partitions))

    def build(b: RequestBuilder) -> Any:
        if b.version >= 8:
            topics = (
                None
                if wanted is None
                else tuple(
                    b("OffsetFetchRequestTopics", name=t, partition_indexes=tuple(ps))
                    for t, ps in group_by_topic(wanted).items()
                )
            )
            return b.request(
                groups=(b("OffsetFetchRequestGroup", group_id=group_id, topics=topics),), require_stable=False
            )
        topics = (
            None
            if wanted is None
            else tuple(
                b("OffsetFetchRequestTopic", name=t, partition_indexes=tuple(ps))
                for t, ps in group_by_topic(wanted).items()
            )
        )
        return b.request(group_id=group_id, topics=topics, require_stable=False)

    version, body = await client.call_coordinator(group_id, OFFSET_FETCH, build, _fetch_error)
    code = _fetch_error(version, body)
    if code:
        raise KafkaError(code, f"OffsetFetch for group {group_id!r}: {ErrorCode(code).name.upper()}")
    topics = body.groups[0].topics if version >= 8 else body.topics
    return {
        TopicPartition(t.name, int(p.partition_index)): Committed(int(p.committed_offset), p.metadata)
        for t in topics
        for p in t.partitions
        if int(p.committed_offset) >= 0
    }


def _commit_error(version: int, body: Any) -> int:
    codes = [int(p.error_code) for t in body.topics for p in t.partitions if p.error_code]
    return codes[0] if codes else 0


async def commit_offsets(
    client: KafkaClient,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
) -> dict[TopicPartition, int]:
    """Commit `offsets` (a generation of -1 and no member id: an admin commit to an empty group).

    Returns the error code per partition (0 when committed).
    """
    if not offsets:
        return {}

    def build(b: RequestBuilder) -> Any:
        topics = tuple(
            b(
                "OffsetCommitRequestTopic",
                name=t,
                partitions=tuple(
                    b(
                        "OffsetCommitRequestPartition",
                        partition_index=p,
                        committed_offset=offsets[TopicPartition(t, p)],
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for p in ps
                ),
            )
            for t, ps in group_by_topic(sorted(offsets)).items()
        )
        return b.request(
            group_id=group_id,
            generation_id_or_member_epoch=generation_id,
            member_id=member_id,
            group_instance_id=group_instance_id,
            retention_time=-1,
            topics=topics,
        )

    _, body = await client.call_coordinator(group_id, OFFSET_COMMIT, build, _commit_error)
    return {
        TopicPartition(t.name, int(p.partition_index)): int(p.error_code) for t in body.topics for p in t.partitions
    }
