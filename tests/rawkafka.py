"""A tiny blocking Kafka protocol client for tests that need to send exact bytes (built on kio, like herd)."""

from __future__ import annotations

import io
import socket
import struct
import sys
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from herd.protocol.messages import request_class, response_class
from herd.protocol.values import make


def req(api_key: int, version: int, /, **fields: Any) -> Any:
    """The kio request of that version, from newest-version field names (fields it lacks are dropped)."""
    return make(request_class(api_key, version), fields)


def part(api_key: int, version: int, class_name: str, /, **fields: Any) -> Any:
    """A nested class of that version's request, or None where the version has no such class."""
    cls = getattr(sys.modules[request_class(api_key, version).__module__], class_name, None)
    return None if cls is None else make(cls, fields)


class RawClient:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0, *,
                 sock: socket.socket | None = None) -> None:  # fmt: skip
        """Connects to host:port, or speaks over `sock` when given (a socket opened some other way)."""
        self.sock = sock if sock is not None else socket.create_connection((host, port), timeout=timeout)
        self._correlation = 0
        self.last_correlation_id = -1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def encode(self, api_key: int, version: int, request: Any, client_id: str = "raw") -> bytes:
        cls = request_class(api_key, version)
        header_cls = cls.__header_schema__
        self._correlation += 1
        buf = io.BytesIO()
        entity_writer(header_cls)(
            buf,
            header_cls(
                request_api_key=i16(api_key),
                request_api_version=i16(version),
                correlation_id=i32(self._correlation),
                client_id=client_id,
            ),
        )
        entity_writer(cls)(buf, request)
        body = buf.getvalue()
        return struct.pack(">i", len(body)) + body

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int, request: Any) -> Any:
        self.send_raw(self.encode(api_key, version, request))
        return self.read_response(api_key, version)

    def read_response(self, api_key: int, version: int) -> Any:
        frame = self.recv_frame()
        cls = response_class(api_key, version)
        header, offset = entity_reader(cls.__header_schema__)(frame, 0)
        self.last_correlation_id = header.correlation_id
        body, _ = entity_reader(cls)(frame, offset)
        return body

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection (recv returns EOF or the connection resets)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
