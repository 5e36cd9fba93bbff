"""AlterConfigs (key 33), v0-v2.

v0: each resource's configs replaced as a whole: every config the request does not name is deleted (Kafka's
legacy, non-incremental alter, deprecated by KIP-339 for that reason). v1: no change. v2: flexible. Kafka 4.x
serves v0-v2.

TOPIC (2) and BROKER (4) resources, checked, stored and applied as `_configs` describes; a null value gets
INVALID_REQUEST "Null value not supported for : name" and a name given twice "Error due to duplicate config keys"
(ConfigAdminManager.preprocess, apache/kafka core/src/main/scala/kafka/server/ConfigAdminManager.scala). GROUP
(32) resources go to the group's coordinator shard as IncrementalAlterConfigs does: the group configs given are
set, the others (Kafka's and `herd.expected.instance.ids`) deleted. BROKER_LOGGER and other types get
INVALID_REQUEST "Unknown resource type N", as in Kafka. `validate_only` checks without changing anything.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), the group
(GROUP_AUTHORIZATION_FAILED) or, for a broker, the cluster (CLUSTER_AUTHORIZATION_FAILED):
`_configs.config_denied`.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.config_ops import ConfigChangeError, ConfigOp, OpType, check_entries
from herd.coordinator.kafka_group_configs import BY_NAME as GROUP_CONFIGS
from herd.coordinator.preregistration import CONFIG_NAME as EXPECTED_INSTANCE_IDS
from herd.server.apis._configs import GROUP, Outcome, alter, answer_each
from herd.server.apis.incremental_alter_configs import alter_group
from herd.server.broker import RequestContext

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await answer_each(ctx, request, _alter_one)


async def _alter_one(ctx: RequestContext, resource: Any, validate_only: bool) -> Outcome:
    try:
        check_entries((c.name for c in resource.configs), (c.name for c in resource.configs if c.value is None))
    except ConfigChangeError as e:
        return ErrorCode(e.error_code), str(e)
    given = {c.name: c.value for c in resource.configs}
    if resource.resource_type == GROUP:
        # the resource's whole set is replaced: what is not given goes back to its default
        ops = [ConfigOp(name, OpType.SET, value) for name, value in given.items()]
        ops += [ConfigOp(n, OpType.DELETE, None) for n in (EXPECTED_INSTANCE_IDS, *GROUP_CONFIGS) if n not in given]
        return await alter_group(ctx, resource.resource_name, ops, validate_only)
    return await alter(ctx, resource.resource_type, resource.resource_name, lambda _current: dict(given), validate_only)
