"""The asyncio shell around the pure coordinator: shards, durable group-committed writes, timers.

Start at `coordinator.CoordinatorRuntime` (one per broker) and `shard.ShardRuntime` (one per hosted
`__consumer_offsets` partition).
"""

from herd.runtime.coordinator import CoordinatorRuntime, coordinator_config
from herd.runtime.shard import ReplyHandle, ShardRuntime, ShardState
from herd.runtime.timer import AsyncioTimer, WallClock

__all__ = [
    "AsyncioTimer",
    "CoordinatorRuntime",
    "ReplyHandle",
    "ShardRuntime",
    "ShardState",
    "WallClock",
    "coordinator_config",
]
