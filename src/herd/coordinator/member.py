"""A classic group member: identity, timeouts, supported protocols, assignment and parked replies.

Mirrors apache/kafka group-coordinator/.../classic/ClassicGroupMember.java. The member holds the
runtime's opaque reply handles of its parked JoinGroup (`join_reply`) and SyncGroup (`sync_reply`);
the group completes them, which turns them into `Reply` entries of the current Result.

Session timing is O(1) per heartbeat: `session_deadline_ms` is moved by every heartbeat, while
`armed_deadline_ms` is the deadline the member's single keyed timer is actually set for. The timer's
operation compares the two and re-arms itself when the deadline has moved (see rebalance.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class MemberProtocol:
    """One protocol a member supports: a (name, metadata) entry of its JoinGroup's protocol list (Kafka's
    JoinGroupRequestProtocol). Not `Protocol`, which would shadow typing.Protocol in the modules that use it."""

    name: str
    metadata: bytes = b""


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[MemberProtocol, ...]
    assignment: bytes = b""
    join_reply: object | None = None
    sync_reply: object | None = None
    is_new: bool = False
    session_deadline_ms: int = 0
    armed_deadline_ms: int | None = None
    joined_at_ms: int | None = field(default=None)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""

    def matches(self, protocols: tuple[MemberProtocol, ...]) -> bool:
        """Same protocols in the same order with the same metadata (ClassicGroupMember.matches)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """This member's first preference among `candidates`."""
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka: new members expire while awaiting join; members awaiting join or sync are alive."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync
