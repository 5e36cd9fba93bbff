"""Kafka's framing, as a push/pull machine with no I/O (h11's shape).

Every request and response is a 4-byte big-endian size followed by that many bytes. `FrameDecoder.feed(data)`
takes whatever the socket produced and returns the complete frames it now holds; a frame whose declared size is
negative or larger than `max_frame_bytes` raises `FrameTooLarge`/`MalformedFrame` and the decoder refuses any
further input, so the connection can be closed without reading the oversized body.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FramingError(Exception):
    """The peer broke the framing; the only remedy is to close the connection."""


class FrameTooLarge(FramingError):
    pass


class MalformedFrame(FramingError):
    pass


class FrameDecoder:
    """Each byte is copied once: a frame that one `feed` holds whole is sliced out of it; a frame that arrives in
    pieces is gathered in its own bytearray, which is handed out as the frame (a read-only memoryview of it: kio and struct read any read-only buffer)."""

    __slots__ = ("_head", "_body", "_size", "_max", "_broken")

    def __init__(self, max_frame_bytes: int) -> None:
        self._head = bytearray()  # the first bytes of a size prefix split across feeds
        self._body = bytearray()  # the frame being gathered when `_size` >= 0
        self._size = -1
        self._max = max_frame_bytes
        self._broken = False

    def feed(self, data: bytes) -> list[bytes]:
        """Returns the frames completed by `data` (without their size prefix).

        Raises FrameTooLarge or MalformedFrame when the next frame's size is unacceptable.
        """
        if self._broken:
            raise MalformedFrame("decoder already failed")
        frames: list[bytes] = []
        pos, end = 0, len(data)
        view = memoryview(data)
        while pos < end:
            if self._size < 0:
                if self._head or end - pos < 4:
                    take = min(4 - len(self._head), end - pos)
                    self._head += view[pos : pos + take]
                    pos += take
                    if len(self._head) < 4:
                        break
                    (size,) = _SIZE.unpack(self._head)
                    self._head.clear()
                else:
                    (size,) = _SIZE.unpack_from(data, pos)
                    pos += 4
                self._check(size)
                if end - pos >= size:
                    frames.append(data[pos : pos + size])
                    pos += size
                    continue
                self._size = size
            take = min(self._size - len(self._body), end - pos)
            self._body += view[pos : pos + take]
            pos += take
            if len(self._body) == self._size:
                frames.append(memoryview(self._body).toreadonly())  # type: ignore[arg-type]  # kio wants read-only
                self._body, self._size = bytearray(), -1
        return frames

    def _check(self, size: int) -> None:
        if size < 0:
            self._broken = True
            raise MalformedFrame(f"negative frame size {size}")
        if size > self._max:
            self._broken = True
            raise FrameTooLarge(f"frame of {size} bytes exceeds socket.request.max.bytes={self._max}")

    @property
    def buffered(self) -> int:
        return len(self._head) + len(self._body)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
