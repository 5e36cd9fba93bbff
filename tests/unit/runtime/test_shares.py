"""The share partitions a node leads (herd.runtime.shares) over a real segment log: where a share partition starts
(share.auto.offset.reset), records handed out in whole batches with their acquired ranges, locks that run out,
acknowledgements, a member's records given back, the delivery-count limit and the in-flight limit."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from batches import BASE_TS, make_batch

from herd.config import BrokerConfig
from herd.coordinator.errors import ErrorCode
from herd.coordinator.share.partition import ACKNOWLEDGED, ARCHIVED, AckType, AcquiredRecords
from herd.log.api import LogConfig, PartitionLog
from herd.log.batch import iter_headers
from herd.log.store import SegmentStore
from herd.runtime.shares import SharePartitions

LOCK_MS = 30_000


@pytest.fixture
def log(tmp_path) -> Iterator[PartitionLog]:
    store = SegmentStore(str(tmp_path))
    partition = store.open_partition("t", 0, LogConfig())
    try:
        yield partition
    finally:
        store.close()


def append(log: PartitionLog, *values: bytes, timestamp_ms: int = BASE_TS) -> None:
    log.append(make_batch(list(values), timestamp_ms=timestamp_ms), timestamp_ms)


def shares(group_configs: dict[str, str] | None = None, **props: str) -> SharePartitions:
    configs = group_configs or {}
    return SharePartitions(BrokerConfig.from_properties(props), lambda group, name: configs.get(name))


def run(coroutine):
    return asyncio.run(coroutine)


def acquire(s: SharePartitions, log: PartitionLog, member: str, now: int, max_records: int = 500):
    got = asyncio.run(s.acquire("g", member, log, max_records, 1 << 20, now))
    offsets = [o for h in iter_headers(got.records) for o in range(h.base_offset, h.last_offset + 1)]
    return offsets, list(got.ranges)


def test_a_new_share_partition_starts_where_share_auto_offset_reset_says(log) -> None:
    append(log, b"old-0", b"old-1")
    latest = shares()
    assert acquire(latest, log, "m", 0) == ([], [])  # latest (the default): nothing that was there before
    append(log, b"new-2")
    assert acquire(latest, log, "m", 0) == ([2], [AcquiredRecords(2, 2, 1)])
    earliest = shares({"share.auto.offset.reset": "earliest"})
    # new records are acquired as one range, whatever the log batches (SharePartition.acquireNewBatchRecords)
    assert acquire(earliest, log, "m", 0) == ([0, 1, 2], [AcquiredRecords(0, 2, 1)])


def test_by_duration_starts_at_the_first_record_that_recent(log) -> None:
    append(log, b"a", timestamp_ms=BASE_TS)
    append(log, b"b", timestamp_ms=BASE_TS + 60_000)
    recent = shares({"share.auto.offset.reset": "by_duration:PT30S"})
    offsets, _ = acquire(recent, log, "m", BASE_TS + 70_000)
    assert offsets == [1]


def test_records_are_locked_to_one_member_until_acknowledged_or_their_lock_runs_out(log) -> None:
    s = shares({"share.auto.offset.reset": "earliest"})
    append(log, b"0", b"1", b"2")
    assert acquire(s, log, "a", 0) == ([0, 1, 2], [AcquiredRecords(0, 2, 1)])
    assert acquire(s, log, "b", 1) == ([], [])  # all acquired by a
    not_bs, _ = run(s.acknowledge("g", "b", "t", 0, [(0, 0, [AckType.ACCEPT])], 2))
    assert not_bs == ErrorCode.invalid_record_state  # b holds none of them
    assert run(s.acknowledge("g", "a", "t", 0, [(0, 1, [AckType.ACCEPT, AckType.RELEASE])], 3))[0] == 0
    offsets, ranges = acquire(s, log, "b", 4)
    assert (offsets, ranges) == ([0, 1, 2], [AcquiredRecords(1, 1, 2)])  # the batch, and only 1 acquired again
    # b's lock on 1 and a's on 2 ran out: 1 is on its third delivery, 2 on its second
    assert acquire(s, log, "c", LOCK_MS + 5) == ([0, 1, 2], [AcquiredRecords(1, 1, 3), AcquiredRecords(2, 2, 2)])
    late, _ = run(s.acknowledge("g", "a", "t", 0, [(2, 2, [AckType.ACCEPT])], LOCK_MS + 6))
    assert late == ErrorCode.invalid_record_state  # a's lock is gone
    assert run(s.acknowledge("g", "c", "t", 0, [(1, 2, [AckType.ACCEPT])], LOCK_MS + 7))[0] == 0
    share = s.get("g", "t", 0)
    assert share is not None and share.start_offset == 3  # everything up to 2 is done: the SPSO moved past it


def test_acknowledgements_staged_by_a_fetch_are_not_handed_out_again_until_completed(log) -> None:
    s = shares({"share.auto.offset.reset": "earliest"})
    append(log, b"0", b"1")
    acquire(s, log, "a", 0)
    staged: list = []
    assert run(s.acknowledge("g", "a", "t", 0, [(0, 1, [AckType.RELEASE])], 1, staged)) == (ErrorCode.none, None)
    assert acquire(s, log, "a", 2) == ([], [])  # released, but in transition: not again until written
    run(s.complete(staged, 3))
    assert acquire(s, log, "b", 4) == ([0, 1], [AcquiredRecords(0, 1, 2)])
    assert (
        run(s.acknowledge("g", "a", "u", 0, [(0, 0, [AckType.ACCEPT])], 5))[0] == ErrorCode.unknown_topic_or_partition
    )


def test_a_member_s_records_are_given_back_without_counting_a_delivery(log) -> None:
    s = shares({"share.auto.offset.reset": "earliest"})
    append(log, b"0", b"1")
    acquire(s, log, "a", 0)
    run(s.release("g", "a", [("t", 0)], 1))
    assert acquire(s, log, "b", 2) == ([0, 1], [AcquiredRecords(0, 1, 1)])  # delivered once, as far as b knows


def test_a_record_released_at_the_delivery_limit_is_archived(log) -> None:
    s = shares({"share.auto.offset.reset": "earliest"}, **{"group.share.delivery.count.limit": "2"})
    append(log, b"0")
    for attempt in (1, 2):
        assert acquire(s, log, "a", attempt) == ([0], [AcquiredRecords(0, 0, attempt)])
        assert run(s.acknowledge("g", "a", "t", 0, [(0, 0, [AckType.RELEASE])], attempt))[0] == 0
    assert acquire(s, log, "a", 3) == ([], [])  # archived: never delivered again
    share = s.get("g", "t", 0)
    assert share is not None and share.start_offset == 1 and [r[2].state for r in share.records()] in ([], [ARCHIVED])


def test_fetches_take_whole_batches_up_to_max_records_and_the_in_flight_limit(log) -> None:
    s = shares({"share.auto.offset.reset": "earliest"}, **{"group.share.partition.max.record.locks": "100"})
    for i in range(0, 150, 10):
        append(log, *[b"%d" % j for j in range(i, i + 10)])
    offsets, ranges = acquire(s, log, "a", 0, max_records=15)
    assert ranges == [AcquiredRecords(0, 19, 1)] and offsets == list(range(20))  # whole batches: a soft limit
    offsets, ranges = acquire(s, log, "b", 0)
    assert ranges == [AcquiredRecords(20, 99, 1)]  # 100 records in flight at most
    assert acquire(s, log, "c", 0) == ([], [])
    assert run(s.acknowledge("g", "a", "t", 0, [(0, 19, [AckType.ACCEPT])], 1))[0] == 0
    _, ranges = acquire(s, log, "c", 2)
    assert ranges == [AcquiredRecords(100, 119, 1)]  # acknowledged at the head: room for 20 more
    share = s.get("g", "t", 0)
    assert share is not None and all(st.state is not ACKNOWLEDGED for _, _, st in share.records())
