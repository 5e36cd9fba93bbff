"""Back-pressure and idle connections, over raw sockets against a real broker process.

A client that pipelines Fetch requests and never reads its answers must not grow the broker's memory (the broker
stops reading it), must not slow other clients, and gets every answer in order once it reads. A connection that
stays idle for connections.max.idle.ms (a half-sent frame included) is closed; an active one is not. A frame that
does not fit in queued.max.request.bytes waits, as Kafka's memory pool makes it.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from datetime import timedelta

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from rawkafka import RawClient

from herd.testing.wait import collect_until, wait_until

MiB = 1 << 20


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024  # type: ignore[union-attr]


def _fetch(topic: str, max_wait_ms: int = 0, max_bytes: int = MiB) -> FetchRequest:
    return FetchRequest(
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        rack_id="",
        forgotten_topics_data=(),
        topics=(
            FetchTopic(
                topic=topic, partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=max_bytes),)
            ),
        ),
    )


def _api_versions() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="raw", client_software_version="1")


def _produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=bytes([i % 256]) * size)
    assert p.flush(20) == 0


def _consume(bootstrap: str, topic: str, count: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        got = collect_until(
            lambda: [m for m in c.consume(1000, timeout=0.5) if m.error() is None], lambda got: len(got) >= count, 20
        )
    finally:
        c.close()
    return len(got)


def test_a_client_that_never_reads_its_fetch_answers_does_not_grow_the_broker(broker_factory):
    broker = broker_factory({"num.partitions": "1"})
    _produce(broker.bootstrap, "big", 40, 100_000)  # 4 MB: every 1 MiB Fetch from offset 0 gets ~1 MiB
    with RawClient(broker.port) as warm:  # the broker's read path is warm before the baseline
        assert len(warm.request(1, 12, _fetch("big")).responses[0].partitions[0].records) > 900_000
    base = _rss_mib(broker.proc.pid)
    slow = RawClient(broker.port)
    n = 80  # 80 MiB of answers, which the broker used to build and buffer at once (RSS +80 MiB; now +1)
    slow.send_raw(b"".join(slow.encode(1, 12, _fetch("big")) for _ in range(n)))
    time.sleep(1.5)
    # Meanwhile another client produces and consumes as usual.
    _produce(broker.bootstrap, "other", 200, 100)
    assert _consume(broker.bootstrap, "other", 200) == 200
    grown = _rss_mib(broker.proc.pid) - base
    assert grown < 25, f"the broker grew by {grown:.0f} MiB for a client that reads nothing"
    # Once the slow client reads, it gets every answer, in order.
    for i in range(1, n + 1):
        response = slow.read_response(1, 12)
        assert slow.last_correlation_id == i
        assert len(response.responses[0].partitions[0].records) > 900_000
    slow.close()
    assert _rss_mib(broker.proc.pid) - base < 40


def test_idle_connections_and_stalled_half_frames_are_closed(broker_factory):
    broker = broker_factory({"connections.max.idle.ms": "800"})
    half = socket.create_connection(("127.0.0.1", broker.port))
    half.sendall(struct.pack(">i", 1000) + b"\x00\x12" + b"x" * 100)  # 106 of 1,004 bytes, then nothing
    silent = socket.create_connection(("127.0.0.1", broker.port))
    active = RawClient(broker.port)
    waiting = RawClient(broker.port)  # owed an answer (a long poll longer than the idle time): not idle
    waiting.request(
        3,
        12,
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name="quiet"),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
    )
    waiting.send_raw(waiting.encode(1, 12, _fetch("quiet", max_wait_ms=2500)))
    started = time.monotonic()
    while time.monotonic() - started < 3:  # not a wait: 3 s of requests on the other connection
        assert active.request(18, 3, _api_versions()).error_code == 0
        time.sleep(0.2)
    assert waiting.read_response(1, 12).responses[0].partitions[0].error_code == 0
    for sock in (half, silent):
        sock.settimeout(0.5)
        assert sock.recv(10) == b""  # closed by the broker (already, so recv returns at once)
    assert active.request(18, 3, _api_versions()).error_code == 0
    log = broker.log()
    assert "idle for" in log and "connections.max.idle.ms" in log
    assert "of the 1000 bytes of a request" in log
    assert log.count("idle for") == 2, log


def test_a_frame_beyond_queued_max_request_bytes_waits_for_memory(broker_factory):
    broker = broker_factory({"queued.max.request.bytes": "2000"})
    big = RawClient(broker.port)
    frame = big.encode(18, 3, _api_versions(), client_id="c" * 5000)
    big.send_raw(frame[:3000])  # the frame's 5,000-odd bytes are reserved from the pool: it is spent
    time.sleep(0.3)
    other = RawClient(broker.port, timeout=0.8)
    other.send_raw(other.encode(18, 3, _api_versions()))
    try:
        other.read_response(18, 3)
        raise AssertionError("answered while the request memory was spent")
    except TimeoutError:
        pass
    big.send_raw(frame[3000:])
    assert big.read_response(18, 3).error_code == 0
    other.sock.settimeout(5)
    assert other.read_response(18, 3).error_code == 0  # resumed once the big frame's memory was released
    assert "queued.max.request.bytes reached" in broker.log()


def test_answers_held_behind_a_long_poll_are_bounded_and_sent_in_order(broker_factory):
    broker = broker_factory({"num.partitions": "1"})
    _produce(broker.bootstrap, "big", 20, 100_000)
    with RawClient(broker.port) as client:
        client.request(
            3,
            12,
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name="quiet"),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
        )
        first = client._correlation + 1
        # A long poll at the head, then 12 Fetches answered at once (~1 MiB each) that must wait behind it: the
        # broker stops taking them after 4 MiB and takes the rest when the head is answered.
        client.send_raw(
            client.encode(1, 12, _fetch("quiet", max_wait_ms=1000))
            + b"".join(client.encode(1, 12, _fetch("big")) for _ in range(12))
        )
        assert client.read_response(1, 12).responses[0].topic == "quiet"
        assert client.last_correlation_id == first
        for i in range(1, 13):
            assert len(client.read_response(1, 12).responses[0].partitions[0].records) > 900_000
            assert client.last_correlation_id == first + i


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))


def _answers(sock: socket.socket) -> bool:
    """True if the broker answers an ApiVersions on `sock`; False if it closed the connection."""
    try:
        RawClient(0, sock=sock).request(18, 3, _api_versions())
        return True
    except (ConnectionError, OSError, struct.error, EOFError):
        return False


def test_connections_over_max_connections_are_closed_and_the_admitted_ones_keep_working(broker_factory):
    broker = broker_factory({"max.connections": "4"})
    admitted = [_connect(broker.port) for _ in range(4)]
    assert all(_answers(s) for s in admitted)
    extra = _connect(broker.port)  # accepted by the kernel, closed by the broker at once
    assert not _answers(extra)
    admitted.pop().close()

    def reconnect() -> socket.socket | None:
        again = _connect(broker.port)
        if _answers(again):
            return again
        again.close()
        return None

    # the broker sees the close a moment later
    again = wait_until(reconnect, 5, "a new connection to be served after one closed", interval=0)
    assert _answers(again) and all(_answers(s) for s in admitted)
    assert "refusing new connections: the broker has max.connections=4 connections" in broker.log()
    for s in (*admitted, extra, again):
        s.close()


def test_one_address_cannot_take_every_connection(broker_factory):
    """max.connections.per.ip: a client that opens connections without end (a leak) is refused beyond its
    share, and a client on another address still gets in."""
    broker = broker_factory({"max.connections.per.ip": "3"})
    mine = [_connect(broker.port) for _ in range(3)]
    assert all(_answers(s) for s in mine)
    assert not _answers(_connect(broker.port))
    other = _connect(broker.port, source="127.0.0.2")
    assert _answers(other)
    assert "127.0.0.1 has max.connections.per.ip=3 connections" in broker.log()
    for s in (*mine, other):
        s.close()


def test_fetch_max_bytes_caps_an_answer_whatever_the_request_asks(broker_factory):
    """The broker's fetch.max.bytes bounds one Fetch answer (Kafka's KafkaApis takes the smaller of it and the
    request's max_bytes); the first batch still goes whole (KIP-74)."""
    broker = broker_factory({"num.partitions": "1", "fetch.max.bytes": "1024"})
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(10):
        producer.produce("capped", value=bytes([i]) * 600)
        producer.flush(10)  # one batch each
    with RawClient(broker.port) as client:
        answer = client.request(1, 12, _fetch("capped", max_bytes=MiB))
    records = answer.responses[0].partitions[0].records
    assert 600 < len(records) < 2 * 600  # one whole batch of the ten, not 1 MiB's worth
