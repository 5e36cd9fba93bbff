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
from herd.protocol.messages import (
    MalformedRequest,
    decode_request,
    encode_body,
    encode_header,
    encode_response,
    request_class,
    response_class,
)
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


def _request_frame(api_key: int, version: int, correlation_id: int, client_id: str | None, fields: dict) -> bytes:
    cls = request_class(api_key, version)
    header_cls = cls.__header_schema__
    header = make(
        header_cls,
        {
            "request_api_key": api_key,
            "request_api_version": version,
            "correlation_id": correlation_id,
            "client_id": client_id,
        },
    )
    return _kio(header_cls, header) + _kio(cls, make(cls, fields))


def _keep_alive(member_id: str, epoch: int) -> dict:
    return {
        "group_id": "g",
        "member_id": member_id,
        "member_epoch": epoch,
        "rebalance_timeout": -1,
        "subscribed_topic_names": None,
        "topic_partitions": None,
    }


@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=2**31 - 1),
            st.sampled_from(["rdkafka", "", None]),
            st.sampled_from(["m1", "m2", "Ω"]),
            st.integers(min_value=-2, max_value=3),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_keep_alives_decoded_once_read_as_kio_reads_them(frames):
    """ConsumerGroupHeartbeat frames are decoded once (DECODED_ONCE_APIS): a frame seen before, with any correlation
    id, whole or as a memoryview, decodes to what kio reads from it."""
    cls = request_class(68, 1)
    for correlation_id, client_id, member_id, epoch, as_view in frames:
        data = _request_frame(68, 1, correlation_id, client_id, _keep_alive(member_id, epoch))
        header, request = decode_request(68, 1, memoryview(data) if as_view else data)
        kio_header, offset = entity_reader(cls.__header_schema__)(data, 0)
        assert (header.correlation_id, header.client_id) == (correlation_id, kio_header.client_id)
        assert request == entity_reader(cls)(data, offset)[0]


def test_a_malformed_frame_of_an_api_decoded_once_is_refused_every_time():
    data = _request_frame(68, 1, 7, "c", _keep_alive("m", 1))
    for _ in range(2):
        with pytest.raises(MalformedRequest):
            decode_request(68, 1, data[:-3])
    assert decode_request(68, 1, data)[1].member_id == "m"


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
