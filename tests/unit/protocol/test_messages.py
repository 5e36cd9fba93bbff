"""The kio glue: framing of responses, the header fast path and the cached bodies agree with kio byte for byte."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.response_header.v0.header import ResponseHeader as V0
from kio.schema.response_header.v1.header import ResponseHeader as V1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from herd.protocol.framing import FrameDecoder, FrameTooLarge, MalformedFrame, frame
from herd.protocol.messages import encode_body, encode_header, encode_response, response_class
from herd.protocol.values import make


def _kio(cls, value) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, value)
    return buf.getvalue()


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_header_fast_path_matches_kio(correlation_id):
    assert encode_header(V0, correlation_id) == _kio(V0, V0(correlation_id=i32(correlation_id)))
    assert encode_header(V1, correlation_id) == _kio(V1, V1(correlation_id=i32(correlation_id)))


@pytest.mark.parametrize("version", range(0, 5))
@pytest.mark.parametrize("error", [0, 16, 22, 25, 27, 82])
def test_cached_heartbeat_bodies_match_kio(version, error):
    cls = response_class(12, version)
    response = make(cls, {"throttle_time": 0, "error_code": error})
    assert encode_body(response) == _kio(cls, response)
    assert encode_body(response) == _kio(cls, response)  # the second time from the cache
    frame_bytes = encode_response(9, response)
    header, offset = entity_reader(cls.__header_schema__)(frame_bytes, 4)
    body, _ = entity_reader(cls)(frame_bytes, 4 + offset)
    assert header.correlation_id == 9 and body == response


def test_uncached_bodies_are_encoded_each_time():
    cls = response_class(18, 3)
    a = make(cls, {"error_code": 0, "api_keys": (), "throttle_time": 0})
    assert encode_body(a) == _kio(cls, a)


def feed(decoder: FrameDecoder, data: bytes) -> list[bytes | memoryview]:
    """Push `data` and take every frame it completes."""
    decoder.push(data)
    frames = []
    while (frame_ := decoder.next_frame()) is not None:
        frames.append(frame_)
    return frames


def test_frame_decoder_splits_and_joins():
    d = FrameDecoder(100)
    data = frame(b"abc") + frame(b"") + frame(b"x" * 100)
    out = []
    for i in range(len(data)):  # one byte at a time
        out += feed(d, data[i : i + 1])
    assert out == [b"abc", b"", b"x" * 100] and d.buffered == 0


def test_frame_decoder_refuses_oversized_and_negative():
    with pytest.raises(FrameTooLarge):
        feed(FrameDecoder(10), frame(b"x" * 11))
    with pytest.raises(MalformedFrame):
        feed(FrameDecoder(10), b"\xff\xff\xff\xff")
