"""Kafka's framing, as a push/pull machine with no I/O (h11's shape).

Every request and response is a 4-byte big-endian size followed by that many bytes. `FrameDecoder.push(data)`
takes whatever the socket produced; `next_frame()` hands out one complete frame at a time (None when the next one
is not complete yet), so a connection can stop between two frames, keep the rest undecoded and carry on later.
`partial_size` is the declared size of a frame that has started to arrive but is not complete: the connection
reserves that much memory for it up front, as Kafka's `NetworkReceive` asks its `MemoryPool` for the whole frame
once it has read the size (apache/kafka clients/src/main/java/org/apache/kafka/common/network/NetworkReceive.java).
A frame whose declared size is negative or larger than `max_frame_bytes` raises `FrameTooLarge`/`MalformedFrame`
and the decoder refuses any further input, so the connection can be closed without reading the oversized body.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
_unpack_from = _SIZE.unpack_from


class FramingError(Exception):
    """The peer broke the framing; the only remedy is to close the connection."""


class FrameTooLarge(FramingError):
    pass


class MalformedFrame(FramingError):
    pass


class FrameDecoder:
    """Each byte is copied once: a frame that one `push` holds whole is sliced out of it; a frame that arrives in
    pieces is gathered in its own bytearray, which is handed out as the frame (a read-only memoryview of it: kio
    and struct read any read-only buffer). Bytes pushed and not yet pulled stay in `_data` from `_pos` on."""

    __slots__ = ("_data", "_pos", "_head", "_body", "_size", "_max", "_broken")

    def __init__(self, max_frame_bytes: int) -> None:
        self._data: bytes = b""  # the last push, consumed up to `_pos`
        self._pos = 0
        self._head = bytearray()  # the first bytes of a size prefix split across pushes
        self._body = bytearray()  # the frame being gathered when `_size` >= 0
        self._size = -1
        self._max = max_frame_bytes
        self._broken = False

    def push(self, data: bytes) -> None:
        """Adds bytes from the socket; nothing is decoded until `next_frame`."""
        if self._broken:
            return
        if self._pos < len(self._data):  # the reader stopped with frames left: rare (it pauses the socket)
            self._data = self._data[self._pos :] + data
        else:
            self._data = data
        self._pos = 0

    def next_frame(self) -> bytes | memoryview | None:
        """The next complete frame (without its size prefix), or None until more bytes are pushed.

        Raises FrameTooLarge or MalformedFrame when the next frame's size is unacceptable.
        """
        data, pos = self._data, self._pos
        if self._size < 0 and not self._head and len(data) - pos >= 4:  # fast path: a whole frame in `data`
            size = _unpack_from(data, pos)[0]
            if 0 <= size <= self._max and len(data) - pos - 4 >= size:
                pos += 4
                self._pos = pos + size
                return data[pos : pos + size]
        return self._next_frame(data, pos)

    def _next_frame(self, data: bytes, pos: int) -> bytes | memoryview | None:
        if self._broken:
            raise MalformedFrame("decoder already failed")
        end = len(data)
        if self._size < 0:
            if self._head or end - pos < 4:
                take = min(4 - len(self._head), end - pos)
                self._head += data[pos : pos + take]
                pos += take
                if len(self._head) < 4:
                    self._data, self._pos = b"", 0
                    return None
                (size,) = _SIZE.unpack(self._head)
                self._head.clear()
            else:
                (size,) = _SIZE.unpack_from(data, pos)
                pos += 4
            self._check(size)
            if end - pos >= size:
                self._pos = pos + size
                return data[pos : pos + size]
            self._size = size
        take = min(self._size - len(self._body), end - pos)
        self._body += memoryview(data)[pos : pos + take]
        pos += take
        if pos < end:
            self._pos = pos
        else:
            self._data, self._pos = b"", 0  # do not pin the socket's buffer
        if len(self._body) < self._size:
            return None
        frame = memoryview(self._body).toreadonly()
        self._body, self._size = bytearray(), -1
        return frame

    def _check(self, size: int) -> None:
        if size < 0 or size > self._max:
            self._data, self._pos = b"", 0  # keeps the fast path of next_frame out: it raises from here on
        if size < 0:
            self._broken = True
            raise MalformedFrame(f"negative frame size {size}")
        if size > self._max:
            self._broken = True
            raise FrameTooLarge(f"frame of {size} bytes exceeds socket.request.max.bytes={self._max}")

    @property
    def partial_size(self) -> int:
        """The declared size of a frame that has begun to arrive and is not complete, else -1."""
        return self._size

    @property
    def buffered(self) -> int:
        """Bytes held: pushed and not handed out (whole frames not pulled yet and the start of the next)."""
        return len(self._data) - self._pos + len(self._head) + len(self._body)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
