"""DescribeCluster (key 60), v0-v2 (KIP-700: the admin client's describeCluster without a Metadata request).

v1: endpoint type (1 brokers, 2 controllers; herd's nodes are both, so either is answered with the live nodes).
v2: include fenced brokers (herd lists only live nodes: a node whose lease ran out is not fenced but gone).
The controller id is the answering node, which serves admin requests itself (as in Metadata). Cluster
authorized operations: -2147483648 ("not requested"), as herd has no ACLs.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

BROKERS, CONTROLLERS = 1, 2
NOT_REQUESTED = -(2**31)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    broker = ctx.broker
    endpoint_type = getattr(request, "endpoint_type", BROKERS)
    if endpoint_type not in (BROKERS, CONTROLLERS):
        return b.response(throttle_time=0, error_code=ErrorCode.unsupported_endpoint_type,
                          error_message=f"Unsupported endpoint type {endpoint_type}", endpoint_type=endpoint_type,
                          cluster_id=broker.cluster.cluster_id, controller_id=-1, brokers=(),
                          cluster_authorized_operations=NOT_REQUESTED)
    nodes = tuple(b("DescribeClusterBroker", broker_id=n.node_id, host=n.host, port=n.port, rack=n.rack,
                    is_fenced=False) for n in broker.nodes())
    return b.response(throttle_time=0, error_code=ErrorCode.none, error_message=None, endpoint_type=endpoint_type,
                      cluster_id=broker.cluster.cluster_id, controller_id=broker.node_id, brokers=nodes,
                      cluster_authorized_operations=NOT_REQUESTED)
