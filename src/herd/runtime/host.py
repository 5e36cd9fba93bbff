"""The partitions of one coordinator topic that this node hosts, one `ShardRuntime` each: the shell that the group
coordinator (runtime/coordinator.py, `__consumer_offsets`) and the transaction coordinator (runtime/transactions.py,
`__transaction_state`) share.

A `ShardHost` is what is the same for every coordinator, written once; a `CoordinatorKind` is what differs (the
topic, how it is made, the core each partition runs, what a released reply starts, what the log lines count).
Each coordinator's runtime owns one host, built with its kind, and adds the operations only it has; neither
subclasses it, and the host calls nothing of them but what their kind gives it.

`start()` makes the topic if it does not exist, with the kind's `topic_settings` (the group coordinator's host makes
`__consumer_offsets`; the transaction coordinator starts its host only once `__transaction_state` exists), and
starts loading every hosted partition in the background; once all are loaded it logs one line with what they hold
(each partition's own line is at DEBUG). Each shard compacts its partition in the background, keeping tombstones for
the topic's delete.retention.ms (by default log.cleaner.delete.retention.ms), unless its kind says its topic is not
compacted (`__share_group_state`, which its runtime prunes). `load_partition` / `unload_partition`
move one partition on or off this node (a coordinator move: unloading answers parked requests NOT_COORDINATOR,
loading replays the partition from its log); `move_away_and_back` does both, for a coordinator move asked for on a
single node (fault injection). The shards of one host share one writer: the `Flusher` (one fsync round for all,
flusher.py) for partitions on local files, a `RemoteWriter` for those stored in PostgreSQL (cluster mode).

A shard whose disk fails (`ShardState.FAILED`) is reloaded the same way, by `_reload`: after a backoff
(herd.log.recovery.backoff.ms, doubling up to herd.log.recovery.backoff.max.ms while it keeps failing) the
failed shard is dropped, its log resumed if the log itself failed (`PartitionLog.resume`: its files reopened,
or its database's state read again), and the partition loaded again. The failure is logged once (ERROR) when a
streak starts, and once (WARNING) when a write succeeds again; a load that fails, or a reloaded shard whose next
write fails, waits longer.

`stats` (herd.runtime.stats) records what the metrics export (herd.server.metrics): how long each partition took
to load and each write round of the shards' writer.

Requests are routed by key (a group id, a transactional id) with `coordinator_partition(key, partitions)`, Kafka's
placement for both: a key whose partition this node does not host gets NOT_COORDINATOR (so does every key while
the topic does not exist), one whose partition is still loading COORDINATOR_LOAD_IN_PROGRESS (both raised as
`CoordinatorError` by `call`, for the API module to put in its response).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar

from herd.cluster.topics import TOPIC_ALREADY_EXISTS, Cluster, Topic, TopicError
from herd.config import BrokerConfig
from herd.coordinator import CoordinatorError, ErrorCode, Result, coordinator_partition
from herd.coordinator.result import Reply
from herd.log.api import LogError, NotLeaderError, PartitionLog
from herd.runtime.commits import RemoteWriter, Writer
from herd.runtime.flusher import Flusher
from herd.runtime.machine import CoordinatorShard
from herd.runtime.recovery import Backoff
from herd.runtime.shard import ShardRuntime, ShardState, deliver
from herd.runtime.stats import CoordinatorStats
from herd.runtime.timer import AsyncioTimer, WallClock

log = logging.getLogger(__name__)

S = TypeVar("S", bound=CoordinatorShard)
Request = TypeVar("Request")


@dataclass(frozen=True, slots=True)
class CoordinatorKind(Generic[S]):
    """What one coordinator tells the `ShardHost` it runs on."""

    topic: str  # the topic whose partitions it coordinates
    keys: str  # what a partition coordinates, for messages: "groups", "transactional ids"
    coordinated: str  # what is coordinated here once a partition is loaded, for messages: "groups", "transactions"
    # the partition count and the configs the topic is made with, when it does not exist yet (read when needed)
    topic_settings: Callable[[], tuple[int, dict[str, str | None]]]
    new_shard: Callable[[PartitionLog, AsyncioTimer], S]  # the core of one partition, given its log and its timer
    contents: Callable[[Sequence[S]], str]  # what these cores hold, for the loading lines: "3 groups, 7 committed ..."
    # Called with the shard after the replies it released were delivered (the transaction coordinator starts
    # writing the markers of its `WriteMarkers`); None: the replies are only delivered.
    on_release: Callable[[ShardRuntime[S], tuple[Reply, ...]], None] | None = None
    # Whether the shards compact their partitions (`__share_group_state` is not compacted: Kafka's share
    # coordinator prunes it instead, since an update's key is not its snapshot's and compaction would lose updates).
    compacted: bool = True


@lru_cache(maxsize=65536)
def _partition_of(key: str, partitions: int) -> int:
    return coordinator_partition(key, partitions)


class ShardHost(Generic[S]):
    """The hosted partitions of `kind.topic` (see the module docstring)."""

    def __init__(self, cluster: Cluster, config: BrokerConfig, kind: CoordinatorKind[S], clock: WallClock) -> None:
        self.kind = kind
        self.topic = kind.topic
        self.clock = clock
        self._cluster = cluster
        self._broker_config = config
        self.shards: dict[int, ShardRuntime[S]] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._flusher: Flusher | None = None  # shared by the shards: one fsync round for all (flusher.py)
        self._remote_writer: RemoteWriter | None = None  # for partitions stored in PostgreSQL (cluster mode)
        self.num_partitions = 0  # the topic's partition count, which placement uses; 0 until the topic is known
        self._backoff = Backoff(
            config.get("herd.log.recovery.backoff.ms"), config.get("herd.log.recovery.backoff.max.ms")
        )
        self._reloads: dict[int, asyncio.Task[None]] = {}
        self._creating: asyncio.Task[None] | None = None  # the topic being made in the background (cluster mode)
        self._closing = False
        self.stats = CoordinatorStats()  # read by herd.server.metrics

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self, partitions: Iterable[int] | None = None) -> None:
        """Make the topic if needed (`ensure_topic`) and start loading `partitions` (default: all of them). Must
        be called on the running loop."""
        topic = self.ensure_topic()
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

    def ensure_created(self) -> bool:
        """For a topic made on first use (`__transaction_state`, `__share_group_state`): True if it exists (its
        partition count known, which placement needs); if it does not, start making it and return False. On a single
        node it is made and every partition starts loading at once; in cluster mode it is made in the background, by
        whichever node asks first, and each node loads the partitions it is given to lead (server/cluster_node.py)."""
        if self.num_partitions:
            return True
        topic = self._cluster.get(self.topic)
        if topic is not None:  # made by another node
            self.num_partitions = len(topic.partitions)
            return True
        if not self._cluster.places_partitions:  # one node: it leads every partition of the topic it makes
            self.start()
        elif self._creating is None:
            self._creating = asyncio.get_running_loop().create_task(self._create_shared())
            self._creating.add_done_callback(lambda _: setattr(self, "_creating", None))
        return False

    async def _create_shared(self) -> None:
        try:
            await self._cluster.create_topic(self.topic, *self.kind.topic_settings())  # type: ignore[misc]
        except TopicError as e:
            if e.error_code != TOPIC_ALREADY_EXISTS:  # another node made it meanwhile: fine
                log.warning("cannot create %s: %s", self.topic, e)
        except Exception as e:  # the database: the next request tries again
            log.warning("cannot create %s: %s", self.topic, e)

    def ensure_topic(self) -> Topic:
        """The topic, made first (with the kind's `topic_settings`) if it does not exist."""
        topic = self._cluster.get(self.topic)
        if topic is None:
            partitions, configs = self.kind.topic_settings()
            topic = self._cluster.create_topic(self.topic, partitions, configs)
        return topic

    def _log_loaded(self, partitions: list[int], seconds: float) -> None:
        """The start-up summary: what the loaded partitions hold (a partition that failed logged why)."""
        shards = [self.shards[p] for p in partitions if p in self.shards]
        active = [s for s in shards if s.state is ShardState.ACTIVE]
        failed = len(partitions) - len(active)
        log.info(
            "%s: %d partitions loaded in %.2f s (%s, %d records)%s",
            self.topic,
            len(active),
            seconds,
            self.kind.contents([s.shard for s in active]),
            sum(s.records for s in active),
            f"; {failed} not loaded" if failed else "",
        )

    def load_partition(self, partition: int, *, announce: bool = False) -> asyncio.Task[None]:
        """Host `partition`: its keys get COORDINATOR_LOAD_IN_PROGRESS until its log is replayed. `announce`: log
        one line when it is loaded (a coordinator move; the start-up loads are summed up in one line)."""
        if partition in self.shards:
            raise ValueError(f"{self.topic}-{partition} is already hosted")
        topic = self.ensure_topic()
        if not self.num_partitions:  # a cluster node given a partition of a topic made after it started
            self.num_partitions = len(topic.partitions)
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
        partition_log.report_errors = False  # `_shard_failed` reports them, with what the keys see
        kind = self.kind
        on_release = kind.on_release

        def release(replies: tuple[Reply, ...]) -> None:
            deliver(replies)
            if on_release is not None:
                on_release(shard, replies)

        shard = ShardRuntime(
            partition,
            partition_log,
            lambda timer: kind.new_shard(partition_log, timer),
            clock=self.clock,
            loop=loop,
            max_batch_bytes=max_batch,
            flusher=writer,
            topic=self.topic,
            release=deliver if on_release is None else release,
            delete_retention_ms=self._delete_retention_ms(topic),
            compacted=kind.compacted,
            on_failed=self._shard_failed,
            on_written=self._shard_written if self._backoff.failing(partition) else None,
        )
        self.shards[partition] = shard
        task = loop.create_task(shard.load())
        self._loads[partition] = task
        task.add_done_callback(lambda _: self._loads.pop(partition, None))
        started_ns = time.perf_counter_ns()
        task.add_done_callback(lambda _: self._loaded(shard, started_ns))
        if announce:
            started = loop.time()
            task.add_done_callback(lambda _: self._log_moved_in(shard, loop.time() - started))
        return task

    def _loaded(self, shard: ShardRuntime[S], started_ns: int) -> None:
        if shard.state is ShardState.ACTIVE:
            self.stats.partition_load.observe_ns(time.perf_counter_ns() - started_ns)

    def _log_moved_in(self, shard: ShardRuntime[S], seconds: float) -> None:
        """Kafka's "Finished loading offsets and group metadata from __consumer_offsets-N in X ms"."""
        if shard.state is ShardState.ACTIVE:
            log.info(
                "%s-%d loaded in %.2f s (%s, %d records): its %s are coordinated here",
                self.topic,
                shard.partition,
                seconds,
                self.kind.contents([shard.shard]),
                shard.records,
                self.kind.coordinated,
            )

    def _delete_retention_ms(self, topic: Topic) -> int:
        """How long compaction keeps tombstones: the topic's delete.retention.ms, else the broker default."""
        configured = topic.configs.get("delete.retention.ms")
        if configured is not None:
            return int(configured)
        return int(self._broker_config.get("log.cleaner.delete.retention.ms"))

    # -- disk failures -----------------------------------------------------------------------------------------

    def _shard_failed(self, shard: ShardRuntime[S], error: BaseException, answered: int) -> None:
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
                self.kind.keys,
                self._backoff.initial_ms,
            )
        if self._closing or partition in self._reloads:
            return
        task = asyncio.get_running_loop().create_task(self._reload(shard))
        self._reloads[partition] = task
        task.add_done_callback(lambda _: self._reloads.pop(partition, None))

    def _shard_written(self, shard: ShardRuntime[S]) -> None:
        if self._backoff.succeeded(shard.partition):
            log.warning("%s-%d writes succeed again: its %s are served", self.topic, shard.partition, self.kind.keys)

    async def _reload(self, shard: ShardRuntime[S]) -> None:
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

    # -- moves and closing -------------------------------------------------------------------------------------

    async def unload_partition(self, partition: int) -> None:
        """Stop hosting `partition` (its keys get NOT_COORDINATOR from now on)."""
        shard = self.shards.get(partition)
        if shard is None:
            return
        await shard.unload()
        if self.shards.get(partition) is shard:
            del self.shards[partition]

    async def move_away_and_back(self, partition: int, unavailable_ms: int = 0) -> None:
        """What a client sees when a coordinator moves, on one node (fault injection, embedded mode): unload the
        partition (its pending writes finish and are acknowledged, parked requests are answered NOT_COORDINATOR,
        new requests get NOT_COORDINATOR), wait `unavailable_ms`, then load it again from its log
        (COORDINATOR_LOAD_IN_PROGRESS until replayed). Returns once the load has started. Raises ValueError if the
        partition is not hosted here."""
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
        if self._creating is not None:
            self._creating.cancel()
        for task in list(self._reloads.values()):
            task.cancel()
        await asyncio.gather(*(self.unload_partition(p) for p in list(self.shards)))
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            await asyncio.get_running_loop().run_in_executor(None, flusher.close)

    # -- routing -----------------------------------------------------------------------------------------------

    def partition_for(self, key: str) -> int:
        return _partition_of(key, self.num_partitions)

    def hosts(self, key: str) -> bool:
        """True if this node coordinates `key` (its partition loaded or loading)."""
        if not self.num_partitions:
            return False
        shard = self.shards.get(self.partition_for(key))
        return shard is not None and shard.state in (ShardState.LOADING, ShardState.ACTIVE)

    def shard_for(self, key: str) -> ShardRuntime[S]:
        """Raises CoordinatorError(NOT_COORDINATOR) if this node does not host the key's partition."""
        if not self.num_partitions:
            raise CoordinatorError(ErrorCode.not_coordinator, f"{self.topic} does not exist yet")
        partition = self.partition_for(key)
        shard = self.shards.get(partition)
        if shard is None:
            raise CoordinatorError(ErrorCode.not_coordinator, f"{key!r} ({self.topic}-{partition}) is not hosted here")
        return shard

    async def loaded_shard(self, partition: int) -> ShardRuntime[S]:
        """The shard of `partition`, once its load (if one is under way) is over. Raises
        CoordinatorError(NOT_COORDINATOR) if the partition is not hosted here."""
        load = self._loads.get(partition)
        if load is not None:
            await asyncio.shield(load)
        shard = self.shards.get(partition)
        if shard is None:
            raise CoordinatorError(ErrorCode.not_coordinator, f"{self.topic}-{partition} is not hosted here")
        return shard

    def call(self, key: str, handler: Callable[[S, Request, object], Result], request: Request) -> object:
        """`handler` (a request handler of the core) on the key's shard; its response, or a future of it. Raises
        CoordinatorError with NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
        return self.shard_for(key).call(handler, request)

    def call_all(self, handler: Callable[[S, Request, object], Result], request: Request) -> list[object]:
        """`handler` on every active shard (ListGroups, ListTransactions). Raises
        CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS) while any hosted partition is loading."""
        shards = list(self.shards.values())
        if any(s.state is ShardState.LOADING for s in shards):
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress, "a coordinator partition is loading")
        return [s.call(handler, request) for s in shards if s.state is ShardState.ACTIVE]
