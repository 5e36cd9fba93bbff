"""Partition leadership in cluster mode: the controller step, moves on demand, elections and the leaders of new
partitions, each run inside the caller's transaction under the metadata lock (`herd.cluster.database.locked`).

The controller step, which any node runs, one at a time: nodes whose lease ran out are marked stopped,
`placement.plan` says which partitions move (those of stopped nodes; then, in the steps of a node that has just
registered until one of them is done, as few as balance the groups), and every moved partition's leader epoch grows
by one (`metadata_sql.NEW_EPOCH`), which fences the old leader's writes (the log store checks leader and epoch in
every write's transaction). A controlled shutdown's hand-over is the same placement with the leaving node left out.

`move_leadership` moves one partition's leadership on demand (fault injection, AlterPartitionReassignments);
`elect` is ElectLeaders by the placement rules (`placement.elect`); `new_leaders` places the partitions of a topic
being created or grown.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import psycopg

from herd.cluster.database import notify
from herd.cluster.nodes import alive, candidates, read_nodes
from herd.cluster.placement import Elected, Election, MoveError, Slot, assign_new, elect, plan
from herd.log.postgres import metadata_sql as q

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Moved:
    """A leadership moved on demand: the partition, its leader before (None: it had none) and after, and the
    new leader epoch."""

    topic: str
    partition: int
    from_node: int | None
    to_node: int
    leader_epoch: int


async def step(conn: psycopg.AsyncConnection, node_id: int, *, balance: bool) -> None:
    """The controller step of node `node_id`: expire the nodes whose lease ran out and move the partitions that
    must move (`balance`: the groups are balanced as well, a joining node's step); every node is told (NOTIFY)."""
    cursor = await conn.execute(q.EXPIRE)
    expired = sorted(r[0] for r in await cursor.fetchall())
    if expired:
        log.warning("the leases of nodes %s ran out: their partitions move to live nodes", expired)
    moved = await place(conn, node_id, handing_over=False, balance=balance)
    if expired or moved:
        await notify(conn, "leaders", node_id)


async def place(conn: psycopg.AsyncConnection, node_id: int, *, handing_over: bool, balance: bool = False) -> int:
    """Run `placement.plan` over the partitions and the live nodes and store its moves, each with the next
    leader epoch; returns how many moved. `handing_over`: node `node_id`'s own partitions go too; `balance`: the
    groups are balanced as well (a joining node's step)."""
    eligible, keep = candidates(await read_nodes(conn), leaving=node_id if handing_over else None)
    moves = plan(await read_slots(conn), eligible, keep=keep, balance=balance)
    if moves:
        await set_leaders(conn, moves)
        log.info("moved the leadership of %d partitions (nodes %s eligible)", len(moves), sorted(eligible))
    return len(moves)


async def move_leadership(
    conn: psycopg.AsyncConnection, topic: str, index: int, to_node: int | None, *, sender: int
) -> Moved:
    """The database side of `SharedCluster.move_partition`, inside the caller's transaction under the metadata lock
    (no step or admin change runs meanwhile), which commits it: check the partition and the target against the
    live nodes, store the new leader with the next epoch (NEW_EPOCH: the epoch history OffsetForLeaderEpoch
    answers from grows as at every other change) and notify every node but `sender`. Raises MoveError."""
    cursor = await conn.execute(q.MOVE_FIND, (index, topic))
    row = await cursor.fetchone()
    if row is None:
        raise MoveError(f"unknown topic {topic!r}", 404)
    count, pid, leader = row
    if pid is None:
        raise MoveError(f"topic {topic!r} has no partition {index} (it has {count})", 404)
    live = sorted(alive(await read_nodes(conn)))
    target = _move_target(f"{topic}-{index}", leader, to_node, live)
    cursor = await conn.execute(q.MOVE, (target, pid))
    updated = await cursor.fetchone()
    assert updated is not None
    await notify(conn, "leaders", sender)
    return Moved(topic, index, leader, target, int(updated[0]))


def _move_target(name: str, leader: int | None, to_node: int | None, live: list[int]) -> int:
    """`to_node` if it is live and not the leader already; by default the first live node after the leader by
    id (wrapping around). Raises MoveError."""
    if to_node is not None:
        if to_node not in live:
            raise MoveError(f"node {to_node} is not a live node (live nodes: {live})", 400)
        if to_node == leader:
            raise MoveError(f"{name} is already led by node {to_node}", 409)
        return to_node
    others = [n for n in live if n != leader]
    if not others:
        raise MoveError(f"{name} has no other live node to move to (live nodes: {live})", 409)
    after = [n for n in others if leader is not None and n > leader]
    return (after or others)[0]


async def elect_leaders(
    conn: psycopg.AsyncConnection, partitions: Iterable[tuple[str, int]] | None, *, preferred: bool, sender: int
) -> dict[tuple[str, int], Elected]:
    """ElectLeaders inside the caller's transaction: a leader for each of `partitions` (None: every partition) by
    `placement.elect`; each partition that moves gets a new leader epoch and every node but `sender` is told. The
    partitions that do not exist are left out of the answer."""
    eligible, keep = candidates(await read_nodes(conn))
    placed = await read_placed(conn)
    wanted = list(placed) if partitions is None else [p for p in dict.fromkeys(partitions) if p in placed]
    outcomes = elect(
        [slot for slot, _ in placed.values()],
        eligible,
        [placed[p][0].key for p in wanted],
        keep=keep,
        preferred=preferred,
    )
    epochs = await set_leaders(
        conn,
        {key: node for key, (outcome, node) in outcomes.items() if outcome is Election.ELECTED and node is not None},
    )
    if epochs:
        await notify(conn, "leaders", sender)
    elected = {}
    for p in wanted:
        slot, epoch = placed[p]
        outcome, leader = outcomes[slot.key]
        elected[p] = Elected(outcome, leader, epochs.get(slot.key, epoch))
    return elected


async def new_leaders(conn: psycopg.AsyncConnection, name: str, count: int) -> list[int | None]:
    """The leaders of `count` new partitions of topic `name`, among the live nodes (`placement.assign_new`; None
    for each when no node is live)."""
    eligible = alive(await read_nodes(conn))
    return assign_new(name, count, await read_slots(conn), eligible)


async def set_leaders(conn: psycopg.AsyncConnection, moves: dict[int, int]) -> dict[int, int]:
    """Store each moved partition's new leader (by pid) with the next leader epoch (NEW_EPOCH); the new epochs."""
    if not moves:
        return {}
    cursor = await conn.execute(q.SET_LEADERS, (list(moves), list(moves.values())))
    return {int(r[0]): int(r[1]) for r in await cursor.fetchall()}


async def read_placed(conn: psycopg.AsyncConnection) -> dict[tuple[str, int], tuple[Slot, int]]:
    """Every partition of a topic, by (topic, index): its slot and its leader epoch."""
    cursor = await conn.execute(q.PLACED)
    return {(r[1], r[2]): (Slot(r[0], r[1], r[3]), r[4]) for r in await cursor.fetchall()}


async def read_slots(conn: psycopg.AsyncConnection) -> list[Slot]:
    """Every partition of a topic, as `placement` sees it."""
    return [slot for slot, _ in (await read_placed(conn)).values()]
