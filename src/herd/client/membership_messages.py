"""The four membership requests and their answers, independent of the wire version, and their kio forms.

The membership machine speaks in these frozen dataclasses; `to_kio` builds the kio request of whatever
version was negotiated (a field the version lacks is dropped: no group instance id before JoinGroup v5,
one leaving member instead of a batch before LeaveGroup v3) and `from_kio` reads the answer back into the
version-independent response (fields a version lacks take the value Kafka implies: no protocol type before
JoinGroup v7, no skip-assignment before v9).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from herd.client.group_protocol import JoinedMember
from herd.client.wire import RequestBuilder

__all__ = [
    "API_KEYS",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "MembershipRequest",
    "MembershipResponse",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "from_kio",
    "to_kio",
]


@dataclass(frozen=True, slots=True, eq=False)
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    reason: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocol_name: str
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True, eq=False)
class LeaveGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    reason: str | None = None


MembershipRequest = JoinGroupRequest | SyncGroupRequest | HeartbeatRequest | LeaveGroupRequest


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error_code: int


MembershipResponse = JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse

API_KEYS: Final[dict[type, int]] = {
    JoinGroupRequest: 11,
    HeartbeatRequest: 12,
    LeaveGroupRequest: 13,
    SyncGroupRequest: 14,
}


def to_kio(request: MembershipRequest, b: RequestBuilder) -> Any:
    """The kio request of `b`'s version."""
    if isinstance(request, JoinGroupRequest):
        protocols = tuple(b("JoinGroupRequestProtocol", name=n, metadata=m) for n, m in request.protocols)
        return b.request(
            group_id=request.group_id,
            session_timeout=request.session_timeout_ms,
            rebalance_timeout=request.rebalance_timeout_ms,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            protocol_type=request.protocol_type,
            protocols=protocols,
            reason=request.reason,
        )
    if isinstance(request, SyncGroupRequest):
        assignments = tuple(b("SyncGroupRequestAssignment", member_id=m, assignment=a) for m, a in request.assignments)
        return b.request(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
            assignments=assignments,
        )
    if isinstance(request, HeartbeatRequest):
        return b.request(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
        )
    return _leave(request, b)


def _leave(request: LeaveGroupRequest, b: RequestBuilder) -> Any:
    if b.version < 3:
        return b.request(group_id=request.group_id, member_id=request.member_id)
    member = b(
        "MemberIdentity",
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        reason=request.reason,
    )
    return b.request(group_id=request.group_id, members=(member,))


def from_kio(request: MembershipRequest, body: Any) -> MembershipResponse:
    """The version-independent answer to `request` from its kio response body."""
    code = int(body.error_code)
    if isinstance(request, JoinGroupRequest):
        members = tuple(
            JoinedMember(m.member_id, getattr(m, "group_instance_id", None), bytes(m.metadata)) for m in body.members
        )
        return JoinGroupResponse(
            code,
            int(body.generation_id),
            getattr(body, "protocol_type", None),
            body.protocol_name,
            body.leader,
            body.member_id,
            members,
            bool(getattr(body, "skip_assignment", False)),
        )
    if isinstance(request, SyncGroupRequest):
        return SyncGroupResponse(
            code, bytes(body.assignment), getattr(body, "protocol_type", None), getattr(body, "protocol_name", None)
        )
    if isinstance(request, HeartbeatRequest):
        return HeartbeatResponse(code)
    if not code and getattr(body, "members", ()):
        code = int(body.members[0].error_code)
    return LeaveGroupResponse(code)
