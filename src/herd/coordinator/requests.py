"""Version-independent requests: the fields of each API's highest version, plus `api_version` and the
request context (`client_id`, `client_host`). The API layer fills absent fields with Kafka's defaults
(for example JoinGroup v0 has no rebalance timeout: the core uses the session timeout, as Kafka does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from herd.coordinator.member import MemberProtocol

UNKNOWN_MEMBER_ID = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroup:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    protocol_type: str = "consumer"
    protocols: tuple[MemberProtocol, ...] = ()
    reason: str | None = None
    api_version: int = 9
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class SyncAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroup:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncAssignment, ...] = ()
    api_version: int = 5
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    api_version: int = 4
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroup:
    """v0-2 carry one `member_id`; v3+ carry `members`. The core reads the field of the version."""

    group_id: str
    member_id: str = UNKNOWN_MEMBER_ID
    members: tuple[MemberIdentity, ...] = ()
    api_version: int = 5
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroups:
    groups: tuple[str, ...]
    include_authorized_operations: bool = False
    api_version: int = 5
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroups:
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()
    api_version: int = 5
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroups:
    groups_names: tuple[str, ...]
    api_version: int = 2
    client_id: str = ""
    client_host: str = ""


class CommitPartition(NamedTuple):
    """One partition of an OffsetCommit: a NamedTuple, not a frozen dataclass, as a commit may name hundreds and a
    frozen dataclass's __init__ sets each field through object.__setattr__."""

    partition_index: int
    committed_offset: int
    committed_leader_epoch: int = -1
    commit_timestamp: int = -1
    committed_metadata: str | None = None


@dataclass(frozen=True, slots=True)
class CommitTopic:
    name: str
    partitions: tuple[CommitPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommit:
    group_id: str
    generation_id_or_member_epoch: int = -1
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    retention_time_ms: int = -1
    topics: tuple[CommitTopic, ...] = ()
    api_version: int = 9
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommit:
    """TxnOffsetCommit v0-5. v0-2 carry no generation, member or instance (KIP-447 added them in v3): the API
    layer leaves the defaults, which the core accepts unless the group is Dead."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int = -1
    member_id: str = UNKNOWN_MEMBER_ID
    group_instance_id: str | None = None
    topics: tuple[CommitTopic, ...] = ()
    api_version: int = 5
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteTransaction:
    """Write a transaction's marker into this partition (Kafka's GroupCoordinator.completeTransaction: the
    transaction coordinator's WriteTxnMarkers for a `__consumer_offsets` partition)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int = 0


@dataclass(frozen=True, slots=True)
class FetchTopic:
    name: str
    partition_indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FetchGroup:
    group_id: str
    topics: tuple[FetchTopic, ...] | None = None
    """None fetches every committed offset of the group."""
    member_id: str | None = None
    member_epoch: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetch:
    """v8+ shape (many groups). The API layer wraps a v0-7 request's single group in `groups`."""

    groups: tuple[FetchGroup, ...]
    require_stable: bool = False
    api_version: int = 9
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDelete:
    group_id: str
    topics: tuple[DeleteTopic, ...] = ()
    api_version: int = 0
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class GroupConfigOp:
    """One entry of IncrementalAlterConfigs: `operation` is Kafka's OpType (0 SET, 1 DELETE, 2 APPEND,
    3 SUBTRACT); the core validates it."""

    name: str
    operation: int
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterGroupConfigs:
    """IncrementalAlterConfigs on one GROUP resource."""

    group_id: str
    ops: tuple[GroupConfigOp, ...]
    validate_only: bool = False
    api_version: int = 1
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListConfiguredGroups:
    """ListConfigResources on GROUP resources: the groups of the shard that have a config set."""

    api_version: int = 1
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupConfigs:
    """DescribeConfigs on one GROUP resource (every config; the API layer filters by name). The read-only
    `herd.rebalance.history` is answered only when `include_history` (it was asked for by name)."""

    group_id: str
    include_history: bool = False
    api_version: int = 4
    client_id: str = ""
    client_host: str = ""
