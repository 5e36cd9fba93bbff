"""The group coordinator of this node: a `ShardHost` (runtime/host.py) of the `__consumer_offsets` partitions it
hosts, whose shards run the group coordinator's core (`GroupCoordinatorShard`), and the operations only groups have.

The host does what every coordinator does (loading, durable group-committed writes, timers, compaction, failure and
reload, moves, routing); this module says what is particular to groups. `start()` creates `__consumer_offsets` if
it does not exist (internal, cleanup.policy=compact, segment.bytes from offsets.topic.segment.bytes,
offsets.topic.num.partitions partitions; an existing topic keeps its partition count, which is what group placement
then uses) and loads every hosted partition. Each shard's rebalance history reports to `stats` (rebalances by
cause and phase, herd.server.metrics). On top of the host's `call`: the heartbeat's fast path (`heartbeat`), the
offsets of deleted topics (`on_topics_deleted`) and the markers the transaction coordinator writes into
`__consumer_offsets` (`complete_transaction`).

Requests are routed by `coordinator_partition(group_id, partitions)`: a group whose partition this node
does not host gets NOT_COORDINATOR, one whose partition is still loading COORDINATOR_LOAD_IN_PROGRESS
(both raised as `CoordinatorError` by `call`, for the API module to put in its response).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from herd.cluster.topics import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, Cluster
from herd.config import BrokerConfig, split_list
from herd.coordinator import CoordinatorConfig, CoordinatorError, ErrorCode, GroupCoordinatorShard
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.requests import CompleteTransaction
from herd.coordinator.responses import CompleteTransactionResponse
from herd.log.api import PartitionLog
from herd.runtime.host import CoordinatorKind, ShardHost
from herd.runtime.shard import Handler, Request, ShardRuntime
from herd.runtime.stats import CoordinatorStats
from herd.runtime.timer import AsyncioTimer, WallClock

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
        group_consumer_session_timeout_ms=config.get("group.consumer.session.timeout.ms"),
        group_consumer_heartbeat_interval_ms=config.get("group.consumer.heartbeat.interval.ms"),
        group_consumer_min_session_timeout_ms=config.get("group.consumer.min.session.timeout.ms"),
        group_consumer_max_session_timeout_ms=config.get("group.consumer.max.session.timeout.ms"),
        group_consumer_min_heartbeat_interval_ms=config.get("group.consumer.min.heartbeat.interval.ms"),
        group_consumer_max_heartbeat_interval_ms=config.get("group.consumer.max.heartbeat.interval.ms"),
        group_consumer_max_size=config.get("group.consumer.max.size"),
        group_consumer_assignors=tuple(split_list(config.get("group.consumer.assignors"))),
        group_consumer_regex_refresh_interval_ms=config.get("group.consumer.regex.refresh.interval.ms"),
        group_consumer_migration_policy=config.get("group.consumer.migration.policy").lower(),
        group_share_max_size=config.get("group.share.max.size"),
        group_share_initialize_retry_interval_ms=config.get("group.share.initialize.retry.interval.ms"),
        group_share_session_timeout_ms=config.get("group.share.session.timeout.ms"),
        group_share_min_session_timeout_ms=config.get("group.share.min.session.timeout.ms"),
        group_share_max_session_timeout_ms=config.get("group.share.max.session.timeout.ms"),
        group_share_heartbeat_interval_ms=config.get("group.share.heartbeat.interval.ms"),
        group_share_min_heartbeat_interval_ms=config.get("group.share.min.heartbeat.interval.ms"),
        group_share_max_heartbeat_interval_ms=config.get("group.share.max.heartbeat.interval.ms"),
        group_share_record_lock_duration_ms=config.get("group.share.record.lock.duration.ms"),
        group_share_min_record_lock_duration_ms=config.get("group.share.min.record.lock.duration.ms"),
        group_share_max_record_lock_duration_ms=config.get("group.share.max.record.lock.duration.ms"),
    )


def _contents(shards: Sequence[GroupCoordinatorShard]) -> str:
    sizes = [shard.size() for shard in shards]
    return f"{sum(g for g, _ in sizes)} groups, {sum(o for _, o in sizes)} committed offsets"


class CoordinatorRuntime:
    """The group coordinator: `__consumer_offsets` on a `ShardHost` (see the module docstring)."""

    topic = OFFSETS_TOPIC

    def __init__(self, cluster: Cluster, config: BrokerConfig, clock: WallClock | None = None) -> None:
        self._cluster = cluster
        self._broker_config = config
        self.config = coordinator_config(config)
        self.clock = clock or WallClock()
        kind = CoordinatorKind(
            topic=OFFSETS_TOPIC,
            keys="groups",
            coordinated="groups",
            topic_settings=self._topic_settings,
            new_shard=self._new_shard,
            contents=_contents,
        )
        self._host: ShardHost[GroupCoordinatorShard] = ShardHost(cluster, config, kind, self.clock)
        self._topics = TopicsImage(version=-1)  # what the shards were last told of the topics (sync_topics)

    def _topic_settings(self) -> tuple[int, dict[str, str | None]]:
        """`__consumer_offsets`'s partitions and configs (Kafka's offsets.topic.* settings)."""
        configs: dict[str, str | None] = {
            **OFFSETS_TOPIC_CONFIGS,
            "segment.bytes": str(self._broker_config.get("offsets.topic.segment.bytes")),
        }
        return self._broker_config.get("offsets.topic.num.partitions"), configs

    def _new_shard(self, partition_log: PartitionLog, timer: AsyncioTimer) -> GroupCoordinatorShard:
        """The core of one partition; its rebalances are counted in `stats`."""
        shard = GroupCoordinatorShard(clock=self.clock, timer=timer, config=self.config)
        shard.history.observer = self._host.stats.on_rebalance
        shard.set_topics(self._topics_image())
        return shard

    def _topics_image(self) -> TopicsImage:
        """The cluster's topics as consumer groups see them, rebuilt when the cluster's topics_version moved."""
        version = self._cluster.topics_version
        if self._topics.version != version:
            self._topics = TopicsImage.of(
                ((t.name, t.topic_id, len(t.partitions)) for t in self._cluster.topics()), version
            )
        return self._topics

    def sync_topics(self) -> None:
        """Give every shard the cluster's topics if they changed since (before a ConsumerGroupHeartbeat: O(1)
        when nothing changed)."""
        if self._topics.version == self._cluster.topics_version:
            return
        image = self._topics_image()
        for shard in self._host.shards.values():
            shard.shard.set_topics(image)

    # -- the host's ----------------------------------------------------------------------------------------------

    @property
    def shards(self) -> dict[int, ShardRuntime[GroupCoordinatorShard]]:
        return self._host.shards

    @property
    def num_partitions(self) -> int:
        return self._host.num_partitions

    @property
    def stats(self) -> CoordinatorStats:
        return self._host.stats

    def start(self, partitions: Iterable[int] | None = None) -> None:
        """Create the offsets topic if needed and start loading `partitions` (default: all of them).
        Must be called on the running loop."""
        self._host.start(partitions)

    def load_partition(self, partition: int, *, announce: bool = False) -> asyncio.Task[None]:
        """Host `partition`: its groups get COORDINATOR_LOAD_IN_PROGRESS until its log is replayed (ShardHost's)."""
        return self._host.load_partition(partition, announce=announce)

    async def unload_partition(self, partition: int) -> None:
        """Stop hosting `partition` (its groups get NOT_COORDINATOR from now on)."""
        await self._host.unload_partition(partition)

    async def move_away_and_back(self, partition: int, unavailable_ms: int = 0) -> None:
        """A coordinator move on one node (ShardHost's): parked JoinGroup and SyncGroup requests are answered
        NOT_COORDINATOR and join phases under way are lost; loaded again, each group comes back at its last stored
        generation, its members' sessions re-armed. Raises ValueError if the partition is not hosted here."""
        await self._host.move_away_and_back(partition, unavailable_ms)

    async def wait_loaded(self) -> None:
        """Return once every partition that was loading has finished loading."""
        await self._host.wait_loaded()

    async def close(self) -> None:
        """Unload every partition: pending writes are finished and acknowledged, parked requests answered."""
        await self._host.close()

    def partition_for(self, group_id: str) -> int:
        return self._host.partition_for(group_id)

    def hosts(self, group_id: str) -> bool:
        """True if this node is the coordinator of `group_id` (loaded or loading)."""
        return self._host.hosts(group_id)

    def shard_for(self, group_id: str) -> ShardRuntime[GroupCoordinatorShard]:
        """Raises CoordinatorError(NOT_COORDINATOR) if this node does not host the group's partition."""
        return self._host.shard_for(group_id)

    def call(self, group_id: str, handler: Handler[Request], request: Request) -> object:
        """`handler` (a request handler of `GroupCoordinatorShard`) on the group's shard; its response, or a
        future of it. Raises CoordinatorError with NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
        return self._host.shard_for(group_id).call(handler, request)

    def call_all(self, handler: Handler[Request], request: Request) -> list[object]:
        """`handler` on every active shard (ListGroups). Raises CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS)
        while any hosted partition is loading."""
        return self._host.call_all(handler, request)

    # -- the group coordinator's own -----------------------------------------------------------------------------

    def group_config(self, group_id: str, name: str) -> str | None:
        """The group's value of one of Kafka's group configs, if this node coordinates the group and it sets one;
        None otherwise (the broker's setting then applies: a group coordinated by another node of a cluster is
        read with the broker's settings, where Kafka reads every group's configs from its metadata log)."""
        try:
            return self._host.shard_for(group_id).shard.group_config(group_id, name)
        except CoordinatorError:
            return None

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """`ShardRuntime.heartbeat` of the group's shard: the answer's error code, or None to go through `call`."""
        return self._host.shard_for(group_id).heartbeat(group_id, generation_id, member_id, instance_id)

    def consumer_group_keep_alive(
        self, group_id: str, member_id: str, member_epoch: int, client_id: str, client_host: str
    ) -> tuple[str, int, int] | None:
        """`ShardRuntime.consumer_group_keep_alive` of the group's shard: the answer, or None to go through `call`."""
        shard = self._host.shard_for(group_id)
        return shard.consumer_group_keep_alive(group_id, member_id, member_epoch, client_id, client_host)

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
        shard = await self._host.loaded_shard(partition)
        request = CompleteTransaction(
            producer_id=producer_id, producer_epoch=producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch
        )
        outcome = shard.call(GroupCoordinatorShard.complete_transaction, request)
        response = await outcome if isinstance(outcome, asyncio.Future) else outcome
        assert isinstance(response, CompleteTransactionResponse)  # an error is answered in the same type
        if response.error_code:
            raise CoordinatorError(
                ErrorCode(response.error_code),
                f"the marker of producer {producer_id} was not written",
            )
