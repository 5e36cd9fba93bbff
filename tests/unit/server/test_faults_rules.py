"""Fault rules (herd.server.faults): validation, matching, count and probability, and the injected error answers
(herd.server.fault_answers) of every covered API at several versions, encoded and decoded again with kio to show
that each is a well-formed response of the request's version with the error where Kafka puts it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader

from herd.client.wire import request_builder
from herd.config import BrokerConfig
from herd.log.fs import MemoryFileSystem
from herd.log.store import SegmentStore
from herd.protocol.messages import RequestHeader, encode_response, response_class
from herd.server.apis import table
from herd.server.broker import Broker
from herd.server.fault_answers import ERRORS
from herd.server.faults import FaultRegistry, RuleError, parse_rule


@pytest.fixture(scope="module")
def broker() -> Broker:
    broker = Broker(BrokerConfig.from_properties({}), SegmentStore("/data", MemoryFileSystem()))
    broker.start()
    broker.cluster.create_topic("t", 2)
    broker.cluster.create_topic("other", 1)
    return broker


def _header(api_key: int, version: int, client_id: str = "c") -> RequestHeader:
    return RequestHeader(api_key, version, 7, client_id)


# -- requests of any version -------------------------------------------------------------------------------------


def _request(broker: Broker, key: int, v: int, group: str = "g", topic: str = "t") -> Any:
    b = request_builder(key, v)
    topic_id = broker.cluster.get(topic).topic_id
    named = {"name": topic, "topic_id": topic_id}  # Fetch names the topic `topic`
    if key == 0:
        return b.request(
            transactional_id=None,
            acks=-1,
            timeout=1000,
            topic_data=(
                b("TopicProduceData", **named, partition_data=(b("PartitionProduceData", index=0, records=None),)),
            ),
        )
    if key == 1:
        return b.request(
            replica_id=-1,
            max_wait=100,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=(),
            rack_id="",
            topics=(
                b(
                    "FetchTopic",
                    topic=topic,
                    topic_id=topic_id,
                    partitions=(
                        b(
                            "FetchPartition",
                            partition=1,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=1000,
                        ),
                    ),
                ),
            ),
        )
    if key == 2:
        return b.request(
            replica_id=-1,
            isolation_level=0,
            timeout=1000,
            topics=(
                b(
                    "ListOffsetsTopic",
                    name=topic,
                    partitions=(b("ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),),
                ),
            ),
        )
    if key == 3:
        return b.request(
            topics=(b("MetadataRequestTopic", name=topic, topic_id=uuid.UUID(int=0)),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
            include_cluster_authorized_operations=False,
        )
    if key == 8:
        return b.request(
            group_id=group,
            generation_id_or_member_epoch=1,
            member_id="m-1",
            group_instance_id="i-1",
            retention_time=-1,
            topics=(
                b(
                    "OffsetCommitRequestTopic",
                    **named,
                    partitions=(
                        b(
                            "OffsetCommitRequestPartition",
                            partition_index=0,
                            committed_offset=5,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        )
    if key == 9:
        if v >= 8:
            return b.request(
                require_stable=False,
                groups=(
                    b(
                        "OffsetFetchRequestGroup",
                        group_id=group,
                        member_id=None,
                        member_epoch=-1,
                        topics=(b("OffsetFetchRequestTopics", **named, partition_indexes=(0, 1)),),
                    ),
                ),
            )
        return b.request(
            group_id=group,
            require_stable=False,
            topics=(b("OffsetFetchRequestTopic", name=topic, partition_indexes=(0, 1)),),
        )
    if key == 10:
        return b.request(key=group, key_type=0, coordinator_keys=(group,))
    if key == 11:
        return b.request(
            group_id=group,
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="m-1",
            group_instance_id="i-1",
            protocol_type="consumer",
            reason=None,
            protocols=(b("JoinGroupRequestProtocol", name="range", metadata=b""),),
        )
    if key == 12:
        return b.request(group_id=group, generation_id=1, member_id="m-1", group_instance_id="i-1")
    if key == 13:
        return b.request(
            group_id=group,
            member_id="m-1",
            members=(b("MemberIdentity", member_id="m-1", group_instance_id="i-1", reason=None),),
        )
    if key == 14:
        return b.request(
            group_id=group,
            generation_id=1,
            member_id="m-1",
            group_instance_id="i-1",
            protocol_type="consumer",
            protocol_name="range",
            assignments=(),
        )
    if key == 15:
        return b.request(groups=(group,), include_authorized_operations=False)
    if key == 16:
        return b.request(states_filter=(), types_filter=())
    if key == 22:
        return b.request(transactional_id=None, transaction_timeout=60_000, producer_id=-1, producer_epoch=-1)
    if key == 42:
        return b.request(groups_names=(group,))
    if key == 47:
        return b.request(
            group_id=group,
            topics=(
                b(
                    "OffsetDeleteRequestTopic",
                    name=topic,
                    partitions=(b("OffsetDeleteRequestPartition", partition_index=0),),
                ),
            ),
        )
    raise AssertionError(key)


def _decoded(response: Any, key: int, v: int) -> Any:
    frame = encode_response(9, response)
    cls = response_class(key, v)
    header, offset = entity_reader(cls.__header_schema__)(frame[4:], 0)
    assert header.correlation_id == 9
    body, _ = entity_reader(cls)(frame[4:], offset)
    return body


def _codes(body: Any) -> set[int]:
    """Every error code anywhere in a decoded response."""
    found: set[int] = set()

    def walk(value: Any) -> None:
        if isinstance(value, tuple):
            for item in value:
                walk(item)
        elif hasattr(value, "__dataclass_fields__"):
            for name in value.__dataclass_fields__:
                item = getattr(value, name)
                if name == "error_code":
                    found.add(int(item.value))
                else:
                    walk(item)

    walk(body)
    return found


def _versions(key: int) -> list[int]:
    spec = table()[key]
    middle = (spec.min_version + spec.max_version) // 2
    return sorted({spec.min_version, middle, spec.max_version})


CASES = [
    (key, v, code)
    for key in sorted(ERRORS)
    for v in _versions(key)
    for code in sorted(ERRORS[key])
    if ERRORS[key][code] <= v
]


@pytest.mark.parametrize(("key", "version", "code"), CASES)
def test_every_allowed_error_of_every_covered_api_is_a_well_formed_answer(
    broker: Broker, key: int, version: int, code: int
) -> None:
    faults = FaultRegistry(broker)
    rule = faults.add({"action": "error", "api": key, "error": code})
    request = _request(broker, key, version)
    body = _decoded(faults.error_response(rule, _header(key, version), request), key, version)
    assert code in _codes(body)


def test_errors_go_where_kafka_puts_them(broker: Broker) -> None:
    faults = FaultRegistry(broker)

    def answer(key: int, v: int, error: str, **rule: Any) -> Any:
        r = faults.add({"action": "error", "api": key, "error": error, **rule})
        return _decoded(faults.error_response(r, _header(key, v), _request(broker, key, v)), key, v)

    assert answer(12, 4, "REBALANCE_IN_PROGRESS").error_code == E.rebalance_in_progress
    commit = answer(8, 9, "NOT_COORDINATOR")
    assert [(t.name, p.partition_index, p.error_code) for t in commit.topics for p in t.partitions] == [
        ("t", 0, E.not_coordinator)
    ]
    assert answer(9, 1, "NOT_COORDINATOR").topics[0].partitions[0].error_code == E.not_coordinator  # v1: per partition
    v7 = answer(9, 7, "COORDINATOR_LOAD_IN_PROGRESS")
    assert (v7.error_code, v7.topics) == (E.coordinator_load_in_progress, ())
    v8 = answer(9, 8, "NOT_COORDINATOR")
    assert (v8.groups[0].group_id, v8.groups[0].error_code) == ("g", E.not_coordinator)
    unknown = answer(9, 8, "UNKNOWN_TOPIC_OR_PARTITION")
    assert unknown.groups[0].error_code == E.none
    assert {p.error_code for p in unknown.groups[0].topics[0].partitions} == {E.unknown_topic_or_partition}
    keys = answer(10, 4, "COORDINATOR_NOT_AVAILABLE").coordinators
    assert [(c.key, c.error_code, c.node_id) for c in keys] == [("g", E.coordinator_not_available, -1)]
    assert answer(10, 3, "NOT_COORDINATOR").error_code == E.not_coordinator
    leave = answer(13, 5, "FENCED_INSTANCE_ID")
    assert (leave.error_code, leave.members[0].error_code) == (E.none, E.fenced_instance_id)
    assert answer(13, 5, "NOT_COORDINATOR").error_code == E.not_coordinator
    fetch = answer(1, 12, "NOT_LEADER_OR_FOLLOWER")
    assert (fetch.error_code, fetch.responses[0].partitions[0].error_code) == (E.none, E.not_leader_or_follower)


def test_a_join_refused_member_id_required_carries_a_new_member_id(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    rule = faults.add({"action": "error", "api": "JoinGroup", "error": "MEMBER_ID_REQUIRED"})
    body = faults.error_response(rule, _header(11, 9, "app"), _request(broker, 11, 9))
    assert body.error_code == E.member_id_required and body.member_id.startswith("app-")


def test_metadata_errors_the_rules_topic_and_describes_the_others(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    rule = faults.add({"action": "error", "api": "Metadata", "topic": "t", "error": "LEADER_NOT_AVAILABLE"})
    request = request_builder(3, 12).request(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    assert faults.match(3, _header(3, 12), request) is rule  # every topic asked for: t among them
    body = _decoded(faults.error_response(rule, _header(3, 12), request), 3, 12)
    errors = {t.name: (t.error_code, len(t.partitions)) for t in body.topics}
    assert errors["t"] == (E.leader_not_available, 0)
    assert errors["other"] == (E.none, 1)
    assert [b.port for b in body.brokers] == [broker.endpoint.port]


def test_an_acks_0_produce_gets_no_answer(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    rule = faults.add({"action": "error", "api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"})
    b = request_builder(0, 9)
    request = b.request(transactional_id=None, acks=0, timeout=1000, topic_data=())
    assert faults.error_response(rule, _header(0, 9), request) is None


# -- validation --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "complaint"),
    [
        ({"action": "explode"}, "action must be one of error, delay, drop, stall"),
        ({"action": "error", "error": "NOT_COORDINATOR"}, "action error needs an api"),
        (
            {"action": "error", "api": "Heartbeat", "error": "OFFSET_OUT_OF_RANGE"},
            "Kafka does not answer Heartbeat with OFFSET_OUT_OF_RANGE",
        ),
        ({"action": "error", "api": "Heartbeat", "error": "NO_SUCH_THING"}, "error must be a Kafka error name"),
        (
            {"action": "error", "api": "CreateTopics", "error": 41},
            "injecting errors into CreateTopics is not supported",
        ),
        ({"action": "delay", "api": "Frobnicate", "delay_ms": 1}, "unknown API 'Frobnicate'"),
        ({"action": "delay", "api": 999, "delay_ms": 1}, "API key 999 is not served by herd"),
        ({"action": "delay", "api": "Heartbeat", "topic": "t", "delay_ms": 1}, "Heartbeat requests carry no topic"),
        ({"action": "delay", "api": "Produce", "group": "g", "delay_ms": 1}, "Produce requests carry no group"),
        ({"action": "delay", "api": "Metadata", "member": "m", "delay_ms": 1}, "Metadata requests carry no member"),
        ({"action": "delay"}, "action delay needs delay_ms"),
        ({"action": "delay", "delay_ms": -1}, "delay_ms must be a whole number"),
        ({"action": "drop", "when": "during"}, "when must be before or after"),
        ({"action": "delay", "delay_ms": 5, "when": "after"}, "when goes with action drop"),
        ({"action": "drop", "delay_ms": 5}, "delay_ms goes with action delay or stall"),
        ({"action": "drop", "error": "NOT_COORDINATOR"}, "error goes with action error"),
        ({"action": "drop", "count": 0}, "count must be a whole number"),
        ({"action": "drop", "probability": 1.5}, "probability must be a number in (0, 1]"),
        ({"action": "drop", "group": 3}, "group must be a string"),
        ({"action": "drop", "bogus": 1}, "unknown field 'bogus'"),
        ([1], "a fault rule is a JSON object"),
    ],
)
def test_bad_rules_are_refused_with_one_line(rule: Any, complaint: str) -> None:
    with pytest.raises(RuleError) as caught:
        parse_rule(rule, 1)
    assert complaint in str(caught.value) and "\n" not in str(caught.value)


def test_apis_and_errors_by_name_or_key() -> None:
    by_name = parse_rule({"action": "error", "api": "offset_commit", "error": "not_coordinator"}, 1)
    by_key = parse_rule({"action": "error", "api": 8, "error": 16}, 2)
    assert (by_name.api, by_name.error) == (by_key.api, by_key.error) == (8, 16)
    assert by_name.to_json()["api"] == "OffsetCommit" and by_name.to_json()["error"] == "NOT_COORDINATOR"


def test_the_registry_is_bounded(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    for _ in range(1000):
        faults.add({"action": "drop", "client_id": "nobody"})
    with pytest.raises(RuleError, match="already has 1000 fault rules"):
        faults.add({"action": "drop"})
    assert faults.clear() == 1000 and faults.rules == []


# -- matching ----------------------------------------------------------------------------------------------------


def test_filters_match_group_member_topic_and_client_id(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    beat = _request(broker, 12, 4, group="g")
    assert (
        faults.add({"action": "drop", "api": "Heartbeat", "group": "other"})
        and faults.match(12, _header(12, 4), beat) is None
    )
    faults.clear()
    by_instance = faults.add({"action": "drop", "member": "i-1"})
    assert faults.match(12, _header(12, 4), beat) is by_instance
    assert faults.match(12, _header(12, 2), _request(broker, 12, 2)) is None  # v2 has no instance id: m-1 only
    faults.clear()
    by_client = faults.add({"action": "drop", "client_id": "app"})
    assert faults.match(12, _header(12, 4, "other"), beat) is None
    assert faults.match(12, _header(12, 4, "app"), beat) is by_client
    faults.clear()
    by_topic = faults.add({"action": "drop", "topic": "t"})
    assert faults.match(8, _header(8, 10), _request(broker, 8, 10)) is by_topic  # v10 names topics by id
    assert faults.match(12, _header(12, 4), beat) is None  # a heartbeat names no topic
    assert faults.match(1, _header(1, 4), _request(broker, 1, 4, topic="other")) is None
    faults.clear()
    coordinator = faults.add({"action": "drop", "group": "g"})
    assert faults.match(10, _header(10, 6), _request(broker, 10, 6)) is coordinator
    assert faults.match(9, _header(9, 9), _request(broker, 9, 9)) is coordinator
    assert faults.match(42, _header(42, 2), _request(broker, 42, 2, group="h")) is None


def test_a_version_that_cannot_carry_the_error_is_not_injected(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    rule = faults.add({"action": "error", "api": "Heartbeat", "error": "FENCED_INSTANCE_ID"})
    assert faults.match(12, _header(12, 2), _request(broker, 12, 2)) is None  # before KIP-345
    assert faults.match(12, _header(12, 3), _request(broker, 12, 3)) is rule
    assert rule.hits == 1


def test_count_expires_the_rule(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    rule = faults.add({"action": "error", "api": "Heartbeat", "error": "REBALANCE_IN_PROGRESS", "count": 2})
    request = _request(broker, 12, 4)
    assert [faults.match(12, _header(12, 4), request) for _ in range(3)] == [rule, rule, None]
    assert rule.hits == 2 and faults.rules == []


def test_probability_with_a_seed_is_reproducible(broker: Broker) -> None:
    def run() -> list[bool]:
        faults = FaultRegistry(broker)
        faults.add({"action": "drop", "api": "Heartbeat", "probability": 0.5, "seed": 42})
        request = _request(broker, 12, 4)
        return [faults.match(12, _header(12, 4), request) is not None for _ in range(64)]

    first = run()
    assert first == run()
    assert 10 < sum(first) < 54


def test_the_first_matching_rule_applies_and_removal_releases_a_stall(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    stall = faults.add({"action": "stall", "api": "Heartbeat"})
    faults.add({"action": "drop"})
    assert faults.match(12, _header(12, 4), _request(broker, 12, 4)) is stall
    assert not stall.released.is_set()
    assert faults.remove(stall.id) and stall.released.is_set()
    assert not faults.remove(stall.id)
    assert faults.match(12, _header(12, 4), _request(broker, 12, 4)).action == "drop"


def test_clear_releases_stalls_their_count_removed(broker: Broker) -> None:
    faults = FaultRegistry(broker)
    stall = faults.add({"action": "stall", "count": 1})
    assert faults.match(12, _header(12, 4), _request(broker, 12, 4)) is stall and faults.rules == []
    assert faults.clear() == 0 and stall.released.is_set()
