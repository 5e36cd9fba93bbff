"""ApiVersions (key 18), v0-v4.

v0: the list of (api key, min, max). v1: throttle time. v3: flexible; the request names the client software;
supported/finalized features as tagged fields (herd has no features to report). v4: no change to the body; Kafka
4.x's maximum.

Generated from the API table the broker serves (`Broker.apis`, herd.server.apis). A request at a version newer than v4
is answered in v0 with UNSUPPORTED_VERSION
and only ApiVersions' own range, as Kafka's ApiVersionsRequest.getErrorResponse does, so the client retries at a
version both sides know (see server/connection.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._build import builder, ctx_builder
from herd.server.broker import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    keys = tuple(
        b("ApiVersion", api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in ctx.broker.apis.values()
    )
    return b.response(error_code=ErrorCode.none, api_keys=keys, throttle_time=0)


def unsupported_version_response() -> Any:
    b = builder(API_KEY, 0)
    own = b("ApiVersion", api_key=API_KEY, min_version=MIN_VERSION, max_version=MAX_VERSION)
    return b.response(error_code=ErrorCode.unsupported_version, api_keys=(own,), throttle_time=0)
