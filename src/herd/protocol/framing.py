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
    __slots__ = ("_buffer", "_max", "_broken")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes
        self._broken = False

    def feed(self, data: bytes) -> list[bytes]:
        """Returns the frames completed by `data` (without their size prefix).

        Raises FrameTooLarge or MalformedFrame when the next frame's size is unacceptable.
        """
        if self._broken:
            raise MalformedFrame("decoder already failed")
        buf = self._buffer
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0:
                self._broken = True
                raise MalformedFrame(f"negative frame size {size}")
            if size > self._max:
                self._broken = True
                raise FrameTooLarge(f"frame of {size} bytes exceeds socket.request.max.bytes={self._max}")
            if end - pos - 4 < size:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buffer)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
