"""ShareGroupDescribe (key 77), v1: KIP-932 share groups as kafka-share-groups.sh --describe sees them
(herd.coordinator.share_groups.describe): state, group and assignment epochs, the assignor (simple), and each
member with its epoch, client, subscription and assignment. Kafka 4.2 serves v1 only.

As Kafka's KafkaApis.handleShareGroupDescribe and GroupCoordinatorService.shareGroupDescribe: every group
UNSUPPORTED_VERSION when share groups are off (group.share.enable); an empty group id INVALID_GROUP_ID; with an
authorizer, a group the principal may not DESCRIBE gets GROUP_AUTHORIZATION_FAILED, and a group whose
assignments name a topic the principal may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED without its members. Each
group is asked of its own coordinator shard, so a group this node does not coordinate gets NOT_COORDINATOR.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.responses import DescribedShareGroup, DescribedShareTopic, ShareGroupDescribeResponse
from herd.coordinator.share_groups import ShareGroupDescribe
from herd.server.apis._authorize import DESCRIBE, GROUP, TOPIC, authorized, authorized_operations
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import call, gather
from herd.server.apis.consumer_group_describe import UNAUTHORIZED_TOPICS
from herd.server.broker import RequestContext

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    include_ops = request.include_authorized_operations
    if not ctx.broker.config.get("group.share.enable"):
        refused = [DescribedShareGroup(group_id=g, error_code=ErrorCode.unsupported_version) for g in request.group_ids]
        return _response(ctx, refused, include_ops)
    outcomes = [_describe_one(ctx, group_id) for group_id in request.group_ids]

    def respond(responses: list[ShareGroupDescribeResponse]) -> Any:
        return _response(ctx, [g for r in responses for g in r.groups], include_ops)

    return gather(outcomes, respond)


def _describe_one(ctx: RequestContext, group_id: str) -> Any:
    def on_error(code: int) -> ShareGroupDescribeResponse:
        return ShareGroupDescribeResponse((DescribedShareGroup(group_id=group_id, error_code=code),))

    if not group_id:
        return on_error(ErrorCode.invalid_group_id)
    if ctx.broker.authorizer is not None and not authorized(ctx, DESCRIBE, GROUP, group_id):
        return on_error(ErrorCode.group_authorization_failed)
    if ctx.broker.coordinator is None:
        return on_error(ErrorCode.coordinator_not_available)
    ctx.broker.coordinator.sync_topics()
    req = ShareGroupDescribe(group_ids=(group_id,))
    return call(ctx, group_id, GroupCoordinatorShard.share_group_describe, req, on_error)


def _response(ctx: RequestContext, groups: list[DescribedShareGroup], include_ops: bool) -> Any:
    b = ctx_builder(ctx)

    def assignment(of: tuple[DescribedShareTopic, ...]) -> Any:
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
            topics = {tp.topic_name for m in members for tp in m.assignment}
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
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_topic_names,
                        assignment=assignment(m.assignment),
                    )
                    for m in members
                ),
                authorized_operations=authorized_operations(ctx, include_ops and error == 0, GROUP, g.group_id),
            )
        )
    return b.response(throttle_time=0, groups=tuple(described))
