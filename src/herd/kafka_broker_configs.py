"""Kafka 4.2's broker configs, as data: every name of KafkaConfig's ConfigDef with Kafka's type, default, validator,
documentation, and whether Kafka lets it change at run time.

Transcribed from confluentinc/kafka, branch 4.2 (commit d26e85231a8f): AbstractKafkaConfig.CONFIG_DEF
(server/src/main/java/org/apache/kafka/server/config/AbstractKafkaConfig.java) merges the ConfigDefs of the files
named by `source` below, each row from that file's `define`/`defineInternal` call (names, defaults and `*_DOC` texts
resolved from the constants they name). `dynamic` is DynamicBrokerConfig.AllDynamicConfigs
(core/src/main/scala/kafka/server/DynamicBrokerConfig.scala: SslConfigs.RECONFIGURABLE_CONFIGS,
LogCleaner.RECONFIGURABLE_CONFIGS, the first broker synonym of each topic config (ServerTopicConfigSynonyms),
DynamicThreadPool.RECONFIGURABLE_CONFIGS, metric.reporters, DynamicListenerConfig.ReconfigurableConfigs,
SocketServer.ReconfigurableConfigs, producer.id.expiration.ms and transaction.partition.verification.enable,
DynamicRemoteLogConfig.ReconfigurableConfigs, config.providers); `per_broker` is its PerBrokerConfigs (settable for
one broker only, not as the cluster default); `listener_only` is SslConfigs.RECONFIGURABLE_CONFIGS, which Kafka
changes at run time only with a listener prefix.

`check` is the validator as data: ("range", min, max) for ConfigDef.Range (None: unbounded), ("list", empty_ok,
choices) for ValidList (choices () for anyNonDuplicateValues), ("choice", values) and ("choice_ci", values) for
ValidString and CaseInsensitiveValidString, ("non_empty",) for NonEmptyString, ("non_null",) for NonNullValidator,
("gzip_level",) for CompressionType.GZIP.levelValidator; None for none (the controller quorum validators are left
out: herd has no controller quorum). `default` is Kafka's (None: null, or no default for process.roles, node.id and
controller.listener.names). herd builds a setting from each row it does not define itself (herd.config).
"""

from __future__ import annotations

from typing import Any, NamedTuple

# The files the rows come from, by `source`.
SOURCES: dict[str, str] = {
    "AddPartitionsToTxnConfig": "transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/AddPartitionsToTxnConfig.java",  # noqa: E501
    "BrokerSecurityConfigs": "clients/src/main/java/org/apache/kafka/common/config/internals/BrokerSecurityConfigs.java",  # noqa: E501
    "CleanerConfig": "storage/src/main/java/org/apache/kafka/storage/internals/log/CleanerConfig.java",
    "DelegationTokenManagerConfigs": "server-common/src/main/java/org/apache/kafka/server/config/DelegationTokenManagerConfigs.java",  # noqa: E501
    "GroupCoordinatorConfig": "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/GroupCoordinatorConfig.java",  # noqa: E501
    "KRaftConfigs": "server/src/main/java/org/apache/kafka/server/config/KRaftConfigs.java",
    "LogConfig": "storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java",
    "MetadataLogConfig": "raft/src/main/java/org/apache/kafka/raft/MetadataLogConfig.java",
    "MetricConfigs": "server/src/main/java/org/apache/kafka/server/metrics/MetricConfigs.java",
    "QuorumConfig": "raft/src/main/java/org/apache/kafka/raft/QuorumConfig.java",
    "QuotaConfig": "server-common/src/main/java/org/apache/kafka/server/config/QuotaConfig.java",
    "RemoteLogManagerConfig": "storage/src/main/java/org/apache/kafka/server/log/remote/storage/RemoteLogManagerConfig.java",  # noqa: E501
    "ReplicationConfigs": "server/src/main/java/org/apache/kafka/server/config/ReplicationConfigs.java",
    "ServerConfigs": "server-common/src/main/java/org/apache/kafka/server/config/ServerConfigs.java",
    "ShareCoordinatorConfig": "share-coordinator/src/main/java/org/apache/kafka/coordinator/share/ShareCoordinatorConfig.java",  # noqa: E501
    "ShareGroupConfig": "group-coordinator/src/main/java/org/apache/kafka/coordinator/group/modern/share/ShareGroupConfig.java",  # noqa: E501
    "SocketServerConfigs": "server/src/main/java/org/apache/kafka/network/SocketServerConfigs.java",
    "TransactionLogConfig": "transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/TransactionLogConfig.java",  # noqa: E501
    "TransactionStateManagerConfig": "transaction-coordinator/src/main/java/org/apache/kafka/coordinator/transaction/TransactionStateManagerConfig.java",  # noqa: E501
}


class KafkaBrokerConfig(NamedTuple):
    name: str
    kind: str  # ConfigDef.Type in lower case: int, long, short, double, bool, string, list, class, password
    default: Any
    check: tuple[Any, ...] | None
    dynamic: bool
    per_broker: bool
    listener_only: bool
    internal: bool  # defineInternal: not listed by DescribeConfigs unless set
    source: str
    doc: str


SSL_RECONFIGURABLE = frozenset(
    {
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
        "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
    }
)  # fmt: skip

K = KafkaBrokerConfig

# In AbstractKafkaConfig.CONFIG_DEF's order (the files in mergeConfigs' order, each in its define order).
KAFKA_BROKER_CONFIGS: tuple[KafkaBrokerConfig, ...] = (
    K(
        "remote.log.storage.system.enable",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Whether to enable tiered storage functionality in a broker or not. When it is true broker "
            "starts all the services required for the tiered storage functionality."
        ),
    ),
    K(
        "remote.log.storage.manager.impl.prefix",
        "string",
        "rsm.config.",
        ("non_empty",),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Prefix used for properties to be passed to RemoteStorageManager implementation. For example "
            "this value can be <code>rsm.config.</code>."
        ),
    ),
    K(
        "remote.log.metadata.manager.impl.prefix",
        "string",
        "rlmm.config.",
        ("non_empty",),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Prefix used for properties to be passed to RemoteLogMetadataManager implementation. For "
            "example this value can be <code>rlmm.config.</code>."
        ),
    ),
    K(
        "remote.log.storage.manager.class.name",
        "string",
        None,
        ("non_empty",),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc="Fully qualified class name of <code>RemoteStorageManager</code> implementation.",
    ),
    K(
        "remote.log.storage.manager.class.path",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Class path of the <code>RemoteStorageManager</code> implementation. If specified, the "
            "RemoteStorageManager implementation and its dependent libraries will be loaded by a "
            "dedicated classloader which searches this class path before the Kafka broker class path. The"
            " syntax of this parameter is same as the standard Java class path string."
        ),
    ),
    K(
        "remote.log.metadata.manager.class.name",
        "string",
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
        ("non_empty",),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc="Fully qualified class name of <code>RemoteLogMetadataManager</code> implementation.",
    ),
    K(
        "remote.log.metadata.manager.class.path",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Class path of the <code>RemoteLogMetadataManager</code> implementation. If specified, the "
            "RemoteLogMetadataManager implementation and its dependent libraries will be loaded by a "
            "dedicated classloader which searches this class path before the Kafka broker class path. The"
            " syntax of this parameter is same as the standard Java class path string."
        ),
    ),
    K(
        "remote.log.metadata.manager.listener.name",
        "string",
        None,
        ("non_empty",),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Listener name of the local broker to which it should get connected if needed by "
            "RemoteLogMetadataManager implementation."
        ),
    ),
    K(
        "remote.log.metadata.custom.metadata.max.bytes",
        "int",
        128,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The maximum size of custom metadata in bytes that the broker should accept from a remote "
            "storage plugin. If custom  metadata exceeds this limit, the updated segment metadata will "
            "not be stored, the copied data will be attempted to delete, and the remote copying task for "
            "this topic-partition will stop with an error."
        ),
    ),
    K(
        "remote.log.index.file.cache.total.size.bytes",
        "long",
        1073741824,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The total size of the space allocated to store index files fetched from remote storage in "
            "the local storage."
        ),
    ),
    K(
        "remote.log.manager.thread.pool.size",
        "int",
        2,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Size of the thread pool used in scheduling follower tasks to read the highest-uploaded "
            "remote-offset for follower partitions. This config is deprecated since 4.2, please use "
            "<code>remote.log.manager.follower.thread.pool.size</code> instead."
        ),
    ),
    K(
        "remote.log.manager.copier.thread.pool.size",
        "int",
        10,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc="Size of the thread pool used in scheduling tasks to copy segments.",
    ),
    K(
        "remote.log.manager.expiration.thread.pool.size",
        "int",
        10,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=("Size of the thread pool used in scheduling tasks to clean up the expired remote log segments."),
    ),
    K(
        "remote.log.manager.follower.thread.pool.size",
        "int",
        2,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Size of the thread pool used in scheduling follower tasks to read the highest-uploaded "
            "remote-offset for follower partitions."
        ),
    ),
    K(
        "remote.log.manager.task.interval.ms",
        "long",
        30000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Interval at which remote log manager runs the scheduled tasks like copy segments, and clean "
            "up remote log segments."
        ),
    ),
    K(
        "remote.log.manager.task.retry.backoff.ms",
        "long",
        500,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="RemoteLogManagerConfig",
        doc="The initial amount of wait in milliseconds before the request is retried again.",
    ),
    K(
        "remote.log.manager.task.retry.backoff.max.ms",
        "long",
        30000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="RemoteLogManagerConfig",
        doc=(
            "The maximum amount of time in milliseconds to wait when the request is retried again. The "
            "retry duration will increase exponentially for each request failure up to this maximum wait "
            "interval."
        ),
    ),
    K(
        "remote.log.manager.task.retry.jitter",
        "double",
        0.2,
        ("range", 0, 0.5),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="RemoteLogManagerConfig",
        doc=(
            "The value used in defining the range for computing random jitter factor. It is applied to "
            "the effective exponential term for computing the resultant retry backoff interval. This will"
            " avoid thundering herds of requests. The default value is 0.2 and valid value should be "
            "between 0(inclusive) and 0.5(inclusive). For ex: remote.log.manager.task.retry.jitter = "
            "0.25, then the range to compute random jitter will be [1-0.25, 1+0.25) viz [0.75, 1.25). So,"
            " jitter factor can be any random value with in that range."
        ),
    ),
    K(
        "remote.log.reader.threads",
        "int",
        10,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc="Size of the thread pool that is allocated for handling remote log reads.",
    ),
    K(
        "remote.log.reader.max.pending.tasks",
        "int",
        100,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "Maximum remote log reader thread pool task queue size. If the task queue is full, fetch "
            "requests are served with an error."
        ),
    ),
    K(
        "log.local.retention.ms",
        "long",
        -2,
        ("range", -2, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The number of milliseconds to keep the local log segments before it gets eligible for "
            "deletion. Default value is -2, it represents <code>log.retention.ms</code> value is to be "
            "used. The effective value should always be less than or equal to "
            "<code>log.retention.ms</code> value."
        ),
    ),
    K(
        "log.local.retention.bytes",
        "long",
        -2,
        ("range", -2, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The maximum size of local log segments that can grow for a partition before it gets eligible"
            " for deletion. Default value is -2, it represents <code>log.retention.bytes</code> value to "
            "be used. The effective value should always be less than or equal to "
            "<code>log.retention.bytes</code> value."
        ),
    ),
    K(
        "remote.log.manager.copy.max.bytes.per.second",
        "long",
        9223372036854775807,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The maximum number of bytes that can be copied from local storage to remote storage per "
            "second. This is a global limit for all the partitions that are being copied from local "
            "storage to remote storage. The default value is Long.MAX_VALUE, which means there is no "
            "limit on the number of bytes that can be copied per second."
        ),
    ),
    K(
        "remote.log.manager.copy.quota.window.num",
        "int",
        11,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The number of samples to retain in memory for remote copy quota management. The default "
            "value is 11, which means there are 10 whole windows + 1 current window."
        ),
    ),
    K(
        "remote.log.manager.copy.quota.window.size.seconds",
        "int",
        1,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=("The time span of each sample for remote copy quota management. The default value is 1 second."),
    ),
    K(
        "remote.log.manager.fetch.max.bytes.per.second",
        "long",
        9223372036854775807,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The maximum number of bytes that can be fetched from remote storage to local storage per "
            "second. This is a global limit for all the partitions that are being fetched from remote "
            "storage to local storage. The default value is Long.MAX_VALUE, which means there is no limit"
            " on the number of bytes that can be fetched per second."
        ),
    ),
    K(
        "remote.log.manager.fetch.quota.window.num",
        "int",
        11,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The number of samples to retain in memory for remote fetch quota management. The default "
            "value is 11, which means there are 10 whole windows + 1 current window."
        ),
    ),
    K(
        "remote.log.manager.fetch.quota.window.size.seconds",
        "int",
        1,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=("The time span of each sample for remote fetch quota management. The default value is 1 second."),
    ),
    K(
        "remote.fetch.max.wait.ms",
        "int",
        500,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=(
            "The maximum amount of time the server will wait before answering the fetch request "
            "containing remote fetch partitions. It's important to be aware that the request will only be"
            " responded after all remote partitions have been successfully fetched, have failed, or this "
            "timeout is exceeded."
        ),
    ),
    K(
        "remote.list.offsets.request.timeout.ms",
        "long",
        30000,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="RemoteLogManagerConfig",
        doc=("The maximum amount of time the server will wait for the remote list offsets request to complete."),
    ),
    K(
        "broker.id",
        "int",
        -1,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc="The broker id for this server.",
    ),
    K(
        "message.max.bytes",
        "int",
        1048588,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "The largest record batch size allowed by Kafka (after compression if compression is "
            "enabled).This can be set per topic with the topic level <code>max.message.bytes</code> "
            "config."
        ),
    ),
    K(
        "num.io.threads",
        "int",
        8,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=("The number of threads that the server uses for processing requests, which may include disk I/O"),
    ),
    K(
        "num.replica.alter.log.dirs.threads",
        "int",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "The number of threads that can move replicas between log directories, which may include disk"
            " I/O. The default value is equal to the number of directories specified in the "
            "<code>log.dir</code> or <code>log.dirs</code> configuration property."
        ),
    ),
    K(
        "background.threads",
        "int",
        10,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc="The number of threads to use for various background processing tasks",
    ),
    K(
        "request.timeout.ms",
        "int",
        30000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "The configuration controls the maximum amount of time the client will wait for the response "
            "of a request. If the response is not received before the timeout elapses the client will "
            "resend the request if necessary or fail the request if retries are exhausted."
        ),
    ),
    K(
        "socket.connection.setup.timeout.ms",
        "long",
        10000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "The amount of time the client will wait for the socket connection to be established. If the "
            "connection is not built before the timeout elapses, clients will close the socket channel. "
            "This value is the initial backoff value and will increase exponentially for each consecutive"
            " connection failure, up to the <code>socket.connection.setup.timeout.max.ms</code> value."
        ),
    ),
    K(
        "socket.connection.setup.timeout.max.ms",
        "long",
        30000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "The maximum amount of time the client will wait for the socket connection to be established."
            " The connection setup timeout will increase exponentially for each consecutive connection "
            "failure up to this maximum. To avoid connection storms, a randomization factor of 0.2 will "
            "be applied to the timeout resulting in a random range between 20% below and 20% above the "
            "computed value."
        ),
    ),
    K(
        "config.providers",
        "list",
        "",
        ("list", True, ()),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "Comma-separated alias names for classes implementing the <code>ConfigProvider</code> "
            "interface. This enables loading configuration data (such as passwords, API keys, and other "
            "credentials) from external sources. For example, see <a "
            'href="https://kafka.apache.org/documentation/#config_providers">Configuration Providers</a>.'
        ),
    ),
    K(
        "authorizer.class.name",
        "string",
        "",
        ("non_null",),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "The fully qualified name of a class that implements "
            "<code>org.apache.kafka.server.authorizer.Authorizer</code> interface, which is used by the "
            "broker for authorization."
        ),
    ),
    K(
        "early.start.listeners",
        "list",
        None,
        ("list", True, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "A comma-separated list of listener names which may be started before the authorizer has "
            "finished initialization. This is useful when the authorizer is dependent on the cluster "
            "itself for bootstrapping, as is the case for the StandardAuthorizer (which stores ACLs in "
            "the metadata log.) By default, all listeners included in controller.listener.names will also"
            " be early start listeners. A listener should not appear in this list if it accepts external "
            "traffic."
        ),
    ),
    K(
        "broker.rack",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "Rack of the broker. This will be used in rack aware replication assignment for fault "
            "tolerance. Examples: <code>RACK1</code>, <code>us-east-1d</code>"
        ),
    ),
    K(
        "controlled.shutdown.enable",
        "bool",
        True,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc="Enable controlled shutdown of the server.",
    ),
    K(
        "delete.topic.enable",
        "bool",
        True,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "When set to true, topics can be deleted by the admin client. When set to false, deletion "
            "requests will be explicitly rejected by the broker."
        ),
    ),
    K(
        "compression.type",
        "string",
        "producer",
        ("choice", ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "Specify the final compression type for a given topic. This configuration accepts the "
            "standard compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts "
            "'uncompressed' which is equivalent to no compression; and 'producer' which means retain the "
            "original compression codec set by the producer."
        ),
    ),
    K(
        "compression.gzip.level",
        "int",
        -1,
        ("gzip_level",),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc="The compression level to use if compression.type is set to 'gzip'.",
    ),
    K(
        "compression.lz4.level",
        "int",
        9,
        ("range", 1, 17),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc="The compression level to use if compression.type is set to 'lz4'.",
    ),
    K(
        "compression.zstd.level",
        "int",
        3,
        ("range", -131072, 22),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc="The compression level to use if compression.type is set to 'zstd'.",
    ),
    K(
        "max.incremental.fetch.session.cache.slots",
        "int",
        1000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc=(
            "The maximum number of total incremental fetch sessions that we will maintain. "
            "FetchSessionCache is sharded into 8 shards and the limit is equally divided among all "
            "shards. Sessions are allocated to each shard in round-robin. Only entries within a shard are"
            " considered eligible for eviction."
        ),
    ),
    K(
        "fetch.max.bytes",
        "int",
        57671680,
        ("range", 1024, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc="The maximum number of bytes we will return for a fetch request. Must be at least 1024.",
    ),
    K(
        "max.request.partition.size.limit",
        "int",
        2000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ServerConfigs",
        doc="The maximum number of partitions can be served in one request.",
    ),
    K(
        "unstable.api.versions.enable",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="ServerConfigs",
        doc="",
    ),
    K(
        "unstable.feature.versions.enable",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="ServerConfigs",
        doc="",
    ),
    K(
        "process.roles",
        "list",
        None,
        ("list", False, ("broker", "controller")),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="KRaftConfigs",
        doc=("The roles that this process plays: 'broker', 'controller', or 'broker,controller' if it is both. "),
    ),
    K(
        "node.id",
        "int",
        None,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="KRaftConfigs",
        doc=(
            "The node ID associated with the roles this process is playing when "
            "<code>process.roles</code> is non-empty. This is required configuration when running in "
            "KRaft mode."
        ),
    ),
    K(
        "initial.broker.registration.timeout.ms",
        "int",
        60000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="KRaftConfigs",
        doc=(
            "When initially registering with the controller quorum, the number of milliseconds to wait "
            "before declaring failure and exiting the broker process."
        ),
    ),
    K(
        "broker.heartbeat.interval.ms",
        "int",
        2000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="KRaftConfigs",
        doc="The length of time in milliseconds between broker heartbeats.",
    ),
    K(
        "broker.session.timeout.ms",
        "int",
        9000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="KRaftConfigs",
        doc="The length of time in milliseconds that a broker lease lasts if no heartbeats are made.",
    ),
    K(
        "controller.listener.names",
        "list",
        None,
        ("list", False, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="KRaftConfigs",
        doc=(
            "A comma-separated list of the names of the listeners used by the controller. This is "
            "required when communicating with the controller quorum, the broker will always use the first"
            " listener in this list."
        ),
    ),
    K(
        "sasl.mechanism.controller.protocol",
        "string",
        "GSSAPI",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="KRaftConfigs",
        doc="SASL mechanism used for communication with controllers. Default is GSSAPI.",
    ),
    K(
        "controller.performance.sample.period.ms",
        "long",
        60000,
        ("range", 100, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="KRaftConfigs",
        doc="The number of milliseconds between periodic controller event performance log messages.",
    ),
    K(
        "controller.performance.always.log.threshold.ms",
        "long",
        2000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="KRaftConfigs",
        doc="We will log an error message about controller events that take longer than this threshold.",
    ),
    K(
        "server.max.startup.time.ms",
        "long",
        9223372036854775807,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="KRaftConfigs",
        doc=(
            "The maximum number of milliseconds we will wait for the server to come up. By default there "
            "is no limit. This should be used for testing only."
        ),
    ),
    K(
        "metadata.log.max.record.bytes.between.snapshots",
        "long",
        20971520,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetadataLogConfig",
        doc=(
            "This is the maximum number of bytes in the log between the latest snapshot and the "
            "high-watermark needed before generating a new snapshot. The default value is 20971520. To "
            "generate snapshots based on the time elapsed, see the "
            "<code>metadata.log.max.snapshot.interval.ms</code> configuration. The Kafka node will "
            "generate a snapshot when either the maximum time interval is reached or the maximum bytes "
            "limit is reached."
        ),
    ),
    K(
        "metadata.log.max.snapshot.interval.ms",
        "long",
        3600000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetadataLogConfig",
        doc=(
            "This is the maximum number of milliseconds to wait to generate a snapshot if there are "
            "committed records in the log that are not included in the latest snapshot. A value of zero "
            "disables time based snapshot generation. The default value is 3600000. To generate snapshots"
            " based on the number of metadata bytes, see the "
            "<code>metadata.log.max.record.bytes.between.snapshots</code> configuration. The Kafka node "
            "will generate a snapshot when either the maximum time interval is reached or the maximum "
            "bytes limit is reached."
        ),
    ),
    K(
        "metadata.log.dir",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetadataLogConfig",
        doc=(
            "This configuration determines where we put the metadata log. If it is not set, the metadata "
            "log is placed in the first log directory from log.dirs."
        ),
    ),
    K(
        "metadata.log.segment.bytes",
        "int",
        1073741824,
        ("range", 8388608, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetadataLogConfig",
        doc="The maximum size of a single metadata log file.",
    ),
    K(
        "metadata.log.segment.ms",
        "long",
        604800000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetadataLogConfig",
        doc="The maximum time before a new metadata log file is rolled out (in milliseconds).",
    ),
    K(
        "metadata.max.retention.bytes",
        "long",
        104857600,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetadataLogConfig",
        doc=(
            "The maximum combined size of the metadata log and snapshots before deleting old snapshots "
            "and log files. Since at least one snapshot must exist before any logs can be deleted, this "
            "is a soft limit."
        ),
    ),
    K(
        "metadata.max.retention.ms",
        "long",
        604800000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetadataLogConfig",
        doc=(
            "The number of milliseconds to keep a metadata log file or snapshot before deleting it. Since"
            " at least one snapshot must exist before any logs can be deleted, this is a soft limit."
        ),
    ),
    K(
        "metadata.max.idle.interval.ms",
        "int",
        500,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetadataLogConfig",
        doc=(
            "This configuration controls how often the active controller should write no-op records to "
            "the metadata partition. If the value is 0, no-op records are not appended to the metadata "
            "partition. The default value is 500"
        ),
    ),
    K(
        "internal.metadata.log.segment.bytes",
        "int",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="MetadataLogConfig",
        doc="The maximum size of a single metadata log file, only for testing.",
    ),
    K(
        "internal.metadata.max.batch.size.in.bytes",
        "int",
        8388608,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="MetadataLogConfig",
        doc="The largest record batch size allowed in the metadata log, only for testing.",
    ),
    K(
        "internal.metadata.max.fetch.size.in.bytes",
        "int",
        8388608,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="MetadataLogConfig",
        doc="The maximum number of bytes to read when fetching from the metadata log, only for testing.",
    ),
    K(
        "internal.metadata.delete.delay.millis",
        "long",
        60000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="MetadataLogConfig",
        doc="The amount of time to wait before deleting a file from the filesystem, only for testing.",
    ),
    K(
        "listeners",
        "list",
        "PLAINTEXT://:9092",
        ("list", False, ()),
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "Listener List - Comma-separated list of URIs we will listen on and the listener names. If "
            "the listener name is not a security protocol, <code>listener.security.protocol.map</code> "
            "must also be set.%n Listener names and port numbers must be unique unless one listener is an"
            " IPv4 address and the other listener is an IPv6 address (for the same port).%n Specify "
            "hostname as 0.0.0.0 to bind to all interfaces.%n Leave hostname empty to bind to default "
            "interface.%n Examples of legal listener lists:%n "
            "<code>PLAINTEXT://myhost:9092,SSL://:9091</code>%n "
            "<code>CLIENT://0.0.0.0:9092,REPLICATION://localhost:9093</code>%n "
            "<code>PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092</code>%n"
        ),
    ),
    K(
        "advertised.listeners",
        "list",
        None,
        ("list", False, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "Specifies the listener addresses that the Kafka brokers will advertise to clients and other "
            "brokers. The config is useful where the actual listener configuration <code>listeners</code>"
            " does not represent the addresses that clients should use to connect, such as in cloud "
            "environments. The addresses are published to and managed by the controller, the brokers pull"
            " these data from the controller as needed. In IaaS environments, this may need to be "
            "different from the interface to which the broker binds. If this is not set, the value for "
            "<code>%1$1s</code> will be used. Unlike <code>%1$1s</code>, it is not valid to advertise the"
            " 0.0.0.0 meta-address.%n Also unlike <code>%1$1s</code>, there can be duplicated ports in "
            "this property, so that one listener can be configured to advertise another listener's "
            "address. This can be useful in some cases where external load balancers are used."
        ),
    ),
    K(
        "listener.security.protocol.map",
        "string",
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "Map between listener names and security protocols. This must be defined for the same "
            "security protocol to be usable in more than one port or IP. For example, internal and "
            "external traffic can be separated even if SSL is required for both. Concretely, the user "
            "could define listeners with names INTERNAL and EXTERNAL and this property as: "
            "<code>INTERNAL:SSL,EXTERNAL:SSL</code>. As shown, key and value are separated by a colon and"
            " map entries are separated by commas. Each listener name should only appear once in the map."
            " Different security (SSL and SASL) settings can be configured for each listener by adding a "
            "normalised prefix (the listener name is lowercased) to the config name. For example, to set "
            "a different keystore for the INTERNAL listener, a config with name "
            "<code>listener.name.internal.ssl.keystore.location</code> would be set. If the config for "
            "the listener name is not set, the config will fallback to the generic config (i.e. "
            "<code>ssl.keystore.location</code>). Note that in KRaft a default mapping from the listener "
            "names defined by <code>controller.listener.names</code> to PLAINTEXT is assumed if no "
            "explicit mapping is provided and no other security protocol is in use."
        ),
    ),
    K(
        "socket.send.buffer.bytes",
        "int",
        102400,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=("The SO_SNDBUF buffer of the socket server sockets. If the value is -1, the OS default will be used."),
    ),
    K(
        "socket.receive.buffer.bytes",
        "int",
        102400,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=("The SO_RCVBUF buffer of the socket server sockets. If the value is -1, the OS default will be used."),
    ),
    K(
        "socket.request.max.bytes",
        "int",
        104857600,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc="The maximum number of bytes in a socket request",
    ),
    K(
        "socket.listen.backlog.size",
        "int",
        50,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "The maximum number of pending connections on the socket. In Linux, you may also need to "
            "configure <code>somaxconn</code> and <code>tcp_max_syn_backlog</code> kernel parameters "
            "accordingly to make the configuration takes effect."
        ),
    ),
    K(
        "max.connections.per.ip",
        "int",
        2147483647,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "The maximum number of connections we allow from each ip address. This can be set to 0 if "
            "there are overrides configured using max.connections.per.ip.overrides property. New "
            "connections from the ip address are dropped if the limit is reached."
        ),
    ),
    K(
        "max.connections.per.ip.overrides",
        "string",
        "",
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "A comma-separated list of per-ip or hostname overrides to the default maximum number of "
            'connections. An example value is "hostName:100,127.0.0.1:200"'
        ),
    ),
    K(
        "max.connections",
        "int",
        2147483647,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "The maximum number of connections we allow in the broker at any time. This limit is applied "
            "in addition to any per-ip limits configured using max.connections.per.ip. Listener-level "
            "limits may also be configured by prefixing the config name with the listener prefix, for "
            "example, <code>listener.name.internal.%1$1s</code>. Broker-wide limit should be configured "
            "based on broker capacity while listener limits should be configured based on application "
            "requirements. New connections are blocked if either the listener or broker limit is reached."
            " Connections on the inter-broker listener are permitted even if broker-wide limit is "
            "reached. The least recently used connection on another listener will be closed in this case."
        ),
    ),
    K(
        "max.connection.creation.rate",
        "int",
        2147483647,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "The maximum connection creation rate we allow in the broker at any time. Listener-level "
            "limits may also be configured by prefixing the config name with the listener prefix, for "
            "example, <code>listener.name.internal.max.connection.creation.rate</code>.Broker-wide "
            "connection rate limit should be configured based on broker capacity while listener limits "
            "should be configured based on application requirements. New connections will be throttled if"
            " either the listener or the broker limit is reached, with the exception of inter-broker "
            "listener. Connections on the inter-broker listener will be throttled only when the "
            "listener-level rate limit is reached."
        ),
    ),
    K(
        "connections.max.idle.ms",
        "long",
        600000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "Idle connections timeout: the server socket processor threads close the connections that "
            "idle more than this"
        ),
    ),
    K(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "Connection close delay on failed authentication: this is the time (in milliseconds) by which"
            " connection close will be delayed on authentication failure. This must be configured to be "
            "less than connections.max.idle.ms to prevent connection timeout."
        ),
    ),
    K(
        "queued.max.requests",
        "int",
        500,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc="The number of queued requests allowed for data-plane, before blocking the network threads",
    ),
    K(
        "queued.max.request.bytes",
        "long",
        -1,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc="The number of queued bytes allowed before no more requests are read",
    ),
    K(
        "num.network.threads",
        "int",
        3,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="SocketServerConfigs",
        doc=(
            "The number of threads that the server uses for receiving requests from the network and "
            "sending responses to the network. Noted: each listener (except for controller listener) "
            "creates its own thread pool."
        ),
    ),
    K(
        "controller.socket.timeout.ms",
        "int",
        30000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc="The socket timeout for controller-to-broker channels.",
    ),
    K(
        "default.replication.factor",
        "int",
        1,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "The replication factor for automatically created topics, and for topics created with -1 as "
            "the replication factor"
        ),
    ),
    K(
        "replica.lag.time.max.ms",
        "long",
        30000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "If a follower hasn't sent any fetch requests or hasn't consumed up to the leader's log end "
            "offset for at least this time, the leader will remove the follower from ISR"
        ),
    ),
    K(
        "replica.socket.timeout.ms",
        "int",
        30000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=("The socket timeout for network requests. Its value should be at least replica.fetch.wait.max.ms"),
    ),
    K(
        "replica.socket.receive.buffer.bytes",
        "int",
        65536,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc="The socket receive buffer for network requests to the leader for replicating data",
    ),
    K(
        "replica.fetch.max.bytes",
        "int",
        1048576,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "The number of bytes of messages to attempt to fetch for each partition. This is not an "
            "absolute maximum, if the first record batch in the first non-empty partition of the fetch is"
            " larger than this value, the record batch will still be returned to ensure that progress can"
            " be made. The maximum record batch size accepted by the broker is defined via "
            "<code>message.max.bytes</code> (broker config) or <code>max.message.bytes</code> (topic "
            "config)."
        ),
    ),
    K(
        "replica.fetch.wait.max.ms",
        "int",
        500,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "The maximum wait time for each fetcher request issued by follower replicas. This value "
            "should always be less than the replica.lag.time.max.ms at all times to prevent frequent "
            "shrinking of ISR for low throughput topics"
        ),
    ),
    K(
        "replica.fetch.backoff.ms",
        "int",
        1000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc="The amount of time to sleep when fetch partition error occurs.",
    ),
    K(
        "replica.fetch.min.bytes",
        "int",
        1,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "Minimum bytes expected for each fetch response. If not enough bytes, wait up to "
            "<code>replica.fetch.wait.max.ms</code> (broker config). Even if the total data available in "
            "the broker exceeds replica.fetch.min.bytes, the actual returned size may still be less than "
            "this value due to per-partition limits replica.fetch.max.bytes and max returned limits "
            "replica.fetch.response.max.bytes"
        ),
    ),
    K(
        "replica.fetch.response.max.bytes",
        "int",
        10485760,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "Maximum bytes expected for the entire fetch response. Records are fetched in batches, and if"
            " the first record batch in the first non-empty partition of the fetch is larger than this "
            "value, the record batch will still be returned to ensure that progress can be made. As such,"
            " this is not an absolute maximum. The maximum record batch size accepted by the broker is "
            "defined via <code>message.max.bytes</code> (broker config) or <code>max.message.bytes</code>"
            " (topic config)."
        ),
    ),
    K(
        "num.replica.fetchers",
        "int",
        1,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "Number of fetcher threads used to replicate records from each source broker. The total "
            "number of fetchers on each broker is bound by <code>num.replica.fetchers</code> multiplied "
            "by the number of brokers in the cluster.Increasing this value can increase the degree of I/O"
            " parallelism in the follower and leader broker at the cost of higher CPU and memory "
            "utilization."
        ),
    ),
    K(
        "replica.high.watermark.checkpoint.interval.ms",
        "long",
        5000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc="The frequency with which the high watermark is saved out to disk",
    ),
    K(
        "fetch.purgatory.purge.interval.requests",
        "int",
        1000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc="The purge interval (in number of requests) of the fetch request purgatory",
    ),
    K(
        "producer.purgatory.purge.interval.requests",
        "int",
        1000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc="The purge interval (in number of requests) of the producer request purgatory",
    ),
    K(
        "delete.records.purgatory.purge.interval.requests",
        "int",
        1,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc="The purge interval (in number of requests) of the delete records request purgatory",
    ),
    K(
        "auto.leader.rebalance.enable",
        "bool",
        True,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "Enables auto leader balancing. A background thread checks the distribution of partition "
            "leaders at regular intervals, configurable by leader.imbalance.check.interval.seconds. If "
            "the leader is imbalanced, leader rebalance to the preferred leader for partitions is "
            "triggered."
        ),
    ),
    K(
        "leader.imbalance.check.interval.seconds",
        "long",
        300,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc="The frequency with which the partition rebalance check is triggered by the controller",
    ),
    K(
        "unclean.leader.election.interval.ms",
        "long",
        300000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="ReplicationConfigs",
        doc=(
            "The frequency with which the controller checks if it should perform an unclean leader "
            "election for leaderless partitions."
        ),
    ),
    K(
        "unclean.leader.election.enable",
        "bool",
        False,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "Indicates whether to enable replicas not in the ISR set to be elected as leader as a last "
            "resort, even though doing so may result in data loss<p>Note: In KRaft mode, when enabling "
            "this config dynamically, it needs to wait for the unclean leader election thread to trigger "
            "election periodically (default is 5 minutes). Please run "
            "<code>kafka-leader-election.sh</code> with <code>unclean</code> option to trigger the "
            "unclean leader election immediately if needed.</p>"
        ),
    ),
    K(
        "security.inter.broker.protocol",
        "string",
        "PLAINTEXT",
        ("choice", ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "Security protocol used to communicate between brokers. It is an error to set this and "
            "inter.broker.listener.name properties at the same time."
        ),
    ),
    K(
        "inter.broker.listener.name",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "Name of listener used for communication between brokers. If this is unset, the listener name"
            " is defined by security.inter.broker.protocol. It is an error to set this and "
            "security.inter.broker.protocol properties at the same time."
        ),
    ),
    K(
        "replica.selector.class",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ReplicationConfigs",
        doc=(
            "The fully qualified class name that implements ReplicaSelector. This is used by the broker "
            "to find the preferred read replica. By default, we use an implementation that returns the "
            "leader."
        ),
    ),
    K(
        "group.coordinator.rebalance.protocols",
        "list",
        "classic,consumer,streams",
        ("list", False, ("classic", "consumer", "share", "streams")),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The list of enabled rebalance protocols.",
    ),
    K(
        "group.coordinator.threads",
        "int",
        4,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The number of threads used by the group coordinator.",
    ),
    K(
        "group.coordinator.append.linger.ms",
        "int",
        -1,
        ("range", -1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The duration in milliseconds that the coordinator will wait for writes to accumulate before "
            "flushing them to disk. Increasing this value improves write efficiency and batch size, but "
            "also increases the response latency for requests, as the coordinator must wait for batches "
            "to be flushed to disk before completing request processing. Transactional writes are not "
            "accumulated. Set to -1 for an adaptive linger time that minimizes latency based on the "
            "workload."
        ),
    ),
    K(
        "offsets.commit.timeout.ms",
        "int",
        5000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "Offset commit will be delayed until all replicas for the offsets topic receive the commit or"
            " this timeout is reached. This is similar to the producer request timeout. This is applied "
            "to all the writes made by the coordinator."
        ),
    ),
    K(
        "offsets.load.buffer.size",
        "int",
        5242880,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "Batch size for reading from the offsets segments when loading group metadata  into the cache"
            " (soft-limit, overridden if records are too large)."
        ),
    ),
    K(
        "offsets.topic.replication.factor",
        "short",
        3,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The replication factor for the offsets topic (set higher to ensure availability). Internal "
            "topic creation will fail until the cluster size meets this replication factor requirement."
        ),
    ),
    K(
        "offsets.topic.num.partitions",
        "int",
        50,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The number of partitions for the offset commit topic (should not change after deployment).",
    ),
    K(
        "offsets.topic.segment.bytes",
        "int",
        104857600,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The offsets topic segment bytes should be kept relatively small in order to facilitate "
            "faster log compaction and cache loads."
        ),
    ),
    K(
        "offsets.topic.compression.codec",
        "int",
        0,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=('Compression codec for the offsets topic - compression may be used to achieve "atomic" commits.'),
    ),
    K(
        "offset.metadata.max.bytes",
        "int",
        4096,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum size for a metadata entry associated with an offset commit.",
    ),
    K(
        "offsets.retention.minutes",
        "int",
        10080,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "For subscribed consumers, committed offset of a specific partition will be expired and "
            "discarded when 1) this retention period has elapsed after the consumer group loses all its "
            "consumers (i.e. becomes empty); 2) this retention period has elapsed since the last time an "
            "offset is committed for the partition and the group is no longer subscribed to the "
            "corresponding topic. For standalone consumers (using manual assignment), offsets will be "
            "expired after this retention period has elapsed since the time of last commit. Note that "
            "when a group is deleted via the delete-group request, its committed offsets will also be "
            "deleted without extra retention period; also when a topic is deleted via the delete-topic "
            "request, upon propagated metadata update any group's committed offsets for that topic will "
            "also be deleted without extra retention period."
        ),
    ),
    K(
        "offsets.retention.check.interval.ms",
        "long",
        600000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="Frequency at which to check for stale offsets",
    ),
    K(
        "group.min.session.timeout.ms",
        "int",
        6000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The minimum allowed session timeout for registered consumers. Shorter timeouts result in "
            "quicker failure detection at the cost of more frequent consumer heartbeating, which can "
            "overwhelm broker resources."
        ),
    ),
    K(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The maximum allowed session timeout for registered consumers. Longer timeouts give consumers"
            " more time to process messages in between heartbeats at the cost of a longer time to detect "
            "failures."
        ),
    ),
    K(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The amount of time the group coordinator will wait for more consumers to join a new group "
            "before performing the first rebalance. A longer delay means potentially fewer rebalances, "
            "but increases the time until processing begins."
        ),
    ),
    K(
        "group.max.size",
        "int",
        2147483647,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum number of consumers that a single consumer group can accommodate.",
    ),
    K(
        "group.consumer.session.timeout.ms",
        "int",
        45000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The timeout to detect client failures when using the consumer group protocol.",
    ),
    K(
        "group.consumer.min.session.timeout.ms",
        "int",
        45000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The minimum allowed session timeout for registered consumers.",
    ),
    K(
        "group.consumer.max.session.timeout.ms",
        "int",
        60000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum allowed session timeout for registered consumers.",
    ),
    K(
        "group.consumer.heartbeat.interval.ms",
        "int",
        5000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The heartbeat interval given to the members of a consumer group.",
    ),
    K(
        "group.consumer.min.heartbeat.interval.ms",
        "int",
        5000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The minimum heartbeat interval for registered consumers.",
    ),
    K(
        "group.consumer.max.heartbeat.interval.ms",
        "int",
        15000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum heartbeat interval for registered consumers.",
    ),
    K(
        "group.consumer.max.size",
        "int",
        2147483647,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The maximum number of consumers that a single consumer group can accommodate. This value "
            "will only impact groups under the CONSUMER group protocol. To configure the max group size "
            "when using the CLASSIC group protocol use group.max.size instead."
        ),
    ),
    K(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        ("list", False, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The server side assignors as a list of either names for builtin assignors or full class names "
            "for customer assignors. The first one in the list is considered as the default assignor to be "
            "used in the case where the consumer does not specify an assignor. The supported builtin "
            "assignors are: uniform, range."
        ),
    ),
    K(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        ("choice_ci", ("disabled", "upgrade", "downgrade", "bidirectional")),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The config that enables converting the non-empty classic group using the consumer embedded "
            "protocol to the non-empty consumer group using the consumer group protocol and vice versa; "
            "conversions of empty groups in both directions are always enabled regardless of this policy. "
            "bidirectional: both upgrade from classic group to consumer group and downgrade from consumer "
            "group to classic group are enabled, upgrade: only upgrade from classic group to consumer group "
            "is enabled, downgrade: only downgrade from consumer group to classic group is enabled, disabled:"
            " neither upgrade nor downgrade is enabled. In this mode a member using the classic protocol is "
            "not allowed to join or rejoin a non-empty consumer group; if a group is already mixed (for "
            "example because this policy was changed), its classic-protocol members are rejected when they "
            "next attempt to rejoin."
        ),
    ),
    K(
        "group.consumer.regex.refresh.interval.ms",
        "int",
        600000,
        ("range", 10000, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="GroupCoordinatorConfig",
        doc=(
            "The interval at which the group coordinator will refresh the topics matching the group "
            "subscribed regexes. This is only applicable to consumer groups using the consumer group "
            "protocol. "
        ),
    ),
    K(
        "group.share.session.timeout.ms",
        "int",
        45000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The timeout to detect client failures when using the share group protocol.",
    ),
    K(
        "group.share.min.session.timeout.ms",
        "int",
        45000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The minimum allowed session timeout for share group members.",
    ),
    K(
        "group.share.max.session.timeout.ms",
        "int",
        60000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum allowed session timeout for share group members.",
    ),
    K(
        "group.share.heartbeat.interval.ms",
        "int",
        5000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The heartbeat interval given to the members of a share group.",
    ),
    K(
        "group.share.min.heartbeat.interval.ms",
        "int",
        5000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The minimum heartbeat interval for share group members.",
    ),
    K(
        "group.share.max.heartbeat.interval.ms",
        "int",
        15000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum heartbeat interval for share group members.",
    ),
    K(
        "group.share.max.size",
        "int",
        200,
        ("range", 1, 1000),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum number of members that a single share group can accommodate.",
    ),
    K(
        "group.share.assignors",
        "list",
        "simple",
        ("list", False, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The server-side assignors as a list of either names for built-in assignors or full class names "
            "for custom assignors. The list must contain only a single entry which is used by all groups. The"
            " supported built-in assignors are: simple."
        ),
    ),
    K(
        "group.share.initialize.retry.interval.ms",
        "int",
        30000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="GroupCoordinatorConfig",
        doc=(
            "Time elapsed before retrying initialize share group state request. If below "
            "offsets.commit.timeout.ms, then value of offsets.commit.timeout.ms is used."
        ),
    ),
    K(
        "group.streams.session.timeout.ms",
        "int",
        45000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The timeout to detect client failures when using the streams group protocol.",
    ),
    K(
        "group.streams.min.session.timeout.ms",
        "int",
        45000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The minimum allowed value for the group-level configuration of streams.session.timeout.ms",
    ),
    K(
        "group.streams.max.session.timeout.ms",
        "int",
        60000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum allowed value for the group-level configuration of streams.session.timeout.ms",
    ),
    K(
        "group.streams.heartbeat.interval.ms",
        "int",
        5000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The heartbeat interval given to the members.",
    ),
    K(
        "group.streams.min.heartbeat.interval.ms",
        "int",
        5000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=("The minimum allowed value for the group-level configuration of streams.heartbeat.interval.ms"),
    ),
    K(
        "group.streams.max.heartbeat.interval.ms",
        "int",
        15000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=("The maximum allowed value for the group-level configuration of streams.heartbeat.interval.ms"),
    ),
    K(
        "group.streams.max.size",
        "int",
        2147483647,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The maximum number of streams clients that a single streams group can accommodate.",
    ),
    K(
        "group.streams.num.standby.replicas",
        "int",
        0,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc="The number of standby replicas for each task.",
    ),
    K(
        "group.streams.max.standby.replicas",
        "int",
        2,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=("The maximum allowed value for the group-level configuration of streams.num.standby.replicas"),
    ),
    K(
        "group.streams.initial.rebalance.delay.ms",
        "int",
        3000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="GroupCoordinatorConfig",
        doc=(
            "The amount of time the group coordinator will wait for more streams clients to join a new "
            "group before performing the first rebalance. A longer delay means potentially fewer "
            "rebalances."
        ),
    ),
    K(
        "log.cleaner.threads",
        "int",
        1,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc="The number of background threads to use for log cleaning",
    ),
    K(
        "log.cleaner.io.max.bytes.per.second",
        "double",
        1.7976931348623157e308,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc=(
            "The log cleaner will be throttled so that the sum of its read and write i/o will be less "
            "than this value on average"
        ),
    ),
    K(
        "log.cleaner.dedupe.buffer.size",
        "long",
        134217728,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc="The total memory used for log deduplication across all cleaner threads",
    ),
    K(
        "log.cleaner.io.buffer.size",
        "int",
        524288,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc="The total memory used for log cleaner I/O buffers across all cleaner threads",
    ),
    K(
        "log.cleaner.io.buffer.load.factor",
        "double",
        0.9,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc=(
            "Log cleaner dedupe buffer load factor. The percentage full the dedupe buffer can become. A "
            "higher value will allow more log to be cleaned at once but will lead to more hash collisions"
        ),
    ),
    K(
        "log.cleaner.backoff.ms",
        "long",
        15000,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc="The amount of time to sleep when there are no logs to clean",
    ),
    K(
        "log.cleaner.min.cleanable.ratio",
        "double",
        0.5,
        ("range", 0, 1),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc=(
            "The minimum ratio of dirty log to total log for a log to eligible for cleaning. If the "
            "log.cleaner.max.compaction.lag.ms or the log.cleaner.min.compaction.lag.ms configurations "
            "are also specified, then the log compactor considers the log eligible for compaction as soon"
            " as either: (i) the dirty ratio threshold has been met and the log has had dirty "
            "(uncompacted) records for at least the log.cleaner.min.compaction.lag.ms duration, or (ii) "
            "if the log has had dirty (uncompacted) records for at most the "
            "log.cleaner.max.compaction.lag.ms period."
        ),
    ),
    K(
        "log.cleaner.enable",
        "bool",
        True,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc=(
            "This configuration has been deprecated and will be removed in Kafka 5.0. Users should not "
            "set it to false to prepare for its future removal. Enable the log cleaner process to run on "
            "the server. Should be enabled if using any topics with a cleanup.policy=compact including "
            "the internal offsets topic. If disabled those topics will not be compacted and continually "
            "grow in size."
        ),
    ),
    K(
        "log.cleaner.delete.retention.ms",
        "long",
        86400000,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc=(
            "The amount of time to retain tombstone message markers for log compacted topics. This "
            "setting also gives a bound on the time in which a consumer must complete a read if they "
            "begin from offset 0 to ensure that they get a valid snapshot of the final stage (otherwise  "
            "tombstones messages may be collected before a consumer completes their scan)."
        ),
    ),
    K(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        0,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc=(
            "The minimum time a message will remain uncompacted in the log. Only applicable for logs that"
            " are being compacted."
        ),
    ),
    K(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        9223372036854775807,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="CleanerConfig",
        doc=(
            "The maximum time a message will remain ineligible for compaction in the log. Only applicable"
            " for logs that are being compacted."
        ),
    ),
    K(
        "num.partitions",
        "int",
        1,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc="The default number of log partitions per topic",
    ),
    K(
        "log.dir",
        "list",
        "/tmp/kafka-logs",
        ("list", False, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "A comma-separated list of the directories where the log data is stored. (supplemental to "
            "log.dirs property)"
        ),
    ),
    K(
        "log.dirs",
        "list",
        None,
        ("list", False, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "A comma-separated list of the directories where the log data is stored. If not set, the "
            "value in log.dir is used."
        ),
    ),
    K(
        "log.segment.bytes",
        "int",
        1073741824,
        ("range", 1048576, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc="The maximum size of a single log file",
    ),
    K(
        "log.roll.ms",
        "long",
        None,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The maximum time before a new log segment is rolled out (in milliseconds). If not set, the "
            "value in log.roll.hours is used"
        ),
    ),
    K(
        "log.roll.hours",
        "int",
        168,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=("The maximum time before a new log segment is rolled out (in hours), secondary to log.roll.ms property"),
    ),
    K(
        "log.roll.jitter.ms",
        "long",
        None,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The maximum jitter to subtract from logRollTimeMillis (in milliseconds). If not set, the "
            "value in log.roll.jitter.hours is used"
        ),
    ),
    K(
        "log.roll.jitter.hours",
        "int",
        0,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The maximum jitter to subtract from logRollTimeMillis (in hours), secondary to log.roll.jitter.ms property"
        ),
    ),
    K(
        "log.retention.ms",
        "long",
        None,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The number of milliseconds to keep a log file before deleting it (in milliseconds), If not "
            "set, the value in log.retention.minutes is used. If set to -1, no time limit is applied."
        ),
    ),
    K(
        "log.retention.minutes",
        "int",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The number of minutes to keep a log file before deleting it (in minutes), secondary to "
            "log.retention.ms property. If not set, the value in log.retention.hours is used"
        ),
    ),
    K(
        "log.retention.hours",
        "int",
        168,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The number of hours to keep a log file before deleting it (in hours), tertiary to "
            "log.retention.ms property"
        ),
    ),
    K(
        "log.retention.bytes",
        "long",
        -1,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc="The maximum size of the log before deleting it",
    ),
    K(
        "log.retention.check.interval.ms",
        "long",
        300000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=("The frequency in milliseconds that the log cleaner checks whether any log is eligible for deletion"),
    ),
    K(
        "log.cleanup.policy",
        "list",
        "delete",
        ("list", True, ("compact", "delete")),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            'This config designates the retention policy to use on log segments. The "delete" policy '
            "(which is the default) will discard old segments when their retention time or size limit has"
            ' been reached. The "compact" policy will enable <a href="#compaction">log compaction</a>, '
            "which retains the latest value for each key. It is also possible to specify both policies in"
            ' a comma-separated list (e.g. "delete,compact"). In this case, old segments will be '
            "discarded per the retention time and size configuration, while retained segments will be "
            "compacted. An empty list means infinite retention - no cleanup policies will be applied and "
            "log segments will be retained indefinitely. Note that with remote storage enabled, local "
            "retention limits (log.local.retention.ms and log.local.retention.bytes) are still applied to"
            " local segments."
        ),
    ),
    K(
        "log.index.size.max.bytes",
        "int",
        10485760,
        ("range", 4, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc="The maximum size in bytes of the offset index",
    ),
    K(
        "log.index.interval.bytes",
        "int",
        4096,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc="The interval with which we add an entry to the offset index.",
    ),
    K(
        "log.flush.interval.messages",
        "long",
        9223372036854775807,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc="The number of messages accumulated on a log partition before messages are flushed to disk.",
    ),
    K(
        "log.segment.delete.delay.ms",
        "long",
        60000,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The amount of time to wait before deleting a file from the filesystem. If the value is 0 and"
            " there is no file to delete, the system will wait 1 millisecond. Low value will cause busy "
            "waiting"
        ),
    ),
    K(
        "log.flush.scheduler.interval.ms",
        "long",
        9223372036854775807,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=("The frequency in ms that the log flusher checks whether any log needs to be flushed to disk"),
    ),
    K(
        "log.flush.interval.ms",
        "long",
        None,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The maximum time in ms that a message in any topic is kept in memory before flushed to disk."
            " If not set, the value in log.flush.scheduler.interval.ms is used"
        ),
    ),
    K(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        60000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The frequency with which we update the persistent record of the last flush which acts as the"
            " log recovery point."
        ),
    ),
    K(
        "log.flush.start.offset.checkpoint.interval.ms",
        "int",
        60000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc="The frequency with which we update the persistent record of log start offset",
    ),
    K(
        "log.preallocate",
        "bool",
        False,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "Should pre allocate file when create new segment? If you are using Kafka on Windows, you "
            "probably need to set it to true."
        ),
    ),
    K(
        "num.recovery.threads.per.data.dir",
        "int",
        2,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The number of threads per data directory to be used for log recovery at startup and flushing at shutdown"
        ),
    ),
    K(
        "auto.create.topics.enable",
        "bool",
        True,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc="Enable auto creation of topic on the server.",
    ),
    K(
        "min.insync.replicas",
        "int",
        1,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "Specifies the <i>minimum</i> number of in-sync replicas (including the leader) required for "
            'a write to succeed when a producer sets <code>acks</code> to "all" (or "-1"). In the '
            "<code>acks=all</code> case, every in-sync replica must acknowledge a write for it to be "
            "considered successful. E.g., if a topic has <code>replication.factor</code> of 3 and the ISR"
            " set includes all three replicas, then all three replicas must acknowledge an "
            "<code>acks=all</code> write for it to succeed, even if <code>min.insync.replicas</code> "
            "happens to be less than 3. If <code>acks=all</code> and the current ISR set contains fewer "
            "than <code>min.insync.replicas</code> members, then the producer will raise an exception "
            "(either <code>NotEnoughReplicas</code> or <code>NotEnoughReplicasAfterAppend</code>).<br> "
            "Regardless of the <code>acks</code> setting, the messages will not be visible to the "
            "consumers until they are replicated to all in-sync replicas and the "
            "<code>min.insync.replicas</code> condition is met.<br> When used together, "
            "<code>min.insync.replicas</code> and <code>acks</code> allow you to enforce greater "
            "durability guarantees. A typical scenario would be to create a topic with a replication "
            "factor of 3, set <code>min.insync.replicas</code> to 2, and produce with <code>acks</code> "
            'of "all". This ensures that a majority of replicas must persist a write before it\'s '
            "considered successful by the producer and it's visible to consumers.<p>Note that when the "
            "Eligible Leader Replicas feature is enabled, the semantics of this config changes. Please "
            'refer to <a href="#eligible_leader_replicas">the ELR section</a> for more info.</p>'
        ),
    ),
    K(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        ("choice", ("CreateTime", "LogAppendTime")),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "Define whether the timestamp in the message is message create time or log append time. The "
            "value should be either <code>CreateTime</code> or <code>LogAppendTime</code>."
        ),
    ),
    K(
        "log.message.timestamp.before.max.ms",
        "long",
        9223372036854775807,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "This configuration sets the allowable timestamp difference between the broker's timestamp "
            "and the message timestamp. The message timestamp can be earlier than or equal to the "
            "broker's timestamp, with the maximum allowable difference determined by the value set in "
            "this configuration. If log.message.timestamp.type=CreateTime, the message will be rejected "
            "if the difference in timestamps exceeds this specified threshold. This configuration is "
            "ignored if log.message.timestamp.type=LogAppendTime."
        ),
    ),
    K(
        "log.message.timestamp.after.max.ms",
        "long",
        3600000,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "This configuration sets the allowable timestamp difference between the message timestamp and"
            " the broker's timestamp. The message timestamp can be later than or equal to the broker's "
            "timestamp, with the maximum allowable difference determined by the value set in this "
            "configuration. If log.message.timestamp.type=CreateTime, the message will be rejected if the"
            " difference in timestamps exceeds this specified threshold. This configuration is ignored if"
            " log.message.timestamp.type=LogAppendTime."
        ),
    ),
    K(
        "create.topic.policy.class.name",
        "class",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The create topic policy class that should be used for validation. The class should implement"
            " the <code>org.apache.kafka.server.policy.CreateTopicPolicy</code> interface. <p>Note: This "
            "policy runs on the controller instead of the broker.</p>"
        ),
    ),
    K(
        "alter.config.policy.class.name",
        "class",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "The alter configs policy class that should be used for validation. The class should "
            "implement the <code>org.apache.kafka.server.policy.AlterConfigPolicy</code> interface. "
            "<p>Note: This policy runs on the controller instead of the broker.</p>"
        ),
    ),
    K(
        "log.dir.failure.timeout.ms",
        "long",
        30000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="LogConfig",
        doc=(
            "If the broker is unable to successfully communicate to the controller that some log "
            "directory has failed for longer than this time, the broker will fail and shut down."
        ),
    ),
    K(
        "log.initial.task.delay.ms",
        "long",
        30000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="LogConfig",
        doc=(
            "The initial task delay in millisecond when initializing tasks in LogManager. This should be "
            "used for testing only."
        ),
    ),
    K(
        "group.share.enable",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="ShareGroupConfig",
        doc="Enable share groups on the broker.",
    ),
    K(
        "group.share.delivery.count.limit",
        "int",
        5,
        ("range", 2, 10),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareGroupConfig",
        doc="The maximum number of delivery attempts for a record delivered to a share group.",
    ),
    K(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        ("range", 1000, 3600000),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareGroupConfig",
        doc="The record acquisition lock duration in milliseconds for share groups.",
    ),
    K(
        "group.share.min.record.lock.duration.ms",
        "int",
        15000,
        ("range", 1000, 30000),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareGroupConfig",
        doc="The record acquisition lock minimum duration in milliseconds for share groups.",
    ),
    K(
        "group.share.max.record.lock.duration.ms",
        "int",
        60000,
        ("range", 30000, 3600000),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareGroupConfig",
        doc="The record acquisition lock maximum duration in milliseconds for share groups.",
    ),
    K(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        ("range", 100, 10000),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareGroupConfig",
        doc="Share-group record lock limit per share-partition.",
    ),
    K(
        "share.fetch.purgatory.purge.interval.requests",
        "int",
        1000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareGroupConfig",
        doc="The purge interval (in number of requests) of the share fetch request purgatory",
    ),
    K(
        "group.share.max.share.sessions",
        "int",
        2000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareGroupConfig",
        doc="The maximum number of share sessions per broker.",
    ),
    K(
        "group.share.persister.class.name",
        "string",
        "org.apache.kafka.server.share.persister.DefaultStatePersister",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="ShareGroupConfig",
        doc=(
            "The fully qualified name of a class which implements the "
            "<code>org.apache.kafka.server.share.Persister</code> interface."
        ),
    ),
    K(
        "share.coordinator.state.topic.num.partitions",
        "int",
        50,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc=("The number of partitions for the share-group state topic (should not change after deployment)."),
    ),
    K(
        "share.coordinator.state.topic.replication.factor",
        "short",
        3,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc=(
            "Replication factor for the share-group state topic. Topic creation will fail until the "
            "cluster size meets this replication factor requirement."
        ),
    ),
    K(
        "share.coordinator.state.topic.min.isr",
        "short",
        2,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc="Overridden min.insync.replicas for the share-group state topic.",
    ),
    K(
        "share.coordinator.state.topic.segment.bytes",
        "int",
        104857600,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc="The log segment size for the share-group state topic.",
    ),
    K(
        "share.coordinator.threads",
        "int",
        1,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc="The number of threads used by the share coordinator.",
    ),
    K(
        "share.coordinator.snapshot.update.records.per.snapshot",
        "int",
        500,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc="The number of update records the share coordinator writes between snapshot records.",
    ),
    K(
        "share.coordinator.load.buffer.size",
        "int",
        5242880,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc=(
            "Batch size for reading from the share-group state topic when loading state information into "
            "the cache (soft-limit, overridden if records are too large)."
        ),
    ),
    K(
        "share.coordinator.state.topic.compression.codec",
        "int",
        0,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc="Compression codec for the share-group state topic.",
    ),
    K(
        "share.coordinator.append.linger.ms",
        "int",
        -1,
        ("range", -1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc=(
            "The duration in milliseconds that the share coordinator will wait for writes to accumulate "
            "before flushing them to disk. Set to -1 for an adaptive linger time that minimizes latency "
            "based on the workload."
        ),
    ),
    K(
        "share.coordinator.write.timeout.ms",
        "int",
        5000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="ShareCoordinatorConfig",
        doc=(
            "The duration in milliseconds that the share coordinator will wait for all replicas of the "
            "share-group state topic to receive a write."
        ),
    ),
    K(
        "share.coordinator.state.topic.prune.interval.ms",
        "int",
        300000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="ShareCoordinatorConfig",
        doc=(
            "The duration in milliseconds that the share coordinator will wait between pruning eligible "
            "records in share-group state topic."
        ),
    ),
    K(
        "share.coordinator.cold.partition.snapshot.interval.ms",
        "int",
        300000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="ShareCoordinatorConfig",
        doc=(
            "The duration in milliseconds that the share coordinator will wait between force snapshotting"
            " share partitions which are not being updated."
        ),
    ),
    K(
        "transaction.state.log.min.isr",
        "int",
        2,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionLogConfig",
        doc=(
            "The minimum number of replicas that must acknowledge a write to transaction topic in order "
            "to be considered successful."
        ),
    ),
    K(
        "transaction.state.log.load.buffer.size",
        "int",
        5242880,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionLogConfig",
        doc=(
            "Batch size for reading from the transaction log segments when loading producer ids and "
            "transactions into the cache (soft-limit, overridden if records are too large)."
        ),
    ),
    K(
        "transaction.state.log.replication.factor",
        "short",
        3,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionLogConfig",
        doc=(
            "The replication factor for the transaction topic (set higher to ensure availability). "
            "Internal topic creation will fail until the cluster size meets this replication factor "
            "requirement."
        ),
    ),
    K(
        "transaction.state.log.num.partitions",
        "int",
        50,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionLogConfig",
        doc="The number of partitions for the transaction topic (should not change after deployment).",
    ),
    K(
        "transaction.state.log.segment.bytes",
        "int",
        104857600,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionLogConfig",
        doc=(
            "The transaction topic segment bytes should be kept relatively small in order to facilitate "
            "faster log compaction and cache loads"
        ),
    ),
    K(
        "transaction.partition.verification.enable",
        "bool",
        True,
        None,
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionLogConfig",
        doc=(
            "Enable verification that checks that the partition has been added to the transaction before "
            "writing transactional records to the partition"
        ),
    ),
    K(
        "producer.id.expiration.ms",
        "int",
        86400000,
        ("range", 1, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionLogConfig",
        doc=(
            "The time in ms that a topic partition leader will wait before expiring producer IDs. "
            "Producer IDs will not expire while a transaction associated to them is still ongoing. Note "
            "that producer IDs may expire sooner if the last write from the producer ID is deleted due to"
            " the topic's retention settings. Setting this value the same or higher than "
            "<code>delivery.timeout.ms</code> can help prevent expiration during retries and protect "
            "against message duplication, but the default should be reasonable for most use cases."
        ),
    ),
    K(
        "producer.id.expiration.check.interval.ms",
        "int",
        600000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="TransactionLogConfig",
        doc=(
            "The interval at which to remove producer IDs that have expired due to "
            "<code>producer.id.expiration.ms</code> passing."
        ),
    ),
    K(
        "transactional.id.expiration.ms",
        "int",
        604800000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionStateManagerConfig",
        doc=(
            "The time in ms that the transaction coordinator will wait without receiving any transaction "
            "status updates for the current transaction before expiring its transactional id. "
            "Transactional IDs will not expire while a the transaction is still ongoing."
        ),
    ),
    K(
        "transaction.max.timeout.ms",
        "int",
        900000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionStateManagerConfig",
        doc=(
            "The maximum allowed timeout for transactions. If a client’s requested transaction time "
            "exceed this, then the broker will return an error in InitProducerIdRequest. This prevents a "
            "client from too large of a timeout, which can stall consumers reading from topics included "
            "in the transaction."
        ),
    ),
    K(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        10000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionStateManagerConfig",
        doc="The interval at which to rollback transactions that have timed out",
    ),
    K(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        3600000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionStateManagerConfig",
        doc=(
            "The interval at which to remove transactions that have expired due to "
            "<code>transactional.id.expiration.ms</code> passing"
        ),
    ),
    K(
        "transaction.two.phase.commit.enable",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="TransactionStateManagerConfig",
        doc=("Allow participation in Two-Phase Commit (2PC) transactions with an external transaction coordinator"),
    ),
    K(
        "controller.quorum.voters",
        "list",
        "",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "Map of id/endpoint information for the set of voters in a comma-separated list of "
            "<code>{id}@{host}:{port}</code> entries. This is the old way of defining membership for "
            "controller quorums and should NOT be set if using dynamic quorums. Instead, "
            "controller.quorum.bootstrap.servers should be set,and the voter set is determined by the "
            "--standalone or --initial-controllers flags when formatting.For example: "
            "<code>1@localhost:9092,2@localhost:9093,3@localhost:9094</code>"
        ),
    ),
    K(
        "controller.quorum.bootstrap.servers",
        "list",
        "",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "List of endpoints to use for bootstrapping the cluster metadata. The endpoints are specified"
            " in comma-separated list of <code>{host}:{port}</code> entries. For example: "
            "<code>localhost:9092,localhost:9093,localhost:9094</code>."
        ),
    ),
    K(
        "controller.quorum.election.timeout.ms",
        "int",
        1000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "Maximum time in milliseconds to wait without being able to fetch from the leader before "
            "triggering a new election"
        ),
    ),
    K(
        "controller.quorum.fetch.timeout.ms",
        "int",
        2000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "Maximum time without a successful fetch from the current leader before becoming a candidate "
            "and triggering an election for voters; Maximum time a leader can go without receiving valid "
            "fetch or fetchSnapshot request from a majority of the quorum before resigning."
        ),
    ),
    K(
        "controller.quorum.election.backoff.max.ms",
        "int",
        1000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "Maximum time in milliseconds before starting new elections. This is used in the binary "
            "exponential backoff mechanism that helps prevent gridlocked elections"
        ),
    ),
    K(
        "controller.quorum.append.linger.ms",
        "int",
        25,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "The duration in milliseconds that the leader will wait for writes to accumulate before "
            "flushing them to disk."
        ),
    ),
    K(
        "controller.quorum.request.timeout.ms",
        "int",
        2000,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "The configuration controls the maximum amount of time the client will wait for the response "
            "of a request. If the response is not received before the timeout elapses the client will "
            "resend the request if necessary or fail the request if retries are exhausted."
        ),
    ),
    K(
        "controller.quorum.retry.backoff.ms",
        "int",
        20,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "The amount of time to wait before attempting to retry a failed request to a given topic "
            "partition. This avoids repeatedly sending requests in a tight loop under some failure "
            "scenarios. This value is the initial backoff value and will increase exponentially for each "
            "failed request, up to the <code>retry.backoff.max.ms</code> value."
        ),
    ),
    K(
        "controller.quorum.auto.join.enable",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuorumConfig",
        doc=(
            "Controls whether a KRaft controller should automatically join the cluster metadata partition"
            " for its cluster id."
        ),
    ),
    K(
        "metrics.num.samples",
        "int",
        2,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetricConfigs",
        doc="The number of samples maintained to compute metrics.",
    ),
    K(
        "metrics.sample.window.ms",
        "long",
        30000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetricConfigs",
        doc="The window of time a metrics sample is computed over.",
    ),
    K(
        "metric.reporters",
        "list",
        "org.apache.kafka.common.metrics.JmxReporter",
        ("list", True, ()),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetricConfigs",
        doc=(
            "A list of classes to use as metrics reporters. Implementing the "
            "<code>org.apache.kafka.common.metrics.MetricsReporter</code> interface allows plugging in "
            "classes that will be notified of new metric creation. When custom reporters are set and "
            "<code>org.apache.kafka.common.metrics.JmxReporter</code> is needed, it has to be explicitly "
            "added to the list."
        ),
    ),
    K(
        "metrics.recording.level",
        "string",
        "INFO",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetricConfigs",
        doc=(
            "The highest recording level for metrics. It has three levels for recording metrics - info, "
            "debug, and trace.\n \nINFO level records only essential metrics necessary for monitoring "
            "system performance and health. It collects vital data without gathering too much detail, "
            "making it suitable for production environments where minimal overhead is desired.\n\nDEBUG "
            "level records most metrics, providing more detailed information about the system's "
            "operation. It's useful for development and testing environments where you need deeper "
            "insights to debug and fine-tune the application.\n\nTRACE level records all possible metrics, "
            "capturing every detail about the system's performance and operation. It's best for "
            "controlled environments where in-depth analysis is required, though it can introduce "
            "significant overhead."
        ),
    ),
    K(
        "kafka.metrics.reporters",
        "list",
        "",
        ("list", True, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetricConfigs",
        doc=(
            "A list of classes to use as Yammer metrics custom reporters. The reporters should implement "
            "<code>kafka.metrics.KafkaMetricsReporter</code> trait. If a client wants to expose JMX "
            "operations on a custom reporter, the custom reporter needs to additionally implement an "
            "MBean trait that extends <code>kafka.metrics.KafkaMetricsReporterMBean</code> trait so that "
            "the registered MBean is compliant with the standard MBean convention."
        ),
    ),
    K(
        "kafka.metrics.polling.interval.secs",
        "int",
        10,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetricConfigs",
        doc=("The metrics polling interval (in seconds) which can be used in kafka.metrics.reporters implementations."),
    ),
    K(
        "telemetry.max.bytes",
        "int",
        1048576,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="MetricConfigs",
        doc=(
            "The maximum size (after compression if compression is used) of telemetry metrics pushed from"
            " a client to the broker. The default value is 1048576 (1 MB)."
        ),
    ),
    K(
        "quota.window.num",
        "int",
        11,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc="The number of samples to retain in memory for client quotas",
    ),
    K(
        "replication.quota.window.num",
        "int",
        11,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc="The number of samples to retain in memory for replication quotas",
    ),
    K(
        "alter.log.dirs.replication.quota.window.num",
        "int",
        11,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc="The number of samples to retain in memory for alter log dirs replication quotas",
    ),
    K(
        "controller.quota.window.num",
        "int",
        11,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc="The number of samples to retain in memory for controller mutation quotas",
    ),
    K(
        "quota.window.size.seconds",
        "int",
        1,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc="The time span of each sample for client quotas",
    ),
    K(
        "replication.quota.window.size.seconds",
        "int",
        1,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc="The time span of each sample for replication quotas",
    ),
    K(
        "alter.log.dirs.replication.quota.window.size.seconds",
        "int",
        1,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc="The time span of each sample for alter log dirs replication quotas",
    ),
    K(
        "controller.quota.window.size.seconds",
        "int",
        1,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc="The time span of each sample for controller mutations quotas",
    ),
    K(
        "client.quota.callback.class",
        "class",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="QuotaConfig",
        doc=(
            "The fully qualified name of a class that implements the ClientQuotaCallback interface, which"
            " is used to determine quota limits applied to client requests. By default, the &lt;user&gt; "
            "and &lt;client-id&gt quotas that are stored and applied. For any given request, the most "
            "specific quota that matches the user principal of the session and the client-id of the "
            "request is applied."
        ),
    ),
    K(
        "connections.max.reauth.ms",
        "long",
        0,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "When explicitly set to a positive number (the default is 0, not a positive number), a "
            "session lifetime that will not exceed the configured value will be communicated to v2.2.0 or"
            " later clients when they authenticate. The broker will disconnect any such connection that "
            "is not re-authenticated within the session lifetime and that is then subsequently used for "
            "any purpose other than re-authentication. Configuration names can optionally be prefixed "
            "with listener prefix and SASL mechanism name in lower-case. For example, "
            "listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms=3600000"
        ),
    ),
    K(
        "sasl.server.max.receive.size",
        "int",
        524288,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The maximum receive size allowed before and during initial SASL authentication. Default "
            "receive size is 512KB. GSSAPI limits requests to 64K, but we allow upto 512KB by default for"
            " custom SASL mechanisms. In practice, PLAIN, SCRAM and OAUTH mechanisms can use much smaller"
            " limits."
        ),
    ),
    K(
        "security.providers",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "A list of configurable creator classes each returning a provider implementing security "
            "algorithms. These classes should implement the "
            "<code>org.apache.kafka.common.security.auth.SecurityProviderCreator</code> interface."
        ),
    ),
    K(
        "principal.builder.class",
        "class",
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The fully qualified name of a class that implements the KafkaPrincipalBuilder interface, "
            "which is used to build the KafkaPrincipal object used during authorization. If no principal "
            "builder is defined, the default behavior depends on the security protocol in use. For SSL "
            "authentication,  the principal will be derived using the rules defined by "
            "<code>ssl.principal.mapping.rules</code> applied on the distinguished name from the client "
            "certificate if one is provided; otherwise, if client authentication is not required, the "
            "principal name will be ANONYMOUS. For SASL authentication, the principal will be derived "
            "using the rules defined by <code>sasl.kerberos.principal.to.local.rules</code> if GSSAPI is "
            "in use, and the SASL authentication ID for other mechanisms. For PLAINTEXT, the principal "
            "will be ANONYMOUS. Note that custom implementations of <code>KafkaPrincipalBuilder</code> is"
            " required to implement <code>KafkaPrincipalSerde</code> interface, otherwise brokers will "
            "not be able to forward requests to the controller."
        ),
    ),
    K(
        "ssl.client.auth",
        "string",
        "none",
        ("choice", ("required", "requested", "none")),
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "Configures kafka broker to request client authentication. The following settings are common:"
            "  <ul> <li><code>ssl.client.auth=required</code> If set to required client authentication is"
            " required. <li><code>ssl.client.auth=requested</code> This means client authentication is "
            "optional. unlike required, if this option is set client can choose not to provide "
            "authentication information about itself <li><code>ssl.client.auth=none</code> This means "
            "client authentication is not needed.</ul>"
        ),
    ),
    K(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "A list of rules for mapping from distinguished name from the client certificate to short "
            "name. The rules are evaluated in order and the first rule that matches a principal name is "
            "used to map it to a short name. Any later rules in the list are ignored. By default, "
            "distinguished name of the X.500 certificate will be the principal. For more details on the "
            'format please see <a href="#security_authz"> security authorization and acls</a>. Note that '
            "this configuration is ignored if an extension of KafkaPrincipalBuilder is provided by the "
            "<code>principal.builder.class</code> configuration."
        ),
    ),
    K(
        "ssl.allow.dn.changes",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "Indicates whether changes to the certificate distinguished name should be allowed during a "
            "dynamic reconfiguration of certificates or not."
        ),
    ),
    K(
        "ssl.allow.san.changes",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "Indicates whether changes to the certificate subject alternative names should be allowed "
            "during a dynamic reconfiguration of certificates or not."
        ),
    ),
    K(
        "ssl.protocol",
        "string",
        "TLSv1.3",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The SSL protocol used to generate the SSLContext. The default is 'TLSv1.3', which should be "
            "fine for most use cases. A typical alternative to the default is 'TLSv1.2'. Allowed values "
            "for this config are dependent on the JVM. Clients using the defaults for this config and "
            "'ssl.enabled.protocols' will downgrade to 'TLSv1.2' if the server does not support "
            "'TLSv1.3'. If this config is set to 'TLSv1.2', however, clients will not use 'TLSv1.3' even "
            "if it is one of the values in <code>ssl.enabled.protocols</code> and the server only "
            "supports 'TLSv1.3'."
        ),
    ),
    K(
        "ssl.provider",
        "string",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The name of the security provider used for SSL connections. Default value is the default "
            "security provider of the JVM."
        ),
    ),
    K(
        "ssl.enabled.protocols",
        "list",
        "TLSv1.2,TLSv1.3",
        ("list", True, ()),
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The list of protocols enabled for SSL connections. The default is 'TLSv1.2,TLSv1.3'. This "
            "means that clients and servers will prefer TLSv1.3 if both support it and fallback to "
            "TLSv1.2 otherwise (assuming both support at least TLSv1.2). This default should be fine for "
            "most use cases. If this configuration is set to an empty list, Kafka will use the protocols "
            "enabled by default in the underlying SSLEngine, which may include additional protocols "
            "depending on the JVM version. Also see the config documentation for "
            "<code>ssl.protocol</code> to understand how it can impact the TLS version negotiation "
            "behavior."
        ),
    ),
    K(
        "ssl.keystore.type",
        "string",
        "JKS",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The file format of the key store file. This is optional for client. The values currently "
            "supported by the default <code>ssl.engine.factory.class</code> are [JKS, PKCS12, PEM]."
        ),
    ),
    K(
        "ssl.keystore.location",
        "string",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The location of the key store file. This is optional for client and can be used for two-way "
            "authentication for client."
        ),
    ),
    K(
        "ssl.keystore.password",
        "password",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The store password for the key store file. This is optional for client and only needed if "
            "'ssl.keystore.location' is configured. Key store password is not supported for PEM format."
        ),
    ),
    K(
        "ssl.key.password",
        "password",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=("The password of the private key in the key store file or the PEM key specified in 'ssl.keystore.key'."),
    ),
    K(
        "ssl.keystore.key",
        "password",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "Private key in the format specified by 'ssl.keystore.type'. Default SSL engine factory "
            "supports only PEM format with PKCS#8 keys. If the key is encrypted, key password must be "
            "specified using 'ssl.key.password'"
        ),
    ),
    K(
        "ssl.keystore.certificate.chain",
        "password",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "Certificate chain in the format specified by 'ssl.keystore.type'. Default SSL engine factory"
            " supports only PEM format with a list of X.509 certificates"
        ),
    ),
    K(
        "ssl.truststore.type",
        "string",
        "JKS",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The file format of the trust store file. The values currently supported by the default "
            "<code>ssl.engine.factory.class</code> are [JKS, PKCS12, PEM]."
        ),
    ),
    K(
        "ssl.truststore.location",
        "string",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc="The location of the trust store file.",
    ),
    K(
        "ssl.truststore.password",
        "password",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The password for the trust store file. If a password is not set, trust store file configured"
            " will still be used, but integrity checking is disabled. Trust store password is not "
            "supported for PEM format."
        ),
    ),
    K(
        "ssl.truststore.certificates",
        "password",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=True,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "Trusted certificates in the format specified by 'ssl.truststore.type'. Default SSL engine "
            "factory supports only PEM format with X.509 certificates."
        ),
    ),
    K(
        "ssl.keymanager.algorithm",
        "string",
        "SunX509",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The algorithm used by key manager factory for SSL connections. Default value is the key "
            "manager factory algorithm configured for the Java Virtual Machine."
        ),
    ),
    K(
        "ssl.trustmanager.algorithm",
        "string",
        "PKIX",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The algorithm used by trust manager factory for SSL connections. Default value is the trust "
            "manager factory algorithm configured for the Java Virtual Machine."
        ),
    ),
    K(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=("The endpoint identification algorithm to validate server hostname using server certificate. "),
    ),
    K(
        "ssl.secure.random.implementation",
        "string",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc="The SecureRandom PRNG implementation to use for SSL cryptography operations. ",
    ),
    K(
        "ssl.cipher.suites",
        "list",
        "",
        ("list", True, ()),
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "A list of cipher suites. This is a named combination of authentication, encryption, MAC and "
            "key exchange algorithm used to negotiate the security settings for a network connection "
            "using TLS or SSL network protocol. By default all the available cipher suites are supported."
        ),
    ),
    K(
        "ssl.engine.factory.class",
        "class",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The class of type org.apache.kafka.common.security.auth.SslEngineFactory to provide "
            "SSLEngine objects. Default value is "
            "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory. Alternatively, setting this to"
            " org.apache.kafka.common.security.ssl.CommonNameLoggingSslEngineFactory will log the common "
            "name of expired SSL certificates used by clients to authenticate at any of the brokers with "
            "log level INFO. Note that this will cause a tiny delay during establishment of new "
            "connections from mTLS clients to brokers due to the extra code for examining the certificate"
            " chain provided by the client. Note further that the implementation uses a custom truststore"
            " based on the standard Java truststore and thus might be considered a security risk due to "
            "not being as mature as the standard one."
        ),
    ),
    K(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "GSSAPI",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc="SASL mechanism used for inter-broker communication. Default is GSSAPI.",
    ),
    K(
        "sasl.enabled.mechanisms",
        "list",
        "GSSAPI",
        ("list", True, ()),
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The list of SASL mechanisms enabled in the Kafka server. The list may contain any mechanism "
            "for which a security provider is available. Only GSSAPI is enabled by default."
        ),
    ),
    K(
        "sasl.server.callback.handler.class",
        "class",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The fully qualified name of a SASL server callback handler class that implements the "
            "AuthenticateCallbackHandler interface. Server callback handlers must be prefixed with "
            "listener prefix and SASL mechanism name in lower-case. For example, listener.name.sasl_ssl.p"
            "lain.sasl.server.callback.handler.class=com.example.CustomPlainCallbackHandler."
        ),
    ),
    K(
        "sasl.kerberos.principal.to.local.rules",
        "list",
        "DEFAULT",
        ("list", True, ()),
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "A list of rules for mapping from principal names to short names (typically operating system "
            "usernames). The rules are evaluated in order and the first rule that matches a principal "
            "name is used to map it to a short name. Any later rules in the list are ignored. By default,"
            " principal names of the form <code>{username}/{hostname}@{REALM}</code> are mapped to "
            "<code>{username}</code>. For more details on the format please see <a "
            'href="#security_authz"> security authorization and acls</a>. Note that this configuration is'
            " ignored if an extension of <code>KafkaPrincipalBuilder</code> is provided by the "
            "<code>principal.builder.class</code> configuration."
        ),
    ),
    K(
        "sasl.jaas.config",
        "password",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "JAAS login context parameters for SASL connections in the format used by JAAS configuration "
            'files. JAAS configuration file format is described <a href="https://docs.oracle.com/javase/8'
            '/docs/technotes/guides/security/jgss/tutorials/LoginConfigFile.html">here</a>. The format '
            "for the value is: <code>loginModuleClass controlFlag (optionName=optionValue)*;</code>. For "
            "brokers, the config must be prefixed with listener prefix and SASL mechanism name in "
            "lower-case. For example, "
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=com.example.ScramLoginModule required;"
        ),
    ),
    K(
        "sasl.client.callback.handler.class",
        "class",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The fully qualified name of a SASL client callback handler class that implements the "
            "AuthenticateCallbackHandler interface."
        ),
    ),
    K(
        "sasl.login.class",
        "class",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The fully qualified name of a class that implements the Login interface. For brokers, login "
            "config must be prefixed with listener prefix and SASL mechanism name in lower-case. For "
            "example, listener.name.sasl_ssl.scram-sha-256.sasl.login.class=com.example.CustomScramLogin"
        ),
    ),
    K(
        "sasl.login.callback.handler.class",
        "class",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The fully qualified name of a SASL login callback handler class that implements the "
            "AuthenticateCallbackHandler interface. For brokers, login callback handler config must be "
            "prefixed with listener prefix and SASL mechanism name in lower-case. For example, listener.n"
            "ame.sasl_ssl.scram-sha-256.sasl.login.callback.handler.class=com.example.CustomScramLoginCal"
            "lbackHandler"
        ),
    ),
    K(
        "sasl.kerberos.service.name",
        "string",
        None,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The Kerberos principal name that Kafka runs as. This can be defined either in Kafka's JAAS "
            "config or in Kafka's config."
        ),
    ),
    K(
        "sasl.kerberos.kinit.cmd",
        "string",
        "/usr/bin/kinit",
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc="Kerberos kinit command path.",
    ),
    K(
        "sasl.kerberos.ticket.renew.window.factor",
        "double",
        0.8,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "Login thread will sleep until the specified window factor of time from last refresh to "
            "ticket's expiry has been reached, at which time it will try to renew the ticket."
        ),
    ),
    K(
        "sasl.kerberos.ticket.renew.jitter",
        "double",
        0.05,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc="Percentage of random jitter added to the renewal time.",
    ),
    K(
        "sasl.kerberos.min.time.before.relogin",
        "long",
        60000,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc="Login thread sleep time between refresh attempts.",
    ),
    K(
        "sasl.login.refresh.window.factor",
        "double",
        0.8,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "Login refresh thread will sleep until the specified window factor relative to the "
            "credential's lifetime has been reached, at which time it will try to refresh the credential."
            " Legal values are between 0.5 (50%) and 1.0 (100%) inclusive; a default value of 0.8 (80%) "
            "is used if no value is specified. Currently applies only to OAUTHBEARER."
        ),
    ),
    K(
        "sasl.login.refresh.window.jitter",
        "double",
        0.05,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The maximum amount of random jitter relative to the credential's lifetime that is added to "
            "the login refresh thread's sleep time. Legal values are between 0 and 0.25 (25%) inclusive; "
            "a default value of 0.05 (5%) is used if no value is specified. Currently applies only to "
            "OAUTHBEARER."
        ),
    ),
    K(
        "sasl.login.refresh.min.period.seconds",
        "short",
        60,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The desired minimum time for the login refresh thread to wait before refreshing a "
            "credential, in seconds. Legal values are between 0 and 900 (15 minutes); a default value of "
            "60 (1 minute) is used if no value is specified.  This value and  "
            "sasl.login.refresh.buffer.seconds are both ignored if their sum exceeds the remaining "
            "lifetime of a credential. Currently applies only to OAUTHBEARER."
        ),
    ),
    K(
        "sasl.login.refresh.buffer.seconds",
        "short",
        300,
        None,
        dynamic=True,
        per_broker=True,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The amount of buffer time before credential expiration to maintain when refreshing a "
            "credential, in seconds. If a refresh would otherwise occur closer to expiration than the "
            "number of buffer seconds then the refresh will be moved up to maintain as much of the buffer"
            " time as possible. Legal values are between 0 and 3600 (1 hour); a default value of  300 (5 "
            "minutes) is used if no value is specified. This value and "
            "sasl.login.refresh.min.period.seconds are both ignored if their sum exceeds the remaining "
            "lifetime of a credential. Currently applies only to OAUTHBEARER."
        ),
    ),
    K(
        "sasl.login.connect.timeout.ms",
        "int",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (optional) value in milliseconds for the external authentication provider connection "
            "timeout. Currently applies only to OAUTHBEARER."
        ),
    ),
    K(
        "sasl.login.read.timeout.ms",
        "int",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (optional) value in milliseconds for the external authentication provider read timeout. "
            "Currently applies only to OAUTHBEARER."
        ),
    ),
    K(
        "sasl.login.retry.backoff.max.ms",
        "long",
        10000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (optional) value in milliseconds for the maximum wait between login attempts to the "
            "external authentication provider. Login uses an exponential backoff algorithm with an "
            "initial wait based on the sasl.login.retry.backoff.ms setting and will double in wait length"
            " between attempts up to a maximum wait length specified by the "
            "sasl.login.retry.backoff.max.ms setting. Currently applies only to OAUTHBEARER."
        ),
    ),
    K(
        "sasl.login.retry.backoff.ms",
        "long",
        100,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (optional) value in milliseconds for the initial wait between login attempts to the "
            "external authentication provider. Login uses an exponential backoff algorithm with an "
            "initial wait based on the sasl.login.retry.backoff.ms setting and will double in wait length"
            " between attempts up to a maximum wait length specified by the "
            "sasl.login.retry.backoff.max.ms setting. Currently applies only to OAUTHBEARER."
        ),
    ),
    K(
        "sasl.oauthbearer.jwt.retriever.class",
        "class",
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The fully-qualified class name of a <code>JwtRetriever</code> implementation used to "
            "request tokens from the identity provider.</p><p>The default configuration value represents "
            "a class that maintains backward compatibility with previous versions of Apache Kafka. The "
            "default implementation uses the configuration to determine which concrete implementation to "
            "create.<p>Other implementations that are provided include:</p><ul><li><code>org.apache.kafka"
            ".common.security.oauthbearer.ClientCredentialsJwtRetriever</code></li><li><code>org.apache.k"
            "afka.common.security.oauthbearer.DefaultJwtRetriever</code></li><li><code>org.apache.kafka.c"
            "ommon.security.oauthbearer.FileJwtRetriever</code></li><li><code>org.apache.kafka.common.sec"
            "urity.oauthbearer.JwtBearerJwtRetriever</code></li></ul>"
        ),
    ),
    K(
        "sasl.oauthbearer.jwt.validator.class",
        "class",
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The fully-qualified class name of a <code>JwtValidator</code> implementation used to "
            "validate the JWT from the identity provider.</p><p>The default validator "
            "(<code>org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator</code>) maintains "
            "backward compatibility with previous versions of Apache Kafka. The default validator uses "
            "configuration to determine which concrete implementation to create.<p>The built-in "
            "<code>JwtValidator</code> implementations are:</p><ul><li><code>org.apache.kafka.common.secu"
            "rity.oauthbearer.BrokerJwtValidator</code></li><li><code>org.apache.kafka.common.security.oa"
            "uthbearer.ClientJwtValidator</code></li><li><code>org.apache.kafka.common.security.oauthbear"
            "er.DefaultJwtValidator</code></li></ul>"
        ),
    ),
    K(
        "sasl.oauthbearer.scope",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>This is the level of access a client application is granted to a resource or API which is"
            " included in the token request. If provided, it should match one or more scopes configured "
            "in the identity provider.</p><p>The scope was previously stored as part of the "
            "<code>sasl.jaas.config</code> configuration with the key <code>scope</code>. For backward "
            "compatibility, the <code>scope</code> JAAS option can still be used, but it is deprecated "
            "and will be removed in a future version.</p><p>Order of "
            "precedence:</p><ul><li><code>sasl.oauthbearer.scope</code> from "
            "configuration</li><li><code>scope</code> from JAAS</li></ul>"
        ),
    ),
    K(
        "sasl.oauthbearer.client.credentials.client.id",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The ID (defined in/by the OAuth identity provider) to identify the client requesting the "
            "token.</p><p>The client ID was previously stored as part of the "
            "<code>sasl.jaas.config</code> configuration with the key <code>clientId</code>. For backward"
            " compatibility, the <code>clientId</code> JAAS option can still be used, but it is "
            "deprecated and will be removed in a future version.</p><p>Order of "
            "precedence:</p><ul><li><code>sasl.oauthbearer.client.credentials.client.id</code> from "
            "configuration</li><li><code>clientId</code> from JAAS</li></ul>"
        ),
    ),
    K(
        "sasl.oauthbearer.client.credentials.client.secret",
        "password",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The secret (defined by either the user or preassigned, depending on the identity "
            "provider) of the client requesting the token.</p><p>The client secret was previously stored "
            "as part of the <code>sasl.jaas.config</code> configuration with the key "
            "<code>clientSecret</code>. For backward compatibility, the <code>clientSecret</code> JAAS "
            "option can still be used, but it is deprecated and will be removed in a future "
            "version.</p><p>Order of "
            "precedence:</p><ul><li><code>sasl.oauthbearer.client.credentials.client.secret</code> from "
            "configuration</li><li><code>clientSecret</code> from JAAS</li></ul>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.algorithm",
        "string",
        "RS256",
        ("choice_ci", ("ES256", "RS256")),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The algorithm the Apache Kafka client should use to sign the assertion sent to the "
            "identity provider. It is also used as the value of the OAuth <code>alg</code> (Algorithm) "
            "header in the JWT assertion.</p><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.claim.aud",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The JWT <code>aud</code> (Audience) claim which will be included in the  client JWT "
            "assertion created locally.</p><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.claim.exp.seconds",
        "int",
        300,
        ("range", 0, 86400),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The number of seconds <em>in the future</em> for which the JWT is valid. The value is "
            "used to determine the JWT <code>exp</code> (Expiration) claim based on the current system "
            "time when the JWT is created.</p><p>The formula to generate the <code>exp</code> claim is "
            "very simple:</p><pre>Let:\n\n  x = the current timestamp in seconds, on client\n  y = the value"
            " of this configuration\n\nThen:\n\n  exp = x + y\n</pre><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.claim.iss",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The value to be used as the <code>iss</code> (Issuer) claim which will be included in the"
            " client JWT assertion created locally.</p><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.claim.jti.include",
        "bool",
        False,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>Flag that determines if the JWT assertion should generate a unique ID for the JWT and "
            "include it in the <code>jti</code> (JWT ID) claim.</p><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.claim.nbf.seconds",
        "int",
        60,
        ("range", 0, 3600),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The number of seconds <em>in the past</em> from which the JWT is valid. The value is used"
            " to determine the JWT <code>nbf</code> (Not Before) claim based on the current system time "
            "when the JWT is created.</p><p>The formula to generate the <code>nbf</code> claim is very "
            "simple:</p><pre>Let:\n\n  x = the current timestamp in seconds, on client\n  y = the value of "
            "this configuration\n\nThen:\n\n  nbf = x - y\n</pre><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.claim.sub",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The value to be used as the <code>sub</code> (Subject) claim which will be included in "
            "the client JWT assertion created locally.</p><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.file",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>File that contains a <em>pre-generated</em> JWT assertion.</p><p>The underlying "
            "implementation caches the file contents to avoid the performance hit of loading the file on "
            "each access. The caching mechanism will detect whenthe file changes to allow for the file to"
            " be reloaded on modifications. This allows for &quot;live&quot; assertion rotation without "
            "restarting the Kafka client.</p><p>The file contains the assertion in the serialized, three "
            "part JWT format:</p><ol><li>The <em>header</em> section is a base 64-encoded JWT header that"
            " contains values like <code>alg</code> (Algorithm), <code>typ</code> (Type, always the "
            "literal value <code>JWT</code>), etc.</li><li>The <em>payload</em> section includes the base"
            " 64-encoded set of JWT claims, such as <code>aud</code> (Audience), <code>iss</code> "
            "(Issuer), <code>sub</code> (Subject), etc.</li><li>The <em>signature</em> section is the "
            "concatenated <em>header</em> and <em>payload</em> sections that was signed using a private "
            'key</li></ol><p>See <a href="https://datatracker.ietf.org/doc/html/rfc7519">RFC 7519</a> and'
            ' <a href="https://datatracker.ietf.org/doc/html/rfc7515">RFC 7515</a> for more details on '
            "the JWT and JWS formats.</p><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, all other "
            "<code>sasl.oauthbearer.assertion.</code>* configurations are ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.private.key.file",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>File that contains a private key in the standard PEM format which is used to sign the JWT"
            " assertion sent to the identity provider.</p><p>The underlying implementation caches the "
            "file contents to avoid the performance hit of loading the file on each access. The caching "
            "mechanism will detect when the file changes to allow for the file to be reloaded on "
            "modifications. This allows for &quot;live&quot; private key rotation without restarting the "
            "Kafka client.</p><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "password",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>The optional passphrase to decrypt the private key file specified by "
            "<code>sasl.oauthbearer.assertion.private.key.file</code>.</p><p><em>Note</em>: If the file "
            "referred to by <code>sasl.oauthbearer.assertion.private.key.file</code> is modified on the "
            "file system at runtime and it was created with a <em>different</em> passphrase than it was "
            "previously, the client will not be able to access the private key file because the "
            "passphrase is now out of date. For that reason, when using private key passphrases, either "
            "use the same passphrase each time, or&mdash;for improved security&mdash;restart the Kafka "
            "client using the new passphrase configuration.</p><p><em>Note</em>: If a value for "
            "<code>sasl.oauthbearer.assertion.file</code> is provided, this configuration will be "
            "ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.assertion.template.file",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "<p>This optional configuration specifies the file containing the JWT headers and/or payload "
            "claims to be used when creating the JWT assertion.</p><p>Not all identity providers require "
            "the same set of claims; some may require a given claim while others may prohibit it. In "
            "order to provide the most flexibility, this configuration allows the user to provide the "
            "static header values and claims that are to be included in the JWT.</p><p><em>Note</em>: If "
            "a value for <code>sasl.oauthbearer.assertion.file</code> is provided, this configuration "
            "will be ignored.</p>"
        ),
    ),
    K(
        "sasl.oauthbearer.scope.claim.name",
        "string",
        "scope",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            'The OAuth claim for the scope is often named "scope", but this (optional) setting can '
            "provide a different name to use for the scope included in the JWT payload's claims if the "
            "OAuth/OIDC provider uses a different name for that claim."
        ),
    ),
    K(
        "sasl.oauthbearer.sub.claim.name",
        "string",
        "sub",
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            'The OAuth claim for the subject is often named "sub", but this (optional) setting can '
            "provide a different name to use for the subject included in the JWT payload's claims if the "
            "OAuth/OIDC provider uses a different name for that claim."
        ),
    ),
    K(
        "sasl.oauthbearer.token.endpoint.url",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The URL for the OAuth/OIDC identity provider. If the URL is HTTP(S)-based, it is the "
            "issuer's token endpoint URL to which requests will be made to login based on the "
            "configuration in <code>sasl.oauthbearer.jwt.retriever.class</code>. If the URL is "
            "file-based, it specifies a file containing an access token (in JWT serialized form) issued "
            "by the OAuth/OIDC identity provider to use for authorization."
        ),
    ),
    K(
        "sasl.oauthbearer.jwks.endpoint.url",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The OAuth/OIDC provider URL from which the provider's <a "
            'href="https://datatracker.ietf.org/doc/html/rfc7517#section-5">JWKS (JSON Web Key Set)</a> '
            "can be retrieved. The URL can be HTTP(S)-based or file-based. If the URL is HTTP(S)-based, "
            "the JWKS data will be retrieved from the OAuth/OIDC provider via the configured URL on "
            "broker startup. All then-current keys will be cached on the broker for incoming requests. If"
            ' an authentication request is received for a JWT that includes a "kid" header claim value '
            "that isn't yet in the cache, the JWKS endpoint will be queried again on demand. However, the"
            " broker polls the URL every sasl.oauthbearer.jwks.endpoint.refresh.ms milliseconds to "
            "refresh the cache with any forthcoming keys before any JWT requests that include them are "
            "received. If the URL is file-based, the broker will load the JWKS file from a configured "
            'location on startup. In the event that the JWT includes a "kid" header value that isn\'t in '
            "the JWKS file, the broker will reject the JWT and authentication will fail."
        ),
    ),
    K(
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "long",
        3600000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (optional) value in milliseconds for the broker to wait between refreshing its JWKS "
            "(JSON Web Key Set) cache that contains the keys to verify the signature of the JWT."
        ),
    ),
    K(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "long",
        100,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (optional) value in milliseconds for the initial wait between JWKS (JSON Web Key Set) "
            "retrieval attempts from the external authentication provider. JWKS retrieval uses an "
            "exponential backoff algorithm with an initial wait based on the "
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms setting and will double in wait length "
            "between attempts up to a maximum wait length specified by the "
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms setting."
        ),
    ),
    K(
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "long",
        10000,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (optional) value in milliseconds for the maximum wait between attempts to retrieve the "
            "JWKS (JSON Web Key Set) from the external authentication provider. JWKS retrieval uses an "
            "exponential backoff algorithm with an initial wait based on the "
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms setting and will double in wait length "
            "between attempts up to a maximum wait length specified by the "
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms setting."
        ),
    ),
    K(
        "sasl.oauthbearer.clock.skew.seconds",
        "int",
        30,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (optional) value in seconds to allow for differences between the time of the OAuth/OIDC "
            "identity provider and the broker."
        ),
    ),
    K(
        "sasl.oauthbearer.expected.audience",
        "list",
        "",
        ("list", True, ()),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (strongly recommended) comma-delimited setting for the broker to use to verify that the "
            "JWT was issued for one of the expected audiences. The JWT will be inspected for the standard"
            ' OAuth "aud" claim and if this value is set, the broker will match the value from JWT\'s '
            '"aud" claim  to see if there is an exact match. If there is no match, the broker will reject'
            " the JWT and authentication will fail. If this value is not set, the broker will accept a "
            'token that has no "aud" claim, which is strongly discouraged.'
        ),
    ),
    K(
        "sasl.oauthbearer.expected.issuer",
        "string",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="BrokerSecurityConfigs",
        doc=(
            "The (strongly recommended) setting for the broker to use to verify that the JWT was created "
            'by the expected issuer. The JWT will be inspected for the standard OAuth "iss" claim and if '
            'this value is set, the broker will match it exactly against what is in the JWT\'s "iss" '
            "claim. If there is no match, the broker will reject the JWT and authentication will fail. If"
            " this value is not set, the broker will accept a JWT bearing any (or no) issuer, which is "
            "strongly discouraged."
        ),
    ),
    K(
        "delegation.token.secret.key",
        "password",
        None,
        None,
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="DelegationTokenManagerConfigs",
        doc=(
            "Secret key to generate and verify delegation tokens. The same key must be configured across "
            "all the brokers.  If using Kafka with KRaft, the key must also be set across all "
            "controllers.  If the key is not set or set to empty string, brokers will disable the "
            "delegation token support."
        ),
    ),
    K(
        "delegation.token.max.lifetime.ms",
        "long",
        604800000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="DelegationTokenManagerConfigs",
        doc=("The token has a maximum lifetime beyond which it cannot be renewed anymore. Default value 7 days."),
    ),
    K(
        "delegation.token.expiry.time.ms",
        "long",
        86400000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="DelegationTokenManagerConfigs",
        doc=("The token validity time in milliseconds before the token needs to be renewed. Default value 1 day."),
    ),
    K(
        "delegation.token.expiry.check.interval.ms",
        "long",
        3600000,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="DelegationTokenManagerConfigs",
        doc="Scan interval to remove expired delegation tokens.",
    ),
    K(
        "add.partitions.to.txn.retry.backoff.max.ms",
        "int",
        100,
        ("range", 0, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="AddPartitionsToTxnConfig",
        doc=(
            "The maximum allowed timeout for adding partitions to transactions on the server side. It "
            "only applies to the actual add partition operations, not the verification. It will not be "
            "effective if it is larger than request.timeout.ms"
        ),
    ),
    K(
        "add.partitions.to.txn.retry.backoff.ms",
        "int",
        20,
        ("range", 1, None),
        dynamic=False,
        per_broker=False,
        listener_only=False,
        internal=False,
        source="AddPartitionsToTxnConfig",
        doc=("The server-side retry backoff when the server attemptsto add the partition to the transaction"),
    ),
)


# The broker quotas Kafka takes only at run time (QuotaConfig.brokerQuotaConfigs, which DynamicConfig.Broker adds to
# the dynamic ones of KafkaConfig; core/src/main/scala/kafka/server/DynamicConfig.scala): not KafkaConfig names, so
# listed by DescribeConfigs only when set (`internal`), as Kafka lists them.
KAFKA_BROKER_QUOTA_CONFIGS: tuple[KafkaBrokerConfig, ...] = (
    K(
        "leader.replication.throttled.rate",
        "long",
        9223372036854775807,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="QuotaConfig",
        doc=(
            "A long representing the upper bound (bytes/sec) on replication traffic for leaders enumerated in"
            " the property leader.replication.throttled.replicas (for each topic). This property can be only "
            "set dynamically. It is suggested that the limit be kept above 1MB/s for accurate behaviour."
        ),
    ),
    K(
        "follower.replication.throttled.rate",
        "long",
        9223372036854775807,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="QuotaConfig",
        doc=(
            "A long representing the upper bound (bytes/sec) on replication traffic for followers enumerated "
            "in the property follower.replication.throttled.replicas (for each topic). This property can be "
            "only set dynamically. It is suggested that the limit be kept above 1MB/s for accurate behaviour."
        ),
    ),
    K(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "long",
        9223372036854775807,
        ("range", 0, None),
        dynamic=True,
        per_broker=False,
        listener_only=False,
        internal=True,
        source="QuotaConfig",
        doc=(
            "A long representing the upper bound (bytes/sec) on disk IO used for moving replica between log "
            "directories on the same broker. This property can be only set dynamically. It is suggested that "
            "the limit be kept above 1MB/s for accurate behaviour."
        ),
    ),
)

KAFKA_BROKER_CONFIGS_BY_NAME: dict[str, KafkaBrokerConfig] = {c.name: c for c in KAFKA_BROKER_CONFIGS}
