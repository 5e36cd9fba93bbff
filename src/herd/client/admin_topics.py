"""Topic administration (kafka-topics.sh's create, list, describe, alter --partitions, delete).

`TopicAdmin` is mixed into herd.client.admin.Admin; it needs only `self.client`. Create, delete and
partition changes go to any broker (herd has no separate controller); describe joins Metadata (partitions,
leaders, replicas, ISR, topic id) with DescribeConfigs (the configs set on the topic itself, which is what
kafka-topics.sh --describe shows). Errors raise AdminError with the one-line message Kafka's tool prints,
e.g. "Topic 'orders' already exists."
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from herd.client.connection import KafkaClient
from herd.client.errors import KafkaError, error_name
from herd.client.wire import RequestBuilder

__all__ = ["PartitionDescription", "TopicAdmin", "TopicDescription"]

CREATE_TOPICS: Final = 19
DELETE_TOPICS: Final = 20
DESCRIBE_CONFIGS: Final = 32
CREATE_PARTITIONS: Final = 37
TOPIC_RESOURCE: Final = 2
TOPIC_CONFIG_SOURCE: Final = 1
TIMEOUT_MS: Final = 30_000


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str | None
    partitions: tuple[PartitionDescription, ...]
    configs: Mapping[str, str]
    internal: bool

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


def _topic_error(kind: type[KafkaError], name: str, code: int, message: str | None) -> KafkaError:
    if code == ErrorCode.topic_already_exists:
        return kind(code, f"Topic '{name}' already exists.")
    if code == ErrorCode.unknown_topic_or_partition:
        return kind(code, f"Topic '{name}' does not exist.")
    return kind(code, f"topic '{name}': {error_name(code)}" + (f" ({message})" if message else ""))


class TopicAdmin:
    """Topic operations (see the module docstring)."""

    client: KafkaClient
    error_type: type[KafkaError] = KafkaError

    async def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic (broker defaults for what is None); raises on any error."""

        def build(b: RequestBuilder) -> Any:
            entries = tuple(b("CreatableTopicConfig", name=k, value=v) for k, v in (configs or {}).items())
            topic = b(
                "CreatableTopic",
                name=name,
                num_partitions=-1 if partitions is None else partitions,
                replication_factor=-1 if replication_factor is None else replication_factor,
                assignments=(),
                configs=entries,
            )
            return b.request(topics=(topic,), timeout=TIMEOUT_MS, validate_only=False)

        _, body = await self.client.send(CREATE_TOPICS, build)
        result = body.topics[0]
        if result.error_code:
            raise _topic_error(self.error_type, name, result.error_code, getattr(result, "error_message", None))

    async def list_topics(self, include_internal: bool = True) -> list[str]:
        metadata = await self.client.metadata(None)
        return sorted(t.name for t in metadata.topics.values() if include_internal or not t.internal)

    async def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        """Every named topic (all topics when None); raises for a named topic that does not exist."""
        metadata = await self.client.metadata(None if names is None else list(names))
        out = []
        for name in sorted(metadata.topics) if names is None else names:
            t = metadata.topics.get(name)
            if t is None or t.error_code:
                raise _topic_error(
                    self.error_type, name, t.error_code if t else ErrorCode.unknown_topic_or_partition, None
                )
            parts = tuple(
                PartitionDescription(p, t.partitions[p], t.replicas.get(p, ()), t.isr.get(p, ()))
                for p in sorted(t.partitions)
            )
            out.append(TopicDescription(name, t.topic_id, parts, await self.topic_configs(name), t.internal))
        return out

    async def topic_configs(self, name: str) -> dict[str, str]:
        """The configs set on the topic itself (source TOPIC_CONFIG)."""

        def build(b: RequestBuilder) -> Any:
            resource = b(
                "DescribeConfigsResource", resource_type=TOPIC_RESOURCE, resource_name=name, configuration_keys=None
            )
            return b.request(resources=(resource,), include_synonyms=False, include_documentation=False)

        _, body = await self.client.send(DESCRIBE_CONFIGS, build)
        result = body.results[0]
        if result.error_code:
            return {}
        return {
            c.name: c.value
            for c in result.configs
            if getattr(c, "config_source", TOPIC_CONFIG_SOURCE) == TOPIC_CONFIG_SOURCE and c.value is not None
        }

    async def alter_partitions(self, name: str, count: int) -> None:
        """Grow a topic to `count` partitions; raises on any error (a count not above the current one)."""

        def build(b: RequestBuilder) -> Any:
            topic = b("CreatePartitionsTopic", name=name, count=count, assignments=None)
            return b.request(topics=(topic,), timeout=TIMEOUT_MS, validate_only=False)

        _, body = await self.client.send(CREATE_PARTITIONS, build)
        result = body.results[0]
        if result.error_code:
            raise _topic_error(self.error_type, name, result.error_code, result.error_message)

    async def delete_topics(self, names: Sequence[str]) -> None:
        """Delete topics; raises for the first that fails."""

        def build(b: RequestBuilder) -> Any:
            states = tuple(b("DeleteTopicState", name=n, topic_id=None) for n in names)
            return b.request(topics=states, topic_names=tuple(names), timeout=TIMEOUT_MS)

        _, body = await self.client.send(DELETE_TOPICS, build)
        for result in body.responses:
            if result.error_code:
                raise _topic_error(
                    self.error_type, result.name, result.error_code, getattr(result, "error_message", None)
                )
