"""A cluster node in the test's own process (herd.server.node), where its state can be looked at: what a node
takes over while it starts is followed like any later move."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from inprocess import InProcessBroker

from herd.testing.wait import wait_until


def _node(url: str, node_id: int, tmp_path: Path) -> InProcessBroker:
    return InProcessBroker(
        {
            "herd.cluster.database.url": url,
            "node.id": str(node_id),
            "log.dirs": str(tmp_path / f"node-{node_id}"),
            "offsets.topic.num.partitions": "2",
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
        },
        timeout=30,
    )


def test_a_node_rebuilds_the_producers_of_the_partitions_it_takes_while_starting(
    pg_test_url: str, tmp_path: Path
) -> None:
    """Node 1 joins a node that leads everything and takes its share in its first step, before it serves: the
    idempotent producer's state of every data partition it took is rebuilt from the stored batches, as for any
    later move (otherwise a retry of a batch node 0 stored would be appended again)."""
    first = _node(pg_test_url, 0, tmp_path)
    second = None
    try:
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        admin.create_topics([NewTopic("ids", 4, 1)])["ids"].result(20)
        producer = Producer({"bootstrap.servers": first.bootstrap, "enable.idempotence": True, "acks": "all"})
        for partition in range(4):
            producer.produce("ids", b"x", partition=partition)
        assert producer.flush(20) == 0
        second = _node(pg_test_url, 1, tmp_path)

        async def rebuilt() -> tuple[int, int, set[tuple[str, int]]]:
            broker = second.server.broker
            topic = broker.cluster.get("ids")
            led = sum(partition is not None for partition in topic.partitions)
            return led, len(broker.producers), set(broker.producers.restoring)

        def restored() -> tuple[int, int, set[tuple[str, int]]] | None:
            state = second.run(rebuilt())
            return None if state[2] else state

        led, producers, restoring = wait_until(restored, 10, "node 1 to restore its producers", interval=0.05)
        assert led == 2 and not restoring
        assert producers == led  # one producer, known on each partition node 1 took
    finally:
        if second is not None:
            second.stop()
        first.stop()
