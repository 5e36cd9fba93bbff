"""The PostgreSQL partition log against a real PostgreSQL server: commits fenced by the leader epoch, reads that
never see uncommitted data, database failures and reloads, ListOffsets, retention, compaction, large values and
the producer state a new leader rebuilds, transactions (the last stable offset against the committed end, the
aborted-transaction index stored with the ABORT marker's commit, what a new leader rebuilds of them). Each test
runs its own loop (`asyncio.run`).

`pg_url` gives a fresh, migrated database for the module, on the PostgreSQL the test session started."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import psycopg
import pytest
from batches import idempotent_batch
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from herd.coordinator.records import Record
from herd.log.api import (
    KafkaStorageError,
    LogConfig,
    NotLeaderError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RemotePartitionLog,
    TransactionCoordinatorFencedError,
)
from herd.log.batch import iter_headers
from herd.log.fs import MemoryFileSystem
from herd.log.postgres import schema
from herd.log.postgres import sql as statements
from herd.log.postgres.db import open_pool
from herd.log.postgres.store import MAX_COMMIT_BYTES, NotInMemoryError, PgLogStore, PgPartitionLog
from herd.log.producer_state import ProducerStates
from herd.log.segments import SegmentLog
from herd.runtime.batches import decode_batches, encode_batch
from herd.server.apis import fetch

NODE = 1
NOW = 1_700_000_000_000


@pytest.fixture(scope="module")
def pg_url(pg_url: str) -> str:
    """The module's fresh database (tests/pgcluster.py's `pg_url`, on the PostgreSQL the test session started),
    with herd's schema."""

    async def migrate() -> None:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            await schema.migrate(conn, "the test database")

    asyncio.run(migrate())
    return pg_url


# -- helpers -----------------------------------------------------------------------------------------------------


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 60))


def sql(url: str, query: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def new_partition(url: str, *, leader: int = NODE, epoch: int = 0) -> int:
    """A topic of one partition led by `leader` at `epoch`; its pid."""
    topic_id = uuid.uuid4()
    sql(url, "INSERT INTO herd_topics (topic_id, name, partitions) VALUES (%s, %s, 1)", (topic_id, f"t-{topic_id}"))
    return sql(
        url,
        "INSERT INTO herd_partitions (topic_id, partition, leader, leader_epoch) VALUES (%s, 0, %s, %s) RETURNING pid",
        (topic_id, leader, epoch),
    )[0][0]


@asynccontextmanager
async def store_on(url: str) -> AsyncIterator[PgLogStore]:
    pool = await open_pool(url, min_size=1, max_size=4)
    store = PgLogStore(pool, NODE)
    try:
        yield store
    finally:
        await store.close()
        await pool.close()


def open_log(store: PgLogStore, url: str, pid: int, config: LogConfig | None = None) -> PgPartitionLog:
    """Open the partition as a node that just read its row (as the cluster does on taking it over)."""
    leader, epoch, start, end = sql(
        url, "SELECT leader, leader_epoch, log_start_offset, log_end_offset FROM herd_partitions WHERE pid = %s", (pid,)
    )[0]
    assert leader == NODE
    return store.open_partition(
        "t", 0, config or LogConfig(), pid=pid, leader_epoch=epoch, log_start_offset=start, log_end_offset=end
    )


def batch(
    values: list[bytes],
    *,
    timestamps: list[int] | None = None,
    producer: tuple[int, int, int] = (-1, -1, -1),
    key: bytes | None = b"k",
    codec: int = 0,
) -> bytes:
    """One batch as kafka-python's producer builds it; `producer` is (id, epoch, base sequence)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        batch_size=1 << 26,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=NOW + i if timestamps is None else timestamps[i], key=key, value=value, headers=[])
    return bytes(builder.build())


def decoded(data: bytes) -> list[tuple[int, int, bytes | None]]:
    """(offset, timestamp, value) of every record, each batch's CRC checked by kafka-python."""
    out = []
    for header in iter_headers(data):
        one = DefaultRecordBatch(bytearray(data[header.position : header.end]))
        assert one.validate_crc()
        out.extend((r.offset, r.timestamp, r.value) for r in one)
    return out


def sizes_in_db(url: str, pid: int) -> tuple[int, int]:
    """(bytes stored, bytes at or above the cleaner offset), as the log keeps them in memory."""
    return sql(
        url,
        "SELECT coalesce(sum(b.size), 0), coalesce(sum(b.size) FILTER (WHERE b.last_offset >= "
        "p.cleaner_offset), 0) FROM herd_partitions p LEFT JOIN herd_batches b ON b.pid = p.pid "
        "WHERE p.pid = %s GROUP BY p.cleaner_offset",
        (pid,),
    )[0]


def values(data: bytes) -> list[bytes | None]:
    """The value of every record, in offset order (`decoded`)."""
    return [v for _, _, v in decoded(data)]


def stored_rows(url: str, pid: int) -> list[tuple[int, int, int]]:
    return sql(
        url,
        "SELECT base_offset, last_offset, leader_epoch FROM herd_batches WHERE pid = %s ORDER BY base_offset",
        (pid,),
    )


async def append(partition_log: PgPartitionLog, data: bytes, now_ms: int = NOW) -> int:
    result = partition_log.append(data, now_ms)
    await partition_log.wait_durable(result.last_offset + 1)
    return result.base_offset


async def lock_waited_for(url: str) -> None:
    """Return once a session of the test's database waits for a lock (a statement of the log blocked on the
    partition's row, which `row_locked` holds)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(1000):
            cursor = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if (await cursor.fetchone())[0]:
                return
            await asyncio.sleep(0.005)
    raise AssertionError("no statement waits for the partition's row")


async def fail_a_commit(url: str, partition_log: PgPartitionLog) -> None:
    """Terminate every other connection to the test's database, so that the store's pool finds its connections
    dead, and append: the commit fails, and the log with it (KafkaStorageError)."""
    sql(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    result = partition_log.append(batch([b"lost"]), NOW)
    with pytest.raises(KafkaStorageError):
        await partition_log.wait_durable(result.last_offset + 1)


async def once_connected(run: Callable[..., Awaitable[object]], *args: object, **kwargs: object) -> object:
    """`run(*args, **kwargs)` (a log's `_run`) after the connections were cut: tried again, a tenth of a second
    apart, while the pool replaces its dead connections, as the runtime's backoff would; the last try raises."""
    for _ in range(10):
        try:
            return await run(*args, **kwargs)
        except KafkaStorageError:
            await asyncio.sleep(0.1)
    return await run(*args, **kwargs)


@asynccontextmanager
async def row_locked(url: str, pid: int) -> AsyncIterator[psycopg.AsyncConnection]:
    """Another session holding the partition's row lock: commits to it wait until the block ends."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("SELECT 1 FROM herd_partitions WHERE pid = %s FOR UPDATE", (pid,))
        yield conn
        await conn.commit()


def test_the_postgresql_log_has_every_method_of_the_remote_partition_log_protocol():
    wanted = {name for name in dir(RemotePartitionLog) if not name.startswith("_")}
    assert wanted <= set(dir(PgPartitionLog))


# -- appending, committing, reading ------------------------------------------------------------------------------


def test_batches_round_trip_with_offsets_and_the_leader_epoch_stamped_and_their_crc_intact(pg_url):
    pid = new_partition(pg_url, epoch=7)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            first = log.append(batch([b"a", b"b"]), NOW)
            second = log.append(batch([b"c"]) + batch([b"d", b"e", b"f"], codec=1), NOW)  # two batches, one gzip
            assert (first.base_offset, first.last_offset, second.base_offset, second.last_offset) == (0, 1, 2, 5)
            assert log.next_offset == 6
            await log.wait_durable(6)
            assert log.log_end_offset == log.flushed_offset == 6
            from_cache = log.read(0, 1 << 20)
        assert stored_rows(pg_url, pid) == [(0, 1, 7), (2, 2, 7), (3, 5, 7)]
        assert sql(pg_url, "SELECT log_end_offset FROM herd_partitions WHERE pid = %s", (pid,)) == [(6,)]
        async with store_on(pg_url) as store:  # a new leader's empty cache: everything comes from the database
            log = open_log(store, pg_url, pid)
            with pytest.raises(NotInMemoryError):
                log.read(0, 1 << 20)
            from_db = await log.read_async(0, 1 << 20)
            assert from_db == from_cache
            assert values(from_db) == [b"a", b"b", b"c", b"d", b"e", b"f"]
            assert [o for o, _, _ in decoded(from_db)] == list(range(6))
            assert all(h.partition_leader_epoch == 7 for h in iter_headers(from_db))
            # the batch holding an offset, KIP-74's first batch, max_bytes cuts whole batches
            assert [o for o, _, _ in decoded(await log.read_async(4, 1 << 20))] == [3, 4, 5]
            assert [o for o, _, _ in decoded(await log.read_async(0, 1))] == [0, 1]
            assert await log.read_async(0, 1, min_one=False) == b""
            sizes = [h.size for h in iter_headers(from_db)]
            assert [o for o, _, _ in decoded(await log.read_async(0, sizes[0] + sizes[1]))] == [0, 1, 2]
            assert await log.read_async(6, 1 << 20) == b""
            with pytest.raises(OffsetOutOfRangeError):
                await log.read_async(7, 1 << 20)
            assert await append(log, batch([b"g"])) == 6  # offsets go on from the stored end
            assert values(log.read(6, 100)) == [b"g"]

    run(main)


def test_log_append_time_stamps_every_batch_of_a_request_with_offsets_epoch_and_crc_intact(pg_url):
    pid = new_partition(pg_url, epoch=3)
    later = NOW + 5_000

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, LogConfig(message_timestamp_type="LogAppendTime"))
            result = log.append(batch([b"a", b"b"]) + batch([b"c"], codec=1), later)
            assert (result.base_offset, result.last_offset, result.log_append_time) == (0, 2, later)
            assert result.durable_end == 3  # what its caller waits for before it answers
            await log.wait_durable(result.durable_end)
        async with store_on(pg_url) as store:
            data = await open_log(store, pg_url, pid).read_async(0, 1 << 20)
        assert decoded(data) == [(0, later, b"a"), (1, later, b"b"), (2, later, b"c")]
        assert [h.partition_leader_epoch for h in iter_headers(data)] == [3, 3]

    run(main)


def test_a_read_never_sees_a_batch_whose_transaction_has_not_returned(pg_url):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            await append(log, batch([b"committed"]))
            async with row_locked(pg_url, pid):
                result = log.append(batch([b"pending"]), NOW)
                durable = asyncio.ensure_future(log.wait_durable(result.last_offset + 1))
                await lock_waited_for(pg_url)  # the commit is sent and waits for the lock
                assert not durable.done()
                assert log.log_end_offset == 1 and log.next_offset == 2
                assert values(await log.read_async(0, 1 << 20)) == [b"committed"]
                assert await log.read_async(1, 1 << 20) == b""
                with pytest.raises(OffsetOutOfRangeError):
                    await log.read_async(2, 1 << 20)
                assert sql(pg_url, "SELECT count(*) FROM herd_batches WHERE pid = %s", (pid,)) == [(1,)]
            await durable
            assert values(log.read(0, 1 << 20)) == [b"committed", b"pending"]

    run(main)


def test_commits_group_everything_pending_into_one_transaction(pg_url):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            async with row_locked(pg_url, pid):
                first = log.append(batch([b"0"]), NOW)
                await lock_waited_for(pg_url)  # the first commit is in flight, waiting for the lock
                ends = [log.append(batch([b"%d" % i]), NOW).last_offset + 1 for i in range(1, 50)]
            await asyncio.gather(log.wait_durable(first.last_offset + 1), *(log.wait_durable(e) for e in ends))
            assert log.commits == 2
            assert len(stored_rows(pg_url, pid)) == 50

    run(main)


def test_a_transaction_carries_at_most_max_commit_bytes(pg_url):
    """Pending batches beyond MAX_COMMIT_BYTES go in the next transaction (one batch always goes, however large)."""
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            big = os.urandom(MAX_COMMIT_BYTES * 2 // 3)
            ends = [log.append(batch([big]), NOW).last_offset + 1 for _ in range(3)]  # before the loop runs
            await asyncio.gather(*(log.wait_durable(end) for end in ends))
            assert log.commits == 3
        assert [row[:2] for row in stored_rows(pg_url, pid)] == [(0, 0), (1, 1), (2, 2)]

    run(main)


# -- fencing and failures ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "waits_for_the_row",
    [False, True],
    ids=["epoch bumped before the commit", "leader moved while the commit waits for the row"],
)
def test_a_taken_over_partition_fences_the_next_commit_and_nothing_more_is_stored(pg_url, waits_for_the_row):
    pid = new_partition(pg_url, epoch=3)
    takeover = (
        "UPDATE herd_partitions SET leader = 2, leader_epoch = 4 WHERE pid = %s"
        if waits_for_the_row
        else "UPDATE herd_partitions SET leader_epoch = leader_epoch + 1 WHERE pid = %s"
    )

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            await append(log, batch([b"a"]))
            if waits_for_the_row:
                async with row_locked(pg_url, pid) as controller:  # the controller's transaction moves the leader
                    result = log.append(batch([b"b"]), NOW)
                    durable = asyncio.ensure_future(log.wait_durable(result.last_offset + 1))
                    await lock_waited_for(pg_url)
                    await controller.execute(takeover, (pid,))
            else:
                sql(pg_url, takeover, (pid,))
                result = log.append(batch([b"b"]), NOW)
                durable = asyncio.ensure_future(log.wait_durable(result.last_offset + 1))
            with pytest.raises(NotLeaderError):
                await durable
            assert log.failure == "not leader"
            with pytest.raises(NotLeaderError):
                log.append(batch([b"c"]), NOW)
            with pytest.raises(NotLeaderError):
                await log.read_async(0, 100)
            with pytest.raises(NotLeaderError):
                await log.reload()
        assert stored_rows(pg_url, pid) == [(0, 0, 3)]
        assert sql(pg_url, "SELECT log_end_offset FROM herd_partitions WHERE pid = %s", (pid,)) == [(1,)]

    run(main)


@pytest.mark.parametrize(
    "every_connection",
    [False, True],
    ids=["the commit's connection, while it waits for the row", "every connection, before it"],
)
def test_a_commit_whose_connection_is_cut_fails_retriably_and_reload_goes_on_without_duplicate_offsets(
    pg_url, every_connection
):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            await append(log, batch([b"a", b"b"]))
            if every_connection:
                await fail_a_commit(pg_url, log)
            else:
                async with row_locked(pg_url, pid) as locker:
                    result = log.append(batch([b"lost"]), NOW)
                    durable = asyncio.ensure_future(log.wait_durable(result.last_offset + 1))
                    await lock_waited_for(pg_url)
                    killed = await (
                        await locker.execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND query LIKE '%%INSERT INTO herd_batches%%' AND pid <> pg_backend_pid()"
                        )
                    ).fetchall()
                    assert killed == [(True,)]
                    with pytest.raises(KafkaStorageError):
                        await durable
            assert log.failure is not None and log.failure.startswith("database error")
            with pytest.raises(KafkaStorageError):
                log.append(batch([b"refused"]), NOW)
            assert values(log.read(0, 1 << 20)) == [b"a", b"b"]  # committed data stays readable
            await once_connected(log.reload)  # as the runtime does, with a backoff
            assert log.failure is None and log.log_end_offset == log.next_offset == 2
            assert await append(log, batch([b"c"])) == 2
            assert values(await log.read_async(0, 1 << 20)) == [b"a", b"b", b"c"]
        assert stored_rows(pg_url, pid) == [(0, 1, 0), (2, 2, 0)]

    run(main)


def test_a_reload_that_waited_for_the_database_while_the_log_was_closed_does_not_revive_it(pg_url):
    """During an outage longer than the lease the runtime's reload of a failed log waits for the database while
    the node gives the partition up (the log is closed); when the database answers, the reload must leave the
    log closed, or the runtime rebuilds the producer state from a log this node no longer leads, over the
    state of the one it leads now (issue 30)."""
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            await append(log, batch([b"a"]))
            await fail_a_commit(pg_url, log)
            answers = asyncio.Event()  # the database is back
            run = log._run

            async def once_the_database_answers(*args, **kwargs):  # type: ignore[no-untyped-def]
                await answers.wait()
                return await once_connected(run, *args, **kwargs)

            log._run = once_the_database_answers  # type: ignore[method-assign]
            reloading = asyncio.ensure_future(log.reload())
            await asyncio.sleep(0.01)
            await store.close_partition(log, flush=False)  # the lease ran out: the partition is given up
            answers.set()
            with pytest.raises(NotLeaderError):
                await reloading
            assert log.failure == "closed"
            with pytest.raises(NotLeaderError):
                await log.producer_state()

    run(main)


def test_resume_reloads_a_failed_log_and_rebuilds_its_producers_but_not_from_a_log_let_go_meanwhile(pg_url):
    """`resume` (the server's and the runtime's one recovery call, PartitionLog.resume) reloads a log whose commit
    failed and rebuilds its producers' state from the stored batches; a log let go while the rebuild read them
    (the node's lease ran out: it may take the partition back with a new log, which rebuilds its own state)
    raises NotLeaderError and restores nothing, so the new log's state is never overwritten (issue 30)."""
    pid = new_partition(pg_url)

    async def main() -> None:
        producers = ProducerStates(clock=lambda: NOW)  # the batches' timestamps: not expired
        async with store_on(pg_url) as store:
            store.producers = producers
            for let_go in (False, True):
                log = open_log(store, pg_url, pid)
                end = log.log_end_offset
                await append(log, batch([b"a"], producer=(7, 0, end)))
                await fail_a_commit(pg_url, log)
                producers.restore("t", 0, [], now_ms=NOW)  # what a new log of the partition would have restored
                reading, answers = asyncio.Event(), asyncio.Event()
                run = log._run

                async def once_the_database_answers(statement, *args, **kwargs):  # type: ignore[no-untyped-def]
                    if statement is statements.PRODUCERS and not reading.is_set():
                        reading.set()
                        await answers.wait()
                    return await once_connected(run, statement, *args, **kwargs)

                log._run = once_the_database_answers  # type: ignore[method-assign]
                resuming = asyncio.ensure_future(log.resume())
                await reading.wait()
                assert producers.restoring  # no client append while the state is read
                if not let_go:
                    answers.set()
                    await resuming
                    assert log.failure is None
                    assert [(b.producer_id, b.base_sequence) for b in producers.batches("t", 0)] == [(7, end)]
                    await store.close_partition(log, flush=False)
                    continue
                closing = asyncio.ensure_future(store.close_partition(log, flush=False))
                await asyncio.sleep(0)  # its closing begins
                answers.set()
                with pytest.raises(NotLeaderError):
                    await resuming
                await closing
                assert producers.batches("t", 0) == [] and not producers.restoring

    run(main)


def test_resume_whose_producer_state_cannot_be_read_leaves_the_log_failed_until_the_next_resume(pg_url):
    """A reload that succeeds and a rebuild that fails on a database error: the log stays failed (a client's append
    refused, retriable) instead of taking appends without its producers' state; the next resume goes on."""
    pid = new_partition(pg_url)

    async def main() -> None:
        producers = ProducerStates(clock=lambda: NOW)
        async with store_on(pg_url) as store:
            store.producers = producers
            log = open_log(store, pg_url, pid)
            await append(log, batch([b"a"], producer=(7, 0, 0)))
            await fail_a_commit(pg_url, log)
            run = log._run
            refused = []

            async def producers_unreadable_once(statement, *args, **kwargs):  # type: ignore[no-untyped-def]
                if statement is statements.PRODUCERS and not refused:
                    refused.append(statement)
                    raise KafkaStorageError("t-0: the connection is closed")
                return await once_connected(run, statement, *args, **kwargs)

            log._run = producers_unreadable_once  # type: ignore[method-assign]
            with pytest.raises(KafkaStorageError):
                await log.resume()
            assert log.failure is not None and log.failure.startswith("database error")
            assert not producers.restoring
            with pytest.raises(KafkaStorageError):
                log.append(idempotent_batch(7, 0, 0, 1), NOW, client=True)  # a retry: not appended again
            await log.resume()
            assert log.failure is None
            retry = log.append(idempotent_batch(7, 0, 0, 1), NOW, client=True)
            assert (retry.base_offset, log.next_offset) == (0, 1)  # the stored batch, recognised

    run(main)


def test_closing_with_flush_commits_what_is_pending_and_without_it_drops_it(pg_url):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            result = log.append(batch([b"handed over"]), NOW)
            await store.close_partition(log, flush=True)
            await log.wait_durable(result.last_offset + 1)
            with pytest.raises(NotLeaderError):
                log.append(batch([b"late"]), NOW)
            log = open_log(store, pg_url, pid)
            async with row_locked(pg_url, pid):
                sent = log.append(batch([b"in flight"]), NOW)
                await lock_waited_for(pg_url)
                unsent = log.append(batch([b"never sent"]), NOW)
                waits = [asyncio.ensure_future(log.wait_durable(r.last_offset + 1)) for r in (sent, unsent)]
                closing = asyncio.ensure_future(store.close_partition(log, flush=False))
                await asyncio.sleep(0.1)
                with pytest.raises(NotLeaderError):
                    await waits[1]
            await closing
            await waits[0]  # the transaction in flight finished and committed
        assert [r[:2] for r in stored_rows(pg_url, pid)] == [(0, 0), (1, 1)]

    run(main)


# -- ListOffsets ---------------------------------------------------------------------------------------------------


def test_offsets_by_timestamp_and_the_max_timestamp_are_exact_to_the_record_as_on_segment_files(pg_url):
    pid = new_partition(pg_url)
    requests = [
        batch([b"x"] * 3, timestamps=[NOW + 10, NOW + 5, NOW + 30]),
        batch([b"y"] * 2, timestamps=[NOW + 20, NOW + 50], codec=1),
        batch([b"z"] * 4, timestamps=[NOW + 50, NOW + 40, NOW + 60, NOW + 60]),
        batch([b"w"] * 2, timestamps=[NOW + 1, NOW + 60]),
    ]
    segments = SegmentLog.open(MemoryFileSystem(), "/p", "t", 0, LogConfig())
    for data in requests:
        segments.append(data, NOW)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            for data in requests:
                await append(log, data)
            for target in (NOW - 1, NOW + 5, NOW + 6, NOW + 25, NOW + 45, NOW + 50, NOW + 55, NOW + 60, NOW + 61):
                assert await log.offset_for_timestamp_async(target) == segments.offset_for_timestamp(target), target
            found = await log.max_timestamp_async()
            assert found == segments.max_timestamp()
            assert (found.offset, found.timestamp) == (7, NOW + 60)

    run(main)


# -- retention and compaction --------------------------------------------------------------------------------------


def test_retention_by_time_moves_the_log_start_past_expired_batches_and_deletes_their_rows(pg_url):
    pid = new_partition(pg_url)
    day = 86_400_000

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, LogConfig(retention_ms=day))
            await append(log, batch([b"old"], timestamps=[NOW - 3 * day]))
            await append(log, batch([b"old", b"old"], timestamps=[NOW - 2 * day, NOW - 2 * day]))
            await append(log, batch([b"new"], timestamps=[NOW - 1000]))
            await append(log, batch([b"older again"], timestamps=[NOW - 5 * day]))  # after a live one: kept
            assert await log.apply_retention_async(NOW) == 2
            assert log.log_start_offset == 3
            with pytest.raises(OffsetOutOfRangeError):
                await log.read_async(0, 100)
            assert values(await log.read_async(3, 1 << 20)) == [b"new", b"older again"]
            assert await log.apply_retention_async(NOW) == 0
        assert [r[0] for r in stored_rows(pg_url, pid)] == [3, 4]
        assert sql(pg_url, "SELECT log_start_offset FROM herd_partitions WHERE pid = %s", (pid,)) == [(3,)]

    run(main)


def test_retention_by_bytes_deletes_the_oldest_batches_while_what_stays_reaches_the_limit(pg_url):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            data = batch([b"v" * 1000])
            log = open_log(store, pg_url, pid, LogConfig(retention_bytes=3 * len(data) + 10, retention_ms=-1))
            for _ in range(5):
                await append(log, data)
            log.config = LogConfig(retention_bytes=0, retention_ms=0, cleanup_policy="compact")
            assert await log.apply_retention_async(NOW) == 0  # compact only: retention deletes nothing
            log.config = LogConfig(retention_bytes=3 * len(data) + 10, retention_ms=-1)
            # as Kafka: a batch goes only if what stays is still at least retention.bytes
            assert await log.apply_retention_async(NOW) == 1
            log.config = LogConfig(retention_bytes=3 * len(data), retention_ms=-1)
            assert await log.apply_retention_async(NOW) == 1
            assert log.log_start_offset == 2
        assert [r[0] for r in stored_rows(pg_url, pid)] == [2, 3, 4]
        assert sql(pg_url, "SELECT log_start_offset FROM herd_partitions WHERE pid = %s", (pid,)) == [(2,)]

    run(main)


@pytest.mark.parametrize("maintenance", ["retention", "compaction"])
def test_retention_and_compaction_of_a_taken_over_partition_are_fenced_and_change_no_row(pg_url, maintenance):
    pid = new_partition(pg_url, epoch=3)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, LogConfig(retention_ms=1000, cleanup_policy="compact,delete"))
            for _ in range(3):
                await append(log, encode_batch([Record(b"k", b"v")], NOW - 10_000))
            sql(pg_url, "UPDATE herd_partitions SET leader_epoch = 4 WHERE pid = %s", (pid,))
            before = sql(pg_url, "SELECT * FROM herd_batches WHERE pid = %s ORDER BY base_offset", (pid,))
            with pytest.raises(NotLeaderError):
                if maintenance == "retention":
                    await log.apply_retention_async(NOW)
                else:
                    await log.compact(0, NOW, force=True)
            assert log.failure == "not leader" and log.log_start_offset == 0
            with pytest.raises(NotLeaderError):
                log.append(batch([b"late"]), NOW)
        assert sql(pg_url, "SELECT * FROM herd_batches WHERE pid = %s ORDER BY base_offset", (pid,)) == before
        assert len(before) == 3
        assert sql(pg_url, "SELECT log_start_offset, cleaner_offset FROM herd_partitions WHERE pid = %s", (pid,)) == [
            (0, 0)
        ]

    run(main)


def test_delete_records_moves_the_stored_start_deletes_rows_wholly_below_and_a_new_leader_keeps_it(pg_url):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            for i in range(4):
                await append(log, batch([b"%d" % i, b"%d" % i]))  # batches 0-1, 2-3, 4-5, 6-7
            assert await log.delete_records_async(3) == 3  # inside the second batch, which stays whole
            assert await log.delete_records_async(1) == 3  # below the start: nothing changes
            with pytest.raises(OffsetOutOfRangeError):
                await log.read_async(2, 1000)
            assert [o for o, _, _ in decoded(await log.read_async(3, 1000))][:2] == [2, 3]
            appended = log.append(batch([b"x"]), NOW)
            assert appended.log_start_offset == 3
            await log.wait_durable(appended.last_offset + 1)
            with pytest.raises(NotInMemoryError):
                log.delete_records(4)
        assert [r[0] for r in stored_rows(pg_url, pid)] == [2, 4, 6, 8]
        async with store_on(pg_url) as store:  # a restart, or another node taking the partition over
            again = open_log(store, pg_url, pid)
            assert again.log_start_offset == 3
            with pytest.raises(OffsetOutOfRangeError):
                await again.read_async(0, 1000)

    run(main)


def test_delete_records_to_the_high_watermark_keeps_appends_not_yet_committed(pg_url):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            await append(log, batch([b"a", b"b"]))
            pending = log.append(batch([b"c"]), NOW)  # committed by the commit task, after this
            assert await log.delete_records_async(-1) == 2  # the high watermark: the committed end
            await log.wait_durable(pending.last_offset + 1)
            assert (log.log_start_offset, log.log_end_offset) == (2, 3)
            assert values(await log.read_async(2, 1000)) == [b"c"]
            with pytest.raises(OffsetOutOfRangeError, match="larger than the high watermark 3"):
                await log.delete_records_async(4)

    run(main)


@pytest.mark.parametrize(("policy", "offset"), [("compact", 1), ("delete", 5), ("delete", -2)])
def test_refused_delete_records_change_no_row(pg_url, policy, offset):
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, LogConfig(cleanup_policy=policy))
            await append(log, encode_batch([Record(b"k", b"v"), Record(b"k", b"w")], NOW))
            error = PolicyViolationError if policy == "compact" else OffsetOutOfRangeError
            with pytest.raises(error):
                await log.delete_records_async(offset)
            assert log.log_start_offset == 0
        assert sql(pg_url, "SELECT log_start_offset FROM herd_partitions WHERE pid = %s", (pid,)) == [(0,)]
        assert len(stored_rows(pg_url, pid)) == 1

    run(main)


def test_delete_records_of_a_taken_over_partition_is_fenced(pg_url):
    pid = new_partition(pg_url, epoch=2)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            await append(log, batch([b"a", b"b"]))
            sql(pg_url, "UPDATE herd_partitions SET leader_epoch = 3 WHERE pid = %s", (pid,))
            with pytest.raises(NotLeaderError):
                await log.delete_records_async(1)
            assert log.log_start_offset == 0
        assert sql(pg_url, "SELECT log_start_offset FROM herd_partitions WHERE pid = %s", (pid,)) == [(0,)]

    run(main)


def test_compaction_keeps_the_last_record_of_every_key_at_its_offset_and_drops_old_tombstones(pg_url):
    pid = new_partition(pg_url)
    hour = 3_600_000

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, LogConfig(cleanup_policy="compact"))
            await append(log, encode_batch([Record(b"a", b"a1"), Record(b"b", b"b1")], NOW - 2 * hour))  # 0, 1
            await append(log, encode_batch([Record(b"a", b"a2"), Record(b"c", b"c1")], NOW - 2 * hour))  # 2, 3
            await append(log, encode_batch([Record(b"c", None)], NOW - 2 * hour))  # 4: an old tombstone
            await append(log, encode_batch([Record(b"b", None)], NOW))  # 5: a recent tombstone
            await append(log, encode_batch([Record(b"d", b"d1")], NOW))  # 6: the last batch, never compacted
            stats = await log.compact(hour, NOW, force=True)
            assert stats is not None and stats.batches_deleted == 2 and stats.records_kept == 2
            assert sizes_in_db(pg_url, pid) == log._sizes == (stats.bytes_after, len(await log.read_async(6, 1 << 20)))
            assert await records(log) == [(2, b"a", b"a2"), (5, b"b", None), (6, b"d", b"d1")]
            # an incremental pass: only what was written since is mapped, older survivors are kept
            await append(log, encode_batch([Record(b"a", b"a3"), Record(b"e", b"e1")], NOW))  # 7, 8
            await append(log, encode_batch([Record(b"f", b"f1")], NOW))  # 9
            stats = await log.compact(hour, NOW)
            assert stats is not None and stats.bytes_after < stats.bytes_before
            assert await records(log) == [
                (5, b"b", None),
                (6, b"d", b"d1"),
                (7, b"a", b"a3"),
                (8, b"e", b"e1"),
                (9, b"f", b"f1"),
            ]
            assert sizes_in_db(pg_url, pid) == log._sizes  # kept in memory, never counted again
            assert await log.compact(hour, NOW) is None  # not dirty enough
        async with store_on(pg_url) as store:  # a new leader reads the same from the database
            assert await records(open_log(store, pg_url, pid)) == [
                (5, b"b", None),
                (6, b"d", b"d1"),
                (7, b"a", b"a3"),
                (8, b"e", b"e1"),
                (9, b"f", b"f1"),
            ]
        assert sql(pg_url, "SELECT cleaner_offset FROM herd_partitions WHERE pid = %s", (pid,)) == [(9,)]

    async def records(log: PgPartitionLog) -> list[tuple[int, bytes, bytes | None]]:
        data = await log.read_async(log.log_start_offset, 1 << 20)
        out = []
        for header in iter_headers(data):
            one = DefaultRecordBatch(bytearray(data[header.position : header.end]))
            assert one.validate_crc()
            out.extend((r.offset, r.key, r.value) for r in one)
        assert sum(len(r) for _, r in decode_batches(data)) == len(out)
        return out

    run(main)


# -- large values --------------------------------------------------------------------------------------------------


def test_a_large_incompressible_value_round_trips_stored_out_of_line_and_uncompressed(pg_url):
    pid = new_partition(pg_url)
    value = os.urandom(5 * 1024 * 1024)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, LogConfig(max_message_bytes=8 * 1024 * 1024))
            sent = batch([value])
            await append(log, sent)
        async with store_on(pg_url) as store:
            data = await open_log(store, pg_url, pid).read_async(0, 1)
            assert decoded(data) == [(0, NOW, value)]
            assert data[16:] == sent[16:]  # everything after the base offset, length and epoch as the client sent it
        assert sql(
            pg_url, "SELECT attstorage FROM pg_attribute WHERE attrelid = 'herd_batches'::regclass AND attname = 'data'"
        ) == [("e",)]
        assert sql(
            pg_url,
            "SELECT pg_column_compression(data), pg_column_size(data) >= %s FROM herd_batches WHERE pid = %s",
            (len(sent), pid),
        ) == [(None, True)]

    run(main)


# -- producer state --------------------------------------------------------------------------------------------


def test_a_new_leader_recognises_the_retry_of_a_batch_the_old_leader_committed(pg_url):
    pid = new_partition(pg_url)
    producer_id = 4242

    async def main() -> None:
        async with store_on(pg_url) as store:
            old = open_log(store, pg_url, pid)
            states = ProducerStates()
            for seq in range(0, 12, 2):
                result = states.append(old, batch([b"x", b"y"], producer=(producer_id, 0, seq)), NOW)
                await old.wait_durable(result.last_offset + 1)
            retried = batch([b"x", b"y"], producer=(producer_id, 0, 10))
        sql(pg_url, "UPDATE herd_partitions SET leader_epoch = leader_epoch + 1 WHERE pid = %s", (pid,))
        async with store_on(pg_url) as store:  # the new leader, with no producer state of its own
            new = open_log(store, pg_url, pid)
            rows = await new.producer_state()
            assert [(r.base_sequence, r.last_sequence, r.base_offset) for r in rows] == [
                (2, 3, 2),
                (4, 5, 4),
                (6, 7, 6),
                (8, 9, 8),
                (10, 11, 10),
            ]
            states = ProducerStates()
            states.restore(new.topic, new.partition, rows, now_ms=NOW)
            duplicate = states.append(new, retried, NOW)
            assert (duplicate.base_offset, duplicate.last_offset) == (10, 11)
            assert new.next_offset == 12  # not appended again
            result = states.append(new, batch([b"z"], producer=(producer_id, 0, 12)), NOW)
            await new.wait_durable(result.last_offset + 1)
            assert result.base_offset == 12

    run(main)


# -- the coordinator's load ----------------------------------------------------------------------------------------


def test_a_coordinator_shard_loads_its_offsets_from_the_database_through_read_async(pg_url):
    from herd.coordinator import CoordinatorConfig
    from herd.coordinator.records import OffsetValue, offset_commit_record
    from herd.runtime.commits import RemoteWriter
    from herd.runtime.shard import ShardRuntime, ShardState, group_shard
    from herd.runtime.timer import WallClock

    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, LogConfig(cleanup_policy="compact"))
            for round_ in range(3):
                for g in range(20):
                    records = [
                        offset_commit_record(f"g{g}", "t", p, OffsetValue(100 * round_ + p, -1, "", NOW))
                        for p in range(50)
                    ]
                    log.append(encode_batch(records, NOW), NOW)
            await log.wait_durable(log.next_offset)
            stats = await log.compact(3_600_000, NOW, force=True)  # leaves gaps in the offsets
            # 60 batches of 50 commits, one per group and round; the last (g19 of round 2) is not compacted, so
            # round 1's g19 batch stays the latest of its keys: rounds 0 and 1 lose 20 + 19 batches, nothing is
            # rewritten (a batch's commits are all superseded or none is)
            assert stats is not None
            assert (stats.batches_deleted, stats.batches_rewritten, stats.records_read, stats.records_kept) == (
                39,
                0,
                59 * 50,
                20 * 50,
            )
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid)
            loop = asyncio.get_running_loop()
            clock = WallClock()
            shard = ShardRuntime(
                0,
                log,
                group_shard(CoordinatorConfig(), clock),
                clock=clock,
                loop=loop,
                max_batch_bytes=1 << 20,
                flusher=RemoteWriter(loop),
            )  # as the coordinator does
            await shard.load()
            assert shard.state is ShardState.ACTIVE
            offsets = shard.shard._ctx.offsets
            assert sum(len(o) for o in offsets.values()) == 20 * 50
            assert {v.offset for o in offsets.values() for v in o.values()} == {200 + p for p in range(50)}

    run(main)


def test_the_coordinators_compactor_has_a_remote_partition_compact_itself_and_stop_cancels_it(pg_url):
    """runtime.compactor on a PgPartitionLog: a pass is the log's own (fenced) compaction, at most every
    REMOTE_INTERVAL_MS unless forced; stopping cancels a pass in flight (a shard unloaded for a coordinator
    move must not wait for a pass over the database), and the log stays readable and whole."""
    from herd.coordinator.records import OffsetValue, offset_commit_record
    from herd.runtime.compactor import Compactor
    from herd.runtime.timer import WallClock

    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, LogConfig(cleanup_policy="compact"))
            for round_ in range(3):
                log.append(
                    encode_batch(
                        [offset_commit_record("g", "t", p, OffsetValue(round_, -1, "", NOW)) for p in range(10)], NOW
                    ),
                    NOW,
                )
            await log.wait_durable(log.next_offset)
            loop = asyncio.get_running_loop()
            compactor = Compactor(
                log,
                loop=loop,
                clock=WallClock(),
                delete_retention_ms=3_600_000,
                idle=lambda: True,
                on_failure=lambda e: None,
            )
            assert compactor.supported
            await compactor.run_now()
            assert compactor.passes == 1
            assert compactor.poll() is None  # checked again only after REMOTE_INTERVAL_MS
            async with row_locked(pg_url, pid):  # the next pass waits on the partition's row: cancel it there
                task = compactor.poll(force=True)
                assert task is not None
                await asyncio.sleep(0.2)
                compactor.stop()
                await compactor.close()
                assert task.cancelled()
            assert compactor.passes == 1
            assert values(await log.read_async(0, 1 << 20))  # still readable

    run(main)


# -- leader epochs -------------------------------------------------------------------------------------------------


def test_the_epoch_history_names_where_each_leader_began_and_a_deposed_leader_cannot_read_it(pg_url):
    """Every epoch bump (the cluster's NEW_EPOCH) starts an epoch at the log end offset of the moment; a leader
    reads the history up to its own epoch once, and a deposed one is told it no longer leads."""
    from herd.log.api import end_offset_for_epoch
    from herd.log.postgres.metadata_sql import NEW_EPOCH

    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            first = open_log(store, pg_url, pid)
            assert await first.epoch_history() == ((0, 0),)
            await append(first, batch([b"a", b"b", b"c"]))
            await store.close_partition(first, flush=True)
            sql(pg_url, "UPDATE herd_partitions SET " + NEW_EPOCH + " WHERE pid = %s", (pid,))
            sql(pg_url, "UPDATE herd_partitions SET " + NEW_EPOCH + " WHERE pid = %s", (pid,))  # led by nobody
            second = open_log(store, pg_url, pid)
            await append(second, batch([b"d"]))
            history = await second.epoch_history()
            assert history == ((0, 0), (1, 3), (2, 3))
            assert end_offset_for_epoch(history, 0, second.log_end_offset) == (0, 3)
            assert end_offset_for_epoch(history, 2, second.log_end_offset) == (2, 4)
            third = store.open_partition(
                "t", 0, LogConfig(), pid=pid, leader_epoch=2, log_start_offset=0, log_end_offset=4
            )
            sql(pg_url, "UPDATE herd_partitions SET " + NEW_EPOCH + " WHERE pid = %s", (pid,))
            with pytest.raises(NotLeaderError):
                await third.epoch_history()

    run(main)


def test_a_version_1_database_gets_the_epochs_its_batches_carry(postgres_server):
    """Migrating to version 2 fills the epoch history from the stored batches, plus each partition's current
    epoch where nothing was written at it yet."""
    url = postgres_server.create_database("pg_store_schema_v1", replace=True)
    sql(url, schema.MIGRATIONS[1])
    sql(url, "INSERT INTO herd_meta (key, value) VALUES ('schema_version', '1')")
    topic_id = uuid.uuid4()
    sql(url, "INSERT INTO herd_topics (topic_id, name, partitions) VALUES (%s, 'old', 2)", (topic_id,))
    written, idle = (
        r[0]
        for r in sql(
            url,
            "INSERT INTO herd_partitions (topic_id, partition, leader, leader_epoch, "
            "log_end_offset) VALUES (%s, 0, 1, 5, 9), (%s, 1, 1, 3, 0) RETURNING pid",
            (topic_id, topic_id),
        )
    )
    for base, last, epoch in ((0, 3, 0), (4, 5, 2), (6, 8, 5)):
        sql(
            url,
            "INSERT INTO herd_batches (pid, base_offset, last_offset, max_timestamp, leader_epoch, record_count, "
            "size, data) VALUES (%s, %s, %s, 0, %s, 1, 1, '\\x00')",
            (written, base, last, epoch),
        )

    async def upgrade() -> None:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            await schema.migrate(conn, "the old database")

    asyncio.run(upgrade())
    rows = dict((r[0], (r[1], r[2])) for r in sql(url, "SELECT pid, epochs, epoch_starts FROM herd_partitions"))
    assert rows == {written: ([0, 2, 5], [0, 4, 6]), idle: ([3], [0])}


# -- transactions (herd.log.transactions) ----------------------------------------------------------------------------

P, Q = 71, 72


async def durable(log: PgPartitionLog, data: bytes | None = None, **marker: int) -> int:
    """Append `data` (or a marker: producer_id, producer_epoch, commit, coordinator_epoch) and wait for its
    commit; its base offset."""
    if data is not None:
        result = log.append(data, NOW)
    else:
        result = log.append_control(
            marker["producer_id"], marker["producer_epoch"], bool(marker["commit"]), marker["coordinator_epoch"], NOW
        )
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
            assert sql(
                pg_url,
                "SELECT last_offset, producer_id, first_offset, last_stable_offset "
                "FROM herd_aborted_txns WHERE pid = %s",
                (pid,),
            ) == [(4, P, 0, first_q)]
            assert sql(pg_url, "SELECT attributes FROM herd_batches WHERE pid = %s ORDER BY base_offset", (pid,)) == [
                (0x10,),
                (0x10,),
                (0x30,),
            ]

    run(main)


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

    run(main)


def test_a_marker_for_a_partition_whose_state_a_new_leader_is_rebuilding_is_refused_until_it_is_loaded(pg_url):
    """A node that just took a partition over holds it while it rebuilds the partition's state from the stored
    batches (herd.server.node `_rebuild`): a transaction marker is refused then (NOT_LEADER_OR_FOLLOWER, which the
    transaction coordinator retries), not only a client's batch. Taken, it would be applied to the state the
    rebuild then replaces with what it read before the marker, leaving the transaction it ended ongoing in memory
    although its COMMIT is stored: the last stable offset stuck below the transaction for good, its records never
    read by read_committed consumers (tests/integration/test_transactions_cluster.py failed so once in a while:
    the successor of a killed coordinator completed a commit on a partition taken from the killed node)."""
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            old = open_log(store, pg_url, pid)
            first = await durable(old, txn(P, 0))  # left open: its leader died before the marker
        sql(pg_url, "UPDATE herd_partitions SET leader_epoch = leader_epoch + 1 WHERE pid = %s", (pid,))
        producers = ProducerStates(clock=lambda: NOW)
        async with store_on(pg_url) as store:
            store.producers = producers
            new = open_log(store, pg_url, pid)
            producers.hold("t", 0)  # as the node does the moment it takes the partition
            reading, answers = asyncio.Event(), asyncio.Event()
            run_statement = new._run

            async def paused(statement, *args, **kwargs):  # type: ignore[no-untyped-def]
                if statement is statements.TRANSACTIONS and not reading.is_set():
                    reading.set()
                    await answers.wait()
                return await run_statement(statement, *args, **kwargs)

            new._run = paused  # type: ignore[method-assign]
            rebuilding = asyncio.ensure_future(producers.rebuild(new, producers.clock, held=True))
            await reading.wait()  # its rows are being read, up to the committed end as it was
            with pytest.raises(NotLeaderError):
                new.append_control(P, 0, True, 1, NOW)
            assert new.next_offset == new.log_end_offset == 2  # nothing appended
            answers.set()
            await rebuilding
            assert new.transactions.ongoing() == [(P, first)] and new.last_stable_offset == first
            await durable(new, producer_id=P, producer_epoch=0, commit=1, coordinator_epoch=1)  # the retry
            assert new.transactions.ongoing() == [] and new.last_stable_offset == new.log_end_offset == 3

    run(main)
