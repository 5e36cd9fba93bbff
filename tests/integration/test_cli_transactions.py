"""`herd transactions` and the admin calls under it (herd.client.admin_transactions) against one in-process
embedded broker whose transactions are opened with raw requests (InitProducerId with a transactional id,
AddPartitionsToTxn, Produce): list with its filters, describe, describe-producers, abort and find-hanging, printed
in kafka-transactions.sh's columns (in-process through click for the tables, two real `python -m herd.cli`
processes for the exit codes and the one-line errors). The broker verifies no first transactional write
(transaction.partition.verification.enable=false, as a broker before Kafka 3.6), so that a producer no coordinator
knows can leave the hanging transactions find-hanging and abort are for.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner
from inprocess import InProcessBroker
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, part, req
from test_cli_admin import fails, rows

from herd.cli import cli
from herd.client.admin import Admin, AdminError
from herd.client.admin_transactions import AbortSpec
from herd.client.consumer_protocol import TopicPartition

T = TypeVar("T")
PRODUCE, FIND, INIT, ADD_PARTITIONS, END = 0, 10, 22, 24, 26
OK = ErrorCode.none
OLD_MS = 1_000  # a batch timestamp long past, so that the producer's transaction is older than any timeout


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    # without KIP-890 verification, as a broker before Kafka 3.6: the ghost producer below leaves a hanging
    # transaction, which find-hanging and abort are for
    b = InProcessBroker(
        {
            "log.dirs": str(tmp_path_factory.mktemp("cli-txn")),
            "num.partitions": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
            "transaction.partition.verification.enable": "false",
        }
    )
    with RawClient(b.port) as c:  # the first lookup of a transactional id may be what makes __transaction_state
        assert c.request(FIND, 3, req(FIND, 3, key="any", key_type=1)).error_code in (
            OK,
            ErrorCode.coordinator_not_available,
        )
    b.run(b.server.broker.transactions.wait_loaded())
    for topic in ("orders", "plain", "hang", "young"):
        b.run(_create(b, topic))
    yield b
    b.stop()


async def _create(b: InProcessBroker, topic: str) -> None:
    b.server.broker.cluster.create_topic(topic, 1)


def admin_call(b: InProcessBroker, fn: Callable[[Admin], Awaitable[T]]) -> T:
    async def main() -> T:
        async with Admin(b.bootstrap, request_timeout_ms=5_000) as admin:
            return await fn(admin)

    return asyncio.run(main())


def herd_ok(b: InProcessBroker, *args: str) -> str:
    """`herd transactions ARGS` in this process (click), its stdout; fails the test on a non-zero exit."""
    result = CliRunner().invoke(cli, ["transactions", *args, "--bootstrap-server", b.bootstrap])
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result.output


def open_transaction(c: RawClient, tid: str, topic: str) -> Any:
    """InitProducerId and AddPartitionsToTxn: the coordinator holds an Ongoing transaction on `topic`-0."""
    p = c.request(INIT, 5, req(INIT, 5, transactional_id=tid, transaction_timeout=60_000))
    assert p.error_code == OK
    t = part(ADD_PARTITIONS, 3, "AddPartitionsToTxnTopic", name=topic, partitions=(0,))
    r = c.request(
        ADD_PARTITIONS,
        3,
        req(
            ADD_PARTITIONS,
            3,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=p.producer_id,
            v3_and_below_producer_epoch=p.producer_epoch,
            v3_and_below_topics=(t,),
        ),
    )
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == OK
    return p


def produce(
    c: RawClient,
    topic: str,
    producer_id: int,
    epoch: int,
    sequence: int,
    *,
    transactional_id: str | None = None,
    count: int = 2,
    timestamp: int = OLD_MS,
) -> Any:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional_id is not None,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    for i in range(count):
        builder.append(i, timestamp=timestamp + i, key=None, value=b"v", headers=[])
    data = part(
        PRODUCE,
        9,
        "TopicProduceData",
        name=topic,
        partition_data=(part(PRODUCE, 9, "PartitionProduceData", index=0, records=bytes(builder.build())),),
    )
    r = c.request(
        PRODUCE, 9, req(PRODUCE, 9, transactional_id=transactional_id, acks=-1, timeout=5000, topic_data=(data,))
    )
    return r.responses[0].partition_responses[0]


@pytest.fixture(scope="module")
def ongoing(broker: InProcessBroker) -> Any:
    """tx-list: an Ongoing transaction on orders-0; tx-done: one aborted before anything was added (Empty after
    InitProducerId); an idempotent producer's two records in plain-0."""
    with RawClient(broker.port) as c:
        p = open_transaction(c, "tx-list", "orders")
        done = c.request(INIT, 5, req(INIT, 5, transactional_id="tx-done", transaction_timeout=30_000))
        idem = c.request(INIT, 5, req(INIT, 5, transactional_id=None, transaction_timeout=30_000))
        assert produce(c, "plain", idem.producer_id, idem.producer_epoch, 0).error_code == OK
    return p, done, idem


def test_list_filters_and_json(broker: InProcessBroker, ongoing: Any) -> None:
    p, done, _ = ongoing
    table = rows(herd_ok(broker, "list"))
    assert table[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert ["tx-list", "0", str(p.producer_id), "Ongoing"] in table[1:]
    assert ["tx-done", "0", str(done.producer_id), "Empty"] in table[1:]
    ongoing_only = json.loads(herd_ok(broker, "list", "--state", "ongoing", "--output", "json"))
    assert {
        "transactional_id": "tx-list",
        "coordinator": 0,
        "producer_id": p.producer_id,
        "state": "Ongoing",
    } in ongoing_only
    assert all(t["state"] == "Ongoing" for t in ongoing_only)
    by_producer = rows(herd_ok(broker, "list", "--producer-id", str(done.producer_id)))
    assert by_producer[1:] == [["tx-done", "0", str(done.producer_id), "Empty"]]
    # KIP-994: only transactions running longer than the filter: tx-list began just now (tx-done has no start time,
    # -1, and Kafka's coordinator, as herd's, counts it as running since then)
    assert "tx-list" in [r[0] for r in rows(herd_ok(broker, "list", "--duration-filter", "-1"))]
    assert "tx-list" not in [r[0] for r in rows(herd_ok(broker, "list", "--duration-filter", "3600000"))]


def test_describe_a_transactional_id(broker: InProcessBroker, ongoing: Any) -> None:
    p, _, _ = ongoing
    before = int(time.time() * 1000)
    header, row = rows(herd_ok(broker, "describe", "--transactional-id", "tx-list"))
    assert header == [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    ]
    assert row[:6] + row[8:] == [
        "0",
        "tx-list",
        str(p.producer_id),
        str(p.producer_epoch),
        "Ongoing",
        "60000",
        "orders-0",
    ]
    start, duration = int(row[6]), int(row[7])
    assert before - 60_000 < start <= before and 0 <= duration < 60_000
    empty = json.loads(herd_ok(broker, "describe", "--transactional-id", "tx-done", "--output", "json"))
    assert (empty["state"], empty["start_time_ms"], empty["duration_ms"], empty["partitions"]) == (
        "Empty",
        None,
        None,
        [],
    )
    with pytest.raises(AdminError) as e:
        admin_call(broker, lambda admin: admin.describe_transaction("nobody"))
    assert e.value.code == ErrorCode.transactional_id_not_found


def test_describe_producers_of_a_partition(broker: InProcessBroker, ongoing: Any) -> None:
    _, _, idem = ongoing
    header, *producers = rows(herd_ok(broker, "describe-producers", "--topic", "plain", "--partition", "0"))
    assert header == [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    assert producers == [[str(idem.producer_id), str(idem.producer_epoch), "-1", "1", str(OLD_MS + 1), "None"]]
    asked_of_broker = json.loads(
        herd_ok(
            broker, "describe-producers", "--topic", "plain", "--partition", "0", "--broker-id", "0", "--output", "json"
        )
    )
    assert asked_of_broker == [
        {
            "producer_id": idem.producer_id,
            "producer_epoch": idem.producer_epoch,
            "coordinator_epoch": None,
            "last_sequence": 1,
            "last_timestamp": OLD_MS + 1,
            "current_transaction_start_offset": None,
        }
    ]
    for partitions, message in (
        ([TopicPartition("nope", 0)], "Topic 'nope' does not exist."),
        ([TopicPartition("plain", 3)], "Partition 3 of topic 'plain' does not exist."),
    ):
        with pytest.raises(AdminError) as e:
            admin_call(broker, lambda admin: admin.describe_producers(partitions))
        assert e.value.message == message


def test_the_commands_as_processes_exit_codes_and_one_line_errors(broker: InProcessBroker, ongoing: Any) -> None:
    assert fails("transactions", "describe", "--transactional-id", "nobody", bootstrap=broker.bootstrap) == (
        "herd: error: Failed to describe transaction state of transactional-id `nobody`: DescribeTransactions "
        "request for transactionalId `nobody` failed because the ID could not be found."
    )
    assert (
        fails(
            "transactions",
            "abort",
            "--topic",
            "orders",
            "--partition",
            "0",
            "--producer-id",
            "5",
            bootstrap=broker.bootstrap,
            code=2,
        )
        == "herd: error: Missing required argument --producer-epoch"
    )


def test_find_hanging_needs_a_scope_and_finds_nothing_in_a_partition_without_transactions(
    broker: InProcessBroker, ongoing: Any
) -> None:
    result = CliRunner().invoke(cli, ["transactions", "find-hanging", "--partition", "0"])
    assert result.exit_code == 2 and "requires either --topic or --broker-id" in result.output
    assert rows(herd_ok(broker, "find-hanging", "--topic", "plain", "--max-transaction-timeout", "0")) == [
        [
            "Topic",
            "Partition",
            "ProducerId",
            "ProducerEpoch",
            "CoordinatorEpoch",
            "StartOffset",
            "LastTimestamp",
            "Duration(min)",
        ]
    ]
    assert (
        admin_call(broker, lambda admin: admin.find_hanging(int(time.time() * 1000), broker_id=0, max_timeout_ms=0))
        == []
    )


# -- with the data path of issue 17 --------------------------------------------------------------------------------


def _start_offsets(b: InProcessBroker, topic: str) -> dict[int, int | None]:
    tp = TopicPartition(topic, 0)
    return {p.producer_id: p.txn_start_offset for p in admin_call(b, lambda admin: admin.describe_producers([tp]))[tp]}


@pytest.fixture(scope="module")
def transactional(broker: InProcessBroker, ongoing: Any) -> Any:
    """tx-data: an Ongoing transaction whose batch (offsets 0-1) is in orders-0; a ghost: a producer whose
    transactional batch is in hang-0 but whose transactional id no coordinator knows (a hanging transaction)."""
    with RawClient(broker.port) as c:
        p, _, _ = ongoing
        written = produce(c, "orders", p.producer_id, p.producer_epoch, 0, transactional_id="tx-list")
        assert written.error_code == OK, written
        ghost = c.request(INIT, 5, req(INIT, 5, transactional_id=None, transaction_timeout=30_000))
        assert produce(c, "hang", ghost.producer_id, ghost.producer_epoch, 0, transactional_id="ghost").error_code == OK
    assert _start_offsets(broker, "orders").get(p.producer_id) == 0
    return p, ghost


def test_describe_producers_shows_the_open_transaction(broker: InProcessBroker, transactional: Any) -> None:
    p, _ = transactional
    producers = rows(herd_ok(broker, "describe-producers", "--topic", "orders", "--partition", "0"))[1:]
    assert [[r[0], r[1], r[5]] for r in producers] == [[str(p.producer_id), str(p.producer_epoch), "0"]]


def test_find_hanging_finds_the_transaction_no_coordinator_knows(broker: InProcessBroker, transactional: Any) -> None:
    p, ghost = transactional
    found = rows(herd_ok(broker, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0"))[1:]
    # tx-list's transaction in orders-0 is not hanging: its coordinator names the partition
    assert [r[:6] for r in found] == [["hang", "0", str(ghost.producer_id), str(ghost.producer_epoch), "-1", "0"]]


def test_abort_by_start_offset_and_by_producer(broker: InProcessBroker, transactional: Any) -> None:
    p, ghost = transactional
    assert herd_ok(broker, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0") == (
        f"Aborted the transaction of producer {ghost.producer_id} (epoch {ghost.producer_epoch}, coordinator epoch 0) "
        f"on hang-0.\n"
    )
    assert _start_offsets(broker, "hang").get(ghost.producer_id) is None
    with pytest.raises(AdminError) as e:
        admin_call(broker, lambda admin: admin.abort_spec(TopicPartition("hang", 0), 0))
    assert e.value.message == "Could not find any open transactions starting at offset 0 on partition hang-0"
    spec = AbortSpec(TopicPartition("orders", 0), p.producer_id, p.producer_epoch, 0)
    admin_call(broker, lambda admin: admin.abort_transaction(spec))
    assert _start_offsets(broker, "orders").get(p.producer_id) is None
    stale = AbortSpec(TopicPartition("orders", 0), p.producer_id, -1, 0)  # older than the marker's epoch 0
    with pytest.raises(AdminError) as e:
        admin_call(broker, lambda admin: admin.abort_transaction(stale))
    assert e.value.code == ErrorCode.invalid_producer_epoch


def test_find_hanging_leaves_out_a_transaction_younger_than_the_timeout(broker: InProcessBroker) -> None:
    """A transaction is hanging only once it is older than the longest transaction timeout (default 15 minutes,
    kafka-transactions.sh's --max-transaction-timeout)."""
    with RawClient(broker.port) as c:
        young = c.request(INIT, 5, req(INIT, 5, transactional_id=None, transaction_timeout=30_000))
        assert (
            produce(
                c,
                "young",
                young.producer_id,
                young.producer_epoch,
                0,
                transactional_id="ghost-2",
                timestamp=int(time.time() * 1000),
            ).error_code
            == OK
        )
    assert rows(herd_ok(broker, "find-hanging", "--topic", "young"))[1:] == []
    found = rows(herd_ok(broker, "find-hanging", "--topic", "young", "--max-transaction-timeout", "0"))[1:]
    assert [r[:3] for r in found] == [["young", "0", str(young.producer_id)]]
