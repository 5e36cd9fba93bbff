"""The consumer protocol codec against bytes built by hand from Kafka's schemas, and against kafka-python.

Layouts (clients/src/main/resources/common/message/ConsumerProtocolSubscription.json and
ConsumerProtocolAssignment.json in apache/kafka), after an int16 version prefix:
  subscription v0: topics [string], user_data nullable bytes
               v1: + owned_partitions [topic string, partitions [int32]]
               v2: + generation_id int32       v3: + rack_id nullable string
  assignment v0-v3: assigned_partitions [topic string, partitions [int32]], user_data nullable bytes
Strings are int16 length + UTF-8, bytes int32 length (-1 = null), arrays int32 count.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herd.client.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    read_version,
)


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def string(s: str | None) -> bytes:
    return i16(-1) if s is None else i16(len(s.encode())) + s.encode()


def nbytes(b: bytes | None) -> bytes:
    return i32(-1) if b is None else i32(len(b)) + b


def topic_partitions(groups: list[tuple[str, list[int]]]) -> bytes:
    out = i32(len(groups))
    for topic, parts in groups:
        out += string(topic) + i32(len(parts)) + b"".join(i32(p) for p in parts)
    return out


SUB = Subscription(
    topics=("t", "orders"),
    user_data=b"\x01\x02",
    owned_partitions=(TopicPartition("t", 0), TopicPartition("t", 3), TopicPartition("orders", 1)),
    generation_id=7,
    rack_id="rack-a",
)
SUB_V0 = i16(0) + i32(2) + string("t") + string("orders") + nbytes(b"\x01\x02")
OWNED = topic_partitions([("t", [0, 3]), ("orders", [1])])
SUB_V1 = i16(1) + SUB_V0[2:] + OWNED
SUB_V2 = i16(2) + SUB_V1[2:] + i32(7)
SUB_V3 = i16(3) + SUB_V2[2:] + string("rack-a")


def test_v0_subscription_for_one_topic_and_null_user_data() -> None:
    expected = b"\x00\x00" + i32(1) + string("t") + i32(-1)
    assert expected == b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
    assert encode_subscription(Subscription(topics=("t",)), version=0) == expected
    assert decode_subscription(expected) == Subscription(topics=("t",))


@pytest.mark.parametrize(
    ("version", "wire", "decoded"),
    [
        (0, SUB_V0, Subscription(topics=SUB.topics, user_data=SUB.user_data)),
        (1, SUB_V1, Subscription(SUB.topics, SUB.user_data, SUB.owned_partitions)),
        (2, SUB_V2, Subscription(SUB.topics, SUB.user_data, SUB.owned_partitions, 7)),
        (3, SUB_V3, SUB),
    ],
)
def test_subscription_versions_match_the_schema(version: int, wire: bytes, decoded: Subscription) -> None:
    assert encode_subscription(SUB, version=version) == wire
    assert decode_subscription(wire) == decoded
    assert read_version(wire) == version


def test_null_rack_and_no_generation_at_v3() -> None:
    sub = Subscription(topics=("t",))
    wire = i16(3) + i32(1) + string("t") + nbytes(None) + i32(0) + i32(-1) + string(None)
    assert encode_subscription(sub) == wire
    assert decode_subscription(wire) == sub


def test_newer_subscription_versions_read_as_v3_ignoring_trailing_bytes() -> None:
    future = i16(9) + SUB_V3[2:] + b"fields from the future"
    assert decode_subscription(future) == SUB
    assert read_version(future) == 9


ASSIGNMENT = Assignment(partitions=(TopicPartition("t", 0), TopicPartition("t", 3)), user_data=b"u")
ASSIGNMENT_BODY = topic_partitions([("t", [0, 3])]) + nbytes(b"u")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_versions_share_one_layout(version: int) -> None:
    wire = i16(version) + ASSIGNMENT_BODY
    assert encode_assignment(ASSIGNMENT, version=version) == wire
    assert decode_assignment(wire) == ASSIGNMENT


def test_empty_assignment_and_newer_assignment_versions() -> None:
    assert decode_assignment(b"") == Assignment(partitions=())
    assert encode_assignment(Assignment(())) == i16(3) + i32(0) + i32(-1)
    assert decode_assignment(i16(4) + ASSIGNMENT_BODY + b"\x00\x00") == ASSIGNMENT


@pytest.mark.parametrize(
    "wire",
    [b"", b"\x00", i16(-1) + SUB_V0[2:], SUB_V1[:-3], i16(0) + i32(5) + string("t")],
)
def test_malformed_subscriptions_raise_consumer_protocol_error(wire: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(wire)


@pytest.mark.parametrize("version", [-1, 4])
def test_unencodable_versions(version: int) -> None:
    with pytest.raises(ConsumerProtocolError):
        encode_subscription(SUB, version=version)
    with pytest.raises(ConsumerProtocolError):
        encode_assignment(ASSIGNMENT, version=version)


names = st.text(min_size=1, max_size=8)
partitions = st.lists(st.tuples(names, st.integers(0, 2**31 - 1)), max_size=6, unique=True)


def _grouped(parts: list[tuple[str, int]]) -> tuple[TopicPartition, ...]:
    """The order decoding returns: grouped by topic in order of first appearance."""
    topics = list(dict.fromkeys(t for t, _ in parts))
    return tuple(TopicPartition(t, p) for topic in topics for t, p in parts if t == topic)


@given(
    topics=st.lists(names, max_size=5),
    user_data=st.none() | st.binary(max_size=20),
    owned=partitions,
    generation=st.integers(-(2**31), 2**31 - 1),
    rack=st.none() | names,
)
def test_subscription_round_trip_at_v3(
    topics: list[str], user_data: bytes | None, owned: list[tuple[str, int]], generation: int, rack: str | None
) -> None:
    sub = Subscription(tuple(topics), user_data, _grouped(owned), generation, rack)
    assert decode_subscription(encode_subscription(sub)) == sub


@given(parts=partitions, user_data=st.none() | st.binary(max_size=20), version=st.integers(0, 3))
def test_assignment_round_trip(parts: list[tuple[str, int]], user_data: bytes | None, version: int) -> None:
    assignment = Assignment(_grouped(parts), user_data)
    assert decode_assignment(encode_assignment(assignment, version)) == assignment


@given(st.binary(max_size=40))
def test_garbage_never_raises_anything_but_consumer_protocol_error(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(data)
        except ConsumerProtocolError:
            pass


# kafka-python 3.0.12 generates its codec from the same JSON schemas; the two must agree both ways.
kafka_metadata = pytest.importorskip("kafka.protocol.consumer.metadata")


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_reads_our_subscriptions_and_we_read_theirs(version: int) -> None:
    theirs = kafka_metadata.ConsumerProtocolSubscription.decode(encode_subscription(SUB, version))
    assert list(theirs.topics) == list(SUB.topics)
    assert theirs.user_data == SUB.user_data
    if version >= 1:
        owned = [(tp.topic, list(tp.partitions)) for tp in theirs.owned_partitions]
        assert owned == [("t", [0, 3]), ("orders", [1])]
    if version >= 2:
        assert theirs.generation_id == 7
    if version >= 3:
        assert theirs.rack_id == "rack-a"
    assert theirs.encode(version=version) == encode_subscription(SUB, version)
    assert decode_subscription(theirs.encode(version=version)) == decode_subscription(encode_subscription(SUB, version))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_kafka_python_reads_our_assignments_and_we_read_theirs(version: int) -> None:
    theirs = kafka_metadata.ConsumerProtocolAssignment.decode(encode_assignment(ASSIGNMENT, version))
    assert [(tp.topic, tp.partition) for tp in theirs.partitions()] == [("t", 0), ("t", 3)]
    assert theirs.user_data == b"u"
    assert decode_assignment(theirs.encode(version=version)) == ASSIGNMENT


def test_kafka_python_legacy_v0_structs_agree() -> None:
    legacy = pytest.importorskip("kafka.protocol.old.consumer_protocol")
    metadata = legacy.ConsumerProtocolMemberMetadata_v0(0, ["t", "orders"], b"\x01\x02").encode()
    assert metadata == SUB_V0
    assignment = legacy.ConsumerProtocolMemberAssignment_v0(0, [("t", [0, 3])], b"u").encode()
    assert decode_assignment(assignment) == ASSIGNMENT
    assert legacy.ConsumerProtocolMemberMetadata_v0.decode(encode_subscription(SUB, 0)).topics == ["t", "orders"]
