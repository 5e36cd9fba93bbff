"""OffsetFetch answers packed by herd.protocol.offset_fetch_body are kio's, byte for byte, at every version it packs
(v1-v9): each drawn answer is built as kio objects the way the handler's kio path builds them (v10's) and written
with kio's writer, then packed, and the two compared; and the packed bytes read back with kio's reader."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from herd.coordinator.responses import FetchPartitionResponse
from herd.protocol.messages import EncodedBody, encode_response, response_class
from herd.protocol.offset_fetch_body import offset_fetch_body
from herd.server.apis._build import builder
from herd.server.apis.offset_fetch import _kio_topic

names = st.text(min_size=0, max_size=12)
partitions = st.builds(
    FetchPartitionResponse,
    partition_index=st.integers(0, 2**31 - 1),
    committed_offset=st.integers(-1, 2**63 - 1),
    committed_leader_epoch=st.integers(-1, 2**31 - 1),
    metadata=st.one_of(st.none(), st.just(""), names),  # "": packed in one call
    error_code=st.sampled_from([0, 3, 15, 16, 25, 30, 69, 88, 100]),
)
topics = st.lists(st.tuples(names, st.lists(partitions, max_size=5)), max_size=4)
groups = st.lists(st.tuples(names, topics, st.sampled_from([0, 14, 15, 16, 30])), min_size=1, max_size=3)


def kio_body(version: int, answer: list, throttle: int) -> bytes:
    b = builder(9, version)
    built = [
        (group_id, tuple(_kio_topic(b, version, name, None, tuple(ps)) for name, ps in ts), code)
        for group_id, ts, code in answer
    ]
    if version >= 8:
        response = b.response(
            throttle_time=throttle,
            groups=tuple(
                b("OffsetFetchResponseGroup", group_id=g, topics=ts, error_code=code) for g, ts, code in built
            ),
        )
    else:
        _, ts, code = built[0]
        response = b.response(throttle_time=throttle, topics=ts, error_code=code)
    out = io.BytesIO()
    entity_writer(type(response))(out, response)
    return out.getvalue()


@pytest.mark.parametrize("version", range(1, 10))
@given(answer=groups, throttle=st.integers(0, 2**31 - 1))
def test_packed_answers_are_kio_s(version: int, answer: list, throttle: int) -> None:
    if version < 8:
        answer = answer[:1]
    expected = kio_body(version, answer, throttle if version >= 3 else 0)
    packed = offset_fetch_body(version, answer, throttle if version >= 3 else 0)
    assert packed == expected
    cls = response_class(9, version)
    decoded, size = entity_reader(cls)(packed, 0)
    assert size == len(packed)


def test_an_encoded_body_is_framed_with_its_schema_s_header() -> None:
    for version, header_size in ((5, 4), (6, 5)):  # ResponseHeader v0 below v6, v1 (tagged fields) from v6
        body = offset_fetch_body(version, [("g", [("t", [FetchPartitionResponse(0, 7)])], 0)])
        frame = encode_response(42, EncodedBody(response_class(9, version), body))
        assert int.from_bytes(frame[:4], "big") == header_size + len(body)
        assert int.from_bytes(frame[4:8], "big") == 42 and frame[4 + header_size :] == body


def test_versions_it_does_not_pack_are_refused() -> None:
    for version in (0, 10):
        with pytest.raises(ValueError):
            offset_fetch_body(version, [("g", [], 0)])
