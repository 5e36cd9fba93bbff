"""The PostgreSQL log's compaction functions (herd.log.postgres.compact) with transactions: fed chunk by chunk,
as `PgPartitionLog.compact` reads rows, the records of an aborted transaction are neither mapped nor kept, a
COMMIT marker goes only after its transaction's batches and delete.retention.ms, and the state carries from one
chunk to the next. Pure functions: no database."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from herd.log.batch import parse_header
from herd.log.compaction import CleanedTransactions
from herd.log.postgres.compact import filter_batches, map_latest
from herd.log.records import control_batch

T0 = 1_700_000_000_000
DAY = 86_400_000
P, Q = 1000, 2000


def at(batch: bytes, offset: int) -> bytes:
    return offset.to_bytes(8, "big") + batch[8:]  # the base offset is outside the CRC


def keyed(offset: int, key: bytes, value: bytes, pid: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=pid >= 0, producer_id=pid,
                                        producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                                        batch_size=1 << 20)  # fmt: skip
    builder.append(0, timestamp=T0, key=key, value=value, headers=[])
    return at(bytes(builder.build()), offset)


def marker(offset: int, pid: int, commit: bool) -> bytes:
    return at(control_batch(pid, 0, commit, 0, T0), offset)


LOG = [
    keyed(0, b"K", b"1"),
    keyed(1, b"K", b"2", P),
    marker(2, P, False),
    keyed(3, b"L", b"1", Q),
    marker(4, Q, True),
    keyed(5, b"L", b"2"),
    keyed(6, b"M", b"1", Q),
    marker(7, Q, True),
]
ABORTED = [(P, 1)]


def run(chunks: list[list[bytes]], now: int, active: set[int]):  # noqa: ANN201
    latest: dict[bytes, int] = {}
    last: dict[int, int] = {}
    mapping = CleanedTransactions(ABORTED, active, last)
    for chunk in chunks:
        map_latest(chunk, latest, mapping)
    cleaning = CleanedTransactions(ABORTED, active, last)
    return [filter_batches(chunk, latest, now, DAY, cleaning) for chunk in chunks]


def test_aborted_records_go_and_markers_follow_their_data_across_chunks() -> None:
    chunks = [LOG[:2], LOG[2:4], LOG[4:]]  # each transaction split between two chunks
    changes = run(chunks, T0 + DAY, set())
    deleted = [o for c in changes for o in c.deleted]
    assert deleted == [1, 3]  # the aborted K=2 and Q's replaced L=1; K=1 stays, Q's first marker saw its data
    assert not [c for c in changes if c.rewritten]
    # a second pass over what is left: Q's first marker has no data any more and is a day old
    left = [b for b in LOG if parse_header(b).base_offset not in deleted]
    assert [o for c in run([left], T0 + DAY, set()) for o in c.deleted] == [4]
    assert run([left], T0 + DAY - 1, set())[0].deleted == []  # delete.retention.ms not passed yet
    assert run([left], T0 + DAY, {Q})[0].deleted == [4]  # Q's last batch (offset 7) is another
