"""The share-group offset admin APIs against `herd serve` (issue 32): DescribeShareGroupOffsets v0-v1 (start offset,
leader epoch, lag; every initialized partition with topics null), AlterShareGroupOffsets v0 (an empty share group
only; a new start offset a fetch then starts from; a group made by it), DeleteShareGroupOffsets v0 (a topic's share
state forgotten: the group starts again from share.auto.offset.reset), with Kafka's errors
(docs/kip-932/share-admin-rules.md); `herd share-groups`; the HTTP API's view of a share group (the gate is
test_share_groups.py's)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from brokers import BrokerProcess
from click.testing import CliRunner
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, part, req

from herd.cli import cli
from herd.testing.wait import wait_until

DESCRIBE, ALTER, DELETE = 90, 91, 92
HEARTBEAT, FETCH, ACK = 76, 78, 79


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(
        tmp_path_factory.mktemp("shareadmin") / "data",
        {"offsets.topic.num.partitions": "2", "herd.http.listener": "127.0.0.1:0"},
        die_with_parent=True,
    )
    process.start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def setup_group(bootstrap: str, records: int = 10) -> tuple[str, str]:
    """A one-partition topic with `records` records and a share group id set to start at the earliest."""
    topic, group = unique("t"), unique("g")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])]
    ).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(records):
        producer.produce(topic, b"%d" % i, partition=0)
    assert producer.flush(15) == 0
    return topic, group


def topic_id_of(c: RawClient, topic: str) -> uuid.UUID:
    wanted = (part(3, 12, "MetadataRequestTopic", name=topic, topic_id=None),)
    request = req(3, 12, topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return c.request(3, 12, request).topics[0].topic_id


def heartbeat(c: RawClient, group: str, member: str, epoch: int, topics=None):
    request = req(HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=topics)
    return c.request(HEARTBEAT, 1, request)


def share_fetch(c: RawClient, group: str, member: str, topic_id: uuid.UUID) -> list[tuple[int, int, int]]:
    """A new share session of `member` on partition 0: the ranges acquired."""
    p = part(FETCH, 1, "FetchPartition", partition_index=0, acknowledgement_batches=())
    topics = (part(FETCH, 1, "FetchTopic", topic_id=topic_id, partitions=(p,)),)
    limits = {"max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500}
    request = req(FETCH, 1, group_id=group, member_id=member, share_session_epoch=0, topics=topics,
                  forgotten_topics_data=(), **limits)  # fmt: skip
    response = c.request(FETCH, 1, request)
    assert response.error_code == ErrorCode.none
    return [(r.first_offset, r.last_offset, r.delivery_count) for t in response.responses for p in t.partitions
            for r in p.acquired_records]  # fmt: skip


def accept(c: RawClient, group: str, member: str, topic_id: uuid.UUID, first: int, last: int) -> None:
    batch = part(ACK, 1, "AcknowledgementBatch", first_offset=first, last_offset=last, acknowledge_types=(1,))
    p = part(ACK, 1, "AcknowledgePartition", partition_index=0, acknowledgement_batches=(batch,))
    topics = (part(ACK, 1, "AcknowledgeTopic", topic_id=topic_id, partitions=(p,)),)
    closed = c.request(ACK, 1, req(ACK, 1, group_id=group, member_id=member, share_session_epoch=-1, topics=topics))
    assert closed.responses[0].partitions[0].error_code == ErrorCode.none


def describe(c: RawClient, group: str, topics, version: int = 1):
    wanted = (
        None
        if topics is None
        else tuple(
            part(DESCRIBE, version, "DescribeShareGroupOffsetsRequestTopic", topic_name=name, partitions=parts)
            for name, parts in topics
        )
    )
    group_entry = part(DESCRIBE, version, "DescribeShareGroupOffsetsRequestGroup", group_id=group, topics=wanted)
    return c.request(DESCRIBE, version, req(DESCRIBE, version, groups=(group_entry,))).groups[0]


def rows(described) -> list[tuple[str, int, int, int]]:
    return [
        (t.topic_name, p.partition_index, p.start_offset, getattr(p, "lag", None))
        for t in described.topics
        for p in t.partitions
    ]


def alter(c: RawClient, group: str, topic: str, start: int, partition: int = 0):
    p = part(ALTER, 0, "AlterShareGroupOffsetsRequestPartition", partition_index=partition, start_offset=start)
    topics = (part(ALTER, 0, "AlterShareGroupOffsetsRequestTopic", topic_name=topic, partitions=(p,)),)
    return c.request(ALTER, 0, req(ALTER, 0, group_id=group, topics=topics))


def delete(c: RawClient, group: str, *topics: str):
    wanted = tuple(part(DELETE, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=t) for t in topics)
    return c.request(DELETE, 0, req(DELETE, 0, group_id=group, topics=wanted))


def initialized(c: RawClient, group: str, topic: str) -> bool:
    return [r[:2] for r in rows(describe(c, group, None))] == [(topic, 0)]


def test_describe_shows_the_start_offset_and_the_lag(broker) -> None:
    topic, group = setup_group(broker.bootstrap)
    with RawClient(broker.port) as c:
        tid = topic_id_of(c, topic)
        assert heartbeat(c, group, "m", 0, (topic,)).error_code == ErrorCode.none
        wait_until(lambda: initialized(c, group, topic), 10, "the share partition's state initialized")
        # initialized, but not yet used: its start offset is still to be resolved (-1), as in Kafka
        assert rows(describe(c, group, None)) == [(topic, 0, -1, -1)]
        assert share_fetch(c, group, "m", tid) == [(0, 9, 1)]
        assert rows(describe(c, group, None)) == [(topic, 0, 0, 10)]  # earliest: 0; nothing done with yet
        accept(c, group, "m", tid, 0, 3)
        assert rows(describe(c, group, [(topic, (0,))])) == [(topic, 0, 4, 6)]  # 4-9 still to deliver
        assert rows(describe(c, group, [(topic, (0,))], version=0)) == [(topic, 0, 4, None)]  # v0: no lag
        assert rows(describe(c, group, [(topic, (0, 7)), ("nope", (0,))])) == [
            (topic, 0, 4, 6),
            (topic, 7, -1, -1),  # no such partition: no state, no error
            ("nope", 0, -1, -1),
        ]
        assert rows(describe(c, group, [])) == []
        assert rows(describe(c, unique("unknown"), [(topic, (0,))])) == [(topic, 0, -1, -1)]  # no group check


def test_an_acknowledgement_in_a_waiting_fetch_is_done_before_the_fetch_returns(broker) -> None:
    """Acknowledgements piggybacked on a ShareFetch are written while the fetch waits for records, as Kafka's
    handleShareFetchRequest runs the two side by side: they show in the start offset and the lag long before the
    fetch's MaxWaitMs is up (a ShareConsumer's last acknowledgements ride on such a fetch)."""
    topic, group = setup_group(broker.bootstrap)
    with RawClient(broker.port) as c, RawClient(broker.port) as watcher:
        tid = topic_id_of(c, topic)
        heartbeat(c, group, "m", 0, (topic,))
        wait_until(lambda: initialized(c, group, topic), 10, "the share partition's state initialized")
        assert share_fetch(c, group, "m", tid) == [(0, 9, 1)]
        batch = part(FETCH, 1, "AcknowledgementBatch", first_offset=0, last_offset=9, acknowledge_types=(1,))
        p = part(FETCH, 1, "FetchPartition", partition_index=0, acknowledgement_batches=(batch,))
        topics = (part(FETCH, 1, "FetchTopic", topic_id=tid, partitions=(p,)),)
        limits = {"max_wait": 60_000, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500}
        request = req(FETCH, 1, group_id=group, member_id="m", share_session_epoch=1, topics=topics,
                      forgotten_topics_data=(), **limits)  # fmt: skip
        answers: list = []
        waiting = threading.Thread(target=lambda: answers.append(c.request(FETCH, 1, request)), daemon=True)
        waiting.start()
        wait_until(
            lambda: rows(describe(watcher, group, [(topic, (0,))])) == [(topic, 0, 10, 0)],
            30,
            "the acceptance of 0-9 in the start offset while the fetch waits",
        )
        assert waiting.is_alive()  # nothing to acquire yet: the fetch still waits (up to 60 s)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topic, b"10", partition=0)
        assert producer.flush(15) == 0
        waiting.join(30)
        (answer,) = answers
        (partition,) = answer.responses[0].partitions
        assert (answer.error_code, partition.acknowledge_error_code) == (ErrorCode.none, ErrorCode.none)
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in partition.acquired_records] == [(10, 10, 1)]


def test_alter_sets_where_an_empty_share_group_starts(broker) -> None:
    topic, group = setup_group(broker.bootstrap)
    with RawClient(broker.port) as c:
        tid = topic_id_of(c, topic)
        heartbeat(c, group, "m", 0, (topic,))
        busy = alter(c, group, topic, 8)
        assert (busy.error_code, busy.error_message) == (ErrorCode.non_empty_group, "The group is not empty.")
        assert heartbeat(c, group, "m", -1).error_code == ErrorCode.none
        done = alter(c, group, topic, 8)
        assert done.error_code == ErrorCode.none and done.responses[0].topic_id == tid
        assert done.responses[0].partitions[0].error_code == ErrorCode.none
        assert rows(describe(c, group, None)) == [(topic, 0, 8, 2)]
        assert share_fetch(c, group, "n", tid) == [(8, 9, 1)]
        unknown = alter(c, group, "nope", 0)
        assert unknown.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        assert alter(c, group, topic, 0, partition=3).responses[0].partitions[0].error_code == (
            ErrorCode.unknown_topic_or_partition
        )
        made = unique("made")  # a new group id: Alter makes the share group
        assert alter(c, made, topic, 5).error_code == ErrorCode.none
        listed = c.request(16, 5, req(16, 5, states_filter=(), types_filter=("share",)))
        assert [(g.group_state, g.group_type) for g in listed.groups if g.group_id == made] == [("Empty", "share")]
        classic = unique("classic")
        protocols = (part(11, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),)
        c.request(11, 9, req(11, 9, group_id=classic, session_timeout=10_000, rebalance_timeout=10_000, member_id="",
                             protocol_type="consumer", protocols=protocols))  # fmt: skip
        other = alter(c, classic, topic, 0)
        assert (other.error_code, other.error_message) == (
            ErrorCode.group_id_not_found,
            f"Group {classic} is not a share group.",
        )


def test_delete_forgets_a_topic_s_share_state(broker) -> None:
    topic, group = setup_group(broker.bootstrap)
    with RawClient(broker.port) as c:
        tid = topic_id_of(c, topic)
        heartbeat(c, group, "m", 0, (topic,))
        wait_until(lambda: initialized(c, group, topic), 10, "the share partition's state initialized")
        assert share_fetch(c, group, "m", tid) == [(0, 9, 1)]
        accept(c, group, "m", tid, 0, 9)
        assert delete(c, group, topic).error_code == ErrorCode.non_empty_group
        heartbeat(c, group, "m", -1)
        assert delete(c, unique("nobody"), topic).error_code == ErrorCode.group_id_not_found
        never = unique("t")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept until the answer is in
        admin.create_topics([NewTopic(never, 1, 1)])[never].result(15)
        answer = delete(c, group, topic, never, "nope")
        assert answer.error_code == ErrorCode.none
        assert {t.topic_name: (t.error_code, t.error_message) for t in answer.responses} == {
            topic: (ErrorCode.none, None),
            never: (ErrorCode.unknown_topic_or_partition, "There is no offset information to delete."),
            "nope": (ErrorCode.unknown_topic_or_partition, None),
        }
        assert rows(describe(c, group, None)) == []  # no longer initialized
        assert rows(describe(c, group, [(topic, (0,))])) == [(topic, 0, -1, -1)]
        assert share_fetch(c, group, "n", tid) == [(0, 9, 1)]  # earliest again: every record once more


def test_herd_share_groups_as_kafka_share_groups_sh(broker) -> None:
    """`herd share-groups` list, describe (offsets, members, state), reset-offsets, delete-offsets and delete
    against a ShareConsumer's group."""

    def herd(*args: str, ok: bool = True) -> str:
        result = CliRunner().invoke(cli, [*args, "--bootstrap-server", broker.bootstrap])
        assert (result.exit_code == 0) == ok, result.output
        return result.stdout if ok else result.output

    topic, group = setup_group(broker.bootstrap)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "cli-test"})
    try:
        consumer.subscribe([topic])
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(0.2)) or len(got) >= 10, 30, "the consumer's 10 records")
        consumer.poll(0.2)  # acknowledges them (implicit mode)
        assert group in herd("share-groups", "list").split()
        (state,) = [json.loads(herd("share-groups", "describe", "--group", group, "--state", "--output", "json"))]
        assert (state["state"], state["members"], state["assignment_strategy"]) == ("Stable", 1, "simple")
        (member,) = json.loads(herd("share-groups", "describe", "--group", group, "--members", "--output", "json"))
        assert member["client_id"] == "cli-test" and member["assignment"] == [{"topic": topic, "partition": 0}]
        wait_until(
            lambda: (
                json.loads(herd("share-groups", "describe", "--group", group, "--output", "json"))[0]["start_offset"]
                == 10
            ),
            15,
            "the acknowledgements in the start offset",
        )
        (row,) = json.loads(herd("share-groups", "describe", "--group", group, "--output", "json"))
        assert (row["topic"], row["partition"], row["start_offset"], row["lag"]) == (topic, 0, 10, 0)
        assert "START-OFFSET" in herd("share-groups", "describe", "--group", group)
        refused = herd("share-groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                       "--execute", ok=False)  # fmt: skip
        assert "not empty" in refused
    finally:
        consumer.close()
    planned = herd("share-groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run")
    assert "NEW-OFFSET" in planned
    herd("share-groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
    (row,) = json.loads(herd("share-groups", "describe", "--group", group, "--output", "json"))
    assert (row["start_offset"], row["lag"]) == (0, 10)
    assert "Successful" in herd("share-groups", "delete-offsets", "--group", group, "--topic", topic)
    assert json.loads(herd("share-groups", "describe", "--group", group, "--output", "json")) == []
    assert "was successful" in herd("share-groups", "delete", "--group", group)
    assert group not in herd("share-groups", "list").split()
    # A group that does not exist is reset as an Empty one, as kafka-share-groups.sh does: the reset makes it
    # with its share state initialized where asked; --all-topics names no partition of a group that has none.
    assert herd("share-groups", "reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute",
                "--output", "json") == "[]\n"  # fmt: skip
    herd("share-groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    (row,) = json.loads(herd("share-groups", "describe", "--group", group, "--output", "json"))
    assert (row["start_offset"], row["lag"]) == (0, 10)
    (state,) = [json.loads(herd("share-groups", "describe", "--group", group, "--state", "--output", "json"))]
    assert (state["state"], state["members"]) == ("Empty", 0)


def test_the_http_api_shows_a_share_group(broker) -> None:
    """/v1/groups lists a share group with its type, state, epochs and lag; /v1/groups/{group} its members and each
    share partition's start offset, lag and records in flight by state."""
    import urllib.request

    def get(path: str):
        with urllib.request.urlopen(f"http://{broker.http}{path}", timeout=10) as response:
            return json.loads(response.read())

    topic, group = setup_group(broker.bootstrap)
    consumer = ShareConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    try:
        consumer.subscribe([topic])
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(0.2)) or len(got) >= 10, 30, "the consumer's 10 records")
        for m in got[:4]:
            consumer.acknowledge(m)
        consumer.commit_sync()  # 0-3 accepted, 4-9 still acquired
        (listed,) = [g for g in get("/v1/groups")["groups"] if g["group"] == group]
        assert (listed["type"], listed["state"], listed["protocol"], listed["members"]) == (
            "share",
            "Stable",
            "simple",
            1,
        )
        assert listed["lag"] == 6 and listed["generation"] == listed["assignment_epoch"]
        detail = get(f"/v1/groups/{group}")
        (member,) = detail["members"]
        assert member["assignment"] == [{"topic": topic, "partitions": [0]}] and member["member_epoch"] >= 1
        (partition,) = detail["partitions"]
        assert (partition["start_offset"], partition["end_offset"], partition["lag"]) == (4, 10, 6)
        assert (partition["acquired"], partition["acknowledged"], partition["available"]) == (6, 0, 0)
    finally:
        consumer.close()
