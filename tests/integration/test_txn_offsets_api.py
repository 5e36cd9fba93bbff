"""TxnOffsetCommit (v0-v5) and OffsetFetch require_stable over a real socket, on one in-process broker whose
group coordinator completes transactions through `complete_transaction` (what the transaction coordinator
calls once a marker is durable). KIP-447 fencing at v3+, pending offsets invisible until committed, gone on
abort, UNSTABLE_OFFSET_COMMIT meanwhile, unknown topics and partitions, the empty group id, and the refusal
while the broker has no transaction coordinator."""

from __future__ import annotations

from typing import Any

import pytest
from inprocess import InProcessBroker
from kio.schema.errors import ErrorCode
from rawkafka import RawClient
from test_groups_api import part, req
from test_offsets_api import member_of

TXN_COMMIT, FETCH = 28, 9
PID, EPOCH = 77, 1


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    node = InProcessBroker(
        {"log.dirs": str(tmp_path_factory.mktemp("txn-offsets")), "offsets.topic.num.partitions": "1"}
    )
    with RawClient(node.port) as c:
        c.request(
            19,
            7,
            req(
                19,
                7,
                timeout=10_000,
                validate_only=False,
                topics=(
                    part(
                        19,
                        7,
                        "CreatableTopic",
                        name="data",
                        num_partitions=2,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    ),
                ),
            ),
        )
    yield node
    node.stop()


@pytest.fixture
def served(node):
    """The broker with a transaction coordinator: helper B's once merged, else a stand-in object (this API only asks
    whether there is one; the tests complete transactions themselves, as it would)."""
    broker = node.server.broker
    had = getattr(broker, "transactions", None)
    if had is None:
        broker.transactions = object()
    yield node
    broker.transactions = had


def txn_commit(
    c: RawClient,
    v: int,
    group: str,
    offsets: dict[int, int],
    *,
    topic: str = "data",
    gen: int = -1,
    member: str = "",
    instance: str | None = None,
    pid: int = PID,
    epoch: int = EPOCH,
) -> list[tuple[int, int]]:
    t = part(
        TXN_COMMIT,
        v,
        "TxnOffsetCommitRequestTopic",
        name=topic,
        partitions=tuple(
            part(
                TXN_COMMIT,
                v,
                "TxnOffsetCommitRequestPartition",
                partition_index=p,
                committed_offset=o,
                committed_leader_epoch=-1,
                committed_metadata=None,
            )
            for p, o in offsets.items()
        ),
    )
    r = c.request(
        TXN_COMMIT,
        v,
        req(
            TXN_COMMIT,
            v,
            transactional_id="tx",
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=gen,
            member_id=member,
            group_instance_id=instance,
            topics=(t,),
        ),
    )
    return [(p.partition_index, p.error_code) for topic_ in r.topics for p in topic_.partitions]


def fetch(c: RawClient, group: str, v: int = 7, stable: bool = True) -> dict[int, tuple[int, int]]:
    t = part(FETCH, v, "OffsetFetchRequestTopic", name="data", partition_indexes=(0, 1))
    r: Any = c.request(FETCH, v, req(FETCH, v, group_id=group, topics=(t,), require_stable=stable))
    return {p.partition_index: (p.committed_offset, p.error_code) for p in r.topics[0].partitions}


def complete(node: InProcessBroker, commit: bool, pid: int = PID, epoch: int = EPOCH) -> None:
    node.run(node.server.broker.coordinator.complete_transaction(0, pid, epoch, commit))


UNSTABLE, NONE = ErrorCode.unstable_offset_commit, ErrorCode.none


@pytest.mark.parametrize("v", range(6))
def test_offsets_of_a_committed_transaction_appear_and_those_of_an_aborted_one_do_not(served, v):
    group = f"txn-{v}"
    with RawClient(served.port) as c:
        assert txn_commit(c, v, group, {0: 5, 1: 6}) == [(0, NONE), (1, NONE)]
        assert fetch(c, group) == {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)}
        assert fetch(c, group, v=6, stable=False) == {0: (-1, NONE), 1: (-1, NONE)}
        complete(served, True)
        assert fetch(c, group) == {0: (5, NONE), 1: (6, NONE)}
        assert txn_commit(c, v, group, {0: 50}) == [(0, NONE)]
        assert fetch(c, group) == {0: (-1, UNSTABLE), 1: (6, NONE)}
        complete(served, False)
        assert fetch(c, group) == {0: (5, NONE), 1: (6, NONE)}


@pytest.mark.parametrize("v", [3, 5])
def test_kip_447_fencing(served, v):
    group = f"fenced-{v}"
    with RawClient(served.port) as c:
        assert txn_commit(c, v, group, {0: 1}, gen=1, member="m") == [(0, ErrorCode.illegal_generation)]
        me, generation = member_of(c, group, "data", instance="i")
        assert txn_commit(c, v, group, {0: 1}, gen=generation + 1, member=me, instance="i") == [
            (0, ErrorCode.illegal_generation)
        ]
        assert txn_commit(c, v, group, {0: 1}, gen=generation, member="zombie") == [(0, ErrorCode.unknown_member_id)]
        assert txn_commit(c, v, group, {0: 1}, gen=generation, member="zombie", instance="i") == [
            (0, ErrorCode.fenced_instance_id)
        ]
        assert fetch(c, group) == {0: (-1, NONE), 1: (-1, NONE)}  # nothing was staged
        assert txn_commit(c, v, group, {0: 9}, gen=generation, member=me, instance="i") == [(0, NONE)]
        complete(served, True)
        assert fetch(c, group) == {0: (9, NONE), 1: (-1, NONE)}


def test_a_zombie_producer_cannot_commit_offsets(served):
    """Its successor's InitProducerId bumped the epoch and aborted its transaction with the new epoch."""
    pid = PID + 1
    with RawClient(served.port) as c:
        assert txn_commit(c, 5, "zombies", {0: 3}, pid=pid) == [(0, NONE)]
        complete(served, False, pid, EPOCH + 1)
        assert txn_commit(c, 5, "zombies", {0: 4}, pid=pid) == [(0, ErrorCode.invalid_producer_epoch)]
        assert txn_commit(c, 5, "zombies", {0: 5}, pid=pid, epoch=EPOCH + 1) == [(0, NONE)]
        complete(served, True, pid, EPOCH + 1)
        assert fetch(c, "zombies") == {0: (5, NONE), 1: (-1, NONE)}


def test_unknown_topics_and_partitions_and_the_empty_group_id(served):
    with RawClient(served.port) as c:
        assert txn_commit(c, 5, "g", {0: 1}, topic="nope") == [(0, ErrorCode.unknown_topic_or_partition)]
        assert txn_commit(c, 5, "g", {1: 1, 7: 1}) == [(1, NONE), (7, ErrorCode.unknown_topic_or_partition)]
        assert txn_commit(c, 5, "", {0: 1, 7: 1}) == [
            (0, ErrorCode.invalid_group_id),
            (7, ErrorCode.unknown_topic_or_partition),
        ]
        complete(served, False)


def test_send_offsets_to_transaction_with_a_real_client(node):
    """confluent-kafka's transactional producer: committed, aborted, and pending across a coordinator reload."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    group = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "eos", "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "eos-tx"})
    runtime = node.server.broker.coordinator
    counted = node.server.broker.metrics.offset_commits

    def send(offset: int) -> None:
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition("data", 0, offset)], group.consumer_group_metadata(), 10)

    def committed() -> int:
        return group.committed([TopicPartition("data", 0)], 10)[0].offset

    try:
        producer.init_transactions(10)
        send(7)
        producer.commit_transaction(10)
        assert committed() == 7
        send(9)
        producer.abort_transaction(10)
        assert committed() == 7
        send(20)
        node.run(runtime.move_away_and_back(runtime.partition_for("eos")))  # pending offsets survive a reload
        node.run(runtime.wait_loaded())
        assert runtime.shards[runtime.partition_for("eos")].shard.has_pending_offsets("eos", "data", 0)
        producer.commit_transaction(10)
        assert committed() == 20
        # herd_group_coordinator_offset_commits counts each written offset, the aborted one too (as Kafka's sensor)
        assert node.server.broker.metrics.offset_commits - counted == 3
    finally:
        group.close()
