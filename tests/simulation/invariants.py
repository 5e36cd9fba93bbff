"""The invariants, each a small pure function, and the `Checker` that feeds them at every step.

Each `check_*` function takes plain values and returns None when the invariant holds, else a one-line
description of the violation; tests/simulation/test_simulation.py feeds each a hand-made violation. The
`Checker` keeps what they need, incrementally:

- every SyncGroup a leader got accepted, per (group, generation): its assignment, keyed by group.instance.id
  for static members (a static replacement hands the old member's assignment to the new member id) and by
  member id for dynamic ones;
- every SyncGroup answered NONE (`check_assignment_source`);
- the highest generation whose assignment was handed out, per group; the live generation per incarnation;
- a shadow `GroupCoordinatorShard` fed with each batch as it becomes durable: replaying the durable log from
  scratch, incrementally (`check_projection`, `check_offsets`);
- every OffsetCommit partition answered NONE, with the position of the durable record that carried it
  (`check_acked_commit`);
- the rebalance history of the live shard before and after every core call (`check_cause`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from herd.client import consumer_membership as cm
from herd.client import membership_messages as mm
from herd.coordinator import CoordinatorConfig, GroupCoordinatorShard, GroupState, ManualClock
from herd.coordinator import requests as rq
from herd.coordinator import responses as rs
from herd.coordinator.consumer import records as consumer_records
from herd.coordinator.consumer.assignment import Assignment
from herd.coordinator.consumer.group import ConsumerGroup
from herd.coordinator.group import ClassicGroup
from herd.coordinator.records import (
    GROUP_METADATA_KEY_TYPE,
    OFFSET_COMMIT_KEY_TYPES,
    decode_group_metadata_key,
    decode_offset_commit,
    record_type,
)
from herd.runtime.batches import decode_batches

from .runtime import Observer, Pending

if TYPE_CHECKING:
    from .sim import Simulation

Key = tuple[str, str, int]  # group, topic, partition
Projection = tuple[str, int, str | None, str | None, tuple[tuple[str, str | None, bytes], ...]]

# --- the invariants -----------------------------------------------------------------------------------


def check_assignment_source(
    group: str, generation: int, leader_maps: list[dict[str, bytes]], delivered: Mapping[str, bytes]
) -> str | None:
    """One generation's assignments come from one leader's SyncGroup and each member received exactly its
    part: some single accepted leader assignment for (group, generation) gives every member that was answered
    NONE exactly the bytes it got (no member gets another's part, nor a part from another generation or from
    a second leader's SyncGroup under a reused generation number)."""
    for leader_map in leader_maps:
        if all(leader_map.get(who, b"") == got for who, got in delivered.items()):
            return None
    return (
        f"{group} generation {generation}: the assignments handed out {dict(delivered)} match no single "
        f"leader SyncGroup accepted for that generation ({len(leader_maps)} of them: {leader_maps})"
    )


def check_generation_grows(group: str, previous: int, current: int) -> str | None:
    """Generations only grow while one coordinator incarnation serves a group that still exists."""
    if current < previous:
        return f"{group}: the generation went back from {previous} to {current} without a reload"
    return None


def check_generation_floor(group: str, live: int, handed_out: int) -> str | None:
    """A generation whose assignment was handed out was durable: no reload may bring the group back below it
    (which would let a later generation reuse its number with another assignment)."""
    if live < handed_out:
        return f"{group}: at generation {live}, below generation {handed_out} whose assignment was handed out"
    return None


def check_static_mapping(group: ClassicGroup) -> str | None:
    """A static instance maps to at most one member id, and the group's instance index agrees with its
    members both ways."""
    seen: dict[str, str] = {}
    for member in group.members.values():
        iid = member.group_instance_id
        if iid is None:
            continue
        if iid in seen:
            return f"{group.group_id}: instance {iid} is held by {seen[iid]} and {member.member_id}"
        seen[iid] = member.member_id
        if group.static_members.get(iid) != member.member_id:
            return (
                f"{group.group_id}: member {member.member_id} has instance {iid}, the index says "
                f"{group.static_members.get(iid)}"
            )
    for iid, mid in group.static_members.items():
        if seen.get(iid) != mid:
            return f"{group.group_id}: the index maps instance {iid} to {mid}, which is not a member with it"
    return None


def projection(group: ClassicGroup | None) -> Projection | None:
    """What the log records of a Stable or Empty group: state, generation, protocol, leader, members with
    their instance ids and assignments."""
    if group is None or group.state is GroupState.DEAD:
        return None
    members = tuple(sorted((m.member_id, m.group_instance_id, m.assignment) for m in group.members.values()))
    leader = group.leader_id if members else None
    return group.state.value, group.generation_id, group.protocol_name if members else None, leader, members


def check_projection(group_id: str, live: Projection | None, replayed: Projection | None) -> str | None:
    """Replaying the durable records from scratch reproduces the live group when it is Stable or Empty and
    nothing is waiting to be written."""
    if live != replayed:
        return f"{group_id}: live group {live} but replaying the durable log gives {replayed}"
    return None


def check_offsets(group_id: str, live: Mapping[object, object], replayed: Mapping[object, object]) -> str | None:
    """Replaying the durable records reproduces the live committed offsets when nothing is waiting to be
    written."""
    if dict(live) != dict(replayed):
        return f"{group_id}: live offsets {dict(live)} but replaying the durable log gives {dict(replayed)}"
    return None


def check_acked_commit(key: Key, acked: int, live: int | None) -> str | None:
    """An OffsetCommit answered NONE stays visible (after any reload) until a later durable record for the
    same partition (a commit or a deletion) replaces it."""
    if live != acked:
        return f"{key}: the commit of offset {acked} was answered NONE and nothing replaced it, live is {live}"
    return None


def check_cause(group_id: str, cause: str, allowed: frozenset[str], context: str) -> str | None:
    """No rebalance without a cause: each rebalance the core starts has a cause the event that ran explains."""
    if cause not in allowed:
        return f"{group_id}: rebalance caused by {cause!r} during {context}, which explains only {sorted(allowed)}"
    return None


def check_no_partition_given_twice(group_id: str, members: Mapping[str, tuple[Assignment, Assignment]]) -> str | None:
    """A consumer group's coordinator side (KIP-848, Kafka's CurrentAssignmentBuilder): no partition is assigned to
    two members, nor assigned to one while another still has it pending revocation. `members`: member id ->
    (assigned, pending revocation)."""
    holder: dict[tuple[object, int], str] = {}
    for member_id, (assigned, pending) in members.items():
        for topic_id, parts in [*assigned.items(), *pending.items()]:
            for partition in parts:
                other = holder.setdefault((topic_id, partition), member_id)
                if other != member_id:
                    return f"{group_id}: partition {topic_id}-{partition} is held by {other} and {member_id}"
    return None


def check_owned_once(group_id: str, owned: Mapping[str, set[object]]) -> str | None:
    """No partition is owned by two members at any instant, as the members themselves see it (each member the
    coordinator still counts: one it fenced may not have heard yet, and can no longer commit)."""
    holder: dict[object, str] = {}
    for name, partitions in owned.items():
        for partition in partitions:
            other = holder.setdefault(partition, name)
            if other != name:
                return f"{group_id}: {partition} is owned by {other} and {name} at once"
    return None


def check_epoch_grows(key: str, previous: int, current: int) -> str | None:
    """Epochs only grow: a member's epoch in the coordinator's answers (also across fencing, rejoins and
    coordinator moves), and a consumer group's epoch while one incarnation serves it."""
    if current < previous:
        return f"{key}: the epoch went back from {previous} to {current}"
    return None


def check_epoch_floor(group_id: str, live: int, answered: int) -> str | None:
    """A member epoch that was answered was durable: no reload may bring the group's epoch below it."""
    if live < answered:
        return f"{group_id}: at group epoch {live}, below member epoch {answered} which a member was given"
    return None


def consumer_projection(group: ConsumerGroup | None) -> tuple[object, ...] | None:
    """All a consumer group's records say: epochs, members (epochs, state, instance, subscription, assignment,
    pending revocation) and targets."""
    if group is None:
        return None
    members = tuple(
        sorted(
            (
                m.member_id,
                m.member_epoch,
                m.previous_member_epoch,
                m.state.name,
                m.instance_id,
                tuple(sorted(m.subscribed_topic_names)),
                m.rebalance_timeout_ms,
                m.server_assignor,
                _sorted_assignment(m.assigned),
                _sorted_assignment(m.pending_revocation),
            )
            for m in group.members.values()
        )
    )
    targets = tuple(sorted((member_id, _sorted_assignment(t)) for member_id, t in group.targets.items()))
    return group.group_epoch, group.assignment_epoch, members, targets


def _sorted_assignment(of: Assignment) -> tuple[tuple[object, tuple[int, ...]], ...]:
    return tuple(sorted((t, tuple(sorted(p))) for t, p in of.items() if p))


def check_converged(group_id: str, facts: Mapping[str, object]) -> str | None:
    """Liveness: the group is Stable (or Empty with no live member), its members are exactly the live
    members, each STABLE in the group's generation, and the partitions are assigned exactly once."""
    for name, ok in facts.items():
        if not ok:
            return f"{group_id}: not converged: {name}"
    return None


# --- the checker ----------------------------------------------------------------------------------------


class Violation(AssertionError):
    pass


class Checker(Observer):
    """Keeps the evidence and calls the invariants (see the module docstring)."""

    def __init__(self, sim: Simulation, config: CoordinatorConfig) -> None:
        self.sim = sim
        self.shadow = GroupCoordinatorShard(clock=ManualClock(0), timer=_NoTimer(), config=config)
        self.leader_maps: dict[tuple[str, int], list[dict[str, bytes]]] = {}
        self.delivered: dict[tuple[str, int], dict[str, bytes]] = {}
        self.handed_out: dict[str, int] = {}
        self.seen_generation: dict[tuple[int, str], int] = {}
        self.writes: dict[Key, list[tuple[int, int | None]]] = {}  # durable writes: (batch index, offset)
        self.acked: dict[Key, tuple[int, int]] = {}  # (batch index, offset) answered NONE
        self.rebalances = 0
        self.causes: dict[str, int] = {}
        self.version = 0  # bumped by whatever may change the coordinator's state; `step` skips if unchanged
        self._checked: object = -1
        self._projections: dict[str, Projection | None] = {}  # the shadow's, until the next durable batch
        self._consumer_projections: dict[str, tuple[object, ...] | None] = {}
        # consumer groups (KIP-848)
        self.consumer_ids = [spec.group_id for spec in sim.specs if spec.protocol == "consumer"]
        self.member_epochs: dict[tuple[str, str], int] = {}  # (group, member id) -> the last epoch answered
        self.answered_epoch: dict[str, int] = {}  # group -> the highest member epoch answered
        self.seen_epoch: dict[tuple[int, str], int] = {}  # (incarnation, group) -> its group epoch
        self.owned_version = 0  # bumped when a member takes partitions
        self._owned_checked = -1

    def fail(self, message: str | None) -> None:
        if message is not None:
            raise Violation(message)

    # -- runtime hooks ---------------------------------------------------------------------------------

    def core_call(self, shard: GroupCoordinatorShard, kind: str, detail: object) -> Callable[[], None]:
        # A history only appends (dropping its oldest) or is replaced whole: it has new entries iff its last
        # entry is another object, and they are the ones after the old last (all of them if that is gone).
        last = shard.history.last
        group_ids = self.sim.group_ids
        before = [last(g) for g in group_ids]
        facts = _join_facts(shard, detail) if kind == "join_group" else None

        def after() -> None:
            if kind != "heartbeat":
                self.version += 1  # a heartbeat moves a session deadline, nothing the checks read
            for group_id, old in zip(group_ids, before, strict=True):
                if last(group_id) is old:
                    continue
                history = shard.rebalance_history(group_id)
                start = next((i + 1 for i in range(len(history) - 1, -1, -1) if history[i] is old), 0)
                for i in range(start, len(history)):
                    entry = history[i]
                    self.rebalances += 1
                    self.causes[entry.cause] = self.causes.get(entry.cause, 0) + 1
                    allowed = self.sim.explained_causes(kind, detail, facts, entry, history[i - 1] if i else None)
                    self.fail(check_cause(group_id, entry.cause, allowed, f"{kind} {detail!r}"[:300]))
            if kind == "sync_group":
                self._leader_sync(shard, detail)

        return after

    def _leader_sync(self, shard: GroupCoordinatorShard, request: object) -> None:
        assert isinstance(request, mm.SyncGroupRequest)
        group = shard.group(request.group_id)
        if (
            group is None
            or group.generation_id != request.generation_id
            or group.state is not GroupState.STABLE
            or group.leader_id != request.member_id
            or not request.assignments
            and group.members
        ):
            return
        given = dict(request.assignments)
        leader_map = {
            _who(m.member_id, m.group_instance_id): given.get(m.member_id, b"") for m in group.members.values()
        }
        self.leader_maps.setdefault((request.group_id, request.generation_id), []).append(leader_map)

    def durable(self, batch: bytes, entries: list[Pending]) -> None:
        index = len(self.sim.host.durable) - 1
        self.version += 1
        self._projections.clear()
        self._consumer_projections.clear()
        for _, records in decode_batches(batch):
            self.shadow.replay_loaded_batch(records)
            for key, value in records:
                self._note_record(index, key, value)

    def _note_record(self, index: int, key: bytes, value: bytes | None) -> None:
        kind = record_type(key)
        if kind in OFFSET_COMMIT_KEY_TYPES:
            group, topic, partition, offset = decode_offset_commit(key, value)
            self.writes.setdefault((group, topic, partition), []).append(
                (index, None if offset is None else offset.offset)
            )
        if kind == consumer_records.GROUP_METADATA and value is None:  # a consumer group deleted: epochs from 0
            group = consumer_records.decode(kind, key, value).group_id
            self.answered_epoch.pop(group, None)
            for k in [k for k in self.member_epochs if k[0] == group]:
                del self.member_epochs[k]
        if kind == GROUP_METADATA_KEY_TYPE and value is None:
            group = decode_group_metadata_key(key).group  # deleted: its generations start again from 0
            self.handed_out.pop(group, None)
            for k in [k for k in self.leader_maps if k[0] == group]:
                del self.leader_maps[k]
                self.delivered.pop(k, None)

    def loaded(self, shard: GroupCoordinatorShard) -> None:
        self.version += 1

    # -- answers ---------------------------------------------------------------------------------------

    def answered(self, request: object, response: object) -> None:
        """Every answer the server sends, before it travels."""
        if isinstance(request, mm.SyncGroupRequest) and isinstance(response, mm.SyncGroupResponse):
            if response.error_code == 0:
                self._sync_delivered(request, response.assignment)
        elif isinstance(request, rq.OffsetCommit):
            self.commit_answered(request, response)
        elif isinstance(request, cm.ConsumerGroupHeartbeatRequest):
            assert isinstance(response, cm.ConsumerGroupHeartbeatResponse)
            if response.error_code == 0 and response.member_epoch > 0:
                self._epoch_answered(request.group_id, response.member_id or request.member_id, response.member_epoch)

    def _epoch_answered(self, group_id: str, member_id: str, epoch: int) -> None:
        key = (group_id, member_id)
        self.fail(check_epoch_grows(f"{group_id} member {member_id}", self.member_epochs.get(key, 0), epoch))
        self.member_epochs[key] = epoch
        self.answered_epoch[group_id] = max(self.answered_epoch.get(group_id, 0), epoch)

    def owned_changed(self) -> None:
        self.owned_version += 1

    def _sync_delivered(self, request: mm.SyncGroupRequest, assignment: bytes) -> None:
        key = (request.group_id, request.generation_id)
        delivered = self.delivered.setdefault(key, {})
        delivered[_who(request.member_id, request.group_instance_id)] = assignment
        self.fail(
            check_assignment_source(request.group_id, request.generation_id, self.leader_maps.get(key, []), delivered)
        )
        if request.generation_id > self.handed_out.get(request.group_id, 0):
            self.handed_out[request.group_id] = request.generation_id

    def commit_answered(self, request: rq.OffsetCommit, response: object) -> None:
        assert isinstance(response, rs.OffsetCommitResponse)
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code == 0:
                    self._commit_acked(request, (request.group_id, topic.name, part.partition_index))

    def _commit_acked(self, request: rq.OffsetCommit, key: Key) -> None:
        offset = next(
            p.committed_offset
            for t in request.topics
            if t.name == key[1]
            for p in t.partitions
            if p.partition_index == key[2]
        )
        index = max((i for i, o in self.writes.get(key, ()) if o == offset), default=None)
        if index is None:
            self.fail(f"{key}: the commit of offset {offset} was answered NONE before it was durable")
            return
        if index >= self.acked.get(key, (-1, 0))[0]:
            self.acked[key] = (index, offset)

    # -- every step ------------------------------------------------------------------------------------

    def step(self) -> None:
        incarnation = self.sim.host.current
        if self.consumer_ids and incarnation.state.value == "active":
            self.check_owned(incarnation.shard)
        version = (self.version, incarnation.number, incarnation.state, incarnation.pending)
        if version == self._checked:
            return  # nothing that could change the coordinator's state ran since the last check
        self._checked = version
        shard = incarnation.shard
        active = incarnation.state.value == "active"
        for group_id in self.sim.group_ids:
            group = shard.group(group_id)
            if group is None:
                if self.seen_generation.pop((incarnation.number, group_id), None) is not None and active:
                    # Deleted here (by an admin, or expired): its generations start again from 0 at once, before
                    # its tombstone is durable, and a request may make it anew first (seed 229280004).
                    self.handed_out.pop(group_id, None)
                continue
            self.fail(check_static_mapping(group))
            if not active:
                continue
            seen = (incarnation.number, group_id)
            self.fail(check_generation_grows(group_id, self.seen_generation.get(seen, 0), group.generation_id))
            self.seen_generation[seen] = group.generation_id
            self.fail(check_generation_floor(group_id, group.generation_id, self.handed_out.get(group_id, 0)))
        if active:
            self._consumer_checks(incarnation.number, shard)
        if active and not incarnation.pending:
            self._idle_checks(shard)

    def _consumer_checks(self, incarnation: int, shard: GroupCoordinatorShard) -> None:
        for group_id in self.consumer_ids:
            group = shard.consumer_group(group_id)
            if group is None:
                self.seen_epoch.pop((incarnation, group_id), None)
                continue
            self.fail(
                check_no_partition_given_twice(
                    group_id, {m.member_id: (m.assigned, m.pending_revocation) for m in group.members.values()}
                )
            )
            seen = (incarnation, group_id)
            self.fail(check_epoch_grows(f"group {group_id}", self.seen_epoch.get(seen, 0), group.group_epoch))
            self.seen_epoch[seen] = group.group_epoch
            self.fail(check_epoch_floor(group_id, group.group_epoch, self.answered_epoch.get(group_id, 0)))
        self._owned_checked = -1  # the coordinator's members may have changed: check the members' view again
        self.check_owned(shard)

    def check_owned(self, shard: GroupCoordinatorShard) -> None:
        """`check_owned_once` over the members the coordinator counts, whenever a member took partitions."""
        if self._owned_checked == self.owned_version:
            return
        self._owned_checked = self.owned_version
        for group_id in self.consumer_ids:
            group = shard.consumer_group(group_id)
            if group is None:
                continue
            owned = {
                m.name: m.owned()
                for m in self.sim.members
                if m.spec.group_id == group_id and m.machine is not None and m.machine.member_id in group.members
            }
            self.fail(check_owned_once(group_id, owned))

    def _idle_checks(self, shard: GroupCoordinatorShard) -> None:
        offsets: dict[str, dict[tuple[str, int], object]] = {}
        for group_id in self.sim.group_ids:
            live = shard.group(group_id)
            if live is None or live.state in (GroupState.STABLE, GroupState.EMPTY):
                self.fail(check_projection(group_id, projection(live), self._replayed(group_id)))
            if group_id in self.consumer_ids:
                key = f"consumer:{group_id}"  # the shadow's, cached until the next durable batch as the classic one
                if key not in self._consumer_projections:
                    self._consumer_projections[key] = consumer_projection(self.shadow.consumer_group(group_id))
                live_projection = consumer_projection(shard.consumer_group(group_id))
                self.fail(check_projection(group_id, live_projection, self._consumer_projections[key]))  # type: ignore[arg-type]
            offsets[group_id] = shard.committed_offsets(group_id)
            self.fail(check_offsets(group_id, offsets[group_id], self.shadow.committed_offsets(group_id)))
        for key, (index, offset) in self.acked.items():
            if self.writes[key][-1][0] == index:
                group_offsets = offsets.get(key[0])
                if group_offsets is None:
                    group_offsets = offsets[key[0]] = shard.committed_offsets(key[0])
                value = group_offsets.get((key[1], key[2]))
                self.fail(check_acked_commit(key, offset, getattr(value, "offset", None)))

    def _replayed(self, group_id: str) -> Projection | None:
        """The shadow's projection of the group; the shadow changes only when a batch becomes durable."""
        if group_id not in self._projections:
            self._projections[group_id] = projection(self.shadow.group(group_id))
        return self._projections[group_id]


def _who(member_id: str, instance_id: str | None) -> str:
    return f"instance:{instance_id}" if instance_id is not None else member_id


def _join_facts(shard: GroupCoordinatorShard, request: object) -> dict[str, bool]:
    """What a JoinGroup may legitimately cause, from the group as it was before the call."""
    assert isinstance(request, mm.JoinGroupRequest)
    group = shard.group(request.group_id)
    member = group.members.get(request.member_id) if group is not None else None
    static_id = group.static_member_id(request.group_instance_id) if group is not None else None
    protocols = tuple((p.name, p.metadata) for p in member.protocols) if member is not None else None
    return {
        "new": member is None and static_id is None,
        "leader": member is not None and group is not None and group.leader_id == member.member_id,
        "metadata": member is not None and protocols != tuple(request.protocols),
        "static": static_id is not None and static_id != request.member_id,
    }


class _NoTimer:
    """The shadow shard only replays; it never runs timers."""

    def schedule(self, key: str, deadline_ms: int, operation: object) -> None:
        return None

    def cancel(self, key: str) -> None:
        return None
