"""InitProducerId (key 22), v0-v5.

v1: no change. v2: flexible. v3: the producer id and epoch of a producer bumping its epoch (KIP-360). v4: no
body change. v5: KIP-890. (v6, KIP-939 two-phase commit, is not served.)

For idempotent producers (no transactional id) herd hands out a fresh producer id with epoch 0, or bumps the
epoch of the id the producer names (KIP-360). Ids start from the wall clock in milliseconds times 1000 plus a
counter, so a restarted broker never hands out an id it gave before. Transactional producers are refused with
INVALID_REQUEST: herd has no transaction coordinator yet (docs/compatibility.md).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

MAX_EPOCH = 32767
_ids = itertools.count(int(time.time() * 1000) * 1000)


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    if request.transactional_id is not None:
        return b.response(throttle_time=0, error_code=ErrorCode.invalid_request, producer_id=-1, producer_epoch=-1)
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return b.response(throttle_time=0, error_code=ErrorCode.none, producer_id=producer_id,
                          producer_epoch=epoch + 1)
    return b.response(throttle_time=0, error_code=ErrorCode.none, producer_id=next(_ids), producer_epoch=0)
