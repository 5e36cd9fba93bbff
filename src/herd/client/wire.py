"""Client-side messages through kio: build a request of any version, frame it, read the response.

Every version of a Kafka message is its own kio module. `RequestBuilder(api_key, version)` lets the caller
describe a request once, with the field names of the newest version, and builds the classes of the
negotiated version from it: fields the version lacks are dropped (a name no version has raises `UnknownName`)
and plain Python values are turned into
the types kio's writer expects (milliseconds into `timedelta`, ints into `ErrorCode`) with
herd.protocol.values, which the server's response builder uses in the other direction. `encode_request` writes the
header and body with the size
prefix; `decode_response` reads a response frame (the header's correlation id first).

The versions the client can speak are in `CLIENT_VERSIONS`: for each API the range its code handles, cut
to the versions kio has. `negotiate` picks, per API, the highest version both the client and the broker
(as told by ApiVersions) support.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, Final

from kio.index import load_request_schema
from kio.schema.index import api_key_map, schema_name_map

from herd.protocol.messages import decode_response, encode_request
from herd.protocol.values import MessageBuilder, UnknownName, field_types, make, schema_names

__all__ = [
    "API_NAMES",
    "CLIENT_VERSIONS",
    "RequestBuilder",
    "decode_response",
    "encode_request",
    "kio_versions",
    "negotiate",
    "request_builder",
]

# The versions whose shape the client's code handles, per API key (before cutting to kio's versions).
_HANDLED: Final[dict[int, tuple[int, int]]] = {
    1: (4, 12),  # Fetch (v13+ names topics by id)
    2: (1, 9),  # ListOffsets
    3: (1, 12),  # Metadata
    8: (2, 9),  # OffsetCommit (v10 names topics by id)
    9: (1, 9),  # OffsetFetch (v10 names topics by id)
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    17: (1, 1),  # SaslHandshake (v0's raw SASL tokens after it are not spoken: v1 + SaslAuthenticate)
    18: (0, 3),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    27: (1, 1),  # WriteTxnMarkers (the admin's abort; v0 was removed in Kafka 4.0)
    29: (1, 3),  # DescribeAcls (v1 adds the pattern type, KIP-290)
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    47: (0, 0),  # OffsetDelete
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions (v2 adds a transactional id pattern, KIP-1152)
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848; v1: the client makes its member id, KIP-1082)
    69: (0, 1),  # ConsumerGroupDescribe (KIP-848)
    77: (1, 1),  # ShareGroupDescribe (KIP-932)
    90: (0, 1),  # DescribeShareGroupOffsets (v1 adds the lag, KIP-1226)
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
}

API_NAMES: Final[dict[int, str]] = {key: name.title().replace("_", "") for key, name in api_key_map.items()}


def kio_versions(api_key: int) -> tuple[int, int]:
    """The lowest and highest version of an API kio has schemas for."""
    versions = schema_name_map[api_key_map[api_key]]
    return min(versions), max(versions)


def _cut(api_key: int, handled: tuple[int, int]) -> tuple[int, int]:
    low, high = kio_versions(api_key)
    return max(low, handled[0]), min(high, handled[1])


CLIENT_VERSIONS: Final[dict[int, tuple[int, int]]] = {key: _cut(key, r) for key, r in _HANDLED.items()}


def negotiate(broker: Mapping[int, tuple[int, int]]) -> dict[int, int]:
    """API key -> the highest version both sides support, for every API they share a version of."""
    chosen = {}
    for key, (low, high) in CLIENT_VERSIONS.items():
        if key not in broker:
            continue
        b_low, b_high = broker[key]
        version = min(high, b_high)
        if version >= max(low, b_low):
            chosen[key] = version
    return chosen


class RequestBuilder(MessageBuilder):
    """`b("JoinGroupRequestProtocol", name=..., metadata=...)` builds that class of the request's version (None
    when the version has no such class), `b.request(...)` the request itself."""

    __slots__ = ("api_key", "version", "request_cls")

    def __init__(self, api_key: int, version: int) -> None:
        self.api_key = api_key
        self.version = version
        self.request_cls: type = load_request_schema(api_key, version)
        super().__init__(self.request_cls)

    def request(self, **values: Any) -> Any:
        return make(self.request_cls, values)

    def has_field(self, name: str) -> bool:
        """Whether the request's version has field `name` (UnknownName if no version has)."""
        if name in field_types(self.request_cls):
            return True
        if name not in schema_names(self.module)[self.request_cls.__name__]:
            raise UnknownName(f"no version of {self.request_cls.__name__} has a field {name!r}")
        return False


@cache
def request_builder(api_key: int, version: int) -> RequestBuilder:
    return RequestBuilder(api_key, version)
