"""DescribeConfigs (key 32), v1-v4.

v1: config source and synonyms (Kafka 4.x's lowest, KIP-896). v3: config type and documentation. v4: flexible.

Resources: TOPIC (2) lists the topic configs herd honours, each with its value in force and where it comes from
(TOPIC_CONFIG when set on the topic, otherwise the broker setting it defaults to, or Kafka's default). BROKER (4)
lists every broker setting herd understands (`herd.config.SETTINGS`), named as Kafka names them. GROUP (32, Kafka
4.x's group configs) lists herd's one group config, `herd.expected.instance.ids` (KIP-469 pre-registration: the ids
the group still waits for), with source GROUP_CONFIG when the group has a registration, DEFAULT_CONFIG (value "")
otherwise; it is asked of the group's coordinator shard (NOT_COORDINATOR elsewhere) and answers for groups that do
not exist too, as Kafka does. Other resource types get INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any, Iterator

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.cluster.topics import TOPIC_CONFIGS
from herd.config import SETTINGS
from herd.coordinator.requests import DescribeGroupConfigs
from herd.coordinator.responses import DescribeGroupConfigsResponse
from herd.log.api import LONG_MAX
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._groups import call, client_host, client_id, gather
from herd.server.broker import Broker, RequestContext

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC, BROKER, GROUP = 2, 4, 32
# ConfigSource values
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 1, 4, 5, 8
# ConfigType values
_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "list": 7}

# The broker setting each topic config defaults to (Kafka's synonyms), or a fixed Kafka default.
_TOPIC_DEFAULTS: dict[str, str | tuple[str]] = {
    "cleanup.policy": ("delete",),
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "max.message.bytes": "message.max.bytes",
    "compression.type": ("producer",),
    "min.insync.replicas": ("1",),
    "delete.retention.ms": ("86400000",),
}


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_config_entries(broker: Broker, configs: dict[str, str]) -> Iterator[tuple[str, str | None, int, str]]:
    """(name, value, source, kind) for every topic config, as in force for a topic with `configs` set."""
    for name, key in TOPIC_CONFIGS.items():
        if name in configs:
            yield name, configs[name], TOPIC_CONFIG, key.kind
            continue
        default = _TOPIC_DEFAULTS[name]
        if isinstance(default, tuple):
            yield name, default[0], DEFAULT_CONFIG, key.kind
            continue
        value = broker.config.retention_ms if name == "retention.ms" else broker.config.get(default)
        if name == "flush.ms" and value is None:
            value = LONG_MAX
        source = STATIC_BROKER_CONFIG if default in broker.config.explicit else DEFAULT_CONFIG
        yield name, _str(value), source, key.kind


def _broker_entries(broker: Broker) -> Iterator[tuple[str, str | None, int, str, str]]:
    for setting in SETTINGS:
        source = STATIC_BROKER_CONFIG if setting.name in broker.config.explicit else DEFAULT_CONFIG
        yield setting.name, _str(broker.config.get(setting.name)), source, setting.kind, setting.doc


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    resources = list(request.resources)
    outcomes = [_ask_group(ctx, r) if r.resource_type == GROUP else _describe(b, ctx, r, request) for r in resources]

    def respond(answers: list[Any]) -> Any:
        results = tuple(_group_result(b, r, a, request) if r.resource_type == GROUP else a
                        for r, a in zip(resources, answers, strict=True))
        return b.response(throttle_time=0, results=results)

    return gather(outcomes, respond)


def _ask_group(ctx: RequestContext, resource: Any) -> Any:
    """The group shard's DescribeGroupConfigsResponse, or a future of it."""
    def on_error(code: int) -> DescribeGroupConfigsResponse:
        return DescribeGroupConfigsResponse(error_code=code)

    if not resource.resource_name:
        return DescribeGroupConfigsResponse(error_code=ErrorCode.invalid_request,
                                            error_message="Default group resources are not allowed.")
    req = DescribeGroupConfigs(group_id=resource.resource_name, api_version=ctx.api_version,
                               client_id=client_id(ctx), client_host=client_host(ctx))
    return call(ctx, resource.resource_name, GroupCoordinatorShard.describe_group_configs, req, on_error)


def _group_result(b: Builder, resource: Any, answer: DescribeGroupConfigsResponse, request: Any) -> Any:
    if answer.error_code:
        return _result(b, resource, ErrorCode(answer.error_code), answer.error_message)
    entries = [(c.name, c.value, GROUP_CONFIG if c.is_set else DEFAULT_CONFIG, "list", c.documentation)
               for c in answer.configs]
    return _result(b, resource, ErrorCode.none, None, _configs(b, resource, entries, request))


def _describe(b: Builder, ctx: RequestContext, resource: Any, request: Any) -> Any:
    broker = ctx.broker
    if resource.resource_type == TOPIC:
        topic = broker.cluster.get(resource.resource_name)
        if topic is None:
            return _result(b, resource, ErrorCode.unknown_topic_or_partition,
                           "The topic does not exist on this broker.")
        entries = [(n, v, s, k, "") for n, v, s, k in topic_config_entries(broker, topic.configs)]
    elif resource.resource_type == BROKER:
        if resource.resource_name not in ("", str(broker.node_id)):
            return _result(b, resource, ErrorCode.invalid_request,
                           f"Unexpected broker id, expected {broker.node_id} or empty string, "
                           f"but received {resource.resource_name}")
        entries = list(_broker_entries(broker))
    else:
        return _result(b, resource, ErrorCode.invalid_request,
                       f"Resource type {resource.resource_type} is not supported by herd")
    return _result(b, resource, ErrorCode.none, None, _configs(b, resource, entries, request))


def _configs(b: Builder, resource: Any, entries: list[tuple[str, str | None, int, str, str]], request: Any
             ) -> tuple[Any, ...]:
    """The result entries of `entries` (name, value, source, kind, doc) the resource asked for."""
    wanted = set(resource.configuration_keys) if resource.configuration_keys is not None else None
    documented = getattr(request, "include_documentation", False)
    return tuple(
        b("DescribeConfigsResourceResult", name=name, value=None if name in SENSITIVE else value,
          read_only=resource.resource_type == BROKER, config_source=source, is_sensitive=name in SENSITIVE,
          synonyms=(), config_type=_TYPES.get(kind, 0), documentation=doc if documented else None)
        for name, value, source, kind, doc in entries if wanted is None or name in wanted
    )


# Settings whose value is never sent to a client, as Kafka answers PASSWORD configs: null, is_sensitive=true (the
# database URL may hold a password).
SENSITIVE = frozenset({"herd.cluster.database.url"})


def _result(b: Builder, resource: Any, error: ErrorCode, message: str | None, configs: tuple = ()) -> Any:
    return b("DescribeConfigsResult", error_code=error, error_message=message, resource_type=resource.resource_type,
             resource_name=resource.resource_name, configs=configs)
