"""The data directory against a careless operator and a hostile client, with real brokers and real clients: one
broker per log.dirs, topics.json deleted or damaged, a topic deleted with the longest legal name, partition
counts no broker can hold, and a metadata write the disk refuses (on the in-memory fault-injecting filesystem)."""

from __future__ import annotations

from typing import Any

import pytest
from inprocess import InProcessBroker
from rawkafka import RawClient

from herd.log.fs import MemoryFileSystem
from herd.log.store import SegmentStore
from herd.protocol.messages import request_class
from herd.protocol.values import make


def admin(broker: Any) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(broker: Any, name: str, partitions: int) -> Exception | None:
    from confluent_kafka.admin import NewTopic

    client = admin(broker)  # kept alive until the answer is in
    (future,) = client.create_topics([NewTopic(name, partitions, 1)], request_timeout=15).values()
    try:
        future.result(20)
    except Exception as e:  # noqa: BLE001 - the test inspects the error
        return e
    return None


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 15000})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert p.flush(20) == 0 and not errors


def consume(bootstrap: str, topic: str, n: int, group: str = "g") -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(200):  # not a wait_until: up to 200 polls for n values, the caller asserts on them
            if len(got) >= n:
                break
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def committed(bootstrap: str, topic: str, group: str = "g") -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        c.close()


def topic_id(broker: Any, name: str) -> Any:
    from confluent_kafka import TopicCollection

    client = admin(broker)
    (future,) = client.describe_topics(TopicCollection([name])).values()
    return str(future.result(15).topic_id)


def works(broker: Any, topic: str) -> None:
    """Create a topic, produce to it and read it back."""
    assert create(broker, topic, 1) is None
    produce(broker.bootstrap, topic, [b"a", b"b"])
    assert consume(broker.bootstrap, topic, 2, group=f"g-{topic}") == [b"a", b"b"]


def partition_dirs(broker: Any) -> set[str]:
    return {p.name for p in broker.data_dir.iterdir() if p.is_dir()}


# -- item 2: one broker per log.dirs ---------------------------------------------------------------------------


def test_a_second_broker_on_the_same_log_dirs_refuses_naming_the_first_and_a_new_one_starts_after_kill(broker_factory):
    first = broker_factory()
    with pytest.raises(RuntimeError) as refused:
        broker_factory()  # same tmp_path / "data"
    text = str(refused.value)
    assert "broker exited with 1" in text and "Traceback" not in text
    (line,) = [line for line in text.splitlines() if line.startswith("herd: error:")]
    assert f"pid={first.proc.pid}" in line and str(first.data_dir) in line and "in use" in line
    works(first, "after-refusal")

    first.kill()
    again = broker_factory()
    assert consume(again.bootstrap, "after-refusal", 2, group="other") == [b"a", b"b"]


# -- item 3: topics.json deleted or damaged --------------------------------------------------------------------


def test_a_deleted_topics_json_is_rebuilt_keeping_topic_ids_records_and_committed_offsets(broker_factory):
    broker = broker_factory({"offsets.topic.num.partitions": "3"})
    assert create(broker, "orders", 2) is None
    produce(broker.bootstrap, "orders", [b"%d" % i for i in range(10)])
    assert len(consume(broker.bootstrap, "orders", 10)) == 10
    offsets = committed(broker.bootstrap, "orders")
    orders_id = topic_id(broker, "orders")
    assert broker.stop() == 0

    (broker.data_dir / "topics.json").unlink()
    broker.restart()
    assert "rebuilding the topics" in broker.log()
    assert topic_id(broker, "orders") == orders_id
    assert committed(broker.bootstrap, "orders") == offsets
    assert sorted(consume(broker.bootstrap, "orders", 10, group="fresh")) == sorted(b"%d" % i for i in range(10))
    assert {"orders-0", "orders-1", "__consumer_offsets-0"} <= partition_dirs(broker)


@pytest.mark.parametrize("damage", [b"", b'{"version": 1, "topics": [{"name": "orders", "id"', b"garbage\n"])
def test_a_damaged_topics_json_stops_the_start_with_one_line_and_deletes_nothing(broker_factory, damage):
    broker = broker_factory({"offsets.topic.num.partitions": "3"})
    assert create(broker, "orders", 2) is None
    produce(broker.bootstrap, "orders", [b"x"] * 5)
    assert broker.stop() == 0
    before = partition_dirs(broker)

    (broker.data_dir / "topics.json").write_bytes(damage)
    with pytest.raises(RuntimeError) as refused:
        broker.restart()
    text = str(refused.value)
    (line,) = [line for line in text.splitlines() if line.startswith("herd: error:")]
    assert str(broker.data_dir / "topics.json") in line and "move it away" in line and "Traceback" not in text
    assert partition_dirs(broker) == before

    (broker.data_dir / "topics.json").unlink()  # what the line says to do
    broker.restart()
    assert len(consume(broker.bootstrap, "orders", 5)) == 5


def test_an_unnamed_partition_directory_survives_restarts_and_is_reported(broker_factory):
    broker = broker_factory({"offsets.topic.num.partitions": "1"})
    assert broker.stop() == 0
    stray = broker.data_dir / "copied-in-0"
    stray.mkdir()
    (stray / "00000000000000000000.log").write_bytes(b"someone's data")
    broker.restart()
    assert "kept partition directories of copied-in" in broker.log()
    client = admin(broker)
    assert "copied-in" not in client.list_topics(timeout=10).topics
    assert broker.stop() == 0
    broker.restart()
    assert (stray / "00000000000000000000.log").read_bytes() == b"someone's data"


def test_an_offsets_topic_the_broker_cannot_hold_stops_the_start_with_one_line(broker_factory):
    with pytest.raises(RuntimeError) as refused:
        broker_factory({"offsets.topic.num.partitions": "3", "max.broker.partitions": "2"})
    (line,) = [line for line in str(refused.value).splitlines() if line.startswith("herd: error:")]
    assert "__consumer_offsets" in line and "max.broker.partitions=2" in line


# -- item 6: the longest topic names -----------------------------------------------------------------------------


def test_deleting_a_topic_with_a_249_character_name_works_and_the_broker_restarts(broker_factory):
    from confluent_kafka.admin import NewTopic

    broker = broker_factory({"offsets.topic.num.partitions": "1"})
    names = ["a" * 249, "b" * 245]
    client = admin(broker)
    for f in client.create_topics([NewTopic(n, 12, 1) for n in names], request_timeout=15).values():
        f.result(20)
    produce(broker.bootstrap, names[0], [b"x"])
    for f in client.delete_topics(names, request_timeout=15).values():
        f.result(20)
    assert not any(d.startswith(("a" * 200, "b" * 200)) for d in partition_dirs(broker))
    assert broker.stop() == 0
    broker.restart()
    client = admin(broker)
    assert names[0] not in client.list_topics(timeout=10).topics
    works(broker, "a" * 249)


# -- item 7: partition counts no broker can hold ---------------------------------------------------------------


@pytest.mark.parametrize("count", [2_147_483_647, 100_000])
def test_an_excessive_partition_count_is_refused_at_once_and_the_broker_keeps_working(broker_factory, count):
    """kafka-python's admin client (confluent-kafka refuses more than 100,000 partitions itself)."""
    import time

    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions, NewTopic

    broker = broker_factory({"offsets.topic.num.partitions": "1"})
    before = partition_dirs(broker)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        started = time.monotonic()
        answer = client.create_topics([NewTopic("huge", count, 1)], raise_errors=False)
        (topic,) = answer["topics"]
        assert (topic["error_code"], topic["error_message"]) == (
            44,
            "Excessively large number of partitions per request.",
        )  # POLICY_VIOLATION
        client.create_topics([NewTopic("small", 1, 1)])
        answer = client.create_partitions({"small": NewPartitions(count)}, raise_errors=False)
        (topic,) = answer.results
        assert topic.error_code == 44 and topic.error_message == "Unable to perform excessively large batch operation."
        assert time.monotonic() - started < 10
    finally:
        client.close()
    assert partition_dirs(broker) == before | {"small-0"}
    assert "refused a CreateTopics request for" in broker.log()
    assert "refused a CreatePartitions request" in broker.log()
    works(broker, "still-fine")


def test_max_broker_partitions_refuses_what_would_pass_it(broker_factory):
    from confluent_kafka import KafkaError

    broker = broker_factory({"offsets.topic.num.partitions": "2", "max.broker.partitions": "10"})
    assert create(broker, "six", 6) is None
    error = create(broker, "three", 3)
    assert error is not None and error.args[0].code() == KafkaError.POLICY_VIOLATION
    assert "max.broker.partitions=10" in error.args[0].str()
    assert "three-0" not in partition_dirs(broker)
    works(broker, "two")  # 2 + 6 + 1 = 9


# -- item 4: a metadata write the disk refuses -------------------------------------------------------------------


def memory_broker(fs: MemoryFileSystem) -> InProcessBroker:
    """herd's Server in this process, its data on a MemoryFileSystem that can fail a write."""
    return InProcessBroker({"log.dirs": "/data", "offsets.topic.num.partitions": "1"}, SegmentStore("/data", fs))


def metadata(client: RawClient, topic: str) -> Any:
    cls = request_class(3, 12)
    module = __import__(cls.__module__, fromlist=["MetadataRequestTopic"])
    request = make(
        cls,
        {
            "topics": (make(module.MetadataRequestTopic, {"name": topic, "topic_id": None}),),
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
        },
    )
    return client.request(3, 12, request).topics[0]


def test_an_auto_create_whose_topics_json_write_fails_is_answered_and_leaves_nothing(caplog):
    fs = MemoryFileSystem()
    broker = memory_broker(fs)
    try:
        fs.fail("rename", path_endswith="topics.json.tmp")
        with RawClient(broker.server.port) as c:
            answer = metadata(c, "events")
            assert answer.error_code == 56  # KAFKA_STORAGE_ERROR: retriable, the client asks again
            assert broker.server.broker.cluster.get("events") is None
            assert not any(name.startswith("events") for name in fs.listdir("/data"))
            assert "topics.json" in caplog.text and "Traceback" not in caplog.text
            assert metadata(c, "events").error_code == 0  # same connection; the disk is back
        produce(broker.bootstrap, "events", [b"kept"])
    finally:
        broker.stop()
    broker = memory_broker(fs.crash())
    try:
        assert consume(broker.bootstrap, "events", 1) == [b"kept"]
    finally:
        broker.stop()
