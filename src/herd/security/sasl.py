"""The SASL side of one connection on a SASL_PLAINTEXT or SASL_SSL listener, as Kafka's SaslServerAuthenticator
runs it (apache/kafka clients/src/main/java/org/apache/kafka/common/security/authenticator/
SaslServerAuthenticator.java), without I/O: the connection feeds it the SASL requests and asks it which other
requests it may serve.

States: HANDSHAKE (ApiVersions, any number of times, and SaslHandshake are served; anything else closes the
connection), AUTHENTICATE (only SaslAuthenticate), AUTHENTICATED (everything; a SaslHandshake starts a
re-authentication, KIP-368) and FAILED (the answer to the failure is sent, then the connection is closed).

- SaslHandshake names a mechanism: one of `sasl.enabled.mechanisms` moves to AUTHENTICATE; another is answered
  UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closed.
- SaslAuthenticate carries the mechanism's tokens. A failure is answered SASL_AUTHENTICATION_FAILED: with the
  mechanism's own message when it has one for clients (PLAIN's "Invalid username or password"), else Kafka's
  generic "Authentication failed during authentication due to invalid credentials with SASL mechanism X", which
  says nothing of whether the user exists. Success sets the principal User:<name> and, with
  connections.max.reauth.ms, the session's lifetime, which SaslAuthenticate v1+ tells the client.
- Re-authentication must keep the principal ("Cannot change principals during re-authentication from
  User.alice: User.bob", Kafka's wording) and the mechanism (another enabled one is accepted by the handshake,
  then the SaslAuthenticate closes the connection unanswered, as Kafka does); it gives the session a new
  lifetime.

SaslHandshake v0 (raw SASL tokens after it, without SaslAuthenticate framing) is not served: herd advertises
SaslHandshake v1 only, so clients from Kafka 1.0 on use SaslAuthenticate.
"""

from __future__ import annotations

import enum

from herd.security.plain import PlainServer
from herd.security.scram import (
    AuthenticationFailed,
    CredentialLookup,
    FakeCredential,
    ScramMechanism,
    ScramServer,
)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
# Kafka's error codes
NONE, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 0, 33, 34, 58
NO_ANSWER = -1  # the request is not answered: the connection is closed


class State(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class Authenticator:
    """One connection's SASL state. `plain_users` is None when PLAIN has no JAAS users on this listener (PLAIN
    then fails every login); `lookup` and `fake` serve SCRAM (herd.security.scram.ScramServer)."""

    __slots__ = (
        "mechanisms",
        "_plain_users",
        "_lookup",
        "_fake",
        "reauth_ms",
        "state",
        "mechanism",
        "user",
        "_server",
        "reauthenticating",
        "failure",
    )

    def __init__(
        self,
        mechanisms: list[str],
        plain_users: dict[str, str] | None,
        lookup: CredentialLookup,
        fake: FakeCredential,
        reauth_ms: int,
    ) -> None:
        self.mechanisms = mechanisms
        self._plain_users = plain_users
        self._lookup = lookup
        self._fake = fake
        self.reauth_ms = reauth_ms
        self.state = State.HANDSHAKE
        self.mechanism: str | None = None
        self.user: str | None = None  # authenticated, kept through re-authentications
        self._server: PlainServer | ScramServer | None = None
        self.reauthenticating = False
        self.failure: str | None = None  # why the exchange failed, for the broker's log (never a password)

    def refusal(self, api_key: int) -> str | None:
        """Why a request of `api_key` may not be served now (the connection is closed), or None."""
        state = self.state
        if state is State.AUTHENTICATED:
            return None
        if state is State.HANDSHAKE:
            if api_key in (API_VERSIONS, SASL_HANDSHAKE):
                return None
            return f"unexpected Kafka request of API key {api_key} during SASL handshake"
        if state is State.AUTHENTICATE:
            if api_key == SASL_AUTHENTICATE or self.reauthenticating and api_key != SASL_HANDSHAKE:
                return None
            return f"unexpected Kafka request of API key {api_key} during SASL authentication"
        return "the SASL authentication failed"

    def handshake(self, mechanism: str) -> int:
        """The error code for a SaslHandshake naming `mechanism`; not NONE: the connection is to be closed after
        the answer (the state is FAILED)."""
        if self.state is State.AUTHENTICATED:
            self.reauthenticating = True
            if mechanism != self.mechanism and mechanism in self.mechanisms:
                # Kafka answers the handshake, then closes the connection at the SaslAuthenticate, unanswered
                # (SaslServerAuthenticator's REAUTH_BAD_MECHANISM)
                self.failure = (
                    f"SASL mechanism '{mechanism}' requested by client is not supported for "
                    f"re-authentication of mechanism '{self.mechanism}'"
                )
                self._server = None
                self.state = State.AUTHENTICATE
                return NONE
        elif self.state is not State.HANDSHAKE:
            self.failure = "SaslHandshake during the SASL exchange"
            self.state = State.FAILED
            return ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms:
            self.failure = f"SASL mechanism {mechanism} is not enabled"
            self.state = State.FAILED
            return UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.state = State.AUTHENTICATE
        return NONE

    def _new_server(self, mechanism: str) -> PlainServer | ScramServer:
        scram = ScramMechanism.from_name(mechanism)
        if scram is not None:
            return ScramServer(scram, self._lookup, self._fake)
        return PlainServer(self._plain_users or {})

    def authenticate(self, token: bytes) -> tuple[int, str | None, bytes]:
        """(error code, message, server token) for a SaslAuthenticate. When the exchange completes, the state is
        AUTHENTICATED and `user` the user; on a failure it is FAILED and the connection is to be closed (code
        NO_ANSWER: without an answer)."""
        server = self._server
        if self.state is State.AUTHENTICATE and server is None:  # a re-authentication with another mechanism
            self.state = State.FAILED
            return NO_ANSWER, None, b""
        if self.state is not State.AUTHENTICATE or server is None:
            self.failure = "SaslAuthenticate without SaslHandshake"
            self.state = State.FAILED
            return ILLEGAL_SASL_STATE, "Unexpected SaslAuthenticate request", b""
        try:
            answer = server.respond(token)
        except AuthenticationFailed as e:
            return self._failed(e)
        if server.complete:
            user = server.user
            assert user is not None
            if self.user is not None and user != self.user:
                return self._failed(
                    AuthenticationFailed(
                        "re-authentication as another user",
                        f"Cannot change principals during re-authentication from User.{self.user}: User.{user}",
                    )
                )
            self.user = user
            self._server = None
            self.reauthenticating = False
            self.state = State.AUTHENTICATED
        return NONE, None, answer

    def _failed(self, error: AuthenticationFailed) -> tuple[int, str | None, bytes]:
        phase = "re-authentication" if self.reauthenticating else "authentication"
        self.failure = f"SASL/{self.mechanism} {phase}: {error}"  # str(error) never holds a password
        self.state = State.FAILED
        self._server = None
        message = error.client_message or (
            f"Authentication failed during {phase} due to invalid credentials with SASL mechanism {self.mechanism}"
        )
        return SASL_AUTHENTICATION_FAILED, message, b""
