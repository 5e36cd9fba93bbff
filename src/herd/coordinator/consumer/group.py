"""A consumer group (KIP-848) as the coordinator holds it, rebuilt only from its records (Kafka's
group-coordinator/.../modern/consumer/ConsumerGroup.java and GroupMetadataManager.replay, branch 4.2).

Unlike the classic coordinator (herd.coordinator.shard's docstring), consumer groups are event-sourced, as in
Kafka (CoordinatorResult with replayRecords=true): a heartbeat computes records and its answer from the group as
it is, and the group changes only when the runtime replays those records, right after the handler returns and
before the next request. Loading the partition replays the same records, so a reloaded group is the group that
was written; a write that fails fails the shard, which reloads from its log (runtime/machine.py).

What the group keeps, beside its members (`ConsumerMember`) and their target assignments:
- `group_epoch`, bumped when the membership or a subscription changes; `assignment_epoch`, the epoch of the
  target assignment (the group is Assigning while it is behind the group epoch);
- each partition's owner epoch (`partition_epoch`), from the members' assigned and pending-revocation
  partitions: reconciliation never hands out a partition that still has one;
- static members by instance id, regular expressions and what they resolved to;
- how many members speak the classic protocol and which protocols they all support (KIP-848's migration:
  consumer_classic.py, migration.py).

Its state follows Kafka's `maybeUpdateGroupState`: Empty without members, Assigning while the target is behind
the group epoch, Reconciling while a member is not STABLE at the target's epoch, else Stable.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from herd.coordinator.consumer import records as rec
from herd.coordinator.consumer.assignment import EMPTY, Assignment, TopicId
from herd.coordinator.consumer.member import LEAVE_GROUP_MEMBER_EPOCH, ConsumerMember, MemberState


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """What a regular expression matched (Kafka's ResolvedRegularExpression): the topics, the metadata version it
    was resolved against and when."""

    topics: frozenset[str]
    version: int
    timestamp: int


class ConsumerGroup:
    PROTOCOL_TYPE = "consumer"

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.targets: dict[str, Assignment] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.resolved: dict[str, ResolvedRegex] = {}
        self.has_partition_metadata_record = False  # a Kafka 4.0 record to tombstone on the next heartbeat
        self._owners: dict[TopicId, dict[int, int]] = {}  # partition -> the epoch of the member that owns it
        self._unreconciled: set[str] = set()  # members not STABLE at the assignment epoch
        self._regexes: Counter[str] = Counter()  # regex -> how many members subscribe to it
        self.num_classic = 0  # members that speak the classic protocol (consumer_classic.py)
        self._classic_protocols: Counter[str] = Counter()  # protocol name -> how many classic members support it

    # --- reading ---------------------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if self._unreconciled:
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def reconciled_besides(self, member_id: str) -> bool:
        """Whether every member but `member_id` is STABLE at the assignment epoch."""
        unreconciled = self._unreconciled
        return not unreconciled or (len(unreconciled) == 1 and member_id in unreconciled)

    def supports_classic_protocols(self, protocol_type: str | None, names: Iterable[str]) -> bool:
        """Whether a classic member with these protocols may join (Kafka's ConsumerGroup.supportsClassicProtocols):
        the "consumer" protocol type, and one protocol every classic member supports (any, in an empty group)."""
        if protocol_type != self.PROTOCOL_TYPE:
            return False
        names = list(names)
        if not self.members:
            return bool(names)
        return any(self._classic_protocols.get(name, 0) == self.num_classic for name in names)

    def all_classic_except(self, leaving: Iterable[ConsumerMember]) -> bool:
        """Whether every member but `leaving` speaks the classic protocol (allMembersUseClassicProtocolExcept)."""
        leaving = list(leaving)
        classic_leaving = sum(1 for m in leaving if m.classic is not None)
        return self.num_classic - classic_leaving == len(self.members) - len(leaving)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a member UNRELEASED_PARTITIONS still waits for a partition another member owns (Kafka's
        waitingOnUnreleasedPartition)."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, parts in self.target(member.member_id).items():
            assigned = member.assigned.get(topic_id, frozenset())
            for partition in parts:
                if partition not in assigned and self.partition_epoch(topic_id, partition) != -1:
                    return True
        return False

    def partition_epoch(self, topic_id: TopicId, partition: int) -> int:
        """The epoch of the member that owns the partition (assigned or pending revocation), or -1."""
        owners = self._owners.get(topic_id)
        return -1 if owners is None else owners.get(partition, -1)

    def target(self, member_id: str) -> Assignment:
        return self.targets.get(member_id, EMPTY)

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def subscribed_topic_names(self) -> Counter[str]:
        """Each topic the group subscribes to, by name or through a resolved regular expression, and how many
        subscriptions name it (a regex counts once however many members use it; Kafka's SubscriptionCount)."""
        names: Counter[str] = Counter()
        regexes = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                regexes.add(member.subscribed_topic_regex)
        for regex in regexes:
            resolved = self.resolved.get(regex)
            if resolved is not None:
                names.update(resolved.topics)
        return names

    def subscribed_regexes(self) -> Counter[str]:
        """How many members subscribe to each regular expression (a copy: kept up to date as members change)."""
        return self._regexes.copy()

    @property
    def has_regexes(self) -> bool:
        return bool(self._regexes)

    def member_topic_names(self, member: ConsumerMember) -> frozenset[str]:
        """The topic names `member` subscribes to: its names, and what its regex resolved to (nothing while it is
        unresolved, as Kafka's CurrentAssignmentBuilder treats it)."""
        regex = member.subscribed_topic_regex
        resolved = self.resolved.get(regex) if regex else None
        if resolved is None:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | resolved.topics

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members asked for, or `default` (`preferred_assignor`)."""
        return preferred_assignor(self.members.values(), default)

    # --- changing (replay only) ------------------------------------------------------------------------------

    def update_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            self._count_regex(old, -1)
        self._count_regex(member, 1)
        self._count_classic(old, -1)
        self._count_classic(member, 1)
        self.members[member.member_id] = member
        self._own(member)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._track(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._release(old)
        self._count_regex(old, -1)
        self._count_classic(old, -1)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self._unreconciled.discard(member_id)

    def set_assignment_epoch(self, epoch: int) -> None:
        self.assignment_epoch = epoch
        self._unreconciled = {m.member_id for m in self.members.values() if not m.is_reconciled_to(epoch)}

    def _count_regex(self, member: ConsumerMember, delta: int) -> None:
        regex = member.subscribed_topic_regex
        if regex:
            self._regexes[regex] += delta
            if self._regexes[regex] <= 0:
                del self._regexes[regex]

    def _count_classic(self, member: ConsumerMember | None, delta: int) -> None:
        if member is None or member.classic is None:
            return
        self.num_classic += delta
        for name, _ in member.classic.protocols:
            self._classic_protocols[name] += delta
            if self._classic_protocols[name] <= 0:
                del self._classic_protocols[name]

    def _track(self, member: ConsumerMember) -> None:
        if member.is_reconciled_to(self.assignment_epoch):
            self._unreconciled.discard(member.member_id)
        else:
            self._unreconciled.add(member.member_id)

    def _own(self, member: ConsumerMember) -> None:
        for of in (member.assigned, member.pending_revocation):
            for topic_id, parts in of.items():
                owners = self._owners.setdefault(topic_id, {})
                for partition in parts:
                    previous = owners.get(partition)
                    if previous is not None and previous >= member.member_epoch:
                        raise ValueError(
                            f"cannot set the epoch of {topic_id}-{partition} to {member.member_epoch} in group "
                            f"{self.group_id}: it is still owned at epoch {previous}"
                        )
                    owners[partition] = member.member_epoch

    def _release(self, member: ConsumerMember) -> None:
        for of in (member.assigned, member.pending_revocation):
            for topic_id, parts in of.items():
                owners = self._owners.get(topic_id)
                if owners is None:
                    continue
                for partition in parts:
                    if owners.get(partition) == member.member_epoch:
                        del owners[partition]
                if not owners:
                    del self._owners[topic_id]


def preferred_assignor(members: Iterable[ConsumerMember], default: str) -> str:
    """The server assignor most of `members` asked for, or `default` (Kafka's computePreferredServerAssignor; a
    tie goes to the name that sorts first, where Kafka's hash-map order decides)."""
    counts = Counter(m.server_assignor for m in members if m.server_assignor)
    if not counts:
        return default
    return min(counts.items(), key=lambda item: (-item[1], item[0]))[0]


class NotAConsumerGroup(ValueError):
    """A consumer-group record for a group id a classic group with members or a protocol holds."""


def replay(
    groups: dict[str, ConsumerGroup], record: rec.Decoded, is_classic: Callable[[str], bool] = lambda _: False
) -> str | None:
    """Apply one consumer-group record to `groups`, as Kafka's GroupMetadataManager.replay does; returns the id of
    a group the record removed (its epoch tombstone), else None. `is_classic(group_id)` says whether a classic
    group with members or a protocol holds the id: a record for one raises NotAConsumerGroup (Kafka's
    IllegalStateException; an empty classic group, which only held offsets, is replaced by the caller); a record
    out of Kafka's order raises ValueError."""
    group_id, kind, value = record.group_id, record.kind, record.value
    group = groups.get(group_id)
    if group is None:
        if value is None and kind != rec.PARTITION_METADATA:
            return None  # a tombstone for a group that is not there
        if kind == rec.PARTITION_METADATA and value is None:
            return None
        if is_classic(group_id):
            raise NotAConsumerGroup(f"Group {group_id} is not a consumer group")
        group = groups[group_id] = ConsumerGroup(group_id)
    if kind == rec.GROUP_METADATA:
        if isinstance(value, rec.GroupMetadataValue):
            group.group_epoch, group.metadata_hash = int(value.epoch), int(value.metadata_hash)
            return None
        if group.members:
            raise ValueError(f"a tombstone for group {group_id}, which still has {len(group.members)} members")
        if group.targets:
            raise ValueError(f"a tombstone for group {group_id}, whose target assignment still has members")
        if group.assignment_epoch != -1:
            raise ValueError(f"a tombstone for group {group_id} before its target assignment epoch's tombstone")
        del groups[group_id]
        return group_id
    if kind == rec.PARTITION_METADATA:
        group.has_partition_metadata_record = record.value is not None
        return None
    if kind == rec.TARGET_ASSIGNMENT_METADATA:
        if isinstance(value, rec.TargetAssignmentMetadataValue):
            group.set_assignment_epoch(int(value.assignment_epoch))
        elif group.targets:
            raise ValueError(f"a tombstone for the target assignment of {group_id}, which still has members")
        else:
            group.set_assignment_epoch(-1)
        return None
    if kind == rec.TARGET_ASSIGNMENT_MEMBER:
        assert record.member_id is not None
        if isinstance(value, rec.TargetAssignmentMemberValue):
            group.targets[record.member_id] = rec.target_of(value)
        else:
            group.targets.pop(record.member_id, None)
        return None
    if kind == rec.REGULAR_EXPRESSION:
        assert record.member_id is not None  # the regex, for this record type
        if isinstance(value, rec.RegularExpressionValue):
            group.resolved[record.member_id] = ResolvedRegex(
                frozenset(value.topics), int(value.version), int(value.timestamp)
            )
        else:
            group.resolved.pop(record.member_id, None)
        return None
    member_id = record.member_id
    assert member_id is not None
    member = group.members.get(member_id)
    if kind == rec.MEMBER_METADATA:
        if isinstance(value, rec.MemberMetadataValue):
            group.update_member(rec.apply_subscription(member or ConsumerMember(member_id), value))
        elif member is not None:
            if member.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                raise ValueError(f"a tombstone for member {member_id} before its current assignment's tombstone")
            if member_id in group.targets:
                raise ValueError(f"a tombstone for member {member_id} before its target assignment's tombstone")
            group.remove_member(member_id)
        return None
    if kind == rec.CURRENT_MEMBER_ASSIGNMENT:
        if isinstance(value, rec.CurrentMemberAssignmentValue):
            group.update_member(rec.apply_current_assignment(member or ConsumerMember(member_id), value))
        elif member is not None:
            gone = replace(
                member,
                member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                assigned=EMPTY,
                pending_revocation=EMPTY,
            )
            group.update_member(gone)
        return None
    raise ValueError(f"record type {kind} is not a consumer-group record")
