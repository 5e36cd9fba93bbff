"""SaslAuthenticate (key 36), v0-v2.

v0 (Kafka 1.0, KIP-152): the SASL tokens of the mechanism chosen by SaslHandshake v1. v1 (KIP-368): the answer
says how long the session lasts (session_lifetime_ms, from connections.max.reauth.ms; 0: for ever), after which
the client must re-authenticate on the same connection. v2: flexible.

On a SASL listener the connection's Authenticator (herd.security.sasl) runs the exchange. A completed one sets the
session's principal (User:<name>), marks it authenticated and sets when it expires; a failed one is answered
SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection (herd.server.connection) closes after sending
it (apache/kafka clients/src/main/java/org/apache/kafka/common/security/authenticator/SaslServerAuthenticator.java
handleSaslToken, ReauthInfo). On an authenticated connection without a new SaslHandshake, or on a listener without
SASL, the answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis.handleSaslAuthenticateRequest gives.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from herd.security.sasl import NO_ANSWER, State
from herd.server.apis._build import ctx_builder
from herd.server.broker import RequestContext

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2

_AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


def handle(ctx: RequestContext, request: Any) -> Any:
    session = ctx.session
    authenticator = session.sasl
    b = ctx_builder(ctx)
    if authenticator is None or authenticator.state is State.AUTHENTICATED:
        return b.response(
            error_code=ErrorCode.illegal_sasl_state,
            error_message=_AFTER_AUTHENTICATION,
            auth_bytes=b"",
            session_lifetime=0,
        )
    code, message, token = authenticator.authenticate(request.auth_bytes)
    if code == NO_ANSWER:
        return None  # the connection closes (herd.server.connection)
    lifetime = 0
    if authenticator.state is State.AUTHENTICATED:
        session.principal = f"User:{authenticator.user}"
        lifetime = authenticator.reauth_ms
        session.expires_at = asyncio.get_running_loop().time() + lifetime / 1000 if lifetime else None
    return b.response(error_code=code, error_message=message, auth_bytes=token, session_lifetime=lifetime)
