"""A classic group: members, pending members, static mapping, leader, generation and protocol.

Mirrors apache/kafka group-coordinator/.../classic/ClassicGroup.java. Members are kept in insertion
order (Kafka uses a HashMap), so "the first member" is the oldest one; this makes leader succession
and the protocol tie-break deterministic.

Protocol selection (`select_protocol`): candidates are the protocols every member supports; every
member votes for its first candidate; most votes wins. Kafka breaks ties by HashMap order, which is
non-deterministic; herd breaks them by the preference order of the leader (or, with no leader, the
oldest member): among the tied protocols, the one that comes first in that member's list wins.

The group only changes its own fields; completing parked replies goes through `Effects`.
"""

from __future__ import annotations

from herd.coordinator.errors import CoordinatorError, ErrorCode
from herd.coordinator.member import Member, MemberProtocol
from herd.coordinator.responses import JoinGroupMember, JoinGroupResponse, SyncGroupResponse
from herd.coordinator.result import Effects
from herd.coordinator.state import GroupState, check_transition


class ClassicGroup:
    def __init__(
        self,
        group_id: str,
        state: GroupState,
        now_ms: int,
        *,
        generation_id: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
        current_state_timestamp_ms: int | None = None,
    ) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = state
        self.state_timestamp_ms = now_ms if current_state_timestamp_ms is None else current_state_timestamp_ms
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}
        self.pending_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.static_members: dict[str, str] = {}
        self.supported_protocols: dict[str, int] = {}
        self.num_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        """Topics of a "consumer" group as of its current generation; None if unknown. Set by
        subscriptions.compute_subscribed_topics when a generation starts and when the group is loaded."""

    # --- state ---------------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Raises IllegalStateTransition (changing nothing) if Kafka's table forbids it."""
        check_transition(self.state, target, self.group_id)
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    # --- membership ----------------------------------------------------------------------------

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_empty(self) -> bool:
        return not self.members

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def add(self, member: Member, join_reply: object | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self._count_protocols(member.protocols, +1)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        if join_reply is not None:
            self.set_join_reply(member, join_reply)
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member.protocols, -1)
            if member.is_awaiting_join:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: Member,
        protocols: tuple[MemberProtocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_reply: object | None,
    ) -> None:
        self._count_protocols(member.protocols, -1)
        member.protocols = protocols
        self._count_protocols(protocols, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if join_reply is not None:
            self.set_join_reply(member, join_reply)
        elif member.is_awaiting_join:
            member.join_reply = None
            self.num_awaiting_join -= 1

    def set_join_reply(self, member: Member, handle: object) -> None:
        """Parks a JoinGroup. A handle it supersedes is dropped, as Kafka drops the old future."""
        if not member.is_awaiting_join:
            self.num_awaiting_join += 1
        member.join_reply = handle

    def complete_join(self, member: Member, response: JoinGroupResponse, fx: Effects) -> bool:
        if member.join_reply is None:
            return False
        fx.reply(member.join_reply, response)
        member.join_reply = None
        self.num_awaiting_join -= 1
        return True

    def complete_sync(self, member: Member, response: SyncGroupResponse, fx: Effects) -> bool:
        if member.sync_reply is None:
            return False
        fx.reply(member.sync_reply, response)
        member.sync_reply = None
        return True

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """Kafka's validateMember: UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise CoordinatorError(ErrorCode.unknown_member_id, f"unknown instance {instance_id}")
            if existing != member_id:
                raise CoordinatorError(ErrorCode.fenced_instance_id, f"instance {instance_id} belongs to {existing}")
        elif member_id not in self.members:
            raise CoordinatorError(ErrorCode.unknown_member_id, f"unknown member {member_id}")

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str, fx: Effects) -> Member:
        """Gives `instance_id` a new member id; the old id's parked join/sync get FENCED_INSTANCE_ID."""
        old = self.members.pop(old_id)
        fenced = ErrorCode.fenced_instance_id
        if old.is_awaiting_join:
            self.num_awaiting_join -= 1
            fx.reply(old.join_reply, JoinGroupResponse(error_code=fenced, member_id=old_id))
            old.join_reply = None
        if old.is_awaiting_sync:
            fx.reply(old.sync_reply, SyncGroupResponse(error_code=fenced))
            old.sync_reply = None
        new = Member(
            member_id=new_id,
            group_instance_id=instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        self.pending_sync_members.discard(old_id)
        return new

    # --- protocols -----------------------------------------------------------------------------

    def _count_protocols(self, protocols: tuple[MemberProtocol, ...], delta: int) -> None:
        """Members supporting each protocol name. A name a member lists twice counts once: otherwise no
        protocol would be supported by "every member" and the vote would have no candidate."""
        for name in {p.name for p in protocols}:
            count = self.supported_protocols.get(name, 0) + delta
            if count:
                self.supported_protocols[name] = count
            else:
                self.supported_protocols.pop(name, None)

    def supports_protocols(self, protocol_type: str, protocols: tuple[MemberProtocol, ...]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(p.name, 0) == n for p in protocols
        )

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        tied = {name for name, count in votes.items() if count == best}
        referee = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        return next(name for name in referee.protocol_names() if name in tied)

    # --- generations ---------------------------------------------------------------------------

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def maybe_elect_new_joined_leader(self) -> bool:
        """If the leader has not rejoined, the first member that did becomes leader."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def join_members(self) -> tuple[JoinGroupMember, ...]:
        """The member list the leader receives: each member's metadata for the selected protocol."""
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def join_response(
        self,
        member_id: str,
        *,
        with_members: bool = True,
        leader: str | None = None,
        skip_assignment: bool = False,
        error_code: int = ErrorCode.none,
    ) -> JoinGroupResponse:
        """The current generation as a JoinGroup answer to `member_id`. The member list goes to the leader
        only, and only `with_members`. `leader` replaces the group's leader id in the answer (a static leader
        replaced on JoinGroup v8 or older is told the previous leader, so that it does not assign again)."""
        return JoinGroupResponse(
            error_code=error_code,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=(self.leader_id or "") if leader is None else leader,
            skip_assignment=skip_assignment,
            member_id=member_id,
            members=self.join_members() if with_members and self.is_leader(member_id) else (),
        )

    def assignments(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}
