"""The broker's transaction coordinator (herd.runtime.transactions), made the same way on an embedded node and a
cluster node: producer ids from InitProducerId's generator (one sequence for idempotent and transactional
producers), markers into `__consumer_offsets` through the group coordinator, every marker written wakes the
fetches long-polling its partition (its last stable offset moved), and (cluster mode) a marker for a partition
another node leads is sent to that node in a WriteTxnMarkers v1 request (`MarkerSender`).

`MarkerSender` asks the partition's leader as this node last read it from the shared cluster, over the node's
kept connection to it (herd.server.peers). Kafka batches the markers of many transactions per request
(TransactionMarkerChannelManager); herd's markers to another node are one request each, simpler and slower.
Anything that goes wrong (no live leader, the connection, a malformed answer) is answered NOT_LEADER_OR_FOLLOWER
or REQUEST_TIMED_OUT, which the coordinator retries.
"""

from __future__ import annotations

import logging

from kio.schema.write_txn_markers.v1.request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

from herd.coordinator.result import Marker
from herd.protocol.values import make
from herd.runtime.transactions import TransactionRuntime
from herd.server.apis import write_txn_markers
from herd.server.apis.init_producer_id import new_producer_id
from herd.server.broker import Broker
from herd.server.peers import PeerError

log = logging.getLogger(__name__)

NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT = 6, 7
VERSION = 1  # WriteTxnMarkers v1, the version herd serves (the request classes above are v1's)


def transaction_runtime(broker: Broker, *, peers: bool = False) -> TransactionRuntime:
    """The runtime; with `peers` (a cluster node, herd.server.node) markers for partitions other nodes lead are
    sent to them."""
    return TransactionRuntime(
        broker.cluster,
        broker.config,
        new_producer_id=new_producer_id,
        groups=broker.coordinator,  # type: ignore[arg-type]  # complete_transaction: C's
        on_marker=broker.notify_append,
        remote=MarkerSender(broker) if peers else None,
    )


class MarkerSender:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def __call__(self, tp: tuple[str, int], marker: Marker) -> int:
        """Write `marker` into `tp` at its leader; the error code of the answer."""
        broker = self._broker
        leader, _ = broker.cluster.leader(*tp)
        node = broker.node(leader) if leader >= 0 and leader != broker.node_id else None
        if node is None:
            return NOT_LEADER_OR_FOLLOWER  # no live leader known (or it is this node again): retried
        try:
            return await self._ask(node.host, node.port, tp, marker)
        except (PeerError, StopIteration) as error:
            log.info("WriteTxnMarkers to node %d for %s-%d failed: %s", leader, *tp, error)
            return REQUEST_TIMED_OUT

    async def _ask(self, host: str, port: int, tp: tuple[str, int], marker: Marker) -> int:
        topic = make(WritableTxnMarkerTopic, {"name": tp[0], "partition_indexes": (tp[1],)})
        entry = make(
            WritableTxnMarker,
            {
                "producer_id": marker.producer_id,
                "producer_epoch": marker.producer_epoch,
                "transaction_result": marker.commit,
                "topics": (topic,),
                "coordinator_epoch": marker.coordinator_epoch,
            },
        )
        response = await self._broker.peers.request(
            host, port, write_txn_markers.API_KEY, VERSION, make(WriteTxnMarkersRequest, {"markers": (entry,)})
        )
        return int(next(p.error_code for m in response.markers for t in m.topics for p in t.partitions))
