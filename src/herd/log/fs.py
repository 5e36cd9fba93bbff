"""The filesystem the log is written through, and an in-memory twin that can crash.

The log touches files only through `FileSystem` and the `File` handles it opens. Every write appends at the end
of the file (segments, indexes and checkpoints are append-only; a checkpoint is replaced by writing a temporary
file and renaming it), so a handle needs only `append`, `pread`, `fsync`, `truncate` and `size`.

`OsFileSystem` maps these onto `os.*` calls. `MemoryFileSystem` keeps files in memory and, like franz-go's kfake
`persist_fs.go`, remembers what a power cut would leave behind:

- a file's content is durable up to its last `fsync`; bytes written after it are "unsynced";
- a directory entry (a file created, removed or renamed) is durable once its parent directory was fsynced.

`crash()` returns a fresh `MemoryFileSystem` holding what survives: the durable directory entries with their
durable content, plus, chosen by the caller, a prefix of each file's unsynced tail (a torn write). `fail("write",
n)` makes the n-th next write (or fsync, open, ...) raise `OSError(EIO)` (or the errno given, e.g. ENOSPC), so
tests can inject exactly one fault; a failed write first writes half of its bytes, as a short write followed by an
error would. `set_full(True, under)` is a disk that is full until told otherwise: every write to a file under
`under` raises ENOSPC and writes nothing (creating, renaming, removing and fsyncing still work, as on a real full
disk), until `set_full(False)`. Directories are not
modelled as durable or not: `makedirs`, `rmtree` and directory renames take effect at once. The runtime uses it
from worker threads (fsync, compaction), so whole-namespace walks iterate over a snapshot of it.

`lock(path)` takes an exclusive lock on a file, as Kafka locks each log directory with its `.lock` file
(apache/kafka core/src/main/scala/kafka/log/LogManager.scala, lockLogDirs; FileLock): on real files an OS lock
(`flock`) the kernel releases when the process dies, with the holder's pid and host written into the file so a
refused process can name it; in memory only a record of the held paths (one process owns a MemoryFileSystem).
`write_atomically` / `read_whole` are the small-file helpers (metadata, checkpoints) over either filesystem.
"""

from __future__ import annotations

import errno
import fcntl
import os
import posixpath
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

Bytes = bytes | bytearray | memoryview


class File(Protocol):
    def append(self, data: Bytes) -> None:
        """Write all of `data` at the end of the file."""
        ...

    def pread(self, offset: int, size: int) -> bytes:
        """Up to `size` bytes from `offset` (fewer at the end of the file)."""
        ...

    def fsync(self) -> None: ...

    def truncate(self, size: int) -> None: ...

    def size(self) -> int: ...

    def close(self) -> None: ...


class Lock(Protocol):
    def release(self) -> None: ...


class DirectoryLockedError(Exception):
    """The lock file of a data directory is held by another process (or another store in this one)."""

    def __init__(self, path: str, holder: str) -> None:
        directory = posixpath.dirname(path) or "."
        super().__init__(
            f"{directory} is in use by another herd broker ({holder}; lock file {path}): stop it, "
            f"or give this broker another log.dirs"
        )
        self.path = path
        self.holder = holder


class FileSystem(Protocol):
    def open(self, path: str, mode: str) -> File:
        """mode "r": read only; "a": append, created if missing; "w": created or emptied, then append."""
        ...

    def listdir(self, path: str) -> list[str]: ...

    def makedirs(self, path: str) -> None:
        """mkdir -p."""
        ...

    def exists(self, path: str) -> bool: ...

    def size(self, path: str) -> int: ...

    def remove(self, path: str) -> None: ...

    def rename(self, src: str, dst: str) -> None:
        """Atomic replace of `dst`."""
        ...

    def rmtree(self, path: str) -> None: ...

    def fsync_dir(self, path: str) -> None:
        """Make the entries of directory `path` (creations, removals, renames) durable."""
        ...

    def lock(self, path: str) -> Lock:
        """Take the exclusive lock of file `path` (created if missing); raises DirectoryLockedError if it is
        held, naming the holder."""
        ...


def write_atomically(fs: FileSystem, path: str, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` durably: a temporary file written and fsynced, renamed over `path`, and the
    directory fsynced. A failure leaves the old content (the temporary file is removed when possible). Without
    `durable` nothing is fsynced: a crash leaves the old content or the new, a power cut possibly a torn file
    (for files checked when read, whose owner fsyncs them later)."""
    tmp = path + ".tmp"
    try:
        f = fs.open(tmp, "w")
        try:
            f.append(data)
            if durable:
                f.fsync()
        finally:
            f.close()
        fs.rename(tmp, path)
    except OSError:
        try:
            if fs.exists(tmp):
                fs.remove(tmp)
        except OSError:
            pass
        raise
    if durable:
        fs.fsync_dir(posixpath.dirname(path) or ".")


def fsync_file(fs: FileSystem, path: str) -> None:
    """fsync a file written earlier (its directory entry is the caller's to make durable). Raises OSError
    (FileNotFoundError when it is gone)."""
    f = fs.open(path, "r")
    try:
        f.fsync()
    finally:
        f.close()


def read_whole(fs: FileSystem, path: str) -> bytes:
    """The content of a small file; raises FileNotFoundError (an OSError) if it is missing."""
    f = fs.open(path, "r")
    try:
        return f.pread(0, f.size())
    finally:
        f.close()


# ---------------------------------------------------------------------------------------------------------------
# Real files


# fdatasync: the data and the metadata needed to read it back (the size of an appended file), without the
# timestamps. Under concurrent appends and syncs of many partitions it costs ~30% less than fsync on ext4.
# Directory entries are still made durable with fsync (fsync_dir).
_datasync = getattr(os, "fdatasync", os.fsync)
# writev refuses more buffers than this at once (EINVAL): a group commit of many small batches has thousands.
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") and "SC_IOV_MAX" in os.sysconf_names else 1024


class OsFile:
    """A file descriptor; `size` is tracked here so appends and reads never need an fstat."""

    __slots__ = ("_fd", "_size")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._size = os.fstat(fd).st_size

    def append(self, data: Bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            self._size += written
            view = view[written:]

    def append_parts(self, parts: list[Bytes]) -> None:
        """Append the concatenation of `parts` with writev (no joined copy), at most IOV_MAX buffers a call."""
        views = [memoryview(p) for p in parts]
        views.reverse()  # consumed from the end: popping the next buffer is O(1)
        while views:
            written = os.writev(self._fd, views[: -_IOV_MAX - 1 : -1])
            self._size += written
            while views and written >= len(views[-1]):
                written -= len(views[-1])
                views.pop()
            if views and written:
                views[-1] = views[-1][written:]

    def pread(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def fsync(self) -> None:
        _datasync(self._fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        os.close(self._fd)


_OS_FLAGS = {
    "r": os.O_RDONLY,
    "a": os.O_RDWR | os.O_CREAT | os.O_APPEND,
    "w": os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC,
}


class _OsLock:
    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = -1


class OsFileSystem:
    def lock(self, path: str) -> Lock:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "pid unknown"
            os.close(fd)
            raise DirectoryLockedError(path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid={os.getpid()} host={socket.gethostname()}\n".encode(), 0)
        return _OsLock(fd)

    def open(self, path: str, mode: str) -> File:
        return OsFile(os.open(path, _OS_FLAGS[mode] | getattr(os, "O_CLOEXEC", 0), 0o644))

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def remove(self, path: str) -> None:
        os.remove(path)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------------------------------------------
# In-memory files that remember what is durable


@dataclass(slots=True, eq=False)
class _Inode:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""  # the content as of the last fsync

    def unsynced_tail(self) -> bytes | None:
        """The bytes written since the last fsync, or None if the file was rewritten (truncated) since."""
        if self.data[: len(self.durable)] != self.durable:
            return None
        return bytes(self.data[len(self.durable) :])


@dataclass(slots=True)
class _Faults:
    countdown: dict[str, int] = field(default_factory=dict)  # operation -> calls left before it fails
    codes: dict[str, int] = field(default_factory=dict)  # operation -> the errno it fails with
    only: dict[str, str] = field(default_factory=dict)  # operation -> the path ending the calls counted have
    full_under: str | None = None  # writes to files under this directory raise ENOSPC

    def check_space(self, path: str) -> None:
        under = self.full_under
        if under is not None and (under == "/" or path == under or path.startswith(under + "/")):
            raise OSError(errno.ENOSPC, "No space left on device (injected)", path)

    def check(self, op: str, path: str) -> None:
        left = self.countdown.get(op)
        if left is None or not str(path).endswith(self.only.get(op, "")):
            return
        if left > 1:
            self.countdown[op] = left - 1
            return
        del self.countdown[op]
        code = self.codes.pop(op, errno.EIO)
        raise OSError(code, f"injected {op} failure ({errno.errorcode.get(code, code)})", path)


class MemoryFile:
    __slots__ = ("_fs", "_path", "_inode", "_writable", "_closed")

    def __init__(self, fs: MemoryFileSystem, path: str, inode: _Inode, writable: bool) -> None:
        self._fs, self._path, self._inode, self._writable, self._closed = fs, path, inode, writable, False

    def _check(self, op: str, write: bool = False) -> None:
        if self._closed:
            raise ValueError(f"{self._path} is closed")
        if write and not self._writable:
            raise OSError(errno.EBADF, "file opened read-only", self._path)
        self._fs.faults.check(op, self._path)

    def append(self, data: Bytes) -> None:
        self._fs.faults.check_space(self._path)  # a full disk: nothing written
        try:
            self._check("write", write=True)
        except OSError:
            self._inode.data += memoryview(data)[: len(data) // 2]  # an injected failure is a short write
            raise
        self._inode.data += data

    def pread(self, offset: int, size: int) -> bytes:
        self._check("read")
        return bytes(self._inode.data[offset : offset + size])

    def fsync(self) -> None:
        self._check("fsync")
        self._inode.durable = bytes(self._inode.data)

    def truncate(self, size: int) -> None:
        self._check("truncate", write=True)
        del self._inode.data[size:]

    def size(self) -> int:
        return len(self._inode.data)

    def close(self) -> None:
        self._closed = True


KeepTorn = Callable[[str, bytes], int]  # (path, unsynced tail) -> how many of its bytes survive


class MemoryFileSystem:
    """Paths are POSIX-style strings; directories are implied by the files under them plus `makedirs`."""

    def __init__(self) -> None:
        self.files: dict[str, _Inode] = {}  # the live namespace
        self.durable_files: dict[str, _Inode] = {}  # the namespace as of the last fsync of each directory
        self.dirs: set[str] = {"/", "."}
        self.faults = _Faults()

    def fail(self, op: str, nth: int = 1, code: int = errno.EIO, *, path_endswith: str = "") -> None:
        """Make the `nth` next call of `op` ("write", "fsync", "read", "truncate", "rename", "remove", "open")
        raise OSError(`code`); with `path_endswith`, only calls on such paths count (a rename counts its
        source)."""
        self.faults.countdown[op] = nth
        self.faults.codes[op] = code
        self.faults.only[op] = path_endswith

    def set_full(self, full: bool = True, under: str = "/") -> None:
        """While `full`, every write to a file under `under` raises ENOSPC and writes nothing."""
        self.faults.full_under = _norm(under) if full else None

    def lock(self, path: str) -> Lock:
        """Never refused: the filesystem lives in one process, and a test that opens a store again on it
        without closing the first plays a restart (the first owner is gone)."""
        self._require_dir(posixpath.dirname(_norm(path)))
        return _MemoryLock()

    def crash(self, keep_torn: KeepTorn | None = None, *, keep_unsynced_entries: bool = False) -> MemoryFileSystem:
        """What a power cut leaves: durable entries and content, plus `keep_torn(path, tail)` bytes of each
        file's unsynced tail (default none). With `keep_unsynced_entries` the live directory entries survive
        instead of the durable ones (a filesystem that happened to write its metadata back)."""
        survivor = MemoryFileSystem()
        survivor.dirs = set(self.dirs)
        entries = self.files if keep_unsynced_entries else self.durable_files
        for path, inode in list(entries.items()):
            content = inode.durable
            tail = inode.unsynced_tail()
            if tail and keep_torn is not None:
                content += tail[: keep_torn(path, tail)]
            survivor.files[path] = _Inode(bytearray(content), content)
        survivor.durable_files = dict(survivor.files)
        return survivor

    def open(self, path: str, mode: str) -> File:
        path = _norm(path)
        self.faults.check("open", path)
        inode = self.files.get(path)
        if inode is None:
            if mode == "r":
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            self._require_dir(posixpath.dirname(path))
            inode = self.files[path] = _Inode()
        elif mode == "w":
            self.faults.check("truncate", path)
            inode.data.clear()
        return MemoryFile(self, path, inode, writable=mode != "r")

    def listdir(self, path: str) -> list[str]:
        path = _norm(path)
        self._require_dir(path)
        names = {p[len(path) + 1 :].split("/")[0] for p in [*self.files, *self.dirs] if p.startswith(path + "/")}
        return sorted(names)

    def makedirs(self, path: str) -> None:
        path = _norm(path)
        while path not in self.dirs:
            self.dirs.add(path)
            path = posixpath.dirname(path)

    def exists(self, path: str) -> bool:
        path = _norm(path)
        return path in self.files or path in self.dirs

    def size(self, path: str) -> int:
        return len(self._inode(path).data)

    def remove(self, path: str) -> None:
        self.faults.check("remove", path)
        self._inode(path)
        del self.files[_norm(path)]

    def rename(self, src: str, dst: str) -> None:
        """Files: the new entry is durable after `fsync_dir`. Directories (not modelled as durable or not) move
        at once with everything under them."""
        self.faults.check("rename", src)
        src, dst = _norm(src), _norm(dst)
        if src in self.dirs:
            self._move_tree(src, dst)
            return
        self.files[dst] = self._inode(src)
        del self.files[src]

    def _move_tree(self, src: str, dst: str) -> None:
        def moved(path: str) -> str:
            return dst + path[len(src) :] if path == src or path.startswith(src + "/") else path

        self.dirs = {moved(d) for d in self.dirs}
        self.files = {moved(p): i for p, i in list(self.files.items())}
        self.durable_files = {moved(p): i for p, i in list(self.durable_files.items())}

    def rmtree(self, path: str) -> None:
        path = _norm(path)
        self._require_dir(path)
        for table in (self.files, self.durable_files):
            for p in [p for p in list(table) if p.startswith(path + "/")]:
                del table[p]
        self.dirs = {d for d in self.dirs if d != path and not d.startswith(path + "/")}

    def fsync_dir(self, path: str) -> None:
        path = _norm(path)
        self.faults.check("fsync", path)
        for p in [p for p in list(self.durable_files) if posixpath.dirname(p) == path]:
            del self.durable_files[p]
        self.durable_files.update({p: i for p, i in list(self.files.items()) if posixpath.dirname(p) == path})

    def _inode(self, path: str) -> _Inode:
        inode = self.files.get(_norm(path))
        if inode is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return inode

    def _require_dir(self, path: str) -> None:
        if path not in self.dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)


class _MemoryLock:
    """Nothing to release: see `MemoryFileSystem.lock`."""

    def release(self) -> None:
        pass


def _norm(path: str) -> str:
    return posixpath.normpath(path)
