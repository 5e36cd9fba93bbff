"""Injected error answers: which errors Kafka can answer each API with, and the answer itself.

`ERRORS[api_key]` maps each error code an API can carry to the first version whose clients can get it (a
FENCED_INSTANCE_ID needs a version with group instance ids, MEMBER_ID_REQUIRED needs JoinGroup v4). The lists
come from Kafka's own request classes ("Possible error codes" in apache/kafka
clients/src/main/java/org/apache/kafka/common/requests/<Api>Response.java: HeartbeatResponse, SyncGroupResponse,
JoinGroupResponse, LeaveGroupResponse, OffsetCommitResponse, OffsetFetchResponse, FindCoordinatorResponse,
ProduceResponse, FetchResponse, ListOffsetsResponse, OffsetDeleteResponse, DeleteGroupsResponse,
DescribeGroupsResponse, ListGroupsResponse, InitProducerIdResponse) and, for errors added by later KIPs, the
message schemas' version notes (clients/src/main/resources/common/message/<Api>Response.json: KIP-345 static
members, KIP-394 MEMBER_ID_REQUIRED, KIP-389 GROUP_MAX_SIZE_REACHED, KIP-559, KIP-1043 GROUP_ID_NOT_FOUND).

`error_response(broker, api_key, version, request, code, rule_topic)` builds a well-formed response of the
request's version with the error where Kafka puts it: the top-level error code of the group APIs; every
partition of Produce, Fetch, ListOffsets and OffsetCommit; OffsetFetch per partition on v1, top-level on v2-v7,
per group on v8+ (partition-level errors stay per partition); Metadata on the topics (those named by the rule's
topic filter, or every topic asked for); FindCoordinator top-level before v4 and per key after; LeaveGroup v3+
and DeleteGroups per member or group for the errors Kafka puts there. A batched request (several groups or keys
in one OffsetFetch, FindCoordinator, DescribeGroups or DeleteGroups) gets the error for each of them.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode as E

from herd.server.apis import metadata
from herd.server.apis._build import Builder, builder
from herd.server.broker import Broker

_COORDINATOR = {
    E.coordinator_not_available: 0,
    E.not_coordinator: 0,
    E.coordinator_load_in_progress: 0,
    E.group_authorization_failed: 0,
}

ERRORS: dict[int, dict[int, int]] = {
    0: {
        E.corrupt_message: 0,
        E.unknown_topic_or_partition: 0,
        E.not_leader_or_follower: 0,
        E.message_too_large: 0,
        E.invalid_topic_exception: 0,
        E.record_list_too_large: 0,
        E.not_enough_replicas: 0,
        E.not_enough_replicas_after_append: 0,
        E.invalid_required_acks: 0,
        E.topic_authorization_failed: 0,
        E.invalid_producer_epoch: 0,
        E.kafka_storage_error: 0,
        E.request_timed_out: 0,
        E.out_of_order_sequence_number: 0,
        E.duplicate_sequence_number: 0,
        E.unknown_producer_id: 0,
        E.invalid_record: 8,
        E.unknown_server_error: 0,
    },
    1: {
        E.offset_out_of_range: 0,
        E.unknown_topic_or_partition: 0,
        E.not_leader_or_follower: 0,
        E.replica_not_available: 0,
        E.fenced_leader_epoch: 9,
        E.unknown_leader_epoch: 9,
        E.kafka_storage_error: 0,
        E.topic_authorization_failed: 0,
        E.corrupt_message: 0,
        E.unknown_topic_id: 13,
        E.unknown_server_error: 0,
    },
    2: {
        E.unknown_topic_or_partition: 0,
        E.not_leader_or_follower: 0,
        E.replica_not_available: 0,
        E.fenced_leader_epoch: 4,
        E.unknown_leader_epoch: 4,
        E.kafka_storage_error: 0,
        E.leader_not_available: 0,
        E.offset_not_available: 5,
        E.topic_authorization_failed: 0,
        E.unknown_server_error: 0,
    },
    3: {
        E.unknown_topic_or_partition: 0,
        E.leader_not_available: 0,
        E.invalid_topic_exception: 0,
        E.topic_authorization_failed: 0,
        E.kafka_storage_error: 0,
        E.unknown_topic_id: 10,
    },
    8: {
        **_COORDINATOR,
        E.unknown_topic_or_partition: 0,
        E.offset_metadata_too_large: 0,
        E.illegal_generation: 0,
        E.unknown_member_id: 0,
        E.rebalance_in_progress: 0,
        E.invalid_commit_offset_size: 0,
        E.topic_authorization_failed: 0,
        E.fenced_instance_id: 7,
        E.group_id_not_found: 9,
        E.invalid_group_id: 0,
    },
    9: {
        **_COORDINATOR,
        E.unknown_topic_or_partition: 0,
        E.topic_authorization_failed: 0,
        E.unstable_offset_commit: 7,
        E.group_id_not_found: 0,
    },
    10: {
        E.coordinator_not_available: 0,
        E.coordinator_load_in_progress: 0,
        E.not_coordinator: 0,
        E.group_authorization_failed: 0,
        E.invalid_request: 0,
        E.transactional_id_authorization_failed: 0,
    },
    11: {
        **_COORDINATOR,
        E.inconsistent_group_protocol: 0,
        E.unknown_member_id: 0,
        E.invalid_session_timeout: 0,
        E.invalid_group_id: 0,
        E.member_id_required: 4,
        E.group_max_size_reached: 0,
        E.fenced_instance_id: 5,
    },
    12: {
        E.coordinator_not_available: 0,
        E.not_coordinator: 0,
        E.illegal_generation: 0,
        E.unknown_member_id: 0,
        E.rebalance_in_progress: 0,
        E.group_authorization_failed: 0,
        E.invalid_group_id: 0,
        E.fenced_instance_id: 3,
    },
    13: {**_COORDINATOR, E.unknown_member_id: 0, E.invalid_group_id: 0, E.fenced_instance_id: 3},
    14: {
        **_COORDINATOR,
        E.illegal_generation: 0,
        E.unknown_member_id: 0,
        E.rebalance_in_progress: 0,
        E.invalid_group_id: 0,
        E.fenced_instance_id: 3,
        E.inconsistent_group_protocol: 5,
    },
    15: {**_COORDINATOR, E.group_id_not_found: 6},
    16: {E.coordinator_not_available: 0, E.coordinator_load_in_progress: 0},
    22: {
        E.not_coordinator: 0,
        E.coordinator_not_available: 0,
        E.coordinator_load_in_progress: 0,
        E.transactional_id_authorization_failed: 0,
        E.cluster_authorization_failed: 0,
        E.concurrent_transactions: 0,
        E.invalid_transaction_timeout: 0,
        E.invalid_producer_epoch: 3,
        E.producer_fenced: 4,
    },
    42: {**_COORDINATOR, E.invalid_group_id: 0, E.group_id_not_found: 0, E.non_empty_group: 0},
    47: {
        **_COORDINATOR,
        E.invalid_group_id: 0,
        E.group_id_not_found: 0,
        E.non_empty_group: 0,
        E.group_subscribed_to_topic: 0,
        E.unknown_topic_or_partition: 0,
        E.topic_authorization_failed: 0,
    },
}

# Errors Kafka reports per partition even in responses that have a top-level or per-group error field
_PARTITION_ERRORS = frozenset(
    {E.unknown_topic_or_partition, E.topic_authorization_failed, E.unstable_offset_commit, E.group_subscribed_to_topic}
)
_MEMBER_ERRORS = frozenset({E.unknown_member_id, E.fenced_instance_id})  # LeaveGroup v3+: per member


def error_name(code: int) -> str:
    return E(code).name.upper()


def error_response(
    broker: Broker,
    api_key: int,
    version: int,
    request: Any,
    code: int,
    *,
    client_id: str = "",
    rule_topic: str | None = None,
) -> Any:
    """The answer of `request` (of `api_key` at `version`) failing with `code`; None for a Produce with acks=0,
    which Kafka never answers. `client_id` names a JoinGroup's new member id (MEMBER_ID_REQUIRED); Metadata
    answers the error for `rule_topic` only when it is set."""
    b = builder(api_key, version)
    if api_key == 3:
        return _metadata(b, broker, version, request, E(code), rule_topic)
    if api_key == 11:
        return _join_group(b, version, request, E(code), client_id)
    return _BUILDERS[api_key](b, version, request, E(code))


def _produce(b: Builder, v: int, request: Any, code: E) -> Any:
    if request.acks == 0:
        return None
    return b.response(
        throttle_time=0,
        responses=tuple(
            b(
                "TopicProduceResponse",
                name=getattr(t, "name", None),
                topic_id=getattr(t, "topic_id", None),
                partition_responses=tuple(
                    b(
                        "PartitionProduceResponse",
                        index=p.index,
                        error_code=code,
                        base_offset=-1,
                        log_append_time=-1,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=None,
                    )
                    for p in t.partition_data
                ),
            )
            for t in request.topic_data
        ),
        node_endpoints=(),
    )


def _fetch(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(
        throttle_time=0,
        error_code=E.none,
        session_id=0,
        node_endpoints=(),
        responses=tuple(
            b(
                "FetchableTopicResponse",
                topic=getattr(t, "topic", None),
                topic_id=getattr(t, "topic_id", None),
                partitions=tuple(
                    b(
                        "PartitionData",
                        partition_index=p.partition,
                        error_code=code,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=None,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


def _list_offsets(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(
        throttle_time=0,
        topics=tuple(
            b(
                "ListOffsetsTopicResponse",
                name=t.name,
                partitions=tuple(
                    b(
                        "ListOffsetsPartitionResponse",
                        partition_index=p.partition_index,
                        error_code=code,
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


def _metadata(b: Builder, broker: Broker, v: int, request: Any, code: E, rule_topic: str | None) -> Any:
    if request.topics is None or (v == 0 and not request.topics):
        asked: list[tuple[str | None, Any]] = [(t.name, t.topic_id) for t in broker.cluster.topics()]
    else:
        asked = [(getattr(t, "name", None), getattr(t, "topic_id", None)) for t in request.topics]
    topics = []
    for name, topic_id in asked:
        known = broker.cluster.get(name) if name else broker.cluster.by_id(topic_id)
        if known is not None and rule_topic is not None and known.name != rule_topic:
            topics.append(metadata._describe(b, _Ctx(broker), known))
        else:
            topics.append(metadata._error(b, code, name, topic_id or getattr(known, "topic_id", None)))
    nodes = tuple(
        b("MetadataResponseBroker", node_id=n.node_id, host=n.host, port=n.port, rack=n.rack) for n in broker.nodes()
    )
    return b.response(
        throttle_time=0,
        brokers=nodes,
        cluster_id=broker.cluster.cluster_id,
        controller_id=broker.node_id,
        topics=tuple(topics),
        error_code=E.none,
    )


class _Ctx:
    """What metadata's topic description reads of a request context: the broker."""

    __slots__ = ("broker",)

    def __init__(self, broker: Broker) -> None:
        self.broker = broker


def _offset_commit(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(
        throttle_time=0,
        topics=tuple(
            b(
                "OffsetCommitResponseTopic",
                name=getattr(t, "name", None),
                topic_id=getattr(t, "topic_id", None),
                partitions=tuple(
                    b("OffsetCommitResponsePartition", partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


def _fetched_topics(b: Builder, v: int, topics: Any, code: E) -> tuple[Any, ...]:
    suffix = "s" if v >= 8 else ""
    return tuple(
        b(
            "OffsetFetchResponseTopic" + suffix,
            name=getattr(t, "name", None),
            **({"topic_id": getattr(t, "topic_id", None)} if v >= 8 else {}),  # v0-v7's class has no id field
            partitions=tuple(
                b(
                    "OffsetFetchResponsePartition" + suffix,
                    partition_index=p,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    metadata="",
                    error_code=code,
                )
                for p in t.partition_indexes
            ),
        )
        for t in topics or ()
    )


def _offset_fetch(b: Builder, v: int, request: Any, code: E) -> Any:
    per_partition = v == 1 or code in _PARTITION_ERRORS
    if v >= 8:
        return b.response(
            throttle_time=0,
            groups=tuple(
                b(
                    "OffsetFetchResponseGroup",
                    group_id=g.group_id,
                    error_code=E.none if per_partition else code,
                    topics=_fetched_topics(b, v, g.topics, code) if per_partition else (),
                )
                for g in request.groups
            ),
        )
    topics = _fetched_topics(b, v, request.topics, code) if per_partition else ()
    return b.response(throttle_time=0, topics=topics, error_code=E.none if per_partition else code)


def _find_coordinator(b: Builder, v: int, request: Any, code: E) -> Any:
    message = code.name.upper()
    if v >= 4:
        return b.response(
            throttle_time=0,
            coordinators=tuple(
                b("Coordinator", key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
                for key in request.coordinator_keys
            ),
        )
    return b.response(throttle_time=0, error_code=code, error_message=message, node_id=-1, host="", port=-1)


def _join_group(b: Builder, v: int, request: Any, code: E, client_id: str) -> Any:
    member_id = request.member_id
    if code == E.member_id_required:  # Kafka hands out the member id to join with: clientId-uuid
        member_id = f"{client_id}-{uuid.uuid4()}"
    return b.response(
        throttle_time=0,
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if v >= 7 else "",
        leader="",
        skip_assignment=False,
        member_id=member_id,
        members=(),
    )


def _heartbeat(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(throttle_time=0, error_code=code)


def _leave_group(b: Builder, v: int, request: Any, code: E) -> Any:
    if v < 3:
        return b.response(throttle_time=0, error_code=code)
    if code in _MEMBER_ERRORS:
        return b.response(
            throttle_time=0,
            error_code=E.none,
            members=tuple(
                b("MemberResponse", member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=code)
                for m in request.members
            ),
        )
    return b.response(throttle_time=0, error_code=code, members=())


def _sync_group(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(throttle_time=0, error_code=code, protocol_type=None, protocol_name=None, assignment=b"")


def _describe_groups(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(
        throttle_time=0,
        groups=tuple(
            b(
                "DescribedGroup",
                error_code=code,
                error_message=code.name.upper() if v >= 6 else None,
                group_id=g,
                group_state="Dead" if code == E.group_id_not_found else "",
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=-2147483648,
            )
            for g in request.groups
        ),
    )


def _list_groups(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(throttle_time=0, error_code=code, groups=())


def _init_producer_id(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(throttle_time=0, error_code=code, producer_id=-1, producer_epoch=-1)


def _delete_groups(b: Builder, v: int, request: Any, code: E) -> Any:
    return b.response(
        throttle_time=0,
        results=tuple(b("DeletableGroupResult", group_id=g, error_code=code) for g in request.groups_names),
    )


def _offset_delete(b: Builder, v: int, request: Any, code: E) -> Any:
    if code not in _PARTITION_ERRORS:
        return b.response(throttle_time=0, error_code=code, topics=())
    return b.response(
        throttle_time=0,
        error_code=E.none,
        topics=tuple(
            b(
                "OffsetDeleteResponseTopic",
                name=t.name,
                partitions=tuple(
                    b("OffsetDeleteResponsePartition", partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


_BUILDERS = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    12: _heartbeat,
    13: _leave_group,
    14: _sync_group,
    15: _describe_groups,
    16: _list_groups,
    22: _init_producer_id,
    42: _delete_groups,
    47: _offset_delete,
}
