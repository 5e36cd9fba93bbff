"""`herd transactions ...`: transactions and the producers of partitions, as kafka-transactions.sh shows them.

    herd transactions list [--state STATE]... [--producer-id ID]... [--duration-filter MS]
    herd transactions describe --transactional-id ID
    herd transactions describe-producers --topic T --partition P [--broker-id N]
    herd transactions abort --topic T --partition P (--start-offset N
                            | --producer-id ID --producer-epoch E --coordinator-epoch C)
    herd transactions find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]

The subcommands, their options and their columns are kafka-transactions.sh's (apache/kafka tools/src/main/java/org/
apache/kafka/tools/TransactionsCommand.java, the version with list --duration-filter of KIP-994): list prints
TransactionalId, Coordinator (the broker id that answered), ProducerId, TransactionState; describe CoordinatorId,
TransactionalId, ProducerId, ProducerEpoch, TransactionState, TransactionTimeoutMs, CurrentTransactionStartTimeMs,
TransactionDurationMs (now - start, on this machine's clock) and TopicPartitions (`topic-partition`, comma-separated);
describe-producers ProducerId, ProducerEpoch, LatestCoordinatorEpoch, LastSequence, LastTimestamp,
CurrentTransactionStartOffset; find-hanging Topic, Partition, ProducerId, ProducerEpoch, CoordinatorEpoch,
StartOffset, LastTimestamp, Duration(min). Missing values print as Kafka's tool prints them ("None" for a start time
or start offset, -1 for a coordinator epoch). Columns are aligned with two spaces, as herd's other tables.

Differences from kafka-transactions.sh: list also takes --state and --producer-id, the filters Kafka's Admin has
(ListTransactionsOptions.filterStates / filterProducerIds) but its tool does not expose; abort prints one line when
done (Kafka's prints nothing); every subcommand takes --output json. abort --start-offset finds the producer through
DescribeProducers' current transaction start offset and writes an ABORT marker with WriteTxnMarkers to the
partition's leader, as Kafka's does; with --producer-id it needs --producer-epoch and --coordinator-epoch (a negative
coordinator epoch is sent as 0). Failures are one line on stderr with exit code 1; bad arguments exit 2.
"""

from __future__ import annotations

import time
from typing import Any

import click

from herd.cli.common import bootstrap_option, echo_json, echo_table, output_option, run_admin
from herd.client.admin import Admin
from herd.client.admin_transactions import (
    MINUTE_MS,
    TRANSACTION_STATES,
    AbortSpec,
    OpenTransaction,
    ProducerState,
    TransactionDescription,
    partition_name,
)
from herd.client.consumer_protocol import TopicPartition

__all__ = ["transactions"]

LIST_COLUMNS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_COLUMNS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCER_COLUMNS = (
    "ProducerId",
    "ProducerEpoch",
    "LatestCoordinatorEpoch",
    "LastSequence",
    "LastTimestamp",
    "CurrentTransactionStartOffset",
)
HANGING_COLUMNS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _text(value: Any, missing: str) -> str:
    return missing if value is None else str(value)


@click.group("transactions")
def transactions() -> None:
    """Transactions: list, describe, describe-producers, abort, find-hanging (kafka-transactions.sh)."""


topic_option = click.option("--topic", required=True, metavar="TOPIC", help="The topic name.")
partition_option = click.option("--partition", required=True, type=int, metavar="N", help="The partition number.")


@transactions.command("list")
@bootstrap_option
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    type=click.Choice(TRANSACTION_STATES, case_sensitive=False),
    help="Only transactions in this state (repeatable).",
)
@click.option(
    "--producer-id",
    "producer_ids",
    multiple=True,
    type=int,
    metavar="ID",
    help="Only the transactions of this producer id (repeatable).",
)
@click.option(
    "--duration-filter",
    type=int,
    metavar="MS",
    help="Only transactions running longer than this many milliseconds (all when < 0).",
)
@output_option
def list_(
    bootstrap: str, states: tuple[str, ...], producer_ids: tuple[int, ...], duration_filter: int | None, output: str
) -> None:
    """List the transactions every broker coordinates."""
    canonical = tuple(next(s for s in TRANSACTION_STATES if s.lower() == state.lower()) for state in states)
    listings = run_admin(bootstrap, lambda admin: admin.list_transactions(canonical, producer_ids, duration_filter))
    rows = [(t.transactional_id, node, t.producer_id, t.state) for node, ts in sorted(listings.items()) for t in ts]
    if output == "json":
        echo_json([{"transactional_id": t, "coordinator": c, "producer_id": p, "state": s} for t, c, p, s in rows])
    else:
        echo_table(LIST_COLUMNS, rows)


@transactions.command("describe")
@bootstrap_option
@click.option("--transactional-id", required=True, metavar="ID", help="The transactional id.")
@output_option
def describe(bootstrap: str, transactional_id: str, output: str) -> None:
    """Describe the state of a transactional id at its coordinator."""
    if not transactional_id:
        raise click.BadParameter("the transactional id cannot be empty", param_hint="'--transactional-id'")
    d: TransactionDescription = run_admin(bootstrap, lambda admin: admin.describe_transaction(transactional_id))
    duration = None if d.start_ms is None else _now_ms() - d.start_ms
    if output == "json":
        echo_json(
            {
                "coordinator_id": d.coordinator_id,
                "transactional_id": d.transactional_id,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "state": d.state,
                "timeout_ms": d.timeout_ms,
                "start_time_ms": d.start_ms,
                "duration_ms": duration,
                "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in d.partitions],
            }
        )
        return
    echo_table(
        DESCRIBE_COLUMNS,
        [
            (
                d.coordinator_id,
                d.transactional_id,
                d.producer_id,
                d.producer_epoch,
                d.state,
                d.timeout_ms,
                _text(d.start_ms, "None"),
                _text(duration, "None"),
                ",".join(partition_name(tp) for tp in d.partitions),
            )
        ],
    )


def _producer_json(p: ProducerState) -> dict[str, Any]:
    return {
        "producer_id": p.producer_id,
        "producer_epoch": p.producer_epoch,
        "coordinator_epoch": p.coordinator_epoch,
        "last_sequence": p.last_sequence,
        "last_timestamp": p.last_timestamp,
        "current_transaction_start_offset": p.txn_start_offset,
    }


@transactions.command("describe-producers")
@bootstrap_option
@topic_option
@partition_option
@click.option("--broker-id", type=int, metavar="N", help="Ask this broker rather than the partition's leader.")
@output_option
def describe_producers(bootstrap: str, topic: str, partition: int, broker_id: int | None, output: str) -> None:
    """Describe the active producers of a partition."""
    tp = TopicPartition(topic, partition)
    producers = run_admin(bootstrap, lambda admin: admin.describe_producers([tp], broker_id))[tp]
    if output == "json":
        echo_json([_producer_json(p) for p in producers])
        return
    echo_table(
        PRODUCER_COLUMNS,
        [
            (
                p.producer_id,
                p.producer_epoch,
                _text(p.coordinator_epoch, "-1"),
                p.last_sequence,
                p.last_timestamp,
                _text(p.txn_start_offset, "None"),
            )
            for p in producers
        ],
    )


@transactions.command("abort")
@bootstrap_option
@topic_option
@partition_option
@click.option("--start-offset", type=int, metavar="N", help="The start offset of the transaction to abort.")
@click.option(
    "--producer-id",
    type=int,
    metavar="ID",
    help="The producer id (with --producer-epoch and --coordinator-epoch, instead of --start-offset).",
)
@click.option("--producer-epoch", type=int, metavar="E", help="The producer epoch.")
@click.option("--coordinator-epoch", type=int, metavar="C", help="The coordinator epoch.")
@output_option
def abort(
    bootstrap: str,
    topic: str,
    partition: int,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
    output: str,
) -> None:
    """Abort a hanging transaction on one partition (writes an ABORT marker)."""
    tp = TopicPartition(topic, partition)
    if start_offset is None and producer_id is None:
        raise click.UsageError(
            "The transaction to abort must be identified either with --start-offset or with "
            "--producer-id, --producer-epoch, and --coordinator-epoch"
        )
    if start_offset is not None and producer_id is not None:
        raise click.UsageError("--start-offset and --producer-id cannot be given together")
    spec = None
    if producer_id is not None:
        if producer_epoch is None:
            raise click.UsageError("Missing required argument --producer-epoch")
        if coordinator_epoch is None:
            raise click.UsageError("Missing required argument --coordinator-epoch")
        # kafka-transactions.sh: a producer that never had a marker shows coordinator epoch -1; 0 is <= any
        spec = AbortSpec(tp, producer_id, producer_epoch, max(coordinator_epoch, 0))

    async def call(admin: Admin) -> AbortSpec:
        chosen = spec if spec is not None else await admin.abort_spec(tp, start_offset or 0)
        await admin.abort_transaction(chosen)
        return chosen

    done = run_admin(bootstrap, call)
    if output == "json":
        echo_json(
            {
                "topic": topic,
                "partition": partition,
                "producer_id": done.producer_id,
                "producer_epoch": done.producer_epoch,
                "coordinator_epoch": done.coordinator_epoch,
            }
        )
    else:
        click.echo(
            f"Aborted the transaction of producer {done.producer_id} (epoch {done.producer_epoch}, "
            f"coordinator epoch {done.coordinator_epoch}) on {partition_name(tp)}."
        )


@transactions.command("find-hanging")
@bootstrap_option
@click.option("--broker-id", type=int, metavar="N", help="Search the partitions with a replica on this broker.")
@click.option(
    "--max-transaction-timeout",
    type=click.IntRange(min=0),
    default=15,
    show_default=True,
    metavar="MIN",
    help="The largest transaction timeout in minutes: a transaction older is a candidate.",
)
@click.option("--topic", metavar="TOPIC", help="Search this topic (required with --partition).")
@click.option("--partition", type=int, metavar="N", help="Search this partition of --topic.")
@output_option
def find_hanging(
    bootstrap: str,
    broker_id: int | None,
    max_transaction_timeout: int,
    topic: str | None,
    partition: int | None,
    output: str,
) -> None:
    """Find open transactions that no coordinator will complete."""
    if topic is None and broker_id is None:
        raise click.UsageError(
            "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search"
        )
    if partition is not None and topic is None:
        raise click.UsageError("The --partition argument requires --topic to be provided")
    now = _now_ms()
    found: list[OpenTransaction] = run_admin(
        bootstrap,
        lambda admin: admin.find_hanging(
            now,
            broker_id=broker_id,
            topic=topic,
            partition=partition,
            max_timeout_ms=max_transaction_timeout * MINUTE_MS,
        ),
    )
    if output == "json":
        echo_json(
            [
                {
                    "topic": t.partition.topic,
                    "partition": t.partition.partition,
                    **_producer_json(t.producer),
                    "duration_min": (now - t.producer.last_timestamp) // MINUTE_MS,
                }
                for t in found
            ]
        )
        return
    echo_table(
        HANGING_COLUMNS,
        [
            (
                t.partition.topic,
                t.partition.partition,
                t.producer.producer_id,
                t.producer.producer_epoch,
                _text(t.producer.coordinator_epoch, "-1"),
                _text(t.producer.txn_start_offset, "-1"),
                t.producer.last_timestamp,
                (now - t.producer.last_timestamp) // MINUTE_MS,
            )
            for t in found
        ],
    )
