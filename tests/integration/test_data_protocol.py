"""The broker against bad input and pipelining, over raw sockets: a broken connection never hurts another.

ApiVersions, pipelining and Metadata's refusals run on both backends (tests/backends.py), against one node of a
cluster. The bad-input tests run on the embedded node only: a connection's framing is the same code on both
backends, and they check one broker process (still running, its log) with a frame limit of its own."""

from __future__ import annotations

import os
import socket
import struct

import pytest
from backends import BACKENDS, embedded_only, start_broker
from groupmembers import wait_for
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from rawkafka import RawClient

from herd.client.wire import request_builder


def _produce_and_count(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(20) == 0


def _read_all(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        for _ in range(200):  # not a wait_until: reads to the high watermark, the caller asserts on the values
            batch = c.consume(1000, timeout=0.5)
            values += [m.value() for m in batch if m.error() is None]
            low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
            if len(values) >= high:
                break
    finally:
        c.close()
    return values


def _leader_of(broker, topic: str) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """The port of the node leading partition 0 of `topic` (any node of a cluster may), and its leader epoch."""
    with RawClient(broker.port) as client:
        meta = client.request(
            3,
            12,
            MetadataRequest(
                topics=(MetadataRequestTopic(name=topic, topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
    partition = meta.topics[0].partitions[0]
    return next(b.port for b in meta.brokers if b.node_id == partition.leader_id), partition.leader_epoch


def _reassign_to_another_node(broker, topic: str) -> None:  # type: ignore[no-untyped-def]
    """Move the leadership of partition 0 to another node (AlterPartitionReassignments) and wait until its new
    leader answers for it at the new epoch."""
    with RawClient(broker.port) as client:
        meta = client.request(
            3,
            12,
            MetadataRequest(
                topics=(MetadataRequestTopic(name=topic, topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
        leader = meta.topics[0].partitions[0].leader_id
        target = next(n.node_id for n in meta.brokers if n.node_id != leader)
        b = request_builder(45, 0)
        answer = client.request(
            45,
            0,
            b.request(
                timeout=10000,
                topics=(
                    b(
                        "ReassignableTopic",
                        name=topic,
                        partitions=(b("ReassignablePartition", partition_index=0, replicas=(target,)),),
                    ),
                ),
            ),
        )
        assert answer.responses[0].partitions[0].error_code == ErrorCode.none
    wait_for(
        lambda: _leader_of(broker, topic)[1] > 0 and _list_offsets_error(broker, topic) == ErrorCode.none,
        10,
        "the new leader answering at its new epoch",
    )


def _list_offsets_error(broker, topic: str) -> ErrorCode:  # type: ignore[no-untyped-def]
    port, _ = _leader_of(broker, topic)
    b = request_builder(2, 4)
    request = b.request(
        replica_id=-1,
        isolation_level=0,
        topics=(
            b(
                "ListOffsetsTopic",
                name=topic,
                partitions=(b("ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),),
            ),
        ),
    )
    with RawClient(port) as client:
        return client.request(2, 4, request).topics[0].partitions[0].error_code


def _metadata_ok(port: int) -> None:
    with RawClient(port) as client:
        resp = client.request(
            3,
            12,
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        )
        assert port in [b.port for b in resp.brokers]


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    # Any node of a cluster would do for these requests; a single coordinator gives the tests one `port`.
    with start_broker(request, tmp_path_factory, "protocol", single_coordinator=True) as b:
        yield b


@pytest.fixture
def small_frames(broker_factory):
    return broker_factory({"socket.request.max.bytes": "4096", "num.partitions": "1"})


BAD_INPUTS = {
    "garbage": os.urandom(64) + b"\x00" * 8,
    "negative size": struct.pack(">i", -5) + b"abc",
    "oversized frame": struct.pack(">i", 10_000_000),
    "unknown api key": struct.pack(">ihhi", 10, 999, 0, 1) + b"\x00\x00",
    "unsupported version": struct.pack(">ihhi", 10, 3, 99, 1) + b"\x00\x00",
    "garbage body": struct.pack(">ihhi", 14, 3, 12, 1) + b"\xff\xff\xff\xff\xff\xff",
    "frame shorter than a header": struct.pack(">i", 3) + b"\x00\x03\x00",
}


BAD_INPUT_ONLY = "bad input and the frame limit of one broker process (the same connection code on both backends)"


@embedded_only(BAD_INPUT_ONLY)
@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_closes_only_that_connection(small_frames, name):
    broker = small_frames
    _produce_and_count(broker.bootstrap, "keep", 100)
    with RawClient(broker.port) as healthy:
        with RawClient(broker.port) as bad:
            bad.send_raw(BAD_INPUTS[name])
            assert bad.is_closed_by_peer(), f"{name}: the broker kept the connection open"
        # The healthy connection, opened before, still answers; new clients still work; nothing was lost.
        resp = healthy.request(
            3,
            12,
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        )
        assert "keep" in [t.name for t in resp.topics]
    _produce_and_count(broker.bootstrap, "keep", 50)
    assert _read_all(broker.bootstrap, "keep") == [b"v%d" % i for i in range(100)] + [b"v%d" % i for i in range(50)]
    assert broker.proc.poll() is None
    if name == "unknown api key":
        assert "unknown API key 999" in broker.log()


@embedded_only(BAD_INPUT_ONLY)
def test_truncated_frame_then_disconnect(small_frames):
    broker = small_frames
    sock = socket.create_connection(("127.0.0.1", broker.port))
    sock.sendall(struct.pack(">i", 1000) + b"\x00" * 100)  # promises 1000 bytes, sends 100, hangs up
    sock.close()
    _metadata_ok(broker.port)


@embedded_only(BAD_INPUT_ONLY)
def test_frame_at_the_limit_is_read_and_one_over_is_refused(small_frames):
    broker = small_frames
    with RawClient(broker.port) as client:
        # A Metadata v12 request padded to exactly the limit: read, decoded (trailing bytes are ignored, as in
        # Kafka) and answered.
        request = client.encode(
            3,
            12,
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        )
        padded = request[4:] + b"\x00" * (4096 - len(request) + 4)
        client.send_raw(struct.pack(">i", len(padded)) + padded)
        assert client.read_response(3, 12).brokers[0].port == broker.port
    with RawClient(broker.port) as client:
        client.send_raw(struct.pack(">i", 4097))
        assert client.is_closed_by_peer()
    assert "exceeds socket.request.max.bytes=4096" in small_frames.log()


def test_api_versions_too_new_is_answered_in_v0(broker):
    with RawClient(broker.port) as client:
        # ApiVersions v99: Kafka answers UNSUPPORTED_VERSION in a v0 response listing its own range.
        client.send_raw(struct.pack(">ihhi", 10, 18, 99, 7) + b"\x00\x00")
        resp = client.read_response(18, 0)
        assert client.last_correlation_id == 7
        assert resp.error_code == ErrorCode.unsupported_version
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]
        # The connection stays usable: the client retries at a version both know.
        resp = client.request(18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert resp.error_code == ErrorCode.none
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert keys[0] == (3, 13) and keys[1] == (4, 18) and keys[18] == (0, 4)


def test_pipelined_requests_are_answered_in_order(broker):
    with RawClient(broker.port) as client:
        frames = b"".join(
            client.encode(
                3,
                12,
                MetadataRequest(
                    topics=(MetadataRequestTopic(topic_id=None, name=f"p{i}"),),
                    allow_auto_topic_creation=True,
                    include_topic_authorized_operations=False,
                ),
            )
            for i in range(50)
        )
        client.send_raw(frames)
        for i in range(50):
            resp = client.read_response(3, 12)
            assert client.last_correlation_id == i + 1
            assert resp.topics[0].name == f"p{i}"


def test_metadata_refuses_topics_it_cannot_look_up_with_invalid_request(broker):
    # KafkaApis.handleTopicMetadataRequest: before v12 a topic needs a name and may not be asked for by id;
    # from v12 a topic with neither is as invalid. MetadataRequest.getErrorResponse answers every topic asked
    # for with INVALID_REQUEST (a null name as ""); a well-formed request in the same connection still works.
    import uuid

    from kio.schema.metadata.v11.request import MetadataRequest as MetadataRequestV11
    from kio.schema.metadata.v11.request import MetadataRequestTopic as TopicV11

    some_id = uuid.uuid4()
    with RawClient(broker.port) as client:
        for topics in ((TopicV11(topic_id=None, name=None),), (TopicV11(topic_id=some_id, name="t"),)):
            resp = client.request(
                3,
                11,
                MetadataRequestV11(
                    topics=topics, allow_auto_topic_creation=False, include_topic_authorized_operations=False
                ),
            )
            assert [(t.name, t.error_code) for t in resp.topics] == [(topics[0].name or "", ErrorCode.invalid_request)]
        resp = client.request(
            3,
            12,
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
        assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_request]
        resp = client.request(
            3,
            12,
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=some_id, name=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
        assert [(t.topic_id, t.error_code) for t in resp.topics] == [(some_id, ErrorCode.unknown_topic_id)]
    _metadata_ok(broker.port)


def test_fetch_and_list_offsets_check_the_clients_current_leader_epoch_as_kafka_does(broker):
    """A single node leads at epoch 0: a client that names an older epoch would be fenced, a newer one is unknown
    (Kafka's FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); -1 (not given) and 0 read."""
    from datetime import timedelta

    from confluent_kafka import Producer
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("epochs", b"x")
    producer.flush(10)
    leader_port, _ = _leader_of(broker, "epochs")

    def fetch(epoch: int) -> ErrorCode:
        request = FetchRequest(
            max_wait=timedelta(0),
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            rack_id="",
            forgotten_topics_data=(),
            topics=(
                FetchTopic(
                    topic="epochs",
                    partitions=(
                        FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=epoch
                        ),
                    ),
                ),
            ),
        )
        with RawClient(leader_port) as client:
            return client.request(1, 12, request).responses[0].partitions[0].error_code

    assert fetch(-1) == ErrorCode.none
    assert fetch(0) == ErrorCode.none
    assert fetch(1) == ErrorCode.unknown_leader_epoch

    from kio.schema.list_offsets.v4.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic

    def list_offsets(epoch: int) -> ErrorCode:
        partition = ListOffsetsPartition(partition_index=0, current_leader_epoch=epoch, timestamp=-1)
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=(ListOffsetsTopic(name="epochs", partitions=(partition,)),)
        )
        with RawClient(leader_port) as client:
            return client.request(2, 4, request).topics[0].partitions[0].error_code

    assert list_offsets(-1) == ErrorCode.none
    assert list_offsets(0) == ErrorCode.none
    assert list_offsets(1) == ErrorCode.unknown_leader_epoch


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_answers_where_an_epoch_ended_as_kafka_does(broker, version):
    """OffsetForLeaderEpoch at each version kio has, asked of the partition's leader: the current epoch ends at
    the high watermark, -1 or an epoch newer than the leader's is (-1, -1); the client's current leader epoch is
    checked as Fetch checks it; an unknown topic is UNKNOWN_TOPIC_OR_PARTITION. (The end of an earlier epoch:
    test_cluster.py.)"""
    topic_name = f"epoch-ends-v{version}"
    broker.create_topic(topic_name, 1)
    _produce_and_count(broker.bootstrap, topic_name, 7)
    if broker.backend == "cluster":  # a new leader, at epoch 1, so that a client's epoch 0 is fenced
        _reassign_to_another_node(broker, topic_name)
    leader_port, epoch = _leader_of(broker, topic_name)
    b = request_builder(23, version)

    def ask(requested: int, current: int = -1, topic: str = topic_name) -> tuple[ErrorCode, int, int]:
        partition = b("OffsetForLeaderPartition", partition=0, current_leader_epoch=current, leader_epoch=requested)
        request = b.request(replica_id=-1, topics=(b("OffsetForLeaderTopic", topic=topic, partitions=(partition,)),))
        with RawClient(leader_port) as client:
            answer = client.request(23, version, request).topics[0].partitions[0]
        return answer.error_code, answer.leader_epoch, answer.end_offset

    assert ask(epoch) == (ErrorCode.none, epoch, 7)
    assert ask(epoch, current=epoch) == (ErrorCode.none, epoch, 7)
    assert ask(-1) == (ErrorCode.none, -1, -1)
    assert ask(epoch + 1) == (ErrorCode.none, -1, -1)
    assert ask(epoch, current=epoch + 1)[0] == ErrorCode.unknown_leader_epoch
    if broker.backend == "cluster":  # one node leads at epoch 0 for ever
        assert ask(epoch, current=epoch - 1)[0] == ErrorCode.fenced_leader_epoch
    assert ask(0, topic="no-such-topic")[0] == ErrorCode.unknown_topic_or_partition
