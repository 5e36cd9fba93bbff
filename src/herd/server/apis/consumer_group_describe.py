"""ConsumerGroupDescribe (key 69), v0-v1: KIP-848 consumer groups as kafka-consumer-groups.sh --describe sees
them (herd.coordinator.consumer_heartbeat.describe): state, group and assignment epochs, the assignor, and each
member with its epoch, subscription, current and target assignments. v1 adds each member's type (0 classic,
1 consumer). Kafka 4.x serves v0-v1.

As Kafka's KafkaApis.handleConsumerGroupDescribe: every group UNSUPPORTED_VERSION when `consumer` is not in
group.coordinator.rebalance.protocols; with an authorizer, a group the principal may not DESCRIBE gets
GROUP_AUTHORIZATION_FAILED, and a group whose assignments name a topic the principal may not DESCRIBE gets
TOPIC_AUTHORIZATION_FAILED without its members. Each group is asked of its own coordinator shard, so a group
this node does not coordinate gets NOT_COORDINATOR.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.consumer_heartbeat import ConsumerGroupDescribe
from herd.coordinator.responses import (
    ConsumerGroupDescribeResponse,
    DescribedConsumerGroup,
    DescribedTopicPartitions,
)
from herd.server.apis._authorize import DESCRIBE, GROUP, TOPIC, authorized, authorized_operations
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import call, client_host, client_id, gather
from herd.server.apis.consumer_group_heartbeat import consumer_protocol_enabled
from herd.server.broker import RequestContext

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1

UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def handle(ctx: RequestContext, request: Any) -> Any:
    include_ops = request.include_authorized_operations
    if not consumer_protocol_enabled(ctx.broker.config.get("group.coordinator.rebalance.protocols")):
        refused = [
            DescribedConsumerGroup(group_id=g, error_code=ErrorCode.unsupported_version) for g in request.group_ids
        ]
        return _response(ctx, refused, include_ops)
    outcomes = [_describe_one(ctx, group_id) for group_id in request.group_ids]

    def respond(responses: list[ConsumerGroupDescribeResponse]) -> Any:
        return _response(ctx, [g for r in responses for g in r.groups], include_ops)

    return gather(outcomes, respond)


def _describe_one(ctx: RequestContext, group_id: str) -> Any:
    def on_error(code: int) -> ConsumerGroupDescribeResponse:
        return ConsumerGroupDescribeResponse(groups=(DescribedConsumerGroup(group_id=group_id, error_code=code),))

    if ctx.broker.authorizer is not None and not authorized(ctx, DESCRIBE, GROUP, group_id):
        return on_error(ErrorCode.group_authorization_failed)
    if ctx.broker.coordinator is None:
        return on_error(ErrorCode.coordinator_not_available)
    ctx.broker.coordinator.sync_topics()
    req = ConsumerGroupDescribe(
        group_ids=(group_id,), api_version=ctx.api_version, client_id=client_id(ctx), client_host=client_host(ctx)
    )
    return call(ctx, group_id, GroupCoordinatorShard.consumer_group_describe, req, on_error)


def _response(ctx: RequestContext, groups: list[DescribedConsumerGroup], include_ops: bool) -> Any:
    b = ctx_builder(ctx)

    def assignment(of: tuple[DescribedTopicPartitions, ...]) -> Any:
        return b(
            "Assignment",
            topic_partitions=tuple(
                b("TopicPartitions", topic_id=tp.topic_id, topic_name=tp.topic_name, partitions=tp.partitions)
                for tp in of
            ),
        )

    described = []
    for g in groups:
        error, message, members = g.error_code, g.error_message, g.members
        if error == ErrorCode.none and ctx.broker.authorizer is not None:
            topics = {tp.topic_name for m in members for tp in (*m.assignment, *m.target_assignment)}
            if any(not authorized(ctx, DESCRIBE, TOPIC, name) for name in topics):
                error, message, members = ErrorCode.topic_authorization_failed, UNAUTHORIZED_TOPICS, ()
        described.append(
            b(
                "DescribedGroup",
                error_code=error,
                error_message=message,
                group_id=g.group_id,
                group_state=g.group_state,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=g.assignor_name,
                members=tuple(
                    b(
                        "Member",
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_topic_names,
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=assignment(m.assignment),
                        target_assignment=assignment(m.target_assignment),
                        member_type=m.member_type,
                    )
                    for m in members
                ),
                authorized_operations=authorized_operations(ctx, include_ops and error == 0, GROUP, g.group_id),
            )
        )
    return b.response(throttle_time=0, groups=tuple(described))
