"""Three herd nodes over one PostgreSQL, as separate processes, with real clients: every node answers for the
cluster, leadership is spread and moves when a node dies, pauses, stops or joins, and nothing acknowledged is
lost or written twice. Each test has its own database (`new_cluster` uses `pg_test_url`); failover is made fast
with a 3 s session timeout."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict

import psycopg
import pytest
from aiokafka import AIOKafkaConsumer
from clients import confluent_read_all
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as TopicPartition_
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from groupmembers import wait_for
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_for_leader_epoch.v4.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from pgcluster import create_topic_on
from rawkafka import RawClient

from herd.testing import HerdCluster
from herd.testing.wait import collect_until_async, wait_until

FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
}

pytestmark = pytest.mark.timeout(240)


def _start(cluster: HerdCluster, n: int = 3) -> HerdCluster:
    cluster.overrides.update(FAST)
    cluster.start(nodes=n, balanced=False)
    _wait_for(lambda: len(_metadata(cluster.bootstrap).brokers) == n, "every node registered")
    return cluster


def _wait_for(condition, what: str, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    wait_for(condition, timeout, what, interval=0.1, ignore=(Exception,))  # a client's error: a node not ready yet


def _metadata(bootstrap: str, topic: str | None = None):  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=10)


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    meta = _metadata(bootstrap, topic).topics[topic]
    return {p.id: p.leader for p in meta.partitions.values()}


def _stored(pg_url: str, topic: str) -> dict[int, list[tuple[int, int, int]]]:
    """(base offset, last offset, leader epoch) of every stored batch, by partition: the exact stored log."""
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT p.partition, b.base_offset, b.last_offset, b.leader_epoch FROM herd_batches b "
            "JOIN herd_partitions p ON p.pid = b.pid JOIN herd_topics t ON t.topic_id = p.topic_id "
            "WHERE t.name = %s ORDER BY p.partition, b.base_offset",
            (topic,),
        ).fetchall()
    stored: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for partition, base, last, epoch in rows:
        stored[partition].append((base, last, epoch))
    return stored


class _Producing:
    """A confluent-kafka idempotent producer (acks=all) sending numbered records to `topic` in a thread until
    stopped: which were acknowledged, and every delivery error with whether it was retriable."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "retry.backoff.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.topic, self.partitions = topic, partitions
        self.acked: dict[int, list[bytes]] = defaultdict(list)
        self.failed: list[KafkaError] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Producing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _delivered(self, error: KafkaError | None, message) -> None:  # type: ignore[no-untyped-def]
        if error is not None:
            self.failed.append(error)
        else:
            self.acked[message.partition()].append(message.value())

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(20):
                partition = self.sent % self.partitions
                self.producer.produce(
                    self.topic, value=b"%08d" % self.sent, partition=partition, on_delivery=self._delivered
                )
                self.sent += 1
            self.producer.poll(0.01)
        self.producer.flush(90)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def wait_acked(self, count: int, timeout: float = 60.0) -> None:
        _wait_for(lambda: sum(len(v) for v in self.acked.values()) >= count, f"{count} records acknowledged", timeout)


def _check_exactly_once_in_order(acked: dict[int, list[bytes]], read: dict[int, list[bytes]]) -> None:
    for partition, values in acked.items():
        got = read.get(partition, [])
        assert len(got) == len(set(got)), f"partition {partition}: duplicates in the log"
        missing = set(values) - set(got)
        assert not missing, f"partition {partition}: {len(missing)} acknowledged records lost"
        numbers = [int(v) for v in got]
        assert numbers == sorted(numbers), f"partition {partition}: records out of order"


def test_every_node_answers_for_the_cluster_with_three_clients(new_cluster: HerdCluster) -> None:
    """Metadata from any node lists all three and leaders spread over them; kafka-python produces through
    node 0, confluent-kafka and aiokafka consume through nodes 1 and 2; a group's coordinator is a leader."""
    cluster = _start(new_cluster)
    create_topic_on(cluster, "spread", 6)
    for address in cluster.addresses:
        assert sorted(b.id for b in _metadata(address).brokers.values()) == [0, 1, 2]
    assert sorted(set(_leaders(cluster.address(1), "spread").values())) == [0, 1, 2]
    admin = AdminClient({"bootstrap.servers": cluster.address(1)})
    described = admin.describe_cluster(request_timeout=10).result()  # DescribeCluster, from any node
    assert sorted(n.id for n in described.nodes) == [0, 1, 2]
    assert described.controller.id in (0, 1, 2) and described.cluster_id == _metadata(cluster.address(2)).cluster_id
    node0 = ConfigResource(ResourceType.BROKER, "0")
    url = admin.describe_configs([node0])[node0].result(10)["herd.cluster.database.url"]
    assert url.is_sensitive and url.value is None  # it holds the database password

    producer = KafkaProducer(bootstrap_servers=cluster.address(0), acks="all")
    for i in range(300):
        producer.send("spread", value=b"%08d" % i, partition=i % 6)
    producer.flush(30)
    producer.close()

    read = confluent_read_all(cluster.address(1), "spread", 300)
    assert sorted(v for values in read.values() for v in values) == [b"%08d" % i for i in range(300)]

    async def aio() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            "spread",
            bootstrap_servers=cluster.address(2),
            group_id="aio-group",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()

        async def poll() -> list[bytes]:
            batches = await consumer.getmany(timeout_ms=500)
            return [r.value for records in batches.values() for r in records]

        try:
            got = await collect_until_async(poll, lambda got: len(got) >= 300, 60)
            await consumer.commit()
            return got
        finally:
            await consumer.stop()

    assert sorted(asyncio.run(aio())) == [b"%08d" % i for i in range(300)]
    # the group's committed offsets are visible through any node (kafka-python asks its coordinator)
    consumer = KafkaConsumer(bootstrap_servers=cluster.address(0), group_id="aio-group", enable_auto_commit=False)
    try:
        committed = {p: consumer.committed(TopicPartition("spread", p)) for p in range(6)}
    finally:
        consumer.close()
    assert sum(committed.values()) == 300


def test_kill_9_during_acks_all_produce_loses_nothing_and_duplicates_nothing(
    new_cluster: HerdCluster, pg_test_url: str
) -> None:
    cluster = _start(new_cluster)
    create_topic_on(cluster, "orders", 6)
    victim = 1
    assert victim in _leaders(cluster.address(0), "orders").values()
    with _Producing(cluster.bootstrap, "orders", 6) as producing:
        producing.wait_acked(2000)
        cluster.kill(victim)
        killed_at = producing.sent
        _wait_for(lambda: victim not in _leaders(cluster.address(0), "orders").values(), "leaders moved", 20)
        _wait_for(lambda: producing.sent > killed_at + 2000, "producing goes on")
        producing.wait_acked(killed_at + 1000)
    assert not [e for e in producing.failed if not e.retriable()], producing.failed
    read = confluent_read_all(cluster.address(0), "orders", sum(len(v) for v in producing.acked.values()))
    _check_exactly_once_in_order(producing.acked, read)
    # the stored log is one sequence per partition: batches contiguous, epochs never going back
    for partition, batches in _stored(pg_test_url, "orders").items():
        for (_base, last, epoch), (next_base, _, next_epoch) in zip(batches, batches[1:]):
            assert next_base == last + 1, f"partition {partition}: a gap or overlap at {next_base}"
            assert next_epoch >= epoch


def test_a_node_paused_past_its_lease_never_appends_again(new_cluster: HerdCluster, pg_test_url: str) -> None:
    """SIGSTOP node 2 until its partitions move, keep producing through the others, then SIGCONT it: it must not
    store a single batch more. Its clients' requests in flight while it was paused are answered (if at all)
    NOT_LEADER_OR_FOLLOWER or a retriable error."""
    cluster = _start(new_cluster)
    create_topic_on(cluster, "paused", 6)
    led_by_2 = [p for p, node in _leaders(cluster.address(0), "paused").items() if node == 2]
    assert led_by_2
    # a producer connected to node 2 only, with writes waiting in it when it stops
    stuck = Producer(
        {
            "bootstrap.servers": cluster.address(2),
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": 120000,
            "enable.idempotence": True,
        }
    )
    stuck.produce("paused", b"warm-up", partition=led_by_2[0])
    assert stuck.flush(20) == 0
    cluster.pause(2)
    stuck_failures: list[KafkaError] = []
    for i in range(50):
        stuck.produce(
            "paused",
            b"during-pause-%d" % i,
            partition=led_by_2[0],
            on_delivery=lambda e, m: stuck_failures.append(e) if e else None,
        )
    stuck.poll(0)
    _wait_for(
        lambda: not set(led_by_2) & {p for p, n in _leaders(cluster.address(0), "paused").items() if n == 2},
        "node 2's partitions moved",
        20,
    )
    epochs_after_move = {
        p: max(e for _, _, e in batches) if batches else -1 for p, batches in _stored(pg_test_url, "paused").items()
    }
    with psycopg.connect(pg_test_url) as conn:
        new_epochs = dict(
            conn.execute(
                "SELECT p.partition, p.leader_epoch FROM herd_partitions p JOIN herd_topics t USING (topic_id) "
                "WHERE t.name = 'paused'"
            ).fetchall()
        )
    before = _stored(pg_test_url, "paused")
    cluster.resume(2)
    time.sleep(3)  # node 2 wakes, its pending commits run (and must be fenced), it sees it lost everything
    stuck.flush(30)
    after = _stored(pg_test_url, "paused")
    for partition in led_by_2:
        old_batches = [b for b in after.get(partition, []) if b not in before.get(partition, [])]
        assert all(epoch >= new_epochs[partition] for _, _, epoch in old_batches), (
            f"partition {partition}: node 2 appended after losing it: {old_batches}"
        )
    assert epochs_after_move  # the log was read
    log_text = cluster.log(2)
    assert "Traceback" not in log_text


def test_sigterm_hands_leadership_over_with_only_retriable_errors(new_cluster: HerdCluster) -> None:
    cluster = _start(new_cluster)
    create_topic_on(cluster, "graceful", 6)
    with _Producing(cluster.address(0) + "," + cluster.address(2), "graceful", 6) as producing:
        producing.wait_acked(1000)
        started = time.monotonic()
        assert cluster.terminate(1) == 0
        stopped_in = time.monotonic() - started
        _wait_for(lambda: 1 not in _leaders(cluster.address(0), "graceful").values(), "leaders moved", 5)
        sent = producing.sent
        _wait_for(lambda: producing.sent > sent + 1000, "producing goes on")
    assert not [e for e in producing.failed if not e.retriable()], producing.failed
    assert not producing.failed or all(e.retriable() for e in producing.failed)
    read = confluent_read_all(cluster.address(0), "graceful", sum(len(v) for v in producing.acked.values()))
    _check_exactly_once_in_order(producing.acked, read)
    assert stopped_in < 15


def test_a_joining_node_takes_its_share_while_clients_produce(new_cluster: HerdCluster) -> None:
    cluster = _start(new_cluster, 2)
    create_topic_on(cluster, "growing", 6)
    assert sorted(set(_leaders(cluster.address(0), "growing").values())) == [0, 1]
    with _Producing(cluster.bootstrap, "growing", 6) as producing:
        producing.wait_acked(1000)
        cluster.add_node()
        _wait_for(
            lambda: list(_leaders(cluster.address(0), "growing").values()).count(2) == 2, "node 2 leads its share", 20
        )
        sent = producing.sent
        _wait_for(lambda: producing.sent > sent + 1000, "producing goes on")
    assert not [e for e in producing.failed if not e.retriable()], producing.failed
    read = confluent_read_all(cluster.address(2), "growing", sum(len(v) for v in producing.acked.values()))
    _check_exactly_once_in_order(producing.acked, read)


def test_a_topic_deleted_through_one_node_loses_its_committed_offsets_on_every_coordinator(
    new_cluster: HerdCluster,
) -> None:
    """Groups coordinated by all three nodes commit offsets on a topic; deleting it through node 0 makes every
    coordinator drop them (Kafka's onPartitionsDeleted), and every node stops listing it."""
    cluster = _start(new_cluster)
    create_topic_on(cluster, "doomed", 2)
    groups = [f"doomed-group-{i}" for i in range(12)]  # spread over the 6 offsets partitions, so the 3 nodes
    for group in groups:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        consumer.commit(offsets=[TopicPartition_("doomed", 0, 42)], asynchronous=False)
        consumer.close()
    admin = AdminClient({"bootstrap.servers": cluster.address(0)})
    admin.delete_topics(["doomed"])["doomed"].result(20)
    for address in cluster.addresses:
        _wait_for(lambda address=address: "doomed" not in _metadata(address).topics, f"{address} forgot it", 10)

    def offsets_gone() -> bool:
        for group in groups:
            consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
            try:
                if consumer.committed([TopicPartition_("doomed", 0)], timeout=10)[0].offset >= 0:
                    return False
            finally:
                consumer.close()
        return True

    _wait_for(offsets_gone, "every group's offsets on the deleted topic gone", 30)


def test_a_kafka_python_consumer_reads_on_across_a_leader_move_and_earlier_epochs_end_where_the_next_began(
    new_cluster: HerdCluster,
) -> None:
    """kafka-python validates its position with OffsetForLeaderEpoch when a partition's leader epoch changes
    (KIP-320) and fetches nothing from the partition until it has an answer; the new leader answers the earlier
    epoch with the offset its own epoch began at."""
    cluster = _start(new_cluster, 2)
    create_topic_on(cluster, "moving", 2)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(20):
        producer.send("moving", value=b"%d" % i, partition=i % 2)
    producer.flush(20)
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.address(0),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        metadata_max_age_ms=1000,
    )
    consumer.assign([TopicPartition("moving", 0), TopicPartition("moving", 1)])
    seen: list[bytes] = []

    def read(total: int) -> None:
        def more() -> bool:
            if len(seen) < total:
                for records in consumer.poll(500).values():
                    seen.extend(r.value for r in records)
            return len(seen) >= total

        wait_until(more, 30, lambda: f"{total} records read (read {len(seen)})", interval=0)
        assert len(seen) == total, f"read {len(seen)} of {total}"

    try:
        read(20)
        moved = [p for p, leader in _leaders(cluster.address(0), "moving").items() if leader == 1]
        assert moved, "node 1 leads a partition"
        assert cluster.terminate(1) == 0
        _wait_for(lambda: set(_leaders(cluster.address(0), "moving").values()) == {0}, "node 0 leads both")
        for i in range(20, 40):
            producer.send("moving", value=b"%d" % i, partition=i % 2)
        producer.flush(20)
        read(40)
    finally:
        consumer.close()
        producer.close()
    assert sorted(int(v) for v in seen) == list(range(40))

    with RawClient(cluster.nodes[0].port) as client:
        epochs = {
            p.partition_index: p.leader_epoch
            for p in client.request(3, 12, _raw_metadata("moving")).topics[0].partitions
        }
        partition = moved[0]
        request = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=(
                OffsetForLeaderTopic(
                    topic="moving",
                    partitions=(
                        OffsetForLeaderPartition(
                            partition=partition, current_leader_epoch=-1, leader_epoch=epochs[partition] - 1
                        ),
                    ),
                ),
            ),
        )
        answer = client.request(23, 4, request).topics[0].partitions[0]
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (0, epochs[partition] - 1, 10)


def _raw_metadata(topic: str) -> MetadataRequest:
    return MetadataRequest(
        topics=(MetadataRequestTopic(name=topic, topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
