"""What a group protocol plugs into the membership client: metadata, assignment and (optionally) diffs.

Kafka's classic group protocol carries opaque bytes: each member joins with one or more named protocols
and their metadata, the coordinator picks a protocol every member supports, the leader turns the
members' metadata into one assignment per member, and each member receives its bytes through SyncGroup.
The meaning of those bytes belongs to the protocol *type* ("consumer" for Kafka consumers, anything else
for other uses: "election", "work", ...). A `GroupProtocol` supplies that meaning to the membership
client:

- `metadata(held)`: the (name, bytes) protocols to join with, knowing the assignment still held (always
  None under the eager protocol, which gives everything up before joining);
- `assign(protocol_name, members)`: run by the leader, each member id's assignment bytes; may be a
  coroutine (the consumer protocol reads cluster metadata first);
- `on_assignment(assignment)`: told every new assignment before any callback runs (sticky assignors
  remember it);
- `is_cooperative(name)` and `revoked(name, old, new)`: for KIP-429's cooperative protocol, which keeps
  what it holds while rejoining and gives up only what the new assignment takes away, then rejoins so
  the freed part can be handed over in the next generation;
- `handover_pending(name, members, assignments)`: asked of the leader's assignment under a cooperative
  protocol: whether it takes from some member a part that member still owns, so that a second rebalance
  must follow (the leader rejoins itself if none starts within the rebalance timeout).

`SimpleProtocol` is a ready GroupProtocol for custom protocol types whose leader decides with a plain
function.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["GroupAssignment", "GroupProtocol", "JoinedMember", "SimpleProtocol"]


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the leader sees it in the JoinGroup answer."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class GroupAssignment:
    """What one member holds in one generation: its assignment bytes and who leads."""

    generation_id: int
    member_id: str
    leader_id: str
    protocol_name: str
    data: bytes

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader_id


AssignResult = Mapping[str, bytes]


class GroupProtocol(ABC):
    """The protocol-type specific half of a group member (see the module docstring)."""

    protocol_type: str

    @abstractmethod
    def metadata(self, held: GroupAssignment | None) -> Sequence[tuple[str, bytes]]:
        """The protocols this member joins with, most preferred first."""

    @abstractmethod
    def assign(self, protocol_name: str, members: Sequence[JoinedMember]) -> AssignResult | Awaitable[AssignResult]:
        """The leader's decision: assignment bytes per member id (missing members get empty bytes)."""

    def on_assignment(self, assignment: GroupAssignment) -> None:
        """A new assignment arrived (called before the callbacks)."""

    def on_reset(self) -> None:
        """The member's generation was reset: whatever it held is lost."""

    def is_cooperative(self, protocol_name: str) -> bool:
        """True when `protocol_name` follows KIP-429 (keep holdings across a rebalance)."""
        return False

    def revoked(self, protocol_name: str, old: bytes, new: bytes) -> bytes | None:
        """Under a cooperative protocol: the part of `old` that `new` takes away (None when nothing)."""
        return None

    def handover_pending(
        self, protocol_name: str, members: Sequence[JoinedMember], assignments: Mapping[str, bytes]
    ) -> bool:
        """Under a cooperative protocol: whether `assignments` (the leader's, for `members` as they joined)
        take from some member a part it still owns, which a second rebalance must then hand over."""
        return False


class SimpleProtocol(GroupProtocol):
    """A custom protocol type with one protocol whose leader decides with `assign_fn`.

    `assign_fn(members)` gets the JoinedMembers (ordered by member id) and returns bytes per member id.
    """

    def __init__(
        self,
        protocol_type: str,
        name: str,
        assign_fn: Callable[[Sequence[JoinedMember]], AssignResult] | None = None,
        metadata: bytes = b"",
    ) -> None:
        self.protocol_type = protocol_type
        self.name = name
        self._assign_fn = assign_fn or (lambda members: {})
        self._metadata = metadata

    def metadata(self, held: GroupAssignment | None) -> Sequence[tuple[str, bytes]]:
        return [(self.name, self._metadata)]

    def assign(self, protocol_name: str, members: Sequence[JoinedMember]) -> AssignResult:
        return self._assign_fn(sorted(members, key=lambda m: m.member_id))
