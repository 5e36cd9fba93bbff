"""herd.server.views' pure parts: consumer-protocol assignments decoded for the HTTP API and the console."""

from __future__ import annotations

import struct

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment, TopicPartition
from kio.serial import entity_writer
from kio.static.primitive import i32

from herd.server.views import decode_assignment

_write = entity_writer(ConsumerProtocolAssignment)


def _assignment(version: int, topics: dict[str, list[int]], tail: bytes = b"") -> bytes:
    import io

    buffer = io.BytesIO()
    _write(
        buffer,
        ConsumerProtocolAssignment(
            assigned_partitions=tuple(
                TopicPartition(topic=t, partitions=tuple(i32(p) for p in ps)) for t, ps in topics.items()
            ),
            user_data=None,
        ),
    )
    return struct.pack(">h", version) + buffer.getvalue() + tail


def test_an_assignment_of_any_version_is_read_as_the_v0_prefix():
    assert decode_assignment(_assignment(0, {"a": [2, 0], "b": [1]})) == [
        {"topic": "a", "partitions": [0, 2]},
        {"topic": "b", "partitions": [1]},
    ]
    assert decode_assignment(_assignment(3, {"a": [1]}, tail=b"\x00\x00\x00\x00")) == [
        {"topic": "a", "partitions": [1]}
    ]


def test_no_bytes_is_no_assignment_and_garbage_is_unknown():
    assert decode_assignment(b"") == []
    assert decode_assignment(b"\x00") is None
    assert decode_assignment(b"\xff\xff\x00") is None  # a negative version
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x09abc") is None  # cut short
