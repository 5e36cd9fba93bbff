"""SASL/PLAIN, the server side (RFC 4616), as Kafka's PlainSaslServer does it (apache/kafka clients/src/main/java/
org/apache/kafka/common/security/plain/internals/PlainSaslServer.java, PlainServerCallbackHandler.java).

The client sends one message, `authzid NUL authcid NUL passwd`; the server answers an empty token or fails. The
users are the `user_<name>="<password>"` options of the listener's PlainLoginModule JAAS entry (herd.security.jaas),
meant for development: the passwords are in the configuration in clear. A wrong password and an unknown user get
the same message; the comparison takes the same time whether the user exists or not (hmac.compare_digest of
digests).
"""

from __future__ import annotations

import hashlib
import hmac

from herd.security.scram import AuthenticationFailed

INVALID = "Authentication failed: Invalid username or password"


class PlainServer:
    """One PLAIN exchange: `respond(token)` once; then `complete` and `user`. Raises AuthenticationFailed."""

    __slots__ = ("_users", "user", "complete")

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.user: str | None = None
        self.complete = False

    def respond(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("Unexpected SASL/PLAIN message after the exchange completed")
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, user, password = parts
        if not user:
            raise AuthenticationFailed("no user name", "Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("no password", "Authentication failed: password not specified")
        expected = self._users.get(user)
        # digests of equal length, so the comparison costs the same for an unknown user
        given = hashlib.sha256(password.encode()).digest()
        wanted = hashlib.sha256((expected if expected is not None else "\0" + password).encode()).digest()
        if not hmac.compare_digest(given, wanted) or expected is None:
            raise AuthenticationFailed("invalid user name or password", INVALID)
        if authzid and authzid != user:
            raise AuthenticationFailed(
                "authorization id differs from the user name",
                "Authentication failed: Client requested an authorization id that is different from username",
            )
        self.user = user
        self.complete = True
        return b""
