"""FrameDecoder's pull side: one frame at a time, the rest kept undecoded, a partial frame's declared size known."""

from __future__ import annotations

import pytest

from herd.protocol.framing import FrameDecoder, FrameTooLarge, FramingError, frame


def test_frames_are_pulled_one_at_a_time_and_the_rest_waits():
    d = FrameDecoder(100)
    d.push(frame(b"a") + frame(b"bb") + frame(b"ccc")[:5])
    assert bytes(d.next_frame()) == b"a"
    assert d.buffered == 6 + 5  # the second frame and the start of the third stay undecoded
    assert d.partial_size == -1
    d.push(b"")  # more input while frames are left (the reader stopped between two): nothing is lost
    assert bytes(d.next_frame()) == b"bb"
    assert d.next_frame() is None
    assert d.partial_size == 3  # declared size of the frame being received, for the memory pool
    d.push(b"cc" + frame(b"dd"))
    assert bytes(d.next_frame()) == b"ccc"
    assert d.partial_size == -1
    assert bytes(d.next_frame()) == b"dd"
    assert d.next_frame() is None and d.buffered == 0


def test_a_push_while_bytes_are_left_keeps_their_order():
    d = FrameDecoder(100)
    d.push(frame(b"x") + frame(b"yy"))
    assert bytes(d.next_frame()) == b"x"
    d.push(frame(b"zzz"))
    assert [bytes(f) for f in iter(d.next_frame, None)] == [b"yy", b"zzz"]


def test_split_size_prefix_and_body_in_single_bytes():
    d = FrameDecoder(100)
    data = frame(b"hello") + frame(b"") + frame(b"world")
    out = []
    for i in range(len(data)):
        d.push(data[i : i + 1])
        out += [bytes(f) for f in iter(d.next_frame, None)]
    assert out == [b"hello", b"", b"world"]


def test_an_oversized_frame_is_refused_when_pulled():
    d = FrameDecoder(10)
    d.push(frame(b"ok") + frame(b"x" * 11))
    assert bytes(d.next_frame()) == b"ok"
    with pytest.raises(FrameTooLarge):
        d.next_frame()


def test_after_a_refused_frame_nothing_more_is_decoded():
    d = FrameDecoder(10)
    d.push(frame(b"x" * 11))
    with pytest.raises(FrameTooLarge):
        d.next_frame()
    d.push(frame(b"ok"))
    with pytest.raises(FramingError):
        d.next_frame()
