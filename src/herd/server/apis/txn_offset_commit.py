"""TxnOffsetCommit (key 28), v0-v5: a transactional producer commits a consumer group's offsets in its transaction.

Versions as Kafka 4.x serves them: v1 no change, v2 committed leader epoch, v3 generation id, member id
and group instance id (KIP-447), v4 no body change (KIP-890 errors), v5 implicit AddOffsetsToTxn (KIP-890).

It follows apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala (handleTxnOffsetCommitRequest)
and group-coordinator/.../GroupCoordinatorService.java (commitTransactionalOffsets): a topic the cluster does not
have gets UNKNOWN_TOPIC_OR_PARTITION on every partition, a partition it does not have the same, and the rest
goes to the group's coordinator shard unless nothing is left; the empty group id gets INVALID_GROUP_ID on the
partitions that reach the coordinator. The shard fences by generation, member and instance id (KIP-447:
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and writes the offsets as one transactional batch of
the producer in `__consumer_offsets`; the answer is sent once it is durable, and the offsets stay pending
(OffsetFetch with require_stable: UNSTABLE_OFFSET_COMMIT) until the transaction coordinator's marker commits
or aborts them (`CoordinatorRuntime.complete_transaction`). Below v2 a COORDINATOR_LOAD_IN_PROGRESS is answered
COORDINATOR_NOT_AVAILABLE, which clients before Kafka 2.0 expect (KAFKA-7296). With an authorizer: WRITE
on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED),
both on every partition, then READ on each topic (TOPIC_AUTHORIZATION_FAILED on its partitions).

A producer epoch older than one the producer already used in that `__consumer_offsets` partition (a zombie
fenced by its successor) gets INVALID_PRODUCER_EPOCH on every partition, as Kafka's log refuses the batch (the
shard keeps the epochs, coordinator/txn_offsets.py). Not checked: KIP-890's verification that the transaction
holds the group's partition (the transaction coordinator's part; Kafka asks it before appending).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator import GroupCoordinatorShard
from herd.coordinator.requests import CommitTopic, TxnOffsetCommit
from herd.coordinator.responses import OffsetCommitResponse
from herd.server.apis._authorize import GROUP, READ, TRANSACTIONAL_ID, WRITE, authorized
from herd.server.apis._build import ctx_builder
from herd.server.apis._groups import client_host, client_id, route
from herd.server.apis.offset_commit import all_failed, commit_partition, every_partition, resolve
from herd.server.broker import RequestContext

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5


Errors = dict[tuple[int, int], int]  # (topic entry index, partition index) -> error code


def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.broker.authorizer is not None:
        if not authorized(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
            return _response(
                ctx,
                request,
                every_partition(request, ErrorCode.transactional_id_authorization_failed),
                OffsetCommitResponse(),
            )
        if not authorized(ctx, READ, GROUP, request.group_id):
            return _response(
                ctx, request, every_partition(request, ErrorCode.group_authorization_failed), OffsetCommitResponse()
            )
    _, local = resolve(ctx, request)
    topics = tuple(
        CommitTopic(
            entry.name, tuple(commit_partition(p) for p in entry.partitions if (i, p.partition_index) not in local)
        )
        for i, entry in enumerate(request.topics)
    )
    req = TxnOffsetCommit(
        transactional_id=request.transactional_id,
        group_id=request.group_id,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        generation_id=getattr(request, "generation_id", -1),
        member_id=getattr(request, "member_id", ""),
        group_instance_id=getattr(request, "group_instance_id", None),
        topics=tuple(t for t in topics if t.partitions),
        api_version=ctx.api_version,
        client_id=client_id(ctx),
        client_host=client_host(ctx),
    )

    def respond(response: OffsetCommitResponse) -> Any:
        return _response(ctx, request, local, response)

    def on_error(code: int) -> OffsetCommitResponse:
        return all_failed(req, code)

    if not req.topics:
        return respond(OffsetCommitResponse())
    if not req.group_id:
        return respond(on_error(ErrorCode.invalid_group_id))
    return route(ctx, req.group_id, GroupCoordinatorShard.txn_offset_commit, req, respond, on_error)


def _response(ctx: RequestContext, request: Any, local: Errors, response: OffsetCommitResponse) -> Any:
    """Every partition of the request, in its order, with its local or its coordinator's error."""
    decided = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    # Counted when written, whether the transaction then commits or aborts, as Kafka's OffsetCommits sensor
    # (apache/kafka group-coordinator/.../OffsetMetadataManager.java, commitTransactionalOffset).
    ctx.broker.metrics.offset_commits += sum(1 for code in decided.values() if not code)
    old = ctx.api_version < 2

    def code(i: int, name: str, index: int) -> int:
        error = local.get((i, index), decided.get((name, index), ErrorCode.none))
        if old and error == ErrorCode.coordinator_load_in_progress:
            return ErrorCode.coordinator_not_available
        return error

    b = ctx_builder(ctx)
    return b.response(
        throttle_time=0,
        topics=tuple(
            b(
                "TxnOffsetCommitResponseTopic",
                name=entry.name,
                partitions=tuple(
                    b(
                        "TxnOffsetCommitResponsePartition",
                        partition_index=p.partition_index,
                        error_code=code(i, entry.name, p.partition_index),
                    )
                    for p in entry.partitions
                ),
            )
            for i, entry in enumerate(request.topics)
        ),
    )
