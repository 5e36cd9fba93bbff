"""SaslHandshake (key 17), v1 only.

v0 (Kafka 0.10): the SASL tokens follow as raw frames, without SaslAuthenticate. v1 (Kafka 1.0, KIP-152): the
tokens travel in SaslAuthenticate requests. herd serves v1 only, so ApiVersions tells every client from Kafka 1.0
on to use it; a v0 request closes the connection (logged), as any version herd does not serve.

On a SASL listener the connection's Authenticator (herd.security.sasl) answers: the mechanisms enabled on the
listener (`sasl.enabled.mechanisms`) with NONE when the client's mechanism is one of them, else
UNSUPPORTED_SASL_MECHANISM, after which the connection is closed (apache/kafka clients/src/main/java/org/apache/
kafka/common/security/authenticator/SaslServerAuthenticator.java handleHandshakeRequest). On an authenticated
connection it starts a re-authentication (KIP-368). On a listener without SASL the request reaches the API layer,
which answers ILLEGAL_SASL_STATE, as Kafka's KafkaApis.handleSaslHandshakeRequest does.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 17
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx: RequestContext, request: Any) -> Any:
    authenticator = ctx.session.sasl
    if authenticator is None:
        return ctx_builder(ctx).response(error_code=ErrorCode.illegal_sasl_state, mechanisms=[])
    code = authenticator.handshake(request.mechanism)
    return ctx_builder(ctx).response(error_code=code, mechanisms=list(authenticator.mechanisms))
