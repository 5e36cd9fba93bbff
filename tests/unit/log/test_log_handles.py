"""The log's descriptors stay under herd.log.max.open.files however many partitions are used (real files, the
process's own descriptor count), data read back through reopened descriptors is intact, and running out of
descriptors is a storage error for the one request, not a failed partition."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from batches import make_batch, records_of

from herd.log.api import LogConfig
from herd.log.fs import OsFileSystem
from herd.log.handles import BoundedFileSystem
from herd.log.store import SegmentStore

SMALL = LogConfig(segment_bytes=1500, index_interval_bytes=200)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_partitions_keep_the_descriptor_count_bounded_and_their_data(tmp_path: Path) -> None:
    cap = 8
    fs = BoundedFileSystem(OsFileSystem(), cap)
    store = SegmentStore(str(tmp_path / "data"), fs)
    before = open_fds()
    logs = [store.open_partition("t", p, SMALL) for p in range(150)]
    peak = 0
    for round_ in range(4):  # several segments each (1,500-byte segments), so rolls and sealed reads happen
        for p, log in enumerate(logs):
            log.append(make_batch([b"p%d-r%d-%s" % (p, round_, b"x" * 300)]), 0)
            peak = max(peak, open_fds() - before)
        for log in logs:
            log.flush()
    for p, log in enumerate(logs):
        values = [records_of(log.read(offset, 1 << 20))[0][1] for offset in range(4)]
        assert values == [b"p%d-r%d-%s" % (p, r, b"x" * 300) for r in range(4)]
        peak = max(peak, open_fds() - before)
    assert peak <= cap + 1, f"{peak} descriptors open for {len(logs)} partitions with a bound of {cap}"
    assert fs.open_count <= cap and fs.closed_for_room > len(logs)
    store.close()
    # everything durable: a fresh store (unbounded) reads the same
    again = SegmentStore(str(tmp_path / "data"))
    for p in (0, 77, 149):
        log = again.open_partition("t", p, SMALL)
        assert log.log_end_offset == 4
    again.close()


CHILD = textwrap.dedent("""
    import os, resource, sys
    sys.path.insert(0, sys.argv[2])
    from batches import make_batch, records_of
    from herd.log.api import KafkaStorageError, LogConfig
    from herd.log.fs import OsFileSystem
    from herd.log.handles import BoundedFileSystem, max_open_files
    from herd.log.store import SegmentStore

    def hog_all(fds):
        try:
            while True:
                fds.append(os.open("/dev/null", os.O_RDONLY))
        except OSError:
            pass

    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    assert max_open_files(0) == 32
    fs = BoundedFileSystem(OsFileSystem(), max_open_files(0))
    store = SegmentStore(sys.argv[1], fs)
    logs = [store.open_partition("t", p, LogConfig()) for p in range(300)]  # 300 partitions, 64 descriptors
    for p, log in enumerate(logs):
        log.append(make_batch([b"v%d" % p]), 0)
    hog = []
    hog_all(hog)  # every descriptor taken by something else (connections, say)
    logs[0].append(make_batch([b"again"]), 0)  # its file was closed: idle ones are closed to reopen it
    print("appended with", fs.open_count, "open")
    with fs.mutex:
        fs._close_idle(fs.open_count)
    hog_all(hog)  # now nothing idle is left to close
    try:
        logs[1].append(make_batch([b"again"]), 0)
        print("appended")
    except KafkaStorageError as error:
        print("storage error:", error)
    assert logs[1].failure is None, logs[1].failure  # not failed for good
    for fd in hog:
        os.close(fd)
    logs[1].append(make_batch([b"again"]), 0)
    for p, log in enumerate(logs):
        assert [r[1] for r in records_of(log.read(0, 1 << 20))][:1] == [b"v%d" % p]
    assert [r[1] for r in records_of(logs[1].read(0, 1 << 20))] == [b"v1", b"again"]
    print("ok", len(os.listdir("/proc/self/fd")))
""")


def test_out_of_descriptors_is_a_storage_error_and_not_a_failed_partition(tmp_path: Path) -> None:
    tests = str(Path(__file__).parents[2])  # where the child imports batches from
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "data"), tests], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("appended with"), lines
    assert lines[1].startswith("storage error:") and "Too many open files" in lines[1], lines
    assert lines[-1].startswith("ok")
