"""The body of an OffsetFetch answer (v1-v9), packed directly: every consumer fetches its group's committed offsets
after each rebalance, so a large group's rebalance waits for many of these answers, each of a partition list
(issue 33: 100 partitions took 710 us on the 2-core machine, half of it building kio's objects and half kio's
writer; packed here, about a tenth).

The layout is kio's schema of OffsetFetchResponse v1-v9 (kio/schema/offset_fetch/v*/response.py, generated from
Kafka's OffsetFetchResponse.json), field for field; tests/unit/protocol/test_offset_fetch_body.py checks it against
kio's writer byte for byte at every version. v10 (topics by id) goes through kio. kio's primitive writers
(kio.serial.writers) are not used: each builds a phantom-typed value (uvarint, i16) and checks it, which made a
string's write 3 times this module's (650 against 220 ns, measured).

- v1: Topics[Name, Partitions[PartitionIndex, CommittedOffset, Metadata (nullable), ErrorCode]];
- v2: and a top-level ErrorCode; v3: ThrottleTimeMs first; v5: CommittedLeaderEpoch after CommittedOffset;
- v6-v7: flexible (compact lengths, an empty tagged-field section after each struct and the body);
- v8-v9: ThrottleTimeMs, Groups[GroupId, Topics[...], ErrorCode] (KIP-709).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from herd.protocol.packing import compact_string, uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_V1 = struct.Struct(">iq")  # partition index, committed offset
_PARTITION_V5 = struct.Struct(">iqi")  # and the committed leader epoch
# a whole partition whose metadata is "" (what consumers commit) in one pack, by version: v1-v4 (metadata length 0,
# error code), v5, v6-v9 (compact length 1, error code, no tags)
_EMPTY_METADATA_V1 = struct.Struct(">iqhh")
_EMPTY_METADATA_V5 = struct.Struct(">iqihh")
_EMPTY_METADATA_V6 = struct.Struct(">iqiBhB")
NO_TAGS = b"\x00"


Partition = tuple[int, int, int, str | None, int]
"""(partition index, committed offset, committed leader epoch, metadata, error code): the fields of
herd.coordinator.responses.FetchPartitionResponse, a NamedTuple, in its order."""


Topic = tuple[str, Sequence[Partition]]  # (name, partitions)
Group = tuple[str, Sequence[Topic], int]  # (group id, topics, error code)


def _string(value: str | None, flexible: bool) -> bytes:
    if flexible:
        return compact_string(value)
    if value is None:
        return b"\xff\xff"
    data = value.encode()
    return _I16.pack(len(data)) + data


def _length(count: int, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else _I32.pack(count)


def _topics(version: int, topics: Sequence[Topic], out: list[bytes]) -> None:
    flexible = version >= 6
    with_epoch = version >= 5
    append = out.append
    append(_length(len(topics), flexible))
    for name, partitions in topics:
        append(_string(name, flexible))
        append(_length(len(partitions), flexible))
        for index, offset, epoch, metadata, error_code in partitions:
            if metadata == "":  # what consumers commit: the whole partition in one pack, the same bytes
                if flexible:
                    append(_EMPTY_METADATA_V6.pack(index, offset, epoch, 1, error_code, 0))
                elif with_epoch:
                    append(_EMPTY_METADATA_V5.pack(index, offset, epoch, 0, error_code))
                else:
                    append(_EMPTY_METADATA_V1.pack(index, offset, 0, error_code))
                continue
            if with_epoch:
                append(_PARTITION_V5.pack(index, offset, epoch))
            else:
                append(_PARTITION_V1.pack(index, offset))
            append(_string(metadata, flexible))
            append(_I16.pack(error_code))
            if flexible:
                append(NO_TAGS)
        if flexible:
            append(NO_TAGS)


def offset_fetch_body(version: int, groups: Sequence[Group], throttle_time_ms: int = 0) -> bytes:
    """The body of OffsetFetchResponse `version` (1-9): `groups` has one entry below v8 (its topics and error code
    are the answer's; its id is not written)."""
    if not 1 <= version <= 9:
        raise ValueError(f"OffsetFetch v{version} is not packed here")
    out: list[bytes] = []
    if version >= 3:
        out.append(_I32.pack(throttle_time_ms))
    if version >= 8:
        out.append(_length(len(groups), True))
        for group_id, topics, error_code in groups:
            out.append(_string(group_id, True))
            _topics(version, topics, out)
            out.append(_I16.pack(error_code))
            out.append(NO_TAGS)
    else:
        (_, topics, error_code) = groups[0]
        _topics(version, topics, out)
        if version >= 2:
            out.append(_I16.pack(error_code))
    if version >= 6:
        out.append(NO_TAGS)
    return b"".join(out)
