"""ShareGroupHeartbeat (KIP-932) in the pure core: a member joins, heartbeats and leaves a share group, and the
group's target assignment follows (Kafka 4.2's GroupMetadataManager.shareGroupHeartbeat, shareGroupLeave,
shareGroupFenceMember and maybeCreateInitializeShareGroupStateRequest; GroupCoordinatorService.
throwIfShareGroupHeartbeatRequestIsInvalid).

`heartbeat(view, req, now_ms)` returns an `Outcome`: the records to write (the group changes when they are replayed,
herd.coordinator.share.group.replay), the answer, whether the member's session must be (re)armed, and the share
partitions whose state must be initialized before they can be assigned. `initialized` and `uninitialized` are the
records that say how that initialization went; `fence` is a leave for a member whose session expired.

The flow, as Kafka's:
1. validation (INVALID_REQUEST with Kafka's messages); a group id of another type is GROUP_ID_NOT_FOUND ("Group %s
   is not a share group."), so is an unknown group at an epoch other than 0; a full group (group.share.max.size)
   is GROUP_MAX_SIZE_REACHED for any member it does not have, checked before the member is looked up;
2. the member: epoch 0 joins or rejoins (always accepted); a greater epoch than the group's is FENCED_MEMBER_EPOCH,
   a smaller one only if it is the member's previous epoch; its rack, subscription and client are updated (record
   10 when any changed);
3. the group epoch is bumped (record 11) when a subscription changed, the metadata hash of the subscribed topics
   changed, or partitions initialized since are not in the target assignment yet;
4. a new target assignment (`simple`, only initialized partitions assignable) when the group epoch is ahead of the
   assignment epoch: record 13 per member whose target changed, then 12;
5. the member takes its target at once (its epoch becomes the assignment epoch; record 14);
6. the subscribed partitions whose state is neither initialized nor being initialized (or whose initialization
   started longer than group.share.initialize.retry.interval.ms ago) are marked initializing (record 15) and
   returned for the caller to initialize.
The answer carries the assignment when the member joined, sent its subscription, or its assignment changed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from herd.coordinator.consumer.assignment import EMPTY, Assignment
from herd.coordinator.consumer.assignors import AssignorError, MemberSpec
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.errors import CoordinatorError, ErrorCode
from herd.coordinator.records import Record
from herd.coordinator.share import records as rec
from herd.coordinator.share.assignor import SimpleAssignor
from herd.coordinator.share.group import ShareGroup, ShareMember

LEAVE_GROUP_MEMBER_EPOCH = -1
_ASSIGNOR = SimpleAssignor()


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The broker's share-group settings a heartbeat reads (Kafka's GroupCoordinatorConfig), and a group's own
    overrides of the session and interval (share.session.timeout.ms, share.heartbeat.interval.ms)."""

    max_size: int = 200
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    initialize_retry_interval_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse:
    error_code: int = ErrorCode.none
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    records: tuple[Record, ...] = ()
    response: ShareHeartbeatResponse = field(default_factory=ShareHeartbeatResponse)
    arm_session: bool = False  # (re)arm the member's session timer; a leave cancels it
    initialize: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)  # share partitions to initialize


@dataclass(frozen=True, slots=True)
class ShareView:
    """What a share-group heartbeat reads of the shard: its share groups, whether a group of another type has the
    id, the topics, the settings."""

    groups: Mapping[str, ShareGroup]
    other_type: Callable[[str], bool]
    topics: TopicsImage
    settings: ShareSettings = ShareSettings()


def validate(req: ShareGroupHeartbeat) -> None:
    """GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid."""

    def invalid(message: str) -> CoordinatorError:
        return CoordinatorError(ErrorCode.invalid_request, message)

    if not req.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if not req.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if req.member_epoch == 0 and not req.subscribed_topic_names:
        raise invalid("SubscribedTopicNames must be set in first request.")
    if req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")


def heartbeat(view: ShareView, req: ShareGroupHeartbeat, now_ms: int) -> Outcome:
    """The records, answer and follow-ups of one ShareGroupHeartbeat; an error answer and nothing else when it is
    refused."""
    try:
        validate(req)
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            group = _group(view, req.group_id, create=False, missing=f"Group {req.group_id} not found.")
            if req.member_id not in group.members:
                raise CoordinatorError(
                    ErrorCode.unknown_member_id, f"Member {req.member_id} is not a member of group {req.group_id}."
                )
            records = _fence_records(view.topics, group, req.member_id)
            response = ShareHeartbeatResponse(member_id=req.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
            return Outcome(records, response)
        return _heartbeat(view, req, now_ms)
    except CoordinatorError as error:
        return Outcome(response=ShareHeartbeatResponse(error_code=error.code, error_message=error.message or None))


def fence(view: ShareView, group_id: str, member_id: str) -> tuple[Record, ...]:
    """The records of a member whose session expired (shareGroupFenceMemberOperation): as a leave; nothing if the
    member or its group is gone already."""
    group = view.groups.get(group_id)
    if group is None or member_id not in group.members:
        return ()
    return _fence_records(view.topics, group, member_id)


def _fence_records(topics: TopicsImage, group: ShareGroup, member_id: str) -> tuple[Record, ...]:
    metadata_hash = topics.metadata_hash(group.subscribed_topic_names(leaving=member_id))
    return (
        *rec.member_tombstones(group.group_id, member_id),
        rec.group_epoch_record(group.group_id, group.group_epoch + 1, metadata_hash),
    )


def _group(view: ShareView, group_id: str, *, create: bool, missing: str) -> ShareGroup:
    """The share group `group_id`; a new one if `create`; GROUP_ID_NOT_FOUND if a group of another type has the
    id, or with `missing` if there is none."""
    group = view.groups.get(group_id)
    if group is not None:
        return group
    if view.other_type(group_id):
        raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
    if not create:
        raise CoordinatorError(ErrorCode.group_id_not_found, missing)
    return ShareGroup(group_id)


def _heartbeat(view: ShareView, req: ShareGroupHeartbeat, now_ms: int) -> Outcome:
    group_id, member_id, epoch = req.group_id, req.member_id, req.member_epoch
    group = _group(view, group_id, create=epoch == 0, missing=f"Share group {group_id} not found.")
    settings = view.settings
    if len(group.members) >= settings.max_size and member_id not in group.members:
        raise CoordinatorError(
            ErrorCode.group_max_size_reached,
            f"The share group has reached its maximum capacity of {settings.max_size} members.",
        )
    member = group.members.get(member_id)
    if member is None:
        if epoch != 0:
            raise CoordinatorError(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group_id}."
            )
        member = ShareMember(member_id)
    elif epoch > member.member_epoch:
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The share group member has a greater member epoch ({epoch}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    elif 0 < epoch < member.member_epoch and epoch != member.previous_member_epoch:
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The share group member has a smaller member epoch ({epoch}) than the one known by the group "
            f"coordinator ({member.member_epoch}) and it does not match the previous member epoch "
            f"({member.previous_member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    records: list[Record] = []
    updated = replace(
        member,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        subscribed_topic_names=(
            frozenset(req.subscribed_topic_names)
            if req.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        client_id=req.client_id,
        client_host=req.client_host,
    )
    # a new member always differs from its blank self: validation makes a join carry a subscription
    subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
    if updated != member:
        records.append(
            rec.member_subscription_record(
                group_id,
                member_id,
                updated.rack_id,
                updated.client_id,
                updated.client_host,
                updated.subscribed_topic_names,
            )
        )

    # the group epoch
    topics = view.topics
    names = group.subscribed_topic_names(replacing=updated)
    group_epoch = group.group_epoch
    bump = subscription_changed or _initialized_assignment_pending(group, names, topics)
    metadata_hash = topics.metadata_hash(names)
    if bump or metadata_hash != group.metadata_hash:
        group_epoch += 1
        records.append(rec.group_epoch_record(group_id, group_epoch, metadata_hash))
        bump = True

    # the target assignment
    target_epoch = group.assignment_epoch
    targets = dict(group.targets)
    if group_epoch > group.assignment_epoch:
        members = {**group.members, member_id: updated}
        initialized = group.state_metadata.initialized if group.state_metadata is not None else {}
        specs = [
            MemberSpec(m.member_id, topics.ids(m.subscribed_topic_names), group.target(m.member_id))
            for m in sorted(members.values(), key=lambda m: m.member_id)
        ]
        try:
            new = _ASSIGNOR.assign(
                specs,
                topics.partition_counts(names),
                assignable=lambda topic_id, p: topic_id in initialized and p in initialized[topic_id].partitions,
            )
        except AssignorError as error:
            raise CoordinatorError(
                ErrorCode.unknown_server_error,
                f"Failed to compute a new target assignment for epoch {group_epoch}: {error}",
            ) from error
        for mid, assigned in new.items():
            if mid not in group.targets or dict(group.targets[mid]) != dict(assigned):
                records.append(rec.target_assignment_record(group_id, mid, assigned))
            targets[mid] = assigned
        records.append(rec.target_assignment_epoch_record(group_id, group_epoch))
        target_epoch = group_epoch

    # the member takes its target
    subscribed_ids = topics.ids(updated.subscribed_topic_names)
    target = {t: p for t, p in targets.get(member_id, EMPTY).items() if t in subscribed_ids}
    reconciled = updated
    if bump or updated.member_epoch != target_epoch:
        if target_epoch != updated.member_epoch:
            reconciled = replace(updated, member_epoch=target_epoch, previous_member_epoch=updated.member_epoch)
        reconciled = replace(reconciled, assigned=target)
    assignment_changed = dict(reconciled.assigned) != dict(member.assigned)
    epochs_changed = (reconciled.member_epoch, reconciled.previous_member_epoch) != (
        member.member_epoch,
        member.previous_member_epoch,
    )
    if epochs_changed or assignment_changed:  # a new member's epoch moves from 0 to the target's
        records.append(
            rec.current_assignment_record(
                group_id, member_id, reconciled.member_epoch, reconciled.previous_member_epoch, reconciled.assigned
            )
        )

    # share state to initialize
    initialize, metadata_record = _to_initialize(group, names, topics, settings, now_ms)
    if metadata_record is not None:
        records.append(metadata_record)

    send_assignment = epoch == 0 or req.subscribed_topic_names is not None or assignment_changed
    response = ShareHeartbeatResponse(
        member_id=member_id,
        member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        assignment=reconciled.assigned if send_assignment else None,
    )
    return Outcome(tuple(records), response, arm_session=True, initialize=initialize)


def _initialized_assignment_pending(group: ShareGroup, names: Mapping[str, int], topics: TopicsImage) -> bool:
    """initializedAssignmentPending: partitions of subscribed topics initialized since the target was computed."""
    metadata = group.state_metadata
    if not group.members or metadata is None or not metadata.initialized or not names:
        return False
    assigned: dict[uuid.UUID, set[int]] = {}
    for target in group.targets.values():
        for topic_id, parts in target.items():
            assigned.setdefault(topic_id, set()).update(parts)
    subscribed = topics.ids(names)
    return any(
        topic_id in subscribed and set(topic.partitions) != assigned.get(topic_id, set())
        for topic_id, topic in metadata.initialized.items()
    )


def _to_initialize(
    group: ShareGroup, names: Mapping[str, int], topics: TopicsImage, settings: ShareSettings, now_ms: int
) -> tuple[dict[uuid.UUID, frozenset[int]], Record | None]:
    """maybeCreateInitializeShareGroupStateRequest: the subscribed partitions to initialize (neither initialized
    nor being initialized within the retry interval), and the record 15 that marks them initializing."""
    if not names or not topics.by_name:
        return {}, None
    metadata = group.state_metadata or rec.StateMetadata()
    wanted: dict[uuid.UUID, frozenset[int]] = {}
    for name in sorted(names):
        info = topics.by_name.get(name)
        if info is None:
            continue
        ready = metadata.initialized.get(info.topic_id)
        done = set(ready.partitions) if ready is not None else set()
        pending = metadata.initializing.get(info.topic_id)
        if pending is not None and now_ms - pending.timestamp < settings.initialize_retry_interval_ms:
            done |= pending.partitions
        missing = frozenset(range(info.partitions)) - done
        if missing:
            wanted[info.topic_id] = missing
    if not wanted:
        return {}, None
    initializing = dict(metadata.initializing)
    for topic_id, parts in wanted.items():
        old = initializing.get(topic_id)
        name = topics.by_id[topic_id].name
        initializing[topic_id] = rec.TopicState(name, (old.partitions if old else frozenset()) | parts, now_ms)
    deleting = {t: n for t, n in metadata.deleting.items() if t not in wanted}
    updated = rec.StateMetadata(initializing=initializing, initialized=metadata.initialized, deleting=deleting)
    return wanted, rec.state_metadata_record(group.group_id, updated)


def initialized(group: ShareGroup, done: Mapping[uuid.UUID, frozenset[int]], topics: TopicsImage) -> Record:
    """The record 15 once the share state of `done` is initialized: they move from initializing to initialized
    (GroupMetadataManager.initializeShareGroupState)."""
    metadata = group.state_metadata or rec.StateMetadata()
    initialized_ = dict(metadata.initialized)
    for topic_id, parts in done.items():
        name = topics.by_id[topic_id].name if topic_id in topics.by_id else ""
        old = initialized_.get(topic_id)
        initialized_[topic_id] = rec.TopicState(name, (old.partitions if old else frozenset()) | parts, 0)
    initializing = _without(metadata.initializing, done)
    return rec.state_metadata_record(
        group.group_id,
        rec.StateMetadata(initializing=initializing, initialized=initialized_, deleting=metadata.deleting),
    )


def uninitialized(group: ShareGroup, failed: Mapping[uuid.UUID, frozenset[int]]) -> Record:
    """The record 15 when initializing `failed` did not work: they leave initializing, and the next heartbeat
    asks again (uninitializeShareGroupState)."""
    metadata = group.state_metadata or rec.StateMetadata()
    return rec.state_metadata_record(
        group.group_id, replace(metadata, initializing=_without(metadata.initializing, failed))
    )


def _without(
    topics: Mapping[uuid.UUID, rec.TopicState], parts: Mapping[uuid.UUID, frozenset[int]]
) -> dict[uuid.UUID, rec.TopicState]:
    """`topics` without `parts` (a topic left with no partition goes)."""
    out = dict(topics)
    for topic_id, gone in parts.items():
        topic = out.get(topic_id)
        if topic is None:
            continue
        remaining = topic.partitions - gone
        if remaining:
            out[topic_id] = topic._replace(partitions=remaining)
        else:
            del out[topic_id]
    return out
