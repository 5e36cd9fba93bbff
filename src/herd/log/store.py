"""The embedded `LogStore`: the partition directories under `log.dirs`, their lock and their metadata files.

    <root>/.lock                                   held by the broker using the directory (flock)
           topics.json                             the cluster's topic metadata (herd.cluster.topics)
           <topic>-<partition>/                    one `SegmentLog` (herd.log.segments)
                               partition.metadata  the topic id (and configs) the partition belongs to
           <topic>-<partition>.<id>-delete         a partition whose deletion was decided, not yet finished
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
import uuid
from collections.abc import Callable

from herd.log.api import KafkaStorageError, LogConfig
from herd.log.fs import FileSystem, Lock, OsFileSystem, read_whole, write_atomically
from herd.log.segments import SegmentLog

LOCK_FILE = ".lock"
PARTITION_METADATA = "partition.metadata"
DELETE_SUFFIX = "-delete"
_DELETE_NAME = re.compile(r".+-\d+\.([0-9a-f]{32})-delete")


class SegmentStore:
    """A `LogStore`: one directory per partition under `root_dir`, named `<topic>-<partition>` as in Kafka.

    Opening the store first takes the directory's lock (`<root_dir>/.lock`, held until `close`; a second broker
    on the same directory gets DirectoryLockedError) and touches nothing else before it.

    Deleting a partition renames its directory to Kafka's `<topic>-<partition>.<unique id>-delete` (the topic
    truncated so the name stays within 255 bytes, KAFKA-4893: apache/kafka storage/src/main/java/org/apache/kafka/
    storage/internals/log/LocalLog.java, logDeleteDirName) and fsyncs the root before removing it, so a crash
    half-way never leaves a partly deleted partition that would be recovered. The rename is the record that the
    deletion was decided: `marked_for_deletion` lists such leftovers (and the `.deleting` names of older herd
    versions) and `purge` removes one. The store removes nothing by itself at open: the cluster metadata decides.

    `partition.metadata` in each partition directory keeps the topic id (Kafka's PartitionMetadataFile format:
    `version: 0`, `topic_id: <base64 id>`) and, herd's addition, the topic's configs as one JSON line, so the
    topic metadata can be rebuilt from the directories alone."""

    def __init__(self, root_dir: str, fs: FileSystem | None = None) -> None:
        self.root_dir = root_dir
        self.fs: FileSystem = fs if fs is not None else OsFileSystem()
        self._open: dict[tuple[str, int], SegmentLog] = {}
        # called with every partition opened, before anything uses it (the server restores its idempotent
        # producers' state there and gives it a `snapshot_source`); whatever it raises fails the open
        self.on_open: Callable[[SegmentLog], None] | None = None
        self.fs.makedirs(root_dir)
        self._lock: Lock | None = self.fs.lock(posixpath.join(root_dir, LOCK_FILE))

    def open_partition(self, topic: str, partition: int, config: LogConfig) -> SegmentLog:
        """The partition's log (the same object while it stays open), recovered or created."""
        key = (topic, partition)
        log = self._open.get(key)
        if log is None:
            log = SegmentLog.open(self.fs, self._path(topic, partition), topic, partition, config)
            if self.on_open is not None:
                try:
                    self.on_open(log)
                except BaseException:
                    log.close_without_flush()
                    raise
            self._open[key] = log
        return log

    def delete_partition(self, topic: str, partition: int, unique_id: str | None = None) -> None:
        """Close and remove the partition: renamed to its deletion name (durably), then removed."""
        marker = self.mark_deleted(topic, partition, unique_id or uuid.uuid4().hex)
        if marker is not None:
            self.fs.fsync_dir(self.root_dir)
        self.forget(topic, partition)
        if marker is not None:
            self.fs.rmtree(marker)

    def mark_deleted(self, topic: str, partition: int, unique_id: str) -> str | None:
        """Rename the partition's directory to its deletion name (not yet durable: `sync` makes it so) and
        return that path; None if it has no directory. An open log keeps working on its open files."""
        path = self._path(topic, partition)
        if not self.fs.exists(path):
            return None
        marker = posixpath.join(self.root_dir, delete_dir_name(topic, partition, unique_id))
        self.fs.rename(path, marker)
        return marker

    def unmark(self, topic: str, partition: int, marker: str) -> None:
        """Undo `mark_deleted`."""
        self.fs.rename(marker, self._path(topic, partition))

    def sync(self) -> None:
        """Make the root directory's entries (created, marked or unmarked partitions) durable."""
        self.fs.fsync_dir(self.root_dir)

    def forget(self, topic: str, partition: int) -> None:
        """Close the partition's log, if open, without flushing it (its data is being deleted)."""
        log = self._open.pop((topic, partition), None)
        if log is not None:
            log.close_without_flush()

    def marked_for_deletion(self) -> list[tuple[str, str | None]]:
        """The directories whose deletion was decided and not finished: (name, the unique id in it, or None
        for a name from an older herd or one that cannot be parsed)."""
        marked = []
        for name in self.fs.listdir(self.root_dir):
            if name.endswith(DELETE_SUFFIX) or name.endswith(".deleting"):
                match = _DELETE_NAME.fullmatch(name)
                marked.append((name, match.group(1) if match else None))
        return sorted(marked)

    def purge(self, name: str) -> None:
        """Remove the directory (or file) `name` of the root; raises OSError."""
        path = posixpath.join(self.root_dir, name)
        try:
            self.fs.rmtree(path)
        except (NotADirectoryError, FileNotFoundError):  # a file: os, memory
            self.fs.remove(path)

    def existing_partitions(self) -> list[tuple[str, int]]:
        """Every `<topic>-<partition>` directory (canonical decimal partition numbers only)."""
        found = []
        for name in self.fs.listdir(self.root_dir):
            topic, _, partition = name.rpartition("-")
            if topic and partition.isdigit() and partition == str(int(partition)):
                found.append((topic, int(partition)))
        return sorted(found)

    def write_partition_metadata(self, topic: str, partition: int, topic_id: uuid.UUID,
                                 configs: dict[str, str]) -> None:
        """Write `partition.metadata` durably; raises OSError."""
        text = (f"version: 0\ntopic_id: {kafka_uuid(topic_id)}\n"
                f"herd.configs: {json.dumps(configs, sort_keys=True)}\n")
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
        """Flush and close every open partition; the first storage error is raised after all were tried."""
        errors = []
        for log in self._open.values():
            try:
                log.close()
            except KafkaStorageError as error:
                errors.append(error)
        self._open.clear()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if errors:
            raise errors[0]

    def _path(self, topic: str, partition: int) -> str:
        return posixpath.join(self.root_dir, f"{topic}-{partition}")


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
