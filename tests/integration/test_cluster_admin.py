"""The cluster-shaped admin APIs on both backends (tests/backends.py): DescribeTopicPartitions (KIP-966 paging),
ListConfigResources (KIP-1142), DescribeCluster, ElectLeaders, AlterPartitionReassignments and
ListPartitionReassignments, over raw sockets at every version kio has, and through the admin clients of
kafka-python, confluent-kafka and aiokafka.

Raw requests go to `broker.port` (on a cluster: the node that coordinates every group, started with one
`__consumer_offsets` partition), which answers for the whole cluster and, having made the change, shows it at
once. On one node every election is ELECTION_NOT_NEEDED and a reassignment can only name the node itself; on a
cluster a reassignment moves the leadership and a preferred election balances it again."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from backends import BACKENDS, start_broker
from groupmembers import wait_for
from kio.schema.errors import ErrorCode
from rawkafka import RawClient

from herd.client.wire import request_builder

TOPIC_OPERATIONS = 0b110111111000  # READ..ALTER_CONFIGS (3-8, 10, 11), a broker without an authorizer
CLUSTER_OPERATIONS = 0b1111110100000  # CREATE 5, ALTER 7 .. IDEMPOTENT_WRITE 12


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(
        request, tmp_path_factory, "clusterops", {"auto.create.topics.enable": "false"}, single_coordinator=True
    ) as b:
        for name, partitions in (("dtp-a", 3), ("dtp-b", 2), ("moves", 3)):
            _request(
                b,
                19,
                7,
                topics=(
                    _b(19, 7)(
                        "CreatableTopic",
                        name=name,
                        num_partitions=partitions,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    ),
                ),
                timeout=10000,
                validate_only=False,
            )
        yield b


@pytest.fixture(scope="module")
def kp_admin(broker):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield admin
    admin.close()


def _b(key: int, version: int) -> Any:
    return request_builder(key, version)


def _request(broker: Any, key: int, version: int, **fields: Any) -> Any:
    with RawClient(broker.port) as client:
        return client.request(key, version, _b(key, version).request(**fields))


def _node_ids(broker: Any) -> list[int]:
    response = _request(broker, 60, 0, include_cluster_authorized_operations=False)
    return sorted(b.broker_id for b in response.brokers)


def _leaders(broker: Any, topic: str) -> list[int]:
    response = _request(
        broker, 75, 0, topics=(_b(75, 0)("TopicRequest", name=topic),), response_partition_limit=100, cursor=None
    )
    return [p.leader_id for p in response.topics[0].partitions]


# -- DescribeTopicPartitions ---------------------------------------------------------------------------------------


def _describe(broker: Any, names: tuple[str, ...], limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    b = _b(75, 0)
    return _request(
        broker,
        75,
        0,
        topics=tuple(b("TopicRequest", name=n) for n in names),
        response_partition_limit=limit,
        cursor=b("Cursor", topic_name=cursor[0], partition_index=cursor[1]) if cursor else None,
    )


def _pages(response: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def test_describe_topic_partitions_pages_in_name_order(broker):
    first = _describe(broker, ("dtp-b", "dtp-a", "dtp-b"), limit=2)
    assert _pages(first) == [("dtp-a", [0, 1])]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("dtp-a", 2)
    second = _describe(broker, ("dtp-a", "dtp-b"), limit=2, cursor=("dtp-a", 2))
    assert _pages(second) == [("dtp-a", [2]), ("dtp-b", [0])]
    assert (second.next_cursor.topic_name, second.next_cursor.partition_index) == ("dtp-b", 1)
    last = _describe(broker, ("dtp-a", "dtp-b"), limit=5, cursor=("dtp-b", 1))
    assert _pages(last) == [("dtp-b", [1])] and last.next_cursor is None
    # the limit ending exactly at a topic's end: the cursor names the next topic's first partition
    exact = _describe(broker, ("dtp-a", "dtp-b"), limit=3)
    assert _pages(exact) == [("dtp-a", [0, 1, 2])]
    assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == ("dtp-b", 0)


def test_describe_topic_partitions_describes_like_metadata(broker):
    topic = _describe(broker, ("dtp-b",)).topics[0]
    assert topic.error_code == ErrorCode.none and topic.topic_id is not None and not topic.is_internal
    assert topic.topic_authorized_operations == TOPIC_OPERATIONS
    nodes = _node_ids(broker)
    for p in topic.partitions:
        assert p.leader_id in nodes and p.replica_nodes == p.isr_nodes == (p.leader_id,)
        assert p.eligible_leader_replicas == () and p.last_known_elr == () and p.offline_replicas == ()
        assert p.leader_epoch >= 0


def test_describe_topic_partitions_of_every_topic_from_a_cursor(broker):
    response = _describe(broker, (), cursor=("dtp-b", 1))
    names = [t.name for t in response.topics]
    assert names == sorted(names) and names[0] == "dtp-b" and "dtp-a" not in names
    assert _pages(response)[0] == ("dtp-b", [1]) and response.next_cursor is None


def test_describe_topic_partitions_unknown_topics_and_bad_cursors(broker):
    unknown = _describe(broker, ("nope", "bad/name"))
    assert [(t.name, t.error_code, t.partitions, t.topic_id) for t in unknown.topics] == [  # the zero id: None
        ("bad/name", ErrorCode.invalid_topic_exception, (), None),
        ("nope", ErrorCode.unknown_topic_or_partition, (), None),
    ]
    for names, cursor in ((("dtp-a",), ("dtp-b", 0)), (("dtp-a",), ("dtp-a", -1))):
        refused = _describe(broker, names, cursor=cursor)
        assert [(t.name, t.error_code) for t in refused.topics] == [("dtp-a", ErrorCode.invalid_request)]
        assert refused.next_cursor is None


def test_describe_topic_partitions_through_kafka_python(broker, kp_admin):
    page = kp_admin.describe_topic_partitions(["dtp-a", "dtp-b"], response_partition_limit=4)
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]] == [
        ("dtp-a", [0, 1, 2]),
        ("dtp-b", [0]),
    ]
    rest = kp_admin.describe_topic_partitions(["dtp-a", "dtp-b"], cursor=page["next_cursor"])
    assert [p["partition_index"] for p in rest["topics"][0]["partitions"]] == [1] and rest["next_cursor"] is None


# -- ListConfigResources -------------------------------------------------------------------------------------------


def _register(broker: Any, group: str) -> None:
    b = _b(44, 1)
    response = _request(
        broker,
        44,
        1,
        validate_only=False,
        resources=(
            b(
                "AlterConfigsResource",
                resource_type=32,
                resource_name=group,
                configs=(b("AlterableConfig", name="herd.expected.instance.ids", config_operation=0, value="i-1"),),
            ),
        ),
    )
    assert response.responses[0].error_code == ErrorCode.none


def _listed(broker: Any, version: int, types: tuple[int, ...] = ()) -> Any:
    return _request(broker, 74, version, resource_types=types)


def test_list_config_resources_v0_lists_no_client_metrics(broker):
    response = _listed(broker, 0)
    assert response.error_code == ErrorCode.none and response.config_resources == ()


def test_list_config_resources_lists_each_type_in_kafkas_order(broker):
    _register(broker, "registered-group")
    response = _listed(broker, 1)
    assert response.error_code == ErrorCode.none
    listed = [(r.resource_type, r.resource_name) for r in response.config_resources]
    assert [t for t, _ in listed] == sorted((t for t, _ in listed), key=[32, 16, 8, 4, 2].index)
    assert (32, "registered-group") in listed
    assert [n for t, n in listed if t == 4] == [str(n) for n in _node_ids(broker)]
    topics = [n for t, n in listed if t == 2]
    assert topics == sorted(topics) and {"dtp-a", "dtp-b", "__consumer_offsets"} <= set(topics)
    only = _listed(broker, 1, (4, 32))
    assert {r.resource_type for r in only.config_resources} == {4, 32}


def test_list_config_resources_refuses_an_unsupported_type(broker):
    response = _listed(broker, 1, (2, 64))
    assert response.error_code == ErrorCode.unsupported_version and response.config_resources == ()


def test_list_config_resources_through_kafka_python(broker, kp_admin):
    _register(broker, "kp-registered")
    listed = kp_admin.list_config_resources(["GROUP", "TOPIC"])
    assert "dtp-a" in listed["topic"]
    if broker.backend == "embedded":  # a cluster's node lists the groups it coordinates, and kafka-python asks any
        assert listed["group"] == ["kp-registered", "registered-group"]


# -- DescribeCluster -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_at_every_version(broker, version):
    response = _request(
        broker, 60, version, include_cluster_authorized_operations=True, endpoint_type=1, include_fenced_brokers=True
    )
    assert response.error_code == ErrorCode.none and response.error_message is None
    assert response.cluster_authorized_operations == CLUSTER_OPERATIONS
    assert response.controller_id in [b.broker_id for b in response.brokers]
    assert response.cluster_id
    if version == 2:
        assert not any(b.is_fenced for b in response.brokers)
    plain = _request(
        broker, 60, version, include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False
    )
    assert plain.cluster_authorized_operations == -(2**31)


@pytest.mark.parametrize("version", [1, 2])
def test_describe_cluster_refuses_controller_and_unknown_endpoints(broker, version):
    controllers = _request(
        broker, 60, version, include_cluster_authorized_operations=False, endpoint_type=2, include_fenced_brokers=False
    )
    assert controllers.error_code == ErrorCode.mismatched_endpoint_type and controllers.brokers == ()
    assert controllers.error_message == (
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
    )
    unknown = _request(
        broker, 60, version, include_cluster_authorized_operations=False, endpoint_type=7, include_fenced_brokers=False
    )
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.unsupported_endpoint_type,
        "Unsupported endpoint type 7",
    )
    assert (unknown.cluster_id, unknown.controller_id, unknown.endpoint_type) == ("", -1, 1)


def test_describe_cluster_through_the_clients(broker, kp_admin):
    from aiokafka.admin import AIOKafkaAdminClient
    from confluent_kafka.admin import AdminClient

    nodes = _node_ids(broker)
    # librdkafka describes the cluster with a Metadata request; kafka-python and aiokafka with DescribeCluster
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: a collected client fails its futures
    described = admin.describe_cluster(request_timeout=10).result()
    assert sorted(n.id for n in described.nodes) == nodes and described.controller.id in nodes
    kp = kp_admin.describe_cluster()
    assert sorted(b["broker_id"] for b in kp["brokers"]) == nodes and kp["controller_id"] in nodes
    assert "DESCRIBE" in kp["authorized_operations"]  # asked for by kafka-python, as a bit field

    async def aio() -> Any:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            return await admin.describe_cluster()
        finally:
            await admin.close()

    aio_described = asyncio.run(aio())
    assert sorted(b["node_id"] for b in aio_described["brokers"]) == nodes


@pytest.mark.parametrize("version", [8, 10, 12])
def test_metadata_answers_authorized_operations_only_when_asked(broker, version):
    """Metadata v8+ as a Kafka broker without an authorizer: asked for, every topic (and, before v11, cluster)
    operation; not asked, "not requested"."""
    import uuid

    b = _b(3, version)
    for asked in (True, False):
        response = _request(
            broker,
            3,
            version,
            allow_auto_topic_creation=False,
            topics=(b("MetadataRequestTopic", name="dtp-a", topic_id=uuid.UUID(int=0)),),
            include_topic_authorized_operations=asked,
            include_cluster_authorized_operations=asked,
        )
        assert response.topics[0].topic_authorized_operations == (TOPIC_OPERATIONS if asked else -(2**31))
        if version < 11:
            assert response.cluster_authorized_operations == (CLUSTER_OPERATIONS if asked else -(2**31))


def test_confluent_describes_authorized_operations(broker):
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: a collected client fails its futures
    topic = admin.describe_topics(TopicCollection(["dtp-a"]), include_authorized_operations=True, request_timeout=10)[
        "dtp-a"
    ].result()
    assert {AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE} <= set(topic.authorized_operations)
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=10).result()
    assert AclOperation.IDEMPOTENT_WRITE in set(cluster.authorized_operations)


# -- ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments -----------------------------------------


def _elect(broker: Any, version: int, election: int, partitions: dict[str, list[int]] | None) -> Any:
    b = _b(43, version)
    asked = (
        None
        if partitions is None
        else tuple(b("TopicPartitions", topic=t, partitions=tuple(ps)) for t, ps in partitions.items())
    )
    return _request(broker, 43, version, election_type=election, topic_partitions=asked, timeout=10000)


def _results(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.topic, p.partition_id): p.error_code for t in response.replica_election_results for p in t.partition_result
    }


def _reassign(broker: Any, version: int, topic: str, replicas: dict[int, list[int] | None],
              allow: bool = True) -> dict[int, tuple[ErrorCode, str | None]]:  # fmt: skip
    b = _b(45, version)
    response = _request(
        broker,
        45,
        version,
        timeout=10000,
        allow_replication_factor_change=allow,
        topics=(
            b(
                "ReassignableTopic",
                name=topic,
                partitions=tuple(
                    b("ReassignablePartition", partition_index=i, replicas=None if r is None else tuple(r))
                    for i, r in replicas.items()
                ),
            ),
        ),
    )
    assert response.error_code == ErrorCode.none
    return {p.partition_index: (p.error_code, p.error_message) for p in response.responses[0].partitions}


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("election", [0, 1])
def test_elect_leaders_answers_each_partition(broker, version, election):
    response = _elect(broker, version, election, {"dtp-a": [0, 1, 2, 9], "nope": [0]})
    if version >= 1:
        assert response.error_code == ErrorCode.none
    results = _results(response)
    assert results[("dtp-a", 9)] == results[("nope", 0)] == ErrorCode.unknown_topic_or_partition
    # dtp-a was placed by the balancing rules and has a live leader: nothing to elect
    assert {results[("dtp-a", i)] for i in range(3)} == {ErrorCode.election_not_needed}


@pytest.mark.parametrize("version", [1, 2])
def test_elect_leaders_refuses_an_unknown_election_type(broker, version):
    response = _elect(broker, version, 5, {"dtp-a": [0]})
    assert response.error_code == ErrorCode.invalid_request
    partition = response.replica_election_results[0].partition_result[0]
    assert (partition.error_code, partition.error_message) == (ErrorCode.invalid_request, "Unknown election type 5")


@pytest.mark.parametrize("version", [0, 1])
def test_reassignment_errors(broker, version):
    nodes = _node_ids(broker)
    leader = _leaders(broker, "moves")[0]
    answers = _reassign(broker, version, "moves", {0: None, 1: [], 2: [99], 7: [leader]})
    assert answers == {
        0: (ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress."),
        1: (ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."),
        2: (
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes broker 99, but no such broker is registered.",
        ),
        7: (ErrorCode.unknown_topic_or_partition, "Unable to find partition moves:7."),
    }
    twice = _reassign(broker, version, "moves", {0: [leader, leader]})[0]
    assert twice == (
        ErrorCode.invalid_replica_assignment,
        f"The manual partition assignment includes the broker {leader} more than once.",
    )
    assert _reassign(broker, version, "nope", {0: [leader]})[0] == (
        ErrorCode.unknown_topic_or_partition,
        "Unable to find a topic named nope.",
    )
    assert _reassign(broker, version, "moves", {0: [leader]})[0] == (ErrorCode.none, None)  # nothing to change
    if len(nodes) > 1:
        several = _reassign(broker, version, "moves", {0: nodes}, allow=version == 0)[0]
        expected = ErrorCode.invalid_replica_assignment if version == 0 else ErrorCode.invalid_replication_factor
        assert several[0] == expected
        if version == 1:
            assert several[1] == f"The replication factor is changed from 1 to {len(nodes)}"


def test_list_partition_reassignments_is_always_empty(broker):
    b = _b(46, 0)
    for topics in (None, (b("ListPartitionReassignmentsTopics", name="moves", partition_indexes=(0, 1)),)):
        response = _request(broker, 46, 0, timeout=10000, topics=topics)
        assert response.error_code == ErrorCode.none and response.topics == ()


def test_a_reassignment_moves_leadership_and_a_preferred_election_balances_it(broker, kp_admin):
    from kafka import TopicPartition

    nodes = _node_ids(broker)
    before = _leaders(broker, "moves")
    if len(nodes) == 1:  # one node: the only reassignment there is changes nothing
        assert kp_admin.alter_partition_reassignments({TopicPartition("moves", 0): [nodes[0]]}) == {
            TopicPartition("moves", 0): None
        }
        assert _leaders(broker, "moves") == before
        return
    target = next(n for n in nodes if n != before[0])
    epoch = _describe(broker, ("moves",)).topics[0].partitions[0].leader_epoch
    assert kp_admin.alter_partition_reassignments({TopicPartition("moves", 0): [target]}) == {
        TopicPartition("moves", 0): None
    }

    def moved() -> tuple[int, int]:
        partition = _describe(broker, ("moves",)).topics[0].partitions[0]
        return partition.leader_id, partition.leader_epoch

    # kafka-python sent the reassignment to the node its Metadata named controller, which may not be the node asked
    # here: that one hears of the move by PostgreSQL's NOTIFY, a few milliseconds after the answer (as a Kafka
    # broker's metadata follows the controller's)
    wait_for(lambda: moved() == (target, epoch + 1), 10, f"node {target} leading moves-0 at epoch {epoch + 1}")
    assert kp_admin.list_partition_reassignments() == {}
    # the move left the data partitions unbalanced; a preferred election of all of them balances them again
    response = _elect(broker, 2, 0, None)
    assert set(_results(response).values()) <= {ErrorCode.none} and _results(response)
    data = Counter(
        leader
        for t in _describe(broker, ()).topics
        if t.name != "__consumer_offsets"
        for leader in (p.leader_id for p in t.partitions)
    )
    assert max(data.values()) - min(data[n] for n in nodes) <= 1
    again = _results(_elect(broker, 2, 0, {"moves": [0, 1, 2]}))
    assert set(again.values()) == {ErrorCode.election_not_needed}


def test_elect_leaders_through_the_clients(broker, kp_admin):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka.errors import UnknownTopicOrPartitionError

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    outcome = admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition("dtp-b", 0), TopicPartition("dtp-b", 1)]
    ).result(15)
    assert {tp.partition: (e.code() if e else None) for tp, e in outcome.items()} == {
        0: ErrorCode.election_not_needed.value,
        1: ErrorCode.election_not_needed.value,
    }
    response = kp_admin.elect_leaders(1, {"dtp-b": [0, 1]})  # unclean: ELECTION_NOT_NEEDED is not an error
    assert {p.error_code for t in response.replica_election_results for p in t.partition_result} == {
        ErrorCode.election_not_needed.value
    }
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.elect_leaders(0, {"no-such-topic": [0]})
