"""Transactions on a cluster of three nodes over PostgreSQL (issue 17 items 2 and 5): a transactional producer
writes to partitions led by every node (the coordinator writes the markers of partitions other nodes lead with
WriteTxnMarkers), commits and aborts, and the node that coordinates its transactional id is killed with SIGKILL
right after a commit; the coordinator's successor completes what was left, and read_committed consumers of the
surviving nodes (which took the killed node's partitions over, their aborted transactions read from PostgreSQL)
see every committed record once and nothing aborted."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8
from pgcluster import create_topic_on
from rawkafka import RawClient
from test_transactions_clients import read_to_end

PARTITIONS = 6
TXN_COORDINATOR_KEY = 1


def coordinator_of(port: int, transactional_id: str) -> int:
    with RawClient(port) as client:
        (found,) = client.request(
            10, 4, FindCoordinatorRequest(key_type=i8(TXN_COORDINATOR_KEY), coordinator_keys=(transactional_id,))
        ).coordinators
    assert found.error_code == 0, found
    return found.node_id


def test_transactions_across_three_nodes_survive_the_coordinators_kill(new_cluster):
    cluster = new_cluster
    cluster.overrides.update(
        {
            "broker.session.timeout.ms": "3000",
            "transaction.state.log.num.partitions": "3",
            "offsets.topic.num.partitions": "3",
        }
    )
    cluster.start(nodes=3, balanced=False)
    topic, txn_id = f"t-{uuid.uuid4().hex[:6]}", f"x-{uuid.uuid4().hex[:6]}"
    create_topic_on(cluster, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(30)
    committed = []
    for n in range(6):
        producer.begin_transaction()
        values = [b"%d-%d" % (n, i) for i in range(12)]
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % PARTITIONS)
        if n % 3 == 1:
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    victim = coordinator_of(int(cluster.address(0).rsplit(":", 1)[1]), txn_id)
    cluster.kill(victim)  # right after the last commit: its markers may not all be written yet
    survivors = ",".join(cluster.address(i) for i in range(3) if i != victim)
    assert sorted(
        read_to_end(survivors, topic, "read_committed", partitions=PARTITIONS, expected=len(committed))
    ) == sorted(committed)
