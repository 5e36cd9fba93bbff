"""Micro-benchmark of the segment log on the real filesystem: append and read throughput, no network.

    .venv/bin/python bench/bench_log.py [--mb 512] [--batch-kb 16] [--value-bytes 1024]

Batches are built once with kio (16 KB of 1 KB values by default, like a producer's batch.size) and appended
over and over, as Produce would hand them to the log; then the whole log is read back in 1 MB fetches.
"""

from __future__ import annotations

import argparse
import datetime
import io
import tempfile
import time

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from herd.log.api import LogConfig
from herd.log.store import SegmentStore


def make_batch(value_bytes: int, count: int) -> bytes:
    stamp = TZAwareMicros.parse(datetime.datetime.now(datetime.UTC).replace(microsecond=0))
    records = tuple(
        Record(
            attributes=i8(0), timestamp=stamp, offset=i64(i), key=b"key-%d" % i, value=b"v" * value_bytes, headers=()
        )  # fmt: skip
        for i in range(count)
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, NewRecordBatch(producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
                                           records=records, attributes=i16(0)))  # fmt: skip
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--fetch-kb", type=int, default=1024)
    args = parser.parse_args()
    batch = make_batch(args.value_bytes, max(1, args.batch_kb * 1024 // (args.value_bytes + 20)))
    appends = args.mb * 1024 * 1024 // len(batch)
    with tempfile.TemporaryDirectory() as root:
        store = SegmentStore(root)
        log = store.open_partition("bench", 0, LogConfig(segment_bytes=128 * 1024 * 1024))
        start = time.perf_counter()
        for _ in range(appends):
            log.append(batch, 0)
        elapsed = time.perf_counter() - start
        total = appends * len(batch)
        report("append", total, elapsed, appends * (log.log_end_offset // appends))
        start = time.perf_counter()
        offset, read_bytes = 0, 0
        while offset < log.log_end_offset:
            data = log.read(offset, args.fetch_kb * 1024)
            read_bytes += len(data)
            offset = last_offset_after(data)
        report("read", read_bytes, time.perf_counter() - start, log.log_end_offset)
        start = time.perf_counter()
        log.flush()
        print(f"flush (fsync of {total / 2**20:.0f} MB): {time.perf_counter() - start:.2f} s")
        store.close()


def last_offset_after(data: bytes) -> int:
    """The offset after the last batch of a read, from the last batch's header."""
    pos = 0
    while True:
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + 12 + length >= len(data):
            base = int.from_bytes(data[pos : pos + 8], "big")
            return base + int.from_bytes(data[pos + 23 : pos + 27], "big") + 1
        pos += 12 + length


def report(name: str, total: int, elapsed: float, records: int) -> None:
    print(f"{name:6s} {total / 2**20 / elapsed:8.0f} MB/s  {records / elapsed:10.0f} records/s  "
          f"({total / 2**20:.0f} MB in {elapsed:.2f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
