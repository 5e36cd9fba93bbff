"""The asyncio shell around the pure coordinator: shards, durable group-committed writes, timers.

Start at `coordinator.CoordinatorRuntime` (one per broker) and `shard.ShardRuntime` (one per hosted
`__consumer_offsets` partition), the asyncio driver of `machine.ShardMachine`, which decides everything that is
not I/O for any `machine.CoordinatorShard` (and which the coordinator simulator, tests/simulation, drives too).
"""

from herd.runtime.coordinator import CoordinatorRuntime, coordinator_config
from herd.runtime.machine import CoordinatorShard, ShardMachine
from herd.runtime.shard import ReplyHandle, ShardRuntime, ShardState
from herd.runtime.timer import AsyncioTimer, WallClock

__all__ = [
    "AsyncioTimer",
    "CoordinatorRuntime",
    "CoordinatorShard",
    "ReplyHandle",
    "ShardMachine",
    "ShardRuntime",
    "ShardState",
    "WallClock",
    "coordinator_config",
]
