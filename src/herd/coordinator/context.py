"""The state one shard's handlers share: config, clock, timer, id factory, groups, offsets (committed and
pending transactional), history.

Handler modules (membership, static, offsets, admin, rebalance) are functions over a `ShardContext`;
`GroupCoordinatorShard` owns one and is the only public entry point.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.static.primitive import i32, i64

from herd.coordinator.config import CoordinatorConfig
from herd.coordinator.consumer.group import ConsumerGroup
from herd.coordinator.consumer.topics import EMPTY_IMAGE, TopicsImage
from herd.coordinator.group import ClassicGroup
from herd.coordinator.history import RebalanceHistory
from herd.coordinator.member import Member
from herd.coordinator.records import (
    GroupMetadataValueV3,
    MemberMetadataV3,
    OffsetValue,
    Record,
    group_metadata_record,
)
from herd.coordinator.share.group import ShareGroup
from herd.coordinator.timer import Clock, Timer
from herd.coordinator.txn_offsets import TxnOffsets


@dataclass(slots=True)
class ShardContext:
    config: CoordinatorConfig
    clock: Clock
    timer: Timer
    new_uuid: Callable[[], str]
    history: RebalanceHistory
    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)
    expected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Pre-registered static members per group id (KIP-469, preregistration.py); groups need not exist."""
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per group id, its overrides of Kafka's group configs (kafka_group_configs.py); groups need not exist."""
    expected_holds: dict[str, int] = field(default_factory=dict)
    """Groups holding arrived pre-registered members without a rebalance, and when the hold ends."""
    txn: TxnOffsets = field(default_factory=TxnOffsets)
    """Pending transactional offsets (TxnOffsetCommit, KIP-98/KIP-447; txn_offsets.py)."""
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    """KIP-848 consumer groups (consumer/), beside the classic `groups`: a group id is in one or the other."""
    share_groups: dict[str, ShareGroup] = field(default_factory=dict)
    """KIP-932 share groups (share/), beside classic and consumer groups: a group id is of one type only."""
    share_sessions: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """Per (share group, member): [session deadline, deadline its timer is armed for (-1: none)], as
    `consumer_sessions`."""
    share_initializing: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    """Per share group, the share partitions whose state a timer is about to initialize (share_groups.py)."""
    topics: TopicsImage = EMPTY_IMAGE
    """The cluster's topics as the consumer groups see them (consumer/topics.py), set by the runtime."""
    topics_created_version: int = -1
    """The `topics` version at which topics were last created (regex subscriptions resolve again after it)."""
    regex_resolved_at: dict[str, int] = field(default_factory=dict)
    """Per consumer group, `topics_created_version` when its regexes were last resolved (in memory: after a load
    the first refresh resolves them again)."""
    regex_refreshing: set[str] = field(default_factory=set)
    """Consumer groups with a regex refresh scheduled."""
    consumer_sessions: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    """Per (consumer group, member): [session deadline, deadline its timer is armed for (-1: none)]. A heartbeat
    moves the deadline only; the timer re-arms itself when it fires early (as classic sessions do, rebalance.py)."""
    classic_join_timeouts: set[tuple[str, str]] = field(default_factory=set)
    """(consumer group, classic member) pairs with a join timeout armed: the member was told to rejoin
    (consumer_classic.py; Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent)."""
    consumer_hash_checked: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per consumer group, the topics image version and group epoch its metadata hash was last checked at (in
    memory only, as Kafka's metadata refresh deadline): a heartbeat checks it again when either moved."""

    def now(self) -> int:
        return self.clock.now_ms()

    def generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        """Kafka's ClassicGroup.generateMemberId: `clientId-uuid`, or `instanceId-uuid` if static."""
        prefix = instance_id if instance_id is not None else client_id
        return f"{prefix}-{self.new_uuid()}"


def group_metadata_value(group: ClassicGroup, assignments: dict[str, bytes]) -> GroupMetadataValueV3:
    """GroupCoordinatorRecordHelpers.newGroupMetadataRecord: the group with the given assignment."""
    return GroupMetadataValueV3(
        protocol_type=group.protocol_type or "",
        generation=i32(group.generation_id),
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp=i64(group.state_timestamp_ms),
        members=tuple(_member_value(m, group.protocol_name, assignments) for m in group.members.values()),
    )


def _member_value(member: Member, protocol: str | None, assignments: dict[str, bytes]) -> MemberMetadataV3:
    return MemberMetadataV3(
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout=i32(member.rebalance_timeout_ms),
        session_timeout=i32(member.session_timeout_ms),
        subscription=member.metadata(protocol),
        assignment=assignments.get(member.member_id, b""),
    )


def group_record(group: ClassicGroup, assignments: dict[str, bytes]) -> Record:
    """A GroupMetadata record describing live state (applied=True: replay skips it)."""
    return group_metadata_record(group.group_id, group_metadata_value(group, assignments), applied=True)


def empty_group_record(group: ClassicGroup) -> Record:
    """GroupCoordinatorRecordHelpers.newEmptyGroupMetadataRecord, written when a group is created."""
    value = GroupMetadataValueV3(
        protocol_type="",
        generation=i32(0),
        protocol=None,
        leader=None,
        current_state_timestamp=i64(group.state_timestamp_ms),
        members=(),
    )
    return group_metadata_record(group.group_id, value, applied=True)
