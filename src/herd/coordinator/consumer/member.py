"""A member of a consumer group, as Kafka's coordinator keeps it (group-coordinator/.../modern/consumer/
ConsumerGroupMember.java): what it subscribed to (the ConsumerGroupMemberMetadata record, type 5) and where its
reconciliation stands (the ConsumerGroupCurrentMemberAssignment record, type 8).

A member is immutable; each change is a new member (`dataclasses.replace`, or `with_epoch`, which moves the
current epoch to `previous_member_epoch` as Kafka's `Builder.updateMemberEpoch` does).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from herd.coordinator.consumer.assignment import Assignment


class MemberState(enum.IntEnum):
    """Where a member's reconciliation stands (Kafka's modern/MemberState.java; the value is what the
    CurrentMemberAssignment record stores)."""

    STABLE = 0  # it has its target assignment, or all of it that is free
    UNREVOKED_PARTITIONS = 1  # it must give up partitions before it may go on
    UNRELEASED_PARTITIONS = 2  # it waits for partitions other members still own
    UNKNOWN = 127  # a state written by a newer coordinator; the member is fenced unless it owns nothing

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """What a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat) inside a consumer group
    also needs (Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata): its session timeout and the
    protocols of its JoinGroup, each (name, metadata), in the member's order of preference."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol a JoinGroup answer names for this member (Kafka: the first it supports)."""
        return self.protocols[0][0]


LEAVE_GROUP_MEMBER_EPOCH = -1  # a dynamic member leaves
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # a static member leaves for now and keeps its assignment


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMetadata | None = None
    """Set for a member that joined with JoinGroup (the classic protocol) rather than ConsumerGroupHeartbeat."""

    def with_epoch(self, epoch: int, **changes: object) -> ConsumerMember:
        """This member at `epoch`, its current one becoming the previous one, with `changes`."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)  # type: ignore[arg-type]

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """Whether the member is STABLE at the target assignment's epoch (Kafka's `isReconciledTo`)."""
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch
