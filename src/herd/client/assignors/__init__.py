"""Consumer-group partition assignors with Kafka's names and results.

`range`, `roundrobin`, `sticky` and `cooperative-sticky`, each a PartitionAssignor: `metadata(topics)`
gives the Subscription a member joins with, `assign(cluster, subscriptions)` gives every member its
Assignment, `on_assignment` lets sticky assignors remember what they were given. Rack-aware (KIP-881)
when subscriptions carry rack ids and the Cluster carries replica racks.
"""

from __future__ import annotations

from herd.client.assignors.base import Cluster, Member, PartitionAssignor, RebalanceProtocol
from herd.client.assignors.cooperative_sticky import CooperativeStickyAssignor
from herd.client.assignors.range import RangeAssignor
from herd.client.assignors.roundrobin import RoundRobinAssignor
from herd.client.assignors.sticky import StickyAssignor

__all__ = [
    "ASSIGNORS",
    "Cluster",
    "CooperativeStickyAssignor",
    "Member",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "assignor_for",
]

ASSIGNORS: dict[str, type[PartitionAssignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor)
}


def assignor_for(name: str, rack_id: str | None = None) -> PartitionAssignor:
    """A new assignor by its protocol name; raises KeyError for an unknown name."""
    return ASSIGNORS[name](rack_id)
