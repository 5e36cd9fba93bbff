"""DescribeCluster (key 60), v0-v2 (KIP-700: the admin client's describeCluster without a Metadata request).

v1: endpoint type (KIP-919: 1 brokers, 2 controllers). v2: include fenced brokers, and each broker's is_fenced
(KIP-1073). Kafka 4.x serves v0-v2.

Answered as a Kafka broker's listener answers (apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala
handleDescribeCluster, AuthHelper.computeDescribeClusterResponse): brokers are the live nodes; an endpoint type
other than brokers is refused with MISMATCHED_ENDPOINT_TYPE (the controllers are described by a controller's
listener, and herd has no KRaft controllers: its nodes share PostgreSQL) and an unknown one with
UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0, which cannot ask), in a response with Kafka's defaults (no cluster
id, controller -1, no brokers, endpoint type 1). No node is ever fenced: a node whose lease ran out is gone, not
fenced, so v2's include_fenced_brokers changes nothing. The controller id is the answering node, which serves
admin requests itself (as in Metadata; a KRaft broker names a random live broker). Cluster authorized operations,
when asked for, are those the ACLs allow (every one without an authorizer; 0 without DESCRIBE on the cluster, as
AuthHelper.computeDescribeClusterResponse answers); otherwise -2147483648 ("not requested"). Kafka requires no
operation to describe the cluster, nor does herd.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._authorize import NOT_REQUESTED, cluster_operations
from herd.server.apis._build import Builder, ctx_builder
from herd.server.broker import RequestContext

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

BROKERS, CONTROLLERS = 1, 2
ENDPOINT_NAMES = {BROKERS: "BROKER", CONTROLLERS: "CONTROLLER"}  # Kafka's EndpointType


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    broker = ctx.broker
    endpoint_type = getattr(request, "endpoint_type", BROKERS)
    if endpoint_type not in ENDPOINT_NAMES:
        return _refused(b, ctx, ErrorCode.unsupported_endpoint_type, f"Unsupported endpoint type {endpoint_type}")
    if endpoint_type != BROKERS:
        return _refused(
            b,
            ctx,
            ErrorCode.mismatched_endpoint_type,
            f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
            f"{ENDPOINT_NAMES[endpoint_type]}",
        )
    nodes = tuple(
        b("DescribeClusterBroker", broker_id=n.node_id, host=n.host, port=n.port, rack=n.rack, is_fenced=False)
        for n in broker.nodes(ctx.session.listener)
    )
    authorized = cluster_operations(ctx, request.include_cluster_authorized_operations)
    return b.response(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=broker.cluster.cluster_id,
        controller_id=broker.node_id,
        brokers=nodes,
        cluster_authorized_operations=authorized,
    )


def _refused(b: Builder, ctx: RequestContext, error: ErrorCode, message: str) -> Any:
    """Kafka's refusal: the error (INVALID_REQUEST at v0) in an otherwise default response."""
    return b.response(
        throttle_time=0,
        error_code=error if ctx.api_version > 0 else ErrorCode.invalid_request,
        error_message=message,
        endpoint_type=BROKERS,
        cluster_id="",
        controller_id=-1,
        brokers=(),
        cluster_authorized_operations=NOT_REQUESTED,
    )
