"""The transaction coordinator on the coordinator runtime, on a real asyncio loop and real log files:
`__transaction_state` created and loaded, answers only once durable, markers written and the transaction
completed, a PrepareCommit cut short completed after a reload. Each test runs its own loop (`asyncio.run`).

The group coordinator's side of a marker (`complete_transaction`, C's) is played here by a test double that
records its calls; data-partition markers need A's `append_control` on the log and run once it is merged."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from herd.cluster.topics import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, TRANSACTION_STATE_TOPIC, Cluster
from herd.config import BrokerConfig
from herd.coordinator import CoordinatorError, ErrorCode
from herd.coordinator.transactions import (
    AddPartitions,
    EndTxn,
    InitProducerId,
    ProducerIdAndEpoch,
    TxnState,
)
from herd.coordinator.transactions import (
    TransactionCoordinatorShard as Txn,
)
from herd.coordinator.transactions.records import decode_key, decode_value
from herd.log.store import SegmentStore
from herd.runtime.batches import decode_batches
from herd.runtime.transactions import Marker, TransactionRuntime

from .helpers import resolve, until

OFFSETS_1 = ("__consumer_offsets", 1)


class Groups:
    """Plays the group coordinator's `complete_transaction`: records each call, answers when `open` is set."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int, bool, int]] = []
        self.open = asyncio.Event()
        self.open.set()

    async def complete_transaction(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> None:
        self.calls.append((partition, producer_id, producer_epoch, commit, coordinator_epoch))
        await self.open.wait()


def make(data_dir: Path, groups: Groups | None = None, **props: str) -> TransactionRuntime:
    settings = {"log.dirs": str(data_dir), "transaction.state.log.num.partitions": "3", **props}
    config = BrokerConfig.from_properties(settings)
    cluster = Cluster(SegmentStore(str(data_dir)), config.log_config(), 0)
    cluster.load()
    if cluster.get(OFFSETS_TOPIC) is None:  # as the group coordinator would have made it
        cluster.create_topic(OFFSETS_TOPIC, 3, dict(OFFSETS_TOPIC_CONFIGS))
    ids = itertools.count(1000)
    return TransactionRuntime(cluster, config, new_producer_id=lambda: next(ids), groups=groups)


async def started(runtime: TransactionRuntime) -> TransactionRuntime:
    runtime.start()  # loads __transaction_state if it exists
    runtime.ensure_created()  # else makes it, as the first FindCoordinator for a transactional id does
    await runtime.wait_loaded()
    return runtime


async def stop(runtime: TransactionRuntime) -> None:
    await runtime.close()
    runtime._cluster.close()


def written(runtime: TransactionRuntime, tid: str) -> list[str]:
    """The states written for `tid`, read back from its partition's log."""
    shard = runtime.shard_for(tid)
    out = []
    for _, records in decode_batches(shard.log.read(0, 1 << 20)):
        out += [
            TxnState.from_status(decode_value(v).status).kafka_name
            for k, v in records
            if decode_key(k) == tid and v is not None
        ]
    return out


async def call(runtime: TransactionRuntime, handler: Any, request: Any) -> Any:
    return await resolve(runtime.call(request.transactional_id, handler, request))


def test_the_topic_is_created_and_answers_wait_for_durable_records(tmp_path: Path) -> None:
    async def main() -> None:
        runtime = make(tmp_path, **{"transaction.state.log.segment.bytes": "65536"})
        runtime.start()
        assert runtime._cluster.get(TRANSACTION_STATE_TOPIC) is None  # made on first use
        with pytest.raises(CoordinatorError) as e:
            runtime.call("tx", Txn.init_producer_id, InitProducerId("tx", 60_000))
        assert e.value.code == ErrorCode.not_coordinator and not runtime.hosts("tx")
        runtime.ensure_created()
        with pytest.raises(CoordinatorError) as e:
            runtime.call("tx", Txn.init_producer_id, InitProducerId("tx", 60_000))
        assert e.value.code == ErrorCode.coordinator_load_in_progress
        await runtime.wait_loaded()
        topic = runtime._cluster.get(TRANSACTION_STATE_TOPIC)
        assert len(topic.partitions) == 3 and topic.internal
        assert (topic.configs["cleanup.policy"], topic.configs["compression.type"], topic.configs["segment.bytes"]) == (
            "compact",
            "uncompressed",
            "65536",
        )
        outcome = runtime.call("tx", Txn.init_producer_id, InitProducerId("tx", 60_000))
        assert isinstance(outcome, asyncio.Future)  # waits for its record to be durable
        assert await resolve(outcome) == ProducerIdAndEpoch(ErrorCode.none, 1000, 0)
        shard = runtime.shard_for("tx")
        assert shard.log.flushed_offset == shard.log.log_end_offset == 1
        assert written(runtime, "tx") == ["Empty"]
        await stop(runtime)

    asyncio.run(main())


def test_a_commit_writes_its_markers_then_completes_and_survives_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        groups = Groups()
        runtime = await started(make(tmp_path, groups))
        p = await call(runtime, Txn.init_producer_id, InitProducerId("tx", 60_000))
        parts = frozenset({OFFSETS_1, ("deleted-topic", 0)})
        added = await call(runtime, Txn.add_partitions, AddPartitions("tx", p.producer_id, 0, parts))
        assert set(added.errors.values()) == {ErrorCode.none}
        ended = await call(runtime, Txn.end_txn, EndTxn("tx", p.producer_id, 0, True))
        assert ended == ProducerIdAndEpoch(ErrorCode.none, p.producer_id, 0)
        shard = runtime.shard_for("tx")
        await until(lambda: shard.shard.transaction("tx").state is TxnState.COMPLETE_COMMIT)
        assert groups.calls == [(1, p.producer_id, 0, True, 0)]  # the missing topic's marker was skipped
        await until(lambda: not shard.pending)
        assert written(runtime, "tx") == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
        await stop(runtime)

        again = await started(make(tmp_path, groups))
        md = again.shard_for("tx").shard.transaction("tx")
        assert (md.state, md.producer_id, md.producer_epoch) == (TxnState.COMPLETE_COMMIT, p.producer_id, 0)
        assert await call(again, Txn.end_txn, EndTxn("tx", p.producer_id, 0, True)) == ended  # a retry
        assert len(groups.calls) == 1
        await stop(again)

    asyncio.run(main())


def test_a_prepare_commit_cut_short_is_completed_after_a_reload(tmp_path: Path) -> None:
    async def main() -> None:
        groups = Groups()
        groups.open.clear()  # the group coordinator does not answer: the markers stay unwritten
        runtime = await started(make(tmp_path, groups))
        p = await call(runtime, Txn.init_producer_id, InitProducerId("tx", 60_000))
        await call(runtime, Txn.add_partitions, AddPartitions("tx", p.producer_id, 0, frozenset({OFFSETS_1})))
        await call(runtime, Txn.end_txn, EndTxn("tx", p.producer_id, 0, False))
        await until(lambda: len(groups.calls) == 1)
        assert await call(runtime, Txn.init_producer_id, InitProducerId("tx", 60_000)) == ProducerIdAndEpoch(
            ErrorCode.concurrent_transactions
        )
        partition = runtime.partition_for("tx")
        await runtime.move_away_and_back(partition)  # the marker task sees its shard go and gives up
        await runtime.wait_loaded()
        groups.open.set()
        shard = runtime.shard_for("tx")
        await until(lambda: shard.shard.transaction("tx").state is TxnState.COMPLETE_ABORT)
        assert groups.calls[-1] == (1, p.producer_id, 0, False, 0) and len(groups.calls) >= 2
        assert await call(runtime, Txn.init_producer_id, InitProducerId("tx", 60_000)) == ProducerIdAndEpoch(
            ErrorCode.none, p.producer_id, 1
        )
        await stop(runtime)

    asyncio.run(main())


def test_a_marker_that_cannot_be_written_is_retried(tmp_path: Path) -> None:
    async def main() -> None:
        runtime = await started(make(tmp_path, groups=None))  # no group coordinator: its partitions wait
        p = await call(runtime, Txn.init_producer_id, InitProducerId("tx", 60_000))
        await call(runtime, Txn.add_partitions, AddPartitions("tx", p.producer_id, 0, frozenset({OFFSETS_1})))
        await call(runtime, Txn.end_txn, EndTxn("tx", p.producer_id, 0, True))
        await asyncio.sleep(0.15)
        assert runtime.shard_for("tx").shard.transaction("tx").state is TxnState.PREPARE_COMMIT
        runtime._groups = Groups()
        await until(lambda: runtime.shard_for("tx").shard.transaction("tx").state is TxnState.COMPLETE_COMMIT)
        await stop(runtime)

    asyncio.run(main())


def test_a_partition_led_by_another_node_gets_its_marker_through_write_txn_markers(tmp_path: Path) -> None:
    async def main() -> None:
        sent: list[tuple[tuple[str, int], Marker]] = []
        answers = [6, 0]  # NOT_LEADER_OR_FOLLOWER (the leader is moving), then written

        async def remote(tp: tuple[str, int], marker: Marker) -> int:
            sent.append((tp, marker))
            return answers.pop(0)

        runtime = make(tmp_path)
        runtime._remote = remote
        await started(runtime)
        runtime._cluster.create_topic("t", 1, {})
        runtime._cluster.get("t").partitions[0] = None  # what a cluster node's view holds for a partition led elsewhere
        p = await call(runtime, Txn.init_producer_id, InitProducerId("tx", 60_000))
        await call(runtime, Txn.add_partitions, AddPartitions("tx", p.producer_id, 0, frozenset({("t", 0)})))
        await call(runtime, Txn.end_txn, EndTxn("tx", p.producer_id, 0, True))
        await until(lambda: runtime.shard_for("tx").shard.transaction("tx").state is TxnState.COMPLETE_COMMIT)
        assert sent == [(("t", 0), Marker(p.producer_id, 0, True, 0))] * 2
        await stop(runtime)

    asyncio.run(main())
