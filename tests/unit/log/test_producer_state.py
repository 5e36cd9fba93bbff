"""Idempotent producer checks (herd.log.producer_state) on a real segment log in the in-memory filesystem."""

from __future__ import annotations

import asyncio

import pytest
from batches import idempotent_batch

from herd.log.api import (
    InvalidProducerEpochError,
    LogConfig,
    NotLeaderError,
    OutOfOrderSequenceError,
    ProducerBatch,
)
from herd.log.fs import MemoryFileSystem
from herd.log.producer_state import ProducerStates
from herd.log.store import SegmentStore


def batch(pid: int, epoch: int, seq: int, count: int = 3) -> bytes:
    return idempotent_batch(pid, epoch, seq, count, value=lambda i: b"v%d" % i)


@pytest.fixture
def log():
    return SegmentStore("/data", MemoryFileSystem()).open_partition("t", 0, LogConfig())


def test_sequences_in_order_are_appended(log):
    states = ProducerStates()
    assert states.append(log, batch(7, 0, 0), 0).base_offset == 0
    assert states.append(log, batch(7, 0, 3), 0).base_offset == 3
    assert log.log_end_offset == 6


def test_a_retried_batch_is_not_appended_twice_and_gets_its_first_offsets(log):
    states = ProducerStates()
    states.append(log, batch(7, 0, 0), 0)
    second = states.append(log, batch(7, 0, 3), 0)
    retry = states.append(log, batch(7, 0, 3), 0)
    assert (retry.base_offset, retry.last_offset) == (second.base_offset, second.last_offset) == (3, 5)
    assert log.log_end_offset == 6
    older = states.append(log, batch(7, 0, 0), 0)  # still among the last five
    assert older.base_offset == 0 and log.log_end_offset == 6


def test_a_gap_is_out_of_order(log):
    states = ProducerStates()
    states.append(log, batch(7, 0, 0), 0)
    with pytest.raises(OutOfOrderSequenceError):
        states.append(log, batch(7, 0, 10), 0)
    assert log.log_end_offset == 3


def test_fenced_epoch_and_new_epoch(log):
    states = ProducerStates()
    states.append(log, batch(7, 1, 0), 0)
    with pytest.raises(InvalidProducerEpochError):
        states.append(log, batch(7, 0, 3), 0)
    with pytest.raises(OutOfOrderSequenceError):
        states.append(log, batch(7, 2, 5), 0)
    assert states.append(log, batch(7, 2, 0), 0).base_offset == 3


def test_producers_and_partitions_are_independent(log):
    other = SegmentStore("/d2", MemoryFileSystem()).open_partition("t", 1, LogConfig())
    states = ProducerStates()
    states.append(log, batch(7, 0, 0), 0)
    states.append(log, batch(8, 0, 0), 0)
    states.append(other, batch(7, 0, 0), 0)
    assert log.log_end_offset == 6 and other.log_end_offset == 3


def test_non_idempotent_batches_are_not_tracked(log):
    states = ProducerStates()
    states.append(log, batch(-1, -1, -1), 0)
    states.append(log, batch(-1, -1, -1), 0)
    assert log.log_end_offset == 6


def test_control_batches_from_producers_are_refused(log):
    import struct

    import crc32c

    from herd.log.api import InvalidRecordError
    from herd.log.batch import ATTRIBUTES_OFFSET, CONTROL_BIT, CRC_OFFSET, TRANSACTIONAL_BIT

    data = bytearray(batch(1, 0, 0, count=1))
    (attributes,) = struct.unpack_from(">h", data, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", data, ATTRIBUTES_OFFSET, attributes | CONTROL_BIT | TRANSACTIONAL_BIT)
    struct.pack_into(">I", data, CRC_OFFSET, crc32c.crc32c(bytes(data[ATTRIBUTES_OFFSET:])))
    with pytest.raises(InvalidRecordError):
        ProducerStates().append(log, bytes(data), 0)
    assert log.log_end_offset == 0


def test_a_producer_that_stopped_appending_is_forgotten_after_the_expiration(log):
    states = ProducerStates(expiration_ms=1000)
    states.append(log, batch(7, 0, 0), 0)
    states.append(log, batch(8, 0, 0), 600)
    states.append(log, batch(8, 0, 3), 1200)  # 7 idle for 1200 ms: gone; 8 was used at 1200
    assert len(states) == 1
    assert states.append(log, batch(7, 0, 0), 1300).base_offset == 9  # new to the broker: appended again
    with pytest.raises(OutOfOrderSequenceError):
        states.append(log, batch(8, 0, 9), 1300)  # 8 is still known


def test_invented_producer_ids_cannot_grow_the_state_beyond_its_bound(log, caplog):
    states = ProducerStates(max_entries=100)
    busy = 10**6  # one producer stays in use throughout
    for pid in range(1000):
        states.append(log, batch(pid, 0, 0, count=1), pid)
        if pid % 10 == 0:
            last = states.append(log, batch(busy, 0, pid // 10, count=1), pid)
    assert len(states) == 100 and states.evicted == 901
    end = log.log_end_offset
    retry = states.append(log, batch(busy, 0, 99, count=1), 1000)  # its last batch is still recognised
    assert retry.base_offset == last.base_offset and log.log_end_offset == end
    warnings = [r for r in caplog.records if "producer state is full" in r.getMessage()]
    assert len(warnings) == 1  # at most one a minute, not one per eviction


def stored(pid: int, epoch: int, seq: int, offset: int, count: int = 3, timestamp: int = 1000) -> ProducerBatch:
    """A batch as a partition's stored rows describe it (`PgPartitionLog.producer_state`)."""
    return ProducerBatch(pid, epoch, seq, seq + count - 1, offset, offset + count - 1, count, timestamp, -1, 0)


def test_restored_state_recognises_a_retry_of_a_stored_batch_and_checks_the_next_sequence(log):
    states = ProducerStates()
    states.restore("t", 0, [stored(7, 0, 0, 0), stored(7, 0, 3, 3)], now_ms=2000)
    assert len(states) == 1
    retry = states.append(log, batch(7, 0, 3), 2000)
    assert (retry.base_offset, retry.last_offset) == (3, 5)
    assert log.log_end_offset == 0  # recognised, not appended
    with pytest.raises(OutOfOrderSequenceError):
        states.append(log, batch(7, 0, 9), 2000)
    assert states.append(log, batch(7, 0, 6), 2000).base_offset == 0


def test_restore_keeps_the_last_epoch_of_each_producer_and_leaves_expired_producers_out(log):
    states = ProducerStates(expiration_ms=10_000)
    states.restore(
        "t",
        0,
        [stored(7, 0, 0, 0, timestamp=5000), stored(7, 1, 0, 3, timestamp=5000), stored(8, 0, 0, 6, timestamp=1000)],
        now_ms=11_000,
    )
    assert len(states) == 1  # producer 8's last batch is older than expiration_ms
    with pytest.raises(InvalidProducerEpochError):
        states.append(log, batch(7, 0, 3), 11_000)  # epoch 0 was superseded by epoch 1
    retry = states.append(log, batch(7, 1, 0), 11_000)
    assert retry.base_offset == 3


def test_restore_replaces_what_this_node_knew_of_the_partition_only(log):
    other = SegmentStore("/other", MemoryFileSystem()).open_partition("u", 0, LogConfig())
    states = ProducerStates()
    states.append(log, batch(5, 0, 0), 0)
    states.append(other, batch(5, 0, 0), 0)
    states.restore("t", 0, [], now_ms=0)
    assert len(states) == 1
    assert states.append(other, batch(5, 0, 0), 0).base_offset == 0  # still a duplicate on the other partition


def test_active_producers_of_a_partition_for_describe_producers(log):
    from herd.log.producer_state import ActiveProducer

    states = ProducerStates(expiration_ms=1000)
    states.append(log, batch(9, 2, 0), 0)
    states.append(log, batch(7, 0, 0), 500)
    states.append(log, batch(7, 0, 3, count=2), 500)
    assert states.active("t", 0, 900) == [ActiveProducer(7, 0, 4, 1001), ActiveProducer(9, 2, 2, 1002)]
    assert states.active("t", 0, 1200) == [ActiveProducer(7, 0, 4, 1001)]  # 9 expired
    assert states.active("t", 1, 1200) == []
    states.hold("t", 0)
    with pytest.raises(NotLeaderError):
        states.active("t", 0, 1200)


class _StoredPartition:
    """A remote partition's `producer_state()` and `load_transactions()` (what `ProducerStates.rebuild` awaits),
    answering `rows` once `gate` is set."""

    def __init__(self, rows: list[ProducerBatch], gate: asyncio.Event | None = None) -> None:
        self.topic, self.partition, self.rows, self.gate = "t", 0, rows, gate

    async def producer_state(self) -> list[ProducerBatch]:
        if self.gate is not None:
            await self.gate.wait()
        return self.rows

    async def load_transactions(self) -> None:
        return None


def test_a_partition_takes_no_append_until_every_rebuild_of_its_state_is_done(log):
    """Two rebuilds of one partition overlap (cluster mode: a node took the partition back while a rebuild
    begun for its earlier log was still reading the database). The first to finish must not open the
    partition: an append accepted then is overwritten by the other's restore (read before it), and the
    producer's next batch is refused as out of order although it follows the last one stored (issue 30: the
    fatal OUT_OF_ORDER_SEQUENCE_NUMBER of librdkafka's idempotent producer in test_cluster_faults)."""

    async def main() -> None:
        states = ProducerStates()
        rows = [stored(7, 0, 0, 0, timestamp=0)]
        gate = asyncio.Event()
        earlier = asyncio.ensure_future(states.rebuild(_StoredPartition(rows, gate), lambda: 0))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        await states.rebuild(_StoredPartition(rows), lambda: 0)  # type: ignore[arg-type]
        with pytest.raises(NotLeaderError):  # retriable: the client sends it again
            states.append(log, batch(7, 0, 3), 0)
        gate.set()
        await earlier
        assert states.append(log, batch(7, 0, 3), 0).base_offset == 0
        assert states.append(log, batch(7, 0, 6), 0).base_offset == 3  # in order after the last one stored
        assert not states.restoring

    asyncio.run(main())


# -- through the log: a client's append (Produce) and a coordinator's ---------------------------------------------


def test_a_clients_append_passes_the_partitions_producer_state_and_a_coordinators_does_not():
    store = SegmentStore("/data", MemoryFileSystem())
    states = store.producers = ProducerStates()
    log = store.open_partition("t", 0, LogConfig())
    first = log.append(batch(7, 0, 0), 0, client=True)
    assert log.append(batch(7, 0, 0), 0, client=True) == first and log.log_end_offset == 3  # recognised
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(7, 0, 10), 0, client=True)
    assert len(states) == 1
    assert log.append(batch(7, 0, 0), 0).base_offset == 3  # not a client's: only the log's own checks


def test_a_clients_compressed_records_are_bounded_by_the_partitions_max_decompressed_bytes():
    from batches import GZIP, client_batch

    from herd.log.api import RecordTooLargeError

    log = SegmentStore("/data", MemoryFileSystem()).open_partition("t", 0, LogConfig(max_decompressed_bytes=4096))
    records = client_batch([1000] * 100, codec=GZIP)
    with pytest.raises(RecordTooLargeError):
        log.append(records, 0, client=True)
    assert log.log_end_offset == 0
    assert log.append(records, 0).record_count == 100
