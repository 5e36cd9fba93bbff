"""Broker configuration, named and defaulted as Kafka's broker properties.

Every setting herd understands is one row of `SETTINGS`: its Kafka property name, its type, its default and
its bounds. The rows are herd's own settings (`HERD_SETTINGS`), then every other broker config of Kafka 4.2, built
from herd.kafka_broker_configs and accepted without effect (`Setting.applied` False).
`BrokerConfig.from_properties` checks a mapping of property names to strings (from a server.properties file and
`--override key=value` flags) against that table, so an unknown name or a bad value is refused before anything
starts, with one line that says which and why. DescribeConfigs answers from the
same table, so what the broker reports is what it runs with.
"""

from __future__ import annotations

import decimal
import enum
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from herd.cluster.config_ops import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    INVALID_CONFIG,
    INVALID_REQUEST,
    TIMESTAMP_TYPES,
    ConfigChangeError,
    FullMessage,
    gzip_level_complaint,
    list_message,
    number_complaint,
)
from herd.kafka_broker_configs import (
    KAFKA_BROKER_CONFIGS,
    KAFKA_BROKER_QUOTA_CONFIGS,
    SSL_RECONFIGURABLE,
    KafkaBrokerConfig,
)
from herd.log.api import LONG_MAX, LogConfig
from herd.protocol import properties

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1


class ConfigError(ValueError):
    """A setting is unknown or its value is not acceptable; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class Setting:
    name: str  # Kafka's property name
    kind: str  # "int", "long", "short", "bool", "double", "string", "list", "class", "password" (Kafka's types)
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    nullable: bool = False
    check: Callable[[Any], str | None] | None = None  # returns a complaint, or None when fine
    # Changeable at run time (AlterConfigs on a BROKER resource): the settings Kafka lets change at run time
    # (DynamicBrokerConfig.AllDynamicConfigs) that herd applies without a restart; all are cluster-wide in Kafka's
    # sense (settable as the cluster default or for one broker).
    dynamic: bool = False
    # A PASSWORD config in Kafka's sense: never sent to a client (DescribeConfigs answers null, is_sensitive) nor
    # logged.
    sensitive: bool = False
    # Settable for one listener too, as listener.name.<listener>.<name> (Kafka's listener prefix, lower-case
    # listener name), which wins over the unprefixed value for connections on that listener.
    per_listener: bool = False
    # herd acts on it; False: one of Kafka's broker configs herd accepts, checks and describes without effect
    # (herd.kafka_broker_configs; docs/compatibility.md, "Broker configs accepted without effect").
    applied: bool = True
    # Kafka's defineInternal: described only when set (Kafka's DescribeConfigs lists nonInternalValues).
    internal: bool = False
    # Kafka changes it at run time for one broker only (DynamicBrokerConfig.PerBrokerConfigs), not as the cluster
    # default.
    per_broker: bool = False

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


def _listeners_check(value: str, *, routable: bool = False) -> str | None:
    """Why `value` is not a list of NAME://HOST:PORT listeners, or None. With `routable` (advertised.listeners),
    the wildcard address is refused too, as Kafka does: clients cannot connect to it (KafkaConfig's
    "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0")."""
    for item in split_list(value):
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
    paths = split_list(str(value))
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


def split_list(value: str | None) -> list[str]:
    """The items of a comma-separated setting (none for None)."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def parse_super_users(value: str | None) -> list[str]:
    """The principals of super.users (semicolon-separated)."""
    return [v.strip() for v in (value or "").split(";") if v.strip()]


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = (
    "PLAIN",
    "SCRAM-SHA-256",
    "SCRAM-SHA-512",
)  # the ones herd serves (Kafka also has GSSAPI, OAUTHBEARER)
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
# authorizer.class.name values that turn ACLs on: Kafka's two authorizers (KRaft's and ZooKeeper's) name the same
# semantics, which herd implements (herd.security.acls)
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")


def parse_protocol_map(value: str) -> dict[str, str]:
    """listener.security.protocol.map: listener name (upper-case) -> security protocol."""
    result = {}
    for item in split_list(value):
        name, _, protocol = item.partition(":")
        result[name.strip().upper()] = protocol.strip().upper()
    return result


def _protocol_map_check(value: str) -> str | None:
    for item in split_list(value):
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            return f"'{item}' is not LISTENER_NAME:SECURITY_PROTOCOL"
        if protocol.strip().upper() not in SECURITY_PROTOCOLS:
            return f"'{item}': {protocol.strip()} is not one of {', '.join(SECURITY_PROTOCOLS)}"
    return None


def _choice(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"must be one of {', '.join(allowed)}"


def _subset(allowed: tuple[str, ...], what: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        items = split_list(value)
        bad = [i for i in items if i not in allowed]
        if bad:
            return f"{bad[0]} is not {what} herd supports ({', '.join(allowed)})"
        return None

    return check


def _super_users_check(value: str) -> str | None:
    for item in parse_super_users(value):
        kind, sep, name = item.partition(":")
        if not sep or not kind or not name:
            return f"'{item}' is not a principal of the form User:NAME"
    return None


# <mechanism>.sasl.jaas.config, set only with a listener prefix (as Kafka requires of brokers)
_JAAS = re.compile(r"(?P<mechanism>[a-z0-9-]+)\.sasl\.jaas\.config")
_LISTENER_PREFIXED = re.compile(r"listener\.name\.(?P<listener>[A-Za-z_][A-Za-z0-9_]*)\.(?P<rest>.+)")


HERD_SETTINGS: tuple[Setting, ...] = (
    # Server and network
    Setting(
        "listeners",
        "string",
        "PLAINTEXT://127.0.0.1:9092",
        "Comma-separated listeners, NAME://HOST:PORT; port 0 picks a free port.",
        check=_listeners_check,
    ),
    Setting(
        "advertised.listeners",
        "string",
        None,
        "Listeners given to clients in Metadata; defaults to the bound listeners.",
        nullable=True,
        check=lambda v: None if v is None else _listeners_check(v, routable=True),
    ),
    Setting("node.id", "int", 0, "This broker's id.", minimum=0),
    Setting("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted.", minimum=1),
    Setting(
        "message.max.bytes",
        "int",
        1048588,
        "Largest record batch accepted (MESSAGE_TOO_LARGE).",
        minimum=0,
        dynamic=True,
    ),
    Setting(
        "herd.message.max.decompressed.bytes",
        "int",
        64 * 1024 * 1024,
        "Largest records section of one compressed batch once decompressed (MESSAGE_TOO_LARGE beyond it).",
        minimum=1024,
    ),
    Setting(
        "queued.max.requests",
        "int",
        500,
        "Requests read and not yet answered, across the broker, before pipelined requests stop being read.",
        minimum=1,
    ),
    Setting(
        "queued.max.request.bytes",
        "long",
        268435456,
        "Bytes of requests being received, across the broker, before reading pauses; -1 is unbounded.",
        minimum=-1,
    ),
    Setting(
        "max.connections",
        "int",
        0,
        "Most connections the broker takes; 0: half of the open-files limit (RLIMIT_NOFILE).",
        minimum=0,
        dynamic=True,
    ),
    Setting("max.connections.per.ip", "int", INT_MAX, "Most connections from one address.", minimum=1, dynamic=True),
    Setting(
        "connections.max.idle.ms",
        "long",
        600000,
        "Close a connection that has sent, received and been owed nothing for this long.",
        minimum=1,
    ),
    Setting("fetch.max.bytes", "int", 57671680, "Largest Fetch answer, whatever the request asks.", minimum=1024),
    # Security: listeners and TLS (PEM files only; Kafka's JKS and PKCS12 keystores are Java's), SASL, ACLs
    Setting(
        "listener.security.protocol.map",
        "string",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "LISTENER_NAME:SECURITY_PROTOCOL pairs: which protocol each listener speaks.",
        check=_protocol_map_check,
    ),
    Setting(
        "inter.broker.listener.name",
        "string",
        None,
        "The listener the nodes of a cluster use to reach each other; unset: the first listener.",
        nullable=True,
    ),
    Setting(
        "ssl.keystore.type",
        "string",
        "PEM",
        "PEM: the only keystore type herd reads.",
        check=_choice("PEM"),
        per_listener=True,
    ),
    Setting(
        "ssl.keystore.location",
        "string",
        None,
        "PEM file with this broker's private key and certificate chain.",
        nullable=True,
        per_listener=True,
    ),
    Setting(
        "ssl.keystore.key",
        "string",
        None,
        "The private key in PEM, instead of ssl.keystore.location.",
        nullable=True,
        sensitive=True,
        per_listener=True,
    ),
    Setting(
        "ssl.keystore.certificate.chain",
        "string",
        None,
        "The certificate chain in PEM, with ssl.keystore.key.",
        nullable=True,
        per_listener=True,
    ),
    Setting(
        "ssl.key.password",
        "string",
        None,
        "Password of an encrypted private key.",
        nullable=True,
        sensitive=True,
        per_listener=True,
    ),
    Setting(
        "ssl.truststore.type",
        "string",
        "PEM",
        "PEM: the only truststore type herd reads.",
        check=_choice("PEM"),
        per_listener=True,
    ),
    Setting(
        "ssl.truststore.location",
        "string",
        None,
        "PEM file of the CA certificates client certificates are checked against.",
        nullable=True,
        per_listener=True,
    ),
    Setting(
        "ssl.truststore.certificates",
        "string",
        None,
        "The trusted CA certificates in PEM, inline.",
        nullable=True,
        per_listener=True,
    ),
    Setting(
        "ssl.client.auth",
        "string",
        "none",
        "none, requested or required: whether clients present a certificate.",
        check=_choice("none", "requested", "required"),
        per_listener=True,
    ),
    Setting(
        "ssl.enabled.protocols",
        "list",
        "TLSv1.2,TLSv1.3",
        "TLS versions accepted.",
        check=_subset(TLS_VERSIONS, "a TLS version"),
        per_listener=True,
    ),
    Setting(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "Rules from a client certificate's distinguished name to its principal's name (Kafka's syntax).",
        per_listener=True,
    ),
    Setting(
        "sasl.enabled.mechanisms",
        "list",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "SASL mechanisms offered on SASL listeners.",
        check=_subset(SASL_MECHANISMS, "a SASL mechanism"),
        per_listener=True,
    ),
    Setting(
        "connections.max.reauth.ms",
        "long",
        0,
        "Longest a SASL session lasts before the client must authenticate again (KIP-368); 0: forever.",
        minimum=0,
        per_listener=True,
    ),
    Setting(
        "authorizer.class.name",
        "string",
        "",
        "Set to Kafka's StandardAuthorizer (or AclAuthorizer) to enforce ACLs; empty: every client may do everything.",
        check=lambda v: (
            None if v in ("", *AUTHORIZERS) else f"herd implements Kafka's ACL authorizers: {' or '.join(AUTHORIZERS)}"
        ),
    ),
    Setting(
        "super.users",
        "string",
        None,
        "Principals allowed everything, semicolon-separated (User:admin;User:ops).",
        nullable=True,
        check=lambda v: None if v is None else _super_users_check(v),
    ),
    Setting(
        "allow.everyone.if.no.acl.found",
        "bool",
        False,
        "With an authorizer: allow a resource no ACL matches (else only super users may use it).",
    ),
    # Logs
    Setting(
        "log.dirs",
        "string",
        "./herd-data",
        "Comma-separated directories holding the partition logs; the first also keeps topics.json.",
        check=_log_dirs_check,
    ),
    Setting(
        "log.dir",
        "list",
        "/tmp/kafka-logs",
        "The directory of the partition logs when log.dirs is not set (Kafka's fallback); herd's default is "
        "log.dirs' ./herd-data, so this is read only when set.",
        check=_log_dirs_check,
    ),
    Setting("num.partitions", "int", 1, "Partitions of an auto-created topic.", minimum=1),
    Setting("auto.create.topics.enable", "bool", True, "Create unknown topics on Metadata requests."),
    Setting("log.segment.bytes", "int", 1073741824, "Size at which a segment rolls.", minimum=14, dynamic=True),
    Setting(
        "log.retention.ms",
        "long",
        None,
        "Time-based retention; -1 keeps forever.",
        nullable=True,
        minimum=-1,
        dynamic=True,
    ),
    Setting(
        "log.retention.minutes",
        "int",
        None,
        "Retention in minutes (if log.retention.ms unset).",
        nullable=True,
        minimum=-1,
    ),
    Setting("log.retention.hours", "int", 168, "Retention in hours (if ms and minutes unset).", minimum=-1),
    Setting(
        "log.retention.bytes",
        "long",
        -1,
        "Size-based retention per partition; -1 is unlimited.",
        minimum=-1,
        dynamic=True,
    ),
    Setting("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", minimum=1),
    Setting(
        "log.cleaner.delete.retention.ms",
        "long",
        86400000,
        "How long compaction keeps tombstones (delete.retention.ms of compacted topics).",
        minimum=0,
    ),
    Setting(
        "log.flush.interval.messages", "long", LONG_MAX, "fsync after this many messages.", minimum=1, dynamic=True
    ),
    Setting(
        "log.flush.interval.ms",
        "long",
        None,
        "fsync when data is this old; unset: OS decides.",
        nullable=True,
        minimum=0,
        dynamic=True,
    ),
    Setting(
        "log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often log.flush.interval.ms is checked.", minimum=0
    ),
    Setting("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", minimum=0, dynamic=True),
    Setting(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        "CreateTime or LogAppendTime.",
        check=lambda v: None if v in TIMESTAMP_TYPES else "must be CreateTime or LogAppendTime",
        dynamic=True,
    ),
    Setting(
        "log.cleanup.policy",
        "list",
        "delete",
        "The default cleanup.policy of topics: delete, compact, both, or none (infinite retention, KAFKA-19112; "
        "only __consumer_offsets is compacted).",
        check=lambda v: list_message("log.cleanup.policy", v, CLEANUP_POLICIES),
        dynamic=True,
    ),
    Setting(
        "compression.type",
        "string",
        "producer",
        "The default compression.type of topics (herd stores batches as the producer compressed them).",
        check=lambda v: None if v in COMPRESSION_TYPES else f"must be one of {', '.join(COMPRESSION_TYPES)}",
        dynamic=True,
    ),
    # The broker defaults of the topic configs herd accepts without acting on them (docs/compatibility.md, "Topic
    # configs"): Kafka 4.2's names, types, defaults and bounds (ServerLogConfigs, CleanerConfig, RemoteLogManagerConfig
    # on confluentinc/kafka's 4.2 branch), dynamic as in Kafka, so that DescribeConfigs' synonyms are Kafka's.
    Setting(
        "log.roll.ms",
        "long",
        None,
        "Time after which a segment rolls (else log.roll.hours).",
        nullable=True,
        dynamic=True,
    ),
    Setting("log.roll.hours", "int", 168, "Time after which a segment rolls, in hours.", minimum=1),
    Setting(
        "log.roll.jitter.ms",
        "long",
        None,
        "Most random jitter taken off a segment's roll time (else log.roll.jitter.hours).",
        nullable=True,
        dynamic=True,
    ),
    Setting(
        "log.roll.jitter.hours", "int", 0, "Most random jitter taken off a segment's roll time, in hours.", minimum=0
    ),
    Setting("log.index.size.max.bytes", "int", 10485760, "Largest offset index of a segment.", minimum=4, dynamic=True),
    Setting(
        "log.segment.delete.delay.ms",
        "long",
        60000,
        "How long a deleted segment's files wait before they go.",
        minimum=0,
        dynamic=True,
    ),
    Setting(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        0,
        "Least time a record stays uncompacted.",
        minimum=0,
        dynamic=True,
    ),
    Setting(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        LONG_MAX,
        "Most time a record stays ineligible for compaction.",
        minimum=1,
        dynamic=True,
    ),
    Setting(
        "log.cleaner.min.cleanable.ratio",
        "double",
        0.5,
        "Least share of a log's bytes dirty before it is compacted.",
        minimum=0,
        maximum=1,
        dynamic=True,
    ),
    Setting(
        "unclean.leader.election.enable",
        "bool",
        False,
        "Elect a replica out of the ISR as a last resort (one replica per partition here: nothing to elect).",
        dynamic=True,
    ),
    Setting(
        "compression.gzip.level",
        "int",
        -1,
        "gzip level of batches the broker compresses.",
        check=gzip_level_complaint,
        dynamic=True,
    ),
    Setting(
        "compression.lz4.level",
        "int",
        9,
        "lz4 level of batches the broker compresses.",
        minimum=1,
        maximum=17,
        dynamic=True,
    ),
    Setting(
        "compression.zstd.level",
        "int",
        3,
        "zstd level of batches the broker compresses.",
        minimum=-131072,
        maximum=22,
        dynamic=True,
    ),
    Setting("log.preallocate", "bool", False, "Preallocate a new segment's file.", dynamic=True),
    Setting(
        "log.message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        "How far a produced record's CreateTime may be before the broker's clock (INVALID_TIMESTAMP beyond).",
        minimum=0,
        dynamic=True,
    ),
    Setting(
        "log.message.timestamp.after.max.ms",
        "long",
        3600000,
        "How far a produced record's CreateTime may be after the broker's clock (INVALID_TIMESTAMP beyond).",
        minimum=0,
        dynamic=True,
    ),
    Setting(
        "log.local.retention.ms",
        "long",
        -2,
        "Retention of the local log when tiered storage is on (-2: retention.ms).",
        minimum=-2,
        dynamic=True,
    ),
    Setting(
        "log.local.retention.bytes",
        "long",
        -2,
        "Size of the local log when tiered storage is on (-2: retention.bytes).",
        minimum=-2,
        dynamic=True,
    ),
    Setting(
        "remote.log.storage.system.enable",
        "bool",
        False,
        "Tiered storage (herd has none: a topic with "
        "remote.storage.enable=true is refused, as Kafka refuses it when this is false).",
    ),
    Setting(
        "min.insync.replicas",
        "int",
        1,
        "The default min.insync.replicas of topics (one replica in herd).",
        minimum=1,
        dynamic=True,
    ),
    Setting("delete.topic.enable", "bool", True, "Allow DeleteTopics."),
    # Idempotent producers
    Setting(
        "producer.id.expiration.ms",
        "int",
        86400000,
        "How long the state of an idempotent producer that stopped appending is kept.",
        minimum=1,
        dynamic=True,
    ),
    Setting(
        "herd.producer.state.max.entries",
        "int",
        100000,
        "Most (partition, producer id) states kept; beyond it the least recently used are forgotten.",
        minimum=1,
    ),
    # Disk failures and file handles (herd's own: Kafka has neither)
    Setting(
        "herd.log.recovery.backoff.ms",
        "long",
        1000,
        "First retry of a partition that failed on a disk error (doubling while it keeps failing).",
        minimum=1,
    ),
    Setting("herd.log.recovery.backoff.max.ms", "long", 60000, "Longest wait between two such retries.", minimum=1),
    Setting(
        "herd.log.max.open.files",
        "int",
        0,
        "Most segment files kept open at once (least recently used closed); 0: half of RLIMIT_NOFILE.",
        minimum=0,
    ),
    Setting(
        "max.broker.partitions",
        "int",
        10000,
        "Most partitions this broker hosts, __consumer_offsets included (KIP-578's name); creating more gets "
        "POLICY_VIOLATION.",
        minimum=1,
    ),
    # Cluster mode (nodes sharing their state in PostgreSQL); without a database URL the node is on its own
    Setting(
        "herd.cluster.database.url",
        "string",
        None,
        "PostgreSQL URL (postgresql://user:password@host:port/db) of a cluster's shared state; unset: this node "
        "is a cluster of its own, with its data in log.dirs.",
        nullable=True,
    ),
    Setting(
        "broker.session.timeout.ms",
        "int",
        9000,
        "A node that has not renewed its lease for this long loses its partitions to the live nodes.",
        minimum=1,
    ),
    Setting("broker.heartbeat.interval.ms", "int", 2000, "How often a node renews its lease.", minimum=1),
    Setting(
        "controlled.shutdown.enable",
        "bool",
        True,
        "On SIGTERM, hand this node's partitions to the other nodes before exiting.",
    ),
    # HTTP listener and fault injection (herd's own)
    Setting(
        "herd.http.listener",
        "string",
        None,
        "HOST:PORT of the node's HTTP listener (fault injection, /metrics); port 0 picks a free port; unset: none.",
        nullable=True,
        check=lambda v: None if v is None else _http_listener_check(v),
    ),
    Setting(
        "herd.faults.enable",
        "bool",
        False,
        "Let users inject faults and move coordinators/leaders over the HTTP listener (for tests only).",
    ),
    Setting(
        "herd.metrics.max.series",
        "int",
        10000,
        "Most label sets of each per-topic or per-group-partition metric family on /metrics (herd.server.metrics); "
        "beyond it series are dropped and counted.",
        minimum=1,
    ),
    # Group coordinator
    Setting("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", minimum=1),
    Setting("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets.", minimum=1),
    Setting("group.initial.rebalance.delay.ms", "int", 3000, "Delay of a new group's first rebalance.", minimum=0),
    Setting("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for.", minimum=0),
    Setting("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for.", minimum=0),
    Setting("group.max.size", "int", INT_MAX, "Most members in one group.", minimum=1),
    Setting("offsets.retention.minutes", "int", 10080, "How long offsets of an empty group are kept.", minimum=1),
    Setting("offsets.retention.check.interval.ms", "long", 600000, "How often offset expiry runs.", minimum=1),
    Setting("offset.metadata.max.bytes", "int", 4096, "Largest metadata string of a committed offset.", minimum=0),
    Setting(
        "group.coordinator.rebalance.protocols",
        "list",
        "classic,consumer",
        "The group protocols the coordinator serves: classic, and consumer (KIP-848's ConsumerGroupHeartbeat; "
        "left out, that API answers UNSUPPORTED_VERSION).",
        check=_subset(("classic", "consumer"), "a group protocol"),
    ),
    Setting(
        "group.consumer.session.timeout.ms", "int", 45000, "A consumer-protocol member's session timeout.", minimum=1
    ),
    Setting(
        "group.consumer.min.session.timeout.ms", "int", 45000, "Smallest consumer-protocol session timeout.", minimum=1
    ),
    Setting(
        "group.consumer.max.session.timeout.ms", "int", 60000, "Largest consumer-protocol session timeout.", minimum=1
    ),
    Setting(
        "group.consumer.heartbeat.interval.ms", "int", 5000, "How often consumer-protocol members heartbeat.", minimum=1
    ),
    Setting(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        5000,
        "Smallest consumer-protocol heartbeat interval.",
        minimum=1,
    ),
    Setting(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        15000,
        "Largest consumer-protocol heartbeat interval.",
        minimum=1,
    ),
    Setting("group.consumer.max.size", "int", INT_MAX, "Most members in one consumer group.", minimum=1),
    Setting(
        "group.consumer.regex.refresh.interval.ms",
        "int",
        600000,
        "How often a consumer group's regex subscriptions are resolved again against the topics.",
        minimum=1,
    ),
    Setting(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        "Which way a group with members may convert between the classic and the consumer protocol: "
        "bidirectional, upgrade, downgrade or disabled (case-insensitive).",
        check=lambda v: (
            None
            if str(v).lower() in ("bidirectional", "upgrade", "downgrade", "disabled")
            else "must be one of bidirectional, upgrade, downgrade, disabled"
        ),
    ),
    Setting(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        "The server-side assignors of consumer groups; the first is the default.",
        check=_subset(("uniform", "range"), "an assignor"),
    ),
    # Share groups (KIP-932): Kafka 4.2's GroupCoordinatorConfig and ShareGroupConfig, with their defaults and ranges.
    Setting(
        "group.share.enable",
        "bool",
        True,
        "Serve share groups (ShareGroupHeartbeat, ShareGroupDescribe; UNSUPPORTED_VERSION when false). Kafka 4.2 "
        "turns them on with this internal setting or the share.version feature, which a new 4.2 cluster finalizes "
        "at level 1; herd has no feature versions, so this alone decides, and it is on as on a new 4.2 cluster.",
    ),
    Setting("group.share.session.timeout.ms", "int", 45000, "A share-group member's session timeout.", minimum=1),
    Setting("group.share.min.session.timeout.ms", "int", 45000, "Smallest share-group session timeout.", minimum=1),
    Setting("group.share.max.session.timeout.ms", "int", 60000, "Largest share-group session timeout.", minimum=1),
    Setting("group.share.heartbeat.interval.ms", "int", 5000, "How often share-group members heartbeat.", minimum=1),
    Setting(
        "group.share.min.heartbeat.interval.ms", "int", 5000, "Smallest share-group heartbeat interval.", minimum=1
    ),
    Setting(
        "group.share.max.heartbeat.interval.ms", "int", 15000, "Largest share-group heartbeat interval.", minimum=1
    ),
    Setting("group.share.max.size", "int", 200, "Most members in one share group.", minimum=1, maximum=1000),
    Setting(
        "group.share.assignors",
        "list",
        "simple",
        "The share groups' server-side assignor (exactly one).",
        check=_subset(("simple",), "a share-group assignor"),
    ),
    Setting(
        "group.share.initialize.retry.interval.ms",
        "int",
        30000,
        "How long a share partition's state initialization may be pending before a heartbeat asks for it again.",
        minimum=1,
    ),
    Setting(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        "How long a share-group consumer holds the records it acquired.",
        minimum=1000,
        maximum=3600000,
    ),
    Setting(
        "group.share.delivery.count.limit",
        "int",
        5,
        "How often a record is delivered to a share group before it is archived (no more deliveries).",
        minimum=2,
        maximum=10,
    ),
    Setting(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        "Most records of one share partition in flight (acquired, or delivered and not yet done with).",
        minimum=100,
        maximum=10000,
    ),
    Setting(
        "group.share.max.share.sessions",
        "int",
        2000,
        "Most share sessions (ShareFetch) this broker keeps; another gets SHARE_SESSION_LIMIT_REACHED.",
        minimum=1,
    ),
    Setting(
        "share.coordinator.state.topic.num.partitions",
        "int",
        50,
        "Partitions of __share_group_state, where share partitions' state is kept (made on first use).",
        minimum=1,
    ),
    Setting(
        "share.coordinator.state.topic.segment.bytes",
        "int",
        104857600,
        "Segment size of __share_group_state.",
        minimum=1,
    ),
    # Kafka's ShareCoordinatorConfig (confluentinc/kafka share-coordinator/src/main/java/org/apache/kafka/coordinator/
    # share/ShareCoordinatorConfig.java); the last two are internal there, as here, and exist for tests
    Setting(
        "share.coordinator.snapshot.update.records.per.snapshot",
        "int",
        500,
        "Share-state updates of one share partition written between two of its snapshots in __share_group_state.",
        minimum=0,
        maximum=500,
    ),
    Setting(
        "share.coordinator.state.topic.prune.interval.ms",
        "int",
        300000,
        "How often the records of __share_group_state that a later snapshot made redundant are deleted.",
        minimum=1,
    ),
    Setting(
        "share.coordinator.cold.partition.snapshot.interval.ms",
        "int",
        300000,
        "How old the last snapshot of a share partition may grow before it is written again, so that pruning of "
        "__share_group_state is not held back by share partitions that are no longer written.",
        minimum=1,
    ),
    Setting(
        "group.share.min.record.lock.duration.ms",
        "int",
        15000,
        "Smallest share.record.lock.duration.ms a group may set.",
        minimum=1000,
        maximum=30000,
    ),
    Setting(
        "group.share.max.record.lock.duration.ms",
        "int",
        60000,
        "Largest share.record.lock.duration.ms a group may set.",
        minimum=30000,
        maximum=3600000,
    ),
    Setting(
        "herd.group.rebalance.history.size",
        "int",
        16,
        "Rebalances each group remembers (cause, phases, late and dropped members), kept in __consumer_offsets "
        "and read with `herd groups history`; 0 keeps none. herd's own.",
        minimum=0,
        maximum=1000,
    ),
    # Transaction coordinator
    Setting("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", minimum=1),
    Setting("transaction.state.log.segment.bytes", "int", 104857600, "Segment size of __transaction_state.", minimum=1),
    Setting(
        "transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms a producer may ask for.", minimum=1
    ),
    Setting(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        "How often transactions open longer than their timeout are aborted.",
        minimum=1,
    ),
    Setting(
        "transaction.partition.verification.enable",
        "bool",
        True,
        "Verify with the transaction coordinator that a partition is in the producer's transaction before its "
        "first transactional write there (KIP-890 part 1). Kafka lets it change at run time; herd reads it at start.",
    ),
    Setting(
        "transactional.id.expiration.ms",
        "int",
        604800000,
        "How long a transactional id with no transaction open is kept after its last use.",
        minimum=1,
    ),
    Setting(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        "How often expired transactional ids are removed.",
        minimum=1,
    ),
)


def _kafka_check(config: KafkaBrokerConfig) -> Callable[[Any], str | None] | None:
    """The check of a Kafka validator given as data (herd.kafka_broker_configs), in ConfigDef's words."""
    check = config.check
    if check is None:
        return None
    kind = check[0]
    if kind == "list":
        empty_ok, choices = check[1], check[2]
        return lambda v: list_message(config.name, v, choices, empty_allowed=empty_ok)
    if kind == "choice":
        return lambda v: None if v in check[1] else f"String must be one of: {', '.join(check[1])}"
    if kind == "choice_ci":
        allowed = {c.lower() for c in check[1]}
        return lambda v: (
            None if str(v).lower() in allowed else f"String must be one of (case insensitive): {', '.join(check[1])}"
        )
    if kind == "non_empty":
        return lambda v: None if str(v).strip() else "String must be non-empty"
    if kind == "gzip_level":
        return gzip_level_complaint
    return None  # "range" becomes the setting's bounds; "non_null": no value is null once given


def kafka_setting(config: KafkaBrokerConfig) -> Setting:
    """The setting of one of Kafka's broker configs that herd does not define itself: accepted with Kafka's type,
    default, validator and documentation, and without effect (`applied` False)."""
    check = config.check
    bounds = (check[1], check[2]) if check is not None and check[0] == "range" else (None, None)
    default = config.default
    if config.kind == "bool" and isinstance(default, str):
        default = default == "true"
    return Setting(
        config.name,
        config.kind,
        default,
        config.doc,
        minimum=bounds[0],
        maximum=bounds[1],
        nullable=False,  # as ConfigDef.parseType: an empty value is "" (an empty list), or not a number
        check=_kafka_check(config),
        dynamic=config.dynamic,
        sensitive=config.kind == "password",
        applied=False,
        internal=config.internal,
        per_broker=config.per_broker,
    )


_HERD_NAMES = frozenset(s.name for s in HERD_SETTINGS)
# herd's own settings, then every other broker config of Kafka 4.2 (accepted without effect)
SETTINGS: tuple[Setting, ...] = HERD_SETTINGS + tuple(
    kafka_setting(c) for c in KAFKA_BROKER_CONFIGS + KAFKA_BROKER_QUOTA_CONFIGS if c.name not in _HERD_NAMES
)

SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def listener_prefixed(name: str) -> tuple[str, str] | None:
    """(listener name in lower case, the rest) of a listener.name.<listener>.<rest> property, or None."""
    match = _LISTENER_PREFIXED.fullmatch(name)
    return (match.group("listener").lower(), match.group("rest")) if match else None


def setting_for(name: str) -> Setting | None:
    """The row of property `name`: a setting of SETTINGS, or for listener.name.<listener>.<rest> the row of
    <rest> when it may be set per listener (<mechanism>.sasl.jaas.config is a string, sensitive, only prefixed)."""
    setting = SETTINGS_BY_NAME.get(name)
    if setting is not None:
        return setting
    prefixed = listener_prefixed(name)
    if prefixed is None:
        return None
    rest = prefixed[1]
    base = SETTINGS_BY_NAME.get(rest)
    if base is not None and base.per_listener:
        return base
    jaas = _JAAS.fullmatch(rest)
    if jaas and jaas.group("mechanism").upper() in SASL_MECHANISMS:
        return Setting(
            rest,
            "string",
            None,
            "JAAS login settings of a SASL mechanism on one listener.",
            nullable=True,
            sensitive=True,
            per_listener=True,
        )
    return None


def is_sensitive(name: str) -> bool:
    setting = setting_for(name)
    return setting is not None and setting.sensitive


def _parse_value(setting: Setting, raw: str) -> Any:
    text = raw.strip()
    if setting.nullable and text in ("", "null"):
        return None
    if setting.kind in ("int", "long", "short"):
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{setting.name}: '{raw}' is not a whole number") from None
        upper = {"int": INT_MAX, "long": LONG_MAX, "short": 2**15 - 1}[setting.kind]
        low = setting.minimum if setting.minimum is not None else -upper - 1
        high = setting.maximum if setting.maximum is not None else upper
        if not low <= value <= high:
            raise ConfigError(f"{setting.name}: {value} is out of range [{low}, {high}]")
        return value
    if setting.kind == "bool":
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{setting.name}: '{raw}' is not true or false")
        return text.lower() == "true"
    if setting.kind == "double":
        try:
            number = float(text)
        except ValueError:
            raise ConfigError(f"{setting.name}: '{raw}' is not a number") from None
        complaint = number_complaint("double", text, setting.minimum, setting.maximum)
        if complaint is not None:
            raise ConfigError(f"{setting.name}: {complaint}")
        return number
    return text


def parse_properties(text: str, source: str = "properties") -> dict[str, str]:
    """Java .properties text -> {key: value} (herd.protocol.properties, as java.util.Properties.load reads it);
    raises ConfigError naming the file and line, never the line's text (it may hold a password)."""
    try:
        return properties.parse_properties(text, source)
    except properties.PropertiesError as e:
        raise ConfigError(str(e)) from None


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(value: str) -> list[Listener]:
    listeners = []
    for item in split_list(value):
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
    if name in ("log.roll.ms", "log.roll.jitter.ms"):  # in hours when the ms are not set
        return [name, name.replace(".ms", ".hours")]
    return [name]


_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")


def dynamic_complaint(setting: Setting, raw: str) -> str | None:
    """Why `raw` is not a value of `setting`, in the words of Kafka's ConfigDef ("Not a number of type INT",
    "Value must be at least 0"), or None."""
    complaint: str | None = None
    if setting.kind in ("int", "long", "short", "double"):
        complaint = number_complaint(setting.kind, raw, setting.minimum, setting.maximum)
    elif setting.kind == "bool":
        return None if raw.strip().lower() in ("true", "false") else "Expected value to be either true or false"
    if complaint is None and setting.check is not None:
        complaint = setting.check(raw.strip())
    return complaint


def check_dynamic(props: Mapping[str, str], *, per_broker: bool = True) -> None:
    """The checks of a BROKER resource's dynamic configs before they are stored, in Kafka's order and words
    (DynamicBrokerConfig.validateConfigs, called by ConfigAdminManager; Kafka answers its ConfigExceptions with
    INVALID_REQUEST, KAFKA-13609): settings that cannot change at run time, security configs that change only with
    a listener prefix, each value, then (for the cluster default, `per_broker` False) settings Kafka changes only
    for one broker. A name herd does not know gets INVALID_CONFIG (Kafka stores unknown names as custom configs;
    herd would never use them). Raises ConfigChangeError."""
    unknown = sorted(n for n in props if n not in SETTINGS_BY_NAME)
    if unknown:
        raise ConfigChangeError(INVALID_CONFIG, f"Unknown broker config name: {unknown[0]}")
    fixed = sorted(n for n in props if not SETTINGS_BY_NAME[n].dynamic)
    if fixed:
        raise ConfigChangeError(INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    unprefixed = sorted(n for n in props if n in SSL_RECONFIGURABLE)
    if unprefixed:
        raise ConfigChangeError(
            INVALID_REQUEST,
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            f"Set({', '.join(unprefixed)})",
        )
    for name, raw in props.items():
        complaint = dynamic_complaint(SETTINGS_BY_NAME[name], raw)
        if isinstance(complaint, FullMessage):
            raise ConfigChangeError(INVALID_REQUEST, complaint)
        if complaint is not None:
            raise ConfigChangeError(INVALID_REQUEST, f"Invalid value {raw} for configuration {name}: {complaint}")
    broker_only = sorted(n for n in props if SETTINGS_BY_NAME[n].per_broker)
    if not per_broker and broker_only:
        raise ConfigChangeError(
            INVALID_REQUEST,
            f"Cannot update these configs at default cluster level, broker id must be specified: "
            f"Set({', '.join(broker_only)})",
        )


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
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Raises ConfigError for an unknown name or a bad value."""
        values = {s.name: s.default for s in SETTINGS}
        explicit: set[str] = set()
        for name, raw in props.items():
            setting = setting_for(name)
            if setting is None:
                raise ConfigError(f"unknown setting '{name}'")
            prefixed = listener_prefixed(name)
            if prefixed is not None:  # Kafka lower-cases the listener name of a prefix
                name = f"listener.name.{prefixed[0]}.{prefixed[1]}"
            if not setting.applied:  # Kafka's own config: Kafka's words (ConfigException) for a refused value
                complaint = dynamic_complaint(setting, raw)
                if isinstance(complaint, FullMessage):
                    raise ConfigError(complaint)
                if complaint is not None:
                    raise ConfigError(f"Invalid value {raw} for configuration {name}: {complaint}")
            value = _parse_value(setting, raw)
            if setting.check is not None and value is not None:
                complaint = setting.check(value)
                if complaint:
                    raise ConfigError(f"{name}: {complaint}")
            values[name] = value
            explicit.add(name)
        config = cls(values=values, explicit=frozenset(explicit))
        config._check_relations()
        return config

    @classmethod
    def load(cls, path: str | None, overrides: list[str]) -> BrokerConfig:
        props: dict[str, str] = {}
        if path is not None:
            try:
                text = Path(path).read_bytes().decode()
            except OSError as e:
                raise ConfigError(f"cannot read config file '{path}': {e.strerror}") from None
            except UnicodeDecodeError as e:
                raise ConfigError(
                    f"cannot read config file '{path}': not UTF-8 text "
                    f"(byte 0x{e.object[e.start]:02x} at position {e.start})"
                ) from None
            props.update(parse_properties(text, path))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override expects key=value, got '{item}'")
            props[key.strip()] = value
        return cls.from_properties(props)

    def _check_group_timeouts(self) -> None:
        """GroupCoordinatorConfig's checks of the consumer and share groups' timeouts and assignors, with Kafka's
        messages."""
        get = self.get
        rules = [
            ("max.heartbeat.interval.ms", ">=", "min.heartbeat.interval.ms"),
            ("heartbeat.interval.ms", ">=", "min.heartbeat.interval.ms"),
            ("heartbeat.interval.ms", "<=", "max.heartbeat.interval.ms"),
            ("max.session.timeout.ms", ">=", "min.session.timeout.ms"),
            ("session.timeout.ms", ">=", "min.session.timeout.ms"),
            ("session.timeout.ms", "<=", "max.session.timeout.ms"),
            ("heartbeat.interval.ms", "<", "session.timeout.ms"),
        ]
        words = {">=": "greater than or equal to", "<=": "less than or equal to", "<": "less than"}
        for prefix in ("group.consumer.", "group.share."):
            for left, op, right in rules:
                a, b = get(prefix + left), get(prefix + right)
                if not (a >= b if op == ">=" else a <= b if op == "<=" else a < b):
                    raise ConfigError(f"{prefix}{left} must be {words[op]} {prefix}{right}")
        assignors = split_list(get("group.share.assignors"))
        if len(assignors) != 1:
            raise ConfigError(f"group.share.assignors must contain exactly one assignor, but found {len(assignors)}")
        if "classic" not in split_list(get("group.coordinator.rebalance.protocols")):
            raise ConfigError("group.coordinator.rebalance.protocols must contain classic")
        if not split_list(get("group.consumer.assignors")):
            raise ConfigError("group.consumer.assignors must name at least one assignor")

    def _check_relations(self) -> None:
        if self.get("group.min.session.timeout.ms") > self.get("group.max.session.timeout.ms"):
            raise ConfigError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        self._check_group_timeouts()
        if self.get("broker.heartbeat.interval.ms") >= self.get("broker.session.timeout.ms"):
            raise ConfigError("broker.heartbeat.interval.ms must be less than broker.session.timeout.ms")
        protocols = parse_protocol_map(self.get("listener.security.protocol.map"))
        names = [listener.name.upper() for listener in self.listeners]
        for name in names:
            if name not in protocols:
                raise ConfigError(
                    f"listeners: no security protocol for listener {name} in listener.security.protocol.map"
                )
        if len(set(names)) < len(names):
            raise ConfigError("listeners: each listener needs a name of its own")
        inter = self.get("inter.broker.listener.name")
        if inter is not None and inter.upper() not in names:
            raise ConfigError(f"inter.broker.listener.name: {inter} is not one of the listeners")

    def get(self, name: str) -> Any:
        return self.values[name]

    @property
    def static(self) -> BrokerConfig:
        """The configuration the broker started with, without its dynamic configs."""
        if self.static_values is None:
            return self
        return BrokerConfig(values=self.static_values, explicit=self.explicit)

    def with_dynamic(self, default: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        """The static settings with the dynamic ones over them, this broker's over the cluster default. A stored
        value herd cannot use (not dynamic, or not valid) is logged and left out, as Kafka leaves out what it
        cannot apply (DynamicBrokerConfig.fromPersistentProps)."""
        base = self.static
        values = dict(base.values)
        for layer in (default, per_broker):
            for name, raw in layer.items():
                setting = SETTINGS_BY_NAME.get(name)
                complaint = (
                    "not a dynamic config"
                    if setting is None or not setting.dynamic
                    else dynamic_complaint(setting, raw)
                )
                if complaint is not None or setting is None:
                    shown = "[hidden]" if setting is not None and setting.sensitive else raw
                    log.error("dynamic broker config %s=%s left out: %s", name, shown, complaint)
                    continue
                values[name] = _parse_value(setting, raw)
        return BrokerConfig(
            values=values,
            explicit=base.explicit,
            dynamic_default=dict(default),
            dynamic_broker=dict(per_broker),
            static_values=base.values,
        )

    def synonyms(self, name: str) -> list[tuple[str, str | None, ConfigSource]]:
        """Where the value of setting `name` may come from, highest precedence first, as Kafka's ConfigHelper
        lists them (configSynonyms): each synonym set as a dynamic broker config, then as a dynamic default, then
        statically, then Kafka's default, from the first entry for `name` itself on (a synonym of higher
        precedence that is not `name` is left out, as Kafka drops it)."""
        chain = broker_synonyms(name)
        static = self.static
        levels = (
            (self.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            ({n: unparse(static.get(n)) for n in static.explicit}, ConfigSource.STATIC_BROKER_CONFIG),
            (
                {n: unparse(s.default) for n in chain if (s := SETTINGS_BY_NAME.get(n)) and s.default is not None},
                ConfigSource.DEFAULT_CONFIG,
            ),
        )
        found = [(n, level[n], source) for level, source in levels for n in chain if n in level]
        while found and found[0][0] != name:
            found.pop(0)
        return found

    def with_overrides(self, **props: str) -> BrokerConfig:
        """A copy with some properties replaced (keys use underscores for dots)."""
        merged = {k: unparse(self.static.values[k]) for k in self.explicit}
        merged.update({k.replace("_", "."): v for k, v in props.items()})
        return BrokerConfig.from_properties(merged)

    @property
    def log_dirs(self) -> list[str]:
        """The directories of log.dirs, in the order given (the first keeps topics.json); log.dir's when only that is
        set (as Kafka's AbstractKafkaConfig.logDirs falls back to it)."""
        if "log.dirs" not in self.explicit and "log.dir" in self.explicit:
            return split_list(self.get("log.dir"))
        return split_list(self.get("log.dirs"))

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

    def security_protocol(self, listener: str) -> str:
        """The security protocol listener `listener` speaks (listener.security.protocol.map)."""
        return parse_protocol_map(self.get("listener.security.protocol.map"))[listener.upper()]

    @property
    def inter_broker_listener(self) -> str:
        """The listener the nodes of a cluster reach each other on (upper case): inter.broker.listener.name, else
        the first listener."""
        return (self.get("inter.broker.listener.name") or self.listeners[0].name).upper()

    def setting_name(self, listener: str, name: str) -> str:
        """The property a listener's `name` comes from: listener.name.<listener>.<name> when that is set, else
        `name` (for messages that must name what the user wrote)."""
        prefixed = f"listener.name.{listener.lower()}.{name}"
        return prefixed if prefixed in self.values else name

    def for_listener(self, listener: str, name: str) -> Any:
        """Setting `name` for connections on `listener`: listener.name.<listener>.<name> if set, else `name`
        (else None, for <mechanism>.sasl.jaas.config)."""
        return self.values.get(self.setting_name(listener, name))

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
            message_timestamp_before_max_ms=self.get("log.message.timestamp.before.max.ms"),
            message_timestamp_after_max_ms=self.get("log.message.timestamp.after.max.ms"),
            max_message_bytes=self.get("message.max.bytes"),
            cleanup_policy=self.get("log.cleanup.policy"),
            max_decompressed_bytes=self.get("herd.message.max.decompressed.bytes"),
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
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def java_double(value: float) -> str:
    """A double as Java's Double.toString writes it (Kafka's ConfigDef.convertToString): 0.5, 1.0, 1.0E-4,
    1.7976931348623157E308 (the shortest digits that read back the same, as Python's repr)."""
    if value != value:
        return "NaN"
    if abs(value) == float("inf"):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = decimal.Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = int(exponent) + len(digits) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"
