"""A bound on the file descriptors the log keeps open: `BoundedFileSystem` wraps a `FileSystem`.

Every partition keeps its active segment's `.log` open, and a read loads a sealed one; with 100,000 partitions
that is more descriptors than RLIMIT_NOFILE allows, and once it is reached every open() fails, accept() on the
listeners included. Kafka has no bound (it keeps every segment open and asks the operator to raise the limit);
herd keeps at most `max_open` real descriptors for its files, like a database's file-descriptor cache
(PostgreSQL's fd.c virtual file descriptors):

- `open` returns a `LazyFile`, a handle that owns a real file while it is among the `max_open` most recently
  used ones; the least recently used is closed when another one needs a descriptor, and reopened by its next
  operation ("w" files reopen in "a" mode: they were emptied once, when first opened). Its size is remembered
  while it is closed, so appends and reads need no fstat.
- A handle in use (an append, read or fsync running, possibly in another thread: the coordinator's flusher,
  compaction) is pinned and never closed under it; the bound may be passed for as long as that lasts.
- An open that fails with EMFILE/ENFILE (other descriptors: connections, a directory fsync) closes half of the
  idle handles and tries once more; if it still fails, the OSError goes up as any disk error does
  (KAFKA_STORAGE_ERROR for the request, nothing is written), and it is logged. Reaching the bound is logged once.

A closed descriptor's unsynced data is still flushed by a later fsync of the file through a new descriptor
(fsync works on the inode). Operations cost two uncontended lock round trips more each; bench_produce_fetch
showed no change in broker CPU per GB beyond its noise (figures in the commit that documented this).
"""

from __future__ import annotations

import errno
import logging
import resource
import threading
from collections import OrderedDict

from herd.log.fs import Bytes, File, FileSystem, Lock

log = logging.getLogger(__name__)

MIN_OPEN = 16


def descriptor_limit() -> int:
    """The process's RLIMIT_NOFILE soft limit (2**20 when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if 0 < soft != resource.RLIM_INFINITY else 1 << 20


def max_open_files(configured: int) -> int:
    """`configured` (herd.log.max.open.files), or half of the process's RLIMIT_NOFILE soft limit when it is 0,
    leaving the other half to connections and short-lived opens."""
    return configured if configured > 0 else max(MIN_OPEN, descriptor_limit() // 2)


class BoundedFileSystem:
    """A `FileSystem` whose open files hold at most `max_open` descriptors of `inner` (see the module doc)."""

    def __init__(self, inner: FileSystem, max_open: int) -> None:
        self.inner = inner
        self.max_open = max(1, max_open)
        self.mutex = threading.Lock()
        self.lru: OrderedDict[LazyFile, None] = OrderedDict()  # handles holding a descriptor, oldest first
        self.closed_for_room = 0  # descriptors closed to stay under the bound (for tests and operators)
        self._bound_logged = False

    # -- FileSystem ------------------------------------------------------------------------------------------

    def open(self, path: str, mode: str) -> File:
        handle = LazyFile(self, path, mode)
        with self.mutex:
            handle.file = self._open(path, mode)
            self.lru[handle] = None
            self._make_room()
        return handle

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def makedirs(self, path: str) -> None:
        self.inner.makedirs(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def size(self, path: str) -> int:
        return self.inner.size(path)

    def remove(self, path: str) -> None:
        self.inner.remove(path)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def rmtree(self, path: str) -> None:
        self.inner.rmtree(path)

    def fsync_dir(self, path: str) -> None:
        self._retry_emfile(lambda: self.inner.fsync_dir(path), locked=False)  # also from the flusher's threads

    def lock(self, path: str) -> Lock:
        """The data directory's lock: one descriptor for the life of the store, outside the bound."""
        return self._retry_emfile(lambda: self.inner.lock(path), locked=False)

    # -- descriptors (called with the lock held) ---------------------------------------------------------------

    @property
    def open_count(self) -> int:
        return len(self.lru)

    def _open(self, path: str, mode: str) -> File:
        return self._retry_emfile(lambda: self.inner.open(path, mode), locked=True)

    def _retry_emfile(self, operation, *, locked: bool):  # type: ignore[no-untyped-def]
        """`operation()`, tried once more after closing idle handles if descriptors ran out; `locked` says
        whether the caller holds `mutex` (closing handles needs it)."""
        try:
            return operation()
        except OSError as error:
            if error.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            if locked:
                freed = self._close_idle(max(1, len(self.lru) // 2))
            else:
                with self.mutex:
                    freed = self._close_idle(max(1, len(self.lru) // 2))
            log.error(
                "too many open files (%s) opening %s: closed %d idle segment files and retrying; lower "
                "herd.log.max.open.files (%d) or raise the open-files limit (ulimit -n)",
                error.strerror,
                error.filename,
                freed,
                self.max_open,
            )
            return operation()

    def _make_room(self) -> None:
        excess = len(self.lru) - self.max_open
        if excess <= 0:
            return
        if not self._bound_logged:
            self._bound_logged = True
            log.warning(
                "herd.log.max.open.files (%d) reached: the least recently used segment files are closed "
                "and reopened when needed",
                self.max_open,
            )
        self._close_idle(excess)

    def _close_idle(self, count: int) -> int:
        closed = 0
        for handle in list(self.lru):
            if closed >= count:
                break
            if handle.pins == 0:
                handle.release()
                closed += 1
        self.closed_for_room += closed
        return closed


class LazyFile:
    """A `File` of a `BoundedFileSystem`: its descriptor may be closed while unused, and is reopened on use."""

    __slots__ = ("fs", "path", "mode", "file", "size_known", "pins", "closed", "__weakref__")

    def __init__(self, fs: BoundedFileSystem, path: str, mode: str) -> None:
        self.fs, self.path, self.mode = fs, path, mode
        self.file: File | None = None
        self.size_known = 0
        self.pins = 0
        self.closed = False

    def _pin(self) -> File:
        fs = self.fs
        with fs.mutex:
            f = self.file
            if f is None:
                if self.closed:
                    raise ValueError(f"{self.path} is closed")
                f = self.file = fs._open(self.path, "a" if self.mode == "w" else self.mode)
                fs.lru[self] = None
                fs._make_room()
            else:
                fs.lru.move_to_end(self)
            self.pins += 1
        return f

    def _unpin(self) -> None:
        with self.fs.mutex:
            self.pins -= 1

    def release(self) -> None:
        """Close the descriptor (with the lock held; the handle stays usable)."""
        f = self.file
        if f is not None:
            self.size_known = f.size()  # before `file` is cleared: `size()` reads one or the other without the lock
        self.file = None
        self.fs.lru.pop(self, None)
        if f is not None:
            f.close()

    def append(self, data: Bytes) -> None:
        f = self._pin()
        try:
            f.append(data)
        finally:
            self._unpin()

    def append_parts(self, parts: list[Bytes]) -> None:
        f = self._pin()
        try:
            append_parts = getattr(f, "append_parts", None)
            if append_parts is not None:
                append_parts(parts)
            else:
                f.append(b"".join(parts))
        finally:
            self._unpin()

    def pread(self, offset: int, size: int) -> bytes:
        f = self._pin()
        try:
            return f.pread(offset, size)
        finally:
            self._unpin()

    def fsync(self) -> None:
        f = self._pin()
        try:
            f.fsync()
        finally:
            self._unpin()

    def truncate(self, size: int) -> None:
        f = self._pin()
        try:
            f.truncate(size)
        finally:
            self._unpin()

    def size(self) -> int:
        f = self.file
        return f.size() if f is not None else self.size_known

    def close(self) -> None:
        with self.fs.mutex:
            self.closed = True
            self.release()
