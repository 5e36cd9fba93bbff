"""ShareFetch answers packed by herd.protocol.share_fetch_body are kio's, byte for byte, at v1 and v2: each drawn
answer is built as kio objects and written with kio's writer, then packed, and the two compared; the packed bytes
are read back with kio's reader, and framed as the connection frames them."""

from __future__ import annotations

import io
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from herd.protocol.messages import EncodedBody, encode_response, encode_response_parts, response_class
from herd.protocol.share_fetch_body import Partition, share_fetch_body
from herd.server.apis._build import builder

texts = st.one_of(st.none(), st.text(max_size=12))
i16s = st.integers(-(2**15), 2**15 - 1)
i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
partitions = st.builds(
    Partition,
    partition_index=i32s,
    error_code=st.sampled_from([0, 3, 6, 29, 100, 119]),
    acknowledge_error_code=st.sampled_from([0, 4, 42, 121]),
    acknowledge_error_message=texts,
    records=st.one_of(st.just(b""), st.binary(max_size=300)),
    acquired=st.lists(st.tuples(i64s, i64s, i16s), max_size=4),
    error_message=texts,
    leader=st.tuples(i32s, i32s),
)
topics = st.lists(st.tuples(st.uuids(), st.lists(partitions, max_size=4)), max_size=3)
nodes = st.lists(st.tuples(i32s, st.text(max_size=10), i32s, texts), max_size=2)


def kio_body(version: int, error_code, error_message, lock, answer, endpoints, throttle) -> bytes:
    b = builder(78, version)
    response = b.response(
        throttle_time=throttle,
        error_code=error_code,
        error_message=error_message,
        acquisition_lock_timeout=lock,
        responses=tuple(
            b(
                "ShareFetchableTopicResponse",
                topic_id=topic_id,
                partitions=tuple(
                    b(
                        "PartitionData",
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        error_message=p.error_message,
                        acknowledge_error_code=p.acknowledge_error_code,
                        acknowledge_error_message=p.acknowledge_error_message,
                        current_leader=b("LeaderIdAndEpoch", leader_id=p.leader[0], leader_epoch=p.leader[1]),
                        records=p.records,
                        acquired_records=tuple(
                            b("AcquiredRecords", first_offset=f, last_offset=last, delivery_count=c)
                            for f, last, c in p.acquired
                        ),
                    )
                    for p in parts
                ),
            )
            for topic_id, parts in answer
        ),
        node_endpoints=tuple(
            b("NodeEndpoint", node_id=n, host=h, port=port, rack=rack) for n, h, port, rack in endpoints
        ),
    )
    out = io.BytesIO()
    entity_writer(type(response))(out, response)
    return out.getvalue()


@pytest.mark.parametrize("version", [1, 2])
@given(
    error_code=st.sampled_from([0, 35, 122]),
    error_message=texts,
    lock=st.integers(0, 2**31 - 1),
    answer=topics,
    endpoints=nodes,
    throttle=st.integers(0, 2**31 - 1),
)
def test_packed_answers_are_kio_s(version, error_code, error_message, lock, answer, endpoints, throttle) -> None:
    expected = kio_body(version, error_code, error_message, lock, answer, endpoints, throttle)
    parts = share_fetch_body(error_code, error_message, lock, answer, endpoints, throttle)
    packed = b"".join(parts)
    assert packed == expected
    decoded, size = entity_reader(response_class(78, version))(packed, 0)
    assert size == len(packed)


def test_record_data_is_a_part_of_its_own_and_the_frame_is_whole() -> None:
    records = memoryview(b"r" * 1000)
    answer = [(uuid.UUID(int=5), [Partition(0, 0, 0, None, records, [(10, 19, 1)])])]
    parts = share_fetch_body(0, None, 30_000, answer)
    assert any(part is records for part in parts)  # handed on, not copied
    encoded = EncodedBody(response_class(78, 1), parts)
    frame_parts = encode_response_parts(7, encoded)
    frame = encode_response(7, encoded)
    assert b"".join(frame_parts) == frame
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4 and int.from_bytes(frame[4:8], "big") == 7
