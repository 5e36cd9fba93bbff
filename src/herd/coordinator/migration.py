"""The online upgrade of a classic group to a consumer group and its downgrade back (KIP-848's migration), as
Kafka 4.2 converts them (confluentinc/kafka branch 4.2, group-coordinator/.../GroupMetadataManager.java:
validateOnlineUpgrade, convertToConsumerGroup, validateOnlineDowngradeWithFencedMembers,
validateOnlineDowngradeWithReplacedMember, convertToClassicGroup; modern/consumer/ConsumerGroup.fromClassicGroup
and classic/ClassicGroup.fromConsumerGroup; GC/ConsumerGroupMigrationPolicy.java).

`group.consumer.migration.policy` says which way a group with members may go: `bidirectional` (the default),
`upgrade`, `downgrade` or `disabled`. An empty group converts either way whatever the policy (a classic group
that only holds offsets gives way to a consumer group, and back; consumer_heartbeat.py, membership.py).

Upgrade: a consumer-protocol member's first heartbeat to a classic group with members converts it, if the policy
allows it, the group uses the "consumer" protocol type and it has at most `group.consumer.max.size` members;
otherwise the heartbeat gets GROUP_ID_NOT_FOUND. Each classic member becomes a consumer-group member that keeps
speaking the classic protocol (consumer_classic.py), at the group's generation as its epoch, STABLE, its assignment
both its current and its target, its JoinGroup protocols kept (ClassicMemberMetadata) to answer it in the version
it speaks. Parked JoinGroups and SyncGroups get REBALANCE_IN_PROGRESS: those members rejoin the consumer group.
The records: the classic group's tombstone, then the whole consumer group (ConsumerGroup.createConsumerGroupRecords).

Downgrade: when the last consumer-protocol member leaves (or is fenced, or a classic static member replaces it),
the group goes back to classic if the policy allows it and it has at most `group.max.size` members. The records:
the consumer group's tombstones, then a GroupMetadata of a Stable classic group at the group epoch as its
generation, each member's assignment its target in the consumer protocol's version it spoke; then a rebalance,
unless a static member replaced another with the same subscription. Unlike Kafka, a group whose members' protocol
cannot be read (Kafka answers GROUP_ID_NOT_FOUND to the leaving member) is not downgraded: the members are fenced
as in any consumer group, and the group stays one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from herd.coordinator import rebalance as rb
from herd.coordinator.config import CoordinatorConfig
from herd.coordinator.consumer import embedded
from herd.coordinator.consumer import records as rec
from herd.coordinator.consumer.group import ConsumerGroup
from herd.coordinator.consumer.member import ClassicMetadata, ConsumerMember, MemberState
from herd.coordinator.context import ShardContext, group_record
from herd.coordinator.errors import CoordinatorError, ErrorCode
from herd.coordinator.group import ClassicGroup
from herd.coordinator.member import Member, MemberProtocol
from herd.coordinator.records import Record, group_tombstone
from herd.coordinator.responses import JoinGroupResponse, SyncGroupResponse
from herd.coordinator.result import Effects
from herd.coordinator.state import GroupState
from herd.coordinator.subscriptions import CONSUMER_PROTOCOL_TYPE, compute_subscribed_topics

log = logging.getLogger(__name__)

POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def upgrade_enabled(config: CoordinatorConfig) -> bool:
    return config.group_consumer_migration_policy in ("bidirectional", "upgrade")


def downgrade_enabled(config: CoordinatorConfig) -> bool:
    return config.group_consumer_migration_policy in ("bidirectional", "downgrade")


# --- upgrade -------------------------------------------------------------------------------------------------


def to_consumer_group(ctx: ShardContext, classic: ClassicGroup, records: list[Record], fx: Effects) -> ConsumerGroup:
    """The consumer group a classic group with members becomes when a consumer-protocol member joins it, and the
    records that say so; CoordinatorError GROUP_ID_NOT_FOUND when it may not (validateOnlineUpgrade,
    convertToConsumerGroup). The group returned is what replaying the records will build; parked JoinGroups and
    SyncGroups are answered REBALANCE_IN_PROGRESS in `fx`."""
    group_id = classic.group_id

    def refuse(why: str) -> CoordinatorError:
        log.info("Cannot upgrade classic group %s to consumer group because %s.", group_id, why)
        return CoordinatorError(
            ErrorCode.group_id_not_found, f"Cannot upgrade classic group {group_id} to consumer group because {why}."
        )

    if not upgrade_enabled(ctx.config):
        raise refuse("online upgrade is disabled")
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise refuse("the group does not use the consumer embedded protocol")
    if len(classic.members) > ctx.config.group_consumer_max_size:
        raise refuse("the group size exceeds the consumer group maximum size")
    try:
        group = _from_classic(ctx, classic)
    except embedded.MalformedProtocol:
        raise refuse("the embedded consumer protocol is malformed") from None
    except _CustomAssignor:
        raise refuse(
            "an unsupported custom assignor is in use. Please refer to the documentation or switch to a default "
            "assignor before re-attempting the upgrade"
        ) from None
    except ValueError as error:  # two members own one partition: the group's assignment cannot be a consumer group's
        raise refuse(f"its assignment cannot be taken over ({error})") from None

    for member in classic.members.values():
        classic.complete_join(member, JoinGroupResponse(error_code=ErrorCode.rebalance_in_progress), fx)
        classic.complete_sync(member, SyncGroupResponse(error_code=ErrorCode.rebalance_in_progress), fx)
    records.append(group_tombstone(group_id))
    members = group.members.values()
    records.extend(rec.member_subscription_record(group_id, m) for m in members)
    records.append(rec.group_epoch_record(group_id, group.group_epoch, group.metadata_hash))
    records.extend(rec.target_assignment_record(group_id, m.member_id, group.target(m.member_id)) for m in members)
    records.append(rec.target_assignment_epoch_record(group_id, group.assignment_epoch))
    records.extend(rec.current_assignment_record(group_id, m) for m in members)
    log.info("[GroupId %s] Converted the classic group to a consumer group.", group_id)
    return group


class _CustomAssignor(ValueError):
    """An assignment with user data: a custom assignor's, which a consumer group would lose."""


def _from_classic(ctx: ShardContext, classic: ClassicGroup) -> ConsumerGroup:
    """ConsumerGroup.fromClassicGroup: every member at the generation, STABLE, its assignment its target."""
    generation = classic.generation_id
    group = ConsumerGroup(classic.group_id)
    group.group_epoch = generation
    group.set_assignment_epoch(generation)
    for member in classic.members.values():
        if member.assignment:
            partitions, user_data = embedded.decode_assignment(member.assignment)
            if user_data:
                raise _CustomAssignor("userData from a custom assignor would be lost")
            assigned = ctx.topics.with_ids(partitions)
        else:
            assigned = {}  # joined and never synced: nothing yet
        metadata = member.metadata(classic.protocol_name) if classic.protocol_name else member.protocols[0].metadata
        subscription = embedded.decode_subscription(metadata)
        converted = ConsumerMember(
            member.member_id,
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            instance_id=member.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=frozenset(subscription.topics),
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            assigned=assigned,
            classic=ClassicMetadata(member.session_timeout_ms, tuple((p.name, p.metadata) for p in member.protocols)),
        )
        group.targets[member.member_id] = assigned
        group.update_member(converted)
    group.metadata_hash = ctx.topics.metadata_hash(group.subscribed_topic_names())
    return group


# --- downgrade -----------------------------------------------------------------------------------------------


def may_downgrade(ctx: ShardContext, group: ConsumerGroup, leaving: Iterable[ConsumerMember]) -> bool:
    """validateOnlineDowngradeWithFencedMembers: only classic members remain, at least one, the policy allows it,
    and they fit `group.max.size`."""
    leaving = list(leaving)
    remaining = len(group.members) - len(leaving)
    if not group.all_classic_except(leaving) or remaining <= 0:
        return False
    return _downgrade_allowed(ctx, group, remaining)


def may_downgrade_replacing(ctx: ShardContext, group: ConsumerGroup, replaced: ConsumerMember) -> bool:
    """validateOnlineDowngradeWithReplacedMember: a classic static member takes the place of the last
    consumer-protocol member."""
    if replaced.classic is not None or group.num_classic != len(group.members) - 1:
        return False
    return _downgrade_allowed(ctx, group, len(group.members))


def _downgrade_allowed(ctx: ShardContext, group: ConsumerGroup, size: int) -> bool:
    if not downgrade_enabled(ctx.config):
        log.info(
            "Cannot downgrade consumer group %s to classic group because the online downgrade is disabled.",
            group.group_id,
        )
        return False
    if size > ctx.config.group_max_size:
        log.info(
            "Cannot downgrade consumer group %s to classic group because its group size is greater than classic "
            "group max size.",
            group.group_id,
        )
        return False
    return True


def to_classic_group(
    ctx: ShardContext,
    group: ConsumerGroup,
    leaving: Iterable[ConsumerMember],
    joining: ConsumerMember | None,
    subscription_changed: bool,
    records: list[Record],
    fx: Effects,
) -> ClassicGroup | None:
    """convertToClassicGroup: the consumer group's tombstones and the classic group's GroupMetadata in `records`,
    the classic group live (in `ctx.groups`, its members' sessions armed) and rebalancing when a member left or a
    static member came back with another subscription. `joining` is a classic static member replacing the
    member with its instance id (its records already in `records`). None, and nothing done, when a member's
    protocol cannot be read: the caller fences as in any consumer group. The caller cancels the consumer group's
    timers."""
    leaving_ids = {m.member_id for m in leaving}
    replaced = group.static_member(joining.instance_id) if joining is not None else None
    if joining is not None and replaced is None:
        raise ValueError("a joining member must be a static member replacing another")
    now = ctx.now()
    classic = ClassicGroup(
        group.group_id,
        GroupState.STABLE,
        now,
        generation_id=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        current_state_timestamp_ms=now,
    )
    staying = [
        m
        for m in group.members.values()
        if m.member_id not in leaving_ids and (replaced is None or m.member_id != replaced.member_id)
    ]
    if joining is not None:
        staying.append(joining)
    targets: dict[str, str] = {}  # member id -> the member whose target it takes
    for member in staying:
        if member.classic is None:
            raise ValueError(f"member {member.member_id} of group {group.group_id} does not use the classic protocol")
        classic.add(_classic_member(member))
        targets[member.member_id] = replaced.member_id if member is joining and replaced else member.member_id
    classic.protocol_name = classic.select_protocol()
    assignments: dict[str, bytes] = {}
    try:
        for one in classic.members.values():
            version = embedded.version(one.metadata(classic.protocol_name))
            target = ctx.topics.with_names(group.target(targets[one.member_id]))
            assignments[one.member_id] = one.assignment = embedded.encode_assignment(target, version)
    except embedded.MalformedProtocol as error:
        log.warning("Cannot downgrade the consumer group %s: %s.", group.group_id, error)
        return None
    classic.subscribed_topics = compute_subscribed_topics(classic)

    member_ids = [m.member_id for m in group.members.values()]
    if joining is not None and replaced is not None:  # its replacement's records are in `records` already
        member_ids = [joining.member_id if m == replaced.member_id else m for m in member_ids]
    records.extend(rec.group_tombstones(group.group_id, tuple(member_ids), tuple(group.resolved)))
    records.append(group_record(classic, assignments))
    ctx.groups[group.group_id] = classic
    for one in classic.members.values():
        rb.arm_session(ctx, classic, one)
    if joining is None:
        reason = f"Downgrade group {group.group_id} from consumer to classic for member leaving."
        rb.prepare_rebalance(ctx, classic, "member-leave", reason, fx)
    elif subscription_changed:
        reason = (
            f"Downgrade group {group.group_id} from consumer to classic for static member replacement with "
            "different subscription."
        )
        rb.prepare_rebalance(ctx, classic, "static-member-replaced", reason, fx, joining.member_id, joining.instance_id)
    log.info("[GroupId %s] Converted the consumer group to a classic group.", group.group_id)
    return classic


def _classic_member(member: ConsumerMember) -> Member:
    assert member.classic is not None
    return Member(
        member_id=member.member_id,
        group_instance_id=member.instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        session_timeout_ms=member.classic.session_timeout_ms,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocols=tuple(MemberProtocol(name, metadata) for name, metadata in member.classic.protocols),
    )
