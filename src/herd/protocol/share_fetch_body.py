"""The body of a ShareFetch answer (v1-v2), packed directly: every ShareFetch of a share consumer is answered with
one, and building kio's objects and running kio's writer for it was about a tenth of the broker's main thread with
eight share consumers reading (issue 32; docs/benchmarks.md, "Share groups").

The layout is kio's schema of ShareFetchResponse v1 and v2 (kio/schema/share_fetch/v*/response.py, generated from
Kafka's ShareFetchResponse.json; the two versions have the same layout), field for field, flexible throughout
(compact lengths, an empty tagged-field section after each struct and after the body).
tests/unit/protocol/test_share_fetch_body.py checks it against kio's writer byte for byte. The record data of each
partition is one of the parts returned, not copied into the rest (as kio's writer hands records to
`transport.writelines`).

    ThrottleTimeMs int32, ErrorCode int16, ErrorMessage compact nullable string, AcquisitionLockTimeoutMs int32,
    Responses [TopicId uuid, Partitions [PartitionIndex int32, ErrorCode int16, ErrorMessage string?,
      AcknowledgeErrorCode int16, AcknowledgeErrorMessage string?, CurrentLeader {LeaderId int32, LeaderEpoch int32},
      Records compact nullable bytes, AcquiredRecords [FirstOffset int64, LastOffset int64, DeliveryCount int16]]],
    NodeEndpoints [NodeId int32, Host string, Port int32, Rack string?]
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from herd.protocol.packing import compact_string, uvarint

_HEAD = struct.Struct(">ih")  # throttle time, error code
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ih")  # partition index, error code
_I16 = struct.Struct(">h")
_LEADER = struct.Struct(">iiB")  # leader id, leader epoch, no tags
_ACQUIRED = struct.Struct(">qqhB")  # first offset, last offset, delivery count, no tags
_NODE_PORT = struct.Struct(">i")
NO_TAGS = b"\x00"


class Partition(NamedTuple):
    partition_index: int
    error_code: int
    acknowledge_error_code: int
    acknowledge_error_message: str | None
    records: bytes | memoryview
    acquired: Sequence[tuple[int, int, int]]  # (first offset, last offset, delivery count)
    error_message: str | None = None
    leader: tuple[int, int] = (0, 0)  # (leader id, leader epoch)


Topic = tuple[uuid.UUID, Sequence[Partition]]
Node = tuple[int, str, int, str | None]  # (node id, host, port, rack)


def share_fetch_body(
    error_code: int,
    error_message: str | None,
    lock_timeout_ms: int,
    topics: Sequence[Topic],
    nodes: Sequence[Node] = (),
    throttle_time_ms: int = 0,
) -> list[bytes | memoryview]:
    """The body of ShareFetchResponse v1/v2, as parts to be sent one after the other: the record data of each
    partition a part of its own, everything between them joined."""
    parts: list[bytes | memoryview] = []
    out: list[bytes] = [
        _HEAD.pack(throttle_time_ms, error_code),
        compact_string(error_message),
        _I32.pack(lock_timeout_ms),
    ]
    append = out.append
    append(uvarint(len(topics) + 1))
    for topic_id, partitions in topics:
        append(topic_id.bytes)
        append(uvarint(len(partitions) + 1))
        for p in partitions:
            append(_PARTITION_HEAD.pack(p.partition_index, p.error_code))
            append(compact_string(p.error_message))
            append(_I16.pack(p.acknowledge_error_code))
            append(compact_string(p.acknowledge_error_message))
            append(_LEADER.pack(p.leader[0], p.leader[1], 0))
            records = p.records
            append(uvarint(len(records) + 1))
            if records:  # the record data as a part of its own: not copied
                parts.append(b"".join(out))
                parts.append(records)
                out = []
                append = out.append
            append(uvarint(len(p.acquired) + 1))
            for first, last, delivery_count in p.acquired:
                append(_ACQUIRED.pack(first, last, delivery_count, 0))
            append(NO_TAGS)
        append(NO_TAGS)
    append(uvarint(len(nodes) + 1))
    for node_id, host, port, rack in nodes:
        append(_I32.pack(node_id))
        append(compact_string(host))
        append(_NODE_PORT.pack(port))
        append(compact_string(rack))
        append(NO_TAGS)
    append(NO_TAGS)
    parts.append(b"".join(out))
    return parts
