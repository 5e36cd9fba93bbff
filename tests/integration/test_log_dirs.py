"""DescribeLogDirs and AlterReplicaLogDirs: raw requests at every version kio has against an in-process broker
with two log.dirs, kafka-python's KafkaAdminClient (the only one of the three clients with these calls:
confluent-kafka 2.16.1 and aiokafka 0.14.0 have neither) on both backends, and a produce/consume across a move."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from backends import BACKENDS, start_broker
from groupmembers import wait_for
from inprocess import InProcessBroker
from kio.schema.errors import ErrorCode
from rawkafka import RawClient

from herd.protocol.messages import request_class
from herd.testing.wait import collect_until


def _module(api_key: int, version: int):  # noqa: ANN202 - the kio request module
    return __import__(request_class(api_key, version).__module__, fromlist=["_"])


def _produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    for i in range(start, start + count):
        producer.send(topic, b"v%d" % i, partition=0)
    producer.flush()
    producer.close()


# -- raw requests -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    root = tmp_path_factory.mktemp("logdirs")
    dirs = [str(root / "one"), str(root / "two")]
    broker = InProcessBroker(
        {
            "log.dirs": ",".join(dirs),
            "offsets.topic.num.partitions": "1",
            "num.partitions": "2",
            "log.segment.bytes": "1024",
        }
    )
    _produce(broker.bootstrap, "raw", 30)
    yield broker, dirs
    broker.stop()


def _describe(port: int, version: int, topics=None):  # type: ignore[no-untyped-def]
    mod = _module(35, version)
    wanted = (
        None
        if topics is None
        else tuple(mod.DescribableLogDirTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items())
    )
    with RawClient(port) as client:
        return client.request(35, version, mod.DescribeLogDirsRequest(topics=wanted))


def _sizes(response) -> dict[str, dict[tuple[str, int], tuple[int, int, bool]]]:  # type: ignore[no-untyped-def]
    return {
        r.log_dir: {
            (t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
            for t in r.topics
            for p in t.partitions
        }
        for r in response.results
    }


@pytest.mark.parametrize("version", range(1, 6))
def test_describe_log_dirs_at_every_version(node, version: int) -> None:
    broker, dirs = node
    response = _describe(broker.port, version)
    assert [r.log_dir for r in response.results] == dirs
    assert all(r.error_code == ErrorCode.none for r in response.results)
    held = {k: (d, *v) for d, sizes in _sizes(response).items() for k, v in sizes.items()}
    assert set(held) == {("__consumer_offsets", 0), ("raw", 0), ("raw", 1)}
    where, size, lag, future = held[("raw", 0)]
    assert size > 0 and size == sum(f.stat().st_size for f in Path(where, "raw-0").glob("*.log"))
    assert (lag, future) == (0, False)
    if version >= 4:
        assert all(0 <= r.usable_bytes <= r.total_bytes and r.total_bytes > 0 for r in response.results)
    filtered = _sizes(_describe(broker.port, version, {"raw": [1, 9], "nope": [0]}))
    assert [list(sizes) for sizes in filtered.values()] in ([[("raw", 1)], []], [[], [("raw", 1)]])


@pytest.mark.parametrize("version", [1, 2])
def test_alter_replica_log_dirs_at_every_version(node, version: int) -> None:
    broker, dirs = node
    mod = _module(34, version)
    where = {k: d for d, sizes in _sizes(_describe(broker.port, 4)).items() for k in sizes}
    target = dirs[1] if where[("raw", 0)] == dirs[0] else dirs[0]
    request = mod.AlterReplicaLogDirsRequest(
        dirs=(
            mod.AlterReplicaLogDir(
                path=target,
                topics=(
                    mod.AlterReplicaLogDirTopic(name="raw", partitions=(0, 5)),
                    mod.AlterReplicaLogDirTopic(name="nope", partitions=(0,)),
                ),
            ),
            mod.AlterReplicaLogDir(
                path="/not/a/log/dir", topics=(mod.AlterReplicaLogDirTopic(name="raw", partitions=(1,)),)
            ),
            mod.AlterReplicaLogDir(path="relative", topics=(mod.AlterReplicaLogDirTopic(name="raw", partitions=(1,)),)),
            mod.AlterReplicaLogDir(path=target, topics=(mod.AlterReplicaLogDirTopic(name="x" * 249, partitions=(0,)),)),
        )
    )
    with RawClient(broker.port) as client:
        response = client.request(34, version, request)
    codes = [(t.topic_name[:3], p.partition_index, p.error_code) for t in response.results for p in t.partitions]
    assert sorted(codes) == sorted(
        [
            ("raw", 0, ErrorCode.none),
            ("raw", 5, ErrorCode.unknown_topic_or_partition),
            ("nop", 0, ErrorCode.unknown_topic_or_partition),
            ("raw", 1, ErrorCode.log_dir_not_found),
            ("raw", 1, ErrorCode.log_dir_not_found),
            ("xxx", 0, ErrorCode.invalid_topic_exception),
        ]
    )
    moved = wait_for(
        lambda: ("raw", 0) in (s := _sizes(_describe(broker.port, 4)))[target] and not s[target][("raw", 0)][2] and s,
        10,
        "the move to finish",
    )
    assert moved[target][("raw", 0)][1] == 0 and Path(target, "raw-0").is_dir()


def test_the_internal_topic_is_not_moved(node) -> None:
    broker, dirs = node
    mod = _module(34, 2)
    where = {k: d for d, sizes in _sizes(_describe(broker.port, 4)).items() for k in sizes}
    other = dirs[1] if where[("__consumer_offsets", 0)] == dirs[0] else dirs[0]
    with RawClient(broker.port) as client:
        response = client.request(
            34,
            2,
            mod.AlterReplicaLogDirsRequest(
                dirs=(
                    mod.AlterReplicaLogDir(
                        path=other, topics=(mod.AlterReplicaLogDirTopic(name="__consumer_offsets", partitions=(0,)),)
                    ),
                )
            ),
        )
    assert response.results[0].partitions[0].error_code == ErrorCode.policy_violation


# -- kafka-python's admin client, both backends ---------------------------------------------------------------------


@pytest.fixture(scope="module", params=BACKENDS)
def served(request, tmp_path_factory):
    overrides = {"num.partitions": "1", "log.segment.bytes": "2048"}
    dirs: list[str] = []
    if request.param == "embedded":
        root = tmp_path_factory.mktemp("clientdirs")
        dirs = [str(root / "first"), str(root / "second")]
        overrides["log.dirs"] = ",".join(dirs)
    with start_broker(request, tmp_path_factory, "logdirs", overrides) as broker:
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        yield broker, admin, dirs
        admin.close()


def _where(admin, topic: str) -> dict[int, tuple[str, bool]]:  # type: ignore[no-untyped-def]
    found = {}
    for answer in admin.describe_log_dirs():
        for result in answer["log_dirs"]:
            for t in result["topics"]:
                if t["name"] == topic:
                    for p in t["partitions"]:
                        found[p["partition_index"]] = (result["log_dir"], p["is_future_key"])
    return found


def test_kafka_python_moves_a_partition_while_it_is_produced_to_and_consumed(served) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import LogDirNotFoundError, NoError, UnknownTopicOrPartitionError

    broker, admin, dirs = served
    _produce(broker.bootstrap, "moving", 200)
    node_id = admin.describe_topics(["moving"])[0]["partitions"][0]["leader_id"]
    if not dirs:  # cluster mode: each node answers one "log dir", the database, with the partitions it leads
        answers = [a["log_dirs"] for a in admin.describe_log_dirs()]
        assert all(len(a) == 1 and a[0]["error_code"] == 0 for a in answers)
        database = {a[0]["log_dir"] for a in answers}
        assert len(database) == 1 and urlsplit(database.pop()).password is None
        sizes = [
            p["partition_size"]
            for a in answers
            for t in a[0]["topics"]
            if t["name"] == "moving"
            for p in t["partitions"]
        ]
        assert len(sizes) == 1 and sizes[0] > 200  # one leader, with the 200 records committed
        errors = admin.alter_replica_log_dirs({("moving", 0, node_id): "/any/dir"})
        assert list(errors.values()) == [LogDirNotFoundError]
        return
    source = _where(admin, "moving")[0][0]
    target = dirs[1] if source == dirs[0] else dirs[0]
    errors = admin.alter_replica_log_dirs({("moving", 7, node_id): target, ("moving", 0, node_id): "/nowhere"})
    assert errors == {("moving", 7, node_id): UnknownTopicOrPartitionError, ("moving", 0, node_id): LogDirNotFoundError}
    assert admin.alter_replica_log_dirs({("moving", 0, node_id): target})[("moving", 0, node_id)] is NoError
    _produce(broker.bootstrap, "moving", 100, start=200)  # during the move (or right after it)
    wait_for(lambda: _where(admin, "moving") == {0: (target, False)}, 10, "the partition in its new directory")
    _produce(broker.bootstrap, "moving", 50, start=300)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    consumer.assign([TopicPartition("moving", 0)])
    got = collect_until(
        lambda: [m.value for batch in consumer.poll(500).values() for m in batch], lambda got: len(got) >= 350, 10
    )
    consumer.close()
    assert got == [b"v%d" % i for i in range(350)]
