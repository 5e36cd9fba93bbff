"""DescribeUserScramCredentials (key 50), v0 (KIP-554, Kafka 2.7).

The users asked for (all users with credentials for null or an empty list), each with its mechanisms and
iteration counts, never a salt or key. A user without credentials is answered RESOURCE_NOT_FOUND ("Attempt to
describe a user credential that does not exist: <name>"), a user named twice DUPLICATE_RESOURCE, as Kafka's
ScramImage.describe does (apache/kafka metadata/src/main/java/org/apache/kafka/image/ScramImage.java).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._authorize import DESCRIBE, authorized_cluster
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, request: Any) -> Any:
    b = ctx_builder(ctx)
    if not authorized_cluster(ctx, DESCRIBE):  # Kafka: DESCRIBE on the cluster, else refused at the top level
        return b.response(
            throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, error_message=None, results=[]
        )
    users = [u.name for u in request.users] if request.users else None
    results = [
        b(
            "DescribeUserScramCredentialsResult",
            user=user,
            error_code=code,
            error_message=message,
            credential_infos=[
                b("CredentialInfo", mechanism=mechanism, iterations=iterations) for mechanism, iterations in infos
            ],
        )
        for user, code, message, infos in ctx.broker.credentials.describe(users)
    ]
    return b.response(throttle_time=0, error_code=0, error_message=None, results=results)
