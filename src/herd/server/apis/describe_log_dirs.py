"""DescribeLogDirs (key 35), v1-v5: each of `log.dirs` with the partitions it holds and their sizes.

As Kafka answers it (apache/kafka core/src/main/scala/kafka/server/ReplicaManager.scala describeLogDirs,
KafkaApis.handleDescribeLogDirsRequest): one result per directory of log.dirs, named by its absolute path, with
every open partition in it (or those of `topics`; null means all; a topic without a matching partition is left
out), each with its size (the bytes of its segment files), its offset lag (0: on a single node the high
watermark is the log end offset) and `is_future_key` false; a partition being moved by AlterReplicaLogDirs also
appears in the target directory with `is_future_key` true, the bytes copied so far and how far the copy is behind.

v1: as v0 (Kafka 4.x's floor, KIP-896). v2: flexible. v3: top-level error code. v4: total_bytes and
usable_bytes of the directory's volume (statvfs: f_blocks and f_bavail times f_frsize, as Java's FileStore
getTotalSpace/getUsableSpace; -1 when the directory cannot be examined). v5: `is_cordoned` (KIP-1066): herd
cordons no directory, always false.

Cluster mode: a node keeps no partition data on local disk; the logs are in PostgreSQL, shared by every node.
So a node answers one "log dir", named by the database's URL without its password, holding the partitions it
leads, each with the bytes of its batches stored there (what has been committed; offset lag 0), and total and
usable bytes -1 (unknown: the database's volume is not the node's). A database that cannot be read makes that
entry's error KAFKA_STORAGE_ERROR, as Kafka answers an offline log dir. Admin clients ask every node, so the
answers together cover every partition once. docs/compatibility.md says so. Authorization: DESCRIBE on the
cluster, else CLUSTER_AUTHORIZATION_FAILED and no results.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from herd.log.store import StoredPartition
from herd.server.apis._authorize import DESCRIBE, authorized_cluster
from herd.server.apis._build import Builder, ctx_builder
from herd.server.broker import RequestContext

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    if not authorized_cluster(ctx, DESCRIBE):  # KafkaApis.handleDescribeLogDirsRequest: nothing, and the error
        return b.response(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results=())
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    results = tuple(
        _result(
            b,
            d.path,
            [p for p in d.held if wanted is None or (p.topic, p.partition) in wanted],
            d.total_bytes,
            d.usable_bytes,
            ErrorCode.kafka_storage_error if d.failed else ErrorCode.none,
        )
        for d in await ctx.broker.admin.log_dirs()
    )
    return b.response(throttle_time=0, error_code=ErrorCode.none, results=results)


def _result(b: Builder, root: str, held: list[StoredPartition], total: int, usable: int,
            error: ErrorCode = ErrorCode.none) -> Any:  # fmt: skip
    by_topic: dict[str, list[Any]] = defaultdict(list)
    for p in held:
        by_topic[p.topic].append(
            b(
                "DescribeLogDirsPartition",
                partition_index=p.partition,
                partition_size=p.size,
                offset_lag=p.offset_lag,
                is_future_key=p.is_future,
            )
        )
    topics = tuple(b("DescribeLogDirsTopic", name=name, partitions=tuple(parts)) for name, parts in by_topic.items())
    return b(
        "DescribeLogDirsResult",
        error_code=error,
        log_dir=root,
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )
