"""DeleteRecords on both backends (tests/backends.py), one broker for the module: raw requests at every version
kio has (v0-v2) with Kafka's error codes, the admin APIs of confluent-kafka, kafka-python and aiokafka with their
error paths, and consumers whose position fell below the new log start, reset as their auto.offset.reset says.

Each test has topics of its own. A cluster's nodes learn of a new topic shortly after the node that made it
answered, so `_topic` waits until every node lists it with its leaders before producing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from backends import BACKENDS, Broker, start_broker
from kio.schema.errors import ErrorCode
from rawkafka import RawClient

from herd.client.wire import request_builder
from herd.testing.wait import wait_until

RECORDS = 10  # per partition
VERSIONS = (0, 1, 2)


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "delete_records", {"num.partitions": "1"}) as b:
        yield b


# -- helpers -------------------------------------------------------------------------------------------------------


def _leaders(port: int, topic: str) -> dict[int, int] | None:
    """Partition -> the port of its leader, as the node on `port` sees it; None until it knows every leader."""
    b = request_builder(3, 12)
    with RawClient(port) as c:
        meta = c.request(
            3,
            12,
            b.request(
                topics=(b("MetadataRequestTopic", name=topic, topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
    ports = {n.node_id: n.port for n in meta.brokers}
    found = meta.topics[0]
    if found.error_code != ErrorCode.none or any(p.leader_id < 0 for p in found.partitions):
        return None
    return {p.partition_index: ports[p.leader_id] for p in found.partitions}


def _topic(broker: Broker, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> dict[int, int]:
    """Create `topic`, wait until every node knows its leaders, and write RECORDS keyed records to each
    partition; returns partition -> its leader's port."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(15)
    wait_until(
        lambda: all(_leaders(port, topic) for port in broker.ports),
        15,
        f"every node to learn of {topic}",
        interval=0.02,
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2})
    for partition in range(partitions):
        for i in range(RECORDS):
            producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=partition)
    assert producer.flush(20) == 0
    leaders = _leaders(broker.ports[0], topic)
    assert leaders is not None
    return leaders


Answers = dict[tuple[str, int], tuple[int, int]]  # (topic, partition) -> (low watermark, error code)


def _delete(port: int, version: int, partitions: dict[str, list[tuple[int, int]]]) -> Answers:
    """Send DeleteRecords at `version`; the answer of each partition."""
    b = request_builder(21, version)
    request = b.request(
        timeout=5000,
        topics=tuple(
            b(
                "DeleteRecordsTopic",
                name=name,
                partitions=tuple(
                    b("DeleteRecordsPartition", partition_index=index, offset=offset) for index, offset in entries
                ),
            )
            for name, entries in partitions.items()
        ),
    )
    with RawClient(port) as c:
        answer = c.request(21, version, request)
    assert answer.throttle_time.total_seconds() == 0
    return {(t.name, p.partition_index): (p.low_watermark, p.error_code) for t in answer.topics for p in t.partitions}


def _fetch(port: int, topic: str, partition: int, offset: int) -> tuple[int, int, int]:
    """A Fetch v11 of one partition from `offset`: (error code, log start offset, records' bytes)."""
    b = request_builder(1, 11)
    request = b.request(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=(),
        rack_id="",
        topics=(
            b(
                "FetchTopic",
                topic=topic,
                partitions=(
                    b(
                        "FetchPartition",
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
    )
    with RawClient(port) as c:
        data = c.request(1, 11, request).responses[0].partitions[0]
    return data.error_code, data.log_start_offset, len(data.records or b"")


def _earliest(port: int, topic: str, partition: int) -> int:
    """ListOffsets EARLIEST (v7)."""
    b = request_builder(2, 7)
    request = b.request(
        replica_id=-1,
        isolation_level=0,
        topics=(
            b(
                "ListOffsetsTopic",
                name=topic,
                partitions=(
                    b("ListOffsetsPartition", partition_index=partition, current_leader_epoch=-1, timestamp=-2),
                ),
            ),
        ),
    )
    with RawClient(port) as c:
        return c.request(2, 7, request).topics[0].partitions[0].offset


# -- raw requests --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw_topic(broker: Broker) -> dict[int, int]:
    """One partition for each version."""
    return _topic(broker, "raw", len(VERSIONS))


@pytest.mark.parametrize("version", VERSIONS)
def test_each_version_moves_the_start_and_fetch_and_list_offsets_follow(broker, raw_topic, version):
    partition, port = version, raw_topic[version]
    assert _delete(port, version, {"raw": [(partition, 4)]}) == {("raw", partition): (4, ErrorCode.none)}
    assert _fetch(port, "raw", partition, 3)[:2] == (ErrorCode.offset_out_of_range, 4)
    error, start, size = _fetch(port, "raw", partition, 4)
    assert (error, start) == (ErrorCode.none, 4) and size > 0
    assert _earliest(port, "raw", partition) == 4
    assert _delete(port, version, {"raw": [(partition, 2)]}) == {("raw", partition): (4, ErrorCode.none)}
    assert _delete(port, version, {"raw": [(partition, -1)]}) == {("raw", partition): (RECORDS, ErrorCode.none)}
    assert _fetch(port, "raw", partition, RECORDS) == (ErrorCode.none, RECORDS, 0)
    assert _earliest(port, "raw", partition) == RECORDS


@pytest.mark.parametrize("version", VERSIONS)
def test_each_version_answers_kafkas_refusals_with_low_watermark_minus_one(broker, raw_topic, version):
    port = raw_topic[0]
    answer = _delete(
        port, version, {"raw": [(0, RECORDS + 1), (99, 0)], "nope": [(0, 0)], "__consumer_offsets": [(0, 0)]}
    )
    assert answer == {
        ("raw", 0): (-1, ErrorCode.offset_out_of_range),  # beyond the high watermark
        ("raw", 99): (-1, ErrorCode.unknown_topic_or_partition),
        ("nope", 0): (-1, ErrorCode.unknown_topic_or_partition),
        ("__consumer_offsets", 0): (-1, ErrorCode.invalid_topic_exception),
    }
    assert _delete(port, version, {"raw": [(0, -2)]}) == {("raw", 0): (-1, ErrorCode.offset_out_of_range)}


@pytest.fixture(scope="module")
def compacted(broker: Broker) -> dict[int, int]:
    return _topic(broker, "compacted", config={"cleanup.policy": "compact"})


def test_a_compacted_topic_refuses_with_policy_violation(broker, compacted):
    assert _delete(compacted[0], 2, {"compacted": [(0, 1)]}) == {("compacted", 0): (-1, ErrorCode.policy_violation)}
    assert _earliest(compacted[0], "compacted", 0) == 0


def test_a_node_that_does_not_lead_the_partition_answers_not_leader(broker, raw_topic):
    if broker.backend == "embedded":
        pytest.skip("one node leads every partition")
    other = next(port for port in broker.ports if port != raw_topic[0])
    assert _delete(other, 2, {"raw": [(0, 1)]}) == {("raw", 0): (-1, ErrorCode.not_leader_or_follower)}


# -- admin clients -------------------------------------------------------------------------------------------------


def _outcome(future: Any) -> Any:
    try:
        return future.result(15).low_watermark
    except Exception as e:  # noqa: BLE001 - the test inspects the error
        return e.args[0].code()


def test_confluent_delete_records_and_its_errors(broker):
    from confluent_kafka import KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    _topic(broker, "conf", 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    done = admin.delete_records([TopicPartition("conf", 0, 3), TopicPartition("conf", 1, -1)])  # -1: OFFSET_END
    assert {tp.partition: _outcome(f) for tp, f in done.items()} == {0: 3, 1: RECORDS}
    earliest = admin.list_offsets({TopicPartition("conf", 0): OffsetSpec.earliest()})
    assert [f.result(15).offset for f in earliest.values()] == [3]
    beyond = admin.delete_records([TopicPartition("conf", 0, RECORDS + 1)])
    assert [_outcome(f) for f in beyond.values()] == [KafkaError.OFFSET_OUT_OF_RANGE]
    unknown = admin.delete_records([TopicPartition("nope", 0, 1)])
    assert [_outcome(f) for f in unknown.values()] == [KafkaError._NOENT]  # librdkafka's: no leader to ask


@pytest.fixture(scope="module")
def kafka_python_admin(broker: Broker) -> Any:
    """kafka-python's admin client, slow to make: one for the module."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield admin
    admin.close()


def test_kafka_python_delete_records_and_its_errors(broker, kafka_python_admin, compacted):
    from kafka import TopicPartition
    from kafka.errors import OffsetOutOfRangeError, PolicyViolationError, UnknownTopicOrPartitionError

    _topic(broker, "kp")
    tp = TopicPartition("kp", 0)
    assert kafka_python_admin.delete_records({tp: 7})[tp]["low_watermark"] == 7
    with pytest.raises(OffsetOutOfRangeError):
        kafka_python_admin.delete_records({tp: RECORDS + 1})
    with pytest.raises(PolicyViolationError):
        kafka_python_admin.delete_records({TopicPartition("compacted", 0): 1})
    with pytest.raises(UnknownTopicOrPartitionError):  # kafka-python's own, from the metadata it asked for
        kafka_python_admin.delete_records({TopicPartition("nope", 0): 1})


def test_aiokafka_delete_records_and_its_errors(broker):
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.errors import NotLeaderForPartitionError, OffsetOutOfRangeError
    from aiokafka.structs import TopicPartition

    _topic(broker, "aio")

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            tp = TopicPartition("aio", 0)
            assert await admin.delete_records({tp: RecordsToDelete(5)}) == {tp: 5}
            assert await admin.delete_records({tp: RecordsToDelete(1)}) == {tp: 5}  # below the start: unchanged
            with pytest.raises(OffsetOutOfRangeError):
                await admin.delete_records({tp: RecordsToDelete(RECORDS + 1)})
            with pytest.raises(NotLeaderForPartitionError):  # aiokafka's own: no leader in its metadata
                await admin.delete_records({TopicPartition("nope", 0): RecordsToDelete(1)})
            assert await admin.delete_records({tp: RecordsToDelete(-1)}, timeout_ms=1000) == {tp: RECORDS}
        finally:
            await admin.close()

    asyncio.run(asyncio.wait_for(main(), 30))


# -- consumers below the start -------------------------------------------------------------------------------------


def _first_offset(broker: Broker, topic: str, reset: str, position: int, nudge: Any = None) -> int:
    """The offset of the first record a confluent-kafka consumer assigned at `position` receives; `nudge` is
    called whenever a poll brings nothing (a consumer reset to the end needs something written after it)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, position)])

        def offset() -> list[int] | None:
            message = consumer.poll(0.3)
            if message is not None and message.error() is None:
                return [message.offset()]
            if nudge is not None:
                nudge()
            return None

        return wait_until(offset, 15, f"a record to reach the {reset} consumer", interval=0)[0]
    finally:
        consumer.close()


def test_a_consumer_below_the_start_is_reset_as_its_auto_offset_reset_says(broker):
    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    _topic(broker, "reset")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _outcome(admin.delete_records([TopicPartition("reset", 0, 6)])[TopicPartition("reset", 0, 6)]) == 6
    assert _first_offset(broker, "reset", "earliest", 2) == 6

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})

    def produce_one() -> None:
        producer.produce("reset", value=b"after", partition=0)
        assert producer.flush(15) == 0

    # reset to the end: not one of the records 6-9, but one written after the reset
    assert _first_offset(broker, "reset", "latest", 2, nudge=produce_one) >= RECORDS
