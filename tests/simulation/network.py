"""Connections between simulated members and the coordinator, and the server's dispatch onto the core.

Each member incarnation talks over one `Connection` at a time. Requests on a connection arrive in the order
they were sent (FIFO, TCP), each after a random delay; the server handles each on arrival (herd handles the
requests of one connection as they come and queues their answers, server/connection.py), and releases the
answers *in request order* (Kafka requires it): an answer waits until every earlier request of its connection
is answered, then travels back after its own random delay, again FIFO. Different connections are independent,
so messages are reordered freely across connections.

Dropping a connection (a fault, a request timeout, a crash of the coordinator's node) fails every request
outstanding on it (`MembershipMachine.request_failed`); requests already handled stay parked in the core and
their later answers go nowhere; requests still on the wire are lost. The member opens a new connection for its
next request.

`Server` turns the membership machine's requests (herd.client.membership_messages) into the core's
(herd.coordinator.requests), as the API handlers in server/apis/ do, and the core's responses back.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from herd.client import consumer_membership as cm
from herd.client import membership_messages as mm
from herd.client.group_protocol import JoinedMember
from herd.coordinator import ErrorCode
from herd.coordinator import requests as rq
from herd.coordinator import responses as rs
from herd.coordinator.consumer_heartbeat import ConsumerGroupHeartbeat
from herd.coordinator.member import MemberProtocol
from herd.coordinator.responses import ConsumerGroupHeartbeatResponse

from .loop import EventLoop
from .runtime import Host


@dataclass(eq=False, slots=True)
class Outgoing:
    """One request on a connection; its answer once the server has one."""

    conn: Connection
    request: object
    response: object = None
    answered: bool = False
    sent_back: bool = False
    done: bool = False


@dataclass(eq=False)
class Connection:
    owner: object  # the SimMember (or admin) that receives answers and failures
    number: int
    open: bool = True
    outstanding: list[Outgoing] = field(default_factory=list)
    last_request_at: int = 0
    last_answer_at: int = 0


class Network:
    """Delays, ordering and drops (see the module docstring)."""

    def __init__(self, loop: EventLoop, rng: random.Random, max_delay_ms: int) -> None:
        self.loop, self.rng, self.max_delay_ms = loop, rng, max_delay_ms
        self.server: Server | None = None
        self._numbers = 0

    def connect(self, owner: object) -> Connection:
        self._numbers += 1
        return Connection(owner, self._numbers)

    def _delay(self) -> int:
        return self.rng.randint(0, self.max_delay_ms)

    def send(self, conn: Connection, request: object) -> Outgoing:
        out = Outgoing(conn, request)
        conn.outstanding.append(out)
        arrival = max(self.loop.now() + self._delay(), conn.last_request_at)
        conn.last_request_at = arrival
        self.loop.at(arrival, lambda: self._arrive(out), "request")
        return out

    def _arrive(self, out: Outgoing) -> None:
        if out.conn.open and self.server is not None:
            self.server.handle(out)

    def answer(self, out: Outgoing, response: object) -> None:
        """The server's answer to `out` (from the core, perhaps much later); released in request order."""
        if out.answered:
            return  # herd.runtime.shard.ReplyHandle.deliver: a handle is answered once, later answers are dropped
        out.answered, out.response = True, response
        conn = out.conn
        if not conn.open:
            return
        for pending in conn.outstanding:
            if not pending.answered:
                break
            if not pending.sent_back:
                pending.sent_back = True
                arrival = max(self.loop.now() + self._delay(), conn.last_answer_at)
                conn.last_answer_at = arrival
                self.loop.at(arrival, lambda p=pending: self._answer_arrives(p), "answer")

    def _answer_arrives(self, out: Outgoing) -> None:
        conn = out.conn
        if not conn.open or out.done:
            return
        out.done = True
        conn.outstanding.remove(out)
        conn.owner.on_answer(out.request, out.response)  # type: ignore[attr-defined]

    def drop(self, conn: Connection, reason: str) -> None:
        """Close `conn`: everything outstanding on it fails."""
        if not conn.open:
            return
        conn.open = False
        failed, conn.outstanding = conn.outstanding, []
        for out in failed:
            out.done = True
        for out in failed:
            conn.owner.on_failure(out.request, reason)  # type: ignore[attr-defined]


class Server:
    """The API layer: routes each request to the host's current incarnation, translating both ways."""

    def __init__(self, network: Network, host: Host, on_response: Callable[[Outgoing, object], None]) -> None:
        self.network, self.host = network, host
        self.on_response = on_response  # the checker sees every answer before it travels
        network.server = self

    def reply(self, out: object, response: object) -> None:
        """The host's deliver callback: `out` is the Outgoing passed to the core as its reply handle."""
        assert isinstance(out, Outgoing)
        answer = to_client(out.request, response)
        self.on_response(out, answer)
        self.network.answer(out, answer)

    def handle(self, out: Outgoing) -> None:
        request = out.request
        error = self.host.unavailable()
        incarnation = self.host.current
        if isinstance(request, mm.HeartbeatRequest):
            if error is ErrorCode.coordinator_load_in_progress:
                error = ErrorCode.none  # server/apis/heartbeat.py: NONE, blindly, while loading
            if error is not None:
                self.reply(out, rs.HeartbeatResponse(error_code=error))
                return
            incarnation.heartbeat(to_core(request), out, lambda code: rs.HeartbeatResponse(error_code=code))
            return
        if isinstance(request, cm.ConsumerGroupHeartbeatRequest):
            if error is not None:
                self.reply(out, ConsumerGroupHeartbeatResponse(error_code=error))
                return
            incarnation.consumer_heartbeat(to_core(request), out)
            return
        method, core = _METHODS[type(request)], to_core(request)
        if error is not None:
            self.reply(out, rs.error_response(_EMPTY_RESPONSES[method](core), error))
            return
        incarnation.call(method, core, out, request)


_METHODS: dict[type, str] = {
    mm.JoinGroupRequest: "join_group",
    mm.SyncGroupRequest: "sync_group",
    mm.LeaveGroupRequest: "leave_group",
    rq.OffsetCommit: "offset_commit",
    rq.LeaveGroup: "leave_group",
    rq.DeleteGroups: "delete_groups",
}

_EMPTY_RESPONSES: dict[str, Callable[[object], object]] = {
    "join_group": lambda r: rs.JoinGroupResponse(member_id=r.member_id),  # type: ignore[attr-defined]
    "sync_group": lambda r: rs.SyncGroupResponse(),
    "leave_group": lambda r: rs.LeaveGroupResponse(),
    "offset_commit": lambda r: rs.OffsetCommitResponse(
        topics=tuple(  # type: ignore[attr-defined]
            rs.CommitTopicResponse(t.name, tuple(rs.CommitPartitionResponse(p.partition_index) for p in t.partitions))
            for t in r.topics
        )
    ),
    "delete_groups": lambda r: rs.DeleteGroupsResponse(
        results=tuple(  # type: ignore[attr-defined]
            rs.DeletableGroupResult(g) for g in r.groups_names
        )
    ),
}


def to_core(request: object) -> object:
    """The core request for a membership request (core requests pass through)."""
    client = dict(client_id="sim", client_host="/sim")
    match request:
        case mm.JoinGroupRequest():
            return rq.JoinGroup(
                group_id=request.group_id,
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                protocol_type=request.protocol_type,
                protocols=tuple(MemberProtocol(n, m) for n, m in request.protocols),
                reason=request.reason,
                **client,
            )
        case mm.SyncGroupRequest():
            return rq.SyncGroup(
                group_id=request.group_id,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                protocol_type=request.protocol_type,
                protocol_name=request.protocol_name,
                assignments=tuple(rq.SyncAssignment(m, a) for m, a in request.assignments),
                **client,
            )
        case mm.HeartbeatRequest():
            return rq.Heartbeat(
                group_id=request.group_id,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                **client,
            )
        case mm.LeaveGroupRequest():
            who = rq.MemberIdentity(request.member_id, request.group_instance_id, request.reason)
            return rq.LeaveGroup(group_id=request.group_id, members=(who,), **client)
        case cm.ConsumerGroupHeartbeatRequest():
            return ConsumerGroupHeartbeat(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                instance_id=request.instance_id,
                rack_id=request.rack_id,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                subscribed_topic_names=request.subscribed_topic_names,
                server_assignor=request.server_assignor,
                subscribed_topic_regex=request.subscribed_topic_regex,
                owned=None if request.owned is None else {t: frozenset(p) for t, p in request.owned.items() if p},
                **client,
            )
    return request


def to_client(request: object, response: object) -> object:
    """The membership machine's view of a core response to `request` (core responses pass through)."""
    match response:
        case rs.JoinGroupResponse():
            members = tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata) for m in response.members)
            return mm.JoinGroupResponse(
                response.error_code,
                response.generation_id,
                response.protocol_type,
                response.protocol_name,
                response.leader,
                response.member_id,
                members,
                response.skip_assignment,
            )
        case rs.SyncGroupResponse():
            return mm.SyncGroupResponse(
                response.error_code, response.assignment, response.protocol_type, response.protocol_name
            )
        case rs.HeartbeatResponse():
            return mm.HeartbeatResponse(response.error_code)
        case ConsumerGroupHeartbeatResponse():
            return cm.ConsumerGroupHeartbeatResponse(
                response.error_code,
                response.error_message,
                response.member_id,
                response.member_epoch,
                response.heartbeat_interval_ms,
                None if response.assignment is None else dict(response.assignment),
            )
        case rs.LeaveGroupResponse() if isinstance(request, mm.LeaveGroupRequest):
            code = response.error_code or (response.members[0].error_code if response.members else 0)
            return mm.LeaveGroupResponse(code)
    return response
