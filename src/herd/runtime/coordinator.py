"""The group coordinator of this node: one `ShardRuntime` per `__consumer_offsets` partition it hosts.

`start()` creates `__consumer_offsets` if it does not exist (internal, cleanup.policy=compact, segment.bytes
from offsets.topic.segment.bytes, offsets.topic.num.partitions partitions; an existing topic keeps its
partition count, which is what group placement then uses) and starts loading every hosted partition in
the background; once all are loaded it logs one line with what they hold (each partition's own line is at
DEBUG). Each shard compacts its partition in the background, keeping tombstones for the topic's
delete.retention.ms (by default log.cleaner.delete.retention.ms). A single node hosts every partition;
`load_partition` / `unload_partition` move one partition on or off this node (a coordinator move: unloading
answers parked requests NOT_COORDINATOR, loading replays the partition from its log); `move_away_and_back` does
both, for a coordinator move asked for on a single node (fault injection).

A shard whose disk fails (`ShardState.FAILED`) is reloaded the same way, by `_reload`: after a backoff
(herd.log.recovery.backoff.ms, doubling up to herd.log.recovery.backoff.max.ms while it keeps failing) the
failed shard is dropped, its log reopened from disk if the log itself failed (`SegmentLog.recover`), and the
partition loaded again. The failure is logged once (ERROR) when a streak starts, and once (WARNING) when a
write succeeds again; a load that fails, or a reloaded shard whose next write fails, waits longer.

`stats` (herd.runtime.stats) records what the metrics export (herd.server.metrics): how long each partition took
to load, each write round of the shards' writer, and rebalances by cause and phase through every shard's rebalance
history observer.

Requests are routed by `coordinator_partition(group_id, partitions)`: a group whose partition this node
does not host gets NOT_COORDINATOR, one whose partition is still loading COORDINATOR_LOAD_IN_PROGRESS
(both raised as `CoordinatorError` by `call`, for the API module to put in its response).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from herd.cluster.topics import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, Cluster, Topic
from herd.config import BrokerConfig
from herd.coordinator import (
    CoordinatorConfig,
    CoordinatorError,
    ErrorCode,
    GroupCoordinatorShard,
    coordinator_partition,
)
from herd.coordinator.requests import CompleteTransaction
from herd.log.api import LogError, NotLeaderError, PartitionLog
from herd.runtime.commits import RemoteWriter, Writer
from herd.runtime.flusher import Flusher
from herd.runtime.recovery import Backoff
from herd.runtime.shard import Handler, Request, ShardRuntime, ShardState, group_shard
from herd.runtime.stats import CoordinatorStats
from herd.runtime.timer import WallClock

log = logging.getLogger(__name__)


def coordinator_config(config: BrokerConfig) -> CoordinatorConfig:
    """The core's configuration from the broker's Kafka-named properties."""
    return CoordinatorConfig(
        group_initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
        group_min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
        group_max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
        group_max_size=config.get("group.max.size"),
        offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
        offsets_retention_minutes=config.get("offsets.retention.minutes"),
        offsets_retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
        rebalance_history_size=config.get("herd.group.rebalance.history.size"),
        history_batch_bytes=config.get("message.max.bytes") * 3 // 4,
    )


@lru_cache(maxsize=65536)
def _partition_of(group_id: str, partitions: int) -> int:
    return coordinator_partition(group_id, partitions)


class CoordinatorRuntime:
    topic = OFFSETS_TOPIC  # the coordinator's partitions (runtime/transactions.py hosts __transaction_state)
    _keys = "groups"  # what its partitions coordinate, for messages

    def __init__(self, cluster: Cluster, config: BrokerConfig, clock: WallClock | None = None) -> None:
        self._cluster = cluster
        self._broker_config = config
        self.config = coordinator_config(config)
        self.clock = clock or WallClock()
        self.shards: dict[int, ShardRuntime[Any]] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._flusher: Flusher | None = None  # shared by the shards: one fsync round for all (flusher.py)
        self._remote_writer: RemoteWriter | None = None  # for partitions stored in PostgreSQL (cluster mode)
        self.num_partitions = 0
        self._backoff = Backoff(
            config.get("herd.log.recovery.backoff.ms"), config.get("herd.log.recovery.backoff.max.ms")
        )
        self._reloads: dict[int, asyncio.Task[None]] = {}
        self._closing = False
        self.stats = CoordinatorStats()  # read by herd.server.metrics

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self, partitions: Iterable[int] | None = None) -> None:
        """Create the offsets topic if needed and start loading `partitions` (default: all of them).
        Must be called on the running loop."""
        topic = self._ensure_topic()
        self.num_partitions = len(topic.partitions)
        loop = asyncio.get_running_loop()
        started = loop.time()
        hosted = list(range(self.num_partitions) if partitions is None else partitions)
        loads = [self.load_partition(partition) for partition in hosted]
        remaining = len(loads)

        def loaded(_: asyncio.Task[None]) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                self._log_loaded(hosted, loop.time() - started)

        for task in loads:
            task.add_done_callback(loaded)

    def _log_loaded(self, partitions: list[int], seconds: float) -> None:
        """The start-up summary: what the loaded partitions hold (a partition that failed logged why)."""
        active = self._active(partitions)
        sizes = [s.shard.size() for s in active]
        failed = len(partitions) - len(active)
        log.info(
            "__consumer_offsets: %d partitions loaded in %.2f s (%d groups, %d committed offsets, %d records)%s",
            len(active),
            seconds,
            sum(g for g, _ in sizes),
            sum(o for _, o in sizes),
            sum(s.records for s in active),
            f"; {failed} not loaded" if failed else "",
        )

    def _active(self, partitions: list[int]) -> list[ShardRuntime[Any]]:
        shards = [self.shards[p] for p in partitions if p in self.shards]
        return [s for s in shards if s.state is ShardState.ACTIVE]

    def _ensure_topic(self) -> Topic:
        topic = self._cluster.get(OFFSETS_TOPIC)
        if topic is None:
            configs = {
                **OFFSETS_TOPIC_CONFIGS,
                "segment.bytes": str(self._broker_config.get("offsets.topic.segment.bytes")),
            }
            topic = self._cluster.create_topic(
                OFFSETS_TOPIC, self._broker_config.get("offsets.topic.num.partitions"), configs
            )
        return topic

    def load_partition(self, partition: int, *, announce: bool = False) -> asyncio.Task[None]:
        """Host `partition`: its groups get COORDINATOR_LOAD_IN_PROGRESS until its log is replayed. `announce`:
        log one line when it is loaded (a coordinator move; the start-up loads are summed up in one line)."""
        if partition in self.shards:
            raise ValueError(f"{self.topic}-{partition} is already hosted")
        topic = self._ensure_topic()
        loop = asyncio.get_running_loop()
        max_batch = self._cluster.log_config(topic.configs).max_message_bytes
        partition_log = topic.partitions[partition]
        if partition_log is None:
            raise ValueError(f"{self.topic}-{partition} is led by another node")
        writer: Writer
        if partition_log.commits_itself:  # appended on the loop, awaited until committed (a database)
            writer = self._remote_writer = self._remote_writer or RemoteWriter(loop, self.stats.flush_round)
        else:
            writer = self._flusher = self._flusher or Flusher(loop, rounds=self.stats.flush_round)
        partition_log.report_errors = False  # `_shard_failed` reports them, with what the groups see
        shard = self._new_shard_runtime(
            partition,
            partition_log,
            loop=loop,
            max_batch_bytes=max_batch,
            delete_retention_ms=self._delete_retention_ms(topic),
            flusher=writer,
            on_failed=self._shard_failed,
            on_written=self._shard_written if self._backoff.failing(partition) else None,
        )
        self.shards[partition] = shard
        self._observe(shard)
        task = loop.create_task(shard.load())
        self._loads[partition] = task
        task.add_done_callback(lambda _: self._loads.pop(partition, None))
        started_ns = time.perf_counter_ns()
        task.add_done_callback(lambda _: self._loaded(shard, started_ns))
        if announce:
            started = loop.time()
            task.add_done_callback(lambda _: self._log_moved_in(shard, loop.time() - started))
        return task

    def _observe(self, shard: ShardRuntime[Any]) -> None:
        """Rebalances of the shard's groups are counted in `stats` (the observer of its core's RebalanceHistory;
        the transaction coordinator's core, which a subclass hosts, has no history)."""
        history = getattr(shard.shard, "history", None)
        if history is not None:
            history.observer = self.stats.on_rebalance

    def _loaded(self, shard: ShardRuntime[Any], started_ns: int) -> None:
        if shard.state is ShardState.ACTIVE:
            self.stats.partition_load.observe_ns(time.perf_counter_ns() - started_ns)

    def _new_shard_runtime(self, partition: int, partition_log: PartitionLog, **settings: Any) -> ShardRuntime[Any]:
        """The runtime of one hosted partition (a subclass hosts another coordinator: runtime/transactions.py)."""
        return ShardRuntime(
            partition, partition_log, group_shard(self.config, self.clock), clock=self.clock, **settings
        )

    def _log_moved_in(self, shard: ShardRuntime[Any], seconds: float) -> None:
        """Kafka's "Finished loading offsets and group metadata from __consumer_offsets-N in X ms"."""
        if shard.state is ShardState.ACTIVE:
            groups, offsets = shard.shard.size()
            log.info(
                "__consumer_offsets-%d loaded in %.2f s (%d groups, %d committed offsets, %d records): its "
                "groups are coordinated here",
                shard.partition,
                seconds,
                groups,
                offsets,
                shard.records,
            )

    def _delete_retention_ms(self, topic: Topic) -> int:
        """How long compaction keeps tombstones: the topic's delete.retention.ms, else the broker default."""
        configured = topic.configs.get("delete.retention.ms")
        if configured is not None:
            return int(configured)
        return int(self._broker_config.get("log.cleaner.delete.retention.ms"))

    # -- disk failures -----------------------------------------------------------------------------------------

    def _shard_failed(self, shard: ShardRuntime[Any], error: BaseException, answered: int) -> None:
        """A shard failed on its disk: log it (once per streak of failures) and reload it after the backoff. A
        shard whose write was fenced (NotLeaderError: another node leads the partition now, cluster mode) has
        not failed but lost its partition: the cluster's view unloads it, nothing is reloaded."""
        partition = shard.partition
        if isinstance(error, NotLeaderError):
            log.info(
                "%s-%d is no longer led here (%s): %d pending requests answered NOT_COORDINATOR",
                self.topic,
                partition,
                error,
                answered,
            )
            return
        now = self.clock.now_ms()
        if self._backoff.failed(partition, now):
            log.error(
                "%s-%d failed: %s; %d pending requests answered NOT_COORDINATOR, its %s "
                "get NOT_COORDINATOR (FindCoordinator: COORDINATOR_NOT_AVAILABLE) until it is reloaded from "
                "disk, retried every %d ms or more",
                self.topic,
                partition,
                error,
                answered,
                self._keys,
                self._backoff.initial_ms,
            )
        if self._closing or partition in self._reloads:
            return
        task = asyncio.get_running_loop().create_task(self._reload(shard))
        self._reloads[partition] = task
        task.add_done_callback(lambda _: self._reloads.pop(partition, None))

    def _shard_written(self, shard: ShardRuntime[Any]) -> None:
        if self._backoff.succeeded(shard.partition):
            log.warning("%s-%d writes succeed again: its %s are served", self.topic, shard.partition, self._keys)

    async def _reload(self, shard: ShardRuntime[Any]) -> None:
        """Drop the failed `shard`, recover its log from disk if the log failed, and load the partition again;
        retried after the backoff for as long as the log cannot be recovered."""
        partition = shard.partition
        while True:
            await asyncio.sleep(self._backoff.delay_ms(partition, self.clock.now_ms()) / 1000)
            if self._closing or self.shards.get(partition) is not shard:
                return  # closed, or unloaded meanwhile
            try:
                # a no-op unless the log itself failed: its files reopened, or its database's state read again
                # (NotLeaderError if taken over)
                await shard.log.resume()
            except NotLeaderError:
                return  # another node leads it now; the cluster's view unloads it here
            except LogError as error:
                if self._backoff.failed(partition, self.clock.now_ms()):
                    log.error("%s-%d cannot be recovered from disk yet: %s", self.topic, partition, error)
                continue
            del self.shards[partition]
            self.load_partition(partition)
            return

    async def unload_partition(self, partition: int) -> None:
        """Stop hosting `partition` (its groups get NOT_COORDINATOR from now on)."""
        shard = self.shards.get(partition)
        if shard is None:
            return
        await shard.unload()
        if self.shards.get(partition) is shard:
            del self.shards[partition]

    async def move_away_and_back(self, partition: int, unavailable_ms: int = 0) -> None:
        """What a client sees when a coordinator moves, on one node (fault injection, embedded mode): unload the
        partition (its pending writes finish and are acknowledged, parked JoinGroup and SyncGroup requests are
        answered NOT_COORDINATOR, join phases under way are lost, new requests get NOT_COORDINATOR), wait
        `unavailable_ms`, then load it again from its log (COORDINATOR_LOAD_IN_PROGRESS until replayed; each
        group comes back at its last stored generation, its members' sessions re-armed). Returns once the load
        has started. Raises ValueError if the partition is not hosted here."""
        if partition not in self.shards:
            raise ValueError(f"{self.topic}-{partition} is not hosted here")
        log.info(
            "%s-%d moves on demand: unloading it, loading it again after %d ms", self.topic, partition, unavailable_ms
        )
        await self.unload_partition(partition)
        if unavailable_ms > 0:
            await asyncio.sleep(unavailable_ms / 1000)
        if not self._closing and partition not in self.shards:
            self.load_partition(partition, announce=True)

    async def wait_loaded(self) -> None:
        """Return once every partition that was loading has finished loading."""
        while self._loads:
            await asyncio.gather(*self._loads.values(), return_exceptions=True)

    async def close(self) -> None:
        """Unload every partition: pending writes are finished and acknowledged, parked requests answered."""
        self._closing = True
        for task in list(self._reloads.values()):
            task.cancel()
        await asyncio.gather(*(self.unload_partition(p) for p in list(self.shards)))
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            await asyncio.get_running_loop().run_in_executor(None, flusher.close)

    # -- routing -----------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return _partition_of(group_id, self.num_partitions)

    def hosts(self, group_id: str) -> bool:
        """True if this node is the coordinator of `group_id` (loaded or loading)."""
        shard = self.shards.get(self.partition_for(group_id))
        return shard is not None and shard.state in (ShardState.LOADING, ShardState.ACTIVE)

    def shard_for(self, group_id: str) -> ShardRuntime[Any]:
        """Raises CoordinatorError(NOT_COORDINATOR) if this node does not host the group's partition."""
        shard = self.shards.get(self.partition_for(group_id))
        if shard is None:
            raise CoordinatorError(ErrorCode.not_coordinator, f"group {group_id!r} is not coordinated here")
        return shard

    def call(self, group_id: str, handler: Handler[Request], request: Request) -> object:
        """`handler` (a request handler of `GroupCoordinatorShard`) on the group's shard; its response, or a
        future of it. Raises CoordinatorError with NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
        return self.shard_for(group_id).call(handler, request)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """`ShardRuntime.heartbeat` of the group's shard: the answer's error code, or None to go through `call`."""
        return self.shard_for(group_id).heartbeat(group_id, generation_id, member_id, instance_id)

    def on_topics_deleted(self, topics: Iterable[str]) -> None:
        """Kafka's GroupCoordinatorService.onPartitionsDeleted: every active shard writes tombstones for the
        offsets its groups committed on `topics`, in the background (DeleteTopics does not wait for them, as in
        Kafka, where the metadata publisher calls this after the deletion). A partition still loading keeps
        those offsets, as Kafka's write-to-all-shards fails for it; they expire with offset retention."""
        deleted = frozenset(topics)
        for shard in self.shards.values():
            if not shard.on_topics_deleted(deleted):
                log.info(
                    "__consumer_offsets-%d is %s: offsets of deleted topics %s stay until they expire",
                    shard.partition,
                    shard.state.value,
                    sorted(deleted),
                )

    async def complete_transaction(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> None:
        """Write the marker of `producer_id`'s transaction (COMMIT if `commit`) into `__consumer_offsets-<partition>`
        and make its pending offsets there committed or gone (Kafka's GroupCoordinatorService.completeTransaction,
        what WriteTxnMarkers does for a coordinator partition). Returns once the marker is durable; a partition
        still loading is waited for. Raises CoordinatorError: NOT_COORDINATOR if the partition is not hosted
        here or not active, or the mapped error of a failed write (the caller retries, as Kafka's marker
        channel does)."""
        load = self._loads.get(partition)
        if load is not None:
            await asyncio.shield(load)
        shard = self.shards.get(partition)
        if shard is None:
            raise CoordinatorError(ErrorCode.not_coordinator, f"__consumer_offsets-{partition} is not hosted here")
        request = CompleteTransaction(
            producer_id=producer_id, producer_epoch=producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch
        )
        outcome = shard.call(GroupCoordinatorShard.complete_transaction, request)
        response = await outcome if isinstance(outcome, asyncio.Future) else outcome
        if response.error_code:
            raise CoordinatorError(
                ErrorCode(response.error_code),
                f"the marker of producer {producer_id} was not written",
            )

    def call_all(self, handler: Handler[Request], request: Request) -> list[object]:
        """`handler` on every active shard (ListGroups). Raises CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS)
        while any hosted partition is loading."""
        shards = list(self.shards.values())
        if any(s.state is ShardState.LOADING for s in shards):
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress, "a coordinator partition is loading")
        return [s.call(handler, request) for s in shards if s.state is ShardState.ACTIVE]
