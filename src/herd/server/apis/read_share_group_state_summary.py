"""ReadShareGroupStateSummary (key 87), v0-v1: where a share partition is (state epoch, leader epoch, start offset
and from v1 the delivery-complete count: the offsets from the start offset on that are ACKNOWLEDGED or ARCHIVED,
KIP-1226), for DescribeShareGroupOffsets (KIP-932, herd.server.apis._share_state). Unlike a read it changes
nothing and fences nothing; a partition with no state is answered start offset -1, delivery-complete count -1,
leader and state epochs 0 (Kafka 4.2's ShareCoordinatorShard.readStateSummary, PartitionFactory's defaults)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator.share_state.shard import ReadSummary, ShareStateResponse, ShareStateShard, delivery_complete
from herd.server.apis._build import Builder
from herd.server.apis._share_state import serve
from herd.server.broker import RequestContext

API_KEY = 87
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    return serve(ctx, request, "ReadStateSummaryResult", _request, ShareStateShard.read, _result)


def _request(group_id: str, topic_id: Any, p: Any) -> ReadSummary:
    return ReadSummary(group_id, topic_id, p.partition)  # leader epoch -1: read as it is, nothing recorded


def _result(b: Builder, p: Any, answer: ShareStateResponse) -> Any:
    state = answer.state
    if answer.error_code != ErrorCode.none or state is None:
        return b("PartitionResult", partition=p.partition, error_code=answer.error_code,
                 error_message=answer.error_message, state_epoch=0, leader_epoch=0, start_offset=-1,
                 delivery_complete_count=-1)  # fmt: skip
    start, done = state.start_offset, delivery_complete(state)
    return b("PartitionResult", partition=p.partition, error_code=ErrorCode.none, error_message=None,
             state_epoch=state.state_epoch, leader_epoch=max(state.leader_epoch, 0), start_offset=start,
             delivery_complete_count=done)  # fmt: skip
