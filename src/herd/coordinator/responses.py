"""Version-independent responses, with Kafka error codes as ints (`ErrorCode` values).

`error_response(response, code)` builds the same response carrying an error everywhere, which is
what a request gets when the append of its Result fails, or when a read waited behind a write that
failed (reads then answer the error instead of state that never became durable).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from herd.coordinator.consumer.assignment import Assignment, TopicId
from herd.coordinator.errors import ErrorCode
from herd.coordinator.share.heartbeat import ShareHeartbeatResponse


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResponse:
    error_code: int = ErrorCode.none
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResponse:
    error_code: int = ErrorCode.none
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse:
    error_code: int = ErrorCode.none


@dataclass(frozen=True, slots=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: int = ErrorCode.none


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupResponse:
    error_code: int = ErrorCode.none
    members: tuple[LeaveMemberResponse, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroup:
    group_id: str
    error_code: int = ErrorCode.none
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()
    authorized_operations: int = -2147483648
    not_classic: bool = False  # a group of another type (KIP-848): DescribeGroups v6+ says so in its error message


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsResponse:
    error_code: int = ErrorCode.none
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DeletableGroupResult:
    group_id: str
    error_code: int = ErrorCode.none


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponse:
    results: tuple[DeletableGroupResult, ...] = ()


class CommitPartitionResponse(NamedTuple):
    """One partition of an OffsetCommit answer (a NamedTuple, as FetchPartitionResponse)."""

    partition_index: int
    error_code: int = ErrorCode.none


@dataclass(frozen=True, slots=True)
class CommitTopicResponse:
    name: str
    partitions: tuple[CommitPartitionResponse, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponse:
    topics: tuple[CommitTopicResponse, ...] = ()


class FetchPartitionResponse(NamedTuple):
    """One partition of an OffsetFetch answer: a NamedTuple, not a frozen dataclass, as a large group's answer has
    one per partition and a frozen dataclass's __init__ (a setattr per field) made most of the answer's cost."""

    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = ErrorCode.none


@dataclass(frozen=True, slots=True)
class FetchTopicResponse:
    name: str
    partitions: tuple[FetchPartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class FetchGroupResponse:
    group_id: str
    topics: tuple[FetchTopicResponse, ...] = ()
    error_code: int = ErrorCode.none


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponse:
    groups: tuple[FetchGroupResponse, ...] = ()


@dataclass(frozen=True, slots=True)
class DeletePartitionResponse:
    partition_index: int
    error_code: int = ErrorCode.none


@dataclass(frozen=True, slots=True)
class DeleteTopicResponse:
    name: str
    partitions: tuple[DeletePartitionResponse, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteResponse:
    error_code: int = ErrorCode.none
    topics: tuple[DeleteTopicResponse, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterGroupConfigsResponse:
    error_code: int = ErrorCode.none
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class GroupConfigEntry:
    name: str
    value: str
    is_set: bool
    """True when set on the group (Kafka's GROUP_CONFIG source), False for the default."""
    documentation: str = ""
    read_only: bool = False
    kind: str = "list"
    """The config's type as DescribeConfigs names it ("list", "string")."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupConfigsResponse:
    error_code: int = ErrorCode.none
    error_message: str | None = None
    configs: tuple[GroupConfigEntry, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatResponse:
    """ConsumerGroupHeartbeat (KIP-848; herd.coordinator.consumer_heartbeat)."""

    error_code: int = ErrorCode.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: the member's assignment is not in this answer


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: TopicId
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = 1  # 0 classic, 1 consumer (v1)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedConsumerGroup:
    group_id: str
    error_code: int = ErrorCode.none
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedConsumerGroup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ListConfiguredGroupsResponse:
    error_code: int = ErrorCode.none
    group_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteTransactionResponse:
    """The transaction's marker is written and durable (error NONE), or why not."""

    error_code: int = ErrorCode.none


# --- ShareGroupDescribe (KIP-932; share_groups.py) ---


@dataclass(frozen=True, slots=True)
class DescribedShareTopic:
    topic_id: TopicId
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[DescribedShareTopic, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedShareGroup:
    group_id: str
    error_code: int = ErrorCode.none
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedShareMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupDescribeResponse:
    groups: tuple[DescribedShareGroup, ...]


@dataclass(frozen=True, slots=True)
class ShareOffsetsAnswer:
    """What the share-group offset operations answer (share_groups.py): an error, or the state epoch to initialize at,
    the partitions for the share coordinator to initialize or delete, the topics with nothing to delete."""

    error_code: int = ErrorCode.none
    error_message: str | None = None
    state_epoch: int = 0  # AlterShareOffsets: the state epoch the share coordinator initializes at
    partitions: dict[TopicId, frozenset[int]] = field(default_factory=dict)
    refused: dict[TopicId, str] = field(default_factory=dict)  # DeleteShareOffsets: topics with nothing to delete


def error_response(response: object, code: int) -> object:
    """`response` with `code` as its error (top level, per member, per partition as the API has it)."""
    match response:
        case JoinGroupResponse() | SyncGroupResponse() | HeartbeatResponse():
            return type(response)(error_code=code, **_member_id(response))
        case LeaveGroupResponse():
            return LeaveGroupResponse(error_code=code)
        case OffsetCommitResponse():
            return OffsetCommitResponse(
                topics=tuple(
                    CommitTopicResponse(t.name, tuple(p._replace(error_code=code) for p in t.partitions))
                    for t in response.topics
                )
            )
        case DeleteGroupsResponse():
            return DeleteGroupsResponse(results=tuple(replace(r, error_code=code) for r in response.results))
        case OffsetFetchResponse():
            return OffsetFetchResponse(
                groups=tuple(FetchGroupResponse(g.group_id, error_code=code) for g in response.groups)
            )
        case DescribeGroupsResponse():
            return DescribeGroupsResponse(
                groups=tuple(DescribedGroup(group_id=g.group_id, error_code=code) for g in response.groups)
            )
        case ListGroupsResponse():
            return ListGroupsResponse(error_code=code)
        case OffsetDeleteResponse():
            return OffsetDeleteResponse(error_code=code)
        case (
            AlterGroupConfigsResponse()
            | DescribeGroupConfigsResponse()
            | CompleteTransactionResponse()
            | ListConfiguredGroupsResponse()
            | ConsumerGroupHeartbeatResponse()
            | ShareHeartbeatResponse()
            | ShareOffsetsAnswer()
        ):
            return type(response)(error_code=code)
        case ConsumerGroupDescribeResponse():
            return ConsumerGroupDescribeResponse(
                groups=tuple(DescribedConsumerGroup(group_id=g.group_id, error_code=code) for g in response.groups)
            )
        case ShareGroupDescribeResponse():
            return ShareGroupDescribeResponse(
                tuple(DescribedShareGroup(group_id=g.group_id, error_code=code) for g in response.groups)
            )
    return response


def _member_id(response: object) -> dict[str, Any]:
    if isinstance(response, JoinGroupResponse):
        return {"member_id": response.member_id}
    return {}
