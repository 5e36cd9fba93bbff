"""What AlterConfigs and IncrementalAlterConfigs share: altering the configs of TOPIC and BROKER resources.

Each resource is checked as Kafka checks it (apache/kafka core/src/main/scala/kafka/server/ConfigAdminManager.scala
`preprocess`, core/src/main/scala/kafka/server/ControllerConfigurationValidator.scala and
metadata/src/main/java/org/apache/kafka/controller/ConfigurationControlManager.java), then handed to the cluster
as a `ConfigChange` (the new configs from the current ones), which the cluster runs on what it holds (topics.json
or PostgreSQL, under its metadata lock), stores durably and applies before the answer:
- TOPIC: the name must not be empty (INVALID_REQUEST "Default topic resources are not allowed.") and must be a
  legal topic name (INVALID_TOPIC_EXCEPTION); the topic must exist (UNKNOWN_TOPIC_OR_PARTITION "The topic 'x'
  does not exist."); the new configs are checked as CreateTopics checks them (INVALID_CONFIG with Kafka's
  words). Each partition takes them at once (`PartitionLog.set_config`).
- BROKER: "" is the cluster-wide default, otherwise the name must be this node's id (INVALID_REQUEST "Node id
  must be an integer, but it is: x" / "Unexpected broker id, expected 0, but received 7"); the new configs are
  checked by `herd.config.check_dynamic` (only the settings herd changes at run time). The broker applies them
  when the cluster reports them (`Broker.reconfigure`), on every node in cluster mode.
A resource named twice in one request gets INVALID_REQUEST "Each resource must appear at most once." for each
copy; other resource types get INVALID_REQUEST "Unknown resource type N" (GROUP is the caller's).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.config_ops import ConfigChangeError
from herd.cluster.topics import UNKNOWN_TOPIC_OR_PARTITION, ConfigChange, TopicError, check_topic_name
from herd.config import check_dynamic
from herd.server.apis import _authorize as authz
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import ask_coordinator_node
from herd.server.broker import RequestContext
from herd.server.peers import PeerError

log = logging.getLogger(__name__)

# ConfigResource.Type values (apache/kafka clients/src/main/java/org/apache/kafka/common/config/ConfigResource.java)
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32

Outcome = tuple[int, str | None]  # error code and message of one resource
OK: Outcome = (ErrorCode.none, None)
DUPLICATE: Outcome = (ErrorCode.invalid_request, "Each resource must appear at most once.")


def duplicated(resources: Iterable[Any]) -> set[tuple[int, str]]:
    """The (type, name) of the resources a request names more than once."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {key for key, count in counts.items() if count > 1}


async def answer_each(
    ctx: RequestContext, request: Any, alter_one: Callable[[RequestContext, Any, bool], Awaitable[Outcome]]
) -> Any:
    """The AlterConfigs / IncrementalAlterConfigs response: each resource altered in turn by `alter_one(ctx,
    resource, validate_only)`, except that every copy of a resource named twice gets DUPLICATE, as in Kafka."""
    twice = duplicated(request.resources)
    outcomes = []
    for resource in request.resources:
        if (resource.resource_type, resource.resource_name) in twice:
            outcomes.append(DUPLICATE)
        elif (
            denied := config_denied(ctx, resource.resource_type, resource.resource_name, authz.ALTER_CONFIGS)
        ) is not None:
            outcomes.append(denied)
        else:
            outcome = await alter_one(ctx, resource, request.validate_only)
            if resource.resource_type == GROUP and outcome[0] == ErrorCode.not_coordinator:
                outcome = await _at_the_coordinator(ctx, request, resource) or outcome
            outcomes.append(outcome)
    b = ctx_builder(ctx)
    results = tuple(
        b(
            "AlterConfigsResourceResponse",
            error_code=code,
            error_message=message,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r, (code, message) in zip(request.resources, outcomes, strict=True)
    )
    return b.response(throttle_time=0, responses=results)


async def _at_the_coordinator(ctx: RequestContext, request: Any, resource: Any) -> Outcome | None:
    """A GROUP resource altered by the node that coordinates the group (cluster mode: Kafka takes group configs
    on any broker), or None when there is none to ask."""
    try:
        answer = await ask_coordinator_node(ctx, resource.resource_name, replace(request, resources=(resource,)))
    except PeerError as e:
        log.warning("group %r: its coordinator could not be asked to alter its configs: %s", resource.resource_name, e)
        return ErrorCode.coordinator_not_available, "The coordinator is not available."
    if answer is None:
        return None
    result = answer.responses[0]
    return ErrorCode(result.error_code), result.error_message


async def alter(
    ctx: RequestContext, resource_type: int, name: str, change: ConfigChange, validate_only: bool
) -> Outcome:
    """Check and make the change of one TOPIC or BROKER resource; its error code and message."""
    admin = ctx.broker.admin
    try:
        if resource_type == TOPIC:
            _check_topic_resource(name)
            await admin.alter_topic_configs(name, change, validate_only=validate_only)
        elif resource_type == BROKER:
            stored_as = _check_broker_resource(name, ctx.broker.node_id)
            checked = _checked_broker(change, per_broker=bool(stored_as))
            await admin.alter_broker_configs(stored_as, checked, validate_only=validate_only)
        else:
            return ErrorCode.invalid_request, f"Unknown resource type {resource_type}"
    except TopicError as e:
        if e.error_code == UNKNOWN_TOPIC_OR_PARTITION:
            return ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        return ErrorCode(e.error_code), str(e)
    except ConfigChangeError as e:
        return ErrorCode(e.error_code), str(e)
    return OK


def _check_topic_resource(name: str) -> None:
    if not name:
        raise ConfigChangeError(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    check_topic_name(name)


def config_denied(ctx: RequestContext, resource_type: int, name: str, operation: int) -> Outcome | None:
    """The refusal of a config resource the principal may not DESCRIBE_CONFIGS or ALTER_CONFIGS (`operation`),
    else None: a topic is checked as itself, a group as itself, a broker, broker logger or client metrics resource
    on the cluster (apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala handleAlterConfigsRequest,
    configsAuthorizationApiError; AuthHelper for DescribeConfigs). Other types are left to the handler."""
    if ctx.broker.authorizer is None:
        return None
    if resource_type == TOPIC:
        ok, error = authz.authorized(ctx, operation, authz.TOPIC, name), ErrorCode.topic_authorization_failed
    elif resource_type == GROUP:
        ok, error = authz.authorized(ctx, operation, authz.GROUP, name), ErrorCode.group_authorization_failed
    elif resource_type in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
        ok, error = authz.authorized_cluster(ctx, operation), ErrorCode.cluster_authorization_failed
    else:
        return None
    return None if ok else (error, None)


def broker_id(name: str) -> int | None:
    """The node id a BROKER resource names, parsed as Kafka's Integer.parseInt does (an optional sign and ASCII
    digits, so "00" is node 0), or None when it names none."""
    return int(name) if re.fullmatch(r"[+-]?[0-9]+", name) else None


def _check_broker_resource(name: str, node_id: int) -> str:
    """ConfigAdminManager.validateResourceNameIsCurrentNodeId, for a name that is not the cluster default; the
    name the configs are stored under ("" or this node's id as herd writes it, whichever way it was spelled)."""
    if not name:
        return name
    requested = broker_id(name)
    if requested is None:
        raise ConfigChangeError(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}")
    if requested != node_id:
        raise ConfigChangeError(
            ErrorCode.invalid_request, f"Unexpected broker id, expected {node_id}, but received {name}"
        )
    return str(requested)


def _checked_broker(change: ConfigChange, *, per_broker: bool) -> ConfigChange:
    def checked(current: dict[str, str]) -> dict[str, str]:
        configs = change(current)
        check_dynamic(configs, per_broker=per_broker)
        return configs

    return checked
