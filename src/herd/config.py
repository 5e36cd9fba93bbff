"""Broker configuration, named and defaulted as Kafka's broker properties.

Every setting herd understands is one row of `SETTINGS`: its Kafka property name, its type, its default and
its bounds. `BrokerConfig.from_properties` checks a mapping of property names to strings (from a
server.properties file and `--override key=value` flags) against that table, so an unknown name or a bad value
is refused before anything starts, with one line that says which and why. DescribeConfigs answers from the
same table, so what the broker reports is what it runs with.
"""

from __future__ import annotations

import enum
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from herd.cluster.config_ops import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    INVALID_CONFIG,
    INVALID_REQUEST,
    TIMESTAMP_TYPES,
    ConfigChangeError,
    number_complaint,
)
from herd.log.api import LONG_MAX, LogConfig

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A setting is unknown or its value is not acceptable; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class Setting:
    name: str  # Kafka's property name
    kind: str  # "int", "long", "bool", "string", "list"
    default: Any
    doc: str
    minimum: int | None = None
    maximum: int | None = None
    nullable: bool = False
    check: Callable[[Any], str | None] | None = None  # returns a complaint, or None when fine
    # Changeable at run time (AlterConfigs on a BROKER resource): the settings Kafka lets change at run time
    # (DynamicBrokerConfig.AllDynamicConfigs) that herd applies without a restart; all are cluster-wide in Kafka's
    # sense (settable as the cluster default or for one broker).
    dynamic: bool = False

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


def _listeners_check(value: str, *, routable: bool = False) -> str | None:
    """Why `value` is not a list of NAME://HOST:PORT listeners, or None. With `routable` (advertised.listeners),
    the wildcard address is refused too, as Kafka does: clients cannot connect to it (KafkaConfig's
    "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0")."""
    for item in _split_list(value):
        match = _LISTENER.fullmatch(item)
        if not match:
            return f"'{item}' is not a listener of the form PLAINTEXT://HOST:PORT"
        if int(match.group("port")) > 65535:
            return f"'{item}': port {match.group('port')} is out of range [0, 65535]"
        if routable and match.group("host").strip("[]") in ("0.0.0.0", "::"):
            return f"'{item}': clients cannot connect to the wildcard address; name this host"
    return None


_LISTENER = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[0-9a-fA-F:.]*\]|[^:/\s]*):(?P<port>\d{1,5})")


def _http_listener_check(value: str) -> str | None:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535 or not host.strip("[]"):
        return f"'{value}' is not HOST:PORT (port 0 picks a free port)"
    return None


def _log_dirs_check(value: str) -> str | None:
    """Each comma-separated path must be able to become a directory (mkdir would only say "File exists" or "Not a
    directory"), and no directory may be named twice (Kafka's LogManager refuses "Duplicate log directory found")."""
    paths = _split_list(str(value))
    if not paths:
        return "must name a directory"
    for item in paths:
        path = Path(item)
        for ancestor in (path, *path.parents):
            if ancestor.exists():
                if not ancestor.is_dir():
                    return f"'{ancestor}' is a file, not a directory"
                break
    resolved = [Path(p).resolve() for p in paths]
    if len(set(resolved)) < len(resolved):
        return f"a directory is named twice: {', '.join(paths)}"
    return None


def _split_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


SETTINGS: tuple[Setting, ...] = (
    # Server and network
    Setting("listeners", "string", "PLAINTEXT://127.0.0.1:9092",
            "Comma-separated listeners, NAME://HOST:PORT; port 0 picks a free port.", check=_listeners_check),
    Setting("advertised.listeners", "string", None,
            "Listeners given to clients in Metadata; defaults to the bound listeners.", nullable=True,
            check=lambda v: None if v is None else _listeners_check(v, routable=True)),
    Setting("node.id", "int", 0, "This broker's id.", minimum=0),
    Setting("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted.", minimum=1),
    Setting("message.max.bytes", "int", 1048588, "Largest record batch accepted (MESSAGE_TOO_LARGE).", minimum=0,
            dynamic=True),
    Setting("herd.message.max.decompressed.bytes", "int", 64 * 1024 * 1024,
            "Largest records section of one compressed batch once decompressed (MESSAGE_TOO_LARGE beyond it).",
            minimum=1024),
    Setting("queued.max.requests", "int", 500,
            "Requests read and not yet answered, across the broker, before pipelined requests stop being read.",
            minimum=1),
    Setting("queued.max.request.bytes", "long", 268435456,
            "Bytes of requests being received, across the broker, before reading pauses; -1 is unbounded.",
            minimum=-1),
    Setting("max.connections", "int", 0,
            "Most connections the broker takes; 0: half of the open-files limit (RLIMIT_NOFILE).", minimum=0,
            dynamic=True),
    Setting("max.connections.per.ip", "int", INT_MAX, "Most connections from one address.", minimum=1, dynamic=True),
    Setting("connections.max.idle.ms", "long", 600000,
            "Close a connection that has sent, received and been owed nothing for this long.", minimum=1),
    Setting("fetch.max.bytes", "int", 57671680, "Largest Fetch answer, whatever the request asks.", minimum=1024),
    # Logs
    Setting("log.dirs", "string", "./herd-data",
            "Comma-separated directories holding the partition logs; the first also keeps topics.json.",
            check=_log_dirs_check),
    Setting("num.partitions", "int", 1, "Partitions of an auto-created topic.", minimum=1),
    Setting("auto.create.topics.enable", "bool", True, "Create unknown topics on Metadata requests."),
    Setting("log.segment.bytes", "int", 1073741824, "Size at which a segment rolls.", minimum=14, dynamic=True),
    Setting("log.retention.ms", "long", None, "Time-based retention; -1 keeps forever.", nullable=True, minimum=-1,
            dynamic=True),
    Setting("log.retention.minutes", "int", None, "Retention in minutes (if log.retention.ms unset).",
            nullable=True, minimum=-1),
    Setting("log.retention.hours", "int", 168, "Retention in hours (if ms and minutes unset).", minimum=-1),
    Setting("log.retention.bytes", "long", -1, "Size-based retention per partition; -1 is unlimited.", minimum=-1,
            dynamic=True),
    Setting("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", minimum=1),
    Setting("log.cleaner.delete.retention.ms", "long", 86400000,
            "How long compaction keeps tombstones (delete.retention.ms of compacted topics).", minimum=0),
    Setting("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many messages.", minimum=1,
            dynamic=True),
    Setting("log.flush.interval.ms", "long", None, "fsync when data is this old; unset: OS decides.",
            nullable=True, minimum=0, dynamic=True),
    Setting("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often log.flush.interval.ms is checked.",
            minimum=0),
    Setting("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", minimum=0, dynamic=True),
    Setting("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.",
            check=lambda v: None if v in TIMESTAMP_TYPES else "must be CreateTime or LogAppendTime",
            dynamic=True),
    Setting("log.cleanup.policy", "list", "delete",
            "The default cleanup.policy of topics: delete, compact or both (only __consumer_offsets is compacted).",
            check=lambda v: None if v and all(p.strip() in CLEANUP_POLICIES for p in v.split(","))
            else "must be delete, compact or both, comma-separated", dynamic=True),
    Setting("compression.type", "string", "producer",
            "The default compression.type of topics (herd stores batches as the producer compressed them).",
            check=lambda v: None if v in COMPRESSION_TYPES else f"must be one of {', '.join(COMPRESSION_TYPES)}",
            dynamic=True),
    Setting("min.insync.replicas", "int", 1, "The default min.insync.replicas of topics (one replica in herd).",
            minimum=1, dynamic=True),
    Setting("delete.topic.enable", "bool", True, "Allow DeleteTopics."),
    # Idempotent producers
    Setting("producer.id.expiration.ms", "int", 86400000,
            "How long the state of an idempotent producer that stopped appending is kept.", minimum=1, dynamic=True),
    Setting("herd.producer.state.max.entries", "int", 100000,
            "Most (partition, producer id) states kept; beyond it the least recently used are forgotten.",
            minimum=1),
    # Disk failures and file handles (herd's own: Kafka has neither)
    Setting("herd.log.recovery.backoff.ms", "long", 1000,
            "First retry of a partition that failed on a disk error (doubling while it keeps failing).", minimum=1),
    Setting("herd.log.recovery.backoff.max.ms", "long", 60000, "Longest wait between two such retries.",
            minimum=1),
    Setting("herd.log.max.open.files", "int", 0,
            "Most segment files kept open at once (least recently used closed); 0: half of RLIMIT_NOFILE.",
            minimum=0),
    Setting("max.broker.partitions", "int", 10000,
            "Most partitions this broker hosts, __consumer_offsets included (KIP-578's name); creating more gets "
            "POLICY_VIOLATION.", minimum=1),
    # Cluster mode (nodes sharing their state in PostgreSQL); without a database URL the node is on its own
    Setting("herd.cluster.database.url", "string", None,
            "PostgreSQL URL (postgresql://user:password@host:port/db) of a cluster's shared state; unset: this node "
            "is a cluster of its own, with its data in log.dirs.", nullable=True),
    Setting("broker.session.timeout.ms", "int", 9000,
            "A node that has not renewed its lease for this long loses its partitions to the live nodes.",
            minimum=1),
    Setting("broker.heartbeat.interval.ms", "int", 2000, "How often a node renews its lease.", minimum=1),
    Setting("controlled.shutdown.enable", "bool", True,
            "On SIGTERM, hand this node's partitions to the other nodes before exiting."),
    # HTTP listener and fault injection (herd's own)
    Setting("herd.http.listener", "string", None,
            "HOST:PORT of the node's HTTP listener (fault injection API); port 0 picks a free port; unset: none.",
            nullable=True, check=lambda v: None if v is None else _http_listener_check(v)),
    Setting("herd.faults.enable", "bool", False,
            "Let users inject faults and move coordinators/leaders over the HTTP listener (for tests only)."),
    # Group coordinator
    Setting("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", minimum=1),
    Setting("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", minimum=1),
    Setting("group.initial.rebalance.delay.ms", "int", 3000, "Delay of a new group's first rebalance.", minimum=0),
    Setting("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for.",
            minimum=0),
    Setting("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for.",
            minimum=0),
    Setting("group.max.size", "int", INT_MAX, "Most members in one group.", minimum=1),
    Setting("offsets.retention.minutes", "int", 10080, "How long offsets of an empty group are kept.", minimum=1),
    Setting("offsets.retention.check.interval.ms", "long", 600000, "How often offset expiry runs.", minimum=1),
    Setting("offset.metadata.max.bytes", "int", 4096, "Largest metadata string of a committed offset.",
            minimum=0),
    # Transaction coordinator
    Setting("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", minimum=1),
    Setting("transaction.state.log.segment.bytes", "int", 104857600, "Segment size of __transaction_state.",
            minimum=1),
    Setting("transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms a producer may ask for.",
            minimum=1),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
            "How often transactions open longer than their timeout are aborted.", minimum=1),
    Setting("transaction.partition.verification.enable", "bool", True,
            "Verify with the transaction coordinator that a partition is in the producer's transaction before its "
            "first transactional write there (KIP-890 part 1). Kafka lets it change at run time; herd reads it at start."),
    Setting("transactional.id.expiration.ms", "int", 604800000,
            "How long a transactional id with no transaction open is kept after its last use.", minimum=1),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
            "How often expired transactional ids are removed.", minimum=1),
)

SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def _parse_value(setting: Setting, raw: str) -> Any:
    text = raw.strip()
    if setting.nullable and text in ("", "null"):
        return None
    if setting.kind in ("int", "long"):
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{setting.name}: '{raw}' is not a whole number") from None
        upper = INT_MAX if setting.kind == "int" else LONG_MAX
        low = setting.minimum if setting.minimum is not None else -upper - 1
        high = setting.maximum if setting.maximum is not None else upper
        if not low <= value <= high:
            raise ConfigError(f"{setting.name}: {value} is out of range [{low}, {high}]")
        return value
    if setting.kind == "bool":
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{setting.name}: '{raw}' is not true or false")
        return text.lower() == "true"
    return text


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Parse Java .properties text (key=value or key:value, # and ! comments, backslash continuations)."""
    result: dict[str, str] = {}
    pending = ""
    for number, line in enumerate(text.splitlines(), 1):
        line = pending + line.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if not match:
            raise ConfigError(f"{source}:{number}: expected key=value, got '{line}'")
        result[match.group(1)] = match.group(2)
    return result


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Listener]:
    listeners = []
    for item in _split_list(value):
        m = _LISTENER.fullmatch(item)
        assert m is not None  # checked when the config was built
        listeners.append(Listener(m.group("name"), m.group("host").strip("[]"), int(m.group("port"))))
    return listeners


class ConfigSource(enum.IntEnum):
    """Where a value DescribeConfigs reports comes from (DescribeConfigsResponse.ConfigSource, apache/kafka
    clients/src/main/java/org/apache/kafka/common/requests/DescribeConfigsResponse.java)."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


def broker_synonyms(name: str) -> list[str]:
    """The settings that define the same thing as `name`, highest precedence first (Kafka's
    DynamicBrokerConfig.brokerConfigSynonyms, apache/kafka core/src/main/scala/kafka/server/
    DynamicBrokerConfig.scala)."""
    if name in _RETENTION:
        return list(_RETENTION)
    if name == "log.flush.interval.ms":  # log.flush.scheduler.interval.ms is its default
        return [name, "log.flush.scheduler.interval.ms"]
    return [name]


_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")


def dynamic_complaint(setting: Setting, raw: str) -> str | None:
    """Why `raw` is not a value of `setting`, in the words of Kafka's ConfigDef ("Not a number of type INT",
    "Value must be at least 0"), or None."""
    if setting.kind in ("int", "long"):
        return number_complaint(setting.kind, raw, setting.minimum)
    if setting.kind == "bool":
        return None if raw.strip().lower() in ("true", "false") else "Expected value to be either true or false"
    return setting.check(raw.strip()) if setting.check is not None else None


def check_dynamic(props: Mapping[str, str]) -> None:
    """The checks of a BROKER resource's dynamic configs before they are stored, in Kafka's order and words
    (DynamicBrokerConfig.validateConfigs, called by ConfigAdminManager; Kafka answers its ConfigExceptions with
    INVALID_REQUEST, KAFKA-13609): settings that cannot change at run time, then each value. A name herd does not
    know gets INVALID_CONFIG (Kafka stores unknown names as custom configs; herd would never use them). Raises
    ConfigChangeError."""
    unknown = sorted(n for n in props if n not in SETTINGS_BY_NAME)
    if unknown:
        raise ConfigChangeError(INVALID_CONFIG, f"Unknown broker config name: {unknown[0]}")
    fixed = sorted(n for n in props if not SETTINGS_BY_NAME[n].dynamic)
    if fixed:
        raise ConfigChangeError(INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    for name, raw in props.items():
        complaint = dynamic_complaint(SETTINGS_BY_NAME[name], raw)
        if complaint is not None:
            raise ConfigChangeError(INVALID_REQUEST, f"Invalid value {raw} for configuration {name}: {complaint}")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The checked settings, by Kafka name (`get`) and by attribute (`values`): the static ones (server.properties
    and --override) with the dynamic ones over them (`with_dynamic`)."""

    values: Mapping[str, Any]
    explicit: frozenset[str] = field(default_factory=frozenset)  # names set by the user, not defaulted
    # the dynamic configs in force, as stored (strings): the cluster default and this broker's own
    dynamic_default: Mapping[str, str] = field(default_factory=dict)
    dynamic_broker: Mapping[str, str] = field(default_factory=dict)
    static_values: Mapping[str, Any] | None = None  # the values before the dynamic ones, when there are any

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "BrokerConfig":
        """Raises ConfigError for an unknown name or a bad value."""
        values = {s.name: s.default for s in SETTINGS}
        for name, raw in props.items():
            setting = SETTINGS_BY_NAME.get(name)
            if setting is None:
                raise ConfigError(f"unknown setting '{name}'")
            value = _parse_value(setting, raw)
            if setting.check is not None and value is not None:
                complaint = setting.check(value)
                if complaint:
                    raise ConfigError(f"{name}: {complaint}")
            values[name] = value
        config = cls(values=values, explicit=frozenset(props))
        config._check_relations()
        return config

    @classmethod
    def load(cls, path: str | None, overrides: list[str]) -> "BrokerConfig":
        props: dict[str, str] = {}
        if path is not None:
            try:
                text = Path(path).read_bytes().decode()
            except OSError as e:
                raise ConfigError(f"cannot read config file '{path}': {e.strerror}") from None
            except UnicodeDecodeError as e:
                raise ConfigError(f"cannot read config file '{path}': not UTF-8 text "
                                  f"(byte 0x{e.object[e.start]:02x} at position {e.start})") from None
            props.update(parse_properties(text, path))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override expects key=value, got '{item}'")
            props[key.strip()] = value
        return cls.from_properties(props)

    def _check_relations(self) -> None:
        if self.get("group.min.session.timeout.ms") > self.get("group.max.session.timeout.ms"):
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if self.get("broker.heartbeat.interval.ms") >= self.get("broker.session.timeout.ms"):
            raise ConfigError("broker.heartbeat.interval.ms must be less than broker.session.timeout.ms")

    def get(self, name: str) -> Any:
        return self.values[name]

    @property
    def static(self) -> "BrokerConfig":
        """The configuration the broker started with, without its dynamic configs."""
        if self.static_values is None:
            return self
        return BrokerConfig(values=self.static_values, explicit=self.explicit)

    def with_dynamic(self, default: Mapping[str, str], per_broker: Mapping[str, str]) -> "BrokerConfig":
        """The static settings with the dynamic ones over them, this broker's over the cluster default. A stored
        value herd cannot use (not dynamic, or not valid) is logged and left out, as Kafka leaves out what it
        cannot apply (DynamicBrokerConfig.fromPersistentProps)."""
        base = self.static
        values = dict(base.values)
        for layer in (default, per_broker):
            for name, raw in layer.items():
                setting = SETTINGS_BY_NAME.get(name)
                complaint = "not a dynamic config" if setting is None or not setting.dynamic else \
                    dynamic_complaint(setting, raw)
                if complaint is not None or setting is None:
                    log.error("dynamic broker config %s=%s left out: %s", name, raw, complaint)
                    continue
                values[name] = _parse_value(setting, raw)
        return BrokerConfig(values=values, explicit=base.explicit, dynamic_default=dict(default),
                            dynamic_broker=dict(per_broker), static_values=base.values)

    def synonyms(self, name: str) -> list[tuple[str, str | None, ConfigSource]]:
        """Where the value of setting `name` may come from, highest precedence first, as Kafka's ConfigHelper
        lists them (configSynonyms): each synonym set as a dynamic broker config, then as a dynamic default, then
        statically, then Kafka's default, from the first entry for `name` itself on (a synonym of higher
        precedence that is not `name` is left out, as Kafka drops it)."""
        chain = broker_synonyms(name)
        static = self.static
        levels = ((self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                  (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                  ({n: unparse(static.get(n)) for n in static.explicit}, ConfigSource.STATIC_BROKER_CONFIG),
                  ({n: unparse(s.default) for n in chain if (s := SETTINGS_BY_NAME.get(n)) and s.default is not None},
                   ConfigSource.DEFAULT_CONFIG))
        found = [(n, level[n], source) for level, source in levels for n in chain if n in level]
        while found and found[0][0] != name:
            found.pop(0)
        return found

    def with_overrides(self, **props: str) -> "BrokerConfig":
        """A copy with some properties replaced (keys use underscores for dots)."""
        merged = {k: unparse(self.static.values[k]) for k in self.explicit}
        merged.update({k.replace("_", "."): v for k, v in props.items()})
        return BrokerConfig.from_properties(merged)

    @property
    def log_dirs(self) -> list[str]:
        """The directories of log.dirs, in the order given (the first keeps topics.json)."""
        return _split_list(self.get("log.dirs"))

    @property
    def http_listener(self) -> tuple[str, int] | None:
        """(host, port) of herd.http.listener, or None when unset."""
        value = self.get("herd.http.listener")
        if value is None:
            return None
        host, _, port = value.rpartition(":")
        return host.strip("[]"), int(port)

    @property
    def listeners(self) -> list[Listener]:
        return parse_listeners(self.get("listeners"))

    @property
    def retention_ms(self) -> int:
        if self.get("log.retention.ms") is not None:
            return self.get("log.retention.ms")
        if self.get("log.retention.minutes") is not None:
            return self.get("log.retention.minutes") * 60_000
        hours = self.get("log.retention.hours")
        return -1 if hours < 0 else hours * 3_600_000

    def log_config(self) -> LogConfig:
        """The topic-level defaults every new partition starts from."""
        flush_ms = self.get("log.flush.interval.ms")
        return LogConfig(
            segment_bytes=self.get("log.segment.bytes"),
            retention_ms=self.retention_ms,
            retention_bytes=self.get("log.retention.bytes"),
            flush_interval_messages=self.get("log.flush.interval.messages"),
            flush_interval_ms=LONG_MAX if flush_ms is None else flush_ms,
            index_interval_bytes=self.get("log.index.interval.bytes"),
            message_timestamp_type=self.get("log.message.timestamp.type"),
            max_message_bytes=self.get("message.max.bytes"),
            cleanup_policy=self.get("log.cleanup.policy"),
        )

    def effective(self) -> dict[str, Any]:
        """Every setting with the value in force (for DescribeConfigs)."""
        return dict(self.values)


def unparse(value: Any) -> str:
    """A setting's value as Kafka's properties write it ("" for none)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
