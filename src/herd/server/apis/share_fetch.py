"""ShareFetch (key 78), v1: a share consumer's fetch (KIP-932), with its share session and piggybacked
acknowledgements. Kafka 4.2's KafkaApis.handleShareFetchRequest, SharePartitionManager and DelayedShareFetch
(docs/kip-932/share-fetch-rules.md):

1. share groups off UNSUPPORTED_VERSION, no READ on the group GROUP_AUTHORIZATION_FAILED, a bad member id
   INVALID_REQUEST (herd.server.apis._share.refused); top-level errors carry no partitions and a lock timeout of 0;
2. the share session (herd.runtime.share_sessions): epoch 0 opens it (acknowledgements in it: INVALID_REQUEST),
   -1 closes it (nothing fetched), any other epoch must be the session's; SHARE_SESSION_LIMIT_REACHED is answered
   after MaxWaitMs, as Kafka does, so that a full cache is not hammered;
3. the acknowledgements, applied before the fetch and written while it looks and waits (Kafka's
   handleShareFetchRequest combines the two futures): an acknowledgement is durable when its write is, not when
   the fetch's wait ends. Until then its records are in transition (a record released is not handed out again
   before its write is done); the write done, fetches waiting on the partition look again. The answer waits for
   both, with each write's result in AcknowledgeErrorCode;
4. every partition of the session, in an order rotated by the epoch: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED,
   UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, then the records acquired (herd.runtime.shares), MaxRecords a
   budget of the whole request and MaxBytes (capped by fetch.max.bytes) too, whole batches;
5. when nothing was acquired and MaxWaitMs is positive, the fetch waits until a partition of the session gets
   records, an acknowledgement or release, or MaxWaitMs passes (Kafka also wakes it when a lock runs out: herd's
   locks run out lazily, so such records are seen at the next look, within the wait); MinBytes is read as "some
   records", as Kafka's estimate of acquirable bytes is only an estimate;
6. the answer: at epoch 0 every partition fetched or in error; later only those with records, errors, or newly
   added to the session; then every partition acknowledged. AcquisitionLockTimeoutMs is the group's
   share.record.lock.duration.ms, else the broker's.

v2 (Kafka 4.2): IsRenewAck (KIP-1222) renews the locks of the records acknowledged with type 4 (Renew) and fetches
nothing (MaxBytes, MinBytes, MaxRecords and MaxWaitMs must then all be 0, else INVALID_REQUEST before the session);
ShareAcquireMode 1, record_limit (KIP-1206), makes MaxRecords a hard limit (a batch is split, its rest stays
available). librdkafka 2.16 sends v1.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from herd.protocol.messages import EncodedBody, response_class
from herd.protocol.share_fetch_body import Partition, share_fetch_body
from herd.runtime.share_sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession, ShareSessionError
from herd.runtime.share_state import ShareStateError
from herd.runtime.shares import NOTHING, Acquired, Staged
from herd.server.apis._authorize import READ, TOPIC, authorized
from herd.server.apis._build import ctx_builder, ms
from herd.server.apis._share import TopicPartition, acknowledge, partitions_and_acks, refused
from herd.server.apis._topics import led_partition
from herd.server.broker import RequestContext

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2
RECORD_LIMIT = 1  # ShareAcquireMode

Outcome = tuple[ErrorCode, Acquired]


def handle(ctx: RequestContext, request: Any) -> Any:
    error = refused(ctx, request.group_id, request.member_id)
    if error is not None:
        return _error(ctx, error)
    if getattr(request, "is_renew_ack", False) and (
        request.max_bytes or request.min_bytes or request.max_records or ms(request.max_wait)
    ):
        return _error(ctx, ErrorCode.invalid_request, "A renew ShareFetch fetches nothing: its limits must be 0.")
    return _serve(ctx, request)


async def _serve(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    named, acks = partitions_and_acks(request.topics)
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    await broker.remote_group_configs.refresh(group_id)  # cluster mode: the group's configs, if coordinated elsewhere
    sessions = broker.share_sessions
    try:
        if epoch == INITIAL_EPOCH:
            if any(acks.values()):
                return _error(ctx, ErrorCode.invalid_request, "Acknowledge data is not allowed in a new share session.")
            session = sessions.open(group_id, member_id, ctx.session, named)
        elif epoch == FINAL_EPOCH:
            session = sessions.close(group_id, member_id)
        else:
            session = sessions.fetch(group_id, member_id, epoch, named, forgotten)
    except ShareSessionError as e:
        if e.code == ErrorCode.share_session_limit_reached:
            await asyncio.sleep(max(ms(request.max_wait), 0) / 1000)
        return _error(ctx, e.code)
    staged: list[Staged] = []
    renew = getattr(request, "is_renew_ack", False)
    acked = await acknowledge(ctx, group_id, member_id, acks, broker.now_ms(), staged, renew)
    writing = asyncio.ensure_future(_complete(ctx, staged)) if staged else None
    try:
        fetched = {} if epoch == FINAL_EPOCH or renew else await _fetch(ctx, request, session)
    finally:  # shielded: a fetch cut short (its connection closed) still completes what it staged
        failed = await asyncio.shield(writing) if writing is not None else {}
    for tp in acked:  # an acknowledgement whose write failed is undone and answered with the write's error
        topic = broker.cluster.by_id(tp[0])
        if topic is not None and (topic.name, tp[1]) in failed:
            acked[tp] = (failed[(topic.name, tp[1])], None)
    if epoch == FINAL_EPOCH:
        await broker.release_share_session(session)
    return _response(ctx, group_id, session, epoch, fetched, acked)


async def _complete(ctx: RequestContext, staged: list[Staged]) -> dict[tuple[str, int], ErrorCode]:
    """Write the acknowledgements staged (herd.runtime.shares.SharePartitions.complete), then wake the fetches
    waiting on their partitions: records released are available again, and the start offset may have moved."""
    keys = [(topic, partition) for (_, topic, partition), *_ in staged]
    failed = await ctx.broker.shares.complete(staged, ctx.broker.now_ms())
    for key in keys:
        ctx.broker.notify_append(key)
    return failed


async def _fetch(ctx: RequestContext, request: Any, session: ShareSession) -> dict[TopicPartition, Outcome]:
    """Each partition of the session's outcome, waiting up to MaxWaitMs for records when none could be acquired.
    Each pass checks the partitions and acquires from those it may in one go (as Kafka's DelayedShareFetch tries to
    complete at once): a fetch that finds records looks at each partition once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(ms(request.max_wait), 0) / 1000
    while True:
        outcomes = await _acquire(ctx, request, session, _checked(ctx, session))
        remaining = deadline - loop.time()
        if any(got.ranges for _, got in outcomes.values()):
            return outcomes
        if remaining <= 0 or request.max_records <= 0 or request.max_bytes <= 0 or not outcomes:
            return outcomes
        keys = [key for key, (code, _) in outcomes.items() if code == ErrorCode.none]
        if not keys:
            return outcomes
        await ctx.broker.wait_for_append(_names(ctx, keys), remaining)


def _partitions(session: ShareSession) -> list[TopicPartition]:
    """The session's partitions, rotated left by the epoch (PartitionRotateStrategy), so that each gets its turn
    at the front of MaxRecords and MaxBytes."""
    tps = list(session.partitions)
    if len(tps) > 1 and session.epoch > 0:
        shift = session.epoch % len(tps)
        tps = tps[shift:] + tps[:shift]
    return tps


def _checked(ctx: RequestContext, session: ShareSession) -> dict[TopicPartition, Outcome]:
    """Each partition's error, in the session's rotated order (NONE where it can be fetched)."""
    broker = ctx.broker
    outcomes: dict[TopicPartition, Outcome] = {}
    for tp in _partitions(session):
        topic_id, index = tp
        topic = broker.cluster.by_id(topic_id)
        if topic is None:
            outcomes[tp] = (ErrorCode.unknown_topic_id, NOTHING)
        elif broker.authorizer is not None and not authorized(ctx, READ, TOPIC, topic.name):
            outcomes[tp] = (ErrorCode.topic_authorization_failed, NOTHING)
        else:
            log = led_partition(topic, ErrorCode.none, index)
            outcomes[tp] = (log, NOTHING) if isinstance(log, ErrorCode) else (ErrorCode.none, NOTHING)
    return outcomes


async def _acquire(
    ctx: RequestContext, request: Any, session: ShareSession, outcomes: dict[TopicPartition, Outcome]
) -> dict[TopicPartition, Outcome]:
    """The records acquired from each partition without an error, MaxRecords and MaxBytes budgets of the whole
    request. Every such partition's share partition is made (its state read or initialized) even when the budget
    is spent, as Kafka's SharePartitionManager makes those of every partition a fetch names; one whose state cannot
    be read answers the persister's error (SharePartition.fetchPersisterError)."""
    broker = ctx.broker
    records_left = request.max_records
    bytes_left = min(request.max_bytes, broker.config.get("fetch.max.bytes"))
    record_limit = getattr(request, "share_acquire_mode", 0) == RECORD_LIMIT
    for tp, (code, _) in outcomes.items():
        if code != ErrorCode.none:
            continue
        topic = broker.cluster.by_id(tp[0])
        log = led_partition(topic, ErrorCode.unknown_topic_id, tp[1])
        if isinstance(log, ErrorCode):
            outcomes[tp] = (log, NOTHING)
            continue
        budget = max(records_left, 0) if bytes_left > 0 else 0  # none left: the share partition is still made
        try:
            got = await broker.shares.acquire(
                session.group_id, session.member_id, log, budget, bytes_left, broker.now_ms(), record_limit
            )
        except ShareStateError as error:
            outcomes[tp] = (_persister_error(error), NOTHING)
            continue
        outcomes[tp] = (ErrorCode.none, got)
        records_left -= sum(r.last - r.first + 1 for r in got.ranges)
        bytes_left -= len(got.records)
    return outcomes


def _persister_error(error: ShareStateError) -> ErrorCode:
    """SharePartition.fetchPersisterError: the share coordinator's refusal as a fetch error."""
    if error.code in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress):
        return ErrorCode.coordinator_not_available
    if error.code in (ErrorCode.fenced_state_epoch, ErrorCode.fenced_leader_epoch):
        return ErrorCode.not_leader_or_follower
    return ErrorCode(error.code) if error.code in ErrorCode._value2member_map_ else ErrorCode.unknown_server_error


def _names(ctx: RequestContext, tps: list[TopicPartition]) -> list[tuple[str, int]]:
    keys = []
    for topic_id, index in tps:
        topic = ctx.broker.cluster.by_id(topic_id)
        if topic is not None:
            keys.append((topic.name, index))
    return keys


def _response(
    ctx: RequestContext,
    group_id: str,
    session: ShareSession,
    epoch: int,
    fetched: dict[TopicPartition, Outcome],
    acked: dict[TopicPartition, tuple[ErrorCode, str | None]],
) -> EncodedBody:
    """The answer, packed directly (herd.protocol.share_fetch_body): the partitions fetched that have records or an
    error, or that the session flags (all of them at epoch 0), then those acknowledged."""
    entries: dict[TopicPartition, list[Any]] = {}  # [fetch error, records, acquired, ack error, ack message]
    for tp, (code, got) in fetched.items():
        flagged = session.partitions.get(tp, False)
        if epoch == INITIAL_EPOCH or got.ranges or code != ErrorCode.none or flagged:
            entries[tp] = [code, got.records, got.ranges, ErrorCode.none, None]
            if tp in session.partitions:  # answered: flagged again only by an error (requiresUpdateInResponse)
                session.partitions[tp] = code != ErrorCode.none
    for tp, (code, message) in acked.items():
        entry = entries.setdefault(tp, [ErrorCode.none, b"", (), ErrorCode.none, None])
        entry[3], entry[4] = code, message
    by_topic: dict[Any, list[Partition]] = {}
    for (topic_id, index), (code, records, ranges, ack_code, ack_message) in entries.items():
        acquired = [(r.first, r.last, r.delivery_count) for r in ranges]
        by_topic.setdefault(topic_id, []).append(Partition(index, code, ack_code, ack_message, records, acquired))
    body = share_fetch_body(ErrorCode.none, None, ctx.broker.shares.lock_duration_ms(group_id), list(by_topic.items()))
    return EncodedBody(response_class(API_KEY, ctx.api_version), body)


def _error(ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
    return ctx_builder(ctx).response(
        throttle_time=0,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=0,
        responses=(),
        node_endpoints=(),
    )
