"""AlterReplicaLogDirs (key 34), v1-v2: move partitions to another of `log.dirs` while they keep serving.

As Kafka answers it (apache/kafka core/src/main/scala/kafka/server/ReplicaManager.scala alterReplicaLogDirs):
each partition gets its own error code, checked in Kafka's order:
- INVALID_TOPIC_EXCEPTION "The topic name is too long." when the move's `-future` directory name would exceed
  255 characters (KAFKA-4893);
- LOG_DIR_NOT_FOUND when the path is not one of log.dirs, compared as absolute paths (LogManager.isLogDirOnline:
  a relative path is never found);
- UNKNOWN_TOPIC_OR_PARTITION when this broker has no such partition;
- NONE once the move has started: the answer does not wait for it (Kafka's ReplicaAlterLogDirsThread copies in
  the background too). A partition already in that directory: NONE, and a move of it elsewhere is cancelled; a
  move to a directory while another is under way replaces it. DescribeLogDirs shows the copy (`is_future_key`)
  until the partition lives in its new directory. How the move works and why a crash cannot lose it:
  herd.log.moves.

herd refuses to move the partitions of `__consumer_offsets` (the group coordinator appends and fsyncs them from
a thread of its own) with POLICY_VIOLATION, where Kafka moves them; docs/compatibility.md says so.

Cluster mode: a node has no log directories (its partitions live in PostgreSQL), so every path is
LOG_DIR_NOT_FOUND, as on a Kafka broker whose log.dirs does not name it. v1: as v0 (Kafka 4.x's floor,
KIP-896). v2: flexible. Authorization: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED per partition.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath
from typing import Any

from kio.schema.errors import ErrorCode

from herd.cluster.topics import OFFSETS_TOPIC
from herd.log.api import KafkaStorageError
from herd.log.moves import Move, MoveCancelled, future_dir_name
from herd.log.store import SegmentStore
from herd.server.apis._authorize import ALTER, authorized_cluster
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2

log = logging.getLogger(__name__)
_RUNNING: set[asyncio.Task[None]] = set()  # moves being copied (a task is only weakly held by the loop)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    answers: dict[str, list[Any]] = {}
    allowed = authorized_cluster(ctx, ALTER)  # else every partition CLUSTER_AUTHORIZATION_FAILED, as KafkaApis
    for entry in request.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                code = _move(ctx, entry.path, topic.name, index) if allowed else ErrorCode.cluster_authorization_failed
                answers.setdefault(topic.name, []).append(
                    b("AlterReplicaLogDirPartitionResult", partition_index=index, error_code=code)
                )
    results = tuple(
        b("AlterReplicaLogDirTopicResult", topic_name=name, partitions=tuple(parts)) for name, parts in answers.items()
    )
    return b.response(throttle_time=0, results=results)


def _move(ctx: RequestContext, path: str, topic: str, index: int) -> ErrorCode:
    if len(future_dir_name(topic, index)) > 255:
        return ErrorCode.invalid_topic_exception
    store = ctx.broker.store
    root = posixpath.normpath(path)  # the roots are absolute: a relative path is never one of them
    if not isinstance(store, SegmentStore) or root not in store.roots:  # (a cluster node has no store)
        return ErrorCode.log_dir_not_found
    if ctx.broker.cluster.partition(topic, index) is None:
        return ErrorCode.unknown_topic_or_partition
    if topic == OFFSETS_TOPIC and store.log_dir(topic, index) != root:
        return ErrorCode.policy_violation
    try:
        move = store.start_move(topic, index, root)
    except KafkaStorageError as error:
        log.error("cannot move %s-%d to %s: %s", topic, index, path, error)
        return ErrorCode.kafka_storage_error
    if move is not None:
        task = asyncio.get_running_loop().create_task(_run(move))
        _RUNNING.add(task)
        task.add_done_callback(_RUNNING.discard)
    return ErrorCode.none


async def _run(move: Move) -> None:
    """Copy the sealed segments in a worker thread, then finish the move on the loop."""
    error: BaseException | None = None
    try:
        await asyncio.get_running_loop().run_in_executor(None, move.copy_sealed)
    except MoveCancelled:
        pass
    except Exception as failed:  # a disk error, or anything else: the move is abandoned, the partition stays
        error = failed
    move.finish(error)
