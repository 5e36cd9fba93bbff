"""Requests from this node to another node of the cluster, over the Kafka protocol (cluster mode).

Some requests only one node can carry out, though Kafka accepts them on any broker: a group's configs live with
its coordinator. Kafka's brokers forward such requests to the node that owns them (ForwardingManager, to the
controller; apache/kafka core/src/main/scala/kafka/server/ForwardingManager.scala); a herd node sends the
client's request, cut down to the one resource, to the node that owns it and answers with that node's answer.

One connection per peer, opened on first use and kept; one request at a time on it (these are admin requests,
rare and small). A connection that fails, times out or answers out of order is closed, and the caller gets
`PeerError`, which it answers with a retriable error code. A forwarded request carries the client id
`FORWARDED_CLIENT_ID` + this node's id, and a node never forwards such a request again, so two nodes that
disagree for a moment about who owns a resource cannot pass a request back and forth.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from herd.protocol.messages import decode_response, encode_request

FORWARDED_CLIENT_ID = "herd-forwarded-by-node-"
TIMEOUT_S = 10.0
MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # what a peer may answer at most (admin answers are small)
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


class PeerError(Exception):
    """The peer could not be asked or did not answer (unreachable, connection lost, timed out, garbled)."""


def forwarded(client_id: str | None) -> bool:
    """Whether a request came from another node that forwarded it here."""
    return (client_id or "").startswith(FORWARDED_CLIENT_ID)


class Peers:
    """This node's connections to the others; `request` is the only way in."""

    def __init__(self, node_id: int, timeout_s: float = TIMEOUT_S) -> None:
        self.client_id = f"{FORWARDED_CLIENT_ID}{node_id}"
        self.timeout_s = timeout_s
        self._connections: dict[tuple[str, int], _Connection] = {}

    async def request(self, host: str, port: int, api_key: int, version: int, request: Any) -> Any:
        """The peer's response body to `request` (a kio request entity of `version`); raises PeerError."""
        address = (host, port)
        connection = self._connections.get(address)
        if connection is None or connection.closed:
            connection = self._connections[address] = _Connection(host, port)
        try:
            return await asyncio.wait_for(connection.call(api_key, version, request, self.client_id),
                                          self.timeout_s)
        except Exception as error:  # whatever went wrong, the connection is not to be trusted again
            connection.close()
            if self._connections.get(address) is connection:
                del self._connections[address]
            if isinstance(error, PeerError):
                raise
            raise PeerError(f"node {host}:{port} did not answer: {error!r}") from error

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


class _Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.closed = False
        self._lock = asyncio.Lock()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation = 0

    async def call(self, api_key: int, version: int, request: Any, client_id: str) -> Any:
        async with self._lock:
            if self._streams is None:
                self._streams = await asyncio.open_connection(self.host, self.port)
            reader, writer = self._streams
            self._correlation += 1
            writer.write(encode_request(request, api_key, version, self._correlation, client_id))
            await writer.drain()
            size = _SIZE.unpack(await reader.readexactly(_SIZE.size))[0]
            if not _CORRELATION.size <= size <= MAX_RESPONSE_BYTES:
                raise PeerError(f"node {self.host}:{self.port} answered a frame of {size} bytes")
            frame = await reader.readexactly(size)
            if _CORRELATION.unpack_from(frame)[0] != self._correlation:
                raise PeerError(f"node {self.host}:{self.port} answered another request")
            return decode_response(frame, api_key, version)

    def close(self) -> None:
        self.closed = True
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None
