"""The node of cluster mode (herd.server.node's docstring says what it does): its state in PostgreSQL, shared with
the other nodes. A module of its own so that an embedded node never imports PostgreSQL's driver."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import psycopg

from herd.cluster.api import SharedAdmin
from herd.cluster.shared import SharedCluster
from herd.cluster.topics import (
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_CONFIGS,
    SHARE_STATE_TOPIC,
    TOPIC_ALREADY_EXISTS,
    TRANSACTION_STATE_TOPIC,
    TopicError,
)
from herd.config import BrokerConfig
from herd.log.api import LogError, PartitionLog, as_remote
from herd.log.postgres.db import DatabaseError, describe, open_pool, redact
from herd.log.postgres.schema import migrate
from herd.log.postgres.store import PgLogStore
from herd.runtime import CoordinatorRuntime
from herd.runtime.share_state import ShareStateRuntime
from herd.runtime.transactions import TransactionRuntime
from herd.security.acl_store import open_shared_store
from herd.security.credentials import SharedCredentialStore
from herd.server.sasl import inter_broker_login
from herd.server.share_state_peers import ShareStateSender
from herd.server.transactions import transaction_runtime

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from herd.server.broker import Broker

log = logging.getLogger(__name__)

POOL_MAX_SIZE = 16
# partitions hosted by a coordinator runtime
_COORDINATED = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC)


class ClusterNode:
    def __init__(self, config: BrokerConfig, broker: Broker, pool: AsyncConnectionPool) -> None:
        self.config = config
        self.broker = broker
        self.pool = pool
        self.store = PgLogStore(pool, broker.node_id, producers=broker.producers)
        self.cluster: SharedCluster  # set by `start`, which hands it this node's leadership callbacks
        self._moves: dict[tuple[str, int], asyncio.Task[None]] = {}  # the last move of each partition
        self.where = f"state in {redact(config.get('herd.cluster.database.url'))}"

    @classmethod
    async def start(cls, config: BrokerConfig, broker: Broker, http_url: str | None = None) -> ClusterNode:
        """`http_url`: where this node's HTTP listener is reached (registered in herd_nodes), if it has one."""
        url: str = config.get("herd.cluster.database.url")
        pool = await open_pool(url, max_size=POOL_MAX_SIZE, name=f"herd-node-{broker.node_id}")
        node = cls(config, broker, pool)
        try:
            try:
                async with pool.connection() as conn:
                    cluster_id = await migrate(conn, redact(url))
            except psycopg.Error as e:  # e.g. no privilege to create herd's tables
                raise DatabaseError(describe(e, url)) from None
            node.cluster = SharedCluster(
                pool,
                node.store,
                config.log_config(),
                node_id=broker.node_id,
                endpoint=(broker.endpoint.host, broker.endpoint.port),
                http_url=http_url,
                listeners={name: (e.host, e.port) for name, e in broker.endpoints.items()},
                session_timeout_ms=config.get("broker.session.timeout.ms"),
                heartbeat_interval_ms=config.get("broker.heartbeat.interval.ms"),
                max_partitions=config.get("max.broker.partitions"),
                cluster_id=cluster_id,
                on_leadership=node._on_leadership,
                on_topics_deleted=broker.forget_topics,
                on_broker_configs=broker.reconfigure,
            )
            broker.cluster = node.cluster  # type: ignore[assignment]
            broker.admin = SharedAdmin(node.cluster)
            await node.cluster.start()
            broker.use_acls(open_shared_store(config, node.cluster))
        except BaseException:
            await pool.close()
            raise
        await node._start_coordinator()
        node.where = f"cluster {node.cluster.cluster_id}, {node.where}"
        credentials = SharedCredentialStore(node.cluster)  # herd_scram_credentials, kept in step
        await credentials.ensure_secret()
        broker.credentials = credentials
        broker.peers.login = inter_broker_login(config)
        inter_broker = broker.inter_broker_listener
        if broker.peers.login is None and config.security_protocol(inter_broker).startswith("SASL_"):
            log.warning(
                "the nodes reach each other on SASL listener %s but its PlainLoginModule JAAS entry "
                "names no username and password: requests one node forwards to another will fail",
                inter_broker,
            )
        return node

    async def _start_coordinator(self) -> None:
        """Create __consumer_offsets if no node has yet and start the coordinator with the partitions this node
        leads by then (moves until then are not followed for it: `_on_leadership` leaves them to this)."""
        if self.cluster.get(OFFSETS_TOPIC) is None:
            configs: dict[str, str | None] = {
                **OFFSETS_TOPIC_CONFIGS,
                "segment.bytes": str(self.config.get("offsets.topic.segment.bytes")),
            }
            try:
                await self.cluster.create_topic(OFFSETS_TOPIC, self.config.get("offsets.topic.num.partitions"), configs)
            except TopicError as e:
                if e.error_code != TOPIC_ALREADY_EXISTS:  # another node made it meanwhile: fine
                    raise
        topic = self.cluster.get(OFFSETS_TOPIC)
        assert topic is not None
        coordinator = CoordinatorRuntime(self.broker.cluster, self.config)
        coordinator.start([i for i, partition in enumerate(topic.partitions) if partition is not None])
        self.broker.coordinator = coordinator
        await self._start_transactions()
        self._start_share_state()

    async def _start_transactions(self) -> None:
        """The transaction coordinator, with the __transaction_state partitions this node leads by then; the topic
        itself is made by the first FindCoordinator for a transactional id (on any node), after which the
        partitions this node is given are loaded as they come (`_on_leadership`)."""
        transactions = transaction_runtime(self.broker, peers=True)
        topic = self.cluster.get(TRANSACTION_STATE_TOPIC)
        if topic is not None:
            transactions.start([i for i, partition in enumerate(topic.partitions) if partition is not None])
        self.broker.transactions = transactions

    def _start_share_state(self) -> None:
        """The share coordinator, with the __share_group_state partitions this node leads by then (the topic is made
        by the first node a share partition's state is asked of), and the persister of the share partitions this
        node leads: its own coordinator or another node's (herd.runtime.share_state)."""
        broker = self.broker
        share_state = ShareStateRuntime(
            broker.cluster, self.config, admin=broker.admin, node_id=broker.node_id, remote=ShareStateSender(broker)
        )
        topic = self.cluster.get(SHARE_STATE_TOPIC)
        if topic is not None:
            share_state.start([i for i, partition in enumerate(topic.partitions) if partition is not None])
        broker.share_state = share_state
        broker.shares.persister = share_state

    # -- leadership ----------------------------------------------------------------------------------------------

    def _on_leadership(self, topic: str, index: int, partition: PartitionLog | None) -> None:
        """This node gained (`partition` is its log) or lost (None) a partition; called on the loop."""
        key = (topic, index)
        if topic in _COORDINATED and self._runtime(topic) is None:
            return  # still starting: the coordinator starts with the partitions led by then
        if topic not in _COORDINATED:
            # share partitions of it are read again from their share coordinator on their next use: after a move
            # in, what the former leader wrote; a lost one is no longer this node's to serve
            self.broker.shares.forget_partition(topic, index)
            if partition is not None:
                self.broker.producers.hold(topic, index)  # from this moment until its `rebuild` is done
        previous = self._moves.get(key)
        task = asyncio.get_running_loop().create_task(self._follow(topic, index, partition, previous))
        self._moves[key] = task
        task.add_done_callback(lambda t: self._moves.pop(key, None) if self._moves.get(key) is t else None)

    async def _follow(self, topic: str, index: int, partition: PartitionLog | None,
                      previous: asyncio.Task[None] | None) -> None:  # fmt: skip
        if previous is not None:
            await asyncio.gather(previous, return_exceptions=True)
        try:
            if topic in _COORDINATED:
                await self._follow_coordinator(topic, index, partition)
            elif partition is None:
                self.broker.producers.restore(topic, index, [], now_ms=self.broker.now_ms())  # forget it
            else:
                await self._rebuild(topic, index, partition)
        except Exception:
            log.exception("could not follow the leadership move of %s-%d", topic, index)

    async def _rebuild(self, topic: str, index: int, partition: PartitionLog) -> None:
        """Rebuild the producer state of a data partition this node just took (held since `_on_leadership`). A
        database error (e.g. the first use of a pooled connection after the database restarted) is retried, the
        partition held meanwhile (its appends answered NOT_LEADER_OR_FOLLOWER, retriable), while this log still
        leads it: released without its state, it would take any sequence, and append again a retry of a batch
        the previous leader stored."""
        delay_s = self.config.get("herd.log.recovery.backoff.ms") / 1000
        while True:
            try:
                await self.broker.producers.rebuild(as_remote(partition), self.broker.now_ms, held=True)
                return
            except LogError as error:
                led = self.cluster.get(topic)
                if led is None or index >= len(led.partitions) or led.partitions[index] is not partition:
                    return  # given up meanwhile: nothing to rebuild
                self.broker.producers.hold(topic, index)  # `rebuild` released it
                log.warning("%s-%d: could not load its producers' state yet (retrying): %s", topic, index, error)
            await asyncio.sleep(delay_s)

    def _runtime(self, topic: str) -> CoordinatorRuntime | TransactionRuntime | ShareStateRuntime | None:
        if topic == OFFSETS_TOPIC:
            return self.broker.coordinator
        return self.broker.share_state if topic == SHARE_STATE_TOPIC else self.broker.transactions

    async def _follow_coordinator(self, topic: str, index: int, partition: PartitionLog | None) -> None:
        coordinator = self._runtime(topic)
        assert coordinator is not None, f"moves of {topic} are followed once its coordinator runs"
        await coordinator.unload_partition(index)  # a no-op unless it is hosted
        if partition is not None:
            await coordinator.load_partition(index, announce=True)

    # -- stopping ------------------------------------------------------------------------------------------------

    async def hand_over(self) -> None:
        """Controlled shutdown: give this node's partitions to the live nodes (their pending writes committed
        first), unless controlled.shutdown.enable is false."""
        if not self.config.get("controlled.shutdown.enable"):
            return
        try:
            await self.cluster.shutdown(controlled=True)
        except Exception as e:  # e.g. the database is gone: the partitions move when the lease runs out
            log.warning(
                "controlled shutdown could not hand the partitions over (%s): they move to other nodes "
                "when this node's lease runs out",
                e,
            )
        moves = list(self._moves.values())
        if moves:
            await asyncio.gather(*moves, return_exceptions=True)

    async def close(self) -> None:
        try:
            await self.cluster.shutdown(controlled=False)
        except Exception as e:
            log.warning("could not stop the cluster's background work cleanly: %s", e)
        await self.store.close()
        await self.pool.close()
