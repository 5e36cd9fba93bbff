"""Config administration of topics and brokers (kafka-configs.sh's --describe and --alter).

`ConfigAdmin` is mixed into herd.client.admin.Admin; it needs only `self.client`. `describe_configs` asks
DescribeConfigs (with synonyms) for one resource; `alter_configs` sends IncrementalAlterConfigs with SET for the
configs to add and DELETE for those to remove, as kafka-configs.sh does (apache/kafka
tools/src/main/java/org/apache/kafka/tools/ConfigCommand.java, alterConfig). A resource is a topic name, or for
brokers a broker id or "" (the cluster-wide default, kafka-configs.sh's --entity-default). Errors raise the
admin's error type with a one-line message: the broker's, or Kafka's tool wording for an unknown topic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from herd.client.connection import KafkaClient
from herd.client.errors import KafkaError, error_name
from herd.client.wire import RequestBuilder

__all__ = ["ConfigAdmin", "ConfigEntryDescription", "RESOURCE_TYPES"]

DESCRIBE_CONFIGS: Final = 32
INCREMENTAL_ALTER_CONFIGS: Final = 44
RESOURCE_TYPES: Final = {"topics": 2, "brokers": 4, "groups": 32}  # groups: Kafka 4.x's group configs
SET, DELETE = 0, 1
# DescribeConfigsResponse.ConfigSource names, as kafka-configs.sh prints them
SOURCES: Final = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}


@dataclass(frozen=True, slots=True)
class ConfigEntryDescription:
    name: str
    value: str | None
    source: str  # a SOURCES name
    sensitive: bool
    read_only: bool
    synonyms: tuple[tuple[str, str | None, str], ...]  # (name, value, source), highest precedence first


class ConfigAdmin:
    """Config operations (see the module docstring)."""

    client: KafkaClient
    error_type: type[KafkaError] = KafkaError

    async def describe_configs(self, entity_type: str, name: str) -> list[ConfigEntryDescription]:
        """Every config of the resource with its value, source and synonyms; raises on an error."""

        def build(b: RequestBuilder) -> Any:
            resource = b(
                "DescribeConfigsResource",
                resource_type=RESOURCE_TYPES[entity_type],
                resource_name=name,
                configuration_keys=None,
            )
            return b.request(resources=(resource,), include_synonyms=True, include_documentation=False)

        _, body = await self.client.send(DESCRIBE_CONFIGS, build, node=await self._answering_node(entity_type, name))
        result = body.results[0]
        if result.error_code:
            raise self._config_error(entity_type, name, result.error_code, result.error_message)
        return [
            ConfigEntryDescription(
                c.name,
                c.value,
                SOURCES.get(c.config_source, "UNKNOWN"),
                c.is_sensitive,
                c.read_only,
                tuple((s.name, s.value, SOURCES.get(s.source, "UNKNOWN")) for s in c.synonyms),
            )
            for c in result.configs
        ]

    async def alter_configs(
        self, entity_type: str, name: str, add: Mapping[str, str] | None = None, delete: Sequence[str] = ()
    ) -> None:
        """SET each of `add` and DELETE each of `delete` in one IncrementalAlterConfigs; raises on an error."""

        def build(b: RequestBuilder) -> Any:
            ops = [b("AlterableConfig", name=k, config_operation=SET, value=v) for k, v in (add or {}).items()]
            ops += [b("AlterableConfig", name=k, config_operation=DELETE, value=None) for k in delete]
            resource = b(
                "AlterConfigsResource",
                resource_type=RESOURCE_TYPES[entity_type],
                resource_name=name,
                configs=tuple(ops),
            )
            return b.request(resources=(resource,), validate_only=False)

        _, body = await self.client.send(
            INCREMENTAL_ALTER_CONFIGS, build, node=await self._answering_node(entity_type, name)
        )
        result = body.responses[0]
        if result.error_code:
            raise self._config_error(entity_type, name, result.error_code, result.error_message)

    async def _answering_node(self, entity_type: str, name: str) -> int | None:
        """The node a request about the resource goes to: a broker's own configs to that broker, which alone
        answers for them (as Kafka's AdminClient sends a BROKER resource to the node it names); anything else,
        or a broker the cluster does not know (whose error any node gives), to any node."""
        if entity_type != "brokers" or not (name.isascii() and name.isdigit()):
            return None
        node = int(name)
        if node not in self.client.brokers:
            await self.client.metadata([])
        return node if node in self.client.brokers else None

    def _config_error(self, entity_type: str, name: str, code: int, message: str | None) -> KafkaError:
        if entity_type == "topics" and code == ErrorCode.unknown_topic_or_partition:
            return self.error_type(code, f"The topic '{name}' does not exist.")
        return self.error_type(code, message or error_name(code))
