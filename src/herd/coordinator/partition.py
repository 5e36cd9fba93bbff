"""Which `__consumer_offsets` partition coordinates a group.

Kafka: `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, where `hashCode` is Java's
String.hashCode over UTF-16 code units (h = 31*h + c, 32-bit wrap-around) and `Utils.abs` is
`n & 0x7fffffff`, so abs(Integer.MIN_VALUE) is 0 (apache/kafka clients/.../common/utils/Utils.java,
group-coordinator/.../GroupCoordinatorService.java `topicPartitionFor`).
"""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java's String.hashCode as a signed 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(group_id: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return (java_string_hash(group_id) & 0x7FFFFFFF) % num_partitions
