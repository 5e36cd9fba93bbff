"""DescribeConfigs (key 32), v1-v4.

v1: config source and synonyms (Kafka 4.x's lowest, KIP-896). v3: config type and documentation. v4: flexible.

As Kafka's ConfigHelper answers (apache/kafka core/src/main/scala/kafka/server/ConfigHelper.scala):
- TOPIC (2): every topic config herd honours, with the value in force; its synonyms are the topic's own value
  (TOPIC_CONFIG) and then the broker setting it follows (ServerTopicConfigSynonyms) as a dynamic broker config,
  a dynamic cluster default, a static setting and Kafka's default, from the setting's own name on; the source is
  the first synonym's (DEFAULT_CONFIG when there is none). Documentation is Kafka's text (herd.cluster.topic_docs).
- BROKER (4) named by this node's id: every broker setting herd understands (`herd.config.SETTINGS`: herd's own and
  every other broker config of Kafka 4.2, herd.kafka_broker_configs, its internal ones only when set), sourced the
  same way, `read_only` unless it may change at run time (`Setting.dynamic`), documented in Kafka's words where
  Kafka has the config (herd's own where only herd has it). BROKER "" (the cluster default):
  only the dynamic defaults set, as Kafka lists them. Another id gets INVALID_REQUEST.
- GROUP (32, Kafka 4.x's group configs): Kafka's group configs (herd.coordinator.kafka_group_configs) with the
  group's value (GROUP_CONFIG) or the broker's default (DEFAULT_CONFIG); herd's `herd.expected.instance.ids`
  (KIP-469 pre-registration: the ids the group still waits for), with source GROUP_CONFIG when the group has a
  registration, DEFAULT_CONFIG (value "") otherwise; and, only when asked for by name, the read-only
  `herd.rebalance.history` (the group's rebalance history as JSON, herd.coordinator.group_configs); it is asked of the
  group's coordinator shard, on another node
  in cluster mode (herd.server.peers: any node answers, as any Kafka broker does), and answers for groups that do
  not exist too, as Kafka does.
Other resource types get INVALID_REQUEST. An empty or null list of keys asks for every config.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
DESCRIBE_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED), the group
(GROUP_AUTHORIZATION_FAILED) or, for a broker, the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topic_docs import TOPIC_DOCS
from herd.cluster.topics import TOPIC_CONFIGS
from herd.config import SETTINGS, ConfigSource, unparse
from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.group_configs import HISTORY_CONFIG
from herd.coordinator.requests import DescribeGroupConfigs
from herd.coordinator.responses import DescribeGroupConfigsResponse
from herd.kafka_broker_configs import KAFKA_BROKER_CONFIGS_BY_NAME
from herd.log.api import LONG_MAX
from herd.server.apis._authorize import DESCRIBE_CONFIGS
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._configs import BROKER, GROUP, TOPIC, broker_id, config_denied
from herd.server.apis._groups import ask_coordinator_node, call, client_host, client_id, gather
from herd.server.broker import Broker, RequestContext
from herd.server.peers import PeerError

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

# ConfigType values
_TYPES = {"bool": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "class": 8, "password": 9}

Synonym = tuple[str, str | None, int]  # name, value, ConfigSource


@dataclass(frozen=True, slots=True)
class Entry:
    """One config as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: int  # ConfigSource
    kind: str
    doc: str = ""
    synonyms: tuple[Synonym, ...] = ()
    read_only: bool = False


def _str(value: Any) -> str | None:
    return None if value is None else unparse(value)


def topic_entries(broker: Broker, configs: dict[str, str]) -> Iterator[Entry]:
    """Every topic config herd honours, as in force for a topic with `configs` set: the topic's value, else the
    broker setting it follows (ServerTopicConfigSynonyms) with that setting's synonyms, as Kafka's
    ConfigHelper.createTopicConfigEntry lists them (the source is the first synonym's)."""
    config = broker.config
    for name, key in TOPIC_CONFIGS.items():
        synonym = key.synonym
        synonyms = [(n, v, int(s)) for n, v, s in config.synonyms(synonym)] if synonym is not None else []
        if name in configs:
            value: str | None = configs[name]
            synonyms.insert(0, (name, value, ConfigSource.TOPIC_CONFIG))
        elif synonym is None:  # no broker setting: Kafka's default (LogConfig)
            value = key.default
        elif name == "retention.ms":
            value = str(config.retention_ms)
        elif name == "flush.ms":
            value = _str(config.get(synonym) if config.get(synonym) is not None else LONG_MAX)
        elif name in ("segment.ms", "segment.jitter.ms") and config.get(synonym) is None:  # in hours
            value = str(config.get(synonym.replace(".ms", ".hours")) * 3_600_000)
        else:
            value = _str(config.get(synonym))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        yield Entry(name, value, source, key.kind, TOPIC_DOCS.get(name, ""), tuple(synonyms))


def _broker_entries(broker: Broker, default_only: bool) -> Iterator[Entry]:
    """Every broker setting (as Kafka's ConfigHelper.createBrokerConfigEntry), or for the cluster default
    resource ("") only the dynamic defaults set, with only their dynamic default synonyms."""
    config = broker.config
    for setting in SETTINGS:
        name = setting.name
        if setting.internal and not (
            name in config.explicit or name in config.dynamic_broker or name in config.dynamic_default
        ):
            continue  # Kafka lists an internal config only when it is set
        synonyms = tuple((n, v, int(s)) for n, v, s in config.synonyms(setting.name))
        if default_only:
            if setting.name not in config.dynamic_default:
                continue
            synonyms = tuple(s for s in synonyms if s[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            value = config.dynamic_default[setting.name]
        else:
            value = _str(config.get(setting.name))
        source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
        kafka = KAFKA_BROKER_CONFIGS_BY_NAME.get(name)
        doc = kafka.doc if kafka is not None and kafka.doc else setting.doc  # Kafka's words where Kafka has the config
        yield Entry(name, value, source, setting.kind, doc, synonyms, read_only=not setting.dynamic)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    resources = list(request.resources)
    outcomes = [
        _refused(b, r, denied)
        if (denied := config_denied(ctx, r.resource_type, r.resource_name, DESCRIBE_CONFIGS)) is not None
        else _ask_group(ctx, r, request)
        if r.resource_type == GROUP
        else _describe(b, ctx, r, request)
        for r in resources
    ]

    def respond(answers: list[Any]) -> Any:
        results = tuple(
            _group_result(b, r, a, request) if isinstance(a, DescribeGroupConfigsResponse) else a
            for r, a in zip(resources, answers, strict=True)
        )
        return b.response(throttle_time=0, results=results)

    return gather(outcomes, respond)


def _refused(b: Builder, resource: Any, denied: tuple[int, str | None]) -> Any:
    return _result(b, resource, ErrorCode(denied[0]), denied[1])


def _ask_group(ctx: RequestContext, resource: Any, request: Any) -> Any:
    """The group shard's DescribeGroupConfigsResponse, or a future of it, or (cluster mode, another node
    coordinates the group) a future of that node's DescribeConfigsResult."""

    def on_error(code: int) -> DescribeGroupConfigsResponse:
        return DescribeGroupConfigsResponse(error_code=code)

    if not resource.resource_name:
        return DescribeGroupConfigsResponse(
            error_code=ErrorCode.invalid_request, error_message="Default group resources are not allowed."
        )
    req = DescribeGroupConfigs(
        group_id=resource.resource_name,
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
        include_history=HISTORY_CONFIG in (resource.configuration_keys or ()),
    )
    answer = call(ctx, resource.resource_name, GroupCoordinatorShard.describe_group_configs, req, on_error)
    if isinstance(answer, DescribeGroupConfigsResponse) and answer.error_code == ErrorCode.not_coordinator:
        return asyncio.ensure_future(_at_the_coordinator(ctx, resource, request, answer))
    return answer


async def _at_the_coordinator(
    ctx: RequestContext, resource: Any, request: Any, refused: DescribeGroupConfigsResponse
) -> Any:
    """The DescribeConfigsResult of the node that coordinates the group (Kafka answers group configs on any
    broker), or `refused` when there is no other node to ask."""
    try:
        answer = await ask_coordinator_node(ctx, resource.resource_name, replace(request, resources=(resource,)))
    except PeerError:
        return DescribeGroupConfigsResponse(
            error_code=ErrorCode.coordinator_not_available, error_message="The coordinator is not available."
        )
    return refused if answer is None else answer.results[0]


def _group_result(b: Builder, resource: Any, answer: DescribeGroupConfigsResponse, request: Any) -> Any:
    if answer.error_code:
        return _result(b, resource, ErrorCode(answer.error_code), answer.error_message)
    entries = [
        Entry(
            c.name,
            c.value,
            ConfigSource.GROUP_CONFIG if c.is_set else ConfigSource.DEFAULT_CONFIG,
            c.kind,
            c.documentation or "",
            read_only=c.read_only,
        )
        for c in answer.configs
    ]
    return _result(b, resource, ErrorCode.none, None, _configs(b, resource, entries, request))


def _describe(b: Builder, ctx: RequestContext, resource: Any, request: Any) -> Any:
    broker = ctx.broker
    if resource.resource_type == TOPIC:
        topic = broker.cluster.get(resource.resource_name)
        if topic is None:
            return _result(
                b, resource, ErrorCode.unknown_topic_or_partition, "The topic does not exist on this broker."
            )
        entries = list(topic_entries(broker, topic.configs))
    elif resource.resource_type == BROKER:
        name = resource.resource_name
        if name and broker_id(name) is None:
            return _result(b, resource, ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}")
        if name and broker_id(name) != broker.node_id:
            return _result(
                b,
                resource,
                ErrorCode.invalid_request,
                f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
            )
        entries = list(_broker_entries(broker, default_only=not name))
    else:
        return _result(
            b, resource, ErrorCode.invalid_request, f"Resource type {resource.resource_type} is not supported by herd"
        )
    return _result(b, resource, ErrorCode.none, None, _configs(b, resource, entries, request))


def _configs(b: Builder, resource: Any, entries: list[Entry], request: Any) -> tuple[Any, ...]:
    """The result entries of `entries` the resource asked for (all when it names none, as Kafka answers an
    empty list), with synonyms and documentation when the request asks for them."""
    wanted = set(resource.configuration_keys or ())
    synonyms = getattr(request, "include_synonyms", False)
    documented = getattr(request, "include_documentation", False)
    return tuple(
        b(
            "DescribeConfigsResourceResult",
            name=e.name,
            value=None if e.name in SENSITIVE else e.value,
            read_only=e.read_only,
            config_source=e.source,
            is_sensitive=e.name in SENSITIVE,
            synonyms=tuple(
                b("DescribeConfigsSynonym", name=n, value=None if n in SENSITIVE else v, source=s)
                for n, v, s in e.synonyms
            )
            if synonyms
            else (),
            config_type=_TYPES.get(e.kind, 0),
            documentation=(e.doc or None) if documented else None,
        )
        for e in entries
        if not wanted or e.name in wanted
    )


# Settings whose value is never sent to a client, as Kafka answers PASSWORD configs: null, is_sensitive=true (the
# database URL may hold a password; herd.config marks the others, key passwords and JAAS settings).
SENSITIVE = frozenset({"herd.cluster.database.url", *(s.name for s in SETTINGS if s.sensitive)})


def _result(b: Builder, resource: Any, error: ErrorCode, message: str | None, configs: tuple = ()) -> Any:
    return b(
        "DescribeConfigsResult",
        error_code=error,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )
