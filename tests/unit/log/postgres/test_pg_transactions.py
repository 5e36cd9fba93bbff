"""Transactions in the PostgreSQL partition log against a real PostgreSQL server: the last stable offset against
the committed end (a marker not yet committed keeps its transaction unstable), the aborted-transaction index
stored with the ABORT marker's commit, a new leader rebuilding the ongoing transactions and epochs, retention
taking the index rows with the batches. Each test runs its own loop."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest
from batches import idempotent_batch

from herd.log.api import LogConfig, TransactionCoordinatorFencedError
from herd.log.batch import iter_headers
from herd.log.postgres import schema
from herd.log.postgres.db import open_pool
from herd.log.postgres.store import NotInMemoryError, PgLogStore, PgPartitionLog
from herd.server.apis import fetch

NODE = 1
NOW = 1_700_000_000_000
P, Q = 71, 72


@pytest.fixture(scope="module")
def pg_url(pg_url: str) -> str:
    async def migrate() -> None:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            await schema.migrate(conn, "the test database")

    asyncio.run(migrate())
    return pg_url


def sql(url: str, query: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def new_partition(url: str) -> int:
    topic_id = uuid.uuid4()
    sql(url, "INSERT INTO herd_topics (topic_id, name, partitions) VALUES (%s, %s, 1)", (topic_id, f"t-{topic_id}"))
    return sql(url, "INSERT INTO herd_partitions (topic_id, partition, leader, leader_epoch) VALUES (%s, 0, %s, 0) "
                    "RETURNING pid", (topic_id, NODE))[0][0]


@asynccontextmanager
async def store_on(url: str) -> AsyncIterator[PgLogStore]:
    pool = await open_pool(url, min_size=1, max_size=4)
    store = PgLogStore(pool, NODE)
    try:
        yield store
    finally:
        await store.close()
        await pool.close()


def open_log(store: PgLogStore, url: str, pid: int) -> PgPartitionLog:
    epoch, start, end = sql(url, "SELECT leader_epoch, log_start_offset, log_end_offset FROM herd_partitions "
                                 "WHERE pid = %s", (pid,))[0]
    return store.open_partition("t", 0, LogConfig(), pid=pid, leader_epoch=epoch, log_start_offset=start,
                                log_end_offset=end)


async def durable(log: PgPartitionLog, data: bytes | None = None, **marker: int) -> int:
    """Append `data` (or a marker: producer_id, producer_epoch, commit, coordinator_epoch) and wait for its
    commit; its base offset."""
    if data is not None:
        result = log.append(data, NOW)
    else:
        result = log.append_control(marker["producer_id"], marker["producer_epoch"], bool(marker["commit"]),
                                    marker["coordinator_epoch"], NOW)
    await log.wait_durable(result.last_offset + 1)
    return result.base_offset


def txn(pid: int, seq: int, epoch: int = 0) -> bytes:
    return idempotent_batch(pid, epoch, seq, 2, transactional=True)


def test_an_abort_is_stored_with_its_marker_and_the_lso_waits_for_the_markers_commit(pg_url):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            first_p = await durable(log, txn(P, 0))
            first_q = await durable(log, txn(Q, 0))
            assert (log.last_stable_offset, log.log_end_offset) == (first_p, 4)
            async with row_locked(pg_url, pid):  # the marker's commit waits on the partition's row
                result = log.append_control(P, 0, False, 2, NOW)
                await asyncio.sleep(0.05)
                assert log.log_end_offset == 4 and log.last_stable_offset == first_p  # not committed yet
                assert log.aborted_transactions(0, 5) == []
            await log.wait_durable(result.last_offset + 1)
            assert log.last_stable_offset == first_q
            assert log.aborted_transactions(first_q, 5) == [(P, first_p)]
            assert sql(pg_url, "SELECT last_offset, producer_id, first_offset, last_stable_offset "
                               "FROM herd_aborted_txns WHERE pid = %s", (pid,)) == [(4, P, 0, first_q)]
            assert sql(pg_url, "SELECT attributes FROM herd_batches WHERE pid = %s ORDER BY base_offset",
                       (pid,)) == [(0x10,), (0x10,), (0x30,)]

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_new_leader_rebuilds_the_open_transactions_and_reads_older_aborts_from_the_database(pg_url):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            old = open_log(store, pg_url, pid)
            first_p = await durable(old, txn(P, 0))
            await durable(old, producer_id=P, producer_epoch=0, commit=0, coordinator_epoch=3)
            first_q = await durable(old, txn(Q, 0))
            await durable(old, txn(P, 0, epoch=1))  # P's next transaction, at a new epoch
        sql(pg_url, "UPDATE herd_partitions SET leader_epoch = leader_epoch + 1 WHERE pid = %s", (pid,))
        async with store_on(pg_url) as store:
            new = open_log(store, pg_url, pid)
            await new.load_transactions()
            assert sorted(new.transactions.ongoing()) == [(P, 5), (Q, first_q)]
            assert new.last_stable_offset == first_q
            with pytest.raises(NotInMemoryError):
                new.aborted_transactions(0, 7)
            assert await new.aborted_transactions_async(0, 7) == [(P, first_p)]
            assert await new.aborted_transactions_async(3, 7) == []
            assert new.aborted_transactions(3, 7) == []  # the stored aborts end at 3: no query needed
            with pytest.raises(TransactionCoordinatorFencedError):  # the marker's coordinator epoch was read back
                new.append_control(P, 1, True, 2, NOW)
            await durable(new, producer_id=Q, producer_epoch=0, commit=0, coordinator_epoch=3)
            assert await new.aborted_transactions_async(0, 8) == [(P, first_p), (Q, first_q)]
            # Fetch's read_committed read of a remote log: up to P's open transaction (5), both aborts in range
            data, aborted = await fetch._read_committed_async(new, 0, 1 << 20, True)
            assert [h.base_offset for h in iter_headers(data)] == [0, 2, 3] and new.last_stable_offset == 5
            assert aborted == [(P, first_p), (Q, first_q)]
            # retention: DeleteRecords past the first abort takes its index row
            await new.delete_records_async(5)
            assert sql(pg_url, "SELECT producer_id FROM herd_aborted_txns WHERE pid = %s", (pid,)) == [(Q,)]

    asyncio.run(asyncio.wait_for(main(), 60))


@asynccontextmanager
async def row_locked(url: str, pid: int) -> AsyncIterator[psycopg.AsyncConnection]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("SELECT 1 FROM herd_partitions WHERE pid = %s FOR UPDATE", (pid,))
        yield conn
        await conn.commit()
