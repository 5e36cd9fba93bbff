"""Share-group administration (KIP-932), as Kafka's Admin does it for kafka-share-groups.sh: ShareGroupDescribe,
DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets, each sent to the group's
coordinator (found again on NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS).

`ShareAdmin` is mixed into herd.client.admin.Admin; it needs only `self.client`. A reset plans the new start
offsets with ListOffsets (earliest, latest, or the first offset at or after a time: the only three kinds
kafka-share-groups.sh --reset-offsets has, ShareGroupCommand), for every partition the group has state for unless
topics are named, and only while the group is Empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from herd.client.connection import KafkaClient, RequestBuilder
from herd.client.consumer_protocol import TopicPartition
from herd.client.errors import KafkaError, error_name
from herd.client.offsets import EARLIEST, LATEST, list_offsets

__all__ = ["ShareAdmin", "ShareGroupDescription", "ShareMember", "ShareOffsetRow"]

SHARE_GROUP_DESCRIBE: Final = 77
DESCRIBE_SHARE_GROUP_OFFSETS: Final = 90
ALTER_SHARE_GROUP_OFFSETS: Final = 91
DELETE_SHARE_GROUP_OFFSETS: Final = 92


class ShareAdminError(KafkaError):
    """A share-group admin request refused as a whole, with a message for the command line."""


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ShareMember, ...]


@dataclass(frozen=True, slots=True)
class ShareOffsetRow:
    group_id: str
    topic: str
    partition: int
    start_offset: int | None  # None: no state yet (-1 on the wire)
    leader_epoch: int
    lag: int | None  # None: not known (-1 on the wire)


def _fail(group_id: str, code: int, message: str | None) -> ShareAdminError:
    return ShareAdminError(code, f"Share group '{group_id}': {message or error_name(code)}")


class ShareAdmin:
    client: KafkaClient

    async def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        """The share group's state, epochs and members; ShareAdminError (GROUP_ID_NOT_FOUND) if there is none."""

        def build(b: RequestBuilder) -> Any:
            return b.request(group_ids=(group_id,), include_authorized_operations=False)

        def error_of(version: int, body: Any) -> int:
            return int(body.groups[0].error_code)

        _, body = await self.client.call_coordinator(group_id, SHARE_GROUP_DESCRIBE, build, error_of)
        g = body.groups[0]
        if g.error_code:
            raise _fail(group_id, g.error_code, g.error_message)
        members = tuple(
            ShareMember(
                m.member_id,
                m.client_id,
                m.client_host,
                m.member_epoch,
                tuple(TopicPartition(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions),
            )
            for m in g.members
        )
        return ShareGroupDescription(
            group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name, members
        )

    async def share_offsets(self, group_id: str) -> list[ShareOffsetRow]:
        """The start offset, leader epoch and lag of every partition the group has share state for."""

        def build(b: RequestBuilder) -> Any:
            group = b("DescribeShareGroupOffsetsRequestGroup", group_id=group_id, topics=None)
            return b.request(groups=(group,))

        def error_of(version: int, body: Any) -> int:
            return int(body.groups[0].error_code)

        _, body = await self.client.call_coordinator(group_id, DESCRIBE_SHARE_GROUP_OFFSETS, build, error_of)
        g = body.groups[0]
        if g.error_code:
            raise _fail(group_id, g.error_code, g.error_message)
        rows = [
            ShareOffsetRow(
                group_id,
                t.topic_name,
                p.partition_index,
                None if p.start_offset < 0 else p.start_offset,
                p.leader_epoch,
                None if getattr(p, "lag", -1) < 0 else p.lag,
            )
            for t in g.topics
            for p in t.partitions
        ]
        return sorted(rows, key=lambda r: (r.topic, r.partition))

    async def plan_share_reset(
        self, group_id: str, kind: str, timestamp: int | None, topics: Mapping[str, Sequence[int] | None] | None
    ) -> dict[TopicPartition, int]:
        """The new start offset per partition (`kind` earliest, latest or datetime at `timestamp` ms), for the
        partitions of `topics` (topic -> partitions, None: all), or every partition the group has state for.
        ShareAdminError while the group is not Empty. A group that does not exist is reset as an Empty one (the
        reset makes it, with its share state initialized at the offsets planned), as Kafka's
        ShareGroupCommand.resetOffsets does on GroupIdNotFoundException (confluentinc/kafka
        tools/src/main/java/org/apache/kafka/tools/consumer/group/ShareGroupCommand.java)."""
        try:
            group: ShareGroupDescription | None = await self.describe_share_group(group_id)
        except ShareAdminError as exc:
            if exc.code != ErrorCode.group_id_not_found:
                raise
            group = None
        if group is not None and group.state != "Empty":
            raise ShareAdminError(
                ErrorCode.non_empty_group,
                f"Share group '{group_id}' is not empty (state {group.state}): offsets can only be reset when it "
                "has no members.",
            )
        if topics is None:  # every partition the group has state for: none when there is no group
            rows = await self.share_offsets(group_id) if group is not None else []
            partitions = [TopicPartition(r.topic, r.partition) for r in rows]
        else:
            partitions = await self._reset_scope(topics, {})
        at = EARLIEST if kind == "earliest" else LATEST if kind == "latest" else timestamp
        assert at is not None
        found = await list_offsets(self.client, partitions, at)
        if kind == "datetime":  # no record at or after the time: the end of the partition
            latest = await list_offsets(self.client, [tp for tp, o in found.items() if o < 0], LATEST)
            found = {tp: latest.get(tp, o) if o < 0 else o for tp, o in found.items()}
        return dict(sorted(found.items()))

    async def _reset_scope(
        self, topics: Mapping[str, Sequence[int] | None] | None, committed: Mapping[TopicPartition, int]
    ) -> list[TopicPartition]:
        """The partitions named (herd.client.admin.Admin's, which checks they exist)."""
        raise NotImplementedError

    async def alter_share_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Set the group's start offsets; the error code per partition (0 when set). ShareAdminError for a
        refusal of the whole request (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ...)."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))

        def build(b: RequestBuilder) -> Any:
            topics = tuple(
                b(
                    "AlterShareGroupOffsetsRequestTopic",
                    topic_name=topic,
                    partitions=tuple(
                        b("AlterShareGroupOffsetsRequestPartition", partition_index=p, start_offset=o) for p, o in parts
                    ),
                )
                for topic, parts in by_topic.items()
            )
            return b.request(group_id=group_id, topics=topics)

        def error_of(version: int, body: Any) -> int:
            return int(body.error_code)

        _, body = await self.client.call_coordinator(group_id, ALTER_SHARE_GROUP_OFFSETS, build, error_of)
        if body.error_code:
            raise _fail(group_id, body.error_code, body.error_message)
        return {
            TopicPartition(t.topic_name, p.partition_index): int(p.error_code)
            for t in body.responses
            for p in t.partitions
        }

    async def delete_share_offsets(self, group_id: str, topics: Iterable[str]) -> dict[str, tuple[int, str | None]]:
        """Forget the group's share state of these topics; per topic its error code (0 when deleted) and
        message. ShareAdminError for a refusal of the whole request."""
        names = sorted(set(topics))

        def build(b: RequestBuilder) -> Any:
            return b.request(
                group_id=group_id,
                topics=tuple(b("DeleteShareGroupOffsetsRequestTopic", topic_name=t) for t in names),
            )

        def error_of(version: int, body: Any) -> int:
            return int(body.error_code)

        _, body = await self.client.call_coordinator(group_id, DELETE_SHARE_GROUP_OFFSETS, build, error_of)
        if body.error_code:
            raise _fail(group_id, body.error_code, body.error_message)
        return {t.topic_name: (int(t.error_code), t.error_message) for t in body.responses}
