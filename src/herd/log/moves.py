"""Moving a partition to another of `log.dirs` while it keeps serving (AlterReplicaLogDirs).

Kafka makes a *future* log `<topic>-<partition>.<id>-future` in the target directory, fills it from the current
one with a ReplicaAlterLogDirsThread and, once it caught up, swaps them (apache/kafka core/src/main/scala/kafka/
server/ReplicaManager.scala alterReplicaLogDirs, core/src/main/scala/kafka/log/LogManager.scala
replaceCurrentWithFutureLog). herd copies files instead of fetching records, in three steps:

1. `Move.begin`, on the loop: the copy's directory is made and the log rolls, so everything before the new
   (empty) active segment is sealed and never written again;
2. `Move.copy_sealed`, in a worker thread: the sealed segments' files are copied and fsynced while the loop goes
   on serving (appends go to the new active segment; retention may delete a sealed segment meanwhile: it is
   skipped, and removed from the copy in step 3);
3. `Move.finish`, on the loop, in one synchronous call (nothing else touches the log meanwhile): the log is
   closed (flushed, checkpointed), whatever changed since step 1 is copied (the active segment, segments rolled
   since, the checkpoint, partition.metadata), files the source no longer has are removed from the copy, the copy
   and its root are fsynced, then
   a. the source directory is renamed to its deletion name `<topic>-<partition>.<id>-delete` and its root
      fsynced: the commit point;
   b. the copy is renamed `<topic>-<partition>` and its root fsynced;
   c. the log reopens from the copy (the same object: whoever holds it goes on) and the old files are removed.

The order makes a crash at any point leave exactly one good copy, which `SegmentStore` finds at start: before (a)
the partition's own directory exists and the copy (complete or not) is removed; after (a) and before (b) there is
no partition directory but a complete copy, which is renamed into place; after (b) the deletion leftover is
removed like any other. Kafka renames the future log first and the source after, so a crash in between leaves two
directories and a broker that refuses to start ("Duplicate log directories"); herd's order never does.

A move that fails before the commit point is abandoned (the copy removed, the log reopened where it was); a
cancelled move (the partition deleted, another target asked for, the store closed) stops at its next chunk.
Kafka's future log lag (DescribeLogDirs `offset_lag`) is the serving log's end offset less what the copy holds.
"""

from __future__ import annotations

import logging
import posixpath
import threading
import uuid
from collections.abc import Callable

from herd.log.api import KafkaStorageError
from herd.log.fs import FileSystem
from herd.log.segments import SegmentLog

log = logging.getLogger(__name__)

FUTURE_SUFFIX = "-future"
CHUNK = 8 * 1024 * 1024
_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


class MoveCancelled(Exception):
    """The move was cancelled while its files were being copied."""


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's LocalLog.logFutureDirName: `<topic>-<partition>.<unique id>-future` (Kafka refuses a move whose
    name would exceed 255 characters, InvalidTopicException "The topic name is too long.")."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


class Move:
    """One partition's move from its directory `source` to `target_root` (see the module docstring)."""

    def __init__(
        self,
        fs: FileSystem,
        log: SegmentLog,
        source: str,
        target_root: str,
        future: str,
        marker: str,
        sealed: list[str],
        on_done: Callable[[Move], None],
    ) -> None:
        self.fs, self._log = fs, log
        self.source, self.target_root, self.future, self._marker = source, target_root, future, marker
        self.target = posixpath.join(target_root, posixpath.basename(source))
        self._sealed = sealed
        self._roll_point = log.log_end_offset
        self._copied: dict[str, int] = {}  # file name -> size copied
        self._copied_end = log.log_start_offset  # the copy holds the offsets below this
        self.copied_bytes = 0  # of segment logs, as DescribeLogDirs sizes a partition
        self.cancelled = threading.Event()
        self.finished = False
        self._leftover = future  # where the copy is now (a cancelled one is renamed for deletion)
        self._on_done = on_done

    @classmethod
    def begin(
        cls,
        fs: FileSystem,
        log: SegmentLog,
        source: str,
        target_root: str,
        marker: str,
        on_done: Callable[[Move], None],
    ) -> Move:
        """Make the copy's directory and roll the log (step 1); `marker` is the deletion name the source gets at
        the commit point. Raises KafkaStorageError (nothing is left behind)."""
        future = posixpath.join(target_root, future_dir_name(log.topic, log.partition))
        try:
            fs.makedirs(future)
        except OSError as error:
            raise KafkaStorageError(f"cannot create {future}: {error}") from error
        try:
            log.roll()
        except KafkaStorageError:
            _remove_quietly(fs, future)
            raise
        end = log.log_end_offset  # the base of the new active segment: every segment below it is sealed
        sealed = sorted(
            name
            for name in fs.listdir(source)
            if name.endswith(_SEGMENT_SUFFIXES) and name[:20].isdigit() and int(name[:20]) < end
        )
        return cls(fs, log, source, target_root, future, marker, sealed, on_done)

    @property
    def offset_lag(self) -> int:
        """How far the copy is behind the serving log's end offset."""
        return max(self._log.log_end_offset - self._copied_end, 0)

    def copy_sealed(self) -> None:
        """Step 2, in a worker thread: copy and fsync the sealed segments' files. Raises MoveCancelled or
        OSError (the move is then abandoned by `finish`)."""
        for name in self._sealed:
            try:
                self._copy(name)
            except FileNotFoundError:
                if self.cancelled.is_set():
                    raise MoveCancelled() from None
                # retention deleted the segment meanwhile: `finish` leaves it out of the copy
        self._copied_end = self._roll_point

    def finish(self, error: BaseException | None = None) -> bool:
        """Step 3, on the loop, after `copy_sealed` returned (`error`: what it raised). True if the partition
        now lives in the target root; False if the move was cancelled or abandoned (the partition stays where
        it was, serving). Raises nothing: failures are logged."""
        try:
            if self.cancelled.is_set():
                self._remove_copy()
                return False
            if error is not None or self._log.failure is not None:
                self._abandon(
                    f"copying its sealed segments failed: {error}"
                    if error is not None
                    else f"the partition failed: {self._log.failure}"
                )
                return False
            self.finished = self._switch()
            return self.finished
        finally:
            self._on_done(self)

    def cancel(self, *, set_aside: str | None = None) -> None:
        """Stop the move (on the loop): the copy is removed by `finish`. With `set_aside` (a deletion name in the
        target root), the copy is first renamed to it and its root fsynced, so a crash can no longer make it the
        partition (when the partition itself is being deleted); failing that, the copy is removed at once."""
        self.cancelled.set()
        if set_aside is None:
            return
        try:
            self.fs.rename(self.future, set_aside)
            self._leftover = set_aside
            self.fs.fsync_dir(self.target_root)
        except OSError as error:
            log.error("could not set aside %s, the copy of a cancelled move (%s): removing it", self.future, error)
            _remove_quietly(self.fs, self._leftover)

    # -- internals -----------------------------------------------------------------------------------------------

    def _switch(self) -> bool:
        name = f"{self._log.topic}-{self._log.partition}"
        try:
            self._log.close()  # flushed and checkpointed: the source directory holds the whole partition
            self._copy_rest()
        except (OSError, KafkaStorageError) as error:
            self._abandon(f"copying it failed: {error}")
            self._reopen(self.source)
            return False
        source_root = posixpath.dirname(self.source)
        try:
            self.fs.rename(self.source, self._marker)
        except OSError as error:  # the source is where it was
            self._abandon(f"renaming {self.source} failed: {error}")
            self._reopen(self.source)
            return False
        self._fsync_root(source_root)  # the commit point: from here on the copy is the partition
        try:
            self.fs.rename(self.future, self.target)
        except OSError as error:
            return self._undo_commit(error)
        self._fsync_root(self.target_root)
        if self._reopen(self.target):
            log.info("moved %s from %s to %s", name, source_root, self.target_root)
        _remove_quietly(self.fs, self._marker)
        return True

    def _copy_rest(self) -> None:
        """Copy every file of the (closed) source that is not in the copy as it is now; remove from the copy
        what the source no longer has; fsync the copy's directory and root."""
        names = self.fs.listdir(self.source)
        for name in names:
            if self._copied.get(name) != self.fs.size(posixpath.join(self.source, name)):
                self._copy(name)
        for name in self.fs.listdir(self.future):
            if name not in names:
                self.fs.remove(posixpath.join(self.future, name))
        self.fs.fsync_dir(self.future)
        self.fs.fsync_dir(self.target_root)

    def _copy(self, name: str) -> None:
        """Copy one file of the source into the copy, fsynced; raises FileNotFoundError if the source has no such
        file, MoveCancelled, OSError."""
        source = self.fs.open(posixpath.join(self.source, name), "r")
        try:
            target = self.fs.open(posixpath.join(self.future, name), "w")
            try:
                size = 0
                while chunk := source.pread(size, CHUNK):
                    if self.cancelled.is_set():
                        raise MoveCancelled()
                    target.append(chunk)
                    size += len(chunk)
                    if name.endswith(".log"):
                        self.copied_bytes += len(chunk)
                target.fsync()
            finally:
                target.close()
        finally:
            source.close()
        self._copied[name] = size

    def _undo_commit(self, error: OSError) -> bool:
        """The copy could not take the partition's name: put the source back (the copy is then removed), or,
        failing that, leave both for the next start, which finishes the move."""
        try:
            self.fs.rename(self._marker, self.source)
        except OSError as again:
            log.error(
                "moving %s: renaming %s failed (%s), and renaming %s back too (%s): the partition is offline; "
                "restart herd to finish the move",
                self.source,
                self.future,
                error,
                self._marker,
                again,
            )
            return False
        self._fsync_root(posixpath.dirname(self.source))
        self._abandon(f"renaming {self.future} failed: {error}")
        self._reopen(self.source)
        return False

    def _abandon(self, why: str) -> None:
        log.error(
            "moving %s to %s was abandoned, the partition stays where it is: %s", self.source, self.target_root, why
        )
        self._remove_copy()

    def _remove_copy(self) -> None:
        _remove_quietly(self.fs, self._leftover)

    def _reopen(self, directory: str) -> bool:
        try:
            self._log.reopen_in(directory)
            return True
        except KafkaStorageError as error:
            log.error(
                "%s-%d cannot be reopened from %s after a move: %s; it is offline until herd restarts",
                self._log.topic,
                self._log.partition,
                directory,
                error,
            )
            return False

    def _fsync_root(self, root: str) -> None:
        try:
            self.fs.fsync_dir(root)
        except OSError as error:  # the rename may not be durable yet; a crash is resolved at start either way
            log.error("could not fsync %s during a move: %s", root, error)


def _remove_quietly(fs: FileSystem, path: str) -> None:
    try:
        if fs.exists(path):
            fs.rmtree(path)
    except OSError as error:
        log.warning("could not remove %s: %s (removed at the next start)", path, error)
