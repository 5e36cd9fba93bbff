"""A cluster node rebuilding the producer state of a partition it just took (herd.server.node
`ClusterNode._follow`): until the state is loaded the partition takes no append, even when loading it fails on
a database error (right after the database restarted, the first use of each pooled connection does), so a retry
of a batch the previous leader stored is recognised and the producer's next batch is checked (issue 30)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from batches import idempotent_batch

from herd.log.api import KafkaStorageError, LogConfig, NotLeaderError, ProducerBatch
from herd.log.fs import MemoryFileSystem
from herd.log.producer_state import ProducerStates
from herd.log.store import SegmentStore
from herd.server.cluster_node import ClusterNode


class _StoredPartition:
    """What `ProducerStates.rebuild` awaits of a remote partition: its first `producer_state()` fails on a database
    error (`failed` is set), the next answers `rows` once `answers` is set."""

    def __init__(self, rows: list[ProducerBatch]) -> None:
        self.topic, self.partition, self.rows, self.commits_itself = "t", 0, rows, True
        self.failed, self.answers = asyncio.Event(), asyncio.Event()

    async def producer_state(self) -> list[ProducerBatch]:
        if not self.failed.is_set():
            self.failed.set()
            raise KafkaStorageError("t-0: the connection is closed")
        await self.answers.wait()
        return self.rows

    async def load_transactions(self) -> None:
        return None


def test_a_partition_taken_over_takes_no_append_until_its_producer_state_is_loaded_despite_database_errors():
    async def main() -> None:
        producers = ProducerStates()
        stored = _StoredPartition([ProducerBatch(7, 0, 0, 2, 0, 2, 3, 0, -1, 0)])
        node = ClusterNode.__new__(ClusterNode)
        node.config = SimpleNamespace(get=lambda name: 1)  # type: ignore[assignment]
        node.broker = SimpleNamespace(producers=producers, now_ms=lambda: 0)  # type: ignore[assignment]
        node.cluster = SimpleNamespace(get=lambda name: SimpleNamespace(partitions=[stored]))  # type: ignore[assignment]
        log = SegmentStore("/data", MemoryFileSystem()).open_partition("t", 0, LogConfig())  # where appends go
        producers.hold("t", 0)  # as `_on_leadership` does
        rebuilding = asyncio.ensure_future(node._follow("t", 0, stored, None))  # type: ignore[arg-type]
        await stored.failed.wait()
        await asyncio.sleep(0.005)
        with pytest.raises(NotLeaderError):  # retriable: the client sends it again
            producers.append(log, idempotent_batch(7, 0, 0, 3), 0)
        stored.answers.set()
        await rebuilding
        assert not producers.restoring
        retry = producers.append(log, idempotent_batch(7, 0, 0, 3), 0)
        assert (retry.base_offset, log.log_end_offset) == (0, 0)  # the stored batch, recognised
        assert producers.append(log, idempotent_batch(7, 0, 3, 3), 0).base_offset == 0

    asyncio.run(main())
