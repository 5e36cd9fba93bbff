"""KIP-932 share groups' data side against `herd serve` (issue 32): confluent-kafka's ShareConsumer reads a topic as
a queue (every record to one consumer, implicit acknowledgement), two consumers share the records, a released record
comes back with its delivery count up and a rejected one never, a record released at the delivery limit is
archived, a consumer that closes (or is killed) gives back what it did not acknowledge, consumers join and leave
while records flow, read_committed; raw ShareFetch/ShareAcknowledge for the session rules (open, epochs, close, the
session limit), piggybacked acknowledgements, a lock that runs out, v2's Renew and record_limit, the share state
after a kill -9 and after the group's deletion. One broker for the module (short locks and heartbeats), brokers of
their own for the session limit and the restart (the gate is test_share_groups.py's)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid

import pytest
from brokers import BrokerProcess
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kio.schema.errors import ErrorCode
from processes import first_line, reaped
from rawkafka import RawClient, part, req

from herd.testing.wait import wait_until

FETCH, ACK = 78, 79
LOCK_MS = 2_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    settings = {
        "offsets.topic.num.partitions": "4",
        "group.share.min.heartbeat.interval.ms": "1000",
        "group.share.heartbeat.interval.ms": "1000",
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.record.lock.duration.ms": str(LOCK_MS),
        "group.share.delivery.count.limit": "3",
    }
    process = BrokerProcess(tmp_path_factory.mktemp("kip932fetch") / "data", settings, die_with_parent=True)
    process.start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def new_topic(bootstrap: str, partitions: int = 3) -> str:
    topic = unique("q")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    return topic


def produce(bootstrap: str, topic: str, count: int, partitions: int = 3, *, batch_each: bool = False) -> set[bytes]:
    """`count` records round-robin over the partitions; with `batch_each`, each in a batch of its own (records are
    handed out in whole batches)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    values = {b"v%d" % i for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.produce(topic, value, partition=i % partitions)
        if batch_each:
            assert producer.flush(15) == 0
    assert producer.flush(15) == 0
    return values


def share_consumer(bootstrap: str, group: str, **config: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})


def drain(consumers: list[ShareConsumer], until, timeout: float, on_message=None) -> list:
    """Poll the consumers in turn until `until(messages)` holds; every message received, in order."""
    got: list = []

    def done() -> bool:
        for c in consumers:
            for m in c.poll(0.2):
                assert m.error() is None, m.error()
                got.append(m)
                if on_message is not None:
                    on_message(c, m)
        return until(got)

    wait_until(done, timeout, "the share consumers' records")
    return got


def subscribed(
    bootstrap: str, group: str, topic: str, n: int = 1, group_configs: dict[str, str] | None = None, **config: str
) -> list[ShareConsumer]:
    """`n` share consumers of `group` on `topic`, the group created with share.auto.offset.reset=earliest (so that
    records produced before they joined are theirs) and `group_configs`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    settings = {"share.auto.offset.reset": "earliest", **(group_configs or {})}
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in settings.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(15)
    consumers = [share_consumer(bootstrap, group, **config) for _ in range(n)]
    for c in consumers:
        c.subscribe([topic])
    return consumers


def close_all(consumers: list[ShareConsumer]) -> None:
    for c in consumers:
        c.close()


def test_a_share_consumer_reads_every_record_once(broker) -> None:
    topic, group = new_topic(broker.bootstrap), unique("queue")
    values = produce(broker.bootstrap, topic, 60)
    (consumer,) = subscribed(broker.bootstrap, group, topic)
    try:
        got = drain([consumer], lambda ms: len(ms) >= 60, 30)
        assert sorted(m.value() for m in got) == sorted(values)  # each once
        assert {m.delivery_count() for m in got} == {1}
        more = produce(broker.bootstrap, topic, 3)  # v0..v2 again, new offsets
        again = drain([consumer], lambda ms: len(ms) >= 3, 15)
        assert sorted(m.value() for m in again) == sorted(more)
    finally:
        consumer.close()


def test_two_consumers_share_the_records_between_them(broker) -> None:
    topic, group = new_topic(broker.bootstrap, partitions=1), unique("queue")
    consumers = subscribed(broker.bootstrap, group, topic, n=2, **{"max.poll.records": "5"})
    try:
        wait_until(lambda: all(c.poll(0.2) is not None for c in consumers) and _members(broker, group) == 2, 20,
                   "both consumers assigned the partition")  # fmt: skip
        values = produce(broker.bootstrap, topic, 40, partitions=1, batch_each=True)
        seen: dict[int, set[bytes]] = {0: set(), 1: set()}
        got = drain(consumers, lambda ms: len({m.value() for m in ms}) >= 40, 30,
                    lambda c, m: seen[consumers.index(c)].add(m.value()))  # fmt: skip
        assert {m.value() for m in got} == values and len(got) == 40  # no record twice
        assert seen[0] and seen[1]  # one partition, shared by both
    finally:
        close_all(consumers)


def _members(broker, group: str) -> int:
    """How many members of the group have partitions assigned."""
    with RawClient(broker.port) as c:
        described = c.request(77, 1, req(77, 1, group_ids=(group,), include_authorized_operations=False)).groups[0]
        return sum(1 for m in described.members if m.assignment.topic_partitions)


def test_released_records_come_back_rejected_ones_never_and_the_limit_archives(broker) -> None:
    topic, group = new_topic(broker.bootstrap, partitions=1), unique("queue")
    produce(broker.bootstrap, topic, 3, partitions=1)  # v0, v1, v2
    (consumer,) = subscribed(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    kinds = {b"v0": AcknowledgeType.ACCEPT, b"v1": AcknowledgeType.RELEASE, b"v2": AcknowledgeType.REJECT}
    try:
        deliveries: list[tuple[bytes, int]] = []

        def ack(c, m) -> None:
            deliveries.append((m.value(), m.delivery_count()))
            c.acknowledge(m, kinds[m.value()])

        def settled(ms) -> bool:
            consumer.commit_sync()
            return [d for d in deliveries if d[0] == b"v1"] == [(b"v1", 1), (b"v1", 2), (b"v1", 3)]

        drain([consumer], settled, 30, ack)
        time.sleep(LOCK_MS / 1000)  # nothing more comes: v1 is archived at the limit of 3, v2 was rejected
        drain([consumer], lambda ms: True, 5, ack)
        assert sorted(deliveries) == [(b"v0", 1), (b"v1", 1), (b"v1", 2), (b"v1", 3), (b"v2", 1)]
    finally:
        consumer.close()


def test_records_a_consumer_did_not_acknowledge_go_to_another_when_it_closes(broker) -> None:
    topic, group = new_topic(broker.bootstrap, partitions=1), unique("queue")
    values = produce(broker.bootstrap, topic, 10, partitions=1)
    first, second = subscribed(broker.bootstrap, group, topic, n=2, **{"share.acknowledgement.mode": "explicit"})
    try:
        held = drain([first], lambda ms: len(ms) >= 1, 20)  # acquired, never acknowledged
        first.close()
        got = drain([second], lambda ms: {m.value() for m in ms} >= {m.value() for m in held}, 20,
                    lambda c, m: c.acknowledge(m))  # fmt: skip
        assert {m.value() for m in got} <= values
        assert {m.delivery_count() for m in got if m.value() in {h.value() for h in held}} == {1}  # given back
    finally:
        second.close()


def transactions(bootstrap: str, topic: str) -> None:
    """On one partition: c0 committed, a0 a1 aborted, c1 committed, then o0 in a transaction left open."""

    def producer(tid: str) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
        p.init_transactions(15)
        return p

    done = producer(unique("txn"))
    for values, commit in (([b"c0"], True), ([b"a0", b"a1"], False), ([b"c1"], True)):
        done.begin_transaction()
        for value in values:
            done.produce(topic, value, partition=0)
        done.flush(15)
        (done.commit_transaction if commit else done.abort_transaction)(15)
    left_open = producer(unique("txn"))
    left_open.begin_transaction()
    left_open.produce(topic, b"o0", partition=0)
    left_open.flush(15)


def test_read_committed_share_groups_skip_aborted_and_open_transactions(broker) -> None:
    topic = new_topic(broker.bootstrap, partitions=1)
    transactions(broker.bootstrap, topic)
    committed_group, uncommitted_group = unique("rc"), unique("ru")
    (committed,) = subscribed(
        broker.bootstrap, committed_group, topic, group_configs={"share.isolation.level": "read_committed"}
    )
    (uncommitted,) = subscribed(broker.bootstrap, uncommitted_group, topic)
    try:
        got = drain([committed], lambda ms: {m.value() for m in ms} >= {b"c0", b"c1"}, 30)
        time.sleep(0.5)
        got += drain([committed], lambda ms: True, 5)
        assert sorted(m.value() for m in got) == [b"c0", b"c1"]  # not a0 a1 (aborted), not o0 (open)
        everything = drain([uncommitted], lambda ms: {m.value() for m in ms} >= {b"c0", b"a0", b"a1", b"c1", b"o0"}, 30)
        assert sorted(m.value() for m in everything) == [b"a0", b"a1", b"c0", b"c1", b"o0"]
    finally:
        committed.close()
        uncommitted.close()


# --- raw ShareFetch and ShareAcknowledge -----------------------------------------------------------------------------


def fetch(c: RawClient, group: str, member: str, epoch: int, topics=(), forgotten=(), max_wait: int = 0):
    return c.request(
        FETCH,
        1,
        req(
            FETCH,
            1,
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait=max_wait,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=500,
            batch_size=500,
            topics=topics,
            forgotten_topics_data=forgotten,
        ),
    )


def fetch_topic(topic_id, partition: int = 0, acks=()):
    batches = tuple(
        part(FETCH, 1, "AcknowledgementBatch", first_offset=f, last_offset=last, acknowledge_types=types)
        for f, last, types in acks
    )
    p = part(FETCH, 1, "FetchPartition", partition_index=partition, acknowledgement_batches=batches)
    return part(FETCH, 1, "FetchTopic", topic_id=topic_id, partitions=(p,))


def ack_request(group: str, member: str, epoch: int, topic_id, acks):
    batches = tuple(
        part(ACK, 1, "AcknowledgementBatch", first_offset=f, last_offset=last, acknowledge_types=types)
        for f, last, types in acks
    )
    p = part(ACK, 1, "AcknowledgePartition", partition_index=0, acknowledgement_batches=batches)
    topics = (part(ACK, 1, "AcknowledgeTopic", topic_id=topic_id, partitions=(p,)),)
    return req(ACK, 1, group_id=group, member_id=member, share_session_epoch=epoch, topics=topics)


def topic_id_of(c: RawClient, topic: str):
    wanted = (part(3, 12, "MetadataRequestTopic", name=topic, topic_id=None),)
    request = req(3, 12, topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return c.request(3, 12, request).topics[0].topic_id


def acquired(response) -> list[tuple[int, int, int]]:
    return [
        (r.first_offset, r.last_offset, r.delivery_count)
        for t in response.responses
        for p in t.partitions
        for r in p.acquired_records
    ]


def test_raw_share_sessions_piggybacked_acknowledgements_and_a_lock_that_runs_out(broker) -> None:
    topic, group = new_topic(broker.bootstrap, partitions=1), unique("raw")
    with RawClient(broker.port) as c:
        tid = topic_id_of(c, topic)
        produce(broker.bootstrap, topic, 4, partitions=1)  # before the share partition: latest skips them
        assert fetch(c, group, "", 0).error_code == ErrorCode.invalid_request  # no member id
        assert fetch(c, group, "m", 1).error_code == ErrorCode.share_session_not_found
        opened = fetch(c, group, "m", 0, (fetch_topic(tid),))
        assert opened.error_code == ErrorCode.none and acquired(opened) == []
        assert opened.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
        assert [p.partition_index for t in opened.responses for p in t.partitions] == [0]  # every partition at 0
        produce(broker.bootstrap, topic, 3, partitions=1)  # offsets 4-6
        got = fetch(c, group, "m", 1, max_wait=5_000)  # the session's partition, without naming it again
        assert acquired(got) == [(4, 6, 1)]
        assert fetch(c, group, "m", 1).error_code == ErrorCode.invalid_share_session_epoch
        with_acks = fetch(c, group, "m", 2, (fetch_topic(tid, acks=((4, 4, (1,)), (5, 5, (2,)))),))
        (p,) = with_acks.responses[0].partitions
        assert p.acknowledge_error_code == ErrorCode.none and acquired(with_acks) == []  # 5 released, not refetched
        again = fetch(c, group, "m", 3)
        assert acquired(again) == [(5, 5, 2)]  # released: its second delivery
        bad = fetch(c, group, "m", 4, (fetch_topic(tid, acks=((6, 5, (1,)),)),))
        assert bad.responses[0].partitions[0].acknowledge_error_code == ErrorCode.invalid_request
        time.sleep(LOCK_MS / 1000 + 0.2)  # 5 and 6 are still m's: their locks run out
        other = fetch(c, group, "o", 0, (fetch_topic(tid),))
        assert acquired(other) == [(5, 5, 3)]  # its last attempt (limit 3): alone, as Kafka isolates it
        assert acquired(fetch(c, group, "o", 1)) == [(6, 6, 2)]
        late = c.request(ACK, 1, ack_request(group, "m", 5, tid, ((6, 6, (1,)),)))
        assert late.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state  # no longer m's
        assert (
            c.request(ACK, 1, ack_request(group, "o", 0, tid, ())).error_code == ErrorCode.invalid_share_session_epoch
        )
        closed = c.request(ACK, 1, ack_request(group, "o", -1, tid, ((5, 5, (1,)),)))  # accept 5, give back 6
        assert closed.error_code == ErrorCode.none and closed.responses[0].partitions[0].error_code == ErrorCode.none
        assert fetch(c, group, "o", 1).error_code == ErrorCode.share_session_not_found
        assert acquired(fetch(c, group, "m", 6)) == [(6, 6, 2)]  # given back by o's close: not a delivery


def test_a_fetch_whose_records_take_several_reads_gets_them_all_whole(broker) -> None:
    """An acquisition reads 64 KiB first, then twice as much each time (herd.runtime.shares._read_until): 500
    records in batches of ~10 KB take four reads, joined into one answer of whole batches, each record once."""
    from batches import records_of

    topic, group = new_topic(broker.bootstrap, partitions=1), unique("reads")
    with RawClient(broker.port) as c:
        tid = topic_id_of(c, topic)
        assert acquired(fetch(c, group, "m", 0, (fetch_topic(tid),))) == []  # latest: the empty log's end
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000})
        for batch in range(60):  # one batch of 10 records of 1 KB each
            for i in range(10):
                producer.produce(topic, b"%04d" % (10 * batch + i) + b"x" * 996, partition=0)
            assert producer.flush(15) == 0
        got = fetch(c, group, "m", 1, max_wait=5_000)
        assert acquired(got) == [(0, 499, 1)]  # max_records 500: whole batches of 10
        (p,) = got.responses[0].partitions
        assert len(p.records) > (64 + 128 + 256) * 1024  # more than the first three reads
        records = records_of(bytes(p.records))
        assert [o for o, _ in records] == list(range(500))
        assert [v[:4] for _, v in records] == [b"%04d" % i for i in range(500)]


def test_records_deleted_before_their_delivery_are_never_delivered(broker) -> None:
    """DeleteRecords moves the log start past the share-partition start offset: the records before it that were
    AVAILABLE are archived, and the next fetch starts at the log start (Kafka's updateCacheAndOffsets)."""
    from confluent_kafka import TopicPartition

    topic, group = new_topic(broker.bootstrap, partitions=1), unique("deleted-records")
    with RawClient(broker.port) as c:
        tid = topic_id_of(c, topic)
        assert acquired(fetch(c, group, "m", 0, (fetch_topic(tid),))) == []  # the share partition starts at 0
        produce(broker.bootstrap, topic, 10, partitions=1)
        assert acquired(fetch(c, group, "m", 1, max_wait=5_000)) == [(0, 9, 1)]
        released = fetch(c, group, "m", 2, (fetch_topic(tid, acks=((0, 9, (2,)),)),))  # all AVAILABLE again
        assert released.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        (done,) = admin.delete_records([TopicPartition(topic, 0, 6)]).values()
        assert done.result(15).low_watermark == 6
        assert acquired(fetch(c, group, "m", 3)) == [(6, 9, 2)]  # 0-5 are gone: archived, never delivered


def test_the_share_session_limit(tmp_path) -> None:
    node = BrokerProcess(tmp_path / "data", {"group.share.max.share.sessions": "1"}, die_with_parent=True)
    node.start()
    try:
        topic = new_topic(node.bootstrap, partitions=1)
        with RawClient(node.port) as c:
            tid = topic_id_of(c, topic)
            assert fetch(c, "g", "a", 0, (fetch_topic(tid),)).error_code == ErrorCode.none
            assert fetch(c, "g", "a", 0, (fetch_topic(tid),)).error_code == ErrorCode.none  # a replaces its own
            assert fetch(c, "g", "b", 0, (fetch_topic(tid),)).error_code == ErrorCode.share_session_limit_reached
        with RawClient(node.port) as c:  # the connection that opened a's session closed: the session went with it
            assert fetch(c, "g", "b", 0, (fetch_topic(tid),)).error_code == ErrorCode.none
    finally:
        node.stop()


def test_share_state_survives_a_kill_and_restart(tmp_path) -> None:
    """Acknowledged records are never delivered again after a kill -9; acquired ones not acknowledged are."""
    node = BrokerProcess(tmp_path / "data", {"offsets.topic.num.partitions": "2"}, die_with_parent=True)
    node.start()
    try:
        topic, group = new_topic(node.bootstrap, partitions=1), unique("durable")
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(15)
        produce(node.bootstrap, topic, 10, partitions=1)
        with RawClient(node.port) as c:
            tid = topic_id_of(c, topic)
            assert acquired(fetch(c, group, "m", 0, (fetch_topic(tid),))) == [(0, 9, 1)]  # earliest: all there
            accepted = c.request(ACK, 1, ack_request(group, "m", 1, tid, ((0, 3, (1,)), (4, 4, (3,)))))
            assert accepted.responses[0].partitions[0].error_code == ErrorCode.none  # durable once answered
            node.kill()
        node.restart()
        with RawClient(node.port) as c:

            def after_restart() -> list[tuple[int, int, int]]:
                opened = fetch(c, group, "n", 0, (fetch_topic(tid),))
                assert opened.error_code == ErrorCode.none
                return acquired(opened) or acquired(fetch(c, group, "n", 1, max_wait=5_000))

            assert after_restart() == [(5, 9, 1)]  # 0-3 accepted, 4 rejected: never again; 5-9 come back
    finally:
        node.stop()


def test_deleting_a_share_group_deletes_its_share_state(broker) -> None:
    topic, group = new_topic(broker.bootstrap, partitions=1), unique("deleted")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])]
    ).values():
        future.result(15)
    produce(broker.bootstrap, topic, 5, partitions=1)
    with RawClient(broker.port) as c:
        tid = topic_id_of(c, topic)
        join = req(76, 1, group_id=group, member_id="m", member_epoch=0, subscribed_topic_names=(topic,))
        assert c.request(76, 1, join).error_code == ErrorCode.none  # the share group exists
        assert acquired(fetch(c, group, "m", 0, (fetch_topic(tid),))) == [(0, 4, 1)]
        done = c.request(ACK, 1, ack_request(group, "m", -1, tid, ((0, 4, (1,)),)))
        assert done.responses[0].partitions[0].error_code == ErrorCode.none
        assert acquired(fetch(c, group, "again", 0, (fetch_topic(tid),))) == []  # all accepted: nothing left
        assert c.request(ACK, 1, ack_request(group, "again", -1, tid, ())).error_code == ErrorCode.none
        leave = req(76, 1, group_id=group, member_id="m", member_epoch=-1, subscribed_topic_names=None)
        assert c.request(76, 1, leave).error_code == ErrorCode.none
        deleted = c.request(42, 2, req(42, 2, groups_names=(group,))).results[0]
        assert deleted.error_code == ErrorCode.none
        # a new group of the same id starts afresh (earliest, its group config, outlives the group as in Kafka)
        assert acquired(fetch(c, group, "new", 0, (fetch_topic(tid),))) == [(0, 4, 1)]


_HOLDER = """
import sys
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
held = []
while not held:
    held = [m for m in consumer.poll(0.5) if m.error() is None]
print(" ".join(m.value().decode() for m in held), flush=True)
sys.stdin.read()  # holds them, unacknowledged, until killed
"""


def test_records_held_by_a_consumer_killed_with_sigkill_go_to_the_others(broker) -> None:
    topic, group = new_topic(broker.bootstrap, partitions=1), unique("killed")
    values = produce(broker.bootstrap, topic, 20, partitions=1, batch_each=True)
    (survivor,) = subscribed(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        command = [sys.executable, "-c", _HOLDER, broker.bootstrap, group, topic]
        with reaped(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)) as holder:
            held = set(first_line(holder, 30, "the holder's records").split())
            assert held and {v.encode() for v in held} <= values
            holder.kill()
        # its connection closed: its share session goes and the records it held with it (no need to wait the lock)
        got = drain([survivor], lambda ms: {m.value() for m in ms} >= values, 30, lambda c, m: c.acknowledge(m))
        redelivered = {m.value().decode(): m.delivery_count() for m in got if m.value().decode() in held}
        assert set(redelivered) == held and set(redelivered.values()) == {1}  # given back, not counted again
    finally:
        survivor.close()


def test_consumers_joining_and_leaving_while_records_flow_see_each_record_once(broker) -> None:
    """Records produced one batch at a time while share consumers join and one leaves: each record reaches the
    application once (implicit acknowledgement; a record a consumer had acquired but not yet handed to the
    application when it closed is released and goes to another)."""
    topic, group = new_topic(broker.bootstrap, partitions=2), unique("churn")
    values = {b"v%d" % i for i in range(150)}
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    done = threading.Event()

    def produce_slowly() -> None:
        for i, value in enumerate(sorted(values)):
            producer.produce(topic, value, partition=i % 2)
            producer.flush(15)
            time.sleep(0.01)
        done.set()

    seen: list[bytes] = []
    first, second = subscribed(broker.bootstrap, group, topic, n=2)
    third: ShareConsumer | None = None
    writer = threading.Thread(target=produce_slowly)
    writer.start()
    try:

        def poll(c: ShareConsumer) -> None:
            for m in c.poll(0.1):
                if m.error() is None:
                    seen.append(m.value())

        wait_until(lambda: poll(first) or poll(second) or len(seen) >= 30, 30, "30 records")
        # leaves while records flow. commit_sync first: librdkafka 2.16's close sends no acknowledgement for the
        # records of the last poll (its own mock cluster then delivers them again as well), so they would come back
        second.commit_sync()
        second.close()
        (third,) = subscribed(broker.bootstrap, group, topic)  # and another joins

        def all_seen() -> bool:
            poll(first)
            poll(third)
            return done.is_set() and set(seen) >= values

        wait_until(all_seen, 60, "every record")
        for _ in range(5):  # nothing comes twice, even a little later
            poll(first)
            poll(third)
        assert sorted(seen) == sorted(values)
    finally:
        writer.join()
        first.close()
        if third is not None:
            third.close()


def test_v2_record_limit_and_renew(broker) -> None:
    """ShareFetch v2's record_limit acquire mode caps MaxRecords inside a batch; Renew (type 4 with IsRenewAck, on
    ShareAcknowledge v2 and on a fetch-nothing ShareFetch v2) keeps records acquired past their first lock."""
    topic, group = new_topic(broker.bootstrap, partitions=1), unique("v2")
    with RawClient(broker.port) as c:
        tid = topic_id_of(c, topic)
        p = part(FETCH, 2, "FetchPartition", partition_index=0, acknowledgement_batches=())
        opened = c.request(FETCH, 2, req(FETCH, 2, group_id=group, member_id="m", share_session_epoch=0, max_wait=0,
                                         min_bytes=1, max_bytes=1 << 20, max_records=2, batch_size=2,
                                         share_acquire_mode=1, is_renew_ack=False,
                                         topics=(part(FETCH, 2, "FetchTopic", topic_id=tid, partitions=(p,)),),
                                         forgotten_topics_data=()))  # fmt: skip
        assert opened.error_code == ErrorCode.none
        produce(broker.bootstrap, topic, 5, partitions=1)  # one batch of 5

        def fetch_v2(epoch: int, mode: int = 1, renew=(), is_renew: bool = False, limit: int = 2):
            batches = tuple(
                part(FETCH, 2, "AcknowledgementBatch", first_offset=f, last_offset=last, acknowledge_types=(4,))
                for f, last in renew
            )
            topics = (
                (part(FETCH, 2, "FetchTopic", topic_id=tid, partitions=(
                    part(FETCH, 2, "FetchPartition", partition_index=0, acknowledgement_batches=batches),)),)
                if renew else ()
            )  # fmt: skip
            zero = is_renew
            return c.request(FETCH, 2, req(FETCH, 2, group_id=group, member_id="m", share_session_epoch=epoch,
                                           max_wait=0 if zero else 5_000, min_bytes=0 if zero else 1,
                                           max_bytes=0 if zero else 1 << 20, max_records=0 if zero else limit,
                                           batch_size=limit, share_acquire_mode=mode, is_renew_ack=is_renew,
                                           topics=topics, forgotten_topics_data=()))  # fmt: skip

        assert acquired(fetch_v2(1)) == [(0, 1, 1)]  # record_limit: 2 of the batch of 5
        assert acquired(fetch_v2(2)) == [(2, 3, 1)]
        time.sleep(LOCK_MS / 1000 * 0.6)
        renew_fetch = fetch_v2(3, is_renew=True, renew=((0, 1),))  # zero limits: it renews 0-1 and fetches nothing
        assert renew_fetch.error_code == ErrorCode.none and acquired(renew_fetch) == []
        assert renew_fetch.responses[0].partitions[0].acknowledge_error_code == ErrorCode.none
        renewed = c.request(ACK, 2, req(ACK, 2, group_id=group, member_id="m", share_session_epoch=4,
                                        is_renew_ack=True, topics=(part(ACK, 2, "AcknowledgeTopic", topic_id=tid,
                                        partitions=(part(ACK, 2, "AcknowledgePartition", partition_index=0,
                                        acknowledgement_batches=(part(ACK, 2, "AcknowledgementBatch", first_offset=2,
                                        last_offset=3, acknowledge_types=(4,)),)),)),)))  # fmt: skip
        assert renewed.responses[0].partitions[0].error_code == ErrorCode.none
        assert renewed.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
        time.sleep(LOCK_MS / 1000 * 0.5)  # past the first locks of 0-3 (1.1 locks in), within the renewed ones
        other = fetch(c, group, "m", 0, (fetch_topic(tid),))  # a new session of m (v1): only 4, never delivered
        assert acquired(other) == [(4, 4, 1)]
        refused = c.request(FETCH, 2, req(FETCH, 2, group_id=group, member_id="m", share_session_epoch=1, max_wait=0,
                                          min_bytes=0, max_bytes=1, max_records=0, batch_size=0, share_acquire_mode=0,
                                          is_renew_ack=True, topics=(), forgotten_topics_data=()))  # fmt: skip
        assert refused.error_code == ErrorCode.invalid_request  # a renew fetch with a limit
