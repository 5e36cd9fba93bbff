"""The offset APIs over a real socket with a raw kio client: OffsetCommit fencing at every version,
OffsetDelete, TxnOffsetCommit's refusal (and, once the transaction coordinator is there, offsets sent to a
transaction by a real client), per-commit retention (v2-v4) expiring through the broker's
retention timer, and the version ranges ApiVersions advertises.

Both brokers run on both backends (tests/backends.py). The raw client talks to one node: on a cluster that is
the coordinator of every group (the cluster runs a single `__consumer_offsets` partition)."""

from __future__ import annotations

from typing import Any

import pytest
from backends import BACKENDS, Broker, start_broker
from kio.schema.errors import ErrorCode
from rawkafka import RawClient
from test_groups_api import part, req

from herd.client.consumer_protocol import Subscription, encode_subscription
from herd.testing.wait import wait_until

JOIN, SYNC, COMMIT, FETCH, DESCRIBE, TXN_COMMIT, OFFSET_DELETE, API_VERSIONS = 11, 14, 8, 9, 15, 28, 47, 18


def create_topics(b: Broker) -> Broker:
    with RawClient(b.port) as c:
        for name in ("data", "other"):
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
                            name=name,
                            num_partitions=2,
                            replication_factor=1,
                            assignments=(),
                            configs=(),
                        ),
                    ),
                ),
            )
    return b


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(
        request, tmp_path_factory, "offsets-api", {"offsets.topic.num.partitions": "3"}, single_coordinator=True
    ) as b:
        yield create_topics(b)


@pytest.fixture(scope="module", params=BACKENDS)
def expiring(request, tmp_path_factory):
    """A broker that looks for expired offsets every 100 ms (Kafka's default is 10 minutes). Its cleanup also
    deletes Empty groups without offsets, which can catch a group between the two steps of a JoinGroup, as in
    Kafka: such a joiner gets UNKNOWN_MEMBER_ID and joins again. So the membership tests use `broker`."""
    with start_broker(
        request,
        tmp_path_factory,
        "offsets-expiry",
        {"offsets.topic.num.partitions": "3", "offsets.retention.check.interval.ms": "100"},
        single_coordinator=True,
    ) as b:
        yield create_topics(b)


def commit(
    c: RawClient,
    v: int,
    group: str,
    *,
    gen: int = -1,
    member: str = "",
    instance: str | None = None,
    topic: str = "data",
    partitions: tuple[int, ...] = (0,),
    retention: int = -1,
) -> list[int]:
    t = part(
        COMMIT,
        v,
        "OffsetCommitRequestTopic",
        name=topic,
        partitions=tuple(
            part(
                COMMIT,
                v,
                "OffsetCommitRequestPartition",
                partition_index=p,
                committed_offset=10 + p,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
            for p in partitions
        ),
    )
    r = c.request(
        COMMIT,
        v,
        req(
            COMMIT,
            v,
            group_id=group,
            generation_id_or_member_epoch=gen,
            member_id=member,
            group_instance_id=instance,
            retention_time=retention,
            topics=(t,),
        ),
    )
    return [p.error_code for p in r.topics[0].partitions]


def fetch(c: RawClient, group: str, topic: str = "data", partitions: tuple[int, ...] = (0, 1)) -> dict[int, int]:
    t = part(FETCH, 7, "OffsetFetchRequestTopic", name=topic, partition_indexes=partitions)
    r = c.request(FETCH, 7, req(FETCH, 7, group_id=group, topics=(t,), require_stable=True))
    assert r.error_code == ErrorCode.none
    return {p.partition_index: p.committed_offset for p in r.topics[0].partitions}


def member_of(
    c: RawClient, group: str, *topics: str, protocol_type: str = "consumer", instance: str | None = None
) -> tuple[str, int]:
    """One member joined (v9, two steps unless static) and synced: (member id, generation)."""
    metadata = encode_subscription(Subscription(topics=topics))

    def join(member_id: str) -> Any:
        return c.request(
            JOIN,
            9,
            req(
                JOIN,
                9,
                group_id=group,
                session_timeout=30_000,
                rebalance_timeout=30_000,
                member_id=member_id,
                group_instance_id=instance,
                protocol_type=protocol_type,
                reason=None,
                protocols=(part(JOIN, 9, "JoinGroupRequestProtocol", name="range", metadata=metadata),),
            ),
        )

    first = join("")
    joined = first if instance is not None else join(first.member_id)
    assert joined.error_code == ErrorCode.none, joined
    me, generation = joined.member_id, joined.generation_id
    s = c.request(
        SYNC,
        5,
        req(
            SYNC,
            5,
            group_id=group,
            generation_id=generation,
            member_id=me,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocol_name="range",
            assignments=(part(SYNC, 5, "SyncGroupRequestAssignment", member_id=me, assignment=b""),),
        ),
    )
    assert s.error_code == ErrorCode.none
    return me, generation


@pytest.mark.parametrize("v", range(2, 10))
def test_commit_fencing_at_every_version(broker, v):
    group = f"fenced-{v}"
    with RawClient(broker.port) as c:
        unknown_group = ErrorCode.group_id_not_found if v >= 9 else ErrorCode.illegal_generation
        assert commit(c, v, group, gen=1, member="m") == [unknown_group]
        me, generation = member_of(c, group, "data", instance="i" if v >= 7 else None)
        instance = "i" if v >= 7 else None
        assert commit(c, v, group, gen=generation, member=me, instance=instance) == [ErrorCode.none]
        assert commit(c, v, group, gen=generation + 1, member=me, instance=instance) == [ErrorCode.illegal_generation]
        assert commit(c, v, group, gen=generation, member="stranger") == [ErrorCode.unknown_member_id]
        assert commit(c, v, group) == [ErrorCode.unknown_member_id]  # a simple commit to a live group
        if v >= 7:
            assert commit(c, v, group, gen=generation, member="stranger", instance="i") == [
                ErrorCode.fenced_instance_id
            ]
        assert fetch(c, group) == {0: 10, 1: -1}


def test_commit_during_completing_rebalance_is_rejected(broker):
    with RawClient(broker.port) as c:
        first = c.request(
            JOIN,
            9,
            req(
                JOIN,
                9,
                group_id="completing",
                session_timeout=30_000,
                rebalance_timeout=30_000,
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                reason=None,
                protocols=(part(JOIN, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),),
            ),
        )
        joined = c.request(
            JOIN,
            9,
            req(
                JOIN,
                9,
                group_id="completing",
                session_timeout=30_000,
                rebalance_timeout=30_000,
                member_id=first.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                reason=None,
                protocols=(part(JOIN, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),),
            ),
        )
        assert commit(c, 9, "completing", gen=joined.generation_id, member=joined.member_id) == [
            ErrorCode.rebalance_in_progress
        ]


def delete(c: RawClient, group: str, *topics: tuple[str, tuple[int, ...]]) -> Any:
    return c.request(
        OFFSET_DELETE,
        0,
        req(
            OFFSET_DELETE,
            0,
            group_id=group,
            topics=tuple(
                part(
                    OFFSET_DELETE,
                    0,
                    "OffsetDeleteRequestTopic",
                    name=name,
                    partitions=tuple(
                        part(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=p) for p in partitions
                    ),
                )
                for name, partitions in topics
            ),
        ),
    )


def answers(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_offset_delete(broker):
    with RawClient(broker.port) as c:
        assert (delete(c, "nobody", ("data", (0,))).error_code, delete(c, "nobody", ("data", (0,))).topics) == (
            ErrorCode.group_id_not_found,
            (),
        )
        assert delete(c, "", ("data", (0,))).error_code == ErrorCode.invalid_group_id

        assert commit(c, 9, "idle", partitions=(0, 1)) == [ErrorCode.none, ErrorCode.none]
        r = delete(c, "idle", ("data", (0, 7)), ("missing", (0,)))
        assert r.error_code == ErrorCode.none
        assert answers(r) == {
            ("data", 0): ErrorCode.none,
            ("data", 7): ErrorCode.unknown_topic_or_partition,
            ("missing", 0): ErrorCode.unknown_topic_or_partition,
        }
        assert fetch(c, "idle") == {0: -1, 1: 11}

        me, generation = member_of(c, "live", "data")
        assert commit(c, 9, "live", gen=generation, member=me, topic="other") == [ErrorCode.none]
        r = delete(c, "live", ("data", (0,)), ("other", (0,)))
        assert answers(r) == {("data", 0): ErrorCode.group_subscribed_to_topic, ("other", 0): ErrorCode.none}
        assert fetch(c, "live", "other") == {0: -1, 1: -1}

        member_of(c, "connectors", "data", protocol_type="connect")
        r = delete(c, "connectors", ("other", (0,)))
        assert (r.error_code, r.topics) == (ErrorCode.non_empty_group, ())


def test_a_group_whose_last_offset_expires_is_deleted(expiring):
    with RawClient(expiring.port) as c:
        assert commit(c, 2, "gone", partitions=(0, 1), retention=200) == [ErrorCode.none, ErrorCode.none]
        wait_until(
            lambda: (
                c.request(DESCRIBE, 5, req(DESCRIBE, 5, groups=("gone",), include_authorized_operations=False))
                .groups[0]
                .group_state
                == "Dead"
            ),
            10,
            "the group 'gone' to be deleted (Dead)",
            interval=0.05,
        )
        assert fetch(c, "gone") == {0: -1, 1: -1}


def test_api_versions_advertise_kafkas_ranges(broker):
    with RawClient(broker.port) as c:
        r = c.request(API_VERSIONS, 3, req(API_VERSIONS, 3, client_software_name="t", client_software_version="1"))
        ranges = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert {k: ranges[k] for k in (COMMIT, FETCH, TXN_COMMIT, OFFSET_DELETE)} == {
            COMMIT: (2, 10),
            FETCH: (1, 10),
            TXN_COMMIT: (0, 5),
            OFFSET_DELETE: (0, 0),
        }
        # the admin APIs of issue 16, at the versions Kafka 4.x serves where kio has them
        admin = {
            21: (0, 2),
            23: (2, 4),
            32: (1, 4),
            33: (0, 2),
            34: (1, 2),
            35: (1, 5),
            43: (0, 2),
            44: (0, 1),
            45: (0, 1),
            46: (0, 0),
            60: (0, 2),
            61: (0, 0),
            74: (0, 1),
            75: (0, 0),
        }
        assert {k: ranges.get(k) for k in admin} == admin
        assert 55 not in ranges  # DescribeQuorum: herd has no KRaft quorum to describe


def test_offsets_sent_to_a_transaction_appear_when_it_commits(broker):
    """confluent-kafka's send_offsets_to_transaction on either backend: committed, then aborted (the offset stays)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "eos-both"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"eos-{broker.backend}"})
    try:
        producer.init_transactions(20)
        for offset, commit in ((7, True), (9, False)):
            producer.begin_transaction()
            producer.send_offsets_to_transaction(
                [TopicPartition("data", 1, offset)], group.consumer_group_metadata(), 20
            )
            (producer.commit_transaction if commit else producer.abort_transaction)(20)
            assert group.committed([TopicPartition("data", 1)], 20)[0].offset == 7
    finally:
        group.close()
