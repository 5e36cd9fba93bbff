"""DeleteShareGroupState (key 86), v0: a share partition's state goes (a tombstone), when its share group or its
offsets are deleted (KIP-932, herd.server.apis._share_state). A partition with no state is answered NONE."""

from __future__ import annotations

from typing import Any

from herd.coordinator.share_state.shard import ShareStateShard
from herd.server.apis._share_state import delete_request, error_result, serve
from herd.server.broker import RequestContext

API_KEY = 86
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    return serve(ctx, request, "DeleteStateResult", delete_request, ShareStateShard.delete, error_result)
