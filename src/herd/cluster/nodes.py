"""The node registry of cluster mode: a node as `herd_nodes` records it (where clients reach it, its state, its
listeners and HTTP URL) and the reads of the registry that the view, the controller step and the admin writes share.
Leases, the rows' other half, are `herd.cluster.leases`'."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

import psycopg

from herd.cluster.topics import Node as BaseNode
from herd.log.postgres import metadata_sql as q
from herd.log.postgres.errors import DatabaseError


class ClusterError(DatabaseError):
    """This node cannot join the cluster (its node.id is taken by a live process); one line for the operator."""


class NodeState(enum.StrEnum):
    ALIVE = "alive"
    SHUTTING_DOWN = "shutting_down"  # handing its partitions over; given no new ones
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class Node(BaseNode):
    """A node as herd_nodes records it: where clients reach it, its state, and the URL of its HTTP listener
    (herd.http.listener; None without one), through which the nodes' HTTP APIs ask each other."""

    state: NodeState = NodeState.ALIVE
    http_url: str | None = None
    # its advertised listeners, (name in upper case, host, port), from herd_nodes.listeners; empty for a node that
    # registered none (an older herd): its host and port then serve every listener
    listeners: tuple[tuple[str, str, int], ...] = ()

    def on(self, listener: str) -> Node | None:
        """This node with its address on `listener`, or None when it does not have that listener (Kafka leaves such
        a broker out of what a client of that listener is told)."""
        if not self.listeners:
            return self
        for name, host, port in self.listeners:
            if name == listener:
                return self if (host, port) == (self.host, self.port) else replace(self, host=host, port=port)
        return None


# node id -> (the node, the seconds its lease has left: <= 0 when it ran out), for the nodes not stopped
Nodes = dict[int, tuple[Node, float]]


async def read_nodes(conn: psycopg.AsyncConnection) -> Nodes:
    cursor = await conn.execute(q.NODES)
    return {
        r[0]: (Node(r[0], r[1], r[2], r[3], NodeState(r[4]), r[6], listeners(r[7])), float(r[5]))
        for r in await cursor.fetchall()
    }


def listeners(value: Any) -> tuple[tuple[str, str, int], ...]:
    """herd_nodes.listeners ({"NAME": [host, port]}, or NULL) as `Node.listeners`; anything else is ignored (the
    node's host and port then serve every listener)."""
    if not isinstance(value, dict):
        return ()
    try:
        return tuple((str(name).upper(), str(where[0]), int(where[1])) for name, where in value.items())
    except (TypeError, ValueError, IndexError):
        return ()


def candidates(nodes: Nodes, leaving: int | None = None) -> tuple[list[int], list[int]]:
    """(eligible, keep) for `placement.plan` from the nodes `read_nodes` gave: the live nodes that are alive, and
    those shutting down; `leaving` (a node handing its partitions over) is neither."""
    live = {n: node for n, (node, left) in nodes.items() if left > 0 and n != leaving}
    return (
        [n for n, node in live.items() if node.state is NodeState.ALIVE],
        [n for n, node in live.items() if node.state is NodeState.SHUTTING_DOWN],
    )


def alive(nodes: Nodes) -> list[int]:
    """The ids of the nodes whose lease holds and that are alive (not shutting down), in the order read."""
    return [n for n, (node, left) in nodes.items() if node.state is NodeState.ALIVE and left > 0]
