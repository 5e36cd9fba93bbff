"""Requests from this node to another node of the cluster, over the Kafka protocol (cluster mode).

Some requests only one node can carry out, though Kafka accepts them on any broker: a group's configs live with
its coordinator. Kafka's brokers forward such requests to the node that owns them (ForwardingManager, to the
controller; apache/kafka core/src/main/scala/kafka/server/ForwardingManager.scala); a herd node sends the
client's request, cut down to the one resource, to the node that owns it and answers with that node's answer.

The nodes reach each other on inter.broker.listener.name: PLAINTEXT, or SSL with `ssl` set (herd.security.tls
`peer_context`: the other node's certificate and host name are verified, this node's certificate is its own).
One connection per peer, opened on first use and kept; one request at a time on it (these are admin requests,
rare and small). A connection that fails, times out or answers out of order is closed, and the caller gets
`PeerError`, which it answers with a retriable error code. A forwarded request carries the client id
`FORWARDED_CLIENT_ID` + this node's id, and a node never forwards such a request again, so two nodes that
disagree for a moment about who owns a resource cannot pass a request back and forth.

When the nodes reach each other on a SASL listener, `login` is the SASL/PLAIN user a node authenticates as on
each new connection (SaslHandshake v1, SaslAuthenticate v2): the `username` and `password` options of that
listener's PlainLoginModule JAAS entry, which is what Kafka's brokers use to log in to each other with PLAIN
(herd.server.sasl.inter_broker_login).
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from typing import Any

from herd.protocol.messages import decode_response, encode_request, request_class
from herd.protocol.values import make
from herd.security.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE

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
        self.ssl: ssl.SSLContext | None = None  # with an SSL inter-broker listener: how to reach the other nodes
        self._connections: dict[tuple[str, int], _Connection] = {}
        self.login: tuple[str, str] | None = None  # (user, password) for SASL/PLAIN, set by the server

    async def request(self, host: str, port: int, api_key: int, version: int, request: Any) -> Any:
        """The peer's response body to `request` (a kio request entity of `version`); raises PeerError."""
        address = (host, port)
        connection = self._connections.get(address)
        if connection is None or connection.closed:
            connection = self._connections[address] = _Connection(host, port, self.ssl, self.login)
        try:
            return await asyncio.wait_for(connection.call(api_key, version, request, self.client_id), self.timeout_s)
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
    def __init__(
        self, host: str, port: int, context: ssl.SSLContext | None = None, login: tuple[str, str] | None = None
    ) -> None:
        self.host, self.port = host, port
        self.context = context
        self._login = login
        self.closed = False
        self._lock = asyncio.Lock()
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation = 0
        self._expires_at: float | None = None  # loop time to log in again by (connections.max.reauth.ms)

    async def call(self, api_key: int, version: int, request: Any, client_id: str) -> Any:
        async with self._lock:
            if self._expires_at is not None and asyncio.get_running_loop().time() >= self._expires_at:
                self._streams[1].close()  # type: ignore[index]  # a new connection rather than re-authenticating
                self._streams, self._expires_at = None, None
            if self._streams is None:
                self._streams = await asyncio.open_connection(
                    self.host, self.port, ssl=self.context, server_hostname=self.host if self.context else None
                )
                if self._login is not None:
                    await self._authenticate(client_id)
            return await self._call(api_key, version, request, client_id)

    async def _authenticate(self, client_id: str) -> None:
        user, password = self._login  # type: ignore[misc]
        handshake = await self._call(
            SASL_HANDSHAKE, 1, make(request_class(SASL_HANDSHAKE, 1), {"mechanism": "PLAIN"}), client_id
        )
        if handshake.error_code:
            raise PeerError(f"node {self.host}:{self.port} refused SASL/PLAIN (error {int(handshake.error_code)})")
        token = f"\0{user}\0{password}".encode()
        answer = await self._call(
            SASL_AUTHENTICATE, 2, make(request_class(SASL_AUTHENTICATE, 2), {"auth_bytes": token}), client_id
        )
        if answer.error_code:
            raise PeerError(
                f"node {self.host}:{self.port} did not authenticate this node as {user}: {answer.error_message}"
            )
        lifetime = answer.session_lifetime.total_seconds()
        if lifetime > 0:  # well before the session ends
            self._expires_at = asyncio.get_running_loop().time() + lifetime * 0.8

    async def _call(self, api_key: int, version: int, request: Any, client_id: str) -> Any:
        assert self._streams is not None
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
