"""What a coordinator answers for the groups of a `__consumer_offsets` partition it is still loading (as after a
coordinator move) and for those of a partition it does not host: the API handlers on a real broker and a real
coordinator runtime, the partition's load not yet run. Kafka (GroupCoordinatorService): COORDINATOR_LOAD_IN_PROGRESS
for JoinGroup and OffsetFetch while loading, but NONE for Heartbeat, blindly, so that no member loses its session
while the new coordinator replays; NOT_COORDINATOR for a group coordinated elsewhere."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from types import ModuleType

from handlers import answered
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup
from kio.static.primitive import i32Timedelta

from herd.config import BrokerConfig
from herd.log.fs import MemoryFileSystem
from herd.log.store import SegmentStore
from herd.protocol.messages import RequestHeader
from herd.runtime import CoordinatorRuntime, ShardState
from herd.server.apis import heartbeat, join_group, offset_fetch
from herd.server.broker import Broker, RequestContext

SESSION = i32Timedelta.parse(timedelta(seconds=10))


def _context(broker: Broker, api: ModuleType) -> RequestContext:
    return RequestContext(broker, RequestHeader(api.API_KEY, api.MAX_VERSION, 1, "test"), "127.0.0.1")


async def _answers(broker: Broker, group: str) -> tuple[int, int, int]:
    """(Heartbeat, JoinGroup, OffsetFetch) error codes for `group`."""
    beat = heartbeat.handle(
        _context(broker, heartbeat),
        HeartbeatRequest(group_id=group, generation_id=1, member_id="m-1", group_instance_id=None),
    )
    join = join_group.handle(
        _context(broker, join_group),
        JoinGroupRequest(
            group_id=group,
            session_timeout=SESSION,
            rebalance_timeout=SESSION,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None,
        ),
    )
    fetch = offset_fetch.handle(
        _context(broker, offset_fetch),
        OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=None),), require_stable=False),
    )
    beat, join, fetch = [await answered(outcome) for outcome in (beat, join, fetch)]
    return beat.error_code, join.error_code, fetch.groups[0].error_code


def test_a_loading_partition_answers_heartbeats_none_and_the_rest_load_in_progress_a_foreign_one_not_coordinator():
    async def main() -> None:
        config = BrokerConfig.from_properties({"offsets.topic.num.partitions": "2"})
        broker = Broker(config, SegmentStore("/data", MemoryFileSystem()))
        broker.start()
        coordinator = CoordinatorRuntime(broker.cluster, config)
        coordinator.start([0])  # hosts partition 0 only; its load runs once this coroutine yields
        broker.coordinator = coordinator
        here = next(g for g in (f"g{i}" for i in range(100)) if coordinator.partition_for(g) == 0)
        elsewhere = next(g for g in (f"g{i}" for i in range(100)) if coordinator.partition_for(g) == 1)
        assert coordinator.shards[0].state is ShardState.LOADING

        assert await _answers(broker, here) == (
            ErrorCode.none,
            ErrorCode.coordinator_load_in_progress,
            ErrorCode.coordinator_load_in_progress,
        )
        assert await _answers(broker, elsewhere) == (ErrorCode.not_coordinator,) * 3

        await coordinator.wait_loaded()
        # answered by the loaded partition: a member it does not know, a new member asked for its id (KIP-394)
        assert await _answers(broker, here) == (
            ErrorCode.unknown_member_id,
            ErrorCode.member_id_required,
            ErrorCode.none,
        )
        await coordinator.close()
        broker.close()

    asyncio.run(main())
