"""ReadShareGroupState (key 84), v0: a share partition's state (state epoch, start offset, the state batches of the
records in flight), which its leader reads when it first uses the partition (KIP-932, herd.server.apis.
_share_state). A leader epoch newer than the one kept is recorded; an older one is FENCED_LEADER_EPOCH; a partition
never initialized is INVALID_REQUEST "Read operation on uninitialized share partition not allowed." (Kafka 4.2's
ShareCoordinatorShard.maybeGetReadStateError)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.coordinator.share_state.shard import ShareStateResponse, ShareStateShard
from herd.server.apis._build import Builder
from herd.server.apis._share_state import READ_UNINITIALIZED, read_request, serve
from herd.server.broker import RequestContext

API_KEY = 84
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    return serve(ctx, request, "ReadStateResult", read_request, ShareStateShard.read, _result)


def _result(b: Builder, p: Any, answer: ShareStateResponse) -> Any:
    state, code, message = answer.state, answer.error_code, answer.error_message
    if code == ErrorCode.none and state is None:
        code, message = ErrorCode.invalid_request, READ_UNINITIALIZED
    if code != ErrorCode.none or state is None:
        return b("PartitionResult", partition=p.partition, error_code=code, error_message=message, state_epoch=0,
                 start_offset=-1, state_batches=())  # fmt: skip
    batches = tuple(
        b(
            "StateBatch",
            first_offset=s.first,
            last_offset=s.last,
            delivery_state=s.state,
            delivery_count=s.delivery_count,
        )
        for s in state.batches
    )
    return b("PartitionResult", partition=p.partition, error_code=ErrorCode.none, error_message=None,
             state_epoch=state.state_epoch, start_offset=state.start_offset, state_batches=batches)  # fmt: skip
