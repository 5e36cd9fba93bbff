"""IncrementalAlterConfigs (key 44), v0-v1.

v0: resources with per-config operations SET (0), DELETE (1), APPEND (2), SUBTRACT (3) (KIP-339). v1:
flexible. Kafka 4.x serves v0-v1.

TOPIC (2) and BROKER (4) resources are checked, stored and applied as `_configs` describes. The entries of one
resource are checked first, in Kafka's order and words (ConfigAdminManager.preprocess, apache/kafka
core/src/main/scala/kafka/server/ConfigAdminManager.scala): a name given twice is INVALID_REQUEST "Error due to
duplicate config keys", a null value for anything but DELETE INVALID_REQUEST "Null value not supported for :
name", an unknown operation INVALID_REQUEST "Unknown operations type N". The operations then run on the
configs the resource holds: APPEND and SUBTRACT only on LIST configs (cleanup.policy), starting from the
default when the config is not set; elsewhere INVALID_CONFIG ("Can't APPEND to key x because its type is not
LIST." for a topic, as Kafka's controller says it; "Config value append is not allowed for config key: x" for a
broker, as Kafka's broker does).

GROUP (32, KIP-848's group configs) resources go to the group's coordinator shard: Kafka's group configs
(consumer.session.timeout.ms and the others, with Kafka's validation: herd.coordinator.kafka_group_configs),
`herd.expected.instance.ids` (KIP-469 pre-registration: herd.coordinator.group_configs), and it refuses the
read-only `herd.rebalance.history` as Kafka refuses a read-only config (INVALID_REQUEST "Cannot update these
configs dynamically: Set(herd.rebalance.history)"). Each is answered once
its record is durable. In cluster mode a node that does not coordinate the group sends the resource on to the
node that does (`_configs.answer_each`, herd.server.peers) and answers with its answer: Kafka accepts group
configs on any broker.

A resource named twice in one request gets INVALID_REQUEST for each copy, as in Kafka; other resource types
(BROKER_LOGGER, CLIENT_METRICS) get INVALID_REQUEST. `validate_only` checks without changing anything.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), the
group (GROUP_AUTHORIZATION_FAILED) or, for a broker, the cluster (CLUSTER_AUTHORIZATION_FAILED):
`_configs.config_denied`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.config_ops import (
    ConfigChangeError,
    ConfigOp,
    apply_ops,
    broker_not_list,
    check_ops,
    topic_not_list,
)
from herd.cluster.topics import TOPIC_CONFIGS
from herd.config import SETTINGS_BY_NAME, unparse
from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import AlterGroupConfigs, GroupConfigOp
from herd.coordinator.responses import AlterGroupConfigsResponse
from herd.server.apis._configs import BROKER, GROUP, TOPIC, Outcome, alter, answer_each
from herd.server.apis._groups import call, client_host, client_id, resolved
from herd.server.broker import RequestContext

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await answer_each(ctx, request, _alter_one)


async def _alter_one(ctx: RequestContext, resource: Any, validate_only: bool) -> Outcome:
    ops = [ConfigOp(c.name, int(c.config_operation), c.value) for c in resource.configs]
    if resource.resource_type == GROUP:
        return await alter_group(ctx, resource.resource_name, ops, validate_only)
    try:
        check_ops(ops)
    except ConfigChangeError as e:
        return ErrorCode(e.error_code), str(e)
    rules = _RULES.get(resource.resource_type)
    if rules is None:
        return ErrorCode.invalid_request, f"Unknown resource type {resource.resource_type}"
    is_list, default, not_list = rules

    def change(current: dict[str, str]) -> dict[str, str]:
        return apply_ops(current, ops, is_list=is_list, default=default, on_not_list=not_list)

    return await alter(ctx, resource.resource_type, resource.resource_name, change, validate_only)


def _topic_list(name: str) -> bool:
    key = TOPIC_CONFIGS.get(name)
    return key is not None and key.kind == "list"


def _topic_default(name: str) -> str | None:
    """Kafka's default of a topic config (the default of the broker setting it follows)."""
    key = TOPIC_CONFIGS[name]
    return unparse(SETTINGS_BY_NAME[key.synonym].default) if key.synonym is not None else key.default


def _broker_list(name: str) -> bool:
    setting = SETTINGS_BY_NAME.get(name)
    if setting is None:
        raise ConfigChangeError(ErrorCode.invalid_config, f"Unknown config name: {name}")
    return setting.kind == "list"


def _broker_default(name: str) -> str | None:
    return unparse(SETTINGS_BY_NAME[name].default)


# per resource type: whether a config is a list, its Kafka default, and the refusal of APPEND/SUBTRACT on a non-list
_RULES = {
    TOPIC: (_topic_list, _topic_default, topic_not_list),
    BROKER: (_broker_list, _broker_default, broker_not_list),
}


async def alter_group(ctx: RequestContext, group_id: str, ops: Sequence[ConfigOp], validate_only: bool) -> Outcome:
    """One GROUP resource, altered by its coordinator shard (AlterConfigs' GROUP resources come here too)."""
    if not group_id:
        return ErrorCode.invalid_request, "Default group resources are not allowed."
    req = AlterGroupConfigs(
        group_id=group_id,
        ops=tuple(GroupConfigOp(o.name, o.op, o.value) for o in ops),
        validate_only=validate_only,
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )
    answer = await resolved(
        call(
            ctx,
            group_id,
            GroupCoordinatorShard.alter_group_configs,
            req,
            lambda code: AlterGroupConfigsResponse(error_code=code),
        )
    )
    return answer.error_code, answer.error_message
