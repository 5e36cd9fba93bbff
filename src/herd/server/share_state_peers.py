"""A share coordinator on another node (cluster mode): the `remote` of herd.runtime.share_state.ShareStateRuntime.

The share partitions a node leads keep their state with the share coordinator of the `__share_group_state`
partition their key falls in; when another node leads that partition, this sends it the request as Kafka's
DefaultStatePersister does (confluentinc/kafka server-common/src/main/java/org/apache/kafka/server/share/persister/
DefaultStatePersister.java): InitializeShareGroupState v0, ReadShareGroupState v0, WriteShareGroupState v1,
DeleteShareGroupState v0 or (for DescribeShareGroupOffsets) ReadShareGroupStateSummary v1, with the one partition,
over the node's kept connection to it (herd.server.peers), and turns the answer back into the runtime's
`ShareStateResponse`. The node answers it with herd.server.apis._share_state. A read of a partition never
initialized is answered INVALID_REQUEST there, as Kafka's share coordinator answers it; here that is "no state"
(herd's leaders initialize a partition on first use, where Kafka's group coordinator initializes it before
assigning it). The leader epoch is not in a read's answer (a summary's has it): the state read from another node
has leader epoch -1.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.delete_share_group_state.v0.request import (
    DeleteShareGroupStateRequest,
    DeleteStateData,
)
from kio.schema.delete_share_group_state.v0.request import PartitionData as DeletePartition
from kio.schema.initialize_share_group_state.v0.request import (
    InitializeShareGroupStateRequest,
    InitializeStateData,
)
from kio.schema.initialize_share_group_state.v0.request import PartitionData as InitializePartition
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest, ReadStateData
from kio.schema.read_share_group_state_summary.v1.request import PartitionData as SummaryPartition
from kio.schema.read_share_group_state_summary.v1.request import (
    ReadShareGroupStateSummaryRequest,
    ReadStateSummaryData,
)
from kio.schema.write_share_group_state.v1.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v1.request import (
    StateBatch as WriteBatch,
)
from kio.schema.write_share_group_state.v1.request import (
    WriteShareGroupStateRequest,
    WriteStateData,
)
from kio.static.primitive import i8, i16, i32, i64

from herd.coordinator.errors import ErrorCode
from herd.coordinator.share_state.records import StateBatch
from herd.coordinator.share_state.shard import Initialize, Read, ReadSummary, ShareState, ShareStateResponse, Write
from herd.runtime.share_state import ShareStateError, ShareStateRequest
from herd.server.peers import PeerError

log = logging.getLogger(__name__)

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
VERSIONS = {INITIALIZE: 0, READ: 0, WRITE: 1, DELETE: 0, SUMMARY: 1}


class ShareStateSender:
    """`remote(node_id, request)`: the answer of the share coordinator on node `node_id`; ShareStateError
    (COORDINATOR_NOT_AVAILABLE) when the node is not live or did not answer."""

    def __init__(self, broker: Any) -> None:
        """`broker`: the herd.server.broker.Broker that owns this (typed Any: that module imports the runtime)."""
        self._broker = broker

    async def __call__(self, node_id: int, request: ShareStateRequest) -> ShareStateResponse:
        node = self._broker.node(node_id)
        if node is None:
            raise ShareStateError(ErrorCode.coordinator_not_available, f"node {node_id} is not live")
        api_key, body = _request(request)
        try:
            answer = await self._broker.peers.request(node.host, node.port, api_key, VERSIONS[api_key], body)
        except PeerError as error:
            log.info("%s to node %d failed: %s", type(request).__name__, node_id, error)
            raise ShareStateError(ErrorCode.coordinator_not_available, str(error)) from error
        try:
            partition = answer.results[0].partitions[0]
        except IndexError:  # an empty answer: the request was refused as a whole
            return ShareStateResponse(ErrorCode.invalid_request, "an empty answer")
        return _response(request, partition)


def _request(request: ShareStateRequest) -> tuple[int, Any]:
    if isinstance(request, Write):
        batches = tuple(
            WriteBatch(
                first_offset=i64(b.first),
                last_offset=i64(b.last),
                delivery_state=i8(b.state),
                delivery_count=i16(b.delivery_count),
            )  # fmt: skip
            for b in request.batches
        )
        partition = WritePartition(partition=i32(request.partition), state_epoch=i32(request.state_epoch),
                                   leader_epoch=i32(request.leader_epoch), start_offset=i64(request.start_offset),
                                   state_batches=batches)  # fmt: skip
        topic = WriteStateData(topic_id=request.topic_id, partitions=(partition,))
        return WRITE, WriteShareGroupStateRequest(group_id=request.group_id, topics=(topic,))
    if isinstance(request, ReadSummary):
        asked = SummaryPartition(partition=i32(request.partition), leader_epoch=i32(-1))
        topic_summary = ReadStateSummaryData(topic_id=request.topic_id, partitions=(asked,))
        return SUMMARY, ReadShareGroupStateSummaryRequest(group_id=request.group_id, topics=(topic_summary,))
    if isinstance(request, Read):
        read = ReadPartition(partition=i32(request.partition), leader_epoch=i32(request.leader_epoch))
        topic_read = ReadStateData(topic_id=request.topic_id, partitions=(read,))
        return READ, ReadShareGroupStateRequest(group_id=request.group_id, topics=(topic_read,))
    if isinstance(request, Initialize):
        init = InitializePartition(partition=i32(request.partition), state_epoch=i32(request.state_epoch),
                                   start_offset=i64(request.start_offset))  # fmt: skip
        topic_init = InitializeStateData(topic_id=request.topic_id, partitions=(init,))
        return INITIALIZE, InitializeShareGroupStateRequest(group_id=request.group_id, topics=(topic_init,))
    delete = DeletePartition(partition=i32(request.partition))
    topic_delete = DeleteStateData(topic_id=request.topic_id, partitions=(delete,))
    return DELETE, DeleteShareGroupStateRequest(group_id=request.group_id, topics=(topic_delete,))


def _response(request: ShareStateRequest, partition: Any) -> ShareStateResponse:
    code = int(partition.error_code)
    if isinstance(request, ReadSummary):
        if code != ErrorCode.none or partition.start_offset < 0:
            return ShareStateResponse(code, partition.error_message)  # no state: start offset -1
        state = ShareState(0, int(partition.state_epoch), int(partition.leader_epoch), int(partition.start_offset))
        return ShareStateResponse(state=state, delivery_complete=int(partition.delivery_complete_count))
    if not isinstance(request, Read):
        return ShareStateResponse(code, partition.error_message)
    if code == ErrorCode.invalid_request:  # never initialized (the only refusal of a well-formed read)
        return ShareStateResponse()
    if code != ErrorCode.none:
        return ShareStateResponse(code, partition.error_message)
    batches = [
        StateBatch(int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
        for b in partition.state_batches
    ]
    state = ShareState(0, int(partition.state_epoch), -1, int(partition.start_offset), batches)
    return ShareStateResponse(state=state)
