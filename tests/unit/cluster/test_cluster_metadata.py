"""Cluster on the in-memory filesystem: topics.json is never a reason to delete data, metadata changes are durable
before they take effect (or rolled back), deletions finish after a crash, and partition counts are bounded."""

from __future__ import annotations

import uuid

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from herd.cluster.topics import (
    KAFKA_STORAGE_ERROR,
    MAX_PARTITIONS_PER_REQUEST,
    POLICY_VIOLATION,
    TOPIC_ALREADY_EXISTS,
    Cluster,
    MetadataError,
    TopicError,
)
from herd.log.api import LogConfig
from herd.log.fs import MemoryFileSystem, read_whole, write_atomically
from herd.log.store import SegmentStore, delete_dir_name

ROOT = "/data"


def batch(n: int) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i in range(n):
        builder.append(i, timestamp=1_700_000_000_000, key=b"k", value=b"v%d" % i, headers=[])
    return bytes(builder.build())


def open_cluster(fs: MemoryFileSystem, max_partitions: int = 10_000) -> Cluster:
    cluster = Cluster(SegmentStore(ROOT, fs), LogConfig(), 0, max_partitions=max_partitions)
    cluster.load()
    return cluster


def restart(cluster: Cluster, fs: MemoryFileSystem) -> tuple[Cluster, MemoryFileSystem]:
    """Close cleanly, power-cut (only what was made durable survives) and open again."""
    cluster.close()
    survivor = fs.crash()
    return open_cluster(survivor), survivor


def dirs(fs: MemoryFileSystem) -> set[str]:
    return {name for name in fs.listdir(ROOT) if "-" in name}


def with_data(fs: MemoryFileSystem) -> Cluster:
    cluster = open_cluster(fs)
    cluster.create_topic("orders", 3, {"retention.ms": "1234", "cleanup.policy": "compact"})
    cluster.create_topic("__consumer_offsets", 2, {"cleanup.policy": "compact"})
    for name, index in (("orders", 1), ("__consumer_offsets", 0)):
        log = cluster.partition(name, index)
        log.append(batch(5), 0)
        log.flush()
    return cluster


# -- a missing or unreadable topics.json ----------------------------------------------------------------------


def test_a_deleted_topics_json_is_rebuilt_from_the_partitions_with_their_ids_configs_and_data() -> None:
    fs = MemoryFileSystem()
    cluster = with_data(fs)
    ids = {t.name: t.topic_id for t in cluster.topics()}
    cluster.close()
    fs = fs.crash()
    fs.remove(f"{ROOT}/topics.json")
    cluster = open_cluster(fs)
    assert {t.name: t.topic_id for t in cluster.topics()} == ids
    assert cluster.get("orders").configs == {"retention.ms": "1234", "cleanup.policy": "compact"}
    assert len(cluster.get("orders").partitions) == 3
    assert cluster.partition("orders", 1).log_end_offset == 5
    assert cluster.partition("__consumer_offsets", 0).log_end_offset == 5
    cluster, fs = restart(cluster, fs)  # and the rebuilt file was written
    assert {t.name: t.topic_id for t in cluster.topics()} == ids


@pytest.mark.parametrize(
    "content", [b"", b'{"topics": [', b"not json", b"[]", b'{"topics": [{"name": 5}]}', b"\xff\xfe"]
)
def test_an_unreadable_topics_json_stops_the_start_and_deletes_nothing(content: bytes) -> None:
    fs = MemoryFileSystem()
    with_data(fs).close()
    fs = fs.crash()
    write_atomically(fs, f"{ROOT}/topics.json", content)
    before = dirs(fs)
    with pytest.raises(MetadataError, match=f"{ROOT}/topics.json cannot be used: .*move it away to rebuild"):
        open_cluster(fs)
    assert dirs(fs) == before and len(before) == 5


def test_a_partition_directory_topics_json_does_not_name_is_adopted_when_its_metadata_names_its_topic() -> None:
    fs = MemoryFileSystem()
    cluster = with_data(fs)
    cluster.close()
    fs = fs.crash()
    # An older topics.json, from before any topic was created (an operator restored a backup).
    write_atomically(fs, f"{ROOT}/topics.json", b'{"version": 1, "cluster_id": "c", "topics": []}')
    cluster = open_cluster(fs)
    assert len(cluster.get("orders").partitions) == 3 and cluster.partition("orders", 1).log_end_offset == 5


def test_an_unnamed_directory_without_metadata_is_kept_and_reported_not_deleted(caplog) -> None:
    fs = MemoryFileSystem()
    open_cluster(fs).close()
    fs.makedirs(f"{ROOT}/stray-0")
    write_atomically(fs, f"{ROOT}/stray-0/00000000000000000000.log", b"precious")
    cluster = open_cluster(fs)
    assert cluster.get("stray") is None
    assert read_whole(fs, f"{ROOT}/stray-0/00000000000000000000.log") == b"precious"
    assert "kept partition directories of stray" in caplog.text
    with pytest.raises(TopicError) as refused:
        cluster.create_topic("stray", 1)
    assert refused.value.error_code == TOPIC_ALREADY_EXISTS
    assert read_whole(fs, f"{ROOT}/stray-0/00000000000000000000.log") == b"precious"


# -- metadata changes are durable before they take effect ------------------------------------------------------


@pytest.mark.parametrize("op, nth", [("rename", 1), ("rename", 2), ("write", 1), ("fsync", 3)])
def test_a_create_the_disk_refuses_leaves_nothing_in_memory_or_on_disk(op: str, nth: int) -> None:
    fs = MemoryFileSystem()
    cluster = open_cluster(fs)
    fs.fail(op, nth)
    with pytest.raises(TopicError) as failed:
        cluster.create_topic("t", 2)
    assert failed.value.error_code == KAFKA_STORAGE_ERROR
    assert cluster.get("t") is None and dirs(fs) == set()
    cluster.create_topic("t", 2)  # the disk is back: the same create works
    cluster, fs = restart(cluster, fs)
    assert len(cluster.get("t").partitions) == 2


@pytest.mark.parametrize("op", ["write", "fsync", "rename"])
def test_a_create_whose_topics_json_write_fails_leaves_nothing(op: str) -> None:
    """topics.json is written through the store's filesystem, so the in-memory one fails exactly its write."""
    fs = MemoryFileSystem()
    cluster = open_cluster(fs)
    fs.fail(op, path_endswith="topics.json.tmp")
    with pytest.raises(TopicError, match="topics.json"):
        cluster.create_topic("t", 1)
    assert dirs(fs) == set()
    cluster, fs = restart(cluster, fs)
    assert cluster.get("t") is None


def test_a_grow_the_disk_refuses_keeps_the_old_count() -> None:
    fs = MemoryFileSystem()
    cluster = open_cluster(fs)
    cluster.create_topic("t", 2)
    fs.fail("rename", path_endswith="topics.json.tmp")
    with pytest.raises(TopicError, match="topics.json") as failed:
        cluster.add_partitions("t", 4)
    assert failed.value.error_code == KAFKA_STORAGE_ERROR
    assert len(cluster.get("t").partitions) == 2 and dirs(fs) == {"t-0", "t-1"}
    cluster, fs = restart(cluster, fs)
    assert len(cluster.get("t").partitions) == 2


def test_a_delete_the_disk_refuses_keeps_the_topic_and_its_data() -> None:
    fs = MemoryFileSystem()
    cluster = open_cluster(fs)
    cluster.create_topic("t", 2)
    cluster.partition("t", 0).append(batch(3), 0)
    cluster.partition("t", 0).flush()
    fs.fail("fsync", path_endswith="topics.json.tmp")
    with pytest.raises(TopicError, match="topics.json") as failed:
        cluster.delete_topic("t")
    assert failed.value.error_code == KAFKA_STORAGE_ERROR
    assert dirs(fs) == {"t-0", "t-1"}
    cluster.partition("t", 0).append(batch(1), 0)  # still served, on its own directory
    cluster.partition("t", 0).flush()
    cluster, fs = restart(cluster, fs)
    assert cluster.partition("t", 0).log_end_offset == 4


def test_a_delete_interrupted_after_marking_is_finished_at_the_next_start() -> None:
    fs = MemoryFileSystem()
    cluster = open_cluster(fs)
    cluster.create_topic("t", 3)
    cluster.create_topic("kept", 1)
    topic_id = cluster.get("t").topic_id
    cluster.close()
    store = SegmentStore(ROOT, fs)
    store.mark_deleted("t", 1, topic_id.hex)  # the crash came after one rename, before topics.json was written
    store.sync()
    cluster = open_cluster(fs.crash())
    assert cluster.get("t") is None and cluster.get("kept") is not None
    assert dirs(cluster._store.fs) == {"kept-0"}


def test_start_removes_unparseable_deletion_leftovers_and_does_not_crash() -> None:
    fs = MemoryFileSystem()
    open_cluster(fs).close()
    fs.makedirs(f"{ROOT}/old-0.deleting")
    write_atomically(fs, f"{ROOT}/weird.deleting", b"a file, not a directory")
    fs.makedirs(f"{ROOT}/x-1.nothex-delete")
    cluster = open_cluster(fs)
    assert dirs(fs) == set() and list(cluster.topics()) == []
    assert not fs.exists(f"{ROOT}/weird.deleting")  # a file: removed too (dirs() sees only '-' names)


def test_deletion_names_of_the_longest_topic_names_fit_in_255_bytes() -> None:
    name = "x" * 249
    for partition in (0, 9, 2**31 - 1):
        marker = delete_dir_name(name, partition, uuid.uuid4().hex)
        assert len(marker.encode()) <= 255 and marker.endswith(f"-{partition}." + marker.split(".")[-1])
    fs = MemoryFileSystem()
    cluster = open_cluster(fs)
    cluster.create_topic(name, 2)
    cluster.delete_topic(name)
    assert dirs(fs) == set()


# -- bounds ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [2**31 - 1, 100_000, MAX_PARTITIONS_PER_REQUEST + 1])
def test_a_partition_count_over_the_request_limit_is_refused_before_anything_is_made(count: int) -> None:
    fs = MemoryFileSystem()
    cluster = open_cluster(fs)
    with pytest.raises(TopicError, match="Excessively large number of partitions per request") as refused:
        cluster.create_topic("big", count)
    assert refused.value.error_code == POLICY_VIOLATION
    cluster.create_topic("small", 1)
    with pytest.raises(TopicError) as refused:
        cluster.add_partitions("small", count)
    assert refused.value.error_code == POLICY_VIOLATION
    assert dirs(fs) == {"small-0"}


def test_max_broker_partitions_bounds_every_topic_together() -> None:
    fs = MemoryFileSystem()
    cluster = open_cluster(fs, max_partitions=5)
    cluster.create_topic("a", 3)
    with pytest.raises(TopicError, match="max.broker.partitions=5") as refused:
        cluster.create_topic("b", 3)
    assert refused.value.error_code == POLICY_VIOLATION
    with pytest.raises(TopicError, match="max.broker.partitions=5"):
        cluster.add_partitions("a", 6)
    cluster.create_topic("b", 2)
    assert dirs(fs) == {"a-0", "a-1", "a-2", "b-0", "b-1"}


def test_configs_stored_under_looser_bounds_still_load():
    """A topic made by an earlier herd with segment.bytes below today's 1 MiB (or the offsets topic with its
    small segments) loads as it is: the bounds apply to what a client asks for, not to what was accepted."""
    fs = MemoryFileSystem()
    cluster = open_cluster(fs)
    cluster.create_topic("__consumer_offsets", 1, {"segment.bytes": "16384"})
    with pytest.raises(TopicError, match="segment.bytes: Value must be at least 1048576"):
        cluster.create_topic("small", 1, {"segment.bytes": "4096"})
    cluster.close()
    state = read_whole(fs, ROOT + "/topics.json").replace(
        b'"topics": [',
        b'"topics": [{"name": "small", '
        b'"id": "%s", "partitions": 1, "configs": '
        b'{"segment.bytes": "4096"}}, ' % str(uuid.uuid4()).encode(),
    )
    write_atomically(fs, ROOT + "/topics.json", state)
    cluster = open_cluster(fs)
    assert cluster.get("small").configs == {"segment.bytes": "4096"}
    assert cluster.partition("small", 0).config.segment_bytes == 4096
    assert cluster.get("__consumer_offsets").configs == {"segment.bytes": "16384"}
