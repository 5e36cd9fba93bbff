"""The `roundrobin` assignor, as Java's RoundRobinAssignor
(apache/kafka clients/src/main/java/org/apache/kafka/clients/consumer/RoundRobinAssignor.java).

All partitions of all subscribed topics are laid out sorted by topic then partition, members in MemberInfo
order (static members by instance id, then member id). A cursor walks the members in a circle; each
partition goes to the next member at or after the cursor that subscribes to its topic, skipping the
others. With identical subscriptions the counts differ by at most one.
"""

from __future__ import annotations

from collections.abc import Mapping

from herd.client.assignors.base import (
    Cluster,
    Member,
    PartitionAssignor,
    RawAssignment,
    member_order,
    subscribed_topics,
)
from herd.client.consumer_protocol import TopicPartition


class RoundRobinAssignor(PartitionAssignor):
    name = "roundrobin"

    def assign_partitions(self, cluster: Cluster, members: Mapping[str, Member]) -> RawAssignment:
        result: RawAssignment = {member_id: [] for member_id in members}
        ring = member_order(members.values())
        if not ring:
            return result
        cursor = 0
        for topic in subscribed_topics(ring):
            for partition in range(cluster.partition_counts[topic]):
                while topic not in ring[cursor].topics:
                    cursor = (cursor + 1) % len(ring)
                result[ring[cursor].member_id].append(TopicPartition(topic, partition))
                cursor = (cursor + 1) % len(ring)
        return result
