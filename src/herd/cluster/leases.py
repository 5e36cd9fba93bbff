"""This node's registration in `herd_nodes` and its lease.

A node registers as a new incarnation (a random id per registration, so a second process with the same node.id is
told apart and refused while the first one's lease holds); registering gives every partition still led under its
node id a new leader epoch, fencing whatever an earlier incarnation had in flight. The lease is renewed every
heartbeat interval on a connection of its own (a busy pool must not cost a node its lease) and judged in the
database's clock only (`clock_timestamp()`), so the machines' clocks never matter. A node that could not renew
within the session timeout by its own monotonic clock gives up every partition at once (`on_lost`), without waiting
to hear from the database, and registers again as a new incarnation when it can.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from herd.cluster import controller
from herd.cluster.database import DB_ERRORS, Trouble, connect, locked, notify
from herd.cluster.nodes import ClusterError, NodeState
from herd.log.postgres import metadata_sql as q

log = logging.getLogger(__name__)


class Lease:
    """This node's row in herd_nodes: registration, renewal, state changes and leaving. `on_lost()` is called on the
    loop when the lease is lost (not renewed within the session timeout, or refused by the database)."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        *,
        node_id: int,
        endpoint: tuple[str, int],
        rack: str | None,
        http_url: str | None,
        listeners: dict[str, tuple[str, int]] | None,
        session_s: float,
        heartbeat_s: float,
        where: str,
        on_lost: Callable[[], None],
    ) -> None:
        self._pool = pool
        self.node_id = node_id
        self.endpoint = endpoint
        self.rack = rack
        self.http_url = http_url
        self.listeners = listeners
        self.session_s = session_s
        self._heartbeat_s = heartbeat_s
        self._where = where
        self._on_lost = on_lost
        self.state = NodeState.STOPPED
        self.incarnation: uuid.UUID | None = None  # None: not registered (never, or the lease was lost)
        self.registrations = 0  # how many times this node registered
        self._deadline = 0.0  # loop time until which this node may act as a leader
        self._timer: asyncio.TimerHandle | None = None
        self._conn: psycopg.AsyncConnection | None = None  # the renewals' own

    async def register(self) -> None:
        """Take this node's row as a new incarnation, refusing if another live process holds it; every
        partition still led under this node id gets a new epoch (fencing whatever an earlier incarnation of it
        has in flight). Raises ClusterError or a database error."""
        incarnation = uuid.uuid4()
        sent = asyncio.get_running_loop().time()
        async with locked(self._pool, self.session_s) as conn:
            cursor = await conn.execute(q.LEASE_HOLDER, (self.node_id,))
            holder = await cursor.fetchone()
            if holder is not None:
                raise ClusterError(
                    f"node.id {self.node_id} is already registered in {self._where} by a live process at "
                    f"{holder[0]}:{holder[1]} (its lease runs for {holder[2]:.1f} s more): stop it, wait for its "
                    f"lease to run out, or give this node another node.id"
                )
            await conn.execute(
                q.REGISTER,
                (
                    self.node_id,
                    self.endpoint[0],
                    self.endpoint[1],
                    self.rack,
                    incarnation,
                    self.session_s * 1000,
                    self.http_url,
                    None
                    if not self.listeners
                    else Jsonb({name: [host, port] for name, (host, port) in self.listeners.items()}),
                ),
            )
            await conn.execute(q.NEW_EPOCHS_OF_NODE, (self.node_id,))
            await notify(conn, "nodes", self.node_id)
        self.incarnation = incarnation
        self.state = NodeState.ALIVE
        self.registrations += 1
        self._leased(sent)
        log.info("node %d registered at %s:%d in %s", self.node_id, *self.endpoint, self._where)

    def _leased(self, sent: float) -> None:
        """The lease was renewed by a statement sent at loop time `sent`: this node may lead until a session
        timeout after it (the database's lease began later, so it runs out later than this)."""
        self._deadline = sent + self.session_s
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(self._deadline, self._lost)

    def forget(self) -> None:
        self.incarnation = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def holding(self) -> bool:
        return self.incarnation is not None and asyncio.get_running_loop().time() < self._deadline

    def _lost(self) -> None:
        """No renewal within the session timeout (by this node's clock): lead nothing from now on."""
        if self.incarnation is None:
            return
        self.incarnation = None
        self._on_lost()

    async def renew_forever(self, on_registered_again: Callable[[], None]) -> None:
        """Renew every heartbeat interval; while not registered (the lease was lost), register again and call
        `on_registered_again()`."""
        trouble = Trouble(f"renewing the lease of node {self.node_id}")
        loop = asyncio.get_running_loop()
        while True:
            sent = loop.time()
            try:
                if self.incarnation is None:
                    if self.state is NodeState.ALIVE:  # not while leaving
                        await self.register()
                        on_registered_again()
                else:
                    async with asyncio.timeout(max(self._deadline - sent, self._heartbeat_s)):
                        await self._renew(sent)
                trouble.ok()
            except (ClusterError, *DB_ERRORS, TimeoutError) as e:
                trouble.failed(e, self._where)
            await asyncio.sleep(max(0.0, sent + self._heartbeat_s - loop.time()))

    async def _renew(self, sent: float) -> None:
        conn = await self._connection()
        try:
            cursor = await conn.execute(q.RENEW, (self.session_s * 1000, self.node_id, self.incarnation))
        except BaseException:
            self._conn = None
            await conn.close()
            raise
        if cursor.rowcount == 1:
            self._leased(sent)
            return
        log.warning(
            "node %d lost its lease (it ran out, or another process took node.id %d)", self.node_id, self.node_id
        )
        self._lost()

    async def _connection(self) -> psycopg.AsyncConnection:
        """The renewals' own connection (not the pool's: a pool busy with writes must not delay them)."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = await connect(self._pool)
        return self._conn

    async def set_state(self, state: NodeState) -> None:
        async with self._pool.connection(timeout=self.session_s) as conn, conn.transaction():
            await conn.execute(q.SET_STATE, (state.value, self.node_id, self.incarnation))
            await notify(conn, "nodes", self.node_id)

    async def leave(self, *, handover: bool) -> None:
        """Hand the partitions over (controlled) and mark this node stopped with its lease ended, in one
        transaction."""
        async with locked(self._pool, self.session_s) as conn:
            if handover:
                moved = await controller.place(conn, self.node_id, handing_over=True)
                log.info("node %d handed %d partitions over", self.node_id, moved)
            await conn.execute(q.LEAVE, (self.node_id, self.incarnation))
            await notify(conn, "nodes", self.node_id)

    async def close(self) -> None:
        """Forget the lease and close the renewals' connection."""
        self.state = NodeState.STOPPED
        self.forget()
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
