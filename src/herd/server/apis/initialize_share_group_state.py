"""InitializeShareGroupState (key 83), v0: a share partition's state starts afresh at a start offset and state
epoch (KIP-932; sent by the group coordinator or a share partition's leader to the share coordinator keeping the
state, herd.server.apis._share_state). FENCED_STATE_EPOCH if the state kept has a newer state epoch."""

from __future__ import annotations

from typing import Any

from herd.coordinator.share_state.shard import ShareStateShard
from herd.server.apis._share_state import error_result, initialize_request, serve
from herd.server.broker import RequestContext

API_KEY = 83
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    return serve(ctx, request, "InitializeStateResult", initialize_request, ShareStateShard.initialize, error_result)
