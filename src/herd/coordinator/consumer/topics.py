"""What the consumer-group coordinator knows of the cluster's topics (Kafka's CoordinatorMetadataImage): each
topic's id and partition count, by name and by id, and a version that changes whenever they do.

The runtime hands the shard a new `TopicsImage` when topics are created, deleted or grow partitions
(`GroupCoordinatorShard.set_topics`); the core never reads the log's metadata itself.

`metadata_hash(names)` stands for Kafka's group metadata hash (KIP-1101; GC/Utils.java computeGroupHash, XXH3
over each subscribed topic's id, name, partition count and racks): a 64-bit digest of the subscribed topics
that exist, their ids, names and partition counts, in name order. It is herd's own digest (BLAKE2b, no racks),
so it differs from the value Kafka would write; it only has to change when the subscribed topics change, which
bumps the group epoch and recomputes the target assignment, and to be the same on every node, which it is, so
that a coordinator that reloads a group computes the hash it finds in the log and bumps nothing.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from herd.coordinator.consumer.assignment import TopicId


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: TopicId
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class TopicsImage:
    by_name: Mapping[str, TopicInfo] = field(default_factory=dict)
    version: int = 0
    by_id: Mapping[TopicId, TopicInfo] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_id", {info.topic_id: info for info in self.by_name.values()})

    @classmethod
    def of(cls, topics: Iterable[tuple[str, TopicId, int]], version: int = 0) -> TopicsImage:
        return cls({name: TopicInfo(topic_id, name, count) for name, topic_id, count in topics}, version)

    def ids(self, names: Iterable[str]) -> frozenset[TopicId]:
        """The ids of the topics among `names` that exist."""
        by_name = self.by_name
        return frozenset(by_name[name].topic_id for name in names if name in by_name)

    def with_ids(self, by_name: Mapping[str, frozenset[int]]) -> dict[TopicId, frozenset[int]]:
        """Partitions by topic name as an Assignment (by id), topics that do not exist left out (Kafka's
        toTopicPartitionMap)."""
        known = self.by_name
        return {known[name].topic_id: parts for name, parts in by_name.items() if name in known and parts}

    def with_names(self, of: Mapping[TopicId, frozenset[int]]) -> dict[str, frozenset[int]]:
        """An Assignment by topic name, topics that no longer exist left out (toConsumerProtocolAssignment)."""
        by_id = self.by_id
        return {by_id[topic_id].name: parts for topic_id, parts in of.items() if topic_id in by_id}

    def partition_counts(self, names: Iterable[str]) -> dict[TopicId, int]:
        by_name = self.by_name
        return {by_name[n].topic_id: by_name[n].partitions for n in names if n in by_name}

    def metadata_hash(self, names: Iterable[str]) -> int:
        """The group metadata hash of the subscribed topic `names` (0 when none of them exists, as Kafka's)."""
        present = sorted(name for name in set(names) if name in self.by_name)
        if not present:
            return 0
        digest = hashlib.blake2b(digest_size=8)
        for name in present:
            info = self.by_name[name]
            encoded = name.encode()
            digest.update(info.topic_id.bytes + struct.pack(">ii", info.partitions, len(encoded)) + encoded)
        value: int = struct.unpack(">q", digest.digest())[0]
        return value


EMPTY_IMAGE = TopicsImage()
