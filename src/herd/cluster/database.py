"""What every part of cluster mode does with the database: the errors that mean "it failed, try again", a
transaction under the metadata lock, a notification to every node, and the logging of background work that
retries (the first failure and the recovery, not every retry). The SQL is `herd.log.postgres.metadata_sql`'s."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from herd.log.postgres import metadata_sql as q
from herd.log.postgres.db import describe

log = logging.getLogger(__name__)

DB_ERRORS = (psycopg.Error, PoolTimeout, OSError)


@asynccontextmanager
async def locked(pool: AsyncConnectionPool, session_s: float) -> AsyncIterator[psycopg.AsyncConnection]:
    """A connection of `pool` in one transaction under the metadata lock (no registration, controller step or
    admin change of any node runs meanwhile); the transaction commits when the block ends without an error.

    The lock is cluster-wide, so neither holding nor waiting may go on without a bound (`session_s`, the session
    timeout, bounds the wait for a connection too). A holder that sends nothing for `session_s` (its node stalled
    or cut off after the lock was granted, its next statement or COMMIT never arriving) has its session ended by
    PostgreSQL (idle_in_transaction_session_timeout), which releases the lock: PostgreSQL alone would keep it until
    TCP gave up on the node, hours later or never, and every other node's steps and changes would wait as long
    (the steps that move a lost node's partitions among them). Such a node has lost its lease by then anyway. A
    wait for a lock in the transaction gives up after twice `session_s` (lock_timeout: LockNotAvailable, a
    psycopg.Error), longer than a stalled holder can keep it."""
    async with pool.connection(timeout=session_s) as conn, conn.transaction():
        await conn.execute(q.LOCK_BOUNDS, (str(round(session_s * 1000)), str(round(session_s * 2000))))
        await conn.execute(q.LOCK, (q.METADATA_LOCK,))
        yield conn


async def notify(conn: psycopg.AsyncConnection, kind: str, sender: int) -> None:
    """Tell every node (at commit) that `kind` changed; `sender` does not need to hear it."""
    await conn.execute(q.NOTIFY, (q.METADATA_CHANNEL, f"{kind} {sender}"))


async def wait(event: asyncio.Event, seconds: float) -> bool:
    """Whether `event` was set within `seconds`. (Not asyncio.wait_for: on Python 3.11 it can swallow a
    cancellation that arrives as the event is set, and the task then never ends.)"""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


class Trouble:
    """Logs the first failure of a background activity and its recovery, not every retry."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.failing = False

    def failed(self, error: BaseException, where: str) -> None:
        if not self.failing:
            self.failing = True
            log.warning("%s failed (retrying): %s", self.what, describe(error, where))

    def ok(self) -> None:
        if self.failing:
            self.failing = False
            log.info("%s works again", self.what)


async def connect(pool: AsyncConnectionPool) -> psycopg.AsyncConnection:
    """A connection of its own (autocommit), outside the pool, to the pool's database."""
    kwargs = cast(dict[str, Any], pool.kwargs or {})  # the pool's connect_timeout (herd.log.postgres.db.open_pool)
    return await psycopg.AsyncConnection.connect(str(pool.conninfo), autocommit=True, **kwargs)
