"""Consumer lag on /metrics in cluster mode (herd.server.lag): the coordinator of a group reports the lag of every
partition the group committed, those led by the other node included (their end offsets read from
herd_partitions in PostgreSQL), and only the coordinator reports it."""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from groupmembers import wait_for
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from pgcluster import create_topic_on
from test_metrics_scrape import Samples, scrape, value

from herd.testing import HerdCluster


def test_the_coordinator_reports_the_lag_of_partitions_led_elsewhere(new_cluster: HerdCluster) -> None:
    new_cluster.overrides.update({"offsets.topic.num.partitions": "2", "herd.http.listener": "127.0.0.1:0"})
    cluster = new_cluster.start(nodes=2, balanced=False)
    topic, group = "lagged", "lag-group"
    create_topic_on(cluster, topic, 4)
    meta = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=10).topics[topic]
    leaders = {p.id: p.leader for p in meta.partitions.values()}
    assert sorted(set(leaders.values())) == [0, 1], leaders  # placement spreads 4 partitions over 2 nodes
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    ends = {p: 3 + p for p in range(4)}
    for partition, n in ends.items():
        for i in range(n):
            producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0
    committed = {0: 1, 1: 0, 2: 5, 3: 2}
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in committed.items()})
    finally:
        consumer.close()

    def lag_on(node: int) -> Samples | None:
        samples = scrape(cluster.nodes[node])
        return (
            samples
            if any(name == "herd_consumer_group_lag" and ("group", group) in labels for name, labels in samples)
            else None
        )

    reporting = wait_for(lambda: [n for n in (0, 1) if lag_on(n)], timeout=15, what="a node reporting the lag")
    assert len(reporting) == 1, reporting
    coordinator = reporting[0]
    samples = scrape(cluster.nodes[coordinator])
    for p, offset in committed.items():
        labels = {"group": group, "topic": topic, "partition": str(p)}
        assert value(samples, "herd_consumer_group_lag", **labels) == ends[p] - offset, (p, leaders[p], coordinator)
    assert any(leaders[p] != coordinator for p in committed)  # some of them from PostgreSQL
