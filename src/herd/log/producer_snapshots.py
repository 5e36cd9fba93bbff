"""Producer state snapshots: `<offset>.snapshot` files in a partition directory, as Kafka's ProducerStateManager
writes them (apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/log/ProducerStateManager.java,
`writeSnapshot`/`readSnapshot`; the layout is storage/src/main/resources/message/ProducerSnapshot.json, version 1).

A snapshot named after offset N holds what the idempotent producers had appended below N: for each of their
remembered batches the producer id and epoch, last sequence, last offset, offset delta (last minus first, of the
offsets and of the sequences alike), max timestamp, and -1 for the transaction fields herd does not have. The
file is big-endian:

    version int16 (1) | crc uint32 | count int32 | count x (producer id int64 | epoch int16 | last sequence int32 |
    last offset int64 | offset delta int32 | timestamp int64 | coordinator epoch int32 | txn first offset int64)

The producers that used transactions in the partition follow, one entry each with last offset -1, holding their
coordinator epoch and the first offset of their ongoing transaction (herd.log.transactions), as Kafka's entries
hold `coordinatorEpoch` and `currentTxnFirstOffset`.

The CRC32C covers everything after itself. Kafka writes one entry per producer (its last batch); herd writes one
per remembered batch, up to five per producer (Kafka's NUM_BATCHES_TO_RETAIN), oldest first, so that a retry of
any of them is still recognised after a restart. A Kafka reader keeps the last entry of each producer id, which
is the one Kafka itself would have written.

A file that is too short, has another version, a wrong length or a wrong CRC is a `CorruptSnapshotError`; the log
then falls back to an older snapshot or to the log itself (`herd.log.segments.SegmentLog.producer_state`).
"""

from __future__ import annotations

import posixpath
import struct
from collections.abc import Iterable

import crc32c

from herd.log.api import ProducerBatch
from herd.log.batch import INT32_MAX
from herd.log.fs import FileSystem, fsync_file, read_whole, write_atomically

SUFFIX = ".snapshot"
VERSION = 1
_PREFIX = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = 6  # the CRC covers the bytes after the version and itself


class CorruptSnapshotError(Exception):
    """A snapshot file that cannot be trusted (Kafka's CorruptSnapshotException)."""


def snapshot_name(offset: int) -> str:
    """`00000000000000001234.snapshot`: the offset padded as segment names are (Kafka's LogFileUtils)."""
    return f"{offset:020d}{SUFFIX}"


def snapshot_path(directory: str, offset: int) -> str:
    return posixpath.join(directory, snapshot_name(offset))


def snapshot_offsets(fs: FileSystem, directory: str) -> list[int]:
    """The offsets of the snapshot files in `directory`, ascending."""
    names = fs.listdir(directory)
    size = len(snapshot_name(0))
    return sorted(int(n[:20]) for n in names if n.endswith(SUFFIX) and len(n) == size and n[:20].isdigit())


def encode(batches: Iterable[ProducerBatch], transactions: Iterable[tuple[int, int, int, int]] = ()) -> bytes:
    """The snapshot file's bytes for `batches` (each producer's in offset order) and, after them, one entry per
    producer of the partition's transaction state (herd.log.transactions `entries()`: producer id, epoch,
    coordinator epoch, first offset of its ongoing transaction or -1), with last offset -1 as Kafka writes the
    entry of a producer whose only record is a marker."""
    entries = [
        _ENTRY.pack(
            b.producer_id,
            b.producer_epoch,
            b.last_sequence,
            b.last_offset,
            b.last_offset - b.base_offset,
            b.max_timestamp,
            -1,
            -1,
        )
        for b in batches
    ]
    entries += [
        _ENTRY.pack(pid, epoch, -1, -1, 0, -1, coordinator_epoch, first)
        for pid, epoch, coordinator_epoch, first in transactions
    ]
    body = struct.pack(">i", len(entries)) + b"".join(entries)
    return struct.pack(">hI", VERSION, crc32c.crc32c(body)) + body


def decode(data: bytes, *, log_append_time: bool, log_start_offset: int) -> list[ProducerBatch]:
    """The batches a snapshot file holds, in file order; raises CorruptSnapshotError. `log_append_time`: the
    topic stamps batches with their append time (their max timestamp is that time)."""
    if len(data) < _PREFIX.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a snapshot")
    version, crc, count = _PREFIX.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if count < 0 or len(data) != _PREFIX.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"{len(data)} bytes do not hold {count} entries")
    computed = crc32c.crc32c(memoryview(data)[_CRC_FROM:])
    if computed != crc:
        raise CorruptSnapshotError(f"CRC is no longer valid: stored {crc}, computed {computed}")
    out = []
    for pid, epoch, last_seq, last_offset, delta, timestamp, _, _ in _ENTRY.iter_unpack(data[_PREFIX.size :]):
        if last_offset < 0 or delta < 0:
            continue  # Kafka's entry of a producer whose only record is a transaction marker: no batch to recall
        base_seq = (last_seq - delta) % (INT32_MAX + 1)
        out.append(
            ProducerBatch(
                pid,
                epoch,
                base_seq,
                last_seq,
                last_offset - delta,
                last_offset,
                delta + 1,
                timestamp,
                timestamp if log_append_time else -1,
                log_start_offset,
            )
        )
    return out


def decode_transactions(data: bytes) -> list[tuple[int, int, int, int]]:
    """The transaction state entries (producer id, epoch, coordinator epoch, ongoing transaction's first offset)
    of a snapshot file `encode` wrote; raises CorruptSnapshotError."""
    decode(data, log_append_time=False, log_start_offset=0)  # the checks
    return [
        (pid, epoch, coordinator_epoch, first)
        for pid, epoch, _, last_offset, _, _, coordinator_epoch, first in _ENTRY.iter_unpack(data[_PREFIX.size :])
        if last_offset < 0
    ]


def read_transactions(fs: FileSystem, directory: str, offset: int) -> list[tuple[int, int, int, int]]:
    """`decode_transactions` of the snapshot at `offset`; raises CorruptSnapshotError, OSError."""
    return decode_transactions(read_whole(fs, snapshot_path(directory, offset)))


def read(fs: FileSystem, directory: str, offset: int, *, log_append_time: bool,
         log_start_offset: int) -> list[ProducerBatch]:  # fmt: skip
    """The batches of the snapshot at `offset`; raises CorruptSnapshotError, OSError if it cannot be read."""
    data = read_whole(fs, snapshot_path(directory, offset))
    return decode(data, log_append_time=log_append_time, log_start_offset=log_start_offset)


def write(
    fs: FileSystem,
    directory: str,
    offset: int,
    batches: Iterable[ProducerBatch],
    *,
    durable: bool,
    transactions: Iterable[tuple[int, int, int, int]] = (),
) -> None:
    """Write the snapshot at `offset` (a temporary file renamed into place, so a crash leaves the whole file or
    none). Without `durable` nothing is fsynced (a power cut may leave a file whose CRC fails): the caller fsyncs
    it with the log (`sync`). Raises OSError."""
    write_atomically(fs, snapshot_path(directory, offset), encode(batches, transactions), durable=durable)


def sync(fs: FileSystem, directory: str, offset: int) -> None:
    """fsync the snapshot `write` wrote at `offset` (its directory entry is made durable by the caller's fsync of
    the directory); a snapshot deleted meanwhile is skipped. Raises OSError."""
    try:
        fsync_file(fs, snapshot_path(directory, offset))
    except FileNotFoundError:
        pass
