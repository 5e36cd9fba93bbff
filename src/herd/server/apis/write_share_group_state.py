"""WriteShareGroupState (key 85), v0-v1: the changes of a share partition's state (its start offset, -1 when
unchanged, and the state batches that changed), written by its leader before an acknowledgement, a release or an
expired lock counts (KIP-932, herd.server.apis._share_state). v1 adds DeliveryCompleteCount (KIP-1226), which herd's
share coordinator works out from the batches it keeps and so reads no further. FENCED_LEADER_EPOCH /
FENCED_STATE_EPOCH for a writer behind the epochs kept; INVALID_REQUEST for a partition never initialized."""

from __future__ import annotations

from typing import Any

from herd.coordinator.share_state.shard import ShareStateShard
from herd.server.apis._share_state import error_result, serve, write_request
from herd.server.broker import RequestContext

API_KEY = 85
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    return serve(ctx, request, "WriteStateResult", write_request, ShareStateShard.write, error_result)
