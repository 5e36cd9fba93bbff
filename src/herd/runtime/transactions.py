"""The transaction coordinator of this node: one `TxnShardRuntime` per `__transaction_state` partition it hosts.

It runs on the group coordinator's runtime (`CoordinatorRuntime`, `ShardRuntime`): the same loading, durable
group-committed writes, timers, compaction, failure and reload, moves. `start()` creates `__transaction_state` if
it does not exist (internal, compacted, uncompressed, segment.bytes from transaction.state.log.segment.bytes,
transaction.state.log.num.partitions partitions: Kafka's TransactionStateManager.transactionTopicConfigs), and a
transactional id is coordinated by partition abs(hashCode(id)) % partitions, as a group is (Kafka's
TransactionStateManager.partitionFor). Each shard's core is a `TransactionCoordinatorShard`
(herd.coordinator.transactions), whose coordinator epoch is the leader epoch of its partition's log.

Markers (Kafka's TransactionMarkerChannelManager, apache/kafka core/src/main/scala/kafka/coordinator/transaction/
TransactionMarkerChannelManager.scala and TransactionMarkerRequestCompletionHandler.scala). Once a PrepareCommit or
PrepareAbort is durable the core releases a `WriteMarkers` job with the client's answer; this runtime then writes
a COMMIT or ABORT marker into every partition of the transaction, one task per transaction:
- a data partition led here: `append_control` on its log (the data path's, herd.log), made durable before it
  counts (fsynced on local files, committed in PostgreSQL), and `on_marker((topic, partition))` tells the broker
  (long-polling fetches wake up: the last stable offset moved);
- a `__consumer_offsets` partition: the group coordinator's `complete_transaction`, which writes the marker through
  that partition's own writer and makes the transaction's offsets committed or drops them (Kafka's
  GroupCoordinator.onTransactionCompleted; see /work/notes/common17.md, Changes);
- a partition whose topic no longer exists is skipped (Kafka: "these partitions are likely deleted already and
  hence can be skipped");
- a partition that cannot be written now (its disk failed, another node leads it, the group coordinator's shard is
  loading) is retried every `MARKER_RETRY_MS`, as Kafka re-enqueues retriable marker errors. A data partition led
  by another node needs WriteTxnMarkers to that node (cluster mode), which herd does not send yet: the
  transaction then stays PrepareCommit/PrepareAbort until this node leads the partition or the coordinator moves.
When every marker is written the core's `markers_written` appends CompleteCommit/CompleteAbort. The job is
dropped when the shard stops being active (unloaded, failed): the next load finds PrepareCommit/PrepareAbort and
writes the markers again (a marker written twice is harmless: a second one finds no open transaction).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from herd.cluster.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TRANSACTION_STATE_TOPIC_CONFIGS, Cluster, Topic
from herd.config import BrokerConfig
from herd.coordinator import CoordinatorConfig, CoordinatorError
from herd.coordinator.result import Reply
from herd.coordinator.transactions import TransactionCoordinatorShard, TxnConfig, WriteMarkers
from herd.log.api import LogError, PartitionLog, as_remote
from herd.runtime.coordinator import CoordinatorRuntime
from herd.runtime.shard import ShardRuntime, ShardState, deliver
from herd.runtime.timer import WallClock

log = logging.getLogger(__name__)

MARKER_RETRY_MS = 100  # Kafka's marker channel retries with the broker's backoff (retry.backoff.ms, 100)


def txn_config(config: BrokerConfig) -> TxnConfig:
    """The core's configuration from the broker's Kafka-named properties."""
    return TxnConfig(
        transaction_max_timeout_ms=config.get("transaction.max.timeout.ms"),
        abort_timed_out_interval_ms=config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        transactional_id_expiration_ms=config.get("transactional.id.expiration.ms"),
        remove_expired_interval_ms=config.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
    )


class TransactionCompleter(Protocol):
    """What the transaction coordinator needs of the group coordinator (C's `complete_transaction`)."""

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                             coordinator_epoch: int) -> Any: ...


class TxnShardRuntime(ShardRuntime):
    """A `ShardRuntime` around a `TransactionCoordinatorShard`; released `WriteMarkers` go to `on_markers`."""

    topic = TRANSACTION_STATE_TOPIC
    shard: TransactionCoordinatorShard  # type: ignore[assignment]

    def __init__(self, partition: int, partition_log: PartitionLog, *, txn: TxnConfig,
                 new_producer_id: Callable[[], int], on_markers: Callable[[TxnShardRuntime, WriteMarkers], None],
                 **settings: Any) -> None:
        self._txn = txn
        self._new_producer_id = new_producer_id
        self._on_markers = on_markers
        super().__init__(partition, partition_log, config=CoordinatorConfig(), **settings)

    def _new_shard(self, clock: WallClock, config: CoordinatorConfig) -> TransactionCoordinatorShard:  # type: ignore[override]
        return TransactionCoordinatorShard(clock=clock, timer=self.timer, new_producer_id=self._new_producer_id,
                                           config=self._txn, coordinator_epoch=self.log.leader_epoch)

    def _deliver(self, replies: tuple[Reply, ...]) -> None:
        deliver(replies)
        for reply in replies:
            if isinstance(reply.handle, WriteMarkers):
                self._on_markers(self, reply.handle)


class TransactionRuntime(CoordinatorRuntime):
    topic = TRANSACTION_STATE_TOPIC
    _keys = "transactional ids"

    def __init__(self, cluster: Cluster, config: BrokerConfig, *, new_producer_id: Callable[[], int],
                 groups: TransactionCompleter | None = None,
                 on_marker: Callable[[tuple[str, int]], None] | None = None,
                 clock: WallClock | None = None) -> None:
        super().__init__(cluster, config, clock)
        self.txn_config = txn_config(config)
        self.new_producer_id = new_producer_id
        self._groups = groups
        self._on_marker = on_marker
        self._markers: dict[tuple[int, str], asyncio.Task[None]] = {}

    # -- hosting -----------------------------------------------------------------------------------------------

    def _ensure_topic(self) -> Topic:
        topic = self._cluster.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            configs = {**TRANSACTION_STATE_TOPIC_CONFIGS,
                       "segment.bytes": str(self._broker_config.get("transaction.state.log.segment.bytes"))}
            topic = self._cluster.create_topic(TRANSACTION_STATE_TOPIC,
                                               self._broker_config.get("transaction.state.log.num.partitions"),
                                               configs)
        return topic

    def _new_shard_runtime(self, partition: int, partition_log: PartitionLog, **settings: Any) -> ShardRuntime:
        return TxnShardRuntime(partition, partition_log, clock=self.clock, txn=self.txn_config,
                               new_producer_id=self.new_producer_id, on_markers=self._start_markers, **settings)

    def _log_loaded(self, partitions: list[int], seconds: float) -> None:
        active = self._active(partitions)
        failed = len(partitions) - len(active)
        log.info("%s: %d partitions loaded in %.2f s (%d transactional ids, %d records)%s", self.topic, len(active),
                 seconds, sum(s.shard.size() for s in active), sum(s.records for s in active),
                 f"; {failed} not loaded" if failed else "")

    def _log_moved_in(self, shard: ShardRuntime, seconds: float) -> None:
        if shard.state is ShardState.ACTIVE:
            log.info("%s-%d loaded in %.2f s (%d transactional ids, %d records): its transactions are coordinated "
                     "here", self.topic, shard.partition, seconds, shard.shard.size(), shard.records)

    async def close(self) -> None:
        for task in list(self._markers.values()):
            task.cancel()
        await super().close()

    # -- markers -----------------------------------------------------------------------------------------------

    def _start_markers(self, shard: TxnShardRuntime, job: WriteMarkers) -> None:
        key = (shard.partition, job.transactional_id)
        task = asyncio.get_running_loop().create_task(self._write_markers(shard, job))
        self._markers[key] = task
        task.add_done_callback(lambda t: self._markers.pop(key, None) if self._markers.get(key) is t else None)

    async def _write_markers(self, shard: TxnShardRuntime, job: WriteMarkers) -> None:
        pending = set(job.partitions)
        reported: set[tuple[str, int]] = set()
        while pending:
            if shard.state is not ShardState.ACTIVE:
                return  # the next load writes them again
            for tp in sorted(pending):
                try:
                    await self._write_marker(tp, job)
                    pending.discard(tp)
                except (LogError, CoordinatorError, _LedElsewhere) as error:
                    if tp not in reported:
                        reported.add(tp)
                        log.warning("the %s marker of transactional id %s cannot be written to %s-%d yet (%s): "
                                    "retrying", "COMMIT" if job.commit else "ABORT", job.transactional_id, *tp, error)
                except Exception:  # a bug: logged once, retried like the rest
                    if tp not in reported:
                        reported.add(tp)
                        log.exception("the marker of transactional id %s to %s-%d failed", job.transactional_id, *tp)
            if pending:
                await asyncio.sleep(MARKER_RETRY_MS / 1000)
        if shard.state is ShardState.ACTIVE:
            shard.apply(shard.shard.markers_written(job))

    async def _write_marker(self, tp: tuple[str, int], job: WriteMarkers) -> None:
        """Write one marker, durably; a partition that no longer exists is skipped. Raises LogError,
        CoordinatorError (the group coordinator's partition is not active) or _LedElsewhere to be retried."""
        topic_name, index = tp
        if topic_name == OFFSETS_TOPIC:
            if self._groups is None:
                raise _LedElsewhere("no group coordinator runs here")
            outcome = self._groups.complete_transaction(index, job.producer_id, job.producer_epoch, job.commit,
                                                        job.coordinator_epoch)
            if asyncio.isfuture(outcome) or asyncio.iscoroutine(outcome):
                await outcome
            return
        topic = self._cluster.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            log.info("the marker of transactional id %s to %s-%d is skipped: the partition no longer exists",
                     job.transactional_id, topic_name, index)
            return
        partition = topic.partitions[index]
        if partition is None:
            raise _LedElsewhere("led by another node (WriteTxnMarkers is not sent yet)")
        appended = partition.append_control(job.producer_id, job.producer_epoch, job.commit,  # type: ignore[attr-defined]
                                            job.coordinator_epoch, self.clock.now_ms())
        if partition.remote:
            await as_remote(partition).wait_durable(appended.last_offset + 1)
        else:
            partition.flush()
        if self._on_marker is not None:
            self._on_marker(tp)


class _LedElsewhere(Exception):
    """The marker's partition is not written by this node."""
