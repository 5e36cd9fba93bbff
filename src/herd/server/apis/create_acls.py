"""CreateAcls (key 30), v1-v3.

v1: resource pattern type (KIP-290, LITERAL or PREFIXED). v2: flexible. v3: no change (KIP-896 drops v0). Kafka 4.x
serves v1-v3.

As apache/kafka core/src/main/scala/kafka/server/AclApis.scala handleCreateAcls: without an authorizer every
creation gets SECURITY_DISABLED, without ALTER on the cluster CLUSTER_AUTHORIZATION_FAILED; each creation is then
checked on its own (AclControlManager.validateNewAcl and AclApis: a known resource type, LITERAL or PREFIXED, an
operation other than ANY, ALLOW or DENY, a non-empty name, "kafka-cluster" for the cluster, a principal with a
type; herd also refuses a PREFIXED "*") and gets INVALID_REQUEST with the reason, or is stored. Creating an ACL
that exists succeeds and changes nothing. The valid ones are stored together, durably, before the answer; a
storage failure is KAFKA_STORAGE_ERROR on each of them.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.security.acl_store import AclStoreError
from herd.security.acls import Acl, Operation
from herd.server.apis._acl_apis import refusal
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    refused = refusal(ctx, Operation.ALTER)
    if refused is not None:
        result = b("AclCreationResult", error_code=refused[0], error_message=refused[1])
        return b.response(throttle_time=0, results=tuple(result for _ in request.creations))
    acls = [
        Acl(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in request.creations
    ]
    problems = [acl.problem() for acl in acls]
    return _create(ctx, acls, problems)


async def _create(ctx: RequestContext, acls: list[Acl], problems: list[str | None]) -> Any:
    b = ctx_builder(ctx)
    stored: tuple[ErrorCode, str | None] = (ErrorCode.none, None)
    try:
        await ctx.broker.acl_store.create([a for a, p in zip(acls, problems) if p is None])
    except AclStoreError as e:
        stored = (ErrorCode.kafka_storage_error, str(e))
    results = tuple(
        b("AclCreationResult", error_code=ErrorCode.invalid_request, error_message=p)
        if p is not None
        else b("AclCreationResult", error_code=stored[0], error_message=stored[1])
        for p in problems
    )
    return b.response(throttle_time=0, results=results)
