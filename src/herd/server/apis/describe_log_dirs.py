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

import os
from collections import defaultdict
from typing import Any, cast

from kio.schema.errors import ErrorCode

from herd.cluster.shared import SharedCluster
from herd.cluster.topics import TopicError
from herd.log.store import SegmentStore, StoredPartition
from herd.server.apis._authorize import DESCRIBE, authorized_cluster
from herd.server.apis._build import Builder, ctx_builder
from herd.server.broker import RequestContext

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 5


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    if not authorized_cluster(ctx, DESCRIBE):  # KafkaApis.handleDescribeLogDirsRequest: nothing, and the error
        return b.response(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results=())
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    if ctx.broker.cluster.shared:
        return _in_database(b, ctx, wanted)
    store = ctx.broker.store
    results = ()
    if isinstance(store, SegmentStore):
        results = tuple(
            _result(b, root, [p for p in held if wanted is None or (p.topic, p.partition) in wanted], *disk_space(root))
            for root, held in store.stored_partitions().items()
        )
    return b.response(throttle_time=0, error_code=ErrorCode.none, results=results)


async def _in_database(b: Builder, ctx: RequestContext, wanted: set[tuple[str, int]] | None) -> Any:
    cluster = cast(SharedCluster, ctx.broker.cluster)
    try:
        sizes = await cluster.stored_sizes()
    except TopicError:
        result = _result(b, cluster.location, [], -1, -1, ErrorCode.kafka_storage_error)
    else:
        held = [
            StoredPartition(topic, index, size, 0, False)
            for (topic, index), size in sorted(sizes.items())
            if wanted is None or (topic, index) in wanted
        ]
        result = _result(b, cluster.location, held, -1, -1)
    return b.response(throttle_time=0, error_code=ErrorCode.none, results=(result,))


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


def disk_space(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the volume holding `path`; (-1, -1), Kafka's "unknown", if it cannot be
    examined (e.g. a store on the in-memory filesystem)."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
