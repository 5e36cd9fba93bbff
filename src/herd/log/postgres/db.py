"""Connections to the cluster's PostgreSQL, and what a user is told when they fail.

Every node reaches the database through one psycopg 3 `AsyncConnectionPool`. Before the pool is opened, one
plain connection is made with a short timeout, so that a wrong address, a wrong password or a missing database
ends the start with one line (`DatabaseError`) naming the URL without its password, instead of a pool that
retries in the background for ever.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pgerrors
from psycopg_pool import AsyncConnectionPool

from herd.log.postgres.errors import DatabaseError

__all__ = ["DatabaseError", "check_connect", "describe", "open_pool", "redact"]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5


def redact(url: str) -> str:
    """`url` without its password (postgresql://user:secret@host/db -> postgresql://user@host/db). A
    key=value connection string has its password=... item dropped."""
    if "://" not in url:
        return " ".join(item for item in url.split() if not item.lower().startswith("password="))
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hostinfo}" if user else hostinfo
    query = "&".join(q for q in parts.query.split("&") if q and not q.lower().startswith("password="))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def describe(error: BaseException, url: str) -> str:
    """One line saying why `url` could not be used."""
    where = f"PostgreSQL at {redact(url)}"
    if isinstance(error, pgerrors.InvalidPassword):
        return f"{where} refused the password (wrong password, or no such user)"
    if isinstance(error, pgerrors.InvalidAuthorizationSpecification):
        return f"{where} refused the connection: {_first_line(error)}"
    if isinstance(error, pgerrors.InsufficientPrivilege):
        return f"{where}: the user lacks a privilege herd needs ({_first_line(error)}); see docs/cluster.md"
    if isinstance(error, pgerrors.InvalidCatalogName):
        return f"{where}: {_first_line(error)} (create it first: createdb)"
    if isinstance(error, psycopg.OperationalError):
        return f"cannot connect to {where}: {_first_line(error)}"
    return f"{where}: {_first_line(error)}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    # libpq prefixes every attempt with 'connection failed: connection to server at ... failed:'
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = lines[-1] if lines else text
    line = re.sub(r"^connection failed: connection to server at .*? failed:\s*", "", line)
    return re.sub(r"^(FATAL|ERROR):\s*", "", line).strip()


async def check_connect(url: str) -> None:
    """Connect once, or raise DatabaseError with one line."""
    try:
        conn = await psycopg.AsyncConnection.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)
    except psycopg.Error as e:
        raise DatabaseError(describe(e, url)) from None
    await conn.close()


async def open_pool(url: str, *, min_size: int = 2, max_size: int = 16, name: str = "herd") -> AsyncConnectionPool:
    """A pool of autocommit-off connections to `url`, opened and filled to `min_size`; raises DatabaseError."""
    await check_connect(url)
    pool = AsyncConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        name=name,
        open=False,
        kwargs={"connect_timeout": CONNECT_TIMEOUT_S},
        reconnect_timeout=float("inf"),
    )
    try:
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 2)
    except Exception as e:  # PoolTimeout, or the server went away between the check and now
        await pool.close()
        raise DatabaseError(describe(e, url)) from None
    return pool
