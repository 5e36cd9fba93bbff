"""The embedded `LogStore`: the partition directories under `log.dirs`, their locks and their metadata files.

    <root>/.lock                                   held by the broker using the directory (flock), in every root
           topics.json                             the cluster's topic metadata (herd.cluster.topics), first root only
           <topic>-<partition>/                    one `SegmentLog` (herd.log.segments)
                               partition.metadata  the topic id (and configs) the partition belongs to
           <topic>-<partition>.<id>-delete         a partition whose deletion was decided, not yet finished
           <topic>-<partition>.<id>-future         a copy being made by a move to this root (herd.log.moves)

`log.dirs` may name several directories (roots), as Kafka's LogManager takes them (apache/kafka core/src/main/
scala/kafka/log/LogManager.scala): a partition lives in exactly one of them, and a new one goes to the root
holding the fewest partitions (LogManager.nextLogDirs; on a tie, the first in log.dirs). AlterReplicaLogDirs
moves a partition to another root while it keeps serving (herd.log.moves).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import posixpath
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from herd.log.api import KafkaStorageError, LogConfig
from herd.log.fs import FileSystem, Lock, OsFileSystem, read_whole, write_atomically
from herd.log.moves import FUTURE_SUFFIX, Move
from herd.log.producer_state import ProducerStates
from herd.log.segments import SegmentLog

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
PARTITION_METADATA = "partition.metadata"
DELETE_SUFFIX = "-delete"
_DELETE_NAME = re.compile(r".+-\d+\.([0-9a-f]{32})-delete")
_FUTURE_NAME = re.compile(r"(.+)\.[0-9a-f]{32}" + FUTURE_SUFFIX)

Key = tuple[str, int]


class LogDirsError(Exception):
    """The partition directories under log.dirs cannot be served as they are (one partition in two roots); the
    broker must not start until someone removes one copy."""


class LogDirNotFoundError(ValueError):
    """A directory that is not one of log.dirs (Kafka's LogDirNotFoundException, LOG_DIR_NOT_FOUND)."""


@dataclass(frozen=True, slots=True)
class StoredPartition:
    """One partition's log in a root, as DescribeLogDirs reports it."""

    topic: str
    partition: int
    size: int  # bytes of its segment files
    offset_lag: int  # 0 for the serving log; for a move's copy, how far it is behind the serving log's end
    is_future: bool  # the copy being made by a move


class SegmentStore:
    """A `LogStore`: one directory per partition, named `<topic>-<partition>` as in Kafka, in one of `roots`.

    Opening the store first takes every root's lock (`<root>/.lock`, held until `close`; a second broker on any of
    the same directories gets DirectoryLockedError), then finishes or undoes moves a crash interrupted (a partition
    with a `-future` copy and its own directory stays where it was, the copy is removed; a copy without the
    partition's directory is the finished move's result and takes the partition's name: herd.log.moves), then
    lists the partitions of every root: one found in two roots refuses the start with LogDirsError, as Kafka's
    LogManager does ("Duplicate log directories for ... are found in both ..."), deleting neither.

    Deleting a partition renames its directory to Kafka's `<topic>-<partition>.<unique id>-delete` (the topic
    truncated so the name stays within 255 bytes, KAFKA-4893: apache/kafka storage/src/main/java/org/apache/kafka/
    storage/internals/log/LocalLog.java, logDeleteDirName) and fsyncs its root before removing it, so a crash
    half-way never leaves a partly deleted partition that would be recovered. The rename is the record that the
    deletion was decided: `marked_for_deletion` lists such leftovers (and the `.deleting` names of older herd
    versions) and `purge` removes one. The store removes nothing by itself at open: the cluster metadata decides.

    `partition.metadata` in each partition directory keeps the topic id (Kafka's PartitionMetadataFile format:
    `version: 0`, `topic_id: <base64 id>`) and, herd's addition, the topic's configs as one JSON line, so the
    topic metadata can be rebuilt from the directories alone."""

    def __init__(self, log_dirs: str | Sequence[str], fs: FileSystem | None = None) -> None:
        """`log_dirs`: one directory, or several (the first keeps topics.json). Raises DirectoryLockedError,
        LogDirsError or OSError; no lock stays taken then."""
        roots = [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)
        self.roots = tuple(os.path.abspath(root) for root in roots)
        self.root_dir = self.roots[0]  # topics.json lives here
        self.fs: FileSystem = fs if fs is not None else OsFileSystem()
        self._open: dict[Key, SegmentLog] = {}
        # the node's producer state (herd.log.producer_state), handed to every partition opened, which restores
        # its own there before anything uses it (a failure to read it fails the open); set by the broker. None:
        # the partitions keep none (a client's append is then checked by the log alone, and no snapshot taken)
        self.producers: ProducerStates | None = None
        self._moves: dict[Key, Move] = {}
        self._locks: list[Lock] = []
        try:
            for root in self.roots:
                self.fs.makedirs(root)
                self._locks.append(self.fs.lock(posixpath.join(root, LOCK_FILE)))
            self._where: dict[Key, str] = self._scan()  # the root each partition lives in
            if self._finish_interrupted_moves():
                self._where = self._scan()
        except BaseException:
            self._release_locks()
            raise

    # -- partitions ------------------------------------------------------------------------------------------------

    def open_partition(self, topic: str, partition: int, config: LogConfig) -> SegmentLog:
        """The partition's log (the same object while it stays open), recovered, or created in the root with the
        fewest partitions."""
        key = (topic, partition)
        log = self._open.get(key)
        if log is None:
            if key not in self._where:
                self._where[key] = self._place()
            log = SegmentLog.open(self.fs, self._path(topic, partition), topic, partition, config)
            if self.producers is not None:
                try:
                    log.use_producers(self.producers)
                except BaseException:
                    log.close_without_flush()
                    raise
            self._open[key] = log
        return log

    def log_dir(self, topic: str, partition: int) -> str | None:
        """The root the partition lives in, or None if it has no directory."""
        return self._where.get((topic, partition))

    def delete_partition(self, topic: str, partition: int, unique_id: str | None = None) -> None:
        """Close and remove the partition: renamed to its deletion name (durably), then removed."""
        marker = self.mark_deleted(topic, partition, unique_id or uuid.uuid4().hex)
        if marker is not None:
            self.fs.fsync_dir(posixpath.dirname(marker))
        self.forget(topic, partition)
        if marker is not None:
            self.fs.rmtree(marker)

    def mark_deleted(self, topic: str, partition: int, unique_id: str) -> str | None:
        """Rename the partition's directory to its deletion name (not yet durable: `sync` makes it so) and
        return that path; None if it has no directory. An open log keeps working on its open files. A move of the
        partition is cancelled first, its copy durably renamed for deletion (so a crash cannot leave the copy as
        the partition)."""
        self._cancel_move((topic, partition), durably=True)
        root = self._where.get((topic, partition))
        path = self._path(topic, partition)
        if root is None or not self.fs.exists(path):
            return None
        marker = posixpath.join(root, delete_dir_name(topic, partition, unique_id))
        self.fs.rename(path, marker)
        del self._where[(topic, partition)]
        return marker

    def unmark(self, topic: str, partition: int, marker: str) -> None:
        """Undo `mark_deleted`."""
        root = posixpath.dirname(marker)
        self.fs.rename(marker, posixpath.join(root, f"{topic}-{partition}"))
        self._where[(topic, partition)] = root

    def sync(self) -> None:
        """Make the roots' entries (created, marked or unmarked partitions) durable."""
        for root in self.roots:
            self.fs.fsync_dir(root)

    def forget(self, topic: str, partition: int) -> None:
        """Close the partition's log, if open, without flushing it (its data is being deleted)."""
        self._cancel_move((topic, partition), durably=False)
        log = self._open.pop((topic, partition), None)
        if log is not None:
            log.close_without_flush()

    def marked_for_deletion(self) -> list[tuple[str, str | None]]:
        """The directories of every root whose deletion was decided and not finished: (name, the unique id in it,
        or None for a name from an older herd or one that cannot be parsed)."""
        marked = []
        for root in self.roots:
            for name in self.fs.listdir(root):
                if name.endswith(DELETE_SUFFIX) or name.endswith(".deleting"):
                    match = _DELETE_NAME.fullmatch(name)
                    marked.append((name, match.group(1) if match else None))
        return sorted(marked)

    def purge(self, name: str) -> None:
        """Remove the directory (or file) `name` from whichever root holds it; raises OSError."""
        for root in self.roots:
            path = posixpath.join(root, name)
            if not self.fs.exists(path):
                continue
            try:
                self.fs.rmtree(path)
            except (NotADirectoryError, FileNotFoundError):  # a file: os, memory
                self.fs.remove(path)

    def existing_partitions(self) -> list[Key]:
        """Every `<topic>-<partition>` directory of every root (canonical decimal partition numbers only)."""
        self._where = self._scan()
        return sorted(self._where)

    def write_partition_metadata(
        self, topic: str, partition: int, topic_id: uuid.UUID, configs: dict[str, str]
    ) -> None:
        """Write `partition.metadata` durably; raises OSError."""
        text = f"version: 0\ntopic_id: {kafka_uuid(topic_id)}\nherd.configs: {json.dumps(configs, sort_keys=True)}\n"
        write_atomically(self.fs, posixpath.join(self._path(topic, partition), PARTITION_METADATA), text.encode())

    def read_partition_metadata(self, topic: str, partition: int) -> tuple[uuid.UUID, dict[str, str] | None] | None:
        """The topic id and configs kept in `partition.metadata` (configs None if the file has none); None if
        there is no such file; raises ValueError if it cannot be parsed, OSError if it cannot be read."""
        path = posixpath.join(self._path(topic, partition), PARTITION_METADATA)
        try:
            text = read_whole(self.fs, path).decode()
        except FileNotFoundError:
            return None
        fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        if fields.get("version") != "0" or "topic_id" not in fields:
            raise ValueError(f"{path} is not a partition metadata file (version 0 with a topic_id)")
        configs = json.loads(fields["herd.configs"]) if "herd.configs" in fields else None
        if configs is not None and not isinstance(configs, dict):
            raise ValueError(f"{path}: herd.configs is not an object")
        return parse_kafka_uuid(fields["topic_id"]), configs

    def close(self) -> None:
        """Flush and close every open partition; the first storage error is raised after all were tried. Moves
        under way stop; their copies are removed at the next start."""
        for move in self._moves.values():
            move.cancel()
        self._moves.clear()
        errors = []
        for log in self._open.values():
            try:
                log.close()
            except KafkaStorageError as error:
                errors.append(error)
        self._open.clear()
        self._release_locks()
        if errors:
            raise errors[0]

    # -- log directories (DescribeLogDirs, AlterReplicaLogDirs) ----------------------------------------------------

    def stored_partitions(self) -> dict[str, list[StoredPartition]]:
        """Every root, with the open partitions it holds and the copies moves are making in it."""
        found: dict[str, list[StoredPartition]] = {root: [] for root in self.roots}
        for (topic, partition), log in sorted(self._open.items()):
            root = self._where.get((topic, partition))
            if root is not None:
                found[root].append(StoredPartition(topic, partition, log.size_in_bytes, 0, False))
        for (topic, partition), move in sorted(self._moves.items()):
            found[move.target_root].append(StoredPartition(topic, partition, move.copied_bytes, move.offset_lag, True))
        return found

    def start_move(self, topic: str, partition: int, root: str) -> Move | None:
        """Begin moving the open partition to `root` (herd.log.moves): the returned Move's `copy_sealed` is
        run in a worker thread, then its `finish` on the caller's thread. None when the partition is already in
        `root` (a move elsewhere is cancelled, as Kafka drops a future replica whose directory changed) or is
        being moved there. Raises LogDirNotFoundError (`root` is not one of log.dirs), KeyError (the partition is
        not open) or KafkaStorageError (the disk failed; nothing changed)."""
        key = (topic, partition)
        target = os.path.abspath(root)
        if target not in self.roots:
            raise LogDirNotFoundError(f"Log dir {root} is not found in the config.")
        log = self._open[key]
        moving = self._moves.get(key)
        if moving is not None and moving.target_root == target:
            return None
        self._cancel_move(key, durably=False)
        if self._where[key] == target:
            return None
        marker = posixpath.join(self._where[key], delete_dir_name(topic, partition, uuid.uuid4().hex))
        move = Move.begin(
            self.fs, log, self._path(topic, partition), target, marker, on_done=lambda done: self._moved(key, done)
        )
        self._moves[key] = move
        return move

    def move_in_progress(self, topic: str, partition: int) -> Move | None:
        return self._moves.get((topic, partition))

    def _moved(self, key: Key, move: Move) -> None:
        """A move ended (finished or abandoned): the partition lives where it now is."""
        if self._moves.get(key) is move:
            del self._moves[key]
            if move.finished:
                self._where[key] = move.target_root

    def _cancel_move(self, key: Key, *, durably: bool) -> None:
        move = self._moves.pop(key, None)
        if move is None:
            return
        if durably:  # renamed as a deleted partition is, so that the next start removes it
            move.cancel(set_aside=posixpath.join(move.target_root, delete_dir_name(*key, uuid.uuid4().hex)))
        else:
            move.cancel()

    # -- internals -------------------------------------------------------------------------------------------------

    def _place(self) -> str:
        """Kafka's LogManager.nextLogDirs: the root holding the fewest partitions (moves' copies counted)."""
        counts = Counter(self._where.values())
        counts.update(move.target_root for move in self._moves.values())
        return min(self.roots, key=lambda root: counts[root])  # min keeps the first of equals: log.dirs order

    def _scan(self) -> dict[Key, str]:
        """Where each `<topic>-<partition>` directory is; raises LogDirsError if one is in two roots."""
        where: dict[Key, str] = {}
        for root in self.roots:
            for name in self.fs.listdir(root):
                key = _partition_key(name)
                if key is None:
                    continue
                if key in where:
                    raise LogDirsError(
                        f"Duplicate log directories for {name} are found in both {posixpath.join(where[key], name)} "
                        f"and {posixpath.join(root, name)}. Stop herd and remove (or move away) one of the two; "
                        f"nothing was deleted"
                    )
                where[key] = root
        return where

    def _finish_interrupted_moves(self) -> bool:
        """Resolve the `-future` copies a crash left (see the class docstring); True if anything changed.
        Raises LogDirsError if a partition without a directory has several copies, OSError."""
        copies: dict[Key, list[str]] = defaultdict(list)
        for root in self.roots:
            for name in self.fs.listdir(root):
                match = _FUTURE_NAME.fullmatch(name)
                key = _partition_key(match.group(1)) if match else None
                if key is not None:
                    copies[key].append(posixpath.join(root, name))
        for (topic, partition), paths in sorted(copies.items()):
            name = f"{topic}-{partition}"
            if (topic, partition) in self._where:
                for path in paths:
                    log.warning(
                        "removing %s, the copy of an unfinished move of %s (it stays in %s)",
                        path,
                        name,
                        self._where[(topic, partition)],
                    )
                    self.fs.rmtree(path)
            elif len(paths) == 1:
                root = posixpath.dirname(paths[0])
                log.warning("finishing the move of %s to %s, interrupted after its copy was complete", name, root)
                self.fs.rename(paths[0], posixpath.join(root, name))
                self.fs.fsync_dir(root)
            else:
                raise LogDirsError(
                    f"{name} has no directory but several copies of unfinished moves: "
                    f"{', '.join(paths)}; stop herd and keep the right one as {name}"
                )
        return bool(copies)

    def _path(self, topic: str, partition: int) -> str:
        return posixpath.join(self._where.get((topic, partition), self.root_dir), f"{topic}-{partition}")

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks.clear()


def _partition_key(name: str) -> Key | None:
    topic, _, partition = name.rpartition("-")
    if topic and partition.isdigit() and partition == str(int(partition)):
        return topic, int(partition)
    return None


def delete_dir_name(topic: str, partition: int, unique_id: str) -> str:
    """Kafka's `<topic>-<partition>.<unique id>-delete`, the topic cut so the name stays within 255 bytes."""
    suffix = f"-{partition}.{unique_id}{DELETE_SUFFIX}"
    return topic[: max(0, 255 - len(suffix))] + suffix


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Raises ValueError."""
    try:
        raw = base64.urlsafe_b64decode(text.strip() + "==")
    except (ValueError, TypeError):
        raise ValueError(f"not a topic id: {text!r}") from None
    if len(raw) != 16:
        raise ValueError(f"not a topic id: {text!r}")
    return uuid.UUID(bytes=raw)
