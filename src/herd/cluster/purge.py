"""Removing the data of deleted topics in cluster mode. Deleting a topic leaves its partition rows without a topic
(and without a leader) until their batches are removed here, in the background and in chunks, so that a node that
stops in between leaves the work findable; one node at a time does it (a session advisory lock; the others skip
the round)."""

from __future__ import annotations

import asyncio
import logging

import psycopg
from psycopg_pool import AsyncConnectionPool

from herd.cluster.database import DB_ERRORS, Trouble, wait
from herd.log.postgres import metadata_sql as q

log = logging.getLogger(__name__)

PURGE_CHUNK = 2000  # batches deleted per statement when a deleted topic's data is removed


async def purge_forever(
    pool: AsyncConnectionPool, wake: asyncio.Event, *, node_id: int, session_s: float, where: str
) -> None:
    """Remove the batches of deleted topics' partitions (rows without a topic), in chunks, then the rows: whenever
    `wake` is set, and every ten session timeouts."""
    trouble = Trouble(f"removing deleted topics' data on node {node_id}")
    while True:
        await wait(wake, session_s * 10)
        wake.clear()
        try:
            await purge(pool, session_s)
            trouble.ok()
        except DB_ERRORS as e:
            trouble.failed(e, where)


async def purge(pool: AsyncConnectionPool, session_s: float) -> None:
    """One node at a time (a session advisory lock; the others skip this round): every node wakes to purge at
    start and after deletions, and they would otherwise all delete the same rows."""
    async with pool.connection(timeout=session_s) as conn:
        cursor = await conn.execute(q.TRY_LOCK, (q.PURGE_LOCK,))
        row = await cursor.fetchone()
        await conn.commit()
        if not row or not row[0]:
            return
        try:
            await _purge_with(conn)
        finally:
            await conn.execute(q.UNLOCK, (q.PURGE_LOCK,))
            await conn.commit()


async def _purge_with(conn: psycopg.AsyncConnection) -> None:
    cursor = await conn.execute(q.DELETED_PIDS)
    pids = [r[0] for r in await cursor.fetchall()]
    await conn.commit()
    for pid in pids:
        while True:
            cursor = await conn.execute(q.PURGE_BATCHES, (pid, pid, PURGE_CHUNK))
            await conn.commit()
            if cursor.rowcount < PURGE_CHUNK:
                break
        await conn.execute(q.PURGE_PARTITION, (pid,))
        await conn.commit()
    if pids:
        log.info("removed the data of %d partitions of deleted topics", len(pids))
