"""Request headers and message bodies, through kio.

`peek_prefix(frame)` reads a frame's first eight bytes (api key, api version, correlation id), the only bytes
read by hand, before the header's schema is known. `decode_request(api_key, api_version, frame)` turns the
frame into (RequestHeader, request) with kio's generated classes for that API version.
`encode_response_parts(correlation_id, response)` and `encode_response(correlation_id, response)` do the
reverse for the answer, with the header version the response's schema names; the first gives buffers for
`transport.writelines` that keep record data by reference. Readers and writers are built once per class and
cached; so are the bodies of Heartbeat and OffsetCommit answers, which repeat byte for byte. `ApiSpec` is one
row of the API table.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

from kio.index import load_request_schema, load_response_schema
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from herd.protocol.values import make

_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class MalformedRequest(Exception):
    """The frame cannot be decoded as the request it claims to be."""


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One row of the API table: a Kafka API, the versions herd serves, and the module answering it."""

    key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable[..., Any]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class RequestHeader(NamedTuple):
    """A request's header as handlers see it. A NamedTuple, not a frozen dataclass: one is made per request,
    and a frozen dataclass costs four times as much to construct (0.8 us against 0.2 us on the 2-core
    machine, a twentieth of a heartbeat's whole cost)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_prefix(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame; raises MalformedRequest if it is too short."""
    if len(frame) < _PREFIX.size:
        raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
    return _PREFIX.unpack_from(frame)


@cache
def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@cache
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@cache
def _reader(cls: type) -> Callable[[bytes, int], tuple[Any, int]]:
    return entity_reader(cls)


@cache
def _writer(cls: type) -> Callable[[Any, Any], None]:
    return entity_writer(cls)


# (api_key << 8 | api_version) -> the request class, its header's reader and its body's reader: one dict lookup
# per request instead of three cached calls (0.5 us of a heartbeat's 1.2 us decode on the 2-core machine). The APIs
# decoded once (below) are never in it, so that the others' path has no test for them.
_READERS: dict[int, tuple[type, Callable[[bytes, int], tuple[Any, int]], Callable[[bytes, int], tuple[Any, int]]]] = {}
_ONCE_READERS: dict[int, tuple[type, Any, Any]] = {}

# Requests whose frames repeat byte for byte after the correlation id, decoded once: a KIP-848 member's keep-alive
# ConsumerGroupHeartbeat (its group, member id and epoch, every other field null or -1, as KIP-848 has a reconciled
# member send) is the same bytes each time until its epoch moves. kio's decode of one took 1.4 us; a lookup of its
# bytes, 0.2 us. kio's requests are immutable, so one object serves every copy of the frame.
DECODED_ONCE_APIS = frozenset({68})
_DECODED: dict[bytes, tuple[str | None, Any]] = {}
_DECODED_MAX = 16384


def _readers_of(api_key: int, api_version: int) -> tuple[type, Any, Any]:
    cls = request_class(api_key, api_version)
    readers = (cls, _reader(cls.__header_schema__), _reader(cls))
    (_ONCE_READERS if api_key in DECODED_ONCE_APIS else _READERS)[api_key << 8 | api_version] = readers
    return readers


def decode_request(api_key: int, api_version: int, frame: bytes) -> tuple[RequestHeader, Any]:
    """Raises MalformedRequest when kio cannot read the header or body."""
    readers = _READERS.get(api_key << 8 | api_version)
    if readers is None:
        if api_key in DECODED_ONCE_APIS:
            return _decode_once(api_key, api_version, frame)
        readers = _readers_of(api_key, api_version)
    cls, read_header, read_body = readers
    try:
        header, offset = read_header(frame, 0)
        body, size = read_body(frame, offset)
    except Exception as e:  # kio's native reader raises several kinds; all mean "not this message"
        raise MalformedRequest(f"cannot decode {cls.__name__} v{api_version}: {e}") from e
    # Bytes after the body are ignored, as Kafka's request parsing ignores them: librdkafka 2.16 sends three
    # extra bytes after its Metadata v13 body, for one.
    return RequestHeader(api_key, api_version, header.correlation_id, header.client_id), body


def _decode_once(api_key: int, api_version: int, frame: bytes) -> tuple[RequestHeader, Any]:
    """`decode_request` of an API in DECODED_ONCE_APIS: a frame seen before is not decoded again."""
    key = bytes(frame[_PREFIX.size :])  # the client id, the header's tagged fields and the body
    decoded = _DECODED.get(key)
    if decoded is not None:
        return RequestHeader(api_key, api_version, _PREFIX.unpack_from(frame)[2], decoded[0]), decoded[1]
    cls, read_header, read_body = _ONCE_READERS.get(api_key << 8 | api_version) or _readers_of(api_key, api_version)
    try:
        header, offset = read_header(frame, 0)
        body, size = read_body(frame, offset)
    except Exception as e:  # kio's native reader raises several kinds; all mean "not this message"
        raise MalformedRequest(f"cannot decode {cls.__name__} v{api_version}: {e}") from e
    if len(_DECODED) >= _DECODED_MAX:
        _DECODED.clear()
    _DECODED[key] = (header.client_id, body)
    return RequestHeader(api_key, api_version, header.correlation_id, header.client_id), body


_HEADER_V0 = struct.Struct(">i")  # ResponseHeader v0: correlation id
_HEADER_V1 = struct.Struct(">ib")  # ResponseHeader v1: correlation id, empty tagged fields
_FAST_HEADERS = {ResponseHeaderV0: _HEADER_V0, ResponseHeaderV1: _HEADER_V1}

# Bodies of small, frequent answers that repeat byte for byte (a heartbeat's is one of a handful of values per
# version), encoded once. Measured on the 2-core machine: a Heartbeat answer took 16 us through kio, of which
# 4.6 us the header and most of the rest the body; with both fast paths it is about 1 us.
# OffsetCommit (its answers are shared objects, apis/offset_commit.py), Heartbeat, ConsumerGroupHeartbeat (a member's
# keep-alive answer is one object per epoch, apis/consumer_group_heartbeat.py)
CACHED_BODY_APIS = frozenset({8, 12, 68})
_BODY_CACHE: dict[Any, bytes] = {}
_BODY_CACHE_MAX = 16384


def _encode_body(response: Any) -> bytes:
    buf = io.BytesIO()
    _writer(type(response))(buf, response)
    return buf.getvalue()


def encode_body(response: Any) -> bytes:
    """The response body (no header), cached for the APIs in CACHED_BODY_APIS."""
    if type(response).__api_key__ not in CACHED_BODY_APIS:
        return _encode_body(response)
    body = _BODY_CACHE.get(response)
    if body is None:
        if len(_BODY_CACHE) >= _BODY_CACHE_MAX:
            _BODY_CACHE.clear()
        body = _BODY_CACHE[response] = _encode_body(response)
    return body


def encode_header(header_cls: type, correlation_id: int) -> bytes:
    """The response header. v0 and v1 have a fixed layout (checked against kio's writer in the tests) and are
    packed directly; any other version goes through kio."""
    fast = _FAST_HEADERS.get(header_cls)
    if fast is _HEADER_V0:
        return fast.pack(correlation_id)
    if fast is not None:
        return fast.pack(correlation_id, 0)
    buf = io.BytesIO()
    _writer(header_cls)(buf, header_cls(correlation_id=i32(correlation_id)))
    return buf.getvalue()


class _Parts:
    """A kio `Writable` that keeps large values (record data) by reference instead of copying them into one
    buffer; small writes are gathered in a bytearray."""

    __slots__ = ("parts", "small", "size")
    LARGE = 16 * 1024

    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.small = bytearray()
        self.size = 0

    def write(self, data: Any) -> int:
        n = len(data)
        if n >= self.LARGE:
            if self.small:
                self.parts.append(self.small)
                self.small = bytearray()
            self.parts.append(data)
        else:
            self.small += data
        self.size += n
        return n


class EncodedBody:
    """A response whose body a handler packed itself (herd.protocol.offset_fetch_body, share_fetch_body), in the
    layout of kio's class `schema` (whose header version it is answered with): bytes, or parts sent one after the
    other (record data among them, not copied)."""

    __slots__ = ("schema", "body")

    def __init__(self, schema: type, body: bytes | list[bytes | memoryview]) -> None:
        self.schema, self.body = schema, body


def encode_response_parts(correlation_id: int, response: Any) -> list[Any]:
    """The response frame as buffers for `transport.writelines`; record data in it is not copied."""
    cls = type(response)
    if cls is EncodedBody:
        header = encode_header(response.schema.__header_schema__, correlation_id)
        body = response.body
        if type(body) is bytes:
            return [_SIZE.pack(len(header) + len(body)) + header + body]
        return [_SIZE.pack(len(header) + sum(map(len, body))) + header, *body]
    header = encode_header(cls.__header_schema__, correlation_id)
    if cls.__api_key__ in CACHED_BODY_APIS:
        body = encode_body(response)
        return [_SIZE.pack(len(header) + len(body)) + header + body]
    out = _Parts()
    _writer(cls)(out, response)
    prefix = _SIZE.pack(len(header) + out.size) + header
    if not out.parts:
        return [prefix + out.small]
    if out.small:
        out.parts.append(out.small)
    return [prefix, *out.parts]


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The response frame (size prefix included) with the header version the response's schema names."""
    if type(response) is EncodedBody:
        return b"".join(encode_response_parts(correlation_id, response))
    header = encode_header(type(response).__header_schema__, correlation_id)
    body = encode_body(response)
    return _SIZE.pack(len(header) + len(body)) + header + body


__all__ = [
    "ApiSpec",
    "EncodedBody",
    "MalformedRequest",
    "RequestHeader",
    "decode_request",
    "encode_response",
    "encode_response_parts",
    "peek_prefix",
    "request_class",
    "response_class",
]


# -- the client's side: requests out, responses in (herd's client library, and one node asking another) ---------


def encode_request(request: Any, api_key: int, version: int, correlation_id: int, client_id: str) -> bytes:
    """The request frame, size prefix included, with the header version the request's schema names."""
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    header_cls = type(request).__header_schema__
    header = make(
        header_cls,
        {
            "request_api_key": i16(api_key),
            "request_api_version": i16(version),
            "correlation_id": i32(correlation_id),
            "client_id": client_id,
        },
    )
    _writer(header_cls)(buf, header)
    _writer(type(request))(buf, request)
    data = buf.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def decode_response(frame: bytes, api_key: int, version: int) -> Any:
    """The response body of a frame (without its size prefix); kio raises on malformed bytes."""
    cls = response_class(api_key, version)
    _, offset = _reader(cls.__header_schema__)(frame, 0)
    body, _ = _reader(cls)(frame, offset)
    return body
