"""A segment roll that cannot create the new segment (ENOSPC) changes nothing: the partition stays readable and
writable, the next append rolls; a failed partition is recovered in place by `recover()`."""

from __future__ import annotations

import errno

import pytest
from batches import make_batch, read_all

from herd.log.api import KafkaStorageError, LogConfig
from herd.log.fs import MemoryFileSystem
from herd.log.store import SegmentStore

SMALL = LogConfig(segment_bytes=600, index_interval_bytes=100)


def values(log) -> list[bytes | None]:
    return [v for _, v in read_all(log)]


class NoNewFiles(MemoryFileSystem):
    """Creating a file whose name ends with `refused` fails with ENOSPC (a disk out of inodes)."""

    refused: str | None = None

    def open(self, path: str, mode: str):  # type: ignore[no-untyped-def]
        if self.refused is not None and path.endswith(self.refused) and not self.exists(path):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return super().open(path, mode)


@pytest.mark.parametrize("suffix", [".index", ".timeindex", ".log"])
def test_a_roll_that_cannot_create_the_new_segment_changes_nothing(suffix: str) -> None:
    fs = NoNewFiles()
    log = SegmentStore("/data", fs).open_partition("t", 0, SMALL)
    log.append(make_batch([b"a" * 400]), 0)
    files = fs.listdir("/data/t-0")
    fs.refused = suffix
    with pytest.raises(KafkaStorageError, match="No space left on device"):
        log.append(make_batch([b"b" * 400]), 0)
    fs.refused = None
    assert values(log) == [b"a" * 400]  # still readable
    assert log.failure is None and fs.listdir("/data/t-0") == files  # nothing half-created is left
    log.append(make_batch([b"c" * 400]), 0)  # the next append rolls
    assert values(log) == [b"a" * 400, b"c" * 400] and len(fs.listdir("/data/t-0")) > len(files)
    log.flush()
    again = SegmentStore("/data", fs.crash()).open_partition("t", 0, SMALL)
    assert values(again) == [b"a" * 400, b"c" * 400]


def test_a_failed_partition_is_recovered_in_place() -> None:
    fs = MemoryFileSystem()
    log = SegmentStore("/data", fs).open_partition("t", 0, SMALL)
    log.append(make_batch([b"durable"]), 0)
    log.flush()
    log.append(make_batch([b"not yet"]), 0)
    fs.fail("fsync")
    with pytest.raises(KafkaStorageError):
        log.flush()
    assert log.failure is not None
    with pytest.raises(KafkaStorageError):
        log.read(0, 1000)  # offline: reads refused too
    fs.fail("read")
    with pytest.raises(KafkaStorageError):
        log.recover()  # the disk still fails: stays failed
    assert log.failure is not None
    log.recover()
    assert log.failure is None and values(log) == [b"durable", b"not yet"]  # still in the file: kept
    log.append(make_batch([b"after"]), 0)
    assert values(log) == [b"durable", b"not yet", b"after"]
