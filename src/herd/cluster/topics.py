"""Topics, their ids, partitions and per-topic configs: the broker's metadata.

A single node leads every partition. The metadata (topic name, id, partition count and the configs the user
set) is kept in `<log.dirs>/topics.json`, rewritten atomically (temp file, fsync, rename, directory fsync) on
every change, and the partitions' data lives in the `LogStore`. At start the file is read and every partition
opened, which recovers its log. A partition directory the file does not name (left by a crash between the two
steps of a delete) is removed.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from herd.log.api import LogConfig, LogStore, PartitionLog

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})
MAX_TOPIC_NAME = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


class TopicError(Exception):
    """A topic operation that cannot be done; carries the Kafka error code to answer with."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


# Kafka error codes used here.
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
TOPIC_DELETION_DISABLED = 73


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    name: str
    kind: str  # "long", "int", "string"
    apply: Callable[[LogConfig, Any], LogConfig] | None  # how it changes the partition's LogConfig
    choices: tuple[str, ...] = ()
    minimum: int | None = None  # Kafka's atLeast(...) validator

    def complaint(self, value: str) -> str | None:
        """Why `value` is refused, in the words of Kafka's ConfigDef, or None."""
        if self.kind in ("int", "long"):
            try:
                number = int(value)
            except ValueError:
                return f"Not a number of type {self.kind.upper()}"
            bits = 31 if self.kind == "int" else 63
            if not -(2**bits) <= number < 2**bits:
                return f"Not a number of type {self.kind.upper()}"
            if self.minimum is not None and number < self.minimum:
                return f"Value must be at least {self.minimum}"
        elif self.choices and value not in self.choices:
            return f"String must be one of: {', '.join(self.choices)}"
        return None


def _set(attr: str) -> Callable[[LogConfig, Any], LogConfig]:
    return lambda cfg, value: replace(cfg, **{attr: value})


# Kafka 4.x's smallest segment.bytes for a topic a client creates (KIP-1030); herd's own internal topics take
# theirs from broker settings (offsets.topic.segment.bytes), which have their own bounds.
MIN_SEGMENT_BYTES = 1024 * 1024

# Topic-level configs herd honours, with the bounds Kafka's LogConfig gives them (apache/kafka
# storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java); the rest of Kafka's topic
# configs are refused with INVALID_CONFIG.
TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    k.name: k
    for k in (
        TopicConfigKey("cleanup.policy", "string", _set("cleanup_policy"),
                       ("delete", "compact", "compact,delete", "delete,compact")),
        TopicConfigKey("retention.ms", "long", _set("retention_ms"), minimum=-1),
        TopicConfigKey("retention.bytes", "long", _set("retention_bytes")),  # any negative: no limit, as in Kafka
        TopicConfigKey("segment.bytes", "int", _set("segment_bytes"), minimum=MIN_SEGMENT_BYTES),
        TopicConfigKey("flush.messages", "long", _set("flush_interval_messages"), minimum=1),
        TopicConfigKey("flush.ms", "long", _set("flush_interval_ms"), minimum=0),
        TopicConfigKey("index.interval.bytes", "int", _set("index_interval_bytes"), minimum=0),
        TopicConfigKey("message.timestamp.type", "string", _set("message_timestamp_type"),
                       ("CreateTime", "LogAppendTime")),
        TopicConfigKey("max.message.bytes", "int", _set("max_message_bytes"), minimum=0),
        TopicConfigKey("compression.type", "string", None,
                       ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
        TopicConfigKey("min.insync.replicas", "int", None, minimum=1),
        TopicConfigKey("delete.retention.ms", "long", None, minimum=0),
    )
}


def check_topic_name(name: str) -> None:
    """Kafka's Topic.validate; raises TopicError(INVALID_TOPIC_EXCEPTION)."""
    if not name or name in (".", ".."):
        raise TopicError(INVALID_TOPIC_EXCEPTION, f"Topic name '{name}' is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(INVALID_TOPIC_EXCEPTION, f"Topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_NAME.fullmatch(name):
        raise TopicError(INVALID_TOPIC_EXCEPTION,
                         f"Topic name '{name}' is illegal: only ASCII alphanumerics, '.', '_' and '-' are allowed")


def check_topic_configs(configs: dict[str, str | None], *, internal: bool = False) -> dict[str, str]:
    """Returns the configs with null values dropped; raises TopicError(INVALID_CONFIG) with Kafka's message
    ("Invalid value -5 for configuration max.message.bytes: Value must be at least 0"). `internal` topics
    (made by herd from its own settings) skip the lower bound of segment.bytes."""
    checked: dict[str, str] = {}
    for name, value in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise TopicError(INVALID_CONFIG, f"Unknown topic config name: {name}")
        if value is None:
            continue
        if internal and key.name == "segment.bytes":
            key = replace(key, minimum=1)
        complaint = key.complaint(value)
        if complaint is not None:
            raise TopicError(INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {complaint}")
        checked[name] = value
    return checked


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[PartitionLog] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class Cluster:
    """The topics of this (single-node) cluster and their partition logs."""

    def __init__(self, data_dir: Path, store: LogStore, defaults: LogConfig, node_id: int) -> None:
        self._dir = data_dir
        self._store = store
        self._defaults = defaults
        self.node_id = node_id
        self.cluster_id = ""
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the metadata and open (recover) every partition."""
        self._dir.mkdir(parents=True, exist_ok=True)
        state = self._read_state()
        self.cluster_id = state.get("cluster_id") or _new_cluster_id()
        for entry in state.get("topics", []):
            topic = Topic(entry["name"], uuid.UUID(entry["id"]), dict(entry.get("configs", {})))
            for p in range(entry["partitions"]):
                topic.partitions.append(self._store.open_partition(topic.name, p, self.log_config(topic.configs)))
            self._index(topic)
        known = {(t.name, p) for t in self._topics.values() for p in range(len(t.partitions))}
        for name, p in self._store.existing_partitions():
            if (name, p) not in known:
                log.warning("removing partition %s-%d, which no topic owns", name, p)
                self._store.delete_partition(name, p)
        if not state:
            self._write_state()

    def close(self) -> None:
        self._store.close()  # flushes and closes every partition

    # -- queries -----------------------------------------------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        topic = self._topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def topics(self) -> Iterator[Topic]:
        return iter(list(self._topics.values()))

    def log_config(self, configs: dict[str, str]) -> LogConfig:
        cfg = self._defaults
        for name, value in configs.items():
            key = TOPIC_CONFIGS[name]
            if key.apply is not None:
                cfg = key.apply(cfg, int(value) if key.kind in ("int", "long") else value)
        return cfg

    # -- changes -----------------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, configs: dict[str, str | None] | None = None,
                     *, validate_only: bool = False) -> Topic:
        """Raises TopicError with TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS or
        INVALID_CONFIG."""
        check_topic_name(name)
        if name in self._topics:
            raise TopicError(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collision = _collision_name(name)
        for other in self._topics:
            if _collision_name(other) == collision:
                raise TopicError(INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {other}")
        if partitions < 1:
            raise TopicError(INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        checked = check_topic_configs(dict(configs or {}), internal=name in INTERNAL_TOPICS)
        topic = Topic(name, uuid.uuid4(), checked)
        if validate_only:
            return topic
        cfg = self.log_config(checked)
        topic.partitions = [self._store.open_partition(name, p, cfg) for p in range(partitions)]
        self._index(topic)
        self._write_state()
        log.info("created topic %s with %d partitions", name, partitions)
        return topic

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        """Grow a topic to `total` partitions; raises TopicError."""
        topic = self._require(name)
        current = len(topic.partitions)
        if total <= current:
            raise TopicError(INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, {total} would not be an increase.")
        if validate_only:
            return
        cfg = self.log_config(topic.configs)
        topic.partitions.extend(self._store.open_partition(name, p, cfg) for p in range(current, total))
        self._write_state()
        log.info("topic %s grown to %d partitions", name, total)

    def delete_topic(self, name: str) -> Topic:
        topic = self._require(name)
        del self._topics[name]
        del self._by_id[topic.topic_id]
        self._write_state()  # first forget it, then remove its data: a crash in between leaves only orphans
        for index in range(len(topic.partitions)):
            self._store.delete_partition(name, index)
        log.info("deleted topic %s", name)
        return topic

    def _require(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise TopicError(UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return topic

    def _index(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    # -- persistence -------------------------------------------------------------------------------------------

    @property
    def _state_path(self) -> Path:
        return self._dir / "topics.json"

    def _read_state(self) -> dict[str, Any]:
        try:
            return json.loads(self._state_path.read_text())
        except FileNotFoundError:
            return {}

    def _write_state(self) -> None:
        state = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "node_id": self.node_id,
            "topics": [
                {"name": t.name, "id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.configs}
                for t in self._topics.values()
            ],
        }
        _atomic_write(self._state_path, json.dumps(state, indent=1).encode())


def _collision_name(name: str) -> str:
    return name.replace(".", "_")


def _new_cluster_id() -> str:
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _atomic_write(path: Path, data: bytes) -> None:
    import os

    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
