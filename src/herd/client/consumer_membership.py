"""The consumer protocol (KIP-848) on the client's side: a member's membership machine, pure like membership.py
(no asyncio, no sockets, time from an injected Clock).

It follows the Java client's ConsumerMembershipManager, AbstractMembershipManager and
AbstractHeartbeatRequestManager (confluentinc/kafka branch 4.2, clients/.../consumer/internals/). The coordinator
assigns; the member heartbeats (ConsumerGroupHeartbeat) every interval the coordinator gives it, and each answer
may carry its target assignment. Reconciling to it is the member's whole job:

    UNSUBSCRIBED --start--> JOINING --answer with an epoch--> STABLE <---------------------------+
                                                                 | a target unlike what it owns   |
                                                                 v                                |
                                     RECONCILING: Revoked(owned - target), then Assigned(target - owned), then
                                     ACKNOWLEDGING: a heartbeat at once with what it owns now ------+
    FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID: Lost(owned), then JOINING again with epoch 0 and the same member id
    close: Revoked(owned), then LEAVING (epoch -1; -2 for a static member) --> CLOSED;  a fatal error --> FAILED

The driver carries out the actions in order and runs the callbacks inline, so the revocation callback (where a
consumer commits) finishes before the heartbeat that tells the coordinator the partitions are free. Assignments
are by topic id (herd.coordinator's `Assignment`); the driver maps ids to names.

Which fields a heartbeat carries (Java's ConsumerHeartbeatRequestManager.HeartbeatState): all of them when the
member joins or after a failed request; afterwards only what changed since the last one sent (the subscription,
the rebalance timeout, the owned partitions, the server assignor, the regular expression: "" when it is taken
back); the instance id always. Errors as Java handles them: NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE forget
the coordinator and retry at once; COORDINATOR_LOAD_IN_PROGRESS and a lost connection retry after the backoff;
FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID fence the member (it loses its partitions and joins again); anything else
is fatal (GROUP_AUTHORIZATION_FAILED, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION, UNRELEASED_INSTANCE_ID, ...).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kio.schema.errors import ErrorCode

from herd.client.errors import KafkaError
from herd.client.heartbeat import Clock

__all__ = [
    "Action",
    "Assigned",
    "Closed",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "ConsumerMembership",
    "CoordinatorDead",
    "Failed",
    "Lost",
    "Revoked",
    "Send",
    "State",
]

Partitions = Mapping[uuid.UUID, frozenset[int]]
"""Partitions by topic id (the coordinator's Assignment)."""

LEAVE_GROUP_MEMBER_EPOCH: Final = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH: Final = -2


class State(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"  # created, not started
    JOINING = "JOINING"  # a heartbeat at epoch 0 is due or in flight
    RECONCILING = "RECONCILING"  # giving up and taking partitions (the callbacks run)
    ACKNOWLEDGING = "ACKNOWLEDGING"  # the heartbeat that says what it owns now is due or in flight
    STABLE = "STABLE"  # owns its target; heartbeats every interval
    LEAVING = "LEAVING"  # the leave heartbeat is in flight
    CLOSED = "CLOSED"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    """A field left None (the rebalance timeout -1) was not sent: unchanged since the last heartbeat."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    subscribed_topic_regex: str | None = None  # "" takes a regular expression back


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error_code: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: no assignment in this answer


@dataclass(frozen=True, slots=True)
class Send:
    request: ConsumerGroupHeartbeatRequest


@dataclass(frozen=True, slots=True)
class Assigned:
    partitions: Partitions  # what the member takes now


@dataclass(frozen=True, slots=True)
class Revoked:
    partitions: Partitions  # what the member gives up now (it may commit them first)


@dataclass(frozen=True, slots=True)
class Lost:
    partitions: Partitions  # what the member lost without a chance to commit (it was fenced)


@dataclass(frozen=True, slots=True)
class CoordinatorDead:
    reason: str


@dataclass(frozen=True, slots=True)
class Failed:
    error: KafkaError


@dataclass(frozen=True, slots=True)
class Closed:
    pass


Action = Send | Assigned | Revoked | Lost | CoordinatorDead | Failed | Closed

_RETRY_AT_ONCE: Final = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available})
_FENCED: Final = frozenset({ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id})


def _minus(a: Partitions, b: Partitions) -> dict[uuid.UUID, frozenset[int]]:
    out = {}
    for topic_id, parts in a.items():
        left = parts - b.get(topic_id, frozenset())
        if left:
            out[topic_id] = left
    return out


class ConsumerMembership:
    """One member of a consumer group on the consumer protocol; see the module docstring."""

    def __init__(
        self,
        group_id: str,
        topics: tuple[str, ...],
        clock: Clock,
        *,
        member_id: str | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = 300_000,
        server_assignor: str | None = None,
        retry_backoff_ms: int = 100,
        topic_regex: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.topics = tuple(sorted(set(topics)))
        self.topic_regex = topic_regex  # RE2, matched whole by the coordinator (SubscribedTopicRegex, v1)
        self.clock = clock
        self.member_id = member_id or str(uuid.uuid4())  # KIP-1082: the client makes its id (v1)
        self.instance_id, self.rack_id = instance_id, rack_id
        self.rebalance_timeout_ms, self.server_assignor = rebalance_timeout_ms, server_assignor
        self.retry_backoff_ms = retry_backoff_ms
        self.state = State.UNSUBSCRIBED
        self.epoch = 0
        self.owned: Partitions = {}
        self.interval_ms = 0  # until the coordinator says
        self.error: KafkaError | None = None
        self._due_ms: int | None = None  # when the next heartbeat is due (None: none until an answer)
        self._in_flight = False
        # what the last heartbeat carried: subscription, rebalance timeout, owned partitions, server assignor, regex
        self._sent: tuple[tuple[str, ...], int, Partitions, str | None, str | None] | None = None

    @property
    def done(self) -> bool:
        return self.state in (State.CLOSED, State.FAILED)

    # -- events ----------------------------------------------------------------------------------------------

    def start(self) -> list[Action]:
        if self.state is not State.UNSUBSCRIBED:
            raise RuntimeError(f"cannot start a member that is {self.state.name}")
        self.state = State.JOINING
        self._due_ms = self.clock.now_ms()
        return self.tick()

    def subscribe(self, topics: tuple[str, ...], topic_regex: str | None = None) -> list[Action]:
        """A new subscription (topic names, a regular expression or both): sent with the next heartbeat, at once."""
        self.topics = tuple(sorted(set(topics)))
        self.topic_regex = topic_regex
        if not self.done and self.state is not State.LEAVING:
            self._due_ms = self.clock.now_ms()
        return self.tick()

    def next_deadline(self) -> int | None:
        return None if self._in_flight or self.done else self._due_ms

    def tick(self) -> list[Action]:
        """Send the heartbeat that is due, if one is and none is in flight."""
        if self._in_flight or self._due_ms is None or self.done or self.clock.now_ms() < self._due_ms:
            return []
        return [self._heartbeat()]

    def receive(self, request: ConsumerGroupHeartbeatRequest, response: ConsumerGroupHeartbeatResponse) -> list[Action]:
        if self.state is State.LEAVING:  # only the leave's own answer ends it; an earlier heartbeat's is late
            return self._closed() if request.member_epoch < 0 else []
        self._in_flight = False
        if response.error_code != ErrorCode.none:
            return self._error(response)
        if response.member_id:
            self.member_id = response.member_id
        self.epoch = response.member_epoch
        if response.heartbeat_interval_ms > 0:
            self.interval_ms = response.heartbeat_interval_ms
        self._due_ms = self.clock.now_ms() + self.interval_ms
        actions: list[Action] = []
        if self.state in (State.JOINING, State.ACKNOWLEDGING):
            self.state = State.STABLE
        if response.assignment is not None and dict(response.assignment) != dict(self.owned):
            actions += self._reconcile(response.assignment)
        return actions + self.tick()

    def request_failed(self, request: ConsumerGroupHeartbeatRequest, reason: str) -> list[Action]:
        """The heartbeat got no answer (a lost connection, a timeout): forget the coordinator, send everything
        again after the backoff."""
        if self.state is State.LEAVING:
            return self._closed() if request.member_epoch < 0 else []
        self._in_flight = False
        self._sent = None
        self._due_ms = self.clock.now_ms() + self.retry_backoff_ms
        return [CoordinatorDead(reason)]

    def fail(self, error: KafkaError) -> list[Action]:
        self._in_flight = False
        self.state, self.error = State.FAILED, error
        return [Failed(error)]

    def close(self) -> list[Action]:
        """Give everything up and leave (a static member keeps its place for its session: epoch -2)."""
        if self.done:
            return []
        actions: list[Action] = [Revoked(self.owned)] if self.owned else []
        self.owned = {}
        if self.state is State.UNSUBSCRIBED or (self.state is State.JOINING and self.epoch == 0):
            return actions + self._closed()
        self.state = State.LEAVING
        self._in_flight = True
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.instance_id is not None else LEAVE_GROUP_MEMBER_EPOCH
        leave = ConsumerGroupHeartbeatRequest(self.group_id, self.member_id, epoch, instance_id=self.instance_id)
        return [*actions, Send(leave)]

    # -- inside ----------------------------------------------------------------------------------------------

    def _heartbeat(self) -> Send:
        self._in_flight = True
        self._due_ms = None
        full = self._sent is None or self.epoch == 0
        topics, timeout, owned, assignor = self.topics, self.rebalance_timeout_ms, self.owned, self.server_assignor
        regex = self.topic_regex
        last = self._sent
        self._sent = (topics, timeout, owned, assignor, regex)
        if full or last is None:
            sent_regex = regex  # Java: the pattern when joining, if there is one
        else:
            sent_regex = (regex if regex is not None else "") if last[4] != regex else None
        return Send(
            ConsumerGroupHeartbeatRequest(
                self.group_id,
                self.member_id,
                self.epoch,
                instance_id=self.instance_id,
                rack_id=self.rack_id,
                rebalance_timeout_ms=timeout if full or last is None or last[1] != timeout else -1,
                subscribed_topic_names=topics if full or last is None or last[0] != topics else None,
                server_assignor=assignor if full or last is None or last[3] != assignor else None,
                owned={} if self.epoch == 0 else (owned if full or last is None or last[2] != owned else None),
                subscribed_topic_regex=sent_regex,
            )
        )

    def _reconcile(self, target: Partitions) -> list[Action]:
        """Give up what the target leaves out, take what it adds, and say so at once (Java's reconcile)."""
        self.state = State.RECONCILING
        actions: list[Action] = []
        revoked, added = _minus(self.owned, target), _minus(target, self.owned)
        if revoked:
            actions.append(Revoked(revoked))
        if added:
            actions.append(Assigned(added))
        self.owned = {topic_id: frozenset(parts) for topic_id, parts in target.items() if parts}
        self.state = State.ACKNOWLEDGING
        self._due_ms = self.clock.now_ms()  # the acknowledgement goes now, not an interval later
        return actions

    def _error(self, response: ConsumerGroupHeartbeatResponse) -> list[Action]:
        code = ErrorCode(response.error_code)
        self._sent = None
        if code in _RETRY_AT_ONCE:
            self._due_ms = self.clock.now_ms()
            return [CoordinatorDead(f"{code.name}: {response.error_message or ''}".rstrip(": "))]
        if code is ErrorCode.coordinator_load_in_progress:
            self._due_ms = self.clock.now_ms() + self.retry_backoff_ms
            return []
        if code in _FENCED:
            lost, self.owned = self.owned, {}
            self.epoch, self.state = 0, State.JOINING
            self._due_ms = self.clock.now_ms()  # rejoin at once, with the same member id
            return ([Lost(lost)] if lost else []) + self.tick()
        return self.fail(KafkaError(int(code), response.error_message or code.name))

    def _closed(self) -> list[Action]:
        self.state = State.CLOSED
        self._due_ms = None
        return [Closed()]
