"""The group-membership state machine: pure, no asyncio, no sockets, time from an injected Clock.

h11's shape: the driver feeds events in (`start`, `receive(request, response)`, `request_failed`,
`assignment_ready`, `tick`, `rejoin`, `close`) and gets a list of actions back, which it carries out in
order: `Send` a request to the coordinator, `ComputeAssignment` (the leader's turn, done by the driver
because it may need cluster metadata), run the user's `Assigned` / `Revoked` / `Lost` callbacks, forget a
coordinator (`CoordinatorDead`), report a fatal error (`Failed`), stop (`Closed`). Nothing else changes
the member; `next_deadline()` says when `tick` must be called next. The asyncio driver is
herd.client.group; tests drive the machine directly with a ManualClock.

The state is one enum, `MemberState`, and every change of it goes through `_to`, which checks a table of
allowed previous states (h11's _state.py): an illegal transition raises IllegalTransition and changes
nothing.

    UNJOINED --start--> JOINING --join ok, leader--> ASSIGNING --assignment--> SYNCING --ok--> STABLE
                           ^  +--join ok, follower-----------------------------^             |
                           +--------- REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ... ---------+
    any --close--> LEAVING (dynamic member) --> CLOSED;  a fatal error --> FAILED

Error handling follows Java's AbstractCoordinator (clients/.../consumer/internals/AbstractCoordinator.java):

- JoinGroup: MEMBER_ID_REQUIRED joins again at once with the given id (KIP-394); UNKNOWN_MEMBER_ID
  forgets the member id and ILLEGAL_GENERATION the generation, then joins again at once;
  NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE forget the coordinator and retry after a backoff, as do
  COORDINATOR_LOAD_IN_PROGRESS and REBALANCE_IN_PROGRESS; anything else not retriable is fatal
  (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED, ...).
- SyncGroup: REBALANCE_IN_PROGRESS joins again (keeping id and generation); UNKNOWN_MEMBER_ID and
  ILLEGAL_GENERATION reset as above; coordinator errors and lost connections rejoin after a backoff.
- Heartbeat (sent in ASSIGNING, SYNCING and STABLE, every heartbeat interval): REBALANCE_IN_PROGRESS in
  STABLE joins again; ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID lose the assignment (`Lost`) and join again;
  FENCED_INSTANCE_ID is fatal; coordinator errors forget the coordinator and retry after the backoff.
  Before the member is stable only a fatal error counts: the SyncGroup answer says the rest.
- No heartbeat answer for a whole session timeout: the coordinator has most likely removed the member, so
  the machine treats the assignment as lost before joining again (Java only marks the coordinator
  unknown; herd goes further so that a partitioned leader stops leading in time).

Eager protocols give up (`Revoked`) everything before each JoinGroup. Cooperative ones (KIP-429) keep
their holdings while rejoining; when the new assignment takes something away the machine emits `Revoked`
for just that part, then `Assigned`, and joins again at once so the freed part can be handed over in the
next generation (the two phases). On close a member revokes what it holds; a dynamic member then sends
LeaveGroup, a static member (group.instance.id) does not (KIP-345: its session keeps its place).

The second phase can fail to come. The owner of a withheld part may be replaced before it revokes: a
static member restarting with its group.instance.id, or rejoining after an admin removed it or after the
coordinator lost its JoinGroup, is put back by the coordinator in a Stable group without a rebalance and
handed the stored assignment (KIP-345), which already lacks the withheld part; the new process never owned
it, so it revokes nothing and does not rejoin, and nobody else has a reason to: the part stays unassigned.
As far as its code shows, Java's client has the same gap: the leader keeps no record of what it withheld
(ConsumerCoordinator.onLeaderElected keeps only `assignmentSnapshot`, the metadata it assigned from), and
only the revoking member asks for the second rebalance (onJoinComplete: requestRejoin("need to revoke
partitions and re-join")). herd's leader therefore asks its protocol whether the assignment it computed
leaves a handover pending (`GroupProtocol.handover_pending`); if so and the group is still at that
generation one rebalance timeout after the leader became STABLE (the time a member has to rejoin), the
leader rejoins itself, and that rebalance assigns what was withheld. In the usual case the owner rejoins
at once, the leader hears REBALANCE_IN_PROGRESS and the deadline is dropped. A new process of a static
leader, put back with skip_assignment, cannot know what the assignment it did not compute left pending
(its previous process may have been the very owner), so under a cooperative protocol it assumes a handover
is pending: a static leader's restart costs one cooperative rebalance, in which nothing moves, one
rebalance timeout later (herd goes further than Java here, see `_skip_assignment`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from kio.schema.errors import ErrorCode

from herd.client.errors import KafkaError
from herd.client.group_protocol import GroupAssignment, GroupProtocol, JoinedMember
from herd.client.heartbeat import Clock, HeartbeatTimer
from herd.client.membership_messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MembershipRequest,
    MembershipResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = [
    "Action",
    "Assigned",
    "Closed",
    "ComputeAssignment",
    "CoordinatorDead",
    "Failed",
    "IllegalTransition",
    "Lost",
    "MemberState",
    "MembershipConfig",
    "MembershipMachine",
    "Revoked",
    "Send",
]


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"  # created, not started
    JOINING = "JOINING"  # a JoinGroup is in flight, or waits for its backoff
    ASSIGNING = "ASSIGNING"  # the leader is computing the assignment
    SYNCING = "SYNCING"  # a SyncGroup is in flight
    STABLE = "STABLE"  # holds the current generation's assignment and heartbeats
    LEAVING = "LEAVING"  # closing: a LeaveGroup is in flight
    CLOSED = "CLOSED"  # closed (terminal)
    FAILED = "FAILED"  # stopped by a fatal error (terminal)


S = MemberState
_ACTIVE: Final = frozenset({S.JOINING, S.ASSIGNING, S.SYNCING, S.STABLE})
# state -> the states it may be entered from
_ALLOWED_PREVIOUS: Final[dict[MemberState, frozenset[MemberState]]] = {
    S.UNJOINED: frozenset(),
    S.JOINING: frozenset({S.UNJOINED}) | _ACTIVE,
    S.ASSIGNING: frozenset({S.JOINING}),
    S.SYNCING: frozenset({S.JOINING, S.ASSIGNING}),
    S.STABLE: frozenset({S.SYNCING}),
    S.LEAVING: _ACTIVE,
    S.CLOSED: frozenset({S.UNJOINED, S.LEAVING}) | _ACTIVE,
    S.FAILED: _ACTIVE | {S.LEAVING},
}
_HEARTBEATING: Final = frozenset({S.ASSIGNING, S.SYNCING, S.STABLE})
_LOOKUP_AGAIN: Final = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_RETRY_LATER: Final = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.rebalance_in_progress})


class IllegalTransition(RuntimeError):
    """A bug in the machine: a state change its table does not allow (nothing was changed)."""


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    group_id: str
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = 30_000
    heartbeat_interval_ms: int = 3_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ValueError("group id must not be empty")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError("heartbeat interval must be positive and below the session timeout")
        if self.group_instance_id == "":
            raise ValueError("group instance id must not be empty (use None for a dynamic member)")


# -- actions ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    request: MembershipRequest


@dataclass(frozen=True, slots=True)
class ComputeAssignment:
    generation_id: int
    protocol_name: str
    leader_id: str
    members: tuple[JoinedMember, ...]


@dataclass(frozen=True, slots=True)
class Assigned:
    assignment: GroupAssignment


@dataclass(frozen=True, slots=True)
class Revoked:
    """Given up cleanly: `assignment.data` is what is revoked (all of it, or the cooperative part)."""

    assignment: GroupAssignment


@dataclass(frozen=True, slots=True)
class Lost:
    """No longer held, and possibly already someone else's (the generation was reset or the member fenced)."""

    assignment: GroupAssignment


@dataclass(frozen=True, slots=True)
class CoordinatorDead:
    reason: str


@dataclass(frozen=True, slots=True)
class Failed:
    error: KafkaError


@dataclass(frozen=True, slots=True)
class Closed:
    pass


Action = Send | ComputeAssignment | Assigned | Revoked | Lost | CoordinatorDead | Failed | Closed
Actions = list[Action]


class MembershipMachine:
    """One member of one group (see the module docstring)."""

    def __init__(self, config: MembershipConfig, protocol: GroupProtocol, clock: Clock) -> None:
        self.config = config
        self.protocol = protocol
        self.clock = clock
        self.state = MemberState.UNJOINED
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.held: GroupAssignment | None = None
        self.error: KafkaError | None = None
        self._in_flight: MembershipRequest | None = None  # the JoinGroup, SyncGroup or LeaveGroup
        self._heartbeat: HeartbeatRequest | None = None
        self._timer = HeartbeatTimer(
            clock, config.session_timeout_ms, config.heartbeat_interval_ms, config.retry_backoff_ms
        )
        self._retry_at: int | None = None  # JOINING without a request in flight: when to send it
        self._retries = 0
        self._rejoin_reason: str | None = None  # asked for while assigning or syncing
        self._joined_members: tuple[JoinedMember, ...] = ()  # what the leader assigns for
        self._assigned: int | None = None  # the last generation whose assignment this machine computed
        self._handover_generation: int | None = None  # the leader's assignment left a handover pending
        self._handover_at: int | None = None  # STABLE leader: rejoin then unless a new generation began

    # -- inputs ------------------------------------------------------------------------------------------

    def start(self) -> Actions:
        """Join the group for the first time."""
        self._to(S.JOINING)
        return self._send_join(None)

    def receive(self, request: MembershipRequest, response: MembershipResponse) -> Actions:
        """The coordinator answered `request` (answers to requests no longer current are ignored)."""
        if isinstance(request, HeartbeatRequest) and isinstance(response, HeartbeatResponse):
            return self._on_heartbeat(request, response.error_code)
        if request is not self._in_flight:
            return []
        self._in_flight = None
        if isinstance(response, JoinGroupResponse):
            return self._on_join(response)
        if isinstance(response, SyncGroupResponse):
            return self._on_sync(response)
        return self._closed()

    def request_failed(self, request: MembershipRequest, reason: str) -> Actions:
        """No answer: the connection to the coordinator broke or the request timed out."""
        if request is self._heartbeat:
            self._heartbeat = None
            self._timer.failed()
            return [CoordinatorDead(reason)]
        if request is not self._in_flight:
            return []
        self._in_flight = None
        if isinstance(request, LeaveGroupRequest):
            return self._closed()
        if isinstance(request, JoinGroupRequest):
            return [CoordinatorDead(reason), *self._retry_join_later()]
        return [CoordinatorDead(reason), *self._rejoin(f"SyncGroup failed: {reason}", later=True)]

    def assignment_ready(self, generation_id: int, assignments: Mapping[str, bytes]) -> Actions:
        """The leader's assignment for `generation_id` (ignored if the group moved on meanwhile)."""
        if self.state is not S.ASSIGNING or generation_id != self.generation_id:
            return []
        name = self.protocol_name or ""
        pending = self.protocol.handover_pending(name, self._joined_members, assignments)
        self._handover_generation = generation_id if pending else None
        self._assigned, self._joined_members = generation_id, ()
        return self._send_sync(tuple(sorted(assignments.items())))

    def assignment_failed(self, generation_id: int, error: KafkaError) -> Actions:
        """The leader could not compute the assignment: fatal, as an assignor exception is in Java."""
        if self.state is not S.ASSIGNING or generation_id != self.generation_id:
            return []
        return self._fail(error)

    def fail(self, error: KafkaError) -> Actions:
        """A fatal error found outside the protocol (the broker does not serve a membership API)."""
        if self.done:
            return []
        return self._fail(error)

    def tick(self) -> Actions:
        """Whatever is due now: a delayed JoinGroup, a heartbeat, or the session's end."""
        if self.state is S.JOINING and self._in_flight is None and self._retry_at is not None:
            if self.clock.now_ms() >= self._retry_at:
                return self._send_join("retrying after a failed attempt to join")
        if self.state in _HEARTBEATING:
            if self._timer.session_expired():
                return self._session_expired()
            if self.state is S.STABLE and self._handover_at is not None and self.clock.now_ms() >= self._handover_at:
                return self._rejoin(
                    f"the cooperative handover of generation {self.generation_id} did not "
                    "follow within the rebalance timeout"
                )
            if self._timer.should_heartbeat():
                return self._send_heartbeat()
        return []

    def rejoin(self, reason: str) -> Actions:
        """Ask for a rebalance (for instance after the subscription changed)."""
        if self.state is S.STABLE:
            return self._rejoin(reason)
        if self.state in (S.ASSIGNING, S.SYNCING):
            self._rejoin_reason = reason
        return []

    def close(self, reason: str = "the member is closing") -> Actions:
        """Give up the assignment; a dynamic member also leaves the group."""
        if self.state in (S.CLOSED, S.FAILED, S.LEAVING):
            return []
        actions: Actions = []
        if self.held is not None:
            actions.append(Revoked(self.held))
            self.held = None
        if self.state is S.UNJOINED or self.config.group_instance_id is not None or not self.member_id:
            return actions + self._closed()
        self._to(S.LEAVING)
        request = LeaveGroupRequest(self.config.group_id, self.member_id, None, reason)
        self._in_flight, self._heartbeat = request, None
        return actions + [Send(request)]

    def next_deadline(self) -> int | None:
        """The clock time (ms) at which `tick` has something to do, or None."""
        if self.state is S.JOINING and self._in_flight is None:
            return self._retry_at
        if self.state in _HEARTBEATING:
            deadline = self._timer.session_deadline()
            if not self._timer.in_flight:
                deadline = min(deadline, self._timer.next_at())
            if self.state is S.STABLE and self._handover_at is not None:
                deadline = min(deadline, self._handover_at)
            return deadline
        return None

    @property
    def done(self) -> bool:
        return self.state in (S.CLOSED, S.FAILED)

    # -- state changes -----------------------------------------------------------------------------------

    def _to(self, state: MemberState) -> None:
        if self.state not in _ALLOWED_PREVIOUS[state]:
            raise IllegalTransition(f"{self.state.name} -> {state.name}")
        self.state = state

    def _closed(self) -> Actions:
        self._to(S.CLOSED)
        self._in_flight = self._heartbeat = None
        return [Closed()]

    def _fail(self, error: KafkaError) -> Actions:
        actions: Actions = [Lost(self.held)] if self.held is not None else []
        self.held = None
        self._to(S.FAILED)
        self.error = error
        self._in_flight = self._heartbeat = None
        return actions + [Failed(error)]

    def _fail_code(self, code: int, what: str) -> Actions:
        return self._fail(KafkaError(code, f"{what} failed: {ErrorCode(code).name.upper()}"))

    def _reset_generation(self, forget_member_id: bool) -> Actions:
        """The generation is gone (and with it whatever the member held)."""
        actions: Actions = [Lost(self.held)] if self.held is not None else []
        self.held = None
        self.generation_id, self.protocol_name, self.leader_id = -1, None, ""
        self._handover_at = None
        if forget_member_id:
            self.member_id = ""
        self.protocol.on_reset()
        return actions

    def _prepare_join(self) -> Actions:
        """Eager protocols give everything up before joining; cooperative ones keep it."""
        held = self.held
        if held is None or self.protocol.is_cooperative(held.protocol_name):
            return []
        self.held = None
        return [Revoked(held)]

    def _rejoin(self, reason: str, later: bool = False) -> Actions:
        actions = self._prepare_join() if self.state is not S.JOINING else []
        self._to(S.JOINING)
        self._heartbeat = None
        self._rejoin_reason = None
        self._handover_at = None
        if later:
            return actions + self._retry_join_later()
        return actions + self._send_join(reason)

    def _retry_join_later(self) -> Actions:
        delay = min(self.config.retry_backoff_max_ms, self.config.retry_backoff_ms * 2 ** min(self._retries, 20))
        self._retries += 1
        self._in_flight = None
        self._retry_at = self.clock.now_ms() + delay
        return []

    # -- JoinGroup ---------------------------------------------------------------------------------------

    def _send_join(self, reason: str | None) -> Actions:
        c = self.config
        request = JoinGroupRequest(
            c.group_id,
            c.session_timeout_ms,
            c.rebalance_timeout_ms,
            self.member_id,
            c.group_instance_id,
            self.protocol.protocol_type,
            tuple(self.protocol.metadata(self.held)),
            reason,
        )
        self._in_flight, self._retry_at = request, None
        return [Send(request)]

    def _on_join(self, response: JoinGroupResponse) -> Actions:
        code = response.error_code
        if code == ErrorCode.none:
            return self._joined(response)
        if code == ErrorCode.member_id_required:
            self.member_id = response.member_id
            return self._send_join("need to re-join with the given member-id")
        if code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            actions = self._reset_generation(forget_member_id=code == ErrorCode.unknown_member_id)
            return actions + self._send_join(f"JoinGroup answered {ErrorCode(code).name.upper()}")
        if code in _LOOKUP_AGAIN:
            return [CoordinatorDead(f"JoinGroup answered {ErrorCode(code).name.upper()}"), *self._retry_join_later()]
        if code in _RETRY_LATER or ErrorCode(code).retriable:
            return self._retry_join_later()
        return self._fail_code(code, "JoinGroup")

    def _joined(self, response: JoinGroupResponse) -> Actions:
        if response.protocol_type not in (None, self.protocol.protocol_type):
            return self._fail_code(ErrorCode.inconsistent_group_protocol, "JoinGroup")
        self.member_id, self.generation_id = response.member_id, response.generation_id
        self.protocol_name, self.leader_id = response.protocol_name or "", response.leader
        self._retries = 0
        self._timer.reset()
        if response.leader == response.member_id and not response.skip_assignment:
            self._to(S.ASSIGNING)
            self._joined_members = response.members
            return [ComputeAssignment(self.generation_id, self.protocol_name, self.leader_id, response.members)]
        if response.leader == response.member_id:
            self._skip_assignment()
        return self._send_sync(())

    def _skip_assignment(self) -> None:
        """A static leader put back into its Stable group keeps the generation's assignment (KIP-814
        skip_assignment). If this machine did not compute that assignment, it cannot know whether it left
        a handover pending (its previous process may have been the owner that had to revoke), so under a
        cooperative protocol it assumes one: at most one extra cooperative rebalance, one rebalance timeout
        later, in which nothing moves unless something was unassigned."""
        if self.protocol.is_cooperative(self.protocol_name or "") and self._assigned != self.generation_id:
            self._handover_generation = self.generation_id

    # -- SyncGroup ---------------------------------------------------------------------------------------

    def _send_sync(self, assignments: tuple[tuple[str, bytes], ...]) -> Actions:
        self._to(S.SYNCING)
        c = self.config
        request = SyncGroupRequest(
            c.group_id,
            self.generation_id,
            self.member_id,
            c.group_instance_id,
            self.protocol.protocol_type,
            self.protocol_name or "",
            assignments,
        )
        self._in_flight = request
        return [Send(request)]

    def _on_sync(self, response: SyncGroupResponse) -> Actions:
        code = response.error_code
        if code == ErrorCode.none:
            return self._synced(response)
        name = ErrorCode(code).name.upper()
        if code == ErrorCode.rebalance_in_progress:
            return self._rejoin("SyncGroup answered REBALANCE_IN_PROGRESS")
        if code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            actions = self._reset_generation(forget_member_id=code == ErrorCode.unknown_member_id)
            return actions + self._rejoin(f"SyncGroup answered {name}")
        if code in _LOOKUP_AGAIN:
            return [CoordinatorDead(f"SyncGroup answered {name}"), *self._rejoin(name, later=True)]
        if ErrorCode(code).retriable:
            return self._rejoin(f"SyncGroup answered {name}", later=True)
        return self._fail_code(code, "SyncGroup")

    def _synced(self, response: SyncGroupResponse) -> Actions:
        same_type = response.protocol_type in (None, self.protocol.protocol_type)
        if not same_type or response.protocol_name not in (None, self.protocol_name):
            return self._fail_code(ErrorCode.inconsistent_group_protocol, "SyncGroup")
        new = GroupAssignment(
            self.generation_id, self.member_id, self.leader_id, self.protocol_name or "", response.assignment
        )
        self._to(S.STABLE)
        self._arm_handover()
        actions = self._replace_holdings(new)
        self.protocol.on_assignment(new)
        actions.append(Assigned(new))
        reason = self._rejoin_reason
        if any(isinstance(a, Revoked) for a in actions) and self.protocol.is_cooperative(new.protocol_name):
            reason = reason or "partitions were revoked: rejoin to hand them over (cooperative protocol)"
        if reason is not None:
            actions += self._rejoin(reason)
        return actions

    def _arm_handover(self) -> None:
        """STABLE again in the generation whose assignment (computed here as leader) left a handover
        pending: wait for the second rebalance at most one rebalance timeout (see the module docstring).
        The generation is remembered across this member's own rejoins and resets, since a rejoin can end
        in a static replacement back into that same generation; a later generation forgets it."""
        if self._handover_generation != self.generation_id:
            self._handover_generation = self._handover_at = None
            return
        self._handover_at = self.clock.now_ms() + self.config.rebalance_timeout_ms

    def _replace_holdings(self, new: GroupAssignment) -> Actions:
        old, self.held = self.held, new
        if old is None:
            return []
        if not self.protocol.is_cooperative(new.protocol_name):
            return [Revoked(old)]
        revoked = self.protocol.revoked(new.protocol_name, old.data, new.data)
        return [Revoked(replace(old, data=revoked))] if revoked is not None else []

    # -- Heartbeat ---------------------------------------------------------------------------------------

    def _send_heartbeat(self) -> Actions:
        c = self.config
        request = HeartbeatRequest(c.group_id, self.generation_id, self.member_id, c.group_instance_id)
        self._heartbeat = request
        self._timer.sent()
        return [Send(request)]

    def _on_heartbeat(self, request: HeartbeatRequest, code: int) -> Actions:
        if request is not self._heartbeat:
            return []
        self._heartbeat = None
        if code in _LOOKUP_AGAIN:
            self._timer.failed()
            return [CoordinatorDead(f"Heartbeat answered {ErrorCode(code).name.upper()}")]
        self._timer.received()
        if code == ErrorCode.none or request.generation_id != self.generation_id:
            return []
        if code == ErrorCode.fenced_instance_id:
            return self._fail_code(code, "Heartbeat")
        if self.state is not S.STABLE:
            return []  # the SyncGroup answer will tell
        return self._heartbeat_error(code)

    def _heartbeat_error(self, code: int) -> Actions:
        name = ErrorCode(code).name.upper()
        if code == ErrorCode.rebalance_in_progress:
            return self._rejoin("Heartbeat answered REBALANCE_IN_PROGRESS")
        if code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            actions = self._reset_generation(forget_member_id=code == ErrorCode.unknown_member_id)
            return actions + self._rejoin(f"Heartbeat answered {name}")
        if ErrorCode(code).retriable:
            self._timer.failed()
            return []
        return self._fail_code(code, "Heartbeat")

    def _session_expired(self) -> Actions:
        reason = "no heartbeat answer within the session timeout"
        actions: Actions = [CoordinatorDead(reason), *self._reset_generation(forget_member_id=False)]
        return actions + self._rejoin(reason, later=True)
