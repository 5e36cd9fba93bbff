"""Produce (key 0), v3-v13.

v3: record batch format v2 and transactional id (the lowest version Kafka 4.x accepts, KIP-896). v5: log start
offset in the answer. v8: per-record errors and an error message. v9: flexible. v10-v11: current leader and node
endpoints for KIP-951, left empty in both modes: in cluster mode a client answered NOT_LEADER_OR_FOLLOWER
refreshes its metadata to find the new leader, as with a broker before KIP-951. v12: no body change (KIP-890). v13:
topics by id.

Each partition's `records` go to the log's `append` exactly as sent (compressed or not), as a client's
(`client=True`): the log checks their records as Kafka's LogValidator checks them (`herd.log.records.check_records`:
every batch decompresses, its records are well framed and as many as it declares; CORRUPT_MESSAGE or
INVALID_RECORD with a message otherwise), checks framing, magic and CRC32C, passes them through the partition's
producer state (idempotent producers are checked per partition there) and assigns offsets
(herd.log.producer_state `client_append`). acks must be -1, 0 or 1 (INVALID_REQUIRED_ACKS otherwise); with acks=0
no answer is sent. On one node acks=-1 and acks=1 are the same: the write is in the log (and flushed as log.flush.*
say) when the answer goes out. In cluster mode a partition another node leads gets NOT_LEADER_OR_FOLLOWER, and the
answer waits until the appended batches are committed to PostgreSQL (acks=1 and acks=-1 alike).

Transactional batches (attribute bit 4) are accepted from a request that names a transactional id; one that holds
any and names none is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED in every partition, as Kafka's
KafkaApis.handleProduceRequest answers it (apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala,
`RequestUtils.hasTransactionalRecords`). The log then checks them as Kafka's ProducerAppendInfo does
(herd.log.transactions): INVALID_PRODUCER_EPOCH for an epoch older than the partition last saw (its batches or a
marker that bumped it), INVALID_TXN_STATE for a non-transactional batch while the producer's transaction is
ongoing; the first transactional batch of a producer begins its transaction in the partition (the last stable
offset stays below it until its marker). Control batches are the broker's: a client's get INVALID_RECORD. A
producer's first transactional write to a partition is verified with its transaction coordinator before it is
appended (KIP-890 part 1, `_verify`; `transaction.partition.verification.enable`, true by default as in Kafka);
the request's answer then waits for that.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
WRITE on the transactional id of transactional batches (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), WRITE on each topic (else TOPIC_AUTHORIZATION_FAILED
per partition, before its existence is looked at).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from herd.log.api import LogError, PartitionLog
from herd.log.batch import ATTRIBUTES_OFFSET, LOG_OVERHEAD, TRANSACTIONAL_BIT, parse_header
from herd.server.apis import _verify
from herd.server.apis._authorize import TRANSACTIONAL_ID, WRITE, authorized, topic_denied
from herd.server.apis._build import Builder, ctx_builder
from herd.server.apis._requests import ProduceRequest
from herd.server.apis._topics import led_partition, resolve_topic, topic_ref
from herd.server.broker import RequestContext

log = logging.getLogger(__name__)

API_KEY = 0
_ATTRIBUTES_LOW = ATTRIBUTES_OFFSET + 1  # the attributes are an int16: their flags sit in its second byte
MIN_VERSION = 3
MAX_VERSION = 13


def handle(ctx: RequestContext, request: ProduceRequest) -> Any:
    b = ctx_builder(ctx)
    acks = request.acks
    if acks not in (-1, 0, 1):
        error = ErrorCode.invalid_required_acks
    elif request.transactional_id is None and _has_transactional_records(request):
        error = ErrorCode.transactional_id_authorization_failed
    elif (
        ctx.broker.authorizer is not None
        and request.transactional_id is not None
        and _has_transactional_records(request)
        and not authorized(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id)
    ):
        error = ErrorCode.transactional_id_authorization_failed
    else:
        error = ErrorCode.none
    if (
        request.transactional_id is not None
        and error is ErrorCode.none
        and ctx.broker.config.get("transaction.partition.verification.enable")
    ):
        unverified = _to_verify(ctx, request)
        if unverified:
            return _produce_verified(b, ctx, request, unverified)
    return _produce(b, ctx, request, error, {})


def _produce(b: Builder, ctx: RequestContext, request: ProduceRequest, error: ErrorCode, refused: _Refused) -> Any:
    """The answer, or (cluster mode) a coroutine answering once the appends have committed."""
    topics, commits = _append_all(b, ctx, request, error, refused)
    if commits:
        return _after_commits(b, ctx, topics, commits, request.acks)
    return _answer(b, request, topics)


def _append_all(b: Builder, ctx: RequestContext, request: ProduceRequest, error: ErrorCode,
                refused: _Refused) -> tuple[tuple[Any, ...], list[_Commit]]:  # fmt: skip
    commits: list[_Commit] = []
    checked = error is ErrorCode.none and ctx.broker.authorizer is not None
    topics = tuple(
        _produce_topic(b, ctx, entry, _write_denied(ctx, entry) if checked else error, commits, refused)
        for entry in request.topic_data
    )
    return topics, commits


def _answer(b: Builder, request: Any, topics: tuple[Any, ...]) -> Any:
    if request.acks == 0:
        return None
    return b.response(responses=topics, throttle_time=0, node_endpoints=())


def _write_denied(ctx: RequestContext, entry: Any) -> ErrorCode:
    """TOPIC_AUTHORIZATION_FAILED for every partition of a topic the principal may not WRITE, before its existence
    is looked at (apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala handleProduceRequest)."""
    topic = None if getattr(entry, "name", None) else resolve_topic(ctx.broker, entry)[0]  # v13: by id
    return ErrorCode.topic_authorization_failed if topic_denied(ctx, entry, topic, WRITE) else ErrorCode.none


_Refused = dict[tuple[str, int], tuple[ErrorCode, str | None]]  # partitions answered with an error, not appended
_Unverified = dict[tuple[str, int], tuple[PartitionLog, int, int, int]]  # log, producer id, epoch, guard token


def _to_verify(ctx: RequestContext, request: ProduceRequest) -> _Unverified:
    """The partitions of a transactional request whose first batch would begin its producer's transaction there:
    each with its log, producer and the log's verification guard (herd.log.transactions.start_verification)."""
    out: _Unverified = {}
    for entry in request.topic_data:
        topic, topic_error = resolve_topic(ctx.broker, entry)
        if topic is None or topic.internal:
            continue
        for data in entry.partition_data:
            records = data.records
            if not records or len(records) <= _ATTRIBUTES_LOW or not records[_ATTRIBUTES_LOW] & TRANSACTIONAL_BIT:
                continue
            log = led_partition(topic, topic_error, data.index)
            transactions = getattr(log, "transactions", None)
            if isinstance(log, ErrorCode) or transactions is None:
                continue
            try:
                header = parse_header(records, 0)
            except LogError:
                continue  # the append answers it
            token = transactions.start_verification(header.producer_id)
            if token is not None:
                out[(topic.name, data.index)] = (log, header.producer_id, header.producer_epoch, token)
    return out


async def _produce_verified(b: Builder, ctx: RequestContext, request: ProduceRequest, unverified: _Unverified) -> Any:
    """Produce once the transaction coordinator verified the partitions of `unverified` (KIP-890 part 1)."""
    by_producer: dict[tuple[int, int], frozenset[tuple[str, int]]] = {}
    for tp, (_, pid, epoch, _) in unverified.items():
        by_producer[(pid, epoch)] = by_producer.get((pid, epoch), frozenset()) | {tp}
    refused: _Refused = {}
    transactional_id = request.transactional_id
    assert transactional_id is not None  # handle verifies only a request that names one
    for (pid, epoch), partitions in by_producer.items():
        refused.update(await _verify.verify(ctx, transactional_id, pid, epoch, partitions))
    for tp, (log, pid, _, token) in unverified.items():
        if not log.transactions.verified(pid, token) and tp not in refused:  # type: ignore[attr-defined]
            refused[tp] = (ErrorCode.invalid_txn_state, _verify.NOT_IN_TRANSACTION)
    topics, commits = _append_all(b, ctx, request, ErrorCode.none, refused)
    if commits:
        return await _after_commits(b, ctx, topics, commits, request.acks)
    return _answer(b, request, topics)


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Whether any partition's records hold a transactional batch (Kafka's RequestUtils.hasTransactionalRecords):
    the attributes' low byte of each batch is looked at, nothing parsed; records whose framing is broken are left
    to the log, which answers them per partition."""
    for entry in request.topic_data:
        for data in entry.partition_data:
            records = data.records
            pos = 0
            while records and pos + _ATTRIBUTES_LOW < len(records):
                if records[pos + _ATTRIBUTES_LOW] & TRANSACTIONAL_BIT:
                    return True
                length = int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
                if length <= 0:
                    break
                pos += LOG_OVERHEAD + length
    return False


def _produce_topic(b: Builder, ctx: RequestContext, entry: Any, error: ErrorCode, commits: list[_Commit],
                   refused: _Refused) -> Any:  # fmt: skip
    topic, topic_error = resolve_topic(ctx.broker, entry)
    if error is ErrorCode.none and topic is not None and topic.internal:
        error = ErrorCode.invalid_topic_exception
    results: list[Any] = []
    for data in entry.partition_data:
        log = led_partition(topic, topic_error, data.index) if error is ErrorCode.none else error
        if isinstance(log, ErrorCode):
            results.append(_result(b, data.index, log))
        elif refused and (log.topic, data.index) in refused:
            code, message = refused[(log.topic, data.index)]
            results.append(_result(b, data.index, code, message=message))
        else:
            answer, committing = _append(b, ctx, log, data)
            if committing is not None:  # the answer waits for the commit (cluster mode)
                commits.append(_Commit(committing, (log.topic, data.index), results, len(results)))
            results.append(answer)
    return b("TopicProduceResponse", **topic_ref(entry), partition_responses=results)


def _append(b: Builder, ctx: RequestContext, log: PartitionLog, data: Any) -> tuple[Any, tuple[Any, int] | None]:
    """The partition's answer, and for a remote log the (log, end offset) its acknowledgement waits for."""
    records = data.records
    broker = ctx.broker
    if not records:
        return _result(b, data.index, ErrorCode.invalid_record, message="no records"), None
    now = broker.now_ms()
    try:
        # records checked, producer state, log.flush.interval.messages / .ms: herd.log.producer_state.client_append
        result = log.append(records, now, client=True)
    except LogError as e:
        return _result(
            b,
            data.index,
            ErrorCode(e.error_code),
            message=str(e) or None,
            log_start_offset=log.log_start_offset,
            record_errors=getattr(e, "record_errors", ()),  # INVALID_TIMESTAMP's, as Kafka lists them
        ), None
    counts = broker.metrics.topic(log.topic)
    if counts is not None:  # herd_topic_bytes_in_total and herd_topic_messages_in_total (herd.server.metrics)
        counts[0] += len(records)
        counts[1] += result.last_offset - result.base_offset + 1
    answer = _result(
        b,
        data.index,
        ErrorCode.none,
        base_offset=result.base_offset,
        log_append_time=result.log_append_time,
        log_start_offset=result.log_start_offset,
    )
    if result.durable_end is not None:  # acknowledged once the log says it is durable (cluster mode: committed)
        return answer, (log, result.durable_end)
    broker.notify_append((log.topic, data.index))
    return answer, None


class _Commit:
    """An append to a remote log whose answer waits for its commit: what it waits for, and where the answer sits
    in `results`."""

    __slots__ = ("log", "end", "key", "results", "position")

    def __init__(self, committing: tuple[Any, int], key: tuple[str, int], results: list[Any], position: int) -> None:
        (self.log, self.end), self.key, self.results, self.position = committing, key, results, position


async def _after_commits(b: Builder, ctx: RequestContext, topics: tuple[Any, ...], commits: list[_Commit],
                         acks: int) -> Any:  # fmt: skip
    """Cluster mode: answer once every append of the request has committed (or failed, that partition getting
    the error: NOT_LEADER_OR_FOLLOWER if it was taken over, KAFKA_STORAGE_ERROR if the database failed; both are
    retriable, and neither is ever answered for a write that was acknowledged)."""
    outcomes = await asyncio.gather(*(c.log.wait_durable(c.end) for c in commits), return_exceptions=True)
    for commit, outcome in zip(commits, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            error = ErrorCode(outcome.error_code) if isinstance(outcome, LogError) else ErrorCode.unknown_server_error
            if not isinstance(outcome, LogError):
                log.error("commit of %s-%d failed: %r", *commit.key, outcome)
            index = commit.results[commit.position].index
            commit.results[commit.position] = _result(b, index, error, message=str(outcome) or None)
        else:
            ctx.broker.notify_append(commit.key)
    if acks == 0:
        return None
    return b.response(responses=topics, throttle_time=0, node_endpoints=())


def _result(
    b: Builder,
    index: int,
    error: ErrorCode,
    *,
    base_offset: int = -1,
    log_append_time: int = -1,
    log_start_offset: int = -1,
    message: str | None = None,
    record_errors: Sequence[tuple[int, str]] = (),
) -> Any:
    return b(
        "PartitionProduceResponse",
        index=index,
        error_code=error,
        base_offset=base_offset,
        log_append_time=log_append_time,
        log_start_offset=log_start_offset,
        record_errors=tuple(
            b("BatchIndexAndErrorMessage", batch_index=i, batch_index_error_message=m) for i, m in record_errors
        ),
        error_message=message,
    )
