"""The admin writes of cluster mode: topics, their partitions and configs, the dynamic broker configs, the ACLs and
the SCRAM credentials. `write` runs one in a transaction under the metadata lock (so it sees what the database holds,
not what this node's view says, and no controller step or other change interleaves); each ends with a notification
that has every node read its view again. A database failure is a MetadataWriteError; the checks of a change raise
what they raise (TopicError with Kafka's codes for the topic checks)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from herd.cluster import controller
from herd.cluster.database import DB_ERRORS, locked, notify
from herd.cluster.metadata_view import ScramRows, read_scram
from herd.cluster.topics import (
    INTERNAL_TOPICS,
    ConfigChange,
    Topic,
    check_growth,
    check_new_topic,
    check_room,
    check_topic_configs,
    string_configs,
    unknown_topic,
)
from herd.log.postgres import metadata_sql as q
from herd.log.postgres.db import describe
from herd.log.postgres.errors import MetadataWriteError

log = logging.getLogger(__name__)

T = TypeVar("T")

Change = Callable[[psycopg.AsyncConnection], Awaitable[T]]


async def write(pool: AsyncConnectionPool, change: Change[T], what: str, *, timeout: float, where: str) -> T:
    """Run `change` in one transaction under the metadata lock; a database failure becomes MetadataWriteError
    ("Could not <what>: <why>", logged as an error)."""
    try:
        async with locked(pool, timeout) as conn:
            return await change(conn)
    except DB_ERRORS as e:
        log.error("could not %s: %s", what, describe(e, where))
        raise MetadataWriteError(f"Could not {what}: {describe(e, where)}") from None


async def create_topic(
    conn: psycopg.AsyncConnection,
    topic: Topic,
    configs: dict[str, str | None] | None,
    *,
    max_partitions: int,
    validate_only: bool,
    sender: int,
) -> None:
    """Check `topic` (made of `configs`) against what is stored and store it, each partition with a leader."""
    name, partitions = topic.name, len(topic.partitions)
    cursor = await conn.execute(q.TOPIC_NAMES)
    check_new_topic(name, partitions, configs, [r[0] for r in await cursor.fetchall()])
    check_room(partitions, await _count_partitions(conn), max_partitions)
    if validate_only:
        return
    await conn.execute(q.INSERT_TOPIC, (topic.topic_id, name, partitions, Jsonb(topic.configs)))
    await _insert_partitions(conn, topic.topic_id, name, 0, partitions)
    await notify(conn, "topics", sender)


async def add_partitions(
    conn: psycopg.AsyncConnection, name: str, total: int, *, max_partitions: int, validate_only: bool, sender: int
) -> None:
    """Grow the stored topic to `total` partitions, each with a leader."""
    cursor = await conn.execute(q.TOPIC_SIZE, (name,))
    row = await cursor.fetchone()
    if row is None:
        raise unknown_topic()
    topic_id, current = row
    check_growth(current, total)
    check_room(total - current, await _count_partitions(conn), max_partitions)
    if validate_only:
        return
    await conn.execute(q.GROW_TOPIC, (total, topic_id))
    await _insert_partitions(conn, topic_id, name, current, total)
    await notify(conn, "topics", sender)


async def delete_topic(conn: psycopg.AsyncConnection, name: str, *, sender: int) -> Topic:
    """Delete the stored topic: its partitions lose their leaders, with new epochs (their rows stay, without a
    topic, until the purge removes their batches). Returns the topic as it was stored."""
    cursor = await conn.execute(q.TOPIC_TO_DELETE, (name,))
    row = await cursor.fetchone()
    if row is None:
        raise unknown_topic()
    await conn.execute(q.UNLEAD_TOPIC, (row[0],))
    await conn.execute(q.DELETE_TOPIC, (row[0],))
    await notify(conn, "topics", sender)
    return Topic(name, row[0], dict(row[2]), [None] * row[1])  # type: ignore[list-item]


async def alter_topic_configs(
    conn: psycopg.AsyncConnection, name: str, change: ConfigChange, *, validate_only: bool, sender: int
) -> None:
    """Replace the stored topic's configs with `change(current)`, checked as the embedded Cluster checks them."""
    cursor = await conn.execute(q.TOPIC_CONFIGS, (name,))
    row = await cursor.fetchone()
    if row is None:
        raise unknown_topic()
    old = string_configs(row[1])
    configs = check_topic_configs(dict(change(dict(old))), internal=name in INTERNAL_TOPICS)
    if validate_only or configs == old:
        return
    await conn.execute(q.SET_TOPIC_CONFIGS, (Jsonb(configs), row[0]))
    await notify(conn, "topics", sender)


async def alter_broker_configs(
    conn: psycopg.AsyncConnection, resource: str, change: ConfigChange, *, validate_only: bool, sender: int
) -> None:
    """Replace the dynamic broker configs of `resource` with `change(current)`."""
    cursor = await conn.execute(q.BROKER_CONFIGS_OF, (resource,))
    row = await cursor.fetchone()
    configs = dict(change(string_configs(row[0]) if row else {}))
    if validate_only:
        return
    await conn.execute(q.SET_BROKER_CONFIGS, (resource, Jsonb(configs)))
    await notify(conn, "configs", sender)


async def change_acls(conn: psycopg.AsyncConnection, change: Change[T], *, sender: int) -> T:
    """Run `change` (herd.security.acl_store's statements on herd_acls) and tell every node."""
    outcome = await change(conn)
    await notify(conn, "acls", sender)
    return outcome


async def alter_scram_credentials(
    conn: psycopg.AsyncConnection,
    plan: Callable[[ScramRows], tuple[T, dict[tuple[str, str], Any]]],
    *,
    sender: int,
) -> T:
    """`plan(rows)`, given the stored rows, returns (its result, the changes: key -> a new row, or None to delete
    the row); they are written, and every node told if there were any."""
    result, changes = plan(await read_scram(conn))
    for (user, mechanism), row in changes.items():
        if row is None:
            await conn.execute(q.DELETE_SCRAM_CREDENTIAL, (user, mechanism))
        else:
            await conn.execute(q.SET_SCRAM_CREDENTIAL, (user, mechanism, *row))
    if changes:
        await notify(conn, "credentials", sender)
    return result


async def _insert_partitions(
    conn: psycopg.AsyncConnection, topic_id: uuid.UUID, name: str, start: int, end: int
) -> None:
    leaders = await controller.new_leaders(conn, name, end - start)
    await conn.execute(q.INSERT_PARTITIONS, (topic_id, list(range(start, end)), leaders))


async def _count_partitions(conn: psycopg.AsyncConnection) -> int:
    cursor = await conn.execute(q.COUNT_PARTITIONS)
    row = await cursor.fetchone()
    return int(row[0]) if row else 0
