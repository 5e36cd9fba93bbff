"""The transaction APIs' handlers, every version kio has that herd serves, on a real broker with real group and
transaction coordinator runtimes (the log on the in-memory filesystem), without sockets: FindCoordinator key type
1, InitProducerId, AddPartitionsToTxn (v0-3 and the batched v4-5 with verify_only), AddOffsetsToTxn, EndTxn, with
Kafka's error codes per version. Every response is also encoded, as the connection would send it.

Markers are not looked at here: their data-partition side is A's `append_control`, their `__consumer_offsets` side
C's `complete_transaction` (tests/unit/runtime/test_txn_runtime.py covers the runtime's part). DescribeTransactions
and ListTransactions show the coordinator's state."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from types import ModuleType
from typing import Any

from handlers import answered
from kio.schema.errors import ErrorCode

from herd.config import BrokerConfig
from herd.log.fs import MemoryFileSystem
from herd.log.store import SegmentStore
from herd.protocol.messages import RequestHeader, encode_response, request_class
from herd.protocol.values import MessageBuilder, make
from herd.runtime import CoordinatorRuntime
from herd.server.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_transactions,
    end_txn,
    find_coordinator,
    init_producer_id,
    list_transactions,
    write_txn_markers,
)
from herd.server.broker import Broker, RequestContext
from herd.server.transactions import transaction_runtime

OK, FENCED, OLD_FENCED = ErrorCode.none, ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch


class Node:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def ask(self, api: ModuleType, version: int, **values: Any) -> Any:
        cls = request_class(api.API_KEY, version)
        request = make(cls, values)
        ctx = RequestContext(self.broker, RequestHeader(api.API_KEY, version, 1, "test"), "127.0.0.1")
        response = await answered(api.handle(ctx, request))
        assert encode_response(1, response)  # what the connection sends
        return response

    def build(self, api: ModuleType, version: int) -> MessageBuilder:
        return MessageBuilder(request_class(api.API_KEY, version))

    async def init(self, tid: str, version: int = 5, **values: Any) -> Any:
        return await self.ask(
            init_producer_id, version, transactional_id=tid, transaction_timeout=timedelta(seconds=60), **values
        )

    async def add(self, tid: str, pid: int, epoch: int, partitions: dict[str, list[int]], version: int = 3) -> Any:
        b = self.build(add_partitions_to_txn, version)
        topics = tuple(b("AddPartitionsToTxnTopic", name=n, partitions=tuple(ps)) for n, ps in partitions.items())
        return await self.ask(
            add_partitions_to_txn,
            version,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=topics,
        )

    async def end(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 4) -> Any:
        return await self.ask(
            end_txn, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        )


def run(body: Callable[[Node], Awaitable[None]]) -> None:
    async def main() -> None:
        config = BrokerConfig.from_properties(
            {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
        )
        broker = Broker(config, SegmentStore("/data", MemoryFileSystem()))
        broker.start()
        broker.cluster.create_topic("t", 2, {})
        broker.coordinator = CoordinatorRuntime(broker.cluster, config)
        broker.coordinator.start()
        broker.transactions = transaction_runtime(broker)
        broker.transactions.start()
        broker.transactions.ensure_created()  # what the first FindCoordinator for a transactional id does
        await broker.coordinator.wait_loaded()
        await broker.transactions.wait_loaded()
        try:
            await body(Node(broker))
        finally:
            await broker.transactions.close()
            await broker.coordinator.close()
            broker.close()

    asyncio.run(main())


def partition_errors(response: Any) -> dict[tuple[str, int], ErrorCode]:
    topics = response.results_by_topic_v3_and_below
    return {(t.name, p.partition_index): p.partition_error_code for t in topics for p in t.results_by_partition}


def test_the_first_lookup_of_a_transactional_id_makes_the_transaction_state_topic() -> None:
    async def body(node: Node) -> None:
        response = await node.ask(find_coordinator, 3, key_type=1, key="tx")
        assert response.error_code == OK  # made by `run`, as this test's first lookup did on a fresh broker:

        config = BrokerConfig.from_properties({"transaction.state.log.num.partitions": "2"})
        fresh = Broker(config, SegmentStore("/other", MemoryFileSystem()))
        fresh.start()
        fresh.transactions = transaction_runtime(fresh)
        fresh.transactions.start()
        assert fresh.cluster.get("__transaction_state") is None
        other = Node(fresh)
        assert (await other.init("tx")).error_code == ErrorCode.not_coordinator
        first = await other.ask(find_coordinator, 3, key_type=1, key="tx")
        assert first.error_code == ErrorCode.coordinator_not_available
        topic = fresh.cluster.get("__transaction_state")
        assert topic is not None and len(topic.partitions) == 2 and topic.internal
        await fresh.transactions.wait_loaded()
        assert (await other.ask(find_coordinator, 3, key_type=1, key="tx")).error_code == OK
        assert (await other.init("tx")).error_code == OK
        await fresh.transactions.close()
        fresh.close()

    run(body)


def test_find_coordinator_of_a_transactional_id_is_this_node() -> None:
    async def body(node: Node) -> None:
        for version in range(1, 7):  # one broker for every version; its own ids for each
            await each(node, version, f"-v{version}")

    async def each(node: Node, version: int, v: str) -> None:
        if version >= 4:
            response = await node.ask(find_coordinator, version, key_type=1, coordinator_keys=("tx-a" + v, "tx-b" + v))
            assert [(c.key, c.error_code, c.node_id, c.port) for c in response.coordinators] == [
                ("tx-a" + v, OK, 0, 9092),
                ("tx-b" + v, OK, 0, 9092),
            ]
        else:
            response = await node.ask(find_coordinator, version, key_type=1, key="tx-a" + v)
            assert (response.error_code, response.node_id, response.port) == (OK, 0, 9092)
        await node.broker.transactions.unload_partition(node.broker.transactions.partition_for("tx-a" + v))
        response = await node.ask(find_coordinator, version, key_type=1, key="tx-a" + v, coordinator_keys=("tx-a" + v,))
        error = response.coordinators[0].error_code if version >= 4 else response.error_code
        assert error == ErrorCode.coordinator_not_available
        runtime = node.broker.transactions
        await runtime.load_partition(runtime.partition_for("tx-a" + v))  # back for the next version
        await runtime.wait_loaded()

    run(body)


def test_init_producer_id_with_a_transactional_id() -> None:
    async def body(node: Node) -> None:
        for version in range(0, 6):  # one broker for every version; its own ids for each
            await each(node, version, f"-v{version}")

    async def each(node: Node, version: int, v: str) -> None:
        first = await node.init("tx" + v, version)
        assert (first.error_code, first.producer_epoch) == (OK, 0) and first.producer_id >= 0
        again = await node.init("tx" + v, version)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (OK, first.producer_id, 1)
        assert (await node.init("", version)).error_code == ErrorCode.invalid_request
        bad = await node.ask(
            init_producer_id, version, transactional_id="tx" + v, transaction_timeout=timedelta(seconds=901)
        )
        assert (bad.error_code, bad.producer_id, bad.producer_epoch) == (ErrorCode.invalid_transaction_timeout, -1, -1)
        if version >= 3:  # KIP-360: a stale epoch is fenced; the name of the code depends on the version
            stale = await node.init("tx" + v, version, producer_id=first.producer_id, producer_epoch=0)
            assert stale.error_code == (FENCED if version >= 4 else OLD_FENCED)
            bumped = await node.init("tx" + v, version, producer_id=first.producer_id, producer_epoch=1)
            assert (bumped.error_code, bumped.producer_epoch) == (OK, 2)

    run(body)


def test_idempotent_producers_still_get_ids_without_a_coordinator_round_trip() -> None:
    async def body(node: Node) -> None:
        first = await node.ask(init_producer_id, 4, transactional_id=None, transaction_timeout=timedelta(0))
        second = await node.ask(init_producer_id, 4, transactional_id=None, transaction_timeout=timedelta(0))
        assert (first.error_code, first.producer_epoch) == (OK, 0) and second.producer_id > first.producer_id

    run(body)


def test_add_partitions_v0_to_v3_and_end_txn() -> None:
    async def body(node: Node) -> None:
        for version in range(0, 4):  # one broker for every version; its own ids for each
            await each(node, version, f"-v{version}")

    async def each(node: Node, version: int, v: str) -> None:
        p = await node.init("tx" + v)
        added = await node.add("tx" + v, p.producer_id, 0, {"t": [0, 1]}, version)
        assert partition_errors(added) == {("t", 0): OK, ("t", 1): OK}
        missing = await node.add("tx" + v, p.producer_id, 0, {"t": [1, 2], "nope": [0]}, version)
        assert partition_errors(missing) == {
            ("t", 1): ErrorCode.operation_not_attempted,
            ("t", 2): ErrorCode.unknown_topic_or_partition,
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
        }
        stale = await node.add("tx" + v, p.producer_id, 1, {"t": [0]}, version)
        assert partition_errors(stale) == {("t", 0): FENCED if version >= 2 else OLD_FENCED}
        wrong = await node.add("tx" + v, p.producer_id + 1, 0, {"t": [0]}, version)
        assert partition_errors(wrong) == {("t", 0): ErrorCode.invalid_producer_id_mapping}
        shard = node.broker.transactions.shard_for("tx" + v).shard
        assert shard.transaction("tx" + v).partitions == frozenset({("t", 0), ("t", 1)})
        ended = await node.end("tx" + v, p.producer_id, 0, False)
        assert ended.error_code == OK
        assert (await node.end("tx" + v, p.producer_id, 0, True)).error_code == ErrorCode.invalid_txn_state

    run(body)


def test_add_partitions_v4_and_v5_batch_and_verify() -> None:
    async def body(node: Node) -> None:
        for version in range(4, 6):  # one broker for every version; its own ids for each
            await each(node, version, f"-v{version}")

    async def each(node: Node, version: int, v: str) -> None:
        p = await node.init("tx-1" + v)
        q = await node.init("tx-2" + v)
        await node.add("tx-1" + v, p.producer_id, 0, {"t": [0]})
        b = node.build(add_partitions_to_txn, version)

        def txn(tid: str, pid: int, verify: bool, partitions: list[int], topic: str = "t") -> Any:
            return b(
                "AddPartitionsToTxnTransaction",
                transactional_id=tid,
                producer_id=pid,
                producer_epoch=0,
                verify_only=verify,
                topics=(b("AddPartitionsToTxnTopic", name=topic, partitions=tuple(partitions)),),
            )

        response = await node.ask(
            add_partitions_to_txn,
            version,
            transactions=(
                txn("tx-1" + v, p.producer_id, True, [0, 1]),
                txn("tx-2" + v, q.producer_id, False, [1]),
                txn("tx-3" + v, 99, False, [0]),
                txn("tx-2" + v, q.producer_id, False, [0], topic="nope"),
            ),
        )
        assert response.error_code == OK
        got = [
            (
                r.transactional_id,
                {
                    (t.name, x.partition_index): x.partition_error_code
                    for t in r.topic_results
                    for x in t.results_by_partition
                },
            )
            for r in response.results_by_transaction
        ]
        assert got == [
            ("tx-1" + v, {("t", 0): OK, ("t", 1): ErrorCode.transaction_abortable}),
            ("tx-2" + v, {("t", 1): OK}),
            ("tx-3" + v, {("t", 0): ErrorCode.invalid_producer_id_mapping}),
            ("tx-2" + v, {("nope", 0): ErrorCode.unknown_topic_or_partition}),
        ]
        shard = node.broker.transactions.shard_for("tx-1" + v).shard
        assert shard.transaction("tx-1" + v).partitions == frozenset({("t", 0)})  # verify_only added nothing

    run(body)


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    async def body(node: Node) -> None:
        for version in range(0, 5):  # one broker for every version; its own ids for each
            await each(node, version, f"-v{version}")

    async def each(node: Node, version: int, v: str) -> None:
        p = await node.init("tx" + v)
        response = await node.ask(
            add_offsets_to_txn,
            version,
            transactional_id="tx" + v,
            producer_id=p.producer_id,
            producer_epoch=0,
            group_id="group",
        )
        assert response.error_code == OK
        partition = node.broker.coordinator.partition_for("group")
        shard = node.broker.transactions.shard_for("tx" + v).shard
        assert shard.transaction("tx" + v).partitions == frozenset({("__consumer_offsets", partition)})
        stale = await node.ask(
            add_offsets_to_txn,
            version,
            transactional_id="tx" + v,
            producer_id=p.producer_id,
            producer_epoch=1,
            group_id="group",
        )
        assert stale.error_code == (FENCED if version >= 2 else OLD_FENCED)

    run(body)


def test_end_txn_versions_and_fencing() -> None:
    async def body(node: Node) -> None:
        for version in range(0, 5):  # one broker for every version; its own ids for each
            await each(node, version, f"-v{version}")

    async def each(node: Node, version: int, v: str) -> None:
        p = await node.init("tx" + v)
        await node.add("tx" + v, p.producer_id, 0, {"t": [0]})
        await node.init("tx" + v)  # another producer: the open transaction is aborted under epoch 1
        stale = await node.end("tx" + v, p.producer_id, 0, True, version)
        assert stale.error_code == (FENCED if version >= 2 else OLD_FENCED)
        nobody = await node.end("nobody", 1, 0, True, version)
        assert nobody.error_code == ErrorCode.invalid_producer_id_mapping
        assert (await node.end("", 1, 0, True, version)).error_code == ErrorCode.invalid_request

    run(body)


def test_a_transactional_id_coordinated_elsewhere_is_not_coordinator() -> None:
    async def body(node: Node) -> None:
        runtime = node.broker.transactions
        await runtime.unload_partition(runtime.partition_for("tx"))
        assert (await node.init("tx")).error_code == ErrorCode.not_coordinator
        assert (await node.end("tx", 1, 0, True)).error_code == ErrorCode.not_coordinator
        assert partition_errors(await node.add("tx", 1, 0, {"t": [0]})) == {("t", 0): ErrorCode.not_coordinator}

    run(body)


def test_write_txn_markers_answers_each_partition() -> None:
    async def body(node: Node) -> None:
        b = node.build(write_txn_markers, 1)

        def marker(pid: int, partitions: dict[str, list[int]]) -> Any:
            return b(
                "WritableTxnMarker",
                producer_id=pid,
                producer_epoch=0,
                transaction_result=True,
                coordinator_epoch=0,
                topics=tuple(
                    b("WritableTxnMarkerTopic", name=n, partition_indexes=tuple(ps)) for n, ps in partitions.items()
                ),
            )

        response = await node.ask(
            write_txn_markers, 1, markers=(marker(7, {"nope": [0], "t": [5]}), marker(8, {"gone": [1, 2]}))
        )
        got = [
            (m.producer_id, [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in m.topics])
            for m in response.markers
        ]
        unknown = ErrorCode.unknown_topic_or_partition
        assert got == [
            (7, [("nope", [(0, unknown)]), ("t", [(5, unknown)])]),
            (8, [("gone", [(1, unknown), (2, unknown)])]),
        ]

    run(body)


def test_write_txn_markers_writes_a_control_batch_into_a_data_partition() -> None:
    async def body(node: Node) -> None:
        b = node.build(write_txn_markers, 1)
        log = node.broker.cluster.get("t").partitions[0]
        end = log.log_end_offset
        response = await node.ask(
            write_txn_markers,
            1,
            markers=(
                b(
                    "WritableTxnMarker",
                    producer_id=7,
                    producer_epoch=0,
                    transaction_result=False,
                    coordinator_epoch=0,
                    topics=(b("WritableTxnMarkerTopic", name="t", partition_indexes=(0,)),),
                ),
            ),
        )
        assert response.markers[0].topics[0].partitions[0].error_code == OK
        assert log.log_end_offset == end + 1

    run(body)


def test_describe_and_list_transactions() -> None:
    async def body(node: Node) -> None:
        p = await node.init("tx-open")
        await node.add("tx-open", p.producer_id, 0, {"t": [1, 0]})
        q = await node.init("tx-idle")
        response = await node.ask(describe_transactions, 0, transactional_ids=("tx-open", "tx-idle", "nope", ""))
        got = [
            (
                s.transactional_id,
                s.error_code,
                s.transaction_state,
                s.producer_id,
                s.producer_epoch,
                [(t.topic, t.partitions) for t in s.topics],
            )
            for s in response.transaction_states
        ]
        assert got == [
            ("tx-open", OK, "Ongoing", p.producer_id, 0, [("t", (0, 1))]),
            ("tx-idle", OK, "Empty", q.producer_id, 0, []),
            ("nope", ErrorCode.transactional_id_not_found, "", 0, 0, []),
            ("", ErrorCode.invalid_request, "", 0, 0, []),
        ]
        assert response.transaction_states[0].transaction_timeout == timedelta(seconds=60)

        async def listed(version: int = 1, **filters: Any) -> tuple[Any, list[tuple[str, int, str]]]:
            r = await node.ask(
                list_transactions,
                version,
                **{"state_filters": (), "producer_id_filters": (), "duration_filter": -1, **filters},
            )
            return r, sorted((s.transactional_id, s.producer_id, s.transaction_state) for s in r.transaction_states)

        r, everything = await listed(0)
        assert r.error_code == OK and everything == sorted(
            [("tx-open", p.producer_id, "Ongoing"), ("tx-idle", q.producer_id, "Empty")]
        )
        r, ongoing = await listed(state_filters=("Ongoing", "Bogus"))
        assert ongoing == [("tx-open", p.producer_id, "Ongoing")] and r.unknown_state_filters == ("Bogus",)
        assert (await listed(producer_id_filters=(q.producer_id,)))[1] == [("tx-idle", q.producer_id, "Empty")]
        # none has run for an hour; an id with no open transaction (start -1) passes, as in Kafka's shouldInclude
        assert (await listed(duration_filter=3_600_000))[1] == [("tx-idle", q.producer_id, "Empty")]

    run(body)
