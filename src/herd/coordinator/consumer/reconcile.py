"""Reconciliation: a member's next state on its way to the target assignment, one heartbeat at a time (Kafka's
group-coordinator/.../modern/consumer/CurrentAssignmentBuilder.java, branch 4.2).

The rule that makes the protocol safe: a partition is never given to a member while another member still owns it.
Each heartbeat brings the member's owned partitions; `reconcile` splits the member's current assignment against
its target, topic by topic:

- kept = current ∩ target; to revoke = current − kept; to assign = target − kept, less the partitions another
  member still owns (`partition_epoch(topic, partition)` is not -1, and the partition is not this member's own
  pending revocation);
- partitions to revoke that the member still owns: it stays at its epoch, keeps only `kept` and goes to
  UNREVOKED_PARTITIONS until a heartbeat shows them gone;
- otherwise it moves to the target epoch with kept + to assign, STABLE, or UNRELEASED_PARTITIONS while some of
  its target is still owned elsewhere.

A member at the target epoch whose subscription changed on this heartbeat gives up the topics it left at once
(Kafka's `updateCurrentAssignment`), without waiting for a new target.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from herd.coordinator.consumer.assignment import EMPTY, Assignment, TopicId, intersects, union
from herd.coordinator.consumer.member import ConsumerMember, MemberState
from herd.coordinator.errors import CoordinatorError, ErrorCode

PartitionEpoch = Callable[[TopicId, int], int]
"""The epoch of the member that currently owns a partition, or -1 when none does."""


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    partition_epoch: PartitionEpoch,
    subscribed: frozenset[TopicId],
    subscription_changed: bool = False,
) -> ConsumerMember:
    """The member's next state (the same object when nothing changes).

    `owned` is what the member's heartbeat says it owns (None when the heartbeat left it out, which counts as
    still owning everything); `subscribed` the ids of the existing topics it subscribes to (its names, and what
    its regular expression resolved to, if it has); `subscription_changed` whether this heartbeat changed them.
    Raises FENCED_MEMBER_EPOCH for a member in a state this coordinator does not know that still owns
    partitions."""
    step = _Step(member, target_epoch, target, owned, partition_epoch, subscribed)
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return step.next_assignment(member.member_epoch)
        return step.drop_unsubscribed() if subscription_changed else member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if step.owns_any(member.pending_revocation):
            return step.drop_unsubscribed() if subscription_changed else member
        return step.next_assignment(member.member_epoch)  # all revoked: on towards the target
    if state is MemberState.UNRELEASED_PARTITIONS:
        return step.next_assignment(member.member_epoch)
    if owned is None or owned:  # UNKNOWN, written by a newer coordinator: start again from nothing
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
        )
    return step.next_assignment(target_epoch)


class _Step:
    def __init__(
        self,
        member: ConsumerMember,
        target_epoch: int,
        target: Assignment,
        owned: Assignment | None,
        partition_epoch: PartitionEpoch,
        subscribed: frozenset[TopicId],
    ) -> None:
        self.member = member
        self.target_epoch = target_epoch
        self.target = target
        self.owned = owned
        self.partition_epoch = partition_epoch
        self.subscribed = subscribed

    def owns_any(self, revoked: Assignment) -> bool:
        """Whether the heartbeat still lists any of `revoked` (one without its owned partitions does)."""
        return self.owned is None or intersects(self.owned, revoked)

    def drop_unsubscribed(self) -> ConsumerMember:
        """The member at its epoch without the topics it no longer subscribes to: to be revoked if it still owns
        them, else simply gone (Kafka's `updateCurrentAssignment`)."""
        member, subscribed = self.member, self.subscribed
        if not subscribed and not member.pending_revocation:
            assigned: Assignment = EMPTY
            pending = member.assigned
        else:
            dropped = {topic_id: parts for topic_id, parts in member.assigned.items() if topic_id not in subscribed}
            assigned = {topic_id: parts for topic_id, parts in member.assigned.items() if topic_id not in dropped}
            pending = union(member.pending_revocation, dropped)
        if assigned == member.assigned:
            return member
        if pending and self.owns_any(pending):
            state = MemberState.UNREVOKED_PARTITIONS
            return replace(member, state=state, assigned=assigned, pending_revocation=pending)
        return replace(member, assigned=assigned)  # they were revoked already: only the assignment shrinks

    def next_assignment(self, epoch: int) -> ConsumerMember:
        """The member reconciled towards the target, from `epoch`."""
        member = self.member
        kept: dict[TopicId, frozenset[int]] = {}
        revoking: dict[TopicId, frozenset[int]] = {}
        assigning: dict[TopicId, frozenset[int]] = {}
        unreleased = False
        for topic_id in self.target.keys() | member.assigned.keys():
            current = member.assigned.get(topic_id, frozenset())
            if topic_id in self.subscribed:
                target = self.target.get(topic_id, frozenset())
            else:
                target = frozenset()  # no longer subscribed: none of it is the target
            if stays := current & target:
                kept[topic_id] = stays
            if gone := current - stays:
                revoking[topic_id] = gone
            if wanted := target - stays:
                own_pending = member.pending_revocation.get(topic_id, frozenset())
                free = frozenset(p for p in wanted if p in own_pending or self.partition_epoch(topic_id, p) == -1)
                unreleased = unreleased or len(free) < len(wanted)
                if free:
                    assigning[topic_id] = free
        if revoking and self.owns_any(revoking):
            # it must give partitions up first: it stays at `epoch` and keeps only what stays
            return member.with_epoch(
                epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=kept, pending_revocation=revoking
            )
        return member.with_epoch(
            self.target_epoch,
            state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
            assigned=union(kept, assigning),
            pending_revocation=EMPTY,
        )
