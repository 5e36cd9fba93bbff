"""ShareGroupHeartbeat (key 76), v1: KIP-932's share groups (herd.coordinator.share_groups). Kafka 4.2 serves v1
only (v0 was the early-access version, removed); librdkafka's ShareConsumer sends v1. The member generates its id;
the answer carries the assignment only when the member joined, sent its subscription, or its assignment changed.

As Kafka's KafkaApis.handleShareGroupHeartbeat: UNSUPPORTED_VERSION when share groups are off (group.share.enable
in herd; Kafka also reads its share.version feature); with authorizer.class.name set, READ on the group (else
GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic (else TOPIC_AUTHORIZATION_FAILED, the whole
request refused). The coordinator's refusals (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) are answered as they
are.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.consumer.assignment import Assignment
from herd.coordinator.share.heartbeat import ShareGroupHeartbeat, ShareHeartbeatResponse
from herd.server.apis._authorize import DESCRIBE, GROUP, READ, TOPIC, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import client_host, client_id, route
from herd.server.broker import RequestContext

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if not broker.config.get("group.share.enable"):
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
    names = request.subscribed_topic_names
    req = ShareGroupHeartbeat(
        group_id=group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=tuple(names) if names is not None else None,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )
    coordinator.sync_topics()
    respond = functools.partial(_respond, ctx)
    return route(ctx, group_id, GroupCoordinatorShard.share_group_heartbeat, req, respond, _error)


def _respond(ctx: RequestContext, response: ShareHeartbeatResponse) -> Any:
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


def _error(code: int) -> ShareHeartbeatResponse:
    return ShareHeartbeatResponse(error_code=code)


def _topic_partitions(b: Any, of: Assignment) -> tuple[Any, ...]:
    return tuple(
        b("TopicPartitions", topic_id=topic_id, partitions=tuple(sorted(parts)))
        for topic_id, parts in sorted(of.items())
    )
