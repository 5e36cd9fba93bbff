"""The asyncio shell around the pure coordinator: shards, durable group-committed writes, timers.

Start at `coordinator.CoordinatorRuntime` (the group coordinator, one per broker) and `shard.ShardRuntime` (one per
hosted `__consumer_offsets` partition), the asyncio driver of `machine.ShardMachine`, which decides everything that
is not I/O for any `machine.CoordinatorShard` (and which the coordinator simulator, tests/simulation, drives too).
The group and the transaction coordinator (`transactions.TransactionRuntime`) each own a `host.ShardHost`, the
shell that hosts their topic's partitions, configured by a `host.CoordinatorKind`.
"""

from herd.runtime.coordinator import CoordinatorRuntime, coordinator_config
from herd.runtime.host import CoordinatorKind, ShardHost
from herd.runtime.machine import CoordinatorShard, ShardMachine
from herd.runtime.shard import ReplyHandle, ShardRuntime, ShardState
from herd.runtime.timer import AsyncioTimer, WallClock

__all__ = [
    "AsyncioTimer",
    "CoordinatorKind",
    "CoordinatorRuntime",
    "CoordinatorShard",
    "ReplyHandle",
    "ShardHost",
    "ShardMachine",
    "ShardRuntime",
    "ShardState",
    "WallClock",
    "coordinator_config",
]
