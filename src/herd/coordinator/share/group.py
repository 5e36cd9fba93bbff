"""A share group (KIP-932) as the coordinator holds it, rebuilt only from its records (Kafka's
group-coordinator/.../modern/share/ShareGroup.java, ShareGroupMember.java and GroupMetadataManager.replay).

Event-sourced as consumer groups are (herd.coordinator.consumer.group): the heartbeat computes records from the
group as it is, and the group changes only when they are replayed (`replay`). A share group is simpler than a
consumer group: partitions are not owned exclusively, so a member takes its target assignment at once (no
revocation, no member states beyond STABLE), there are no static members or regular expressions, and the group is
Empty without members and Stable with them. It is never deleted on its own (Kafka's shouldExpire is false for
share groups): only DeleteGroups removes it.

Beside its members and their target assignments the group keeps its share-state metadata (record 15): which
subscribed partitions have their share state initialized, which are being initialized and since when, and which
topics' state is being deleted. Only initialized partitions are assigned.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field, replace

from herd.coordinator.consumer.assignment import EMPTY, Assignment
from herd.coordinator.consumer.records import Decoded, assignment_of
from herd.coordinator.share import records as rec


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareMember:
    """A member of a share group (ShareGroupMember.java): epochs, client, subscription and its assignment."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    assigned: Assignment = field(default_factory=lambda: EMPTY)


class ShareGroup:
    PROTOCOL_TYPE = "share"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.targets: dict[str, Assignment] = {}
        self.state_metadata: rec.StateMetadata | None = None

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def target(self, member_id: str) -> Assignment:
        return self.targets.get(member_id, EMPTY)

    def subscribed_topic_names(self, replacing: ShareMember | None = None, leaving: str | None = None) -> Counter[str]:
        """Each topic the members subscribe to and how many of them do, with `replacing` in place of the member
        of its id and without `leaving`."""
        names: Counter[str] = Counter()
        for member in self.members.values():
            if member.member_id != leaving and (replacing is None or member.member_id != replacing.member_id):
                names.update(member.subscribed_topic_names)
        if replacing is not None:
            names.update(replacing.subscribed_topic_names)
        return names


def replay(groups: dict[str, ShareGroup], decoded: Decoded, now_ms: int) -> None:
    """Apply one share-group record to `groups` (GroupMetadataManager.replay for types 10-15). A value creates the
    group if it is new; the group's epoch tombstone removes it. ValueError for a record that contradicts the group
    (Kafka's IllegalStateException): the caller skips it with a warning."""
    group = groups.get(decoded.group_id)
    value = decoded.value
    if group is None:
        if value is None:
            return  # a tombstone of a group already gone
        group = groups[decoded.group_id] = ShareGroup(decoded.group_id)
    kind, member_id = decoded.kind, decoded.member_id
    if kind == rec.MEMBER_METADATA:
        assert member_id is not None
        if value is None:
            member = group.members.get(member_id)
            if member is not None and (member.member_epoch != -1 or member_id in group.targets):
                raise ValueError(f"share group {group.group_id}: member {member_id} removed before its assignments")
            group.members.pop(member_id, None)
            return
        assert isinstance(value, rec.MemberMetadataValue)
        member = group.members.get(member_id) or ShareMember(member_id)
        group.members[member_id] = replace(
            member,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=frozenset(value.subscribed_topic_names),
        )
    elif kind == rec.GROUP_METADATA:
        if value is None:
            if group.members or group.targets:
                raise ValueError(f"share group {group.group_id} removed while it has members or assignments")
            del groups[group.group_id]
            return
        assert isinstance(value, rec.GroupMetadataValue)
        group.group_epoch, group.metadata_hash = int(value.epoch), int(value.metadata_hash)
    elif kind == rec.TARGET_ASSIGNMENT_METADATA:
        if value is None:
            group.assignment_epoch = -1
            return
        group.assignment_epoch = int(value.assignment_epoch)  # type: ignore[attr-defined]
    elif kind == rec.TARGET_ASSIGNMENT_MEMBER:
        assert member_id is not None
        if value is None:
            group.targets.pop(member_id, None)
            return
        group.targets[member_id] = assignment_of(value.topic_partitions)  # type: ignore[attr-defined]
    elif kind == rec.CURRENT_MEMBER_ASSIGNMENT:
        assert member_id is not None
        member = group.members.get(member_id) or ShareMember(member_id)
        if value is None:
            group.members[member_id] = replace(member, member_epoch=-1, previous_member_epoch=-1, assigned=EMPTY)
            return
        assert isinstance(value, rec.CurrentMemberAssignmentValue)
        group.members[member_id] = replace(
            member,
            member_epoch=int(value.member_epoch),
            previous_member_epoch=int(value.previous_member_epoch),
            assigned=assignment_of(value.assigned_partitions),
        )
    elif kind == rec.STATE_PARTITION_METADATA:
        if value is None:
            group.state_metadata = None
            return
        assert isinstance(value, rec.StatePartitionMetadataValue)
        metadata = rec.state_metadata_of(value)
        # Kafka keeps the replay's time, not CreateTimestamp, for the retry of an initialization
        initializing = {t: topic._replace(timestamp=now_ms) for t, topic in metadata.initializing.items()}
        group.state_metadata = replace(metadata, initializing=initializing)
