"""The broker's transaction coordinator (herd.runtime.transactions), made the same way on an embedded node and a
cluster node: producer ids from InitProducerId's generator (one sequence for idempotent and transactional
producers), markers into `__consumer_offsets` through the group coordinator, every marker written wakes the
fetches long-polling its partition (its last stable offset moved), and (cluster mode) a marker for a partition
another node leads is sent to that node in a WriteTxnMarkers v1 request (`MarkerSender`).

`MarkerSender` opens one connection per marker to the partition's leader as this node last read it from the
shared cluster, asks, and closes it. Kafka keeps a channel per broker and batches the markers of many
transactions per request (TransactionMarkerChannelManager); herd's markers to another node are one request each,
simpler and slower. Anything that goes wrong (no live leader, the connection, a malformed answer) is answered
NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT, which the coordinator retries.
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct
import sys

from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from herd.protocol.messages import request_class, response_class
from herd.protocol.values import make
from herd.runtime.transactions import Marker, TransactionRuntime
from herd.server.apis import write_txn_markers
from herd.server.apis.init_producer_id import new_producer_id
from herd.server.broker import Broker

log = logging.getLogger(__name__)

NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT = 6, 7
SEND_TIMEOUT_S = 10.0
VERSION = write_txn_markers.MAX_VERSION


def transaction_runtime(broker: Broker) -> TransactionRuntime:
    return TransactionRuntime(broker.cluster, broker.config, new_producer_id=new_producer_id,
                              groups=broker.coordinator,  # type: ignore[arg-type]  # complete_transaction: C's
                              on_marker=broker.notify_append,
                              remote=MarkerSender(broker) if broker.cluster.shared else None)


class MarkerSender:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._correlation = 0

    async def __call__(self, tp: tuple[str, int], marker: Marker) -> int:
        """Write `marker` into `tp` at its leader; the error code of the answer."""
        broker = self._broker
        leader, _ = broker.cluster.leader(*tp)
        node = broker.node(leader) if leader >= 0 and leader != broker.node_id else None
        if node is None:
            return NOT_LEADER_OR_FOLLOWER  # no live leader known (or it is this node again): retried
        try:
            return await asyncio.wait_for(self._ask(node.host, node.port, tp, marker), SEND_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, ValueError, struct.error, StopIteration) as error:
            log.info("WriteTxnMarkers to node %d for %s-%d failed: %s", leader, *tp, error)
            return REQUEST_TIMED_OUT

    async def _ask(self, host: str, port: int, tp: tuple[str, int], marker: Marker) -> int:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(self._frame(tp, marker))
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            return _partition_error(await reader.readexactly(size))
        finally:
            writer.close()

    def _frame(self, tp: tuple[str, int], marker: Marker) -> bytes:
        cls = request_class(write_txn_markers.API_KEY, VERSION)
        topic = make(getattr(_module(cls), "WritableTxnMarkerTopic"), {"name": tp[0], "partition_indexes": (tp[1],)})
        entry = make(getattr(_module(cls), "WritableTxnMarker"), {
            "producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
            "transaction_result": marker.commit, "topics": (topic,), "coordinator_epoch": marker.coordinator_epoch})
        self._correlation += 1
        buf = io.BytesIO()
        header = cls.__header_schema__
        entity_writer(header)(buf, header(request_api_key=i16(write_txn_markers.API_KEY),
                                          request_api_version=i16(VERSION), correlation_id=i32(self._correlation),
                                          client_id=f"herd-txn-coordinator-{self._broker.node_id}"))
        entity_writer(cls)(buf, make(cls, {"markers": (entry,)}))
        body = buf.getvalue()
        return struct.pack(">i", len(body)) + body


def _module(cls: type) -> object:
    return sys.modules[cls.__module__]


def _partition_error(frame: bytes) -> int:
    cls = response_class(write_txn_markers.API_KEY, VERSION)
    _, offset = entity_reader(cls.__header_schema__)(frame, 0)
    response, _ = entity_reader(cls)(frame, offset)
    return int(next(p.error_code for m in response.markers for t in m.topics for p in t.partitions))
