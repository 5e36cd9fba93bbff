"""ConsumerGroupHeartbeat (KIP-848): join, heartbeat, leave and the timers that fence a member, as Kafka 4.2's
GroupMetadataManager does it (confluentinc/kafka branch 4.2, group-coordinator/.../GroupMetadataManager.java:
consumerGroupHeartbeat, consumerGroupLeave, consumerGroupFenceMembers, the session and rebalance timeouts; the
request checks of GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid).

A heartbeat never changes the group itself: it computes the records that describe the change and its answer
from the group as it is, and the group changes when the runtime replays those records (group.py). In order:

1. the group (created by a joining member's records) and the member: a new dynamic member, a static member
   taking over its instance id from a member that left with epoch -2, or a known member whose epoch is checked
   (FENCED_MEMBER_EPOCH unless it is the current one, or the previous one with owned partitions the member
   may still hold);
2. the member's new subscription: a ConsumerGroupMemberMetadata record when anything about it changed, and a
   bump of the group epoch when its topics changed (or the group is new, or the subscribed topics' metadata
   hash moved);
3. a new target assignment when the group epoch is ahead of the assignment epoch: the group's assignor (the
   one most members name, else the first of group.consumer.assignors) over every member, a record for each
   member whose target changed and one for the new assignment epoch;
4. reconciliation of this member towards its target (reconcile.py), a CurrentMemberAssignment record when it
   moved, and the rebalance timeout armed while it has partitions to revoke;
5. its session timer re-armed, and the answer: its id, epoch, the heartbeat interval, and its assignment when it
   joined, sent a full request, or its assignment changed.

Regular-expression subscriptions are resolved by a refresh scheduled at once on the shard's timer, as Kafka's
executor runs it, so a member learns what its regex matched on its next heartbeat (consumer/regex.py).

The heartbeat interval and session timeout are the group's `consumer.heartbeat.interval.ms` and
`consumer.session.timeout.ms` when it sets them (kafka_group_configs.py), else the broker's.

A joining member upgrades a classic group with members (migration.py), and when the last consumer-protocol
member is fenced or leaves a group of classic members, the group goes back to classic. Classic members inside a
consumer group talk through JoinGroup, SyncGroup, Heartbeat and LeaveGroup (consumer_classic.py), with the
helpers here.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from herd.coordinator import kafka_group_configs, migration
from herd.coordinator.consumer import records as rec
from herd.coordinator.consumer import regex
from herd.coordinator.consumer.assignment import EMPTY, Assignment, size
from herd.coordinator.consumer.assignors import ASSIGNORS, AssignorError, MemberSpec
from herd.coordinator.consumer.group import ConsumerGroup, ResolvedRegex, preferred_assignor
from herd.coordinator.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerMember,
    MemberState,
)
from herd.coordinator.consumer.reconcile import reconcile
from herd.coordinator.context import ShardContext
from herd.coordinator.errors import CoordinatorError, ErrorCode
from herd.coordinator.records import Record, group_tombstone
from herd.coordinator.responses import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)
from herd.coordinator.result import Effects, Reply, Result, Rollback

log = logging.getLogger(__name__)

CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1  # KIP-1082: from v1 the client makes its member id


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeat:
    """ConsumerGroupHeartbeat v0-1, version-independent. A field left None (or -1) did not change since the last
    heartbeat; `owned` is the member's owned partitions by topic id (TopicPartitions), None when not sent."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    api_version: int = 1
    client_id: str = ""
    client_host: str = ""
    describable: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)
    """Whether the member's principal may DESCRIBE a topic (None: no authorizer): a regex resolves to those only."""


def session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session-timeout:{group_id}:{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance-timeout:{group_id}:{member_id}"


def regex_refresh_key(group_id: str) -> str:
    return f"consumer-regex-refresh:{group_id}"


class RegexUpdate(enum.Enum):
    """Kafka's UpdateRegularExpressionsResult."""

    NO_CHANGE = 0
    UPDATED = 1
    UPDATED_AND_RESOLVED = 2


# --- the request -------------------------------------------------------------------------------------------


def validate(req: ConsumerGroupHeartbeat, assignors: tuple[str, ...]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST or UNSUPPORTED_ASSIGNOR."""

    def invalid(message: str) -> CoordinatorError:
        return CoordinatorError(ErrorCode.invalid_request, message)

    epoch = req.member_epoch
    if req.api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or epoch > 0 or epoch == -1:
        if req.member_id == "":
            raise invalid("MemberId can't be empty.")
    if req.group_id == "":
        raise invalid("GroupId can't be empty.")
    if req.instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if req.rack_id == "":
        raise invalid("RackId can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or req.owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise CoordinatorError(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {', '.join(assignors)}.",
        )


def keep_alive(
    ctx: ShardContext, group_id: str, member_id: str, member_epoch: int, client_id: str, client_host: str
) -> tuple[str, int, int] | None:
    """The answer (member id, epoch, heartbeat interval) to a heartbeat that only keeps a reconciled member alive,
    or None when `handle` must run: the runtime's fast path, as the classic Heartbeat's `heartbeat_error`. The
    caller sends here only heartbeats that change nothing (no instance, rack, rebalance timeout, subscription or
    assignor); this checks the rest: an existing dynamic member at its epoch, reconciled, with the same client, in
    a group with no new target to compute, no metadata to check and no regex. Its whole effect is the session's
    deadline, exactly what `handle` does for such a heartbeat."""
    # The hot path of a consumer group: the checks are those of `is_reconciled_to`, `has_regexes`,
    # `metadata_may_have_moved` and `arm_session`, written out (each call cost about 0.1 us of a 5 us heartbeat).
    if member_epoch <= 0:
        return None
    group = ctx.consumer_groups.get(group_id)
    if group is None:
        return None
    group_epoch = group.group_epoch
    if group_epoch == 0 or group_epoch != group.assignment_epoch or group.has_regexes:
        return None
    member = group.members.get(member_id)
    if (
        member is None
        or member.member_epoch != member_epoch
        or member_epoch != group_epoch
        or member.state is not MemberState.STABLE
        or member.client_id != client_id
        or member.client_host != client_host
        or member.instance_id is not None
        or ctx.consumer_hash_checked.get(group_id) != (ctx.topics.version, group_epoch)
    ):
        return None
    if ctx.group_configs.get(group_id):  # the group's own session timeout and interval
        arm_session(ctx, group_id, member_id)
        return member_id, member_epoch, heartbeat_interval_ms(ctx, group_id)
    # the broker's settings, as for nearly every group; `arm_session` written out (against calling it: consumer
    # 4,234 / 4,190 ns against 4,369 / 4,258 per keep-alive, bench_heartbeat_path.py --protocol both)
    config = ctx.config
    session = ctx.consumer_sessions.get((group_id, member_id))
    if session is None:
        arm_session(ctx, group_id, member_id, config.group_consumer_session_timeout_ms)
    else:
        session[0] = ctx.clock.now_ms() + config.group_consumer_session_timeout_ms
        if session[1] == -1:
            _schedule_session(ctx, group_id, member_id, session, session[0])
    return member_id, member_epoch, config.group_consumer_heartbeat_interval_ms


def handle(ctx: ShardContext, req: ConsumerGroupHeartbeat, reply: object) -> Result:
    """The Result of one ConsumerGroupHeartbeat: its records and its answer, or an error answer and nothing."""
    upgraded = Effects()  # what converting a classic group answers (its parked JoinGroups and SyncGroups)
    try:
        validate(req, ctx.config.group_consumer_assignors)
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            records, response = _leave(ctx, req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH and records:
                rollback = rearm_sessions(ctx, req.group_id, (req.member_id,))
                return Result(records=tuple(records), replies=(Reply(reply, response),), rollback=rollback)
        else:
            records, response = _heartbeat(ctx, req, upgraded)
    except CoordinatorError as error:
        response = ConsumerGroupHeartbeatResponse(error_code=error.code, error_message=error.message or None)
        return Result(replies=(*upgraded.replies, Reply(reply, response)))
    return Result(records=tuple(records), replies=(*upgraded.replies, Reply(reply, response)))


# --- heartbeat ---------------------------------------------------------------------------------------------


def _heartbeat(
    ctx: ShardContext, req: ConsumerGroupHeartbeat, upgraded: Effects
) -> tuple[list[Record], ConsumerGroupHeartbeatResponse]:
    records: list[Record] = []
    joining = req.member_epoch == 0
    group = _group_to_join(ctx, req.group_id, joining, records, upgraded)
    member_id = req.member_id
    config = ctx.config
    if len(group.members) >= config.group_consumer_max_size and (member_id == "" or member_id not in group.members):
        raise CoordinatorError(
            ErrorCode.group_max_size_reached,
            f"The consumer group has reached its maximum capacity of {config.group_consumer_max_size} members.",
        )
    if member_id == "":
        member_id = ctx.new_uuid()  # v0 only: from v1 the client generates it

    if req.instance_id is None:
        member = _dynamic_member(group, member_id, req, joining)
    else:
        member = _static_member(group, member_id, req, joining, records)

    updated = replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
        subscribed_topic_names=(
            frozenset(req.subscribed_topic_names)
            if req.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            req.subscribed_topic_regex if req.subscribed_topic_regex is not None else member.subscribed_topic_regex
        ),
        client_id=req.client_id,
        client_host=req.client_host,
        classic=None,  # it speaks the consumer protocol now, even if it took a classic static member's place
    )
    names_changed = False
    if updated != member:
        records.append(rec.member_subscription_record(group.group_id, updated))
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    regex_update = maybe_update_regexes(ctx, group, member, updated, records, req.describable)
    subscription_changed = names_changed or regex_update is not RegexUpdate.NO_CHANGE

    group_epoch = group.group_epoch
    bump = group_epoch == 0 or names_changed or regex_update is RegexUpdate.UPDATED_AND_RESOLVED
    if bump or metadata_may_have_moved(ctx, group):
        group_epoch = maybe_bump_group_epoch(ctx, group, bump, member, updated, records)
        if group_epoch > group.group_epoch:
            rebalance_started(ctx, group, *bump_cause(group, member, updated, bump), updated)

    if group_epoch > group.assignment_epoch:
        target = new_target_assignment(ctx, group, group_epoch, member, updated, records)
        target_epoch = group_epoch
    else:
        target_epoch = group.assignment_epoch
        previous = group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
        target = group.target(previous if previous is not None else updated.member_id)

    reconciled = maybe_reconcile(ctx, group, updated, target_epoch, target, subscription_changed, req.owned, records)
    arm_session(ctx, group.group_id, updated.member_id)
    if group.group_id not in ctx.consumer_groups and group.num_classic:  # upgraded from a classic group just now
        for member in group.members.values():
            if member.classic is not None:
                arm_session(ctx, group.group_id, member.member_id, member.classic.session_timeout_ms)
    if target_epoch == group_epoch and reconciled.is_reconciled_to(group_epoch):
        maybe_rebalance_done(ctx, group, group_epoch, reconciled.member_id, records)

    full = (
        req.rebalance_timeout_ms != -1
        and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
        and req.owned is not None
    )
    send_assignment = joining or full or reconciled.assigned != member.assigned
    return records, ConsumerGroupHeartbeatResponse(
        member_id=reconciled.member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=heartbeat_interval_ms(ctx, group.group_id),
        assignment=reconciled.assigned if send_assignment else None,
    )


def _group_to_join(
    ctx: ShardContext, group_id: str, create: bool, records: list[Record], upgraded: Effects
) -> ConsumerGroup:
    """Kafka's getOrMaybeCreateConsumerGroup. A new group is a fresh object the records will create on replay; an
    empty classic group (one that only held offsets or whose members all left) is replaced, with its
    GroupMetadata tombstone; a classic group with members is upgraded when a member joins (migration.py)."""
    group = ctx.consumer_groups.get(group_id)
    if group is not None:
        return group
    if group_id in ctx.share_groups:
        raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
    classic = ctx.groups.get(group_id)
    if classic is None:
        if not create:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)
    if create and not classic.members:
        records.append(group_tombstone(group_id))
        log.info("[GroupId %s] Converted the empty classic group to a consumer group.", group_id)
        return ConsumerGroup(group_id)
    if create:
        return migration.to_consumer_group(ctx, classic, records, upgraded)
    raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")


def _check_epoch(member: ConsumerMember, received: int, owned: Assignment | None) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: epoch 0 (re)joins; a smaller epoch is accepted only if
    it is the previous one and the member owns nothing beyond its assignment (the answer that bumped it may
    have been lost)."""
    if received == 0:
        return
    if received > member.member_epoch:
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(owned, member.assigned)
    ):
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(parts <= assigned.get(topic_id, frozenset()) for topic_id, parts in owned.items())


def unknown_member(group: ConsumerGroup, member_id: str) -> CoordinatorError:
    return CoordinatorError(
        ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
    )


def _dynamic_member(group: ConsumerGroup, member_id: str, req: ConsumerGroupHeartbeat, joining: bool) -> ConsumerMember:
    member = group.members.get(member_id)
    if member is None:
        if not joining:
            raise unknown_member(group, member_id)
        member = ConsumerMember(member_id)
        log.info("[GroupId %s] Member %s joins the consumer group.", group.group_id, member_id)
    _check_epoch(member, req.member_epoch, req.owned)
    return member


def _static_member(
    group: ConsumerGroup, member_id: str, req: ConsumerGroupHeartbeat, joining: bool, records: list[Record]
) -> ConsumerMember:
    """Kafka's getOrMaybeSubscribeStaticConsumerGroupMember."""
    instance_id = req.instance_id
    assert instance_id is not None
    existing = group.static_member(instance_id)
    if joining:
        if existing is None:
            log.info(
                "[GroupId %s] Static member %s with instance id %s joins the consumer group.",
                group.group_id,
                member_id,
                instance_id,
            )
            return group.members.get(member_id) or ConsumerMember(member_id)
        if existing.classic is None and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise CoordinatorError(
                ErrorCode.unreleased_instance_id,
                f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                f"instance id is owned by {existing.member_id} member.",
            )
        # the member comes back under a new id (a classic member's place is taken even if it did not leave)
        replacement = replace_static_member(group, existing, member_id, records)
        log.info(
            "[GroupId %s] Static member with instance id %s re-joins the consumer group. Created a new member %s "
            "to replace the existing member %s.",
            group.group_id,
            instance_id,
            member_id,
            existing.member_id,
        )
        return replacement
    if existing is None:
        raise CoordinatorError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise CoordinatorError(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} was fenced by member {existing.member_id}.",
        )
    _check_epoch(existing, req.member_epoch, req.owned)
    return existing


def replace_static_member(
    group: ConsumerGroup, existing: ConsumerMember, member_id: str, records: list[Record]
) -> ConsumerMember:
    """Kafka's replaceMember: `existing` goes, and a member with its state under `member_id`, at epoch 0, takes
    its place and its target assignment."""
    replacement = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
    records.extend(rec.member_tombstones(group.group_id, existing.member_id))
    records.append(rec.member_subscription_record(group.group_id, replacement))
    records.append(rec.target_assignment_record(group.group_id, member_id, group.target(existing.member_id)))
    records.append(rec.current_assignment_record(group.group_id, replacement))
    return replacement


def maybe_update_regexes(
    ctx: ShardContext,
    group: ConsumerGroup,
    member: ConsumerMember,
    updated: ConsumerMember,
    records: list[Record],
    describable: Callable[[str], bool] | None,
) -> RegexUpdate:
    """Kafka's maybeUpdateRegularExpressions: a regex left by its last member is tombstoned, a new one is checked
    and resolved by a refresh (scheduled at once, as Kafka's executor runs it), one already resolved bumps the
    epoch now; and a refresh is scheduled when the group's regexes need one (regex.py)."""
    old, new = member.subscribed_topic_regex or None, updated.subscribed_topic_regex or None
    if old == new and not group.has_regexes:
        return RegexUpdate.NO_CHANGE  # the common heartbeat: nothing to count
    counts = group.subscribed_regexes()
    update, require = RegexUpdate.NO_CHANGE, False
    if old != new:
        update = RegexUpdate.UPDATED
        if old is not None and counts.get(old, 0) == 1:
            records.append(rec.regular_expression_tombstone(group.group_id, old))
        if new is not None:
            if counts.get(new, 0) == 0:
                regex.check(new)
                require = True
            elif new in group.resolved:
                update = RegexUpdate.UPDATED_AND_RESOLVED
        elif old is not None:
            update = RegexUpdate.UPDATED_AND_RESOLVED
    if not require and not counts:
        return update
    if group.group_id in ctx.regex_refreshing:
        return update
    now = ctx.now()
    last = min((r.timestamp for r in group.resolved.values()), default=None)
    if last is not None and now <= last + regex.REFRESH_MIN_INTERVAL_MS:
        return update
    after = counts.copy()
    if old is not None:
        after[old] -= 1
    if new is not None:
        after[new] += 1
    after = +after  # drop the regexes no member subscribes to any more
    require = (
        require
        or len(after) != len(group.resolved)
        or ctx.regex_resolved_at.get(group.group_id, -2) < ctx.topics_created_version
        or last is None
        or now > last + ctx.config.group_consumer_regex_refresh_interval_ms
    )
    if require and after:
        group_id = group.group_id
        ctx.regex_refreshing.add(group_id)
        ctx.timer.schedule(regex_refresh_key(group_id), now, lambda: _refresh_regexes(ctx, group_id, describable))
    return update


def _refresh_regexes(ctx: ShardContext, group_id: str, describable: Callable[[str], bool] | None) -> Result:
    """Kafka's refreshRegularExpressions and handleRegularExpressionsResult: resolve every regex the group
    subscribes to, record each, and bump the group epoch when what they match (or the subscribed topics'
    metadata hash) changed."""
    ctx.regex_refreshing.discard(group_id)
    group = ctx.consumer_groups.get(group_id)
    regexes = group.subscribed_regexes() if group is not None else {}
    if group is None or not regexes:
        return Result()
    now, version = ctx.now(), ctx.topics.version
    records: list[Record] = []
    resolved = dict(group.resolved)
    bump = False
    for one, topics in regex.resolve(regexes, ctx.topics.by_name, describable).items():
        before = group.resolved.get(one)
        bump = bump or before is None or before.topics != topics
        resolved[one] = ResolvedRegex(topics, version, now)
        records.append(rec.regular_expression_record(group_id, one, topics, version, now))
    ctx.regex_resolved_at[group_id] = ctx.topics_created_version
    names: set[str] = set()
    for member in group.members.values():
        names |= _topic_names(member, resolved)
    metadata_hash = ctx.topics.metadata_hash(names)
    if bump or metadata_hash != group.metadata_hash:
        epoch = group.group_epoch + 1
        records.append(rec.group_epoch_record(group_id, epoch, metadata_hash))
        ctx.consumer_hash_checked[group_id] = (version, epoch)
        log.info("[GroupId %s] Bumped group epoch to %d with metadata hash %d.", group_id, epoch, metadata_hash)
        if bump:
            rebalance_started(ctx, group, "regex-match", "a regular expression subscription matches other topics")
        else:
            rebalance_started(ctx, group, "metadata-change", "the subscribed topics' partitions changed")
    return Result(records=tuple(records))


def _topic_names(member: ConsumerMember, resolved: dict[str, ResolvedRegex]) -> frozenset[str]:
    """`ConsumerGroup.member_topic_names` over the given resolutions."""
    regex_topics = resolved.get(member.subscribed_topic_regex) if member.subscribed_topic_regex else None
    if regex_topics is None:
        return member.subscribed_topic_names
    return member.subscribed_topic_names | regex_topics.topics


def metadata_may_have_moved(ctx: ShardContext, group: ConsumerGroup) -> bool:
    """Kafka's hasMetadataExpired: the topics image or the group epoch moved since the hash was last checked."""
    return ctx.consumer_hash_checked.get(group.group_id) != (ctx.topics.version, group.group_epoch)


def _subscribed_names(group: ConsumerGroup, old: ConsumerMember | None, new: ConsumerMember | None) -> set[str]:
    """The group's subscribed topic names with `old` replaced by `new` (Kafka's computeSubscribedTopicNames)."""
    members = dict(group.members)
    if old is not None:
        members.pop(old.member_id, None)
    if new is not None:
        if new.instance_id is not None:
            previous = group.static_members.get(new.instance_id)
            if previous is not None:
                members.pop(previous, None)
        members[new.member_id] = new
    names: set[str] = set()
    for member in members.values():
        names |= group.member_topic_names(member)
    return names


def maybe_bump_group_epoch(
    ctx: ShardContext,
    group: ConsumerGroup,
    bump: bool,
    member: ConsumerMember,
    updated: ConsumerMember,
    records: list[Record],
) -> int:
    """Kafka's updateSubscriptionMetadata: the epoch moves when asked or when the subscribed topics' metadata
    hash moved; the Kafka 4.0 partition-metadata record, if any, is tombstoned."""
    metadata_hash = ctx.topics.metadata_hash(_subscribed_names(group, member, updated))
    epoch = group.group_epoch
    if bump or metadata_hash != group.metadata_hash:
        epoch += 1
        records.append(rec.group_epoch_record(group.group_id, epoch, metadata_hash))
    ctx.consumer_hash_checked[group.group_id] = (ctx.topics.version, epoch)
    if group.has_partition_metadata_record:
        records.append(rec.partition_metadata_tombstone(group.group_id))
    return epoch


def new_target_assignment(
    ctx: ShardContext,
    group: ConsumerGroup,
    group_epoch: int,
    member: ConsumerMember,
    updated: ConsumerMember,
    records: list[Record],
) -> Assignment:
    """Kafka's updateTargetAssignment (TargetAssignmentBuilder): the group's assignor over every member, with
    `updated` in place of `member` (and of the static member it replaces); records for each member whose
    target changed, then the new assignment epoch. Returns `updated`'s new target."""
    members = dict(group.members)
    targets = dict(group.targets)
    previous = group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
    if previous is not None and previous != updated.member_id:
        members.pop(previous, None)
        targets[updated.member_id] = targets.pop(previous, EMPTY)
    members[updated.member_id] = updated
    assignor = ASSIGNORS[preferred_assignor(members.values(), ctx.config.group_consumer_assignors[0])]
    names: set[str] = set()
    specs = []
    for member_id in sorted(members):
        one = members[member_id]
        topics = group.member_topic_names(one)
        names |= topics
        specs.append(
            MemberSpec(member_id, ctx.topics.ids(topics), targets.get(member_id, EMPTY), one.instance_id, one.rack_id)
        )
    try:
        result = assignor.assign(specs, ctx.topics.partition_counts(names))
    except AssignorError as error:
        raise CoordinatorError(
            ErrorCode.unknown_server_error,
            f"Failed to compute a new target assignment for epoch {group_epoch}: {error}",
        ) from error
    for spec in specs:
        new = result.get(spec.member_id, EMPTY)
        if spec.member_id not in group.targets or new != group.targets[spec.member_id]:
            records.append(rec.target_assignment_record(group.group_id, spec.member_id, new))
    records.append(rec.target_assignment_epoch_record(group.group_id, group_epoch))
    if ctx.history.current(group.group_id) is not None:
        ctx.history.assigned(
            group.group_id,
            group_epoch,
            assignor.name,
            (
                (s.member_id, s.instance_id, members[s.member_id].client_id, members[s.member_id].client_host,
                 size(result.get(s.member_id, EMPTY)))
                for s in specs
            ),
            ctx.now(),
        )  # fmt: skip
    return result.get(updated.member_id, EMPTY)


def maybe_reconcile(
    ctx: ShardContext,
    group: ConsumerGroup,
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    subscription_changed: bool,
    owned: Assignment | None,
    records: list[Record],
) -> ConsumerMember:
    """Kafka's maybeReconcile: the member's next state, a record if it moved, the rebalance timeout armed while
    it has partitions to revoke and cancelled otherwise."""
    if not subscription_changed and member.is_reconciled_to(target_epoch):
        return member
    subscribed = ctx.topics.ids(group.member_topic_names(member))
    updated = reconcile(member, target_epoch, target, owned, group.partition_epoch, subscribed, subscription_changed)
    if updated != member:
        records.append(rec.current_assignment_record(group.group_id, updated))
        if updated.classic is not None:
            pass  # a classic member has a join and a sync timeout instead (consumer_classic.py)
        elif updated.state is MemberState.UNREVOKED_PARTITIONS:
            _arm_rebalance_timeout(ctx, group.group_id, updated)
        else:
            ctx.timer.cancel(rebalance_key(group.group_id, updated.member_id))
    return updated


# --- the rebalance history (history.py): an entry per group epoch bump ---------------------------------------


def bump_cause(group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember, asked: bool) -> tuple[str, str]:
    """Why a heartbeat bumped the group epoch: (cause, reason) in history.py's words."""
    if member.member_epoch == 0 and member.member_id not in group.members:
        return "member-join", f"member {updated.member_id} joined the group"
    if asked:
        return "subscription-change", f"member {updated.member_id} changed its subscription"
    return "metadata-change", "the subscribed topics' partitions changed"


def rebalance_started(
    ctx: ShardContext, group: ConsumerGroup, cause: str, reason: str, member: ConsumerMember | None = None
) -> None:
    """The group epoch moves from `group.group_epoch` to the next (the records that say so are not replayed yet)."""
    ctx.history.start(
        group.group_id,
        cause,
        reason,
        group.group_epoch,
        ctx.now(),
        member.member_id if member is not None else None,
        member.instance_id if member is not None else None,
        group_type="consumer",
        generation=group.group_epoch + 1,
    )


def maybe_rebalance_done(
    ctx: ShardContext, group: ConsumerGroup, epoch: int, member_id: str, records: list[Record]
) -> None:
    """`member_id` is reconciled to the group's epoch `epoch`: if every other member is too, the running entry for
    that epoch is done, and the history is written with this heartbeat's records."""
    if ctx.history.current(group.group_id) is None:
        return
    if epoch == group.assignment_epoch:
        others_done = group.reconciled_besides(member_id)
    else:  # the target was computed by this heartbeat: no other member can have reached it yet
        others_done = group.members.keys() <= {member_id}
    if others_done and ctx.history.reconciled(group.group_id, epoch, ctx.now()):
        persist_history(ctx, group.group_id, records)


def persist_history(ctx: ShardContext, group_id: str, records: list[Record]) -> None:
    if ctx.history.of(group_id):
        used = sum(len(r.key) + len(r.value or b"") for r in records)
        record = ctx.history.record(group_id, ctx.config.history_batch_bytes - used)
        if record is not None:
            records.append(record)


# --- leave and fencing ---------------------------------------------------------------------------------------


def _leave(ctx: ShardContext, req: ConsumerGroupHeartbeat) -> tuple[list[Record], ConsumerGroupHeartbeatResponse]:
    """Kafka's consumerGroupLeave: -1 removes the member; -2 keeps a static member, its assignment held for it."""
    group = _consumer_group(ctx, req.group_id)
    response = ConsumerGroupHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch)
    if req.instance_id is None:
        member = group.members.get(req.member_id)
        if member is None:
            raise unknown_member(group, req.member_id)
        return fence(ctx, group, [member], "member-leave", f"member {member.member_id} left the group"), response
    member = group.static_member(req.instance_id)
    if member is None:
        raise CoordinatorError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
    if member.member_id != req.member_id:
        raise CoordinatorError(
            ErrorCode.fenced_instance_id,
            f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
            f"{member.member_id}.",
        )
    if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        log.info(
            "[GroupId %s] Static member %s with instance id %s temporarily left the consumer group.",
            group.group_id,
            member.member_id,
            req.instance_id,
        )
        leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation=EMPTY)
        return [rec.current_assignment_record(group.group_id, leaving)], ConsumerGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
        )
    reason = f"static member {member.member_id} with instance id {req.instance_id} left the group"
    return fence(ctx, group, [member], "member-leave", reason), response


def _consumer_group(ctx: ShardContext, group_id: str) -> ConsumerGroup:
    group = ctx.consumer_groups.get(group_id)
    if group is None:
        if group_id in ctx.groups or group_id in ctx.share_groups:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        raise CoordinatorError(ErrorCode.group_id_not_found, f"Consumer group {group_id} not found.")
    return group


def fence(
    ctx: ShardContext, group: ConsumerGroup, members: list[ConsumerMember], cause: str, reason: str
) -> list[Record]:
    """Kafka's consumerGroupFenceMembers: the members' records go and the group epoch moves, with the metadata
    hash of what the others still subscribe to (a rebalance of `cause` in the history; "empty" at once when no
    member remains)."""
    if not members:
        return []
    records: list[Record] = []
    if migration.may_downgrade(ctx, group, members):
        converted = Effects()
        if migration.to_classic_group(ctx, group, members, None, False, records, converted) is not None:
            forget(ctx, group)
            return records + converted.records  # a Stable group starting to rebalance answers no one yet
    gone = {m.member_id for m in members}
    for member in members:
        records.extend(rec.member_tombstones(group.group_id, member.member_id))
    leaving = Counter(m.subscribed_topic_regex for m in members if m.subscribed_topic_regex)
    subscribed = group.subscribed_regexes()
    for one, count in leaving.items():  # Kafka's maybeDeleteResolvedRegularExpressions
        if subscribed.get(one, 0) == count:
            records.append(rec.regular_expression_tombstone(group.group_id, one))
    names: set[str] = set()
    for member in group.members.values():
        if member.member_id not in gone:
            names |= group.member_topic_names(member)
    epoch = group.group_epoch + 1
    records.append(rec.group_epoch_record(group.group_id, epoch, ctx.topics.metadata_hash(names)))
    for member in members:
        cancel_timers(ctx, group.group_id, member.member_id)
    rebalance_started(ctx, group, cause, reason, members[0])
    if gone >= group.members.keys():
        ctx.history.emptied(group.group_id, ctx.now())
        persist_history(ctx, group.group_id, records)
    return records


def cancel_timers(ctx: ShardContext, group_id: str, member_id: str) -> None:
    ctx.consumer_sessions.pop((group_id, member_id), None)
    ctx.timer.cancel(session_key(group_id, member_id))
    ctx.timer.cancel(rebalance_key(group_id, member_id))
    ctx.timer.cancel(classic_sync_key(group_id, member_id))
    cancel_classic_join_timeout(ctx, group_id, member_id)


def forget(ctx: ShardContext, group: ConsumerGroup) -> None:
    """The group becomes a classic group: every timer of its members and of its regexes goes."""
    for member_id in group.members:
        cancel_timers(ctx, group.group_id, member_id)
    ctx.timer.cancel(regex_refresh_key(group.group_id))
    ctx.regex_refreshing.discard(group.group_id)


def classic_join_key(group_id: str, member_id: str) -> str:
    return f"consumer-join-timeout:{group_id}:{member_id}"


def classic_sync_key(group_id: str, member_id: str) -> str:
    return f"consumer-sync-timeout:{group_id}:{member_id}"


def cancel_classic_join_timeout(ctx: ShardContext, group_id: str, member_id: str) -> None:
    if (group_id, member_id) in ctx.classic_join_timeouts:
        ctx.classic_join_timeouts.discard((group_id, member_id))
        ctx.timer.cancel(classic_join_key(group_id, member_id))


def fence_operation(
    ctx: ShardContext,
    group_id: str,
    member_id: str,
    cause: str,
    reason: str,
    epoch: int | None = None,
    *,
    on_refused: Rollback | None = None,
) -> Result:
    """A timer's fence of one member (its session, its rebalance timeout, a classic member's join or sync timeout);
    `on_refused` runs if its records are not written (default: the member's session starts again)."""
    group = ctx.consumer_groups.get(group_id)
    member = group.members.get(member_id) if group is not None else None
    if group is None or member is None:
        return Result()
    if epoch is not None and member.member_epoch != epoch:
        return Result()  # it moved on from the epoch it had to leave in time
    log.info("[GroupId %s] Member %s fenced from the group because %s.", group_id, member_id, reason)
    records = fence(ctx, group, [member], cause, f"member {member_id} fenced: {reason}")
    rollback = on_refused if on_refused is not None else rearm_sessions(ctx, group_id, (member_id,))
    return Result(records=tuple(records), rollback=rollback)


# Kafka's CoordinatorRuntime timer retries a failed timer operation after 500 ms (EventBasedCoordinatorTimer, retry)
TIMER_RETRY_BACKOFF_MS = 500


def rearm_sessions(
    ctx: ShardContext, group_id: str, member_ids: tuple[str, ...], retry_ms: int | None = None
) -> Rollback:
    """The rollback of a fence whose records were not written: `fence` cancelled the members' timers when it ran,
    and the members are still in the group, so their sessions start again (else a member whose leave or expiry
    was refused would stay in the group for ever: the simulator's seed 138): for a whole session timeout, or for
    `retry_ms` when the fence was the session's own expiry (tried again soon, as Kafka's timer retries it; a whole
    session per refused attempt left a dead member in the group for minutes: seed 346645848)."""

    def rollback(error: ErrorCode) -> Result:
        group = ctx.consumer_groups.get(group_id)
        for member_id in member_ids:
            member = group.members.get(member_id) if group is not None else None
            if member is not None:
                own = member.classic.session_timeout_ms if member.classic else None
                arm_session(ctx, group_id, member_id, retry_ms if retry_ms is not None else own)
        return Result()

    return rollback


def heartbeat_interval_ms(ctx: ShardContext, group_id: str) -> int:
    """The group's consumer.heartbeat.interval.ms, else the broker's (GroupMetadataManager.
    consumerGroupHeartbeatIntervalMs)."""
    return kafka_group_configs.int_value(
        ctx.group_configs.get(group_id),
        kafka_group_configs.CONSUMER_HEARTBEAT_INTERVAL_MS,
        ctx.config.group_consumer_heartbeat_interval_ms,
    )


def session_timeout_ms(ctx: ShardContext, group_id: str) -> int:
    """The group's consumer.session.timeout.ms, else the broker's (consumerGroupSessionTimeoutMs)."""
    return kafka_group_configs.int_value(
        ctx.group_configs.get(group_id),
        kafka_group_configs.CONSUMER_SESSION_TIMEOUT_MS,
        ctx.config.group_consumer_session_timeout_ms,
    )


def arm_session(ctx: ShardContext, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
    """The member must be heard of within the session timeout (`timeout_ms`: a classic member's own, else the
    group's): O(1), the deadline moves and the timer is only scheduled when none is (it re-arms itself for the
    later deadline when it fires, `_session_expired`)."""
    deadline = ctx.now() + (session_timeout_ms(ctx, group_id) if timeout_ms is None else timeout_ms)
    session = ctx.consumer_sessions.get((group_id, member_id))
    if session is None:
        ctx.consumer_sessions[(group_id, member_id)] = session = [deadline, -1]
    session[0] = deadline
    if session[1] == -1:
        _schedule_session(ctx, group_id, member_id, session, deadline)


def _schedule_session(ctx: ShardContext, group_id: str, member_id: str, session: list[int], deadline: int) -> None:
    session[1] = deadline
    ctx.timer.schedule(session_key(group_id, member_id), deadline, lambda: _session_expired(ctx, group_id, member_id))


def _session_expired(ctx: ShardContext, group_id: str, member_id: str) -> Result:
    session = ctx.consumer_sessions.get((group_id, member_id))
    if session is not None:
        session[1] = -1
        if session[0] > ctx.now():  # heard of since: wait for the new deadline
            _schedule_session(ctx, group_id, member_id, session, session[0])
            return Result()
    retry = rearm_sessions(ctx, group_id, (member_id,), TIMER_RETRY_BACKOFF_MS)
    return fence_operation(ctx, group_id, member_id, "session-timeout", "the member session expired", on_refused=retry)


def _arm_rebalance_timeout(ctx: ShardContext, group_id: str, member: ConsumerMember) -> None:
    member_id, epoch, timeout = member.member_id, member.member_epoch, member.rebalance_timeout_ms
    _schedule_rebalance_timeout(ctx, group_id, member_id, epoch, timeout, ctx.now() + timeout)


def _schedule_rebalance_timeout(
    ctx: ShardContext, group_id: str, member_id: str, epoch: int, timeout: int, deadline: int
) -> None:
    """The fence of a member that has not revoked by `deadline`; tried again TIMER_RETRY_BACKOFF_MS later if its
    records are not written (its session goes on meanwhile)."""
    key = rebalance_key(group_id, member_id)
    sessions = rearm_sessions(ctx, group_id, (member_id,))

    def retry(error: ErrorCode) -> Result:
        sessions(error)
        _schedule_rebalance_timeout(ctx, group_id, member_id, epoch, timeout, ctx.now() + TIMER_RETRY_BACKOFF_MS)
        return Result()

    reason = f"it failed to transition from epoch {epoch} within {timeout}ms"
    ctx.timer.schedule(
        key,
        deadline,
        lambda: fence_operation(ctx, group_id, member_id, "rebalance-timeout", reason, epoch, on_refused=retry),
    )


def on_loaded(ctx: ShardContext) -> None:
    """After a load: every member's session, and the rebalance timeout of those with partitions to revoke."""
    for group in ctx.consumer_groups.values():
        for member in group.members.values():
            classic_timeout = member.classic.session_timeout_ms if member.classic is not None else None
            arm_session(ctx, group.group_id, member.member_id, classic_timeout)
            if member.classic is None and member.state is MemberState.UNREVOKED_PARTITIONS:
                _arm_rebalance_timeout(ctx, group.group_id, member)


def on_unloaded(ctx: ShardContext) -> None:
    for group in ctx.consumer_groups.values():
        for member_id in group.members:
            cancel_timers(ctx, group.group_id, member_id)
        ctx.timer.cancel(regex_refresh_key(group.group_id))
    ctx.consumer_groups.clear()
    ctx.consumer_sessions.clear()
    ctx.consumer_hash_checked.clear()
    ctx.regex_resolved_at.clear()
    ctx.regex_refreshing.clear()
    ctx.classic_join_timeouts.clear()


# --- ConsumerGroupDescribe -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribe:
    group_ids: tuple[str, ...]
    api_version: int = 1
    client_id: str = ""
    client_host: str = ""


def describe(ctx: ShardContext, req: ConsumerGroupDescribe, reply: object) -> Result:
    """Kafka's consumerGroupDescribe and ConsumerGroup.asDescribedGroup: GROUP_ID_NOT_FOUND for a group that is
    not a consumer group; partitions of topics the image no longer has are left out, as Kafka's
    topicPartitionsFromMap does."""
    groups = tuple(_describe_group(ctx, group_id) for group_id in req.group_ids)
    return Result(replies=(Reply(reply, ConsumerGroupDescribeResponse(groups=groups)),))


def _describe_group(ctx: ShardContext, group_id: str) -> DescribedConsumerGroup:
    group = ctx.consumer_groups.get(group_id)
    if group is None:
        message = (
            f"Group {group_id} is not a consumer group."
            if group_id in ctx.groups or group_id in ctx.share_groups
            else f"Group {group_id} not found."
        )
        return DescribedConsumerGroup(group_id=group_id, error_code=ErrorCode.group_id_not_found, error_message=message)
    names = {info.topic_id: name for name, info in ctx.topics.by_name.items()}

    def described(of: Assignment) -> tuple[DescribedTopicPartitions, ...]:
        return tuple(
            DescribedTopicPartitions(topic_id, names[topic_id], tuple(sorted(parts)))
            for topic_id, parts in sorted(of.items())
            if topic_id in names
        )

    members = tuple(
        DescribedConsumerMember(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=described(m.assigned),
            target_assignment=described(group.target(m.member_id)),
            member_type=0 if m.classic is not None else 1,
        )
        for m in group.members.values()
    )
    return DescribedConsumerGroup(
        group_id=group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.preferred_assignor(ctx.config.group_consumer_assignors[0]),
        members=members,
    )
