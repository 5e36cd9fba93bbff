"""TxnOffsetCommit (key 28), v0-v5: answered, never applied, until herd has transactions.

Versions as Kafka 4.x serves them: v1 no change, v2 committed leader epoch, v3 generation id, member id
and group instance id (KIP-447), v4 no body change (KIP-890 errors), v5 implicit AddOffsetsToTxn (KIP-890).

herd has no transaction coordinator (InitProducerId refuses a transactional id), so a transactional
producer never gets this far. A client that sends the request anyway gets UNSUPPORTED_VERSION (35) on every
partition and nothing is written. That code is chosen because both client families stop instead of
retrying: the Java producer's TxnOffsetCommitHandler treats it as an unexpected error and fails the
transaction fatally ("Unexpected error in TxnOffsetCommitResponse: The version of API is not supported"),
and librdkafka treats it as a permanent (abortable) error. Retriable codes (COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR) would make them retry forever. Written down in docs/compatibility.md.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5

UNSUPPORTED = ErrorCode.unsupported_version


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    topics = tuple(
        b("TxnOffsetCommitResponseTopic", name=entry.name, partitions=tuple(
            b("TxnOffsetCommitResponsePartition", partition_index=p.partition_index, error_code=UNSUPPORTED)
            for p in entry.partitions))
        for entry in request.topics
    )
    return b.response(throttle_time=0, topics=topics)
