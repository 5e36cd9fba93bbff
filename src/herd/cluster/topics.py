"""Topics, their ids, partitions and per-topic configs: the broker's metadata.

A single node leads every partition. The metadata (topic name, id, partition count and the configs the user
set) is kept in `<log.dirs>/topics.json`, written through the store's `FileSystem` atomically (temp file,
fsync, rename, directory fsync), and each partition directory keeps its topic's id and configs in
`partition.metadata` (Kafka keeps the topic id there), so both can be rebuilt from the partition directories.

Every change is durable before it takes effect: create and grow first make the new partitions (with their
`partition.metadata`), then write topics.json, and only then change the in-memory state; a failure at any step
removes the partitions it made and raises TopicError(KAFKA_STORAGE_ERROR), leaving memory as it was. Delete
first renames every partition directory to its deletion name (the durable record that the deletion was
decided), then writes topics.json, then forgets the topic and removes the directories; a failure before
topics.json is written renames them back.

At start (`load`), after the store locked the directory: deletions recorded by a rename are finished (a topic
that topics.json still names while some of its directories are marked is deleted) and their leftovers removed;
every topic of topics.json is opened (recovered). A partition directory topics.json does not name is adopted
when its `partition.metadata` says which topic it belongs to (a crash between making partitions and writing
topics.json), else kept, reported and not served; data is never deleted because metadata is missing. A missing
topics.json is rebuilt from the directories; an unreadable one stops the start with MetadataError.

Configs change at run time (`alter_topic_configs`: each partition.metadata, then topics.json, then the running
partitions' `set_config`); the dynamic broker configs (`alter_broker_configs`) are kept in
`<log.dirs>/broker-configs.json`, read at `load` before any partition opens, and handed to `on_broker_configs`
(the broker, which makes them its defaults: `set_defaults`).

Limits (Kafka's KRaft controller, apache/kafka metadata/src/main/java/org/apache/kafka/controller/
ReplicationControlManager.java): one request creates at most MAX_PARTITIONS_PER_REQUEST partitions
(POLICY_VIOLATION "Excessively large number of partitions per request."), and the broker hosts at most
`max.broker.partitions` (herd's bound, KIP-578's name); both are refused before anything is created.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from herd.cluster.config_ops import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    TIMESTAMP_TYPES,
    FullMessage,
    gzip_level_complaint,
    list_message,
    number_complaint,
    parse_list,
)
from herd.kafka_broker_configs import KAFKA_BROKER_CONFIGS_BY_NAME
from herd.log.api import LONG_MAX, LogConfig, LogError, LogStore, PartitionLog
from herd.log.fs import FileSystem, read_whole, write_atomically
from herd.log.producer_state import ProducerStates
from herd.log.store import kafka_uuid

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}  # and its segment.bytes
TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka's TransactionStateManager.transactionTopicConfigs: compacted, uncompressed (and its segment.bytes)
TRANSACTION_STATE_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed"}
SHARE_STATE_TOPIC = "__share_group_state"
# Kafka's ShareCoordinatorService.shareGroupStateTopicConfigs: not compacted (a share partition's updates and its
# snapshots have different keys) and kept for ever, pruned instead by the share coordinator up to the offset below
# which every record is redundant (runtime/share_state.py); uncompressed (and its segment.bytes)
SHARE_STATE_TOPIC_CONFIGS = {"cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "uncompressed"}
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})
MAX_TOPIC_NAME = 249
# ReplicationControlManager.MAX_PARTITIONS_PER_BATCH (and QuorumController.MAX_RECORDS_PER_USER_OP).
MAX_PARTITIONS_PER_REQUEST = 10_000
TOO_MANY_PER_REQUEST = "Excessively large number of partitions per request."  # Kafka's words
TOPICS_FILE = "topics.json"
BROKER_CONFIGS_FILE = "broker-configs.json"  # the dynamic broker configs (AlterConfigs on BROKER resources)
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


class TopicError(Exception):
    """A topic operation that cannot be done; carries the Kafka error code to answer with."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


class MetadataError(Exception):
    """The metadata in the data directory cannot be read or written at start; the broker must not start."""


# Kafka error codes used here.
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56
TOPIC_DELETION_DISABLED = 73


# A config change: the new configs of a resource from its current ones; raises when they are not acceptable.
ConfigChange = Callable[[dict[str, str]], dict[str, str]]


class TopicStore(LogStore, Protocol):
    """What `Cluster` needs of its store besides `LogStore` (SegmentStore provides it): the filesystem
    topics.json is written through, the partition metadata files, and the two-step delete."""

    fs: FileSystem
    root_dir: str  # where topics.json lives, beside the partition directories
    producers: ProducerStates | None  # the node's producer state, kept by each partition opened (the broker's)

    def write_partition_metadata(
        self, topic: str, partition: int, topic_id: uuid.UUID, configs: dict[str, str]
    ) -> None: ...

    def read_partition_metadata(self, topic: str, partition: int) -> tuple[uuid.UUID, dict[str, str] | None] | None: ...

    def mark_deleted(self, topic: str, partition: int, unique_id: str) -> str | None: ...

    def unmark(self, topic: str, partition: int, marker: str) -> None: ...

    def sync(self) -> None: ...

    def forget(self, topic: str, partition: int) -> None: ...

    def marked_for_deletion(self) -> list[tuple[str, str | None]]: ...

    def purge(self, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    name: str
    kind: str  # "long", "int", "double", "bool", "string", "list"
    apply: Callable[[LogConfig, Any], LogConfig] | None  # how it changes the partition's LogConfig (None: no effect)
    synonym: str | None  # the broker setting it defaults to (Kafka's ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS)
    choices: tuple[str, ...] = ()  # of the value, or of each item of a list
    minimum: int | None = None  # Kafka's atLeast(...) validator (or the low end of between(...))
    maximum: int | None = None  # the high end of between(...)
    check: Callable[[str], str | None] | None = None  # another validator's complaint
    default: str | None = None  # Kafka's default, for a config without a broker synonym

    def message(self, value: str, *, bounds: bool = True) -> str | None:
        """Why `value` is refused, in the words of Kafka's ConfigDef ("Invalid value -5 for configuration
        max.message.bytes: Value must be at least 0"; a LIST's as ConfigDef.ValidList words it), or None; without
        `bounds` only its type is checked."""
        if self.kind == "list":  # a stored list was accepted by a herd before 4.2's rules: taken as it is
            if not bounds:
                return None
            return self.check(value) if self.check is not None else list_message(self.name, value, self.choices)
        complaint = None
        if self.kind in ("int", "long", "double"):
            complaint = number_complaint(self.kind, value, *((self.minimum, self.maximum) if bounds else (None, None)))
        elif self.kind == "bool":
            if value.strip().lower() not in ("true", "false"):
                complaint = "Expected value to be either true or false"
        elif self.choices and value not in self.choices:
            complaint = f"String must be one of: {', '.join(self.choices)}"
        if complaint is None and bounds and self.check is not None:
            complaint = self.check(value)
        if complaint is None or isinstance(complaint, FullMessage):
            return complaint
        return f"Invalid value {value} for configuration {self.name}: {complaint}"


_THROTTLED_ITEM = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled(name: str) -> Callable[[str], str | None]:
    """ThrottledReplicaListValidator (not ValidList: empty and repeated items pass): "*", or PARTITION:BROKER
    items; its message names the list as Java prints it."""

    def check(value: str) -> str | None:
        items = parse_list(value)  # trimmed, as the validator trims each
        if all(_THROTTLED_ITEM.fullmatch(i) for i in items) or "".join(items) == "*":
            return None
        return FullMessage(
            f"Invalid value [{', '.join(items)}] for configuration {name}: {name} must be the literal '*' or a list "
            "of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )

    return check


def _no_tiered_storage(value: str) -> str | None:
    """herd has no tiered storage: Kafka's LogConfig.validateRemoteStorageOnlyIfSystemEnabled with
    remote.log.storage.system.enable=false refuses remote.storage.enable=true."""
    if value.strip().lower() == "true":
        return FullMessage("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
                           "remote log storage.")  # fmt: skip
    return None


def _set(attr: str) -> Callable[[LogConfig, Any], LogConfig]:
    return lambda cfg, value: replace(cfg, **{attr: value})


# Kafka 4.x's smallest segment.bytes for a topic a client creates (KIP-1030); herd's own internal topics take
# theirs from broker settings (offsets.topic.segment.bytes), which have their own bounds.
MIN_SEGMENT_BYTES = 1024 * 1024

# Every topic config of Kafka 4.2, with the types and validators Kafka's LogConfig gives them (apache/kafka
# storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java): the first ones herd applies (`apply`),
# the others it accepts without effect (docs/compatibility.md says why for each). A name Kafka does not define
# (message.downconversion.enable, gone in 4.0, among them) is refused with INVALID_CONFIG, as Kafka refuses it.
TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    k.name: k
    for k in (
        TopicConfigKey("cleanup.policy", "list", _set("cleanup_policy"), "log.cleanup.policy", CLEANUP_POLICIES),
        TopicConfigKey("retention.ms", "long", _set("retention_ms"), "log.retention.ms", minimum=-1),
        # any negative retention.bytes: no limit, as in Kafka
        TopicConfigKey("retention.bytes", "long", _set("retention_bytes"), "log.retention.bytes"),
        TopicConfigKey("segment.bytes", "int", _set("segment_bytes"), "log.segment.bytes", minimum=MIN_SEGMENT_BYTES),
        TopicConfigKey(
            "flush.messages", "long", _set("flush_interval_messages"), "log.flush.interval.messages", minimum=1
        ),
        TopicConfigKey("flush.ms", "long", _set("flush_interval_ms"), "log.flush.interval.ms", minimum=0),
        TopicConfigKey(
            "index.interval.bytes", "int", _set("index_interval_bytes"), "log.index.interval.bytes", minimum=0
        ),
        TopicConfigKey(
            "message.timestamp.type",
            "string",
            _set("message_timestamp_type"),
            "log.message.timestamp.type",
            TIMESTAMP_TYPES,
        ),
        TopicConfigKey("max.message.bytes", "int", _set("max_message_bytes"), "message.max.bytes", minimum=0),
        TopicConfigKey("compression.type", "string", None, "compression.type", COMPRESSION_TYPES),
        TopicConfigKey("min.insync.replicas", "int", None, "min.insync.replicas", minimum=1),
        TopicConfigKey("delete.retention.ms", "long", None, "log.cleaner.delete.retention.ms", minimum=0),
        # accepted without effect (docs/compatibility.md, "Topic configs"), with Kafka 4.2's types and validators
        # (LogConfig.CONFIG on confluentinc/kafka's 4.2 branch)
        TopicConfigKey("segment.ms", "long", None, "log.roll.ms", minimum=1),
        TopicConfigKey("segment.jitter.ms", "long", None, "log.roll.jitter.ms", minimum=0),
        TopicConfigKey("segment.index.bytes", "int", None, "log.index.size.max.bytes", minimum=4),
        TopicConfigKey("file.delete.delay.ms", "long", None, "log.segment.delete.delay.ms", minimum=0),
        TopicConfigKey("min.compaction.lag.ms", "long", None, "log.cleaner.min.compaction.lag.ms", minimum=0),
        TopicConfigKey("max.compaction.lag.ms", "long", None, "log.cleaner.max.compaction.lag.ms", minimum=1),
        TopicConfigKey(
            "min.cleanable.dirty.ratio", "double", None, "log.cleaner.min.cleanable.ratio", minimum=0, maximum=1
        ),
        TopicConfigKey("unclean.leader.election.enable", "bool", None, "unclean.leader.election.enable"),
        TopicConfigKey("compression.gzip.level", "int", None, "compression.gzip.level", check=gzip_level_complaint),
        TopicConfigKey("compression.lz4.level", "int", None, "compression.lz4.level", minimum=1, maximum=17),
        TopicConfigKey("compression.zstd.level", "int", None, "compression.zstd.level", minimum=-131072, maximum=22),
        TopicConfigKey("preallocate", "bool", None, "log.preallocate"),
        TopicConfigKey(
            "message.timestamp.before.max.ms",
            "long",
            _set("message_timestamp_before_max_ms"),
            "log.message.timestamp.before.max.ms",
            minimum=0,
        ),
        TopicConfigKey(
            "message.timestamp.after.max.ms",
            "long",
            _set("message_timestamp_after_max_ms"),
            "log.message.timestamp.after.max.ms",
            minimum=0,
        ),
        TopicConfigKey(
            "leader.replication.throttled.replicas",
            "list",
            None,
            None,
            check=_throttled("leader.replication.throttled.replicas"),
            default="",
        ),
        TopicConfigKey(
            "follower.replication.throttled.replicas",
            "list",
            None,
            None,
            check=_throttled("follower.replication.throttled.replicas"),
            default="",
        ),
        TopicConfigKey("remote.storage.enable", "bool", None, None, check=_no_tiered_storage, default="false"),
        TopicConfigKey("local.retention.ms", "long", None, "log.local.retention.ms", minimum=-2),
        TopicConfigKey("local.retention.bytes", "long", None, "log.local.retention.bytes", minimum=-2),
        TopicConfigKey("remote.log.copy.disable", "bool", None, None, default="false"),
        TopicConfigKey("remote.log.delete.on.disable", "bool", None, None, default="false"),
    )
}


def check_topic_name(name: str) -> None:
    """Kafka's Topic.validate; raises TopicError(INVALID_TOPIC_EXCEPTION)."""
    if not name or name in (".", ".."):
        raise TopicError(INVALID_TOPIC_EXCEPTION, f"Topic name '{name}' is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(INVALID_TOPIC_EXCEPTION, f"Topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_NAME.fullmatch(name):
        raise TopicError(
            INVALID_TOPIC_EXCEPTION,
            f"Topic name '{name}' is illegal: only ASCII alphanumerics, '.', '_' and '-' are allowed",
        )


def check_topic_configs(configs: dict[str, str | None], *, internal: bool = False,
                        stored: bool = False) -> dict[str, str]:  # fmt: skip
    """Returns the configs with null values dropped; raises TopicError(INVALID_CONFIG) with Kafka's message
    ("Invalid value -5 for configuration max.message.bytes: Value must be at least 0"). `internal` topics
    (made by herd from its own settings) skip the lower bound of segment.bytes; `stored` configs (read back
    from topics.json or a partition's metadata) are checked for names and types only, since they were accepted
    when their topic was made, possibly by a herd with looser bounds."""
    checked: dict[str, str] = {}
    for name, value in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise TopicError(INVALID_CONFIG, f"Unknown topic config name: {name}")
        if value is None:
            continue
        if internal and key.name == "segment.bytes":
            key = replace(key, minimum=1)
        message = key.message(value, bounds=not stored)
        if message is not None:
            raise TopicError(INVALID_CONFIG, message)
        checked[name] = value
    if not stored:  # LogConfig.validateValues, the topic's own values over Kafka's defaults
        low = int(checked.get("min.compaction.lag.ms", 0))
        high = int(checked.get("max.compaction.lag.ms", LONG_MAX))
        if low > high:
            raise TopicError(
                INVALID_CONFIG,
                f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})",
            )
    return checked


def string_configs(configs: Any) -> dict[str, str]:
    """Stored configs (a JSON object read back from topics.json, broker-configs.json or a jsonb column) as a dict
    of strings; raises TypeError or ValueError if it is not an object."""
    return {str(k): str(v) for k, v in dict(configs).items()}


def log_config(defaults: LogConfig, configs: dict[str, str]) -> LogConfig:
    """A partition's LogConfig: the broker's `defaults` with the topic's (checked) `configs` applied."""
    cfg = defaults
    for name, value in configs.items():
        key = TOPIC_CONFIGS[name]
        if key.apply is not None:
            cfg = key.apply(cfg, int(value) if key.kind in ("int", "long") else value)
    return cfg


@dataclass(frozen=True, slots=True)
class Node:
    """A node of the cluster as clients are told of it (Metadata, FindCoordinator, DescribeCluster)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def check_new_topic(
    name: str, partitions: int, configs: dict[str, str | None] | None, existing: Iterable[str]
) -> dict[str, str]:
    """The checks of a topic to create, in Kafka's order, against the names of the `existing` topics; returns
    its configs checked (check_topic_configs). Raises TopicError with INVALID_TOPIC_EXCEPTION,
    TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS or INVALID_CONFIG."""
    check_topic_name(name)
    names = set(existing)
    if name in names:
        raise TopicError(TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    collision = _collision_name(name)
    for other in sorted(names):
        if _collision_name(other) == collision:
            raise TopicError(INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}")
    if partitions < 1:
        raise TopicError(INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    return check_topic_configs(dict(configs or {}), internal=name in INTERNAL_TOPICS)


def check_growth(current: int, total: int) -> None:
    """Raises TopicError(INVALID_PARTITIONS) unless `total` partitions would grow a topic of `current`."""
    if total <= current:
        raise TopicError(
            INVALID_PARTITIONS, f"Topic currently has {current} partitions, {total} would not be an increase."
        )


def check_room(new_partitions: int, hosted: int, max_partitions: int) -> None:
    """Raises TopicError(POLICY_VIOLATION) if one request may not create `new_partitions` partitions or a
    broker hosting `hosted` would host more than `max_partitions` (max.broker.partitions)."""
    if new_partitions > MAX_PARTITIONS_PER_REQUEST:
        log.warning(
            "refused to create %d partitions in one request (at most %d)", new_partitions, MAX_PARTITIONS_PER_REQUEST
        )
        raise TopicError(POLICY_VIOLATION, TOO_MANY_PER_REQUEST)
    if hosted + new_partitions > max_partitions:
        log.warning(
            "refused to create %d partitions: this broker hosts %d, max.broker.partitions is %d",
            new_partitions,
            hosted,
            max_partitions,
        )
        raise TopicError(
            POLICY_VIOLATION,
            f"Creating {new_partitions} partitions would take this broker to "
            f"{hosted + new_partitions}, over max.broker.partitions={max_partitions}.",
        )


UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."  # Kafka's Errors.UNKNOWN_TOPIC_OR_PARTITION


def unknown_topic() -> TopicError:
    return TopicError(UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    # one per partition: its log where this node leads it, None where another node does (cluster mode only)
    partitions: list[PartitionLog | None] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(slots=True)
class _Entry:
    """One topic as topics.json records it."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "id": str(self.topic_id), "partitions": self.partitions, "configs": self.configs}


class TopicIndex:
    """What both clusters answer from the topics they hold in memory (`Cluster` on a single node,
    `herd.cluster.shared.SharedCluster` in cluster mode): lookups by name and id, the partition logs this node
    leads, the room left under max.broker.partitions, and a partition's LogConfig."""

    def __init__(self, defaults: LogConfig, node_id: int, max_partitions: int) -> None:
        self._defaults = defaults
        self.node_id = node_id
        self.max_partitions = max_partitions
        self.cluster_id = ""
        self._topics: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        # moves whenever a topic is created or deleted or gains partitions (consumer groups watch it: their
        # coordinator's TopicsImage, herd.runtime.coordinator)
        self.topics_version = 0
        # the dynamic broker configs by resource name ("" for the cluster default, else a node id), as stored
        self.broker_configs: dict[str, dict[str, str]] = {}
        # called with broker_configs whenever they change (the broker applies them: herd.server.broker)
        self.on_broker_configs: Callable[[dict[str, dict[str, str]]], None] | None = None

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> PartitionLog | None:
        """The partition's log if this node leads it, else None (unknown, or led by another node)."""
        topic = self._topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def topics(self) -> Iterator[Topic]:
        return iter(list(self._topics.values()))

    def hosted_partitions(self) -> int:
        """The partitions max.broker.partitions bounds: every partition of every topic (in cluster mode any one
        node may have to host them all after failures, so the bound is the cluster's)."""
        return sum(len(t.partitions) for t in self._topics.values())

    def check_room(self, new_partitions: int) -> None:
        """Raises TopicError(POLICY_VIOLATION) if one request may not create `new_partitions` partitions or the
        broker would host more than max.broker.partitions."""
        check_room(new_partitions, self.hosted_partitions(), self.max_partitions)

    def log_config(self, configs: dict[str, str]) -> LogConfig:
        return log_config(self._defaults, configs)

    async def stored_end_offsets(self) -> dict[tuple[str, int], int] | None:
        """(topic, partition) -> the end offset (high watermark) stored for the partitions other nodes lead, as
        consumer lag reads them (herd.server.lag); None when the store cannot be read now. A single node leads
        every partition, and its logs answer: none here (cluster mode: `herd.cluster.shared.read_end_offsets`)."""
        return {}

    def close(self) -> None:
        """Close what this view keeps open: nothing here (the embedded `Cluster` closes its store; a cluster
        node shuts its shared cluster down itself, herd.server.node)."""

    def set_defaults(self, defaults: LogConfig) -> None:
        """New broker defaults (a dynamic broker config changed): every partition this node leads takes its new
        LogConfig at once, the topic's own configs still over the defaults."""
        if defaults == self._defaults:
            return
        self._defaults = defaults
        for topic in self._topics.values():
            self._reconfigure(topic)

    def _reconfigure(self, topic: Topic) -> None:
        """Apply the topic's configs, over the defaults, to each of its partitions this node leads."""
        cfg = self.log_config(topic.configs)
        for partition in topic.partitions:
            if partition is not None:
                partition.set_config(cfg)

    def _broker_configs_changed(self, configs: dict[str, dict[str, str]]) -> None:
        self.broker_configs = configs
        if self.on_broker_configs is not None:
            self.on_broker_configs(configs)


class Cluster(TopicIndex):
    """The topics of this (single-node) cluster and their partition logs."""

    shared = False  # herd.cluster.shared.SharedCluster is the cluster-mode twin, with its state in PostgreSQL
    # as herd.cluster.api.ClusterAdmin's: False, this node leads every partition of a topic as soon as it is made
    places_partitions = False

    def __init__(self, store: TopicStore, defaults: LogConfig, node_id: int, max_partitions: int = 10_000) -> None:
        super().__init__(defaults, node_id, max_partitions)
        self._dir = Path(store.root_dir)  # topics.json lives beside the partition directories
        self._store = store
        self._strays: set[tuple[str, int]] = set()  # partition directories kept but not served

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the metadata, finish interrupted deletions, adopt or report unnamed partition directories and
        open (recover) every partition. Raises MetadataError if topics.json cannot be read or written."""
        state = self._read_state()
        self.cluster_id = (state or {}).get("cluster_id") or _new_cluster_id()
        self._broker_configs_changed(self._read_broker_configs())  # the defaults partitions open with
        entries = self._parse_state(state) if state is not None else []
        on_disk = self._store.existing_partitions()
        if state is None and on_disk:
            log.warning(
                "%s is missing: rebuilding the topics from the %d partition directories in %s",
                self._state_path,
                len(on_disk),
                self._dir,
            )
        try:
            changed = self._finish_deletions(entries)
        except OSError as e:
            raise MetadataError(f"cannot finish an interrupted topic deletion in {self._dir}: {e}") from None
        on_disk = self._store.existing_partitions()
        known = {(e.name, p) for e in entries for p in range(e.partitions)}
        changed |= self._adopt(entries, [k for k in on_disk if k not in known], rebuild=state is None)
        present = set(on_disk)
        for entry in entries:
            self._open_entry(entry, present)
        if state is None or changed:
            try:
                self._persist(entries)
            except OSError as e:
                raise MetadataError(f"cannot write {self._state_path}: {e.strerror or e}") from None
        self._purge_deleted()

    def close(self) -> None:
        self._store.close()  # flushes and closes every partition, and releases the directory's lock

    # -- queries -----------------------------------------------------------------------------------------------

    def leader(self, name: str, index: int) -> tuple[int, int]:
        """The node leading a partition and its leader epoch: this node, epoch 0, on a single node."""
        return self.node_id, 0

    # -- changes -----------------------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str | None] | None = None, *, validate_only: bool = False
    ) -> Topic:
        """Create the topic with all its partitions, or nothing. Raises TopicError with TOPIC_ALREADY_EXISTS,
        INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, INVALID_CONFIG, POLICY_VIOLATION (a limit) or
        KAFKA_STORAGE_ERROR (the disk failed; nothing was created)."""
        checked = check_new_topic(name, partitions, configs, self._topics)
        self.check_room(partitions)
        self._check_no_strays(name, 0, partitions)
        topic = Topic(name, uuid.uuid4(), checked)
        if validate_only:
            return topic
        topic.partitions = self._make_partitions(topic, 0, partitions)
        self._commit(
            [*self._entries(), _Entry(name, topic.topic_id, partitions, checked)],
            f"create topic {name}",
            undo=lambda: self._remove_partitions(name, range(partitions)),
        )
        self._index(topic)
        log.info("created topic %s with %d partitions", name, partitions)
        return topic

    def add_partitions(self, name: str, total: int, *, validate_only: bool = False) -> None:
        """Grow a topic to `total` partitions, all of the new ones or none; raises TopicError."""
        topic = self._require(name)
        current = len(topic.partitions)
        check_growth(current, total)
        self.check_room(total - current)
        self._check_no_strays(name, current, total)
        if validate_only:
            return
        added = self._make_partitions(topic, current, total)
        entries = [replace(e, partitions=total) if e.name == name else e for e in self._entries()]
        self._commit(
            entries,
            f"grow topic {name} to {total} partitions",
            undo=lambda: self._remove_partitions(name, range(current, total)),
        )
        topic.partitions.extend(added)
        self.topics_version += 1
        log.info("topic %s grown to %d partitions", name, total)

    def delete_topic(self, name: str) -> Topic:
        """Delete the topic and its data; raises TopicError (KAFKA_STORAGE_ERROR: nothing changed)."""
        topic = self._require(name)
        marked: list[tuple[int, str]] = []

        def undo() -> None:
            for index, marker in reversed(marked):
                try:
                    self._store.unmark(name, index, marker)
                except OSError as e:
                    log.error(
                        "could not rename %s back after a failed delete of topic %s (%s): the next start "
                        "finishes deleting the topic",
                        marker,
                        name,
                        e,
                    )
            self._sync_quietly()

        try:
            for index in range(len(topic.partitions)):
                marker = self._store.mark_deleted(name, index, topic.topic_id.hex)
                if marker is not None:
                    marked.append((index, marker))
            self._store.sync()
        except OSError as e:
            undo()
            raise self._storage_error(f"delete topic {name}", e) from None
        self._commit([e for e in self._entries() if e.name != name], f"delete topic {name}", undo=undo)
        del self._topics[name]
        del self._by_id[topic.topic_id]
        self.topics_version += 1
        for index in range(len(topic.partitions)):
            self._store.forget(name, index)
        for _, marker in marked:
            try:
                self._store.purge(posixpath.basename(marker))
            except OSError as e:
                log.warning("could not remove %s of deleted topic %s (%s): removed at the next start", marker, name, e)
        log.info("deleted topic %s", name)
        return topic

    def alter_topic_configs(self, name: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        """Replace the topic's configs with `change(current configs)`, checked (TopicError(INVALID_CONFIG)): the
        partitions' partition.metadata first, then topics.json, durably, and only then the running partitions
        (`set_config`). Raises TopicError (UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, KAFKA_STORAGE_ERROR:
        nothing changed) or whatever `change` raises."""
        topic = self._require(name)
        old = dict(topic.configs)
        configs = check_topic_configs(dict(change(dict(old))), internal=topic.internal)
        if validate_only or configs == old:
            return
        what = f"alter the configs of topic {name}"

        def undo() -> None:
            try:
                self._write_all_partition_metadata(topic, old)
            except OSError as e:
                log.error(
                    "could not restore the partition metadata of topic %s (%s): topics.json keeps its configs", name, e
                )

        try:
            self._write_all_partition_metadata(topic, configs)
        except OSError as e:
            undo()
            raise self._storage_error(what, e) from None
        entries = [replace(e, configs=configs) if e.name == name else e for e in self._entries()]
        self._commit(entries, what, undo=undo)
        topic.configs = configs
        self._reconfigure(topic)
        log.info("topic %s configs are now %s", name, configs)

    def alter_broker_configs(self, resource: str, change: ConfigChange, *, validate_only: bool = False) -> None:
        """Replace the dynamic broker configs of `resource` ("" for the cluster default, else this node's id) with
        `change(current)` (which checks them), written durably to broker-configs.json before the broker applies
        them (`on_broker_configs`). Raises TopicError(KAFKA_STORAGE_ERROR: nothing changed) or what `change`
        raises."""
        configs = dict(change(dict(self.broker_configs.get(resource, {}))))
        if validate_only:
            return
        updated = {k: v for k, v in {**self.broker_configs, resource: configs}.items() if v}
        try:
            write_atomically(
                self._store.fs,
                self._broker_configs_path,
                json.dumps({"version": 1, "configs": updated}, indent=1, sort_keys=True).encode(),
            )
        except OSError as e:
            raise self._storage_error("store the dynamic broker configs", e) from None
        self._broker_configs_changed(updated)
        log.info(
            "dynamic broker configs of %s are now %s",
            repr(resource) if resource else "the cluster default",
            _hide_passwords(configs),
        )

    def _write_all_partition_metadata(self, topic: Topic, configs: dict[str, str]) -> None:
        for index in range(len(topic.partitions)):
            self._store.write_partition_metadata(topic.name, index, topic.topic_id, configs)
        self._store.sync()

    def _check_no_strays(self, name: str, start: int, end: int) -> None:
        kept = sorted(p for t, p in self._strays if t == name and start <= p < end)
        if kept:
            raise TopicError(
                TOPIC_ALREADY_EXISTS,
                f"Partition directories of topic '{name}' that topics.json does not name are kept in "
                f"{self._dir} (partitions {kept}); remove them or rebuild the metadata first.",
            )

    def _require(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is None:
            raise unknown_topic()
        return topic

    def _index(self, topic: Topic) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self.topics_version += 1

    # -- making and removing partitions ------------------------------------------------------------------------

    def _make_partitions(self, topic: Topic, start: int, end: int) -> list[PartitionLog]:
        """Open partitions start..end-1 with their partition.metadata, durably; on failure remove every one made
        and raise TopicError(KAFKA_STORAGE_ERROR)."""
        cfg = self.log_config(topic.configs)
        made: list[PartitionLog] = []
        try:
            for index in range(start, end):
                made.append(self._store.open_partition(topic.name, index, cfg))
                self._store.write_partition_metadata(topic.name, index, topic.topic_id, topic.configs)
            self._store.sync()
        except (OSError, LogError) as e:
            self._remove_partitions(topic.name, range(start, start + len(made) + 1))
            raise self._storage_error(f"create partition {topic.name}-{start + len(made)}", e) from None
        return made

    def _remove_partitions(self, name: str, indices: range) -> None:
        """Roll back partitions just made (closed, renamed to their deletion name, removed); a failure is logged:
        what stays is adopted or reported at the next start, never served before."""
        for index in indices:
            try:
                self._store.forget(name, index)
                marker = self._store.mark_deleted(name, index, uuid.uuid4().hex)
                if marker is not None:
                    self._store.purge(posixpath.basename(marker))
            except (OSError, LogError) as e:
                log.error(
                    "could not remove partition %s-%d after a failed change (%s): it stays in %s",
                    name,
                    index,
                    e,
                    self._dir,
                )
        self._sync_quietly()

    def _commit(self, entries: list[_Entry], what: str, undo: Callable[[], None]) -> None:
        """Write topics.json as `entries`; on failure run `undo` and raise TopicError(KAFKA_STORAGE_ERROR)."""
        try:
            self._persist(entries)
        except OSError as e:
            undo()
            raise self._storage_error(what, e) from None

    def _storage_error(self, what: str, error: Exception) -> TopicError:
        log.error("could not %s: %s (nothing was changed)", what, error)
        return TopicError(KAFKA_STORAGE_ERROR, f"Could not {what}: {error}")

    def _sync_quietly(self) -> None:
        try:
            self._store.sync()
        except OSError as e:
            log.error("could not fsync %s: %s", self._dir, e)

    # -- loading -----------------------------------------------------------------------------------------------

    def _parse_state(self, state: dict[str, Any]) -> list[_Entry]:
        try:
            entries = [
                _Entry(t["name"], uuid.UUID(t["id"]), int(t["partitions"]), string_configs(t.get("configs", {})))
                for t in state["topics"]
            ]
            for entry in entries:
                check_topic_name(entry.name)
                check_topic_configs(dict(entry.configs), stored=True)
                if entry.partitions < 1:
                    raise ValueError(f"topic {entry.name} has {entry.partitions} partitions")
        except (KeyError, TypeError, ValueError, AttributeError, TopicError) as e:
            raise MetadataError(self._unreadable(f"its content is not herd's topic metadata ({e!r})")) from None
        return entries

    def _finish_deletions(self, entries: list[_Entry]) -> bool:
        """Drop from `entries` every topic some of whose directories are marked as being deleted (the rename
        came first, then topics.json: a crash in between), marking its other partitions too."""
        being_deleted = {unique for _, unique in self._store.marked_for_deletion() if unique}
        finished = [e for e in entries if e.topic_id.hex in being_deleted]
        for entry in finished:
            log.warning(
                "finishing the deletion of topic %s, interrupted before it was recorded in %s",
                entry.name,
                self._state_path,
            )
            for index in range(entry.partitions):
                self._store.mark_deleted(entry.name, index, entry.topic_id.hex)
            entries.remove(entry)
        if finished:
            self._store.sync()
        return bool(finished)

    def _adopt(self, entries: list[_Entry], unnamed: list[tuple[str, int]], *, rebuild: bool) -> bool:
        """Adopt the partition directories topics.json does not name when their partition.metadata tells their
        topic (or, rebuilding a missing topics.json, always); keep and report the rest. True if any adopted."""
        by_topic: dict[str, list[int]] = defaultdict(list)
        for name, index in unnamed:
            by_topic[name].append(index)
        by_name = {e.name: e for e in entries}
        adopted = False
        for name, indices in sorted(by_topic.items()):
            metadata = {i: self._partition_metadata(name, i) for i in indices}
            ids = {m[0] for m in metadata.values() if m is not None}
            entry = by_name.get(name)
            if entry is not None:  # a crash while growing the topic: partitions of the same id beyond its count
                grown = [i for i in indices if metadata[i] is not None and metadata[i][0] == entry.topic_id]
                if grown:
                    self._warn_adopted(name, grown, "grown")
                    entry.partitions = max(grown) + 1
                    adopted = True
                self._keep(name, [i for i in indices if i not in grown])
                continue
            try:
                check_topic_name(name)
            except TopicError:
                self._keep(name, indices)
                continue
            if len(ids) > 1 or (not ids and not rebuild):
                self._keep(name, indices)
                continue
            configs_found = [m[1] for _, m in sorted(metadata.items()) if m is not None and m[1] is not None]
            configs = configs_found[0] if configs_found else self._lost_configs(name)
            entry = _Entry(name, ids.pop() if ids else uuid.uuid4(), max(indices) + 1, configs)
            entries.append(entry)
            by_name[name] = entry
            self._warn_adopted(name, indices, "adopted")
            adopted = True
        return adopted

    def _partition_metadata(self, name: str, index: int) -> tuple[uuid.UUID, dict[str, str] | None] | None:
        try:
            return self._store.read_partition_metadata(name, index)
        except (OSError, ValueError) as e:
            log.warning("cannot read the partition metadata of %s-%d: %s", name, index, e)
            return None

    def _lost_configs(self, name: str) -> dict[str, str]:
        if name == OFFSETS_TOPIC:
            return dict(OFFSETS_TOPIC_CONFIGS)
        if name == TRANSACTION_STATE_TOPIC:
            return dict(TRANSACTION_STATE_TOPIC_CONFIGS)
        if name == SHARE_STATE_TOPIC:
            return dict(SHARE_STATE_TOPIC_CONFIGS)
        log.error(
            "topic %s rebuilt without its configs (no partition.metadata keeps them): it now has the broker "
            "defaults; set its configs again if it had any",
            name,
        )
        return {}

    def _warn_adopted(self, name: str, indices: list[int], how: str) -> None:
        log.warning(
            "topic %s %s from partition directories that %s does not name (partitions %s)",
            name,
            how,
            self._state_path,
            sorted(indices),
        )

    def _keep(self, name: str, indices: list[int]) -> None:
        if not indices:
            return
        self._strays.update((name, i) for i in indices)
        log.warning(
            "kept partition directories of %s (partitions %s) that %s does not name and whose topic their "
            "partition.metadata does not tell: not served and not deleted; remove them, or stop herd and "
            "move %s away to rebuild the topics from the directories",
            name,
            sorted(indices),
            self._state_path,
            TOPICS_FILE,
        )

    def _open_entry(self, entry: _Entry, present: set[tuple[str, int]]) -> None:
        topic = Topic(entry.name, entry.topic_id, entry.configs)
        cfg = self.log_config(entry.configs)
        for index in range(entry.partitions):
            if (entry.name, index) not in present:
                log.warning("partition directory %s-%d is missing from %s: created empty", entry.name, index, self._dir)
            topic.partitions.append(self._store.open_partition(entry.name, index, cfg))
            found = self._partition_metadata(entry.name, index)
            if found is None:
                self._write_partition_metadata(topic, index)
            elif found[0] != entry.topic_id:
                log.error(
                    "%s-%d/partition.metadata names topic id %s, topics.json %s: serving it as %s",
                    entry.name,
                    index,
                    found[0],
                    entry.topic_id,
                    entry.topic_id,
                )
        self._index(topic)

    def _write_partition_metadata(self, topic: Topic, index: int) -> None:
        try:
            self._store.write_partition_metadata(topic.name, index, topic.topic_id, topic.configs)
        except OSError as e:
            log.warning("could not write the partition metadata of %s-%d: %s", topic.name, index, e)

    def _purge_deleted(self) -> None:
        for name, _ in self._store.marked_for_deletion():
            try:
                self._store.purge(name)
                log.info("removed %s, a deleted partition", name)
            except OSError as e:
                log.error("could not remove %s (a deleted partition) from %s: %s", name, self._dir, e)

    # -- persistence -------------------------------------------------------------------------------------------

    @property
    def _state_path(self) -> str:
        return str(self._dir / TOPICS_FILE)

    def _unreadable(self, why: str) -> str:
        return (
            f"{self._state_path} cannot be used: {why}. Restore it from a backup, or move it away to rebuild "
            f"the topics from the partition directories (each keeps its topic's id and configs)"
        )

    def _read_state(self) -> dict[str, Any] | None:
        """topics.json, or None if there is none; raises MetadataError if it cannot be read or parsed."""
        try:
            state = json.loads(read_whole(self._store.fs, self._state_path))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise MetadataError(self._unreadable(e.strerror or str(e))) from None
        except ValueError as e:  # bad JSON or UTF-8
            raise MetadataError(self._unreadable(f"not valid JSON ({e})")) from None
        if not isinstance(state, dict) or not isinstance(state.get("topics"), list):
            raise MetadataError(self._unreadable("its content is not herd's topic metadata"))
        return state

    @property
    def _broker_configs_path(self) -> str:
        return str(self._dir / BROKER_CONFIGS_FILE)

    def _read_broker_configs(self) -> dict[str, dict[str, str]]:
        """broker-configs.json ({} when there is none); raises MetadataError if it cannot be read."""
        try:
            state = json.loads(read_whole(self._store.fs, self._broker_configs_path))
            return {str(r): string_configs(c) for r, c in dict(state["configs"]).items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise MetadataError(
                f"{self._broker_configs_path} cannot be used ({e}): restore it from a backup, or "
                "move it away to start with the static broker configs only"
            ) from None

    def _entries(self) -> list[_Entry]:
        return [_Entry(t.name, t.topic_id, len(t.partitions), t.configs) for t in self._topics.values()]

    def _persist(self, entries: list[_Entry]) -> None:
        """Write topics.json durably; raises OSError."""
        state = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "node_id": self.node_id,
            "topics": [e.to_json() for e in entries],
        }
        write_atomically(self._store.fs, self._state_path, json.dumps(state, indent=1).encode())


def _collision_name(name: str) -> str:
    return name.replace(".", "_")


def _new_cluster_id() -> str:
    return kafka_uuid(uuid.uuid4())  # Kafka's cluster ids are Uuids in the same base64 form


def _hide_passwords(configs: dict[str, str]) -> dict[str, str]:
    """`configs` with the values of Kafka's PASSWORD configs (sasl.jaas.config, ...) hidden, for the log."""
    return {
        name: "[hidden]"
        if (c := KAFKA_BROKER_CONFIGS_BY_NAME.get(name)) is not None and c.kind == "password"
        else value
        for name, value in configs.items()
    }
