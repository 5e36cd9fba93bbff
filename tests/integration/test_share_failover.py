"""Share state in cluster mode (issue 32 point 3): three herd nodes over PostgreSQL, the leader of a share
partition's data killed with kill -9. The share partition's state is kept by the share coordinator of the
`__share_group_state` partition its key falls in, on whichever node leads that (the leader of the data partition
reaches it with Initialize/Read/WriteShareGroupState when it is another node, herd.server.share_state_peers);
the node that takes the data partition over reads the state again: what was acknowledged is never delivered
again, and what was acquired but not acknowledged comes back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode
from pgcluster import create_topic_on, leaders_of
from rawkafka import RawClient, part, req

from herd.coordinator.partition import coordinator_partition
from herd.runtime.share_state import coordinator_key
from herd.testing import HerdCluster
from herd.testing.wait import wait_until

FETCH, ACK, INITIALIZE, READ, WRITE, DESCRIBE = 78, 79, 83, 84, 85, 90
ACKNOWLEDGED = 2
STATE_PARTITIONS = 3
ACCEPT, REJECT = 1, 3
WAIT_S = 30.0

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdCluster]:
    overrides = {
        "broker.session.timeout.ms": "2500",
        "broker.heartbeat.interval.ms": "500",
        "offsets.topic.num.partitions": "3",
        "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
        # updates and snapshots, pruned, at a pace a test sees (Kafka's defaults: 500, 5 min, 5 min)
        "share.coordinator.snapshot.update.records.per.snapshot": "3",
        "share.coordinator.state.topic.prune.interval.ms": "100",
        "share.coordinator.cold.partition.snapshot.interval.ms": "1000",
    }
    herd = HerdCluster(tmp_path_factory.mktemp("sharefailover"), overrides=overrides, database_url=pg_url, faults=False)
    try:
        herd.start(nodes=3)
        yield herd
    finally:
        herd.close()


def fetch(c: RawClient, group: str, member: str, epoch: int, topics=(), max_wait: int = 0):
    request = req(FETCH, 1, group_id=group, member_id=member, share_session_epoch=epoch, max_wait=max_wait,
                  min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, topics=topics,
                  forgotten_topics_data=())  # fmt: skip
    return c.request(FETCH, 1, request)


def fetch_topic(topic_id: uuid.UUID):
    p = part(FETCH, 1, "FetchPartition", partition_index=0, acknowledgement_batches=())
    return part(FETCH, 1, "FetchTopic", topic_id=topic_id, partitions=(p,))


def acquired(response) -> list[tuple[int, int, int]]:
    assert response.error_code == ErrorCode.none, response.error_code
    parts = [p for t in response.responses for p in t.partitions]
    assert all(p.error_code == ErrorCode.none for p in parts), [p.error_code for p in parts]
    return [(r.first_offset, r.last_offset, r.delivery_count) for p in parts for r in p.acquired_records]


def describe_offsets(c: RawClient, group: str, topic: str):
    asked = (part(DESCRIBE, 1, "DescribeShareGroupOffsetsRequestTopic", topic_name=topic, partitions=(0,)),)
    entry = part(DESCRIBE, 1, "DescribeShareGroupOffsetsRequestGroup", group_id=group, topics=asked)
    answer = c.request(DESCRIBE, 1, req(DESCRIBE, 1, groups=(entry,))).groups[0]
    assert answer.error_code == ErrorCode.none
    return answer


def leader_epoch_of(cluster: HerdCluster, topic: str) -> tuple[int, int]:
    """(leader, leader epoch) of the topic's partition 0, as a live node's Metadata answers it."""
    node = next(i for i in range(len(cluster.nodes)) if cluster.running(i))
    with RawClient(cluster.nodes[node].port) as c:
        wanted = (part(3, 12, "MetadataRequestTopic", name=topic, topic_id=None),)
        request = req(3, 12, topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        (p,) = c.request(3, 12, request).topics[0].partitions
    return p.leader_id, p.leader_epoch


def topic_id_of(c: RawClient, topic: str) -> uuid.UUID:
    wanted = (part(3, 12, "MetadataRequestTopic", name=topic, topic_id=None),)
    request = req(3, 12, topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return c.request(3, 12, request).topics[0].topic_id


def state_leaders(cluster: HerdCluster) -> dict[int, int]:
    """partition -> leader of __share_group_state, made first if no node has made it yet (the first request to a
    share coordinator makes it)."""
    with RawClient(cluster.nodes[0].port) as c:
        p = part(INITIALIZE, 0, "PartitionData", partition=0, state_epoch=0, start_offset=0)
        topics = (part(INITIALIZE, 0, "InitializeStateData", topic_id=topic_id_of(c, "__consumer_offsets"),
                       partitions=(p,)),)  # fmt: skip
        c.request(INITIALIZE, 0, req(INITIALIZE, 0, group_id="probe", topics=topics))

    def led() -> dict[int, int] | None:
        leaders = leaders_of(cluster, "__share_group_state")
        return leaders if len(leaders) == STATE_PARTITIONS and all(n >= 0 for n in leaders.values()) else None

    return wait_until(led, WAIT_S, "__share_group_state made and led", ignore=(KeyError,))


def group_kept_by(cluster: HerdCluster, topic_id: uuid.UUID, on_leader: bool, leader: int) -> str | None:
    """A group id whose share state of (topic_id, 0) the data partition's leader keeps itself (`on_leader`), or
    another node; None when no node can (the leader leads no partition of __share_group_state, or every one)."""
    leaders = state_leaders(cluster)
    kept_by_some = set(leaders.values())
    if not (leader in kept_by_some if on_leader else kept_by_some - {leader}):
        return None
    while True:  # found within a few tries: each partition of __share_group_state is as likely
        group = f"g-{uuid.uuid4().hex[:8]}"
        kept_by = leaders[coordinator_partition(coordinator_key(group, topic_id, 0), STATE_PARTITIONS)]
        if (kept_by == leader) == on_leader:
            return group


def topic_and_group(cluster: HerdCluster, on_leader: bool) -> tuple[str, int, uuid.UUID, str]:
    """A new one-partition topic, its leader, its id and a group whose share state of it the leader keeps itself
    (`on_leader`) or another node. A node restarted by an earlier test may lead no partition of
    __share_group_state (leadership is balanced over all data partitions, not per topic): new topics are made
    until one's leader fits."""
    for _ in range(10):
        topic = f"q-{uuid.uuid4().hex[:8]}"
        create_topic_on(cluster, topic, 1, WAIT_S)
        leader = leaders_of(cluster, topic)[0]
        with RawClient(cluster.nodes[leader].port) as c:
            tid = topic_id_of(c, topic)
        group = group_kept_by(cluster, tid, on_leader, leader)
        if group is not None:
            return topic, leader, tid, group
    raise AssertionError(f"no topic led by a node that keeps share state={on_leader}: {state_leaders(cluster)}")


@pytest.mark.parametrize("on_leader", [False, True], ids=["state-on-another-node", "state-on-the-leader"])
def test_acknowledged_records_stay_acknowledged_when_the_leader_is_killed(cluster: HerdCluster, on_leader) -> None:
    for i in range(len(cluster.nodes)):
        if not cluster.running(i):
            cluster.restart(i, WAIT_S)
    topic, leader, tid, group = topic_and_group(cluster, on_leader)
    with RawClient(cluster.nodes[leader].port) as c:
        # the first fetch makes the share partition (share.auto.offset.reset latest: the empty log's end, 0), its
        # state initialized with the share coordinator, which may have to make __share_group_state first
        wait_until(lambda: acquired(fetch(c, group, "m", 0, (fetch_topic(tid),))) == [], WAIT_S,
                   "the share partition made", ignore=(AssertionError,))  # fmt: skip
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(10):
            producer.produce(topic, b"%d" % i, partition=0)
        assert producer.flush(WAIT_S) == 0
        assert acquired(fetch(c, group, "m", 1, max_wait=5_000)) == [(0, 9, 1)]
        acks = tuple(
            part(ACK, 1, "AcknowledgementBatch", first_offset=first, last_offset=last, acknowledge_types=(kind,))
            for first, last, kind in ((0, 3, ACCEPT), (4, 4, REJECT))
        )
        p = part(ACK, 1, "AcknowledgePartition", partition_index=0, acknowledgement_batches=acks)
        topics = (part(ACK, 1, "AcknowledgeTopic", topic_id=tid, partitions=(p,)),)
        answer = c.request(ACK, 1, req(ACK, 1, group_id=group, member_id="m", share_session_epoch=2, topics=topics))
        assert answer.error_code == ErrorCode.none
        assert answer.responses[0].partitions[0].error_code == ErrorCode.none  # durable once answered
    cluster.kill(leader)

    def new_leader() -> int | None:
        now = leaders_of(cluster, topic).get(0, -1)
        return now if now not in (-1, leader) and cluster.running(now) else None

    successor = wait_until(new_leader, WAIT_S, f"a leader of {topic}-0 other than node {leader}")
    with RawClient(cluster.nodes[successor].port) as c:

        def after_the_move() -> list[tuple[int, int, int]]:
            opened = acquired(fetch(c, group, "n", 0, (fetch_topic(tid),)))
            return opened or acquired(fetch(c, group, "n", 1, max_wait=2_000))

        # 0-3 accepted and 4 rejected never come back; 5-9, acquired and not acknowledged, do (acquisitions are not
        # written, as in Kafka: their delivery count starts again)
        got = wait_until(after_the_move, WAIT_S, "the records left after the move", ignore=(AssertionError,))
        assert got == [(5, 9, 1)]
    # kafka-share-groups.sh --describe through any node: the state's start offset 5 and the new leader's epoch, read
    # from the share coordinator (ReadShareGroupStateSummary when another node keeps it), and the lag
    _, successor_epoch = leader_epoch_of(cluster, topic)
    for i in range(len(cluster.nodes)):
        if cluster.running(i):
            with RawClient(cluster.nodes[i].port) as c:
                (row,) = describe_offsets(c, group, topic).topics[0].partitions
            assert (row.error_code, row.start_offset, row.leader_epoch, row.lag) == (0, 5, successor_epoch, 5)


def state_offsets(c: RawClient, partition: int) -> tuple[int, int]:
    """(log start, log end) of __share_group_state's `partition`, asked of its leader (ListOffsets v7)."""

    def at(timestamp: int) -> int:
        p = part(2, 7, "ListOffsetsPartition", partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)
        t = part(2, 7, "ListOffsetsTopic", name="__share_group_state", partitions=(p,))
        answer = c.request(2, 7, req(2, 7, replica_id=-1, isolation_level=0, topics=(t,))).topics[0].partitions[0]
        assert answer.error_code == ErrorCode.none, answer.error_code
        return answer.offset

    return at(-2), at(-1)


def state_request(c: RawClient, api: int, version: int, group: str, topic_id: uuid.UUID, **fields):
    p = part(api, version, "PartitionData", partition=0, **fields)
    kind = {INITIALIZE: "InitializeStateData", READ: "ReadStateData", WRITE: "WriteStateData"}[api]
    topics = (part(api, version, kind, topic_id=topic_id, partitions=(p,)),)
    (result,) = c.request(api, version, req(api, version, group_id=group, topics=topics)).results
    return result.partitions[0]


def test_the_state_is_pruned_in_postgresql_and_read_whole_after_its_node_is_killed(cluster: HerdCluster) -> None:
    """`__share_group_state` in PostgreSQL as on one node: updates, a snapshot every 3, the records the latest
    snapshots made redundant pruned (the log start moves, fenced like every write); the node keeping the state
    killed with kill -9, the node that takes its partition over reads the same state."""
    for i in range(len(cluster.nodes)):
        if not cluster.running(i):
            cluster.restart(i, WAIT_S)
    leaders = state_leaders(cluster)
    topic = f"q-{uuid.uuid4().hex[:8]}"
    create_topic_on(cluster, topic, 1, WAIT_S)
    with RawClient(cluster.nodes[leaders[0]].port) as c:
        topic_id = topic_id_of(c, topic)
    group = f"pruned-{uuid.uuid4().hex[:8]}"
    partition = coordinator_partition(coordinator_key(group, topic_id, 0), STATE_PARTITIONS)
    keeper = leaders[partition]
    with RawClient(cluster.nodes[keeper].port) as c:
        assert state_request(c, INITIALIZE, 0, group, topic_id, state_epoch=1, start_offset=0).error_code == 0
        start, _ = state_offsets(c, partition)
        for n in range(60):
            batch = part(WRITE, 1, "StateBatch", first_offset=n, last_offset=n, delivery_state=ACKNOWLEDGED,
                         delivery_count=1)  # fmt: skip
            written = state_request(c, WRITE, 1, group, topic_id, state_epoch=1, leader_epoch=0, start_offset=-1,
                                    state_batches=(batch,))  # fmt: skip
            assert written.error_code == ErrorCode.none
        _, end = state_offsets(c, partition)
        # every share partition of it snapshotted within the cold interval: the log start passes most of the 60
        wait_until(lambda: state_offsets(c, partition)[0] > end - 20, WAIT_S, "the state pruned")
        before = state_request(c, READ, 0, group, topic_id, leader_epoch=0)
    assert before.error_code == ErrorCode.none and start < end - 20
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in before.state_batches] == [(0, 59, ACKNOWLEDGED)]
    cluster.kill(keeper)

    def new_keeper() -> int | None:
        now = leaders_of(cluster, "__share_group_state").get(partition, -1)
        return now if now not in (-1, keeper) and cluster.running(now) else None

    successor = wait_until(new_keeper, WAIT_S, f"a leader of __share_group_state-{partition} other than {keeper}")
    with RawClient(cluster.nodes[successor].port) as c:
        after = wait_until(
            lambda: (r := state_request(c, READ, 0, group, topic_id, leader_epoch=0)).error_code == 0 and r,
            WAIT_S,
            "the state read from the new keeper",
        )
    assert (after.start_offset, after.state_batches) == (before.start_offset, before.state_batches)
