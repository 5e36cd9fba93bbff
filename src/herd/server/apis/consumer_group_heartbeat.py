"""ConsumerGroupHeartbeat (key 68), v0-v1: KIP-848's consumer protocol (herd.coordinator.consumer_heartbeat).

v1 (KIP-1082): SubscribedTopicRegex (RE2, matched whole; resolved to the topics the principal may DESCRIBE),
and the client generates its member id (an empty one is INVALID_REQUEST);
in v0 the coordinator makes one for a joining member that sent none. Kafka 4.x serves v0-v1, librdkafka sends v1.

As Kafka's KafkaApis.handleConsumerGroupHeartbeat: UNSUPPORTED_VERSION when `consumer` is not in
group.coordinator.rebalance.protocols; with authorizer.class.name set, READ on the group (else
GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic name (else TOPIC_AUTHORIZATION_FAILED, with
no error message, so that a client learns nothing of the topics it may not see). The coordinator's refusals
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) are answered as they are; the client finds the coordinator again
or retries.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from herd.config import split_list
from herd.coordinator import CoordinatorError, GroupCoordinatorShard
from herd.coordinator.consumer.assignment import Assignment, assignment
from herd.coordinator.consumer_heartbeat import ConsumerGroupHeartbeat
from herd.coordinator.responses import ConsumerGroupHeartbeatResponse
from herd.protocol.messages import EncodedBody, encode_body
from herd.server.apis._authorize import DESCRIBE, GROUP, READ, TOPIC, authorized
from herd.server.apis._build import builder, ctx_builder
from herd.server.apis._groups import client_host, client_id, route
from herd.server.broker import RequestContext

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if not consumer_protocol_enabled(broker.config.get("group.coordinator.rebalance.protocols")):
        return _respond(ctx, _error(ErrorCode.unsupported_version))
    group_id = request.group_id
    if broker.authorizer is not None:
        if not authorized(ctx, READ, GROUP, group_id):
            return _respond(ctx, _error(ErrorCode.group_authorization_failed))
        names = request.subscribed_topic_names or ()
        if any(not authorized(ctx, DESCRIBE, TOPIC, name) for name in set(names)):
            return _respond(ctx, _error(ErrorCode.topic_authorization_failed))
    coordinator = broker.coordinator
    if coordinator is None:  # not started yet
        return _respond(ctx, _error(ErrorCode.coordinator_not_available))
    regex = getattr(request, "subscribed_topic_regex", None)  # v1
    if (
        request.instance_id is None
        and request.rack_id is None
        and request.subscribed_topic_names is None
        and request.server_assignor is None
        and regex is None
        and request.rebalance_timeout == _NO_REBALANCE_TIMEOUT
    ):  # the fast path of a keep-alive: answered at once unless a write is pending on the group's partition
        coordinator.sync_topics()
        try:  # client_id(ctx) and client_host(ctx), written out
            kept = coordinator.consumer_group_keep_alive(
                group_id, request.member_id, request.member_epoch, ctx.header.client_id or "", "/" + ctx.client_host
            )
        except CoordinatorError as e:
            return _respond(ctx, _error(e.code))
        if kept is not None:
            return _keep_alive_response(ctx.api_version, *kept)
    owned = request.topic_partitions
    req = ConsumerGroupHeartbeat(
        group_id=group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=_ms(request.rebalance_timeout),
        subscribed_topic_names=(
            tuple(request.subscribed_topic_names) if request.subscribed_topic_names is not None else None
        ),
        subscribed_topic_regex=regex,
        server_assignor=request.server_assignor,
        owned=None if owned is None else assignment((tp.topic_id, tp.partitions) for tp in owned),
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
        describable=None if broker.authorizer is None else lambda name: authorized(ctx, DESCRIBE, TOPIC, name),
    )
    coordinator.sync_topics()
    respond = functools.partial(_respond, ctx)
    return route(ctx, group_id, GroupCoordinatorShard.consumer_group_heartbeat, req, respond, _error)


# A keep-alive's RebalanceTimeoutMs (-1: unchanged), as kio reads the field: compared as it is, not converted.
_NO_REBALANCE_TIMEOUT = timedelta(milliseconds=-1)


def _respond(ctx: RequestContext, response: ConsumerGroupHeartbeatResponse) -> Any:
    b = ctx_builder(ctx)
    assigned = None
    if response.assignment is not None:
        assigned = b("Assignment", topic_partitions=_topic_partitions(b, response.assignment))
    return b.response(
        throttle_time=0,
        error_code=response.error_code,
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval=response.heartbeat_interval_ms,
        assignment=assigned,
    )


def _error(code: int) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=code)


_KEEP_ALIVE: dict[tuple[int, str, int, int], EncodedBody] = {}
_KEEP_ALIVE_MAX = 100_000


def _keep_alive_response(version: int, member_id: str, member_epoch: int, interval_ms: int) -> Any:
    """A member's keep-alive answer, built and encoded with kio once per epoch and reused as its bytes (an
    EncodedBody: no response object to hash on the way out)."""
    key = (version, member_id, member_epoch, interval_ms)
    response = _KEEP_ALIVE.get(key)
    if response is None:
        if len(_KEEP_ALIVE) >= _KEEP_ALIVE_MAX:
            _KEEP_ALIVE.clear()
        b = builder(API_KEY, version)
        response = _KEEP_ALIVE[key] = EncodedBody(
            b.response_cls,
            encode_body(
                b.response(
                    throttle_time=0,
                    error_code=ErrorCode.none,
                    error_message=None,
                    member_id=member_id,
                    member_epoch=member_epoch,
                    heartbeat_interval=interval_ms,
                    assignment=None,
                )
            ),
        )
    return response


@functools.cache
def consumer_protocol_enabled(protocols: str) -> bool:
    """Whether group.coordinator.rebalance.protocols (its value) has `consumer`; parsed once per value."""
    return "consumer" in split_list(protocols)


def _ms(value: Any) -> int:
    """A duration field as kio reads it (a timedelta) in milliseconds."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _topic_partitions(b: Any, of: Assignment) -> tuple[Any, ...]:
    return tuple(
        b("TopicPartitions", topic_id=topic_id, partitions=tuple(sorted(parts)))
        for topic_id, parts in sorted(of.items())
    )
