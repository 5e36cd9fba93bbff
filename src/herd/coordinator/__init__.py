"""herd's pure classic group coordinator. Start at `shard.GroupCoordinatorShard`."""

from herd.coordinator.config import CoordinatorConfig
from herd.coordinator.errors import CoordinatorError, ErrorCode, IllegalStateTransition
from herd.coordinator.partition import coordinator_partition
from herd.coordinator.records import Record
from herd.coordinator.result import Reply, Result
from herd.coordinator.shard import GroupCoordinatorShard
from herd.coordinator.state import GroupState
from herd.coordinator.timer import Clock, ManualClock, ManualTimer, Timer

__all__ = [
    "Clock",
    "CoordinatorConfig",
    "CoordinatorError",
    "ErrorCode",
    "GroupCoordinatorShard",
    "GroupState",
    "IllegalStateTransition",
    "ManualClock",
    "ManualTimer",
    "Record",
    "Reply",
    "Result",
    "Timer",
    "coordinator_partition",
]
