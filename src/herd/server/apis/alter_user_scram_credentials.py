"""AlterUserScramCredentials (key 51), v0 (KIP-554, Kafka 2.7).

Deletions (user, mechanism) and upsertions (user, mechanism, iterations, salt, salted password: the client salts
the password, which never reaches the broker). Checked per user as Kafka's controller does (apache/kafka
metadata/src/main/java/org/apache/kafka/controller/ScramControlManager.java): an empty name or fewer than 4096 or
more than 16384 iterations is UNACCEPTABLE_CREDENTIAL, a mechanism other than SCRAM-SHA-256/512
UNSUPPORTED_SASL_MECHANISM, deleting a credential that does not exist RESOURCE_NOT_FOUND, a user named twice in
the request DUPLICATE_RESOURCE. The accepted changes are stored together (herd.security.credentials) before the
answer; a failure to store them answers KAFKA_STORAGE_ERROR for each of those users (UNKNOWN_SERVER_ERROR in
cluster mode when the database cannot be reached).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from herd.security.credentials import CredentialStore, CredentialStoreError, Deletion, Upsertion, UserResult
from herd.server.apis._authorize import ALTER, authorized_cluster
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: Any) -> Any:
    deletions = [Deletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password) for u in request.upsertions]
    if not authorized_cluster(ctx, ALTER):  # Kafka: ALTER on the cluster, else every user refused, nothing changed
        return _response(ctx, _all_failed(deletions, upsertions, ErrorCode.cluster_authorization_failed, None))
    store: CredentialStore = ctx.broker.credentials
    try:
        results = await store.alter(deletions, upsertions)
    except CredentialStoreError as e:
        log.error("%s", e)
        results = _all_failed(deletions, upsertions, store.failure_code, str(e))
    return _response(ctx, results)


def _all_failed(
    deletions: list[Deletion], upsertions: list[Upsertion], code: int, message: str | None
) -> list[UserResult]:
    users = dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions])
    return [UserResult(user, code, message) for user in users]


def _response(ctx: RequestContext, results: list[UserResult]) -> Any:
    b = ctx_builder(ctx)
    return b.response(
        throttle_time=0,
        results=[
            b("AlterUserScramCredentialsResult", user=r.user, error_code=r.error_code, error_message=r.error_message)
            for r in results
        ],
    )
