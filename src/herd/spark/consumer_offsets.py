"""`__consumer_offsets` as typed rows: the group coordinator's history as data.

The coordinator persists every offset commit and every completed generation as records of Kafka's own
schemas (herd.coordinator.records decodes them). Two ways to get them as columns, decided so that the same
code works on herd and on a real Kafka cluster:

- the source option `decode=consumer_offsets` (with `subscribe=__consumer_offsets`): the source returns
  the decoded columns below instead of key/value, in batch and streaming queries;
- the function `decode_consumer_offsets(df)`: decodes any DataFrame with the Kafka source columns (key,
  value, partition, offset, timestamp), e.g. one read with `format("kafka")` from a Kafka cluster.

One row per record. `kind` is "offset_commit" (OffsetCommitKey: group, topic, partition; the value gives
offset, leader_epoch, metadata, commit_timestamp, expire_timestamp) or "group_metadata" (GroupMetadataKey:
group; the value gives protocol_type, generation, protocol, leader, state_timestamp and members, whose
subscribed topics and assigned partitions are decoded when the protocol type is "consumer"), or
"rebalance_history" (herd's own record 0x7E01, herd.coordinator.history: group; `generation` is the one the
group's latest rebalance produced; the entries themselves are read with `herd groups history`), or
"unknown" for record types herd does not write (KIP-848 groups, share groups) or cannot read (herd's
pre-registration record 0x7E00 included).
`tombstone` is true for a deletion (no value: an offset expired or deleted, or a group emptied and
removed). `log_partition`, `log_offset` and `log_timestamp` say where the record sits in
`__consumer_offsets`. Columns that do not apply to a row's kind are null.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from herd.spark.schema import CONSUMER_OFFSETS, RECORD, arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SCHEMA = CONSUMER_OFFSETS

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _time(ms: int) -> datetime | None:
    return _EPOCH + timedelta(milliseconds=ms) if ms >= 0 else None


def decode_record(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """The typed columns of one record (without the log_* columns). A record of a type or version herd
    cannot read, or with malformed bytes, is kind "unknown": one odd record does not fail a history job.

    The codecs (herd.coordinator, kio) are imported here, on first use: a Spark planner process that only
    needs the schema does not pay for them."""
    from herd.coordinator import records as coordinator_records

    unknown = {"kind": "unknown", "tombstone": value is None}
    if key is None or len(key) < 2:
        return unknown
    record_type = coordinator_records.record_type(key)
    try:
        if record_type in coordinator_records.OFFSET_COMMIT_KEY_TYPES:
            return _offset_commit(key, value)
        if record_type == coordinator_records.GROUP_METADATA_KEY_TYPE:
            return _group_metadata(key, value)
        if record_type == coordinator_records.REBALANCE_HISTORY_KEY_TYPE:
            return _rebalance_history(key, value)
    except Exception:  # kio raises its own decode errors as well as ValueError
        return unknown
    return unknown


def _offset_commit(key: bytes, value: bytes | None) -> dict[str, Any]:
    from herd.coordinator import records as coordinator_records

    k = coordinator_records.decode_offset_commit_key(key)
    row: dict[str, Any] = {
        "kind": "offset_commit",
        "group": k.group,
        "topic": k.topic,
        "partition": int(k.partition),
        "tombstone": value is None,
    }
    if value is not None:
        v = coordinator_records.decode_offset_commit_value(value)
        row.update(
            offset=v.offset,
            leader_epoch=v.leader_epoch,
            metadata=v.metadata,
            commit_timestamp=_time(v.commit_timestamp),
            expire_timestamp=_time(v.expire_timestamp),
        )
    return row


def _group_metadata(key: bytes, value: bytes | None) -> dict[str, Any]:
    from herd.coordinator import records as coordinator_records

    k = coordinator_records.decode_group_metadata_key(key)
    row: dict[str, Any] = {"kind": "group_metadata", "group": k.group, "tombstone": value is None}
    if value is not None:
        v = coordinator_records.decode_group_metadata_value(value)
        consumer = v.protocol_type == "consumer"
        row.update(
            protocol_type=v.protocol_type,
            generation=int(v.generation),
            protocol=v.protocol,
            leader=v.leader,
            state_timestamp=_time(v.current_state_timestamp),
            members=[_member(m, consumer) for m in v.members],
        )
    return row


def _rebalance_history(key: bytes, value: bytes | None) -> dict[str, Any]:
    from herd.coordinator import records as coordinator_records

    k = coordinator_records.decode_rebalance_history_key(key)
    row: dict[str, Any] = {"kind": "rebalance_history", "group": k.group, "tombstone": value is None}
    if value is not None:
        produced = [
            e.generation for e in coordinator_records.decode_rebalance_history_value(value) if e.generation >= 0
        ]
        row["generation"] = int(produced[-1]) if produced else None
    return row


def _member(m: Any, consumer: bool) -> dict[str, Any]:
    from herd.client.consumer_protocol import ConsumerProtocolError, decode_assignment, decode_subscription

    member = {
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "rebalance_timeout_ms": int(m.rebalance_timeout),
        "session_timeout_ms": int(m.session_timeout),
        "subscribed_topics": None,
        "assignment": None,
    }
    if consumer:
        try:
            member["subscribed_topics"] = list(decode_subscription(m.subscription).topics)
            member["assignment"] = [{"topic": t, "partition": p} for t, p in decode_assignment(m.assignment).partitions]
        except ConsumerProtocolError:
            pass  # a client wrote something else under "consumer": keep the member, without its topics
    return member


def _decode_untyped(key, value):  # type: ignore[no-untyped-def]
    """decode_record for F.udf: without annotations, which Spark would try to read as pandas UDF hints."""
    return decode_record(key, value)


def decode_rows(rows: Iterable[tuple[bytes | None, bytes | None, int, int, int]]) -> list[dict[str, Any]]:
    """(key, value, log partition, log offset, log timestamp in ms) to decoded rows."""
    out = []
    for key, value, partition, offset, timestamp in rows:
        row = decode_record(key, value)
        row.update(log_partition=partition, log_offset=offset, log_timestamp=_time(timestamp))
        out.append(row)
    return out


def to_record_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=arrow_schema(CONSUMER_OFFSETS))


def decode_consumer_offsets(df: DataFrame) -> DataFrame:
    """Decode a DataFrame of `__consumer_offsets` records with the Kafka source's columns (from
    `format("herd")` or `format("kafka")`, batch or streaming) into the columns of CONSUMER_OFFSETS.

    A plain Python UDF (no pandas needed) decodes key and value into a struct that is then flattened."""
    from pyspark.sql import functions as F

    decode = F.udf(_decode_untyped, RECORD, useArrow=False)
    decoded = df.select(
        decode("key", "value").alias("record"),
        F.col("partition").alias("log_partition"),
        F.col("offset").alias("log_offset"),
        F.col("timestamp").alias("log_timestamp"),
    )
    return decoded.select("record.*", "log_partition", "log_offset", "log_timestamp")
