"""Moving a group's coordinator or a partition's leadership on demand (fault injection): what `POST /v1/moves`
(herd.server.http) does.

The body names a group (`{"group": "g"}`: its coordinator, the leader of `__consumer_offsets` partition
abs(hashCode(g)) % offsets.topic.num.partitions) or a partition (`{"topic": "t", "partition": 0}`), with an
optional `"to": node_id`. The answer is `{"partition": [topic, index], "from": old leader, "to": new leader,
"leader_epoch": epoch}`; a refusal is a 4xx (5xx when the database failed) with `{"error": "<one line>"}`.

- Cluster mode: `SharedCluster.move_partition`, on whichever node is asked: the partition's leader becomes `to`
  (by default the next live node after the leader, by id) with a new leader epoch, every node is notified, the
  old leader lets go (writes of its not yet stored are fenced: commits answered NOT_COORDINATOR, produce
  NOT_LEADER_OR_FOLLOWER, and clients retry them on the new leader) and the new one loads. The move stays: only
  a joining node's step rebalances (docs/cluster.md, "Moves on demand").
- Embedded mode (one node): a group's move is `CoordinatorRuntime.move_away_and_back`: its partition is unloaded
  (NOT_COORDINATOR; pending writes finish first), `unavailable_ms` (default 0) pass, and it is loaded again from
  its log (COORDINATOR_LOAD_IN_PROGRESS meanwhile). A data partition cannot move without another node: 400.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herd.cluster.placement import MoveError
from herd.cluster.topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from herd.server.broker import Broker

__all__ = ["MoveError", "MoveRequest", "move", "parse_move"]

FIELDS = frozenset({"group", "topic", "partition", "to", "unavailable_ms"})


@dataclass(frozen=True, slots=True)
class MoveRequest:
    """What `POST /v1/moves` asked for: a group's coordinator (`group`) or a partition (`topic`, `partition`)."""

    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    to: int | None = None
    unavailable_ms: int | None = None


def parse_move(body: Any) -> MoveRequest:
    """The request from the JSON body; raises MoveError (400) naming what is wrong."""
    if not isinstance(body, dict):
        raise MoveError("the body must be a JSON object")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise MoveError(f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(FIELDS))})")
    group, topic = body.get("group"), body.get("topic")
    if (group is None) == (topic is None):
        raise MoveError('name either a group ({"group": "g"}) or a partition ({"topic": "t", "partition": 0})')
    if group is not None and (not isinstance(group, str) or not group):
        raise MoveError("group must be a non-empty string")
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise MoveError("topic must be a non-empty string")
    if group is not None and "partition" in body:
        raise MoveError("partition goes with topic, not with group")
    partition = _integer(body, "partition", required=topic is not None)
    unavailable_ms = _integer(body, "unavailable_ms")
    if unavailable_ms is not None and group is None:
        raise MoveError("unavailable_ms goes with a group's move")
    return MoveRequest(group, topic, partition, _integer(body, "to"), unavailable_ms)


def _integer(body: dict[str, Any], name: str, *, required: bool = False) -> int | None:
    value = body.get(name)
    if value is None:
        if required:
            raise MoveError(f"{name} is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MoveError(f"{name} must be a non-negative integer, not {value!r}")
    return value


async def move(broker: Broker, request: MoveRequest) -> dict[str, Any]:
    """Carry the move out on `broker` (cluster or embedded mode); the answer's JSON. Raises MoveError."""
    topic, partition = _target(broker, request)
    # mode test kept (tests/unit/server/test_one_seam.py): the two moves are different operations, not one done
    # two ways: a cluster moves a partition's leadership to another node (the controller, in PostgreSQL), a single
    # node unloads and reloads its own coordinator partition with an unavailable window (fault injection)
    if broker.cluster.shared:
        if request.unavailable_ms:  # 0, the default, is what a cluster's move gives
            raise MoveError(
                "unavailable_ms is for a single node: in cluster mode the coordinator is unavailable "
                "while the new leader loads the group"
            )
        moved = await broker.cluster.move_partition(topic, partition, request.to)  # type: ignore[attr-defined]
        return _answer(topic, partition, moved.from_node, moved.to_node, moved.leader_epoch)
    if topic != OFFSETS_TOPIC:
        raise MoveError("moving a partition's leadership needs cluster mode")
    if request.to not in (None, broker.node_id):
        raise MoveError(f"node {request.to} is not a live node (live nodes: [{broker.node_id}])")
    await _move_coordinator_here(broker, partition, request.unavailable_ms or 0)
    return _answer(topic, partition, broker.node_id, broker.node_id, broker.cluster.leader(topic, partition)[1])


def _target(broker: Broker, request: MoveRequest) -> tuple[str, int]:
    """(topic, partition) the move is about: a group's is its coordinator's `__consumer_offsets` partition."""
    if request.group is None:
        assert request.topic is not None and request.partition is not None
        return request.topic, request.partition
    if broker.coordinator is None or not broker.coordinator.num_partitions:
        raise MoveError("the group coordinator is not running yet", 503)
    return OFFSETS_TOPIC, broker.coordinator.partition_for(request.group)


async def _move_coordinator_here(broker: Broker, partition: int, unavailable_ms: int) -> None:
    """Embedded mode: unload the partition and load it again, shielded (a request given up half way must not
    leave the partition unloaded)."""
    coordinator = broker.coordinator
    if coordinator is None or not 0 <= partition < coordinator.num_partitions:
        raise MoveError(f"topic {OFFSETS_TOPIC!r} has no partition {partition}", 404)
    task = asyncio.get_running_loop().create_task(coordinator.move_away_and_back(partition, unavailable_ms))
    try:
        await asyncio.shield(task)
    except ValueError as e:  # not hosted: it failed on its disk and is being reloaded
        raise MoveError(f"{e}: it is being recovered", 503) from None


def _answer(topic: str, partition: int, from_node: int | None, to_node: int, epoch: int) -> dict[str, Any]:
    return {"partition": [topic, partition], "from": from_node, "to": to_node, "leader_epoch": epoch}
