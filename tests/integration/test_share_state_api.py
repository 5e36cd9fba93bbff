"""The share coordinator's APIs over a raw socket against `herd serve` (issue 32): InitializeShareGroupState v0,
ReadShareGroupState v0, WriteShareGroupState v0-v1, DeleteShareGroupState v0 and ReadShareGroupStateSummary v0-v1,
which Kafka's brokers send each other and herd's nodes send each other in cluster mode
(herd.server.apis._share_state says what Kafka 4.2 answers, herd.server.share_state_peers who sends them)."""

from __future__ import annotations

import uuid

import pytest
from brokers import BrokerProcess
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, part, req

from herd.testing.wait import wait_until

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
AVAILABLE, ACKNOWLEDGED, ARCHIVED = 0, 2, 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("sharestate") / "data", {"offsets.topic.num.partitions": "2"},
                            die_with_parent=True)  # fmt: skip
    process.start()
    yield process
    process.stop()


@pytest.fixture
def client(broker):
    with RawClient(broker.port) as c:
        yield c


@pytest.fixture
def topic_id(client) -> uuid.UUID:
    """A new two-partition topic's id."""
    return _new_topic(client, 2)


def initialize(c, group, topic_id, partition, state_epoch, start):
    p = part(INITIALIZE, 0, "PartitionData", partition=partition, state_epoch=state_epoch, start_offset=start)
    topics = (part(INITIALIZE, 0, "InitializeStateData", topic_id=topic_id, partitions=(p,)),)
    return _one(c.request(INITIALIZE, 0, req(INITIALIZE, 0, group_id=group, topics=topics)))


def read(c, group, topic_id, partition, leader_epoch):
    p = part(READ, 0, "PartitionData", partition=partition, leader_epoch=leader_epoch)
    topics = (part(READ, 0, "ReadStateData", topic_id=topic_id, partitions=(p,)),)
    return _one(c.request(READ, 0, req(READ, 0, group_id=group, topics=topics)))


def write(c, group, topic_id, partition, state_epoch, leader_epoch, start, batches, version=1):
    states = tuple(
        part(WRITE, version, "StateBatch", first_offset=f, last_offset=la, delivery_state=s, delivery_count=n)
        for f, la, s, n in batches
    )
    p = part(WRITE, version, "PartitionData", partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
             start_offset=start, state_batches=states)  # fmt: skip
    topics = (part(WRITE, version, "WriteStateData", topic_id=topic_id, partitions=(p,)),)
    return _one(c.request(WRITE, version, req(WRITE, version, group_id=group, topics=topics)))


def delete(c, group, topic_id, partition):
    p = part(DELETE, 0, "PartitionData", partition=partition)
    topics = (part(DELETE, 0, "DeleteStateData", topic_id=topic_id, partitions=(p,)),)
    return _one(c.request(DELETE, 0, req(DELETE, 0, group_id=group, topics=topics)))


def summary(c, group, topic_id, partition, version=1):
    p = part(SUMMARY, version, "PartitionData", partition=partition, leader_epoch=-1)
    topics = (part(SUMMARY, version, "ReadStateSummaryData", topic_id=topic_id, partitions=(p,)),)
    return _one(c.request(SUMMARY, version, req(SUMMARY, version, group_id=group, topics=topics)))


def loaded(request):
    """`request()`'s answer once the share coordinator answers it: the first request makes __share_group_state,
    and its partitions answer COORDINATOR_LOAD_IN_PROGRESS until they are loaded."""
    return wait_until(
        lambda: (r := request()).error_code != ErrorCode.coordinator_load_in_progress and r,
        15,
        "the share coordinator loaded",
    )


def _one(response):
    assert len(response.results) == 1 and len(response.results[0].partitions) == 1
    return response.results[0].partitions[0]


def batches(result) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches]


@pytest.mark.parametrize("write_version", [0, 1])
@pytest.mark.parametrize("summary_version", [0, 1])
def test_a_share_partition_s_state_from_initialize_to_delete(client, topic_id, write_version, summary_version):
    group = f"g-{uuid.uuid4().hex[:8]}"
    never = loaded(lambda: read(client, group, topic_id, 0, 0))
    assert (never.error_code, never.error_message) == (
        ErrorCode.invalid_request,
        "Read operation on uninitialized share partition not allowed.",
    )
    s = summary(client, group, topic_id, 0, summary_version)
    assert (s.error_code, s.start_offset, s.leader_epoch, s.state_epoch) == (ErrorCode.none, -1, 0, 0)
    if summary_version >= 1:
        assert s.delivery_complete_count == -1
    w = write(client, group, topic_id, 0, 0, 0, -1, [], write_version)
    assert (w.error_code, w.error_message) == (
        ErrorCode.invalid_request,
        "Write operation on uninitialized share partition not allowed.",
    )

    assert initialize(client, group, topic_id, 0, 1, 5).error_code == ErrorCode.none
    r = read(client, group, topic_id, 0, 3)  # leader epoch 3 recorded
    assert (r.error_code, r.state_epoch, r.start_offset, batches(r)) == (ErrorCode.none, 1, 5, [])
    assert write(client, group, topic_id, 0, 1, 2, -1, [], write_version).error_code == ErrorCode.fenced_leader_epoch
    assert read(client, group, topic_id, 0, 2).error_code == ErrorCode.fenced_leader_epoch
    done = [(5, 7, ACKNOWLEDGED, 1), (8, 8, ARCHIVED, 5), (9, 9, AVAILABLE, 2)]
    assert write(client, group, topic_id, 0, 1, 3, -1, done, write_version).error_code == ErrorCode.none
    assert write(client, group, topic_id, 0, 0, 3, -1, [], write_version).error_code == ErrorCode.fenced_state_epoch
    r = read(client, group, topic_id, 0, -1)
    assert (r.error_code, r.state_epoch, r.start_offset, batches(r)) == (ErrorCode.none, 1, 5, done)
    s = summary(client, group, topic_id, 0, summary_version)
    assert (s.error_code, s.start_offset, s.leader_epoch, s.state_epoch) == (ErrorCode.none, 5, 3, 1)
    if summary_version >= 1:
        assert s.delivery_complete_count == 4  # 5-7 acknowledged, 8 archived
    assert initialize(client, group, topic_id, 0, 0, 0).error_code == ErrorCode.fenced_state_epoch

    assert delete(client, group, topic_id, 0).error_code == ErrorCode.none
    assert read(client, group, topic_id, 0, -1).error_code == ErrorCode.invalid_request
    assert delete(client, group, topic_id, 0).error_code == ErrorCode.none  # nothing left: still NONE
    assert read(client, group, topic_id, 1, -1).error_code == ErrorCode.invalid_request  # the other partition


def test_requests_for_no_partition_are_answered_per_partition_or_not_at_all(client, topic_id):
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert read(client, group, uuid.uuid4(), 0, 0).error_code == ErrorCode.unknown_topic_or_partition
    assert initialize(client, group, topic_id, 2, 0, 0).error_code == ErrorCode.unknown_topic_or_partition
    negative = initialize(client, group, topic_id, -1, 0, 0)
    assert (negative.error_code, negative.error_message) == (
        ErrorCode.invalid_request,
        "The partition id cannot be a negative number.",
    )
    null = delete(client, group, None, 0)
    assert (null.error_code, null.error_message) == (ErrorCode.invalid_request, "The topic id cannot be null.")
    # no group id, no topics, a topic without partitions: an empty answer (ShareCoordinatorService)
    p = part(READ, 0, "PartitionData", partition=0, leader_epoch=0)
    no_group = req(READ, 0, group_id="", topics=(part(READ, 0, "ReadStateData", topic_id=topic_id, partitions=(p,)),))
    assert client.request(READ, 0, no_group).results == ()
    assert client.request(READ, 0, req(READ, 0, group_id=group, topics=())).results == ()
    empty = req(READ, 0, group_id=group, topics=(part(READ, 0, "ReadStateData", topic_id=topic_id, partitions=()),))
    assert client.request(READ, 0, empty).results == ()


def test_several_partitions_in_one_request_are_answered_in_its_order(client, topic_id):
    group = f"g-{uuid.uuid4().hex[:8]}"
    ps = tuple(part(INITIALIZE, 0, "PartitionData", partition=i, state_epoch=0, start_offset=10 * i) for i in (1, 0))
    topics = (part(INITIALIZE, 0, "InitializeStateData", topic_id=topic_id, partitions=ps),)
    request = req(INITIALIZE, 0, group_id=group, topics=topics)
    answer = wait_until(
        lambda: (
            (a := client.request(INITIALIZE, 0, request))
            and all(p.error_code != ErrorCode.coordinator_load_in_progress for p in a.results[0].partitions)
            and a
        ),
        15,
        "the share coordinator loaded",
    )
    assert [(p.partition, p.error_code) for p in answer.results[0].partitions] == [
        (1, ErrorCode.none),
        (0, ErrorCode.none),
    ]
    assert [read(client, group, topic_id, i, -1).start_offset for i in (0, 1)] == [0, 10]


def test_without_cluster_action_every_partition_is_refused(broker_factory):
    """With an authorizer, the share-state APIs need CLUSTER_ACTION on the cluster (the brokers' own permission,
    KafkaApis.authorizeClusterOperation), else CLUSTER_AUTHORIZATION_FAILED on each partition asked for."""
    closed = broker_factory({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
                            name="closed")  # fmt: skip
    topic_id = uuid.uuid4()
    with RawClient(closed.port) as c:
        ps = tuple(part(READ, 0, "PartitionData", partition=i, leader_epoch=0) for i in (0, 1))
        topics = (part(READ, 0, "ReadStateData", topic_id=topic_id, partitions=ps),)
        answer = c.request(READ, 0, req(READ, 0, group_id="g", topics=topics))
        assert [(p.partition, p.error_code) for p in answer.results[0].partitions] == [
            (0, ErrorCode.cluster_authorization_failed),
            (1, ErrorCode.cluster_authorization_failed),
        ]
        assert write(c, "g", topic_id, 0, 0, 0, -1, []).error_code == ErrorCode.cluster_authorization_failed
        assert summary(c, "g", topic_id, 0).error_code == ErrorCode.cluster_authorization_failed


def _offsets(c: RawClient, partition: int) -> tuple[int, int]:
    """(log start, log end) of __share_group_state's `partition` (ListOffsets v7, earliest and latest)."""

    def at(timestamp: int) -> int:
        p = part(2, 7, "ListOffsetsPartition", partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)
        t = part(2, 7, "ListOffsetsTopic", name="__share_group_state", partitions=(p,))
        answer = c.request(2, 7, req(2, 7, replica_id=-1, isolation_level=0, topics=(t,))).topics[0].partitions[0]
        assert answer.error_code == ErrorCode.none
        return answer.offset

    return at(-2), at(-1)


def test_updates_snapshots_and_pruning_keep_the_state_bounded_and_whole_across_a_kill(tmp_path):
    """`__share_group_state` as Kafka's share coordinator keeps it: updates with a snapshot every
    share.coordinator.snapshot.update.records.per.snapshot of them, the records every share partition's latest
    snapshot made redundant pruned, a share partition no longer written snapshotted again after
    share.coordinator.cold.partition.snapshot.interval.ms so that it does not hold the pruning back; and after a
    kill -9 the state read back is the state written."""
    settings = {
        "offsets.topic.num.partitions": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        "share.coordinator.state.topic.segment.bytes": "1024",  # segments roll, whole ones are deleted
        "share.coordinator.snapshot.update.records.per.snapshot": "3",
        "share.coordinator.state.topic.prune.interval.ms": "100",
        "share.coordinator.cold.partition.snapshot.interval.ms": "1000",
    }
    node = BrokerProcess(tmp_path / "data", settings, die_with_parent=True).start()
    try:
        with RawClient(node.port) as c:
            topic_id = _new_topic(c)
            hot, idle = f"hot-{uuid.uuid4().hex[:8]}", f"idle-{uuid.uuid4().hex[:8]}"
            assert loaded(lambda: initialize(c, idle, topic_id, 0, 1, 0)).error_code == ErrorCode.none
            # as an earlier herd made it (compacted): switched to Kafka's configs before it is first pruned
            compact = part(44, 1, "AlterableConfig", name="cleanup.policy", config_operation=0, value="compact")
            resource = part(44, 1, "AlterConfigsResource", resource_type=2, resource_name="__share_group_state",
                            configs=(compact,))  # fmt: skip
            altered = c.request(44, 1, req(44, 1, resources=(resource,), validate_only=False)).responses[0]
            assert altered.error_code == ErrorCode.none, altered.error_message
            assert initialize(c, hot, topic_id, 0, 1, 0).error_code == ErrorCode.none
            for n in range(60):  # each write acknowledges one more record
                assert write(c, hot, topic_id, 0, 1, 0, -1, [(n, n, ACKNOWLEDGED, 1)]).error_code == ErrorCode.none
            written = _offsets(c, 0)[1]
            assert written >= 62  # two initializations, 60 writes (45 updates, 15 snapshots)
            # The idle partition's one snapshot holds the pruning back until it is snapshotted again (cold): then
            # everything before the two partitions' latest snapshots goes.
            start, end = wait_until(lambda: (o := _offsets(c, 0))[0] >= written - 4 and o, 15, "the state pruned")
            hot_state, idle_state = read(c, hot, topic_id, 0, 0), read(c, idle, topic_id, 0, 0)
            assert batches(hot_state) == [(0, 59, ACKNOWLEDGED, 1)] and batches(idle_state) == []
        assert "__share_group_state now has Kafka's configs" in node.log()
        segments = sorted((tmp_path / "data" / "__share_group_state-0").glob("*.log"))
        assert int(segments[0].stem) > 0  # whole segments below the log start are gone
        node.kill()
        node.restart()
        with RawClient(node.port) as c:
            again = loaded(lambda: read(c, hot, topic_id, 0, 0))
            assert (again.error_code, again.start_offset, batches(again)) == (
                ErrorCode.none,
                hot_state.start_offset,
                batches(hot_state),
            )
            assert batches(read(c, idle, topic_id, 0, 0)) == [] and _offsets(c, 0)[0] >= start
            # a write after the reload goes on from the state read back
            assert write(c, hot, topic_id, 0, 1, 0, -1, [(60, 60, ACKNOWLEDGED, 1)]).error_code == ErrorCode.none
            assert batches(read(c, hot, topic_id, 0, 0)) == [(0, 60, ACKNOWLEDGED, 1)]
    finally:
        node.stop()


def _new_topic(c: RawClient, partitions: int = 1) -> uuid.UUID:
    """A new topic's id (CreateTopics v7)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    created = part(19, 7, "CreatableTopic", name=name, num_partitions=partitions, replication_factor=1,
                   assignments=(), configs=())  # fmt: skip
    answer = c.request(19, 7, req(19, 7, topics=(created,), timeout=15000, validate_only=False))
    assert answer.topics[0].error_code == ErrorCode.none
    return answer.topics[0].topic_id
