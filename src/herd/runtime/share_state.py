"""The share coordinator of this node (KIP-932): one shard per `__share_group_state` partition it hosts, each a
`ShareStateShard` (herd.coordinator.share_state), on the same shell as the group and transaction coordinators (a
`ShardHost`, runtime/host.py): loading, durable group-committed writes, compaction, failure and reload.

The state of share partition (group, topic id, partition) lives in partition
abs(hashCode("group:topicId:partition")) % share.coordinator.state.topic.num.partitions, as Kafka places it
(SharePartitionKey.asCoordinatorKey, with Kafka's string form of the topic id). The topic is made on first use
(internal, compacted: every write is a full ShareSnapshot, cluster/topics.py says why).

`SharePersister` is what the share partitions a node leads (runtime/shares.py) call, as Kafka's leader calls its
Persister: read a partition's state when it is first used, initialize it, write every change, each answered once
durable. On a single node every partition of `__share_group_state` is hosted here. In cluster mode the share
coordinator is not run yet (the leader of a data partition would have to reach the node hosting the state's
partition, with Kafka's Read/Write/InitializeShareGroupState): `SharePartitions` then keeps the state in memory only.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Iterable, Sequence

from herd.cluster.topics import SHARE_STATE_TOPIC, SHARE_STATE_TOPIC_CONFIGS, Cluster
from herd.config import BrokerConfig
from herd.coordinator import CoordinatorError, ErrorCode
from herd.coordinator.share_state.records import StateBatch
from herd.coordinator.share_state.shard import (
    Delete,
    Initialize,
    Read,
    ShareState,
    ShareStateResponse,
    ShareStateShard,
    Write,
)
from herd.log.api import PartitionLog
from herd.runtime.host import CoordinatorKind, ShardHost
from herd.runtime.shard import ShardRuntime
from herd.runtime.timer import AsyncioTimer, WallClock

log = logging.getLogger(__name__)


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
    """`__share_group_state` on a `ShardHost`, and the persister the share partitions use."""

    topic = SHARE_STATE_TOPIC

    def __init__(self, cluster: Cluster, config: BrokerConfig, clock: WallClock | None = None) -> None:
        self._cluster = cluster
        self._broker_config = config
        self.clock = clock or WallClock()
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
        """Load the topic's partitions if it exists; otherwise it is made on first use (`ensure_created`)."""
        if self._cluster.get(SHARE_STATE_TOPIC) is not None:
            self._host.start(partitions)

    def ensure_created(self) -> None:
        """Make `__share_group_state` if it does not exist (a single node: it hosts every partition)."""
        if not self._host.num_partitions:
            self._host.start()

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
        self.ensure_created()
        key = coordinator_key(group_id, topic_id, partition)
        for _ in range(100):  # a partition still loading: wait for it, a little at a time
            try:
                outcome = self._host.shard_for(key).call(handler, request)
            except CoordinatorError as error:
                if error.code != ErrorCode.coordinator_load_in_progress:
                    raise ShareStateError(error.code, error.message) from None
                await asyncio.sleep(0.05)
                continue
            response = await outcome if isinstance(outcome, asyncio.Future) else outcome
            assert isinstance(response, ShareStateResponse)
            if response.error_code != ErrorCode.none:
                raise ShareStateError(response.error_code, response.error_message)
            return response
        raise ShareStateError(ErrorCode.coordinator_load_in_progress, f"{SHARE_STATE_TOPIC} is still loading")
