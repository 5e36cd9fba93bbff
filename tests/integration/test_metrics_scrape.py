"""GET /metrics on a real `herd serve` (herd.server.metrics), scraped over HTTP and parsed with prometheus_client's
parser while real clients produce, consume in a group and commit: the counters move as they should, lag per
partition is the end offset less the committed one, groups show by state, and herd.metrics.max.series drops and
counts the series beyond it."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from brokers import BrokerProcess
from confluent_kafka import Producer
from groupmembers import create_topic, kafka_python_subscriber, wait_for
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families
from rawkafka import RawClient, part, req

from herd.testing import HerdBroker
from herd.testing.wait import collect_until

JOIN = 11

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(broker: BrokerProcess | HerdBroker) -> Samples:
    url = broker.http if "://" in broker.http else f"http://{broker.http}"  # a HerdBroker's names its scheme
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over the series whose labels include `labels`."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


def scraped_until(broker: BrokerProcess, condition: Callable[[Samples], bool], what: str) -> Samples:
    found: list[Samples] = []

    def check() -> bool:
        found[:] = [scrape(broker)]
        return condition(found[0])

    wait_for(check, timeout=15, what=what, interval=0.05)
    return found[0]


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(15) == 0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("metrics") / "data", {"herd.http.listener": "127.0.0.1:0"}).start()
    yield b
    b.stop()


def test_a_consumer_group_moves_the_metrics(broker: BrokerProcess) -> None:
    topic, group, counts = "metrics-t", "metrics-g", {0: 5, 1: 6, 2: 7}
    create_topic(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, counts)
    before = scrape(broker)
    assert value(before, "herd_topic_messages_in_total", topic=topic) == 18
    assert value(before, "herd_topic_bytes_in_total", topic=topic) > 0
    consumer = kafka_python_subscriber(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=100,
        session_timeout_ms=6000,
    )
    try:
        got = collect_until(
            lambda: [r for batch in consumer.poll(timeout_ms=200).values() for r in batch],
            lambda got: len(got) >= 18,
            20,
        )
        assert len(got) == 18
        committed = {0: 2, 1: 6, 2: 0}
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in committed.items()})
        samples = scraped_until(
            broker, lambda s: value(s, "herd_group_coordinator_heartbeats_total") >= 2, "heartbeats counted"
        )
        for api in ("JoinGroup", "SyncGroup", "Heartbeat", "OffsetCommit", "Fetch", "Produce", "FindCoordinator"):
            assert value(samples, "herd_requests_total", api=api) >= 1, api
            count = value(samples, "herd_request_latency_seconds_count", api=api)
            assert count == value(samples, "herd_requests_total", api=api)
            assert value(samples, "herd_request_latency_seconds_bucket", api=api, le="+Inf") == count
            assert value(samples, "herd_request_latency_seconds_sum", api=api) > 0
        assert value(samples, "herd_group_coordinator_heartbeats_total") == value(
            samples, "herd_requests_total", api="Heartbeat"
        )
        assert value(samples, "herd_topic_bytes_out_total", topic=topic) >= value(
            samples, "herd_topic_bytes_in_total", topic=topic
        )
        assert value(samples, "herd_group_coordinator_offset_commits_total") >= 3
        assert value(samples, "herd_group_coordinator_offset_commit_latency_seconds_count") >= 1
        assert value(samples, "herd_group_coordinator_fsync_latency_seconds_count") >= 1  # the commit and the join
        for p, offset in committed.items():
            labels = {"group": group, "topic": topic, "partition": str(p)}
            assert value(samples, "herd_consumer_group_offset", **labels) == offset
            assert value(samples, "herd_consumer_group_lag", **labels) == counts[p] - offset
        assert value(samples, "herd_consumer_group_sum_lag", group=group) == 3 + 0 + 7
        assert (
            value(samples, "herd_group_coordinator_classic_group_count", state="Stable", protocol_type="consumer") >= 1
        )
        assert value(samples, "herd_group_coordinator_group_count", protocol="classic") >= 1
        assert value(samples, "herd_group_coordinator_offset_count") >= 3
        assert value(samples, "herd_connections") >= 1
        assert value(samples, "herd_group_coordinator_num_partitions", state="active") == 50
        assert value(samples, "herd_group_coordinator_partition_load_time_seconds_count") == 50
        assert total(samples, "herd_group_coordinator_rebalances_total") >= 1
        assert total(samples, "herd_group_coordinator_completed_rebalances_total", outcome="stable") >= 1
        assert value(samples, "herd_group_coordinator_rebalance_join_seconds_count") >= 1
        assert value(samples, "herd_group_coordinator_rebalance_sync_seconds_count") >= 1
    finally:
        consumer.close()
    after = scraped_until(
        broker,
        lambda s: value(s, "herd_group_coordinator_classic_group_count", state="Empty", protocol_type="consumer") >= 1,
        "the group empty",
    )
    assert value(after, "herd_connections_closed_total") >= 1
    assert value(after, "herd_connections_accepted_total") >= value(after, "herd_connections_closed_total")
    assert total(after, "herd_group_coordinator_rebalances_total", cause="member-leave") >= 1


def test_the_series_cap_drops_and_counts(tmp_path: Path) -> None:
    """herd.metrics.max.series=2: a third topic gets no per-topic series; lag series go by whole groups in
    group-id order, so a second group that would make three is left out; both are counted."""
    broker = BrokerProcess(
        tmp_path / "data", {"herd.http.listener": "127.0.0.1:0", "herd.metrics.max.series": "2"}
    ).start()
    try:
        for name in ("cap-a", "cap-b", "cap-c"):
            create_topic(broker.bootstrap, name, 3)
            produce(broker.bootstrap, name, {0: 1})
        # cap-g0 alone is over the cap: left out, and the groups after it that fit are still exported
        for group, partitions in (("cap-g0", (0, 1, 2)), ("cap-g1", (0, 1)), ("cap-g2", (2,))):
            consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
            try:
                consumer.commit({TopicPartition("cap-a", p): OffsetAndMetadata(0, "", -1) for p in partitions})
            finally:
                consumer.close()
        samples = scrape(broker)
        topics = {dict(labels)["topic"] for (name, labels) in samples if name == "herd_topic_bytes_in_total"}
        assert topics == {"cap-a", "cap-b"}
        assert value(samples, "herd_metrics_dropped_updates_total", family="topic") >= 1
        offsets = {
            (dict(labels)["group"], dict(labels)["partition"])
            for (name, labels) in samples
            if name == "herd_consumer_group_offset"
        }
        assert offsets == {("cap-g1", "0"), ("cap-g1", "1")}
        assert value(samples, "herd_consumer_group_lag", group="cap-g1", topic="cap-a", partition="0") == 1
        assert value(samples, "herd_metrics_series_dropped", family="consumer_group_lag") == 4
        assert value(samples, "herd_metrics_series_dropped", family="consumer_group_sum_lag") == 2
    finally:
        broker.stop()


def test_a_long_group_id_is_dropped_and_a_negative_commit_has_no_lag(broker: BrokerProcess) -> None:
    """A client chooses its group id (up to 32 KB): one over 256 characters gets no series (counted as dropped),
    so it cannot make every scrape megabytes long; a committed offset of -1 has an offset series and no lag, as
    kafka-consumer-groups.sh shows "-" for it."""
    create_topic(broker.bootstrap, "labels", 1)
    produce(broker.bootstrap, "labels", {0: 3})
    long_id = "long-" + "x" * 300
    for group, offset in ((long_id, 1), ("negative", -1)):
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
        try:
            consumer.commit({TopicPartition("labels", 0): OffsetAndMetadata(offset, "", -1)})
        finally:
            consumer.close()
    samples = scraped_until(
        broker,
        lambda s: ("herd_consumer_group_offset", (("group", "negative"), ("partition", "0"), ("topic", "labels"))) in s,
        "the negative group's offset series",
    )
    assert not [labels for (_, labels) in samples if ("group", long_id) in labels]
    assert value(samples, "herd_metrics_series_dropped", family="consumer_group_sum_lag") >= 1
    assert value(samples, "herd_consumer_group_offset", group="negative", topic="labels", partition="0") == -1
    assert ("herd_consumer_group_lag", (("group", "negative"), ("partition", "0"), ("topic", "labels"))) not in samples


def test_a_long_protocol_type_is_dropped_from_the_group_counts(broker: BrokerProcess) -> None:
    """The protocol type is also the client's string: a group whose type is over 256 characters is left out of
    herd_group_coordinator_classic_group_count and counted as dropped, while the groups of other types stay."""
    long_type = "t" * 300
    with RawClient(broker.port, timeout=30) as c:
        # JoinGroup v3 (no KIP-394 member id round trip): the broker adds the member as it reads the request; the
        # answer waits for the end of the join phase, which this test has no need of.
        c.send_raw(
            c.encode(
                JOIN,
                3,
                req(
                    JOIN,
                    3,
                    group_id="long-type",
                    session_timeout=30_000,
                    rebalance_timeout=30_000,
                    member_id="",
                    protocol_type=long_type,
                    protocols=(part(JOIN, 3, "JoinGroupRequestProtocol", name="p", metadata=b""),),
                ),
            )
        )
        samples = scraped_until(
            broker,
            lambda s: value(s, "herd_metrics_series_dropped", family="classic_group_count") >= 1,
            "the long protocol type counted as dropped",
        )
    assert not [labels for (_, labels) in samples if ("protocol_type", long_type) in labels]
    assert value(samples, "herd_group_coordinator_group_count", protocol="classic") >= 1


def test_a_consumer_protocol_group_shows_by_state_and_counts_its_epoch_bumps(broker: BrokerProcess) -> None:
    """A KIP-848 group (confluent-kafka, group.protocol=consumer): herd_group_coordinator_group_count{protocol=
    "consumer"}, the consumer_group_count by state, its epoch bumps by cause and how long reconciliation took; the
    classic families do not count it."""
    from confluent_kafka import Consumer

    topic, group = "metrics-848", "metrics-848-g"
    create_topic(broker.bootstrap, topic, 4)
    before = scrape(broker)
    classic_started = total(before, "herd_group_coordinator_rebalances_total")
    members = [
        Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer"})
        for _ in range(2)
    ]
    try:
        for c in members:
            c.subscribe([topic])

        def stable(s: Samples) -> bool:
            for c in members:
                c.poll(0.05)
            return (
                value(s, "herd_group_coordinator_consumer_group_count", state="Stable") >= 1
                and value(s, "herd_group_coordinator_consumer_group_rebalances_total", cause="member-join") >= 2
                and all(len(c.assignment()) == 2 for c in members)
            )

        samples = scraped_until(broker, stable, "the consumer group stable with two members")
        assert value(samples, "herd_group_coordinator_group_count", protocol="consumer") >= 1
        assert value(samples, "herd_group_coordinator_consumer_group_reconcile_seconds_count") >= 1
        assert total(samples, "herd_group_coordinator_consumer_group_completed_rebalances_total", outcome="stable") >= 1
        assert total(samples, "herd_group_coordinator_rebalances_total") == classic_started
    finally:
        for c in members:
            c.close()
    after = scraped_until(
        broker,
        lambda s: value(s, "herd_group_coordinator_consumer_group_rebalances_total", cause="member-leave") >= 2,
        "both leaves counted",
    )
    assert value(after, "herd_group_coordinator_consumer_group_count", state="Empty") >= 1


def test_a_share_group_shows_by_state_and_its_records_by_what_became_of_them(broker: BrokerProcess) -> None:
    """A KIP-932 share group (confluent-kafka's ShareConsumer, explicit acknowledgement): the share group count by
    state, the share partition and session, and the records acquired, accepted, released and rejected."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    topic, group = "metrics-932", "metrics-932-g"
    create_topic(broker.bootstrap, topic, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])]
    ).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        producer.produce(topic, b"%d" % i, partition=0)
        producer.flush(10)
    before = scrape(broker)
    consumer = ShareConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    kinds = {b"0": AcknowledgeType.ACCEPT, b"1": AcknowledgeType.REJECT, b"2": AcknowledgeType.RELEASE}
    try:
        consumer.subscribe([topic])

        def acknowledged(s: Samples) -> bool:
            for m in consumer.poll(0.1):
                consumer.acknowledge(m, kinds[m.value()] if m.delivery_count() == 1 else AcknowledgeType.ACCEPT)
            consumer.commit_async()
            return (
                value(s, "herd_group_coordinator_share_group_count", state="Stable") >= 1
                and total(s, "herd_share_acknowledgements_total", type="release")
                - total(before, "herd_share_acknowledgements_total", type="release")
                >= 1
                and total(s, "herd_share_acknowledgements_total", type="accept")
                - total(before, "herd_share_acknowledgements_total", type="accept")
                >= 2  # 0, and 2 on its second delivery
            )

        samples = scraped_until(broker, acknowledged, "the share group's acknowledgements counted")
        assert value(samples, "herd_group_coordinator_group_count", protocol="share") >= 1
        assert (
            total(samples, "herd_share_acknowledgements_total", type="reject")
            - total(before, "herd_share_acknowledgements_total", type="reject")
            == 1
        )
        assert (
            total(samples, "herd_share_records_acquired_total") - total(before, "herd_share_records_acquired_total")
            >= 4
        )
        assert value(samples, "herd_share_partitions") >= 1 and value(samples, "herd_share_sessions") >= 1
        # the acknowledgements' writes of __share_group_state: each durable (an fsync), each round timed
        written = total(samples, "herd_share_coordinator_writes_total") - total(
            before, "herd_share_coordinator_writes_total"
        )
        fsyncs = total(samples, "herd_share_coordinator_fsyncs_total") - total(
            before, "herd_share_coordinator_fsyncs_total"
        )
        rounds = total(samples, "herd_share_coordinator_write_latency_seconds_count") - total(
            before, "herd_share_coordinator_write_latency_seconds_count"
        )
        assert written >= 3 and 1 <= fsyncs <= written and 1 <= rounds <= fsyncs, (written, fsyncs, rounds)
    finally:
        consumer.close()
