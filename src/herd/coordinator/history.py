"""Per-group rebalance history: why each rebalance started, how its phases went, who was late or dropped.

Every rebalance of a classic group is one `Rebalance` entry, opened when the group enters PreparingRebalance
(`start`, from rebalance.prepare_rebalance) and closed when a generation is Stable (the leader's SyncGroup,
`finish`), when the join phase leaves the group Empty (`join_completed`), or when another rebalance supersedes
it (outcome "superseded-by-<cause>"). Between the two: every member's JoinGroup arrival (`arrived`; the first
one counts when a member sends several), the end of the join phase (the generation it produced, its protocol,
leader and members, each with its arrival relative to the first member's; how the phase ended), the members
removed for missing the join phase or the sync phase (`dropped`), and after the sync each member's assignment
size (the partition count of its ConsumerProtocolAssignment when the protocol type is "consumer", else null).
Each group keeps its last `size` entries (the coordinator config `rebalance_history_size`, the broker setting
`herd.group.rebalance.history.size`); with 0 it keeps none and writes no record, but the running entry is still
followed for the observer.

Causes (stable kebab-case names; `reason` keeps Kafka's log words and the client's KIP-800 reason):
- member-join: a new member joined (JoinGroup without a member id, or with the id KIP-394 handed out), dynamic,
  or static with an instance id the group does not know; `member_id` names it.
- leader-rejoin: the leader sent JoinGroup while Stable (a client asking for a new assignment: its metadata of
  the subscribed topics changed, or enforceRebalance).
- protocol-change: a member rejoined with different protocols or metadata (e.g. its subscription changed).
- member-leave: a member left (LeaveGroup), with its KIP-800 reason.
- admin-removal: members removed by an admin tool: LeaveGroup v3+ naming a group.instance.id without a member
  id (KIP-345), or carrying the reason Kafka's admin client sends ("member was removed by an admin", KIP-800;
  apache/kafka clients/.../admin/KafkaAdminClient.java DEFAULT_LEAVE_GROUP_REASON).
- session-timeout: `member_id`'s session expired; new-member-join-timeout: a new member's session ran out
  before its first join phase ended (KAFKA-7610).
- sync-timeout: members never sent SyncGroup within the rebalance timeout (KAFKA-12890); they are the previous
  entry's `dropped` (phase "sync").
- static-member-replaced: a static member came back with a new member id (KIP-345) while the group was
  CompletingRebalance (KAFKA-9801), or with a change of the group's protocol while Stable. (A replacement in
  Stable without a protocol change is no rebalance and no entry.)
- expected-members-complete: KIP-469: the last missing pre-registered instance joined a group holding the
  others (preregistration.py); expected-members-withdrawn: the operator withdrew the missing ones of a hold;
  expected-members-timeout: the hold ended at the rebalance timeout without them.
- coordinator-moved: the first rebalance since the group was loaded on this coordinator (a coordinator move or
  a restart), started within the group's rebalance timeout of the load by a member of the loaded generation
  rejoining (what would otherwise be leader-rejoin or protocol-change; `reason` keeps which): the member was
  rebalancing when the coordinator moved, and the join state is not persisted (as in Kafka).
- over-capacity: loaded with more members than group.max.size (Kafka's words).
- append-failure: the generation's assignment could not be written; that generation's entry is
  superseded-by-append-failure.
How a join phase ended is `join_end`, not a cause: "all-joined", "rebalance-timeout" (the join timer: members
that had not rejoined are dropped, phase "join"), "initial-delay" (KIP-134, an Empty group's first
rebalance), "expected-member-arrived" (KIP-469's last arrival ended it), "config-change" (the operator
withdrew the pre-registrations it waited for). A session that expires during the join phase drops the member
(phase "join"); one that expires while the generation awaits its SyncGroups drops it (phase "sync") and starts
a session-timeout rebalance.

KIP-848 consumer groups (consumer_heartbeat.py) have no join and sync phases: an entry is a bump of the group
epoch (`start` with group_type "consumer"; `from_generation` the epoch before, `generation` the new one), its
"join phase" the computation of the new target assignment (`assigned`: join_end "target-assignment", `protocol`
the server-side assignor, each member with the partitions of its target), and it is "stable" when every member has
reconciled to the epoch (`reconciled`: `sync_ms` is how long reconciliation took), "empty" when the last member
went (`emptied`), or superseded by the next bump. Causes: member-join (a member's first heartbeat), member-leave
(a leave heartbeat, epoch -1, or a static member's -1), session-timeout and rebalance-timeout (fenced: silent, or
not revoking in time), subscription-change (its topic names or regex), regex-match (a refresh found other
topics), metadata-change (the subscribed topics' partitions changed). Its record is written with the heartbeat or
the fencing that closes it.

Persistence: the whole list of a group is one record of herd's type 0x7E01 (records.py), written with
`applied=True` in the Result that already writes the group's GroupMetadata when an entry closes (the leader's
SyncGroup, the group becoming Empty), so it costs no extra write; a tombstone goes with the group's GroupMetadata
tombstone (deletion, expiry). That batch must stay under message.max.bytes: the record leaves out its oldest
entries (or is not written that time) when the batch's other records leave it less than its size of the
coordinator config `history_batch_bytes`. Loading replays it (`load`). An entry still running when its coordinator moves
is
lost with the join state; the next one says coordinator-moved. Each entry keeps at most MAX_MEMBERS members,
MAX_LATE late and MAX_DROPPED dropped ones (`members_total` counts them all), reasons are cut at MAX_REASON
characters, and the oldest entries are dropped while the record would exceed MAX_RECORD_BYTES.

`observer` (set by the runtime for metrics) is called with (event, group id, entry) for "started", "joined"
(the join phase ended) and "completed" (the outcome is set); an exception it raises is logged, never raised
into the coordinator.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from kio.static.primitive import i32, i64

from herd.coordinator import records

log = logging.getLogger(__name__)

MAX_MEMBERS = 100
MAX_LATE = 20
MAX_DROPPED = 100
MAX_REASON = 500
MAX_RECORD_BYTES = 256 * 1024
ADMIN_REASON = "member was removed by an admin"
"""Kafka's admin client's LeaveGroup reason (KafkaAdminClient.DEFAULT_LEAVE_GROUP_REASON)."""
_MOVED_FROM = frozenset({"leader-rejoin", "protocol-change"})
CONSUMER_JOIN_END = "target-assignment"
"""The join_end of every consumer-group entry (how the record tells them from classic ones)."""

Observer = Callable[[str, str, "Rebalance"], None]


@dataclass(slots=True)
class MemberEntry:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    joined_after_ms: int | None
    """Its JoinGroup arrived this long after the first member's; None: a static member kept without rejoining."""
    partitions: int | None = None


@dataclass(slots=True)
class LateMember:
    member_id: str
    group_instance_id: str | None
    after_ms: int


@dataclass(slots=True)
class DroppedMember:
    member_id: str
    group_instance_id: str | None
    phase: str
    """"join" or "sync": the phase it missed."""


@dataclass(slots=True)
class Rebalance:
    cause: str
    reason: str
    from_generation: int
    started_ms: int
    member_id: str | None = None
    group_instance_id: str | None = None
    generation: int | None = None
    join_completed_ms: int | None = None
    completed_ms: int | None = None
    protocol: str | None = None
    leader: str | None = None
    join_end: str | None = None
    members: list[MemberEntry] = field(default_factory=list)
    members_total: int = 0
    late: list[LateMember] = field(default_factory=list)
    dropped: list[DroppedMember] = field(default_factory=list)
    outcome: str | None = None
    """None while running; "stable", "empty", or "superseded-by-<cause>"."""
    group_type: str = "classic"
    """"classic", or "consumer" for a KIP-848 group's epoch bump (join_end "target-assignment"; see below)."""

    @property
    def join_ms(self) -> int | None:
        return None if self.join_completed_ms is None else self.join_completed_ms - self.started_ms

    @property
    def sync_ms(self) -> int | None:
        if self.join_completed_ms is None or self.completed_ms is None or self.outcome == "empty":
            return None
        return self.completed_ms - self.join_completed_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "group_type": self.group_type,
            "generation": self.generation,
            "from_generation": self.from_generation,
            "cause": self.cause,
            "reason": self.reason,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "started_ms": self.started_ms,
            "join_completed_ms": self.join_completed_ms,
            "completed_ms": self.completed_ms,
            "join_ms": self.join_ms,
            "sync_ms": self.sync_ms,
            "join_end": self.join_end,
            "protocol": self.protocol,
            "leader": self.leader,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "joined_after_ms": m.joined_after_ms,
                    "partitions": m.partitions,
                }
                for m in self.members
            ],
            "members_total": self.members_total,
            "late": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "after_ms": m.after_ms}
                for m in self.late
            ],
            "dropped": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "phase": m.phase}
                for m in self.dropped
            ],
            "outcome": self.outcome,
        }


class RebalanceHistory:
    """The entries of every group of one shard (see the module docstring)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.observer: Observer | None = None
        self._by_group: dict[str, deque[Rebalance]] = {}
        self._arrivals: dict[str, dict[str, int]] = {}
        self._loaded: dict[str, int] = {}  # group id -> until when its next rebalance may be coordinator-moved

    # --- reading -------------------------------------------------------------------------------

    def of(self, group_id: str) -> tuple[Rebalance, ...]:
        return tuple(self._by_group.get(group_id, ())) if self.size > 0 else ()

    def current(self, group_id: str) -> Rebalance | None:
        entries = self._by_group.get(group_id)
        if entries and entries[-1].outcome is None:
            return entries[-1]
        return None

    def last(self, group_id: str) -> Rebalance | None:
        entries = self._by_group.get(group_id)
        return entries[-1] if entries else None

    # --- the life of an entry ------------------------------------------------------------------

    def start(
        self,
        group_id: str,
        cause: str,
        reason: str,
        from_generation: int,
        now_ms: int,
        member_id: str | None = None,
        instance_id: str | None = None,
        group_type: str = "classic",
        generation: int | None = None,
    ) -> Rebalance:
        """A rebalance starts; a running one is superseded by it. (`generation`: a consumer group's new epoch.)"""
        loaded_until = self._loaded.pop(group_id, None)
        if loaded_until is not None and now_ms <= loaded_until:
            if cause in _MOVED_FROM:
                reason = (
                    f"first rebalance since the group was loaded on this coordinator ({cause}: the member "
                    f"was rebalancing when the coordinator moved or restarted); {reason}"
                )
                cause = "coordinator-moved"
        running = self.current(group_id)
        if running is not None:
            self._close(group_id, running, f"superseded-by-{cause}", now_ms)
        entry = Rebalance(cause, reason[:MAX_REASON], from_generation, now_ms, member_id, instance_id)
        if group_type == "consumer":
            entry.group_type, entry.join_end, entry.generation = group_type, CONSUMER_JOIN_END, generation
        self._by_group.setdefault(group_id, deque(maxlen=max(self.size, 1))).append(entry)
        self._notify("started", group_id, entry)
        return entry

    def arrived(self, group_id: str, member_id: str, now_ms: int) -> None:
        """A member's JoinGroup is parked in (or, in Stable, about to start) a join phase; the first counts."""
        self._arrivals.setdefault(group_id, {}).setdefault(member_id, now_ms)

    def dropped(
        self, group_id: str, members: Iterable[tuple[str, str | None]], phase: str, entry: Rebalance | None = None
    ) -> None:
        """Members removed for missing `phase`, recorded on `entry` (default: the running one)."""
        entry = entry if entry is not None else self.current(group_id)
        if entry is None:
            return
        for member_id, instance_id in members:
            if len(entry.dropped) < MAX_DROPPED:
                entry.dropped.append(DroppedMember(member_id, instance_id, phase))

    def join_completed(
        self,
        group_id: str,
        generation: int,
        protocol: str | None,
        leader: str | None,
        members: Iterable[tuple[str, str | None, str, str, bool]],
        join_end: str,
        now_ms: int,
    ) -> None:
        """The join phase ended with `generation`. `members`: (member id, instance id, client id, client host,
        rejoined) in the group's order."""
        arrivals = self._arrivals.pop(group_id, {})
        entry = self.current(group_id)
        if entry is None:
            return
        listed = list(members)
        times = [arrivals[m[0]] for m in listed if m[4] and m[0] in arrivals]
        first = min(times, default=now_ms)
        entries = [
            MemberEntry(mid, iid, cid, host, arrivals.get(mid, first) - first if rejoined else None)
            for mid, iid, cid, host, rejoined in listed
        ]
        entry.generation, entry.protocol, entry.leader = generation, protocol, leader
        entry.join_completed_ms, entry.join_end = now_ms, join_end
        entry.members_total = len(entries)
        entry.members = entries[:MAX_MEMBERS]
        late = sorted((m for m in entries if m.joined_after_ms), key=lambda m: -(m.joined_after_ms or 0))
        entry.late = [LateMember(m.member_id, m.group_instance_id, m.joined_after_ms or 0) for m in late[:MAX_LATE]]
        self._notify("joined", group_id, entry)
        if not entries:
            self._close(group_id, entry, "empty", now_ms)

    def finish(self, group_id: str, assignments: dict[str, bytes], consumer: bool, now_ms: int) -> None:
        """The leader's SyncGroup made the generation Stable: each member's assignment size, the outcome."""
        entry = self.current(group_id)
        if entry is None:
            return
        for member in entry.members:
            assignment = assignments.get(member.member_id)
            member.partitions = consumer_partitions(assignment) if consumer and assignment is not None else None
        self._close(group_id, entry, "stable", now_ms)

    def assigned(
        self,
        group_id: str,
        epoch: int,
        assignor: str,
        members: Iterable[tuple[str, str | None, str, str, int]],
        now_ms: int,
    ) -> None:
        """A consumer group's new target assignment for `epoch` (its running entry's "join phase" ends here):
        `members` are (member id, instance id, client id, client host, partitions of its target)."""
        entry = self.current(group_id)
        if entry is None or entry.group_type != "consumer":
            return
        listed = [MemberEntry(mid, iid, cid, host, None, partitions) for mid, iid, cid, host, partitions in members]
        entry.generation, entry.protocol, entry.join_completed_ms = epoch, assignor, now_ms
        entry.members_total, entry.members = len(listed), listed[:MAX_MEMBERS]
        self._notify("joined", group_id, entry)

    def reconciled(self, group_id: str, epoch: int, now_ms: int) -> bool:
        """Every member of a consumer group reached `epoch`: its running entry for that epoch is "stable" (its
        sync_ms is how long reconciliation took). Whether an entry closed."""
        entry = self.current(group_id)
        if entry is None or entry.group_type != "consumer" or entry.generation != epoch:
            return False
        self._close(group_id, entry, "stable", now_ms)
        return True

    def emptied(self, group_id: str, now_ms: int) -> None:
        """A consumer group's last member went: its running entry is "empty"."""
        entry = self.current(group_id)
        if entry is not None and entry.group_type == "consumer":
            self._close(group_id, entry, "empty", now_ms)

    def reopen(self, group_id: str, generation: int) -> None:
        """The generation's assignment was not written (append failure): its entry runs again, so that the
        rebalance that follows supersedes it."""
        entry = self.last(group_id)
        if entry is not None and entry.generation == generation and entry.outcome == "stable":
            entry.outcome, entry.completed_ms = None, None
            for member in entry.members:
                member.partitions = None

    def _close(self, group_id: str, entry: Rebalance, outcome: str, now_ms: int) -> None:
        entry.outcome, entry.completed_ms = outcome, now_ms
        self._notify("completed", group_id, entry)

    def _notify(self, event: str, group_id: str, entry: Rebalance) -> None:
        observer = self.observer
        if observer is None:
            return
        try:
            observer(event, group_id, entry)
        except Exception:  # the observer is someone else's code: it must not break the coordinator
            log.exception("rebalance history observer failed on %s of group %s", event, group_id)

    # --- loading and forgetting ----------------------------------------------------------------

    def loaded(self, group_id: str, until_ms: int) -> None:
        """The group was loaded from the log: its next rebalance, if it starts by `until_ms`, may be caused by the
        move (see `start`)."""
        self._loaded[group_id] = until_ms

    def forget(self, group_id: str) -> None:
        self._by_group.pop(group_id, None)
        self._arrivals.pop(group_id, None)
        self._loaded.pop(group_id, None)

    def clear(self) -> None:
        self._by_group.clear()
        self._arrivals.clear()
        self._loaded.clear()

    def group_ids(self) -> tuple[str, ...]:
        return tuple(self._by_group) if self.size > 0 else ()

    # --- persistence ---------------------------------------------------------------------------

    def record(self, group_id: str, budget: int = MAX_RECORD_BYTES) -> records.Record | None:
        """The group's history record (applied: live state holds it). The oldest entries are dropped while it
        would exceed MAX_RECORD_BYTES; then, while it would exceed `budget` (what the batch it rides in has room
        for), the oldest are left out of the record only (None when not even the newest fits)."""
        entries = self._by_group.get(group_id, deque())
        encoded = [to_record(e) for e in entries]
        record = records.rebalance_history_record(group_id, encoded, applied=True)
        size = len(record.value or b"")
        if size <= min(MAX_RECORD_BYTES, budget):
            return record
        while size > MAX_RECORD_BYTES and len(entries) > 1:
            size -= records.rebalance_entry_size(encoded.pop(0))
            entries.popleft()
        while size > budget and encoded:
            size -= records.rebalance_entry_size(encoded.pop(0))
        if not encoded:
            log.warning(
                "group %s: its rebalance history does not fit in the batch of its GroupMetadata record; "
                "not written this time",
                group_id,
            )
            return None
        return records.rebalance_history_record(group_id, encoded, applied=True)

    def load(self, group_id: str, value: bytes | None) -> None:
        """A history record read back from the log (a tombstone forgets). Raises ValueError if unreadable."""
        if value is None:
            self._by_group.pop(group_id, None)
            return
        entries = [from_record(e) for e in records.decode_rebalance_history_value(value)]
        if self.size > 0:
            self._by_group[group_id] = deque(entries[-self.size :], maxlen=self.size)


# --- the record's entries ------------------------------------------------------------------------------


def _i32(value: int | None) -> i32:
    """An int32 field of a record, -1 for None (kio's i32 is a plain int at run time: the cast only types it)."""
    return cast(i32, -1 if value is None else value)


def _i64(value: int | None) -> i64:
    """An int64 field of a record, -1 for None."""
    return cast(i64, -1 if value is None else value)


def _none(value: int) -> int | None:
    return None if value < 0 else value


def to_record(e: Rebalance) -> records.RebalanceEntryV0:
    return records.RebalanceEntryV0(
        generation=_i32(e.generation),
        from_generation=_i32(e.from_generation),
        cause=e.cause,
        reason=e.reason,
        member_id=e.member_id,
        group_instance_id=e.group_instance_id,
        started_ms=_i64(e.started_ms),
        join_completed_ms=_i64(e.join_completed_ms),
        completed_ms=_i64(e.completed_ms),
        protocol=e.protocol,
        leader=e.leader,
        join_end=e.join_end,
        outcome=e.outcome,
        members_total=_i32(e.members_total),
        members=tuple(
            records.RebalanceMemberV0(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                joined_after_ms=_i32(m.joined_after_ms),
                partitions=_i32(m.partitions),
            )
            for m in e.members
        ),
        late=tuple(
            records.RebalanceLateV0(
                member_id=m.member_id, group_instance_id=m.group_instance_id, after_ms=_i32(m.after_ms)
            )
            for m in e.late
        ),
        dropped=tuple(
            records.RebalanceDroppedV0(member_id=m.member_id, group_instance_id=m.group_instance_id, phase=m.phase)
            for m in e.dropped
        ),
    )


def from_record(r: records.RebalanceEntryV0) -> Rebalance:
    return Rebalance(
        cause=r.cause,
        reason=r.reason,
        from_generation=r.from_generation,
        started_ms=r.started_ms,
        member_id=r.member_id,
        group_instance_id=r.group_instance_id,
        generation=_none(r.generation),
        join_completed_ms=_none(r.join_completed_ms),
        completed_ms=_none(r.completed_ms),
        protocol=r.protocol,
        leader=r.leader,
        join_end=r.join_end,
        outcome=r.outcome,
        members_total=r.members_total,
        members=[
            MemberEntry(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                _none(m.joined_after_ms),
                _none(m.partitions),
            )
            for m in r.members
        ],
        late=[LateMember(m.member_id, m.group_instance_id, m.after_ms) for m in r.late],
        dropped=[DroppedMember(m.member_id, m.group_instance_id, m.phase) for m in r.dropped],
        group_type="consumer" if r.join_end == CONSUMER_JOIN_END else "classic",
    )


# --- the consumer protocol's assignment, counted ----------------------------------------------------------

_COUNT = struct.Struct(">i")


def consumer_partitions(assignment: bytes) -> int | None:
    """The partition count of a ConsumerProtocolAssignment (any version: int16 version, then [topic: string,
    partitions: [int32]], then user data and, from v3, nothing herd needs), or None when it does not parse; an
    empty assignment (a member the leader gave nothing) counts 0. Cheap: no topic name is decoded."""
    if not assignment:
        return 0
    try:
        at = 2
        (topics,) = _COUNT.unpack_from(assignment, at)
        at += 4
        total = 0
        for _ in range(max(topics, 0)):
            (name_length,) = struct.unpack_from(">h", assignment, at)
            at += 2 + max(name_length, 0)
            (count,) = _COUNT.unpack_from(assignment, at)
            at += 4 + 4 * max(count, 0)
            total += max(count, 0)
        if at > len(assignment):
            return None
        return total
    except struct.error:
        return None
