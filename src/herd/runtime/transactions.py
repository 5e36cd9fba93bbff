"""The transaction coordinator of this node: one `TxnShardRuntime` per `__transaction_state` partition it hosts.

It runs on the same shell as the group coordinator, a `ShardHost` (runtime/host.py) of its own, configured for
`__transaction_state`: the same loading, durable group-committed writes (`ShardRuntime` and its `ShardMachine`),
timers, compaction, failure and reload, moves. `__transaction_state` is made on first use,
as Kafka makes it (`ensure_created`, called by FindCoordinator for a transactional id): internal, compacted,
uncompressed, segment.bytes from transaction.state.log.segment.bytes, transaction.state.log.num.partitions
partitions (Kafka's TransactionStateManager.transactionTopicConfigs); a broker that never sees a transactional
producer never has it, nor pays for loading its partitions at start. Once it exists, `start()` loads it, and a
transactional id is coordinated by partition abs(hashCode(id)) % partitions, as a group is (Kafka's
TransactionStateManager.partitionFor). Each shard's core is a `TransactionCoordinatorShard`
(herd.coordinator.transactions), whose coordinator epoch is the leader epoch of its partition's log.

Markers (Kafka's TransactionMarkerChannelManager, apache/kafka core/src/main/scala/kafka/coordinator/transaction/
TransactionMarkerChannelManager.scala and TransactionMarkerRequestCompletionHandler.scala). Once a PrepareCommit or
PrepareAbort is durable the core releases a `WriteMarkers` job with the client's answer; this runtime then writes
a COMMIT or ABORT marker into every partition of the transaction, one task per transaction:
- a data partition led here: `append_control` on its log (the data path's, herd.log), as durable as the records
  it commits or aborts before it counts: committed in PostgreSQL (cluster mode); on local files written, and
  fsynced by the partition's log.flush.* settings like any produce (a kill -9 loses nothing written; Kafka's
  markers are likewise only as durable as its replicated data), never with an fsync of its own on the event
  loop; then `on_marker((topic, partition))` tells the broker (long-polling fetches wake up: the last stable
  offset moved);
- a `__consumer_offsets` partition: the group coordinator's `complete_transaction`, which writes the marker through
  that partition's own writer and makes the transaction's offsets committed or drops them (Kafka's
  GroupCoordinator.onTransactionCompleted; how the marker is written and replayed: the Transactions
  paragraph of runtime/shard.py);
- a partition led by another node (cluster mode): WriteTxnMarkers to that node (`remote`, server/transactions.py),
  whose handler (server/apis/write_txn_markers.py) writes it with the same `write_marker`;
- a partition whose topic no longer exists is skipped (Kafka: "these partitions are likely deleted already and
  hence can be skipped"), and so is one whose leader answers that the producer or coordinator epoch moved on
  (TransactionMarkerRequestCompletionHandler);
- a partition that cannot be written now (its disk failed, its leader is moving, the group coordinator's shard is
  loading) is retried every `MARKER_RETRY_MS`, as Kafka re-enqueues retriable marker errors.
When every marker is written the core's `markers_written` appends CompleteCommit/CompleteAbort. The job is
dropped when the shard stops being active (unloaded, failed): the next load finds PrepareCommit/PrepareAbort and
writes the markers again (a marker written twice is harmless: a second one finds no open transaction).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

from herd.cluster.topics import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC_CONFIGS,
    Cluster,
)
from herd.config import BrokerConfig
from herd.coordinator import CoordinatorError, Result
from herd.coordinator.result import Marker, Reply
from herd.coordinator.transactions import TransactionCoordinatorShard, TxnConfig, WriteMarkers
from herd.log.api import LogError, NotLeaderError, PartitionLog, as_remote
from herd.runtime.host import CoordinatorKind, ShardHost
from herd.runtime.shard import Request, ShardRuntime, ShardState
from herd.runtime.timer import AsyncioTimer, WallClock

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

    def complete_transaction(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> Any: ...


# Writes a marker into a partition another node leads (WriteTxnMarkers to it, cluster mode); the error code answered.
RemoteMarkers = Callable[[tuple[str, int], "Marker"], Awaitable[int]]


# The runtime of a `__transaction_state` partition: its core is a `TransactionCoordinatorShard`, and the released
# `WriteMarkers` of its transactions start their markers (`TransactionRuntime._released`).
TxnShardRuntime = ShardRuntime[TransactionCoordinatorShard]
# A request handler of the core, named by the class's own function (`TransactionCoordinatorShard.end_txn`).
TxnHandler = Callable[[TransactionCoordinatorShard, Request, object], Result]


def _contents(shards: Sequence[TransactionCoordinatorShard]) -> str:
    return f"{sum(shard.size() for shard in shards)} transactional ids"


class TransactionRuntime:
    """The transaction coordinator: `__transaction_state` on a `ShardHost` (runtime/host.py), and its markers."""

    topic = TRANSACTION_STATE_TOPIC

    def __init__(
        self,
        cluster: Cluster,
        config: BrokerConfig,
        *,
        new_producer_id: Callable[[], int],
        groups: TransactionCompleter | None = None,
        on_marker: Callable[[tuple[str, int]], None] | None = None,
        remote: RemoteMarkers | None = None,
        clock: WallClock | None = None,
    ) -> None:
        self._cluster = cluster
        self._broker_config = config
        self.clock = clock or WallClock()
        self.txn_config = txn_config(config)
        self.new_producer_id = new_producer_id
        self._groups = groups
        self._on_marker = on_marker
        self._remote = remote
        self._markers: dict[tuple[int, str], asyncio.Task[None]] = {}
        kind = CoordinatorKind(
            topic=TRANSACTION_STATE_TOPIC,
            keys="transactional ids",
            coordinated="transactions",
            topic_settings=self._topic_settings,
            new_shard=self._new_shard,
            contents=_contents,
            on_release=self._released,
        )
        self._host: ShardHost[TransactionCoordinatorShard] = ShardHost(cluster, config, kind, self.clock)

    # -- hosting -----------------------------------------------------------------------------------------------

    def start(self, partitions: Iterable[int] | None = None) -> None:
        """Load `partitions` (default: all) if `__transaction_state` exists; otherwise it is made on first use
        (`ensure_created`), as Kafka creates it on the first FindCoordinator for a transactional id."""
        if self._cluster.get(TRANSACTION_STATE_TOPIC) is not None:
            self._host.start(partitions)

    def ensure_created(self) -> bool:
        """True if `__transaction_state` exists; if it does not, start making it and return False. On a single
        node it is made and every partition starts loading at once; in cluster mode it is made in the background
        and each node loads the partitions it is given to lead (server/node.py). Until then transactional ids get
        COORDINATOR_NOT_AVAILABLE from FindCoordinator (KafkaApis.getCoordinator: "autoTopicCreationManager
        .createTopics") and NOT_COORDINATOR from the rest (ShardHost.ensure_created)."""
        return self._host.ensure_created()

    def _topic_settings(self) -> tuple[int, dict[str, str | None]]:
        """`__transaction_state`'s partitions and configs (Kafka's transaction.state.log.* settings)."""
        configs: dict[str, str | None] = {
            **TRANSACTION_STATE_TOPIC_CONFIGS,
            "segment.bytes": str(self._broker_config.get("transaction.state.log.segment.bytes")),
        }
        return self._broker_config.get("transaction.state.log.num.partitions"), configs

    def _new_shard(self, partition_log: PartitionLog, timer: AsyncioTimer) -> TransactionCoordinatorShard:
        """The core of one partition: its coordinator epoch is the leader epoch of the partition's log."""
        return TransactionCoordinatorShard(
            clock=self.clock,
            timer=timer,
            new_producer_id=self.new_producer_id,
            config=self.txn_config,
            coordinator_epoch=partition_log.leader_epoch,
        )

    def _released(self, shard: TxnShardRuntime, replies: tuple[Reply, ...]) -> None:
        """Replies the shard released (delivered already): a `WriteMarkers` among them starts its markers."""
        for reply in replies:
            if isinstance(reply.handle, WriteMarkers):
                self._start_markers(shard, reply.handle)

    # -- the host's ----------------------------------------------------------------------------------------------

    @property
    def shards(self) -> dict[int, TxnShardRuntime]:
        return self._host.shards

    @property
    def num_partitions(self) -> int:
        """`__transaction_state`'s partition count, which placement uses; 0 while it does not exist."""
        return self._host.num_partitions

    def load_partition(self, partition: int, *, announce: bool = False) -> asyncio.Task[None]:
        """Host `partition`: its transactional ids get COORDINATOR_LOAD_IN_PROGRESS until its log is replayed."""
        return self._host.load_partition(partition, announce=announce)

    async def unload_partition(self, partition: int) -> None:
        """Stop hosting `partition` (its transactional ids get NOT_COORDINATOR from now on)."""
        await self._host.unload_partition(partition)

    async def move_away_and_back(self, partition: int, unavailable_ms: int = 0) -> None:
        """A coordinator move on one node (ShardHost's): the markers under way stop with their shard, and the load
        that follows writes them again. Raises ValueError if the partition is not hosted here."""
        await self._host.move_away_and_back(partition, unavailable_ms)

    async def wait_loaded(self) -> None:
        """Return once every partition that was loading has finished loading."""
        await self._host.wait_loaded()

    async def close(self) -> None:
        """Stop making the topic and writing markers (a reload writes them again), then unload every partition."""
        for task in list(self._markers.values()):
            task.cancel()
        await self._host.close()

    def partition_for(self, transactional_id: str) -> int:
        return self._host.partition_for(transactional_id)

    def hosts(self, transactional_id: str) -> bool:
        """True if this node is the coordinator of `transactional_id` (loaded or loading)."""
        return self._host.hosts(transactional_id)

    def shard_for(self, transactional_id: str) -> TxnShardRuntime:
        """Raises CoordinatorError(NOT_COORDINATOR) if `__transaction_state` does not exist or this node does not
        host the id's partition."""
        return self._host.shard_for(transactional_id)

    def call(self, transactional_id: str, handler: TxnHandler[Request], request: Request) -> object:
        """`handler` (a request handler of `TransactionCoordinatorShard`) on the id's shard; its response, or a
        future of it. Raises CoordinatorError with NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
        return self._host.call(transactional_id, handler, request)

    def call_all(self, handler: TxnHandler[Request], request: Request) -> list[object]:
        """`handler` on every active shard (ListTransactions). Raises
        CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS) while any hosted partition is loading."""
        return self._host.call_all(handler, request)

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
                except MarkerError as error:
                    if error.code in PERMANENT_MARKER_ERRORS:
                        log.info(
                            "the marker of transactional id %s to %s-%d is not written: %s",
                            job.transactional_id,
                            *tp,
                            error,
                        )
                        pending.discard(tp)
                    elif tp not in reported:
                        reported.add(tp)
                        log.warning(
                            "the %s marker of transactional id %s cannot be written to %s-%d yet (%s): retrying",
                            "COMMIT" if job.commit else "ABORT",
                            job.transactional_id,
                            *tp,
                            error,
                        )
                except Exception:  # a bug: logged once, retried like the rest
                    if tp not in reported:
                        reported.add(tp)
                        log.exception("the marker of transactional id %s to %s-%d failed", job.transactional_id, *tp)
            if pending:
                await asyncio.sleep(MARKER_RETRY_MS / 1000)
        if shard.state is ShardState.ACTIVE:
            shard.apply(shard.shard.markers_written(job))

    async def _write_marker(self, tp: tuple[str, int], job: WriteMarkers) -> None:
        """Write one marker, here or (led by another node) through WriteTxnMarkers; raises MarkerError."""
        marker = Marker(job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch)
        try:
            await write_marker(self._cluster, self._groups, tp, marker, self.clock.now_ms(), self._on_marker)
        except MarkerError as error:
            if error.code != NOT_LEADER_OR_FOLLOWER or self._remote is None:
                raise
            code = await self._remote(tp, marker)
            if code != 0:
                raise MarkerError(code, f"the leader of {tp[0]}-{tp[1]} answered error {code}") from None


UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, COORDINATOR_NOT_AVAILABLE = 3, 6, 15
KAFKA_STORAGE_ERROR = 56
# TransactionMarkerRequestCompletionHandler: these end the marker's retries (the partition is gone, or the
# producer or coordinator epoch moved on); the others are retried.
PERMANENT_MARKER_ERRORS = frozenset(
    {
        UNKNOWN_TOPIC_OR_PARTITION,  # herd knows its topics: a missing one is deleted (Kafka: "likely deleted")
        47,  # INVALID_PRODUCER_EPOCH
        52,  # TRANSACTION_COORDINATOR_FENCED
        35,  # UNSUPPORTED_VERSION
    }
)


class MarkerError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


async def write_marker(
    cluster: Cluster,
    groups: TransactionCompleter | None,
    tp: tuple[str, int],
    marker: Marker,
    now_ms: int,
    on_marker: Callable[[tuple[str, int]], None] | None = None,
) -> None:
    """Write `marker` into partition `tp` led by this node: a data partition with `append_control` on its log
    (committed in PostgreSQL; on local files flushed by log.flush.*), a `__consumer_offsets` partition through the group
    coordinator's `complete_transaction`. Used for the markers of this node's transactions and for WriteTxnMarkers
    from another node's coordinator. Raises MarkerError: UNKNOWN_TOPIC_OR_PARTITION (no such partition),
    NOT_LEADER_OR_FOLLOWER (led by another node), KAFKA_STORAGE_ERROR (the log failed), or the group coordinator's
    refusal (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
    topic_name, index = tp
    topic = cluster.get(topic_name)
    if topic is None or not 0 <= index < len(topic.partitions):
        raise MarkerError(UNKNOWN_TOPIC_OR_PARTITION, "the partition does not exist")
    partition = topic.partitions[index]
    if partition is None:
        raise MarkerError(NOT_LEADER_OR_FOLLOWER, "led by another node")
    if topic_name == OFFSETS_TOPIC:
        if groups is None:
            raise MarkerError(COORDINATOR_NOT_AVAILABLE, "no group coordinator runs here")
        try:
            outcome = groups.complete_transaction(
                index, marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch
            )
            if asyncio.isfuture(outcome) or asyncio.iscoroutine(outcome):
                await outcome
        except CoordinatorError as error:
            raise MarkerError(error.code, str(error)) from None
        return
    try:
        appended = partition.append_control(
            marker.producer_id,
            marker.producer_epoch,
            marker.commit,
            marker.coordinator_epoch,
            now_ms,
        )
        if appended.durable_end is not None:  # the log commits it itself (a database): acknowledged once committed
            await as_remote(partition).wait_durable(appended.durable_end)
        else:
            partition.maybe_flush(now_ms)  # as durable as the data it commits: log.flush.* (see the module doc)
    except NotLeaderError as error:
        raise MarkerError(NOT_LEADER_OR_FOLLOWER, str(error)) from None
    except LogError as error:  # a stale marker (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) says so
        code = error.error_code if error.error_code != -1 else KAFKA_STORAGE_ERROR
        raise MarkerError(code, str(error)) from None
    if on_marker is not None:
        on_marker(tp)
