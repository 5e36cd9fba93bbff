"""Compaction of a partition stored in PostgreSQL holding transactions (herd.log.postgres.compact with
`PgPartitionLog.compact`): the pass stops at the first open transaction, the records of an aborted one go and
never hide a committed record of their key, the ABORT marker and its row of herd_aborted_txns stay; a new leader
reads the same. On the PostgreSQL the test session starts (tests/pgcluster.py), one fresh database."""

from __future__ import annotations

import asyncio

from test_pg_store import (
    NOW,
    new_partition,
    open_log,
    pg_url,  # noqa: F401 (fixture: the module's migrated database)
    store_on,
)

from herd.coordinator.records import Record
from herd.log.api import LogConfig
from herd.log.batch import CONTROL_BIT, iter_headers
from herd.log.postgres.store import PgPartitionLog
from herd.log.records import control_marker
from herd.runtime.batches import decode_batches, encode_batch

DAY = 86_400_000
P, Q = 1000, 2000


COMPACTED = LogConfig(cleanup_policy="compact")


async def append(log: PgPartitionLog, records: list[Record], pid: int = -1) -> int:
    result = log.append(encode_batch(records, NOW, pid, 0 if pid >= 0 else -1), NOW)
    await log.wait_durable(result.last_offset + 1)
    return result.base_offset


async def end(log: PgPartitionLog, pid: int, commit: bool) -> None:
    result = log.append_control(pid, 0, commit, 0, NOW)
    await log.wait_durable(result.last_offset + 1)


async def batches(log: PgPartitionLog) -> list[tuple[int, int, object, list[tuple[bytes, bytes | None]]]]:
    """(base offset, producer id, marker, records) of every batch."""
    data = await log.read_async(log.log_start_offset, 1 << 20)
    decoded = [records for _, records in decode_batches(data)]
    return [
        (
            h.base_offset,
            h.producer_id,
            control_marker(data, h) if h.attributes & CONTROL_BIT else None,
            [tuple(r) for r in records],
        )
        for h, records in zip(iter_headers(data), decoded, strict=True)
    ]


def test_aborted_records_go_open_transactions_wait_and_a_new_leader_reads_the_same(pg_url: str) -> None:  # noqa: F811
    pid = new_partition(pg_url)

    async def main() -> None:
        async with store_on(pg_url) as store:
            log = open_log(store, pg_url, pid, COMPACTED)
            await append(log, [Record(b"K", b"1"), Record(b"L", b"1")])  # 0, 1
            aborted = await append(log, [Record(b"K", b"2")], P)  # 2
            await end(log, P, False)  # 3
            open_ = await append(log, [Record(b"L", b"2")], Q)  # 4: open, the last stable offset
            await append(log, [Record(b"L", b"3")])  # 5: after it, not cleaned yet
            await append(log, [Record(b"M", b"1")])  # 6
            assert log.last_stable_offset == open_
            assert await log.compact(DAY, NOW, force=True) is not None
            assert await batches(log) == [
                (0, -1, None, [(b"K", b"1"), (b"L", b"1")]),
                (3, P, (False, 0), []),
                (4, Q, None, [(b"L", b"2")]),
                (5, -1, None, [(b"L", b"3")]),
                (6, -1, None, [(b"M", b"1")]),
            ]
            assert await log.aborted_transactions_async(0, 7) == [(P, aborted)]
            await end(log, Q, True)  # 7
            await append(log, [Record(b"N", b"1")])  # 8
            await log.compact(DAY, NOW, force=True)
            expected = [
                (0, -1, None, [(b"K", b"1")]),
                (3, P, (False, 0), []),
                (7, Q, (True, 0), []),
                (5, -1, None, [(b"L", b"3")]),
                (6, -1, None, [(b"M", b"1")]),
                (8, -1, None, [(b"N", b"1")]),
            ]
            expected.sort()
            assert await batches(log) == expected  # Q's data saw this pass: its marker stays
            # an incremental pass maps from the cleaner offset: P's abort lies below it, so P's next transaction,
            # committed, is not taken for aborted (its K=4 replaces the plain K=3 written before it)
            await append(log, [Record(b"K", b"3")])  # 9
            await append(log, [Record(b"K", b"4")], P)  # 10
            await end(log, P, True)  # 11
            await append(log, [Record(b"O", b"1")])  # 12
            await log.compact(DAY, NOW, force=True)
            expected = [
                (3, P, (False, 0), []),
                (5, -1, None, [(b"L", b"3")]),
                (6, -1, None, [(b"M", b"1")]),
                (7, Q, (True, 0), []),
                (8, -1, None, [(b"N", b"1")]),
                (10, P, None, [(b"K", b"4")]),
                (11, P, (True, 0), []),
                (12, -1, None, [(b"O", b"1")]),
            ]
            assert await batches(log) == expected
        async with store_on(pg_url) as store:
            reopened = open_log(store, pg_url, pid, COMPACTED)
            await reopened.load_transactions()
            assert await batches(reopened) == expected
            assert await reopened.aborted_transactions_async(0, 13) == [(P, aborted)]

    asyncio.run(asyncio.wait_for(main(), 60))
