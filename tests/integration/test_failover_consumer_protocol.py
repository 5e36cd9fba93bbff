"""A KIP-848 consumer group's coordinator node killed with kill -9, on three herd nodes over PostgreSQL (issue 31
point 6): the group is event-sourced from its records in `__consumer_offsets`, so the node that loads the
partition rebuilds it at the same group, assignment and member epochs (Kafka's GroupMetadataManager.onLoaded
re-arms the members' sessions and nothing else); the members, confluent-kafka consumers with
`group.protocol=consumer`, heartbeat to it within their session and go on consuming with no partition moved.
The killed node restarted takes its offsets partitions back: a second move the group survives the same way.
Epochs are read with ConsumerGroupDescribe on the coordinator."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8
from pgcluster import create_topic_on, wait_offsets_spread
from rawkafka import RawClient, req

from herd.testing import HerdCluster
from herd.testing.wait import wait_until

NODES = 3
OFFSETS_PARTITIONS = 6
PARTITIONS = 6
FAILOVER_S = 30.0  # generous: the machine is shared
OVERRIDES = {
    "broker.session.timeout.ms": "2500",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "group.consumer.heartbeat.interval.ms": "5000",
}

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdCluster]:
    herd = HerdCluster(
        tmp_path_factory.mktemp("kip848-failover"), overrides=OVERRIDES, database_url=pg_url, faults=False
    )
    try:
        herd.start(nodes=NODES, balanced=False)
        wait_offsets_spread(herd, OFFSETS_PARTITIONS, FAILOVER_S)
        yield herd
    finally:
        herd.close()


class Polling:
    """A consumer polled by a thread of its own, keeping the values it read."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.subscribe([topic])
        self.values: set[bytes] = set()
        self.owned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self.consumer.poll(0.1)
            if message is not None and message.error() is None:
                self.values.add(message.value())
            self.owned = {tp.partition for tp in self.consumer.assignment()}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def coordinator(cluster: HerdCluster, group: str) -> int | None:
    for i in range(NODES):
        if cluster.running(i):
            with RawClient(cluster.nodes[i].port) as c:
                (found,) = c.request(
                    10, 4, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))
                ).coordinators
            return found.node_id if found.error_code == ErrorCode.none else None
    return None


def epochs(cluster: HerdCluster, group: str) -> tuple[int, tuple[int, int, dict[str, int]]] | None:
    """(coordinator, (group epoch, assignment epoch, member id -> epoch)) once a live coordinator has the group
    loaded, else None."""
    node = coordinator(cluster, group)
    if node is None or not cluster.running(node):
        return None
    with RawClient(cluster.nodes[node].port) as c:
        (g,) = c.request(69, 1, req(69, 1, group_ids=(group,), include_authorized_operations=False)).groups
    if g.error_code != ErrorCode.none:
        return None
    return node, (g.group_epoch, g.assignment_epoch, {m.member_id: m.member_epoch for m in g.members})


def produce(cluster: HerdCluster, topic: str, start: int, count: int) -> set[bytes]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return {b"%d" % i for i in range(start, start + count)}


def test_a_consumer_group_survives_its_coordinator_killed_with_no_epoch_bumped(cluster: HerdCluster) -> None:
    topic = "kip848-failover"
    create_topic_on(cluster, topic, PARTITIONS, FAILOVER_S)
    group = f"g-{topic}"
    members = [Polling(cluster.bootstrap, group, topic) for _ in range(2)]
    try:
        sent = produce(cluster, topic, 0, 60)
        wait_until(
            lambda: all(len(m.owned) == 3 for m in members) and set().union(*(m.values for m in members)) >= sent,
            FAILOVER_S,
            "both members with 3 partitions, every record read",
        )
        before_node, before = wait_until(lambda: epochs(cluster, group), FAILOVER_S, f"{group} described")
        owned = [set(m.owned) for m in members]

        cluster.kill(before_node)
        after_node, after = wait_until(
            lambda: (e := epochs(cluster, group)) is not None and e[0] != before_node and e,
            FAILOVER_S,
            f"{group} loaded by a node other than {before_node}",
        )
        assert after == before  # the group, the target and every member at the epochs they had
        sent = produce(cluster, topic, 60, 60)
        wait_until(lambda: set().union(*(m.values for m in members)) >= sent, FAILOVER_S, "the records after the kill")
        assert [m.owned for m in members] == owned

        cluster.restart(before_node, FAILOVER_S)  # it takes its share of the offsets partitions back
        wait_offsets_spread(cluster, OFFSETS_PARTITIONS, FAILOVER_S)
        sent = produce(cluster, topic, 120, 60)
        wait_until(
            lambda: set().union(*(m.values for m in members)) >= sent, FAILOVER_S, "the records after the restart"
        )
        _, final = wait_until(lambda: epochs(cluster, group), FAILOVER_S, f"{group} described after the restart")
        assert final == before and [m.owned for m in members] == owned
        assert after_node != before_node
    finally:
        for m in members:
            m.close()
