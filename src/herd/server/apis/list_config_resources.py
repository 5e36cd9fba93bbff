"""ListConfigResources (key 74), v0-v1 (v0 was ListClientMetricsResources, KIP-714; v1 is KIP-1142, Kafka 4.1).

v0 lists client metrics resources only; herd has none (it keeps no client-metrics subscriptions: KIP-714's
telemetry is not served), so the list is empty. v1 adds `resource_types`, the types to list (empty: every type v1
supports), and the type of each resource listed. As Kafka's KafkaApis.handleListConfigResources and
ListConfigResourcesRequest.supportedResourceTypes (apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala,
clients/src/main/java/org/apache/kafka/common/requests/): v1 supports TOPIC (2), BROKER (4), BROKER_LOGGER (8),
CLIENT_METRICS (16) and GROUP (32), and a request naming any other type is refused whole with
UNSUPPORTED_VERSION and no resources. The resources come type by type in Kafka's order (GROUP, CLIENT_METRICS,
BROKER_LOGGER, BROKER, TOPIC), names sorted within a type:

- GROUP: the groups that have a group config set, as Kafka lists the groups its GroupConfigManager has configs
  for. herd's one group config is `herd.expected.instance.ids` (KIP-469 pre-registration), so these are the
  groups with a registration, whether or not the group exists yet. They are asked of every coordinator shard
  this node hosts, as ListGroups asks them (COORDINATOR_LOAD_IN_PROGRESS, retriable, while one is loading); in
  cluster mode a node knows the groups it coordinates only (docs/compatibility.md).
- CLIENT_METRICS: none (above).
- BROKER_LOGGER: none. Kafka lists every broker (a broker's loggers are a resource named by its id); herd has
  no loggers that DescribeConfigs or AlterConfigs can reach, so it lists no resource it could not describe.
- BROKER: every live node, by id.
- TOPIC: every topic, internal ones included.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import CoordinatorError, GroupCoordinatorShard
from herd.coordinator.requests import ListConfiguredGroups
from herd.coordinator.responses import ListConfiguredGroupsResponse
from herd.server.apis._authorize import DESCRIBE_CONFIGS, authorized_cluster
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._configs import BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP, TOPIC
from herd.server.apis._groups import client_host, client_id, gather
from herd.server.broker import RequestContext

API_KEY = 74
MIN_VERSION = 0
MAX_VERSION = 1

SUPPORTED = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)  # v1's types, in the order they are listed


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    if not authorized_cluster(ctx, DESCRIBE_CONFIGS):  # KafkaApis.handleListConfigResources
        return _response(b, ErrorCode.cluster_authorization_failed, [])
    if ctx.api_version == 0:
        return _response(b, ErrorCode.none, [])
    wanted = set(request.resource_types) or set(SUPPORTED)
    if not wanted <= set(SUPPORTED):
        return _response(b, ErrorCode.unsupported_version, [])
    if GROUP not in wanted:
        return _response(b, ErrorCode.none, _listed(ctx, wanted, []))
    req = ListConfiguredGroups(api_version=ctx.api_version, client_id=client_id(ctx), client_host=client_host(ctx))
    try:
        outcomes = ctx.broker.coordinator.call_all(GroupCoordinatorShard.list_configured_groups, req)
    except CoordinatorError as e:
        return _response(b, ErrorCode(e.code), [])

    def respond(answers: list[ListConfiguredGroupsResponse]) -> Any:
        error = next((a.error_code for a in answers if a.error_code), 0)
        if error:
            return _response(b, ErrorCode(error), [])
        return _response(b, ErrorCode.none, _listed(ctx, wanted, [g for a in answers for g in a.group_ids]))

    return gather(outcomes, respond)


def _listed(ctx: RequestContext, wanted: set[int], groups: list[str]) -> list[tuple[int, str]]:
    """(type, name) of every resource of the `wanted` types, in Kafka's order."""
    names = {
        GROUP: sorted(groups),
        CLIENT_METRICS: [],
        BROKER_LOGGER: [],
        BROKER: [str(n.node_id) for n in ctx.broker.nodes()],
        TOPIC: sorted(t.name for t in ctx.broker.cluster.topics()),
    }
    return [(kind, name) for kind in SUPPORTED if kind in wanted for name in names[kind]]


def _response(b: Builder, error: ErrorCode, resources: list[tuple[int, str]]) -> Any:
    return b.response(
        throttle_time=0,
        error_code=error,
        config_resources=tuple(b("ConfigResource", resource_name=name, resource_type=kind) for kind, name in resources),
    )
