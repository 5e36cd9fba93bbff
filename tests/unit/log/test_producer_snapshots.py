"""Producer state snapshots (herd.log.producer_snapshots): the file format, and the segment log's
`producer_state` without snapshots and with snapshots it cannot use. Snapshots taken from a live producer state
and restarts: tests/unit/server/test_producer_persistence.py. On the in-memory filesystem."""

from __future__ import annotations

import struct

import crc32c
import pytest
from batches import idempotent_batch as batch

from herd.log import producer_snapshots
from herd.log.api import LogConfig, ProducerBatch
from herd.log.fs import MemoryFileSystem
from herd.log.segments import SegmentLog

DIR = "/data/t-0"


def stored(pid: int, seq: int, offset: int, count: int = 2, epoch: int = 0) -> ProducerBatch:
    return ProducerBatch(pid, epoch, seq, (seq + count - 1) % 2**31, offset, offset + count - 1, count, 5000, -1, 0)


def open_log(fs: MemoryFileSystem, **config: int) -> SegmentLog:
    return SegmentLog.open(fs, DIR, "t", 0, LogConfig(**config))


def snapshots(fs: MemoryFileSystem) -> list[int]:
    return producer_snapshots.snapshot_offsets(fs, DIR)


# -- the file format -------------------------------------------------------------------------------------------


def test_a_snapshot_round_trips_every_field_and_is_kafkas_version_1_layout() -> None:
    batches = [stored(7, 0, 0), stored(7, 2, 2), stored(9, 2**31 - 1, 4)]  # the last one's sequence wraps
    data = producer_snapshots.encode(batches)
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count, len(data)) == (1, 3, 10 + 3 * 46)
    assert crc == crc32c.crc32c(data[6:])  # Kafka's CRC32C of everything after the version and the CRC
    decoded = producer_snapshots.decode(data, log_append_time=False, log_start_offset=0)
    assert decoded == batches
    assert decoded[2].last_sequence == 0  # 2**31 - 1 and 0: the sequence wrapped inside the batch


def test_log_append_time_topics_answer_the_timestamp_as_the_append_time() -> None:
    data = producer_snapshots.encode([stored(7, 0, 0)])
    (got,) = producer_snapshots.decode(data, log_append_time=True, log_start_offset=12)
    assert (got.log_append_time, got.log_start_offset) == (5000, 12)


@pytest.mark.parametrize("damage", ["flip", "truncate", "version", "empty"])
def test_a_damaged_snapshot_is_refused(damage: str) -> None:
    data = bytearray(producer_snapshots.encode([stored(7, 0, 0), stored(8, 0, 2)]))
    if damage == "flip":
        data[-3] ^= 0x40
    elif damage == "truncate":
        del data[-5:]
    elif damage == "version":
        data[1] = 2
    else:
        data = bytearray()
    with pytest.raises(producer_snapshots.CorruptSnapshotError):
        producer_snapshots.decode(bytes(data), log_append_time=False, log_start_offset=0)


# -- the segment log: producer_state, roll, close, retention -----------------------------------------------------


def test_with_no_snapshot_the_state_is_read_from_every_batch_header() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs, segment_bytes=500)
    for seq in range(0, 14, 2):
        log.append(batch(7, 0, seq), 0)
    log.append(batch(-1, -1, -1), 0)
    log.append(batch(8, 3, 0, count=3), 0)
    assert len(log._segments) > 3 and snapshots(fs) == []  # no snapshot_source: none written
    state = log.producer_state()
    assert [(b.producer_id, b.base_sequence, b.base_offset) for b in state] == [
        (7, 4, 4),
        (7, 6, 6),
        (7, 8, 8),
        (7, 10, 10),
        (7, 12, 12),
        (8, 0, 16),
    ]  # the last five of each
    assert state[-1] == ProducerBatch(8, 3, 0, 2, 16, 18, 3, 1002, -1, 0)


def test_snapshots_beyond_the_log_end_are_deleted_at_open() -> None:
    fs = MemoryFileSystem()
    log = open_log(fs)
    log.append(batch(7, 0, 0), 0)
    log.close()
    producer_snapshots.write(fs, DIR, 50, [stored(7, 0, 40)], durable=True)  # the log was cut back below it
    reopened = open_log(fs)
    assert snapshots(fs) == []
    assert [b.base_offset for b in reopened.producer_state()] == [0]
