"""The share coordinator of this node (KIP-932): one shard per `__share_group_state` partition it hosts, each a
`ShareStateShard` (herd.coordinator.share_state), on the same shell as the group and transaction coordinators (a
`ShardHost`, runtime/host.py): loading, durable group-committed writes, compaction, failure and reload.

The state of share partition (group, topic id, partition) lives in partition
abs(hashCode("group:topicId:partition")) % share.coordinator.state.topic.num.partitions, as Kafka places it
(SharePartitionKey.asCoordinatorKey, with Kafka's string form of the topic id). The topic is made on first use
(internal, compacted: every write is a full ShareSnapshot, cluster/topics.py says why).

The runtime is also the persister the share partitions a node leads call (runtime/shares.py), as Kafka's leader
calls its Persister: read a partition's state when it is first used, initialize it, write every change, each
answered once durable. On a single node every partition of `__share_group_state` is hosted here. In cluster mode
(the topic kept in PostgreSQL like every other, made by the first node that needs it) each node hosts the
partitions of `__share_group_state` it leads and follows their moves (server/cluster_node.py); a request for a
share partition whose state another node hosts goes to that node through `remote`, as Kafka's
DefaultStatePersister sends Initialize/Read/Write/DeleteShareGroupState to the share coordinator
(herd.server.share_state_peers). A request that finds no coordinator (the state's partition moving, loading, its
node unreachable) is tried again for up to `RETRY_S` before the caller is told.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence

from herd.cluster.topics import SHARE_STATE_TOPIC, SHARE_STATE_TOPIC_CONFIGS, Cluster
from herd.config import BrokerConfig
from herd.coordinator import CoordinatorError, ErrorCode
from herd.coordinator.share_state.records import StateBatch
from herd.coordinator.share_state.shard import (
    Delete,
    Initialize,
    Read,
    ReadSummary,
    ShareState,
    ShareStateResponse,
    ShareStateShard,
    Write,
    delivery_complete,
)
from herd.log.api import PartitionLog
from herd.runtime.host import CoordinatorKind, ShardHost
from herd.runtime.shard import ShardRuntime
from herd.runtime.timer import AsyncioTimer, WallClock

log = logging.getLogger(__name__)

ShareStateRequest = Initialize | Read | Write | Delete
Remote = Callable[[int, ShareStateRequest], Awaitable[ShareStateResponse]]
"""(node id, request) -> that node's share coordinator's answer; raises ShareStateError when it cannot be asked."""

RETRY_S = 5.0  # how long a request waits for the state's coordinator (loading, moving, being made) before failing
_RETRY_PAUSE_S = 0.05
# what a request may meet while the state's partition loads or moves: tried again
_RETRIABLE = frozenset(
    {ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator, ErrorCode.coordinator_not_available}
)


class ShareStateError(Exception):
    """The share coordinator refused or could not write: the change is not durable."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code = code


def kafka_uuid(value: uuid.UUID) -> str:
    """A topic id as Kafka writes it (Uuid.toString: URL-safe base64 without padding)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """SharePartitionKey.asCoordinatorKey: what places a share partition's state."""
    return f"{group_id}:{kafka_uuid(topic_id)}:{partition}"


def _contents(shards: Sequence[ShareStateShard]) -> str:
    return f"{sum(shard.size() for shard in shards)} share partitions"


class ShareStateRuntime:
    """`__share_group_state` on a `ShardHost`, and the persister the share partitions use. `remote` (cluster mode)
    asks another node's share coordinator."""

    topic = SHARE_STATE_TOPIC

    def __init__(
        self,
        cluster: Cluster,
        config: BrokerConfig,
        clock: WallClock | None = None,
        *,
        node_id: int = 0,
        remote: Remote | None = None,
    ) -> None:
        self._cluster = cluster
        self._broker_config = config
        self.clock = clock or WallClock()
        self._node_id = node_id
        self._remote = remote
        kind = CoordinatorKind(
            topic=SHARE_STATE_TOPIC,
            keys="share partitions",
            coordinated="share partitions",
            topic_settings=self._topic_settings,
            new_shard=self._new_shard,
            contents=_contents,
        )
        self._host: ShardHost[ShareStateShard] = ShardHost(cluster, config, kind, self.clock)

    def start(self, partitions: Iterable[int] | None = None) -> None:
        """Load the topic's partitions (default: all; in cluster mode the ones this node leads) if it exists;
        otherwise it is made on first use (`ensure_created`)."""
        if self._cluster.get(SHARE_STATE_TOPIC) is not None:
            self._host.start(partitions)

    def ensure_created(self) -> bool:
        """True if `__share_group_state` exists; if it does not, start making it and return False (a single node
        makes it and hosts every partition; in cluster mode it is made in the background by whichever node needs it
        first, and each node loads the partitions it is given to lead: ShardHost.ensure_created)."""
        return self._host.ensure_created()

    def _made(self) -> bool:
        """Whether the topic exists, made now if not (a single node makes it at once, its partitions then load)."""
        return self.ensure_created() or self._host.num_partitions > 0

    def load_partition(self, partition: int, *, announce: bool = False) -> asyncio.Task[None]:
        """This node now leads `partition` of the topic (cluster mode): load it (`announce`: log when it is)."""
        self.ensure_created()
        return self._host.load_partition(partition, announce=announce)

    async def unload_partition(self, partition: int) -> None:
        """This node no longer leads `partition` (cluster mode): forget it (a no-op unless it is hosted)."""
        await self._host.unload_partition(partition)

    async def wait_loaded(self) -> None:
        await self._host.wait_loaded()

    async def close(self) -> None:
        await self._host.close()

    @property
    def shards(self) -> dict[int, ShardRuntime[ShareStateShard]]:
        return self._host.shards

    def _topic_settings(self) -> tuple[int, dict[str, str | None]]:
        configs: dict[str, str | None] = {
            **SHARE_STATE_TOPIC_CONFIGS,
            "segment.bytes": str(self._broker_config.get("share.coordinator.state.topic.segment.bytes")),
        }
        return self._broker_config.get("share.coordinator.state.topic.num.partitions"), configs

    def _new_shard(self, partition_log: PartitionLog, timer: AsyncioTimer) -> ShareStateShard:
        # every write a full snapshot (updates_per_snapshot 0): the compacted topic then keeps what a load needs
        return ShareStateShard(clock=self.clock, updates_per_snapshot=0)

    # -- the persister ---------------------------------------------------------------------------------------------

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> ShareState | None:
        """The partition's durable state, None if it has none. ShareStateError if the coordinator cannot say."""
        response = await self._call(
            group_id, topic_id, partition, ShareStateShard.read, Read(group_id, topic_id, partition, leader_epoch)
        )
        return response.state

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int, int] | None:
        """(start offset, delivery-complete count, leader epoch) of the partition's durable state, None if it has
        none: ReadShareGroupStateSummary, when another node keeps it. ShareStateError if no one can say."""
        response = await self._call(
            group_id, topic_id, partition, ShareStateShard.read, ReadSummary(group_id, topic_id, partition)
        )
        state = response.state
        if state is None:
            return None
        done = response.delivery_complete if response.delivery_complete >= 0 else delivery_complete(state)
        return state.start_offset, done, state.leader_epoch

    async def initialize(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int
    ) -> None:
        await self._call(
            group_id,
            topic_id,
            partition,
            ShareStateShard.initialize,
            Initialize(group_id, topic_id, partition, state_epoch, start_offset),
        )

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> None:
        request = Write(group_id, topic_id, partition, state_epoch, leader_epoch, start_offset, tuple(batches))
        await self._call(group_id, topic_id, partition, ShareStateShard.write, request)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        await self._call(group_id, topic_id, partition, ShareStateShard.delete, Delete(group_id, topic_id, partition))

    async def _call(self, group_id: str, topic_id: uuid.UUID, partition: int, handler, request) -> ShareStateResponse:  # type: ignore[no-untyped-def]
        """The answer of the share coordinator of the partition's state: this node's, or (cluster mode) the one on
        the node leading the state's partition. Waits up to RETRY_S for one that can answer; ShareStateError if
        none did, or with the error it answered."""
        key = coordinator_key(group_id, topic_id, partition)
        deadline = asyncio.get_running_loop().time() + RETRY_S
        while True:
            response = await self._try(key, handler, request)
            if response.error_code == ErrorCode.none:
                return response
            if response.error_code not in _RETRIABLE or asyncio.get_running_loop().time() >= deadline:
                raise ShareStateError(response.error_code, response.error_message)
            await asyncio.sleep(_RETRY_PAUSE_S)

    async def _try(self, key: str, handler, request: ShareStateRequest) -> ShareStateResponse:  # type: ignore[no-untyped-def]
        if not self._made():
            return ShareStateResponse(ErrorCode.coordinator_not_available, f"{SHARE_STATE_TOPIC} is being made")
        if self._remote is not None and not self._host.hosts(key):
            leader, _ = self._cluster.leader(SHARE_STATE_TOPIC, self._host.partition_for(key))
            if leader < 0 or leader == self._node_id:  # no leader yet, or this node before it loads the partition
                return ShareStateResponse(ErrorCode.coordinator_not_available, f"no leader of {key}'s state")
            try:
                return await self._remote(leader, request)
            except ShareStateError as error:
                return ShareStateResponse(ErrorCode.coordinator_not_available, str(error))
        return await self.call_local(key, handler, request)

    async def call_local(self, key: str, handler, request: ShareStateRequest) -> ShareStateResponse:  # type: ignore[no-untyped-def]
        """The answer of this node's share coordinator for `key` (coordinator_key): NOT_COORDINATOR when it does not
        host the key's partition, COORDINATOR_LOAD_IN_PROGRESS while it loads (what another node's request gets,
        herd.server.apis.*_share_group_state)."""
        if not self._made():
            return ShareStateResponse(ErrorCode.coordinator_not_available, f"{SHARE_STATE_TOPIC} is being made")
        try:
            outcome = self._host.shard_for(key).call(handler, request)
        except CoordinatorError as error:
            return ShareStateResponse(error.code, error.message)
        response = await outcome if isinstance(outcome, asyncio.Future) else outcome
        assert isinstance(response, ShareStateResponse)
        return response
