"""WriteTxnMarkers (key 27), v1.

Sent by a transaction coordinator to the leader of each partition of a transaction it completes (Kafka's
TransactionMarkerChannelManager; in herd, the transaction coordinator of another node of the cluster,
herd.runtime.transactions, for a partition this node leads). v0 was removed in Kafka 4.0 and v1 is its baseline
(flexible). v2 adds the marker's transaction version (KIP-890 part 2, TV2 markers carry a bumped epoch); herd's
transaction.version is 0 and no herd coordinator sends it, so v2 is not served.

Each partition of each marker is written as the local coordinator writes its own (`write_marker`,
herd.runtime.transactions): a data partition gets the control batch through the data path's `append_control` (as
durable as a produce to it), a `__consumer_offsets` partition goes through the group coordinator's
`complete_transaction` (Kafka's KafkaApis.handleWriteTxnMarkersRequest: GroupCoordinator.completeTransaction for
the offsets topic). A partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, one led by another node
NOT_LEADER_OR_FOLLOWER, a failed log KAFKA_STORAGE_ERROR; the coordinator retries the retriable ones. The answer
waits for every partition.

Authorization, with authorizer.class.name set (as apache/kafka core/src/main/scala/kafka/server/KafkaApis.scala):
CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED per partition.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterator
from typing import Any

from herd.coordinator.result import Marker
from herd.runtime.transactions import MarkerError, write_marker
from herd.server.apis._authorize import CLUSTER_ACTION, authorized_cluster
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

log = logging.getLogger(__name__)

UNKNOWN_SERVER_ERROR = -1
CLUSTER_AUTHORIZATION_FAILED = 31
API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 1


async def _write(ctx: RequestContext, tp: tuple[str, int], marker: Marker) -> int:
    broker = ctx.broker
    try:
        await write_marker(
            broker.cluster,
            broker.coordinator,
            tp,
            marker,
            broker.now_ms(),  # type: ignore[arg-type]
            broker.notify_append,
        )
    except MarkerError as error:
        return error.code
    except Exception:  # a bug: this partition's answer says so, the others are still written and answered
        log.exception("WriteTxnMarkers to %s-%d failed", *tp)
        return UNKNOWN_SERVER_ERROR
    return 0


async def _answer(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    if authorized_cluster(ctx, CLUSTER_ACTION):  # the brokers' API (KafkaApis: CLUSTER_ACTION on the cluster)
        writes = [
            _write(ctx, (t.name, int(p)), marker)
            for m in request.markers
            for marker in (Marker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch),)
            for t in m.topics
            for p in t.partition_indexes
        ]
        codes: Iterator[int] = iter(await asyncio.gather(*writes))
    else:
        codes = itertools.repeat(CLUSTER_AUTHORIZATION_FAILED)
    return b.response(
        markers=tuple(
            b(
                "WritableTxnMarkerResult",
                producer_id=m.producer_id,
                topics=tuple(
                    b(
                        "WritableTxnMarkerTopicResult",
                        name=t.name,
                        partitions=tuple(
                            b("WritableTxnMarkerPartitionResult", partition_index=p, error_code=next(codes))
                            for p in t.partition_indexes
                        ),
                    )
                    for t in m.topics
                ),
            )
            for m in request.markers
        )
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    return _answer(ctx, request)
