"""SCRAM-SHA-256 and SCRAM-SHA-512, the server side (RFC 5802, RFC 7677), as Kafka speaks them.

The exchange is two round trips. The client's first message names the user and a nonce; the server answers with
the nonce extended by its own, the user's salt and iteration count. The client's final message repeats the nonce
and carries its proof; the server checks it against the StoredKey it keeps (never the password) and answers with
its own signature. `ScramServer` is that exchange as a sans-IO state machine: bytes in, bytes out or
`AuthenticationFailed`.

Kafka's shape of it (apache/kafka clients/src/main/java/org/apache/kafka/common/security/scram/internals/
ScramSaslServer.java, ScramMessages.java, ScramFormatter.java, ScramExtensions.java):
- only the gs2 header "n" (no channel binding) is accepted, and the final message's c= must be base64("n,," or
  "n,a=<authzid>,"), the header the client sent (RFC 5802 section 7);
- an authorization id other than the user name is refused with a message the client sees;
- the extension `tokenauth=true` asks for delegation-token authentication, which herd does not have: refused;
  other extensions are ignored;
- the final nonce must be the client's nonce followed by the server's;
- every other failure is a `SaslException` in Kafka, which the authenticator answers with one generic message,
  so a client learns nothing about why (herd.security.sasl).

User names are RFC 5802 saslnames: "=2C" is a comma and "=3D" an equals sign. Kafka's pattern admits only 7-bit
characters in a name; herd admits any UTF-8 (what RFC 5802 allows).

A user without credentials gets a first answer like any other (`fake_credential`: a salt derived from the user
name and a secret of the server, as long as most users' salts, with their most common iteration count), so the
first step does not reveal which users exist; its final step then fails like a wrong password.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from herd.protocol import scram as rfc5802


class AuthenticationFailed(Exception):
    """The exchange failed. `client_message` is what the client may be told (Kafka's SaslAuthenticationException);
    None: the generic "invalid credentials" message (Kafka's SaslException). str(e) is for the broker's debug log,
    never the password."""

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.client_message = client_message


class ScramMechanism(Enum):
    """Kafka's ScramMechanism: the name, the hash, and the type code the admin APIs carry (0 is UNKNOWN)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256", 1)
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512", 2)

    def __init__(self, mechanism_name: str, hash_name: str, type_code: int) -> None:
        self.mechanism_name = mechanism_name
        self.hash_name = hash_name
        self.type_code = type_code

    @property
    def min_iterations(self) -> int:
        return 4096  # Kafka's minimum for both mechanisms

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        for mechanism in cls:
            if mechanism.mechanism_name == name:
                return mechanism
        return None

    @classmethod
    def from_type(cls, code: int) -> ScramMechanism | None:
        for mechanism in cls:
            if mechanism.type_code == code:
                return mechanism
        return None


MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS: upsertions above it are refused
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a user's password for one mechanism (RFC 5802 section 3; Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys, not even in a debug log
        return f"ScramCredential(iterations={self.iterations})"


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """StoredKey and ServerKey of a salted password, as AlterUserScramCredentials turns an upsertion into a
    credential (Kafka's ScramControlManager.finishUpsertion)."""
    name = mechanism.mechanism_name
    stored = rfc5802.stored_key(name, rfc5802.client_key(name, salted))
    return ScramCredential(salt, stored, rfc5802.server_key(name, salted), iterations)


def make_credential(
    mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted(
        mechanism, rfc5802.salted_password(mechanism.mechanism_name, password, salt, iterations), salt, iterations
    )


def fake_credential(
    mechanism: ScramMechanism, user: str, secret: bytes, salt_size: int = 32, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    """A credential for a user that has none: the salt (`salt_size` bytes) is derived from the user name and the
    server's secret, so asking twice gives the same answer, as for a real user; its keys match no proof. The
    store gives the salt size and iteration count most of its real users have (CredentialView.fake)."""
    salt = hashlib.pbkdf2_hmac("sha256", f"{mechanism.mechanism_name}\0{user}".encode(), secret, 1, salt_size)
    keys = hmac.new(secret, f"keys\0{mechanism.mechanism_name}\0{user}".encode(), "sha512").digest()
    size = hashlib.new(mechanism.hash_name).digest_size
    return ScramCredential(salt, keys[:size], keys[-size:], iterations)


# -- messages (RFC 5802 section 7; Kafka's ScramMessages) ------------------------------------------------------------

_SASLNAME = r"(?:[^=,\x00]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # printable ASCII but ","
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_BASE64 = r"(?:[A-Za-z0-9/+]{4})*(?:[A-Za-z0-9/+]{3}=|[A-Za-z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?P<bare>(?:m={_VALUE},)?n=(?P<name>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str
    authzid: str
    user: str
    nonce: str
    bare: str
    extensions: dict[str, str]

    @classmethod
    def parse(cls, data: bytes) -> ClientFirst:
        """Raises AuthenticationFailed (generic to the client) for a malformed message."""
        text = _decode(data, "client first")
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise AuthenticationFailed("Invalid SCRAM client first message format")
        extensions = {}
        for item in match.group("extensions").split(",")[1:]:
            key, _, value = item.partition("=")
            extensions[key] = value
        return cls(
            match.group("gs2"),
            rfc5802.user_of_saslname(match.group("authzid") or ""),
            rfc5802.user_of_saslname(match.group("name")),
            match.group("nonce"),
            match.group("bare"),
            extensions,
        )


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, data: bytes) -> ClientFinal:
        text = _decode(data, "client final")
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise AuthenticationFailed("Invalid SCRAM client final message format")
        try:
            channel = base64.b64decode(match.group("channel"), validate=True)
            proof = base64.b64decode(match.group("proof"), validate=True)
        except binascii.Error:
            raise AuthenticationFailed("Invalid SCRAM client final message format") from None
        return cls(channel, match.group("nonce"), proof, match.group("without_proof"))


def _decode(data: bytes, what: str) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise AuthenticationFailed(f"Invalid SCRAM {what} message: not UTF-8") from None


class CredentialLookup(Protocol):
    """The credential store as the exchange sees it: (user, mechanism) -> the credential or None."""

    def __call__(self, user: str, mechanism: ScramMechanism, /) -> ScramCredential | None: ...


class FakeCredential(Protocol):
    """(user, mechanism) -> the stand-in credential of a user that has none (`fake_credential`)."""

    def __call__(self, user: str, mechanism: ScramMechanism, /) -> ScramCredential: ...


# -- the exchange ----------------------------------------------------------------------------------------------------


class ScramServer:
    """One SCRAM exchange on the server. `respond(token)` is called with each client message and returns the
    server's answer; after the second one `complete` is True and `user` is the authenticated name. Raises
    AuthenticationFailed; the exchange cannot be used again after that.

    `lookup(user, mechanism)` gives the user's credential or None; `fake(user, mechanism)` the stand-in that
    answers for a user without one."""

    __slots__ = (
        "mechanism",
        "_lookup",
        "_fake",
        "_first",
        "_server_first",
        "_credential",
        "_known",
        "user",
        "complete",
        "_nonce",
    )

    def __init__(
        self, mechanism: ScramMechanism, lookup: CredentialLookup, fake: FakeCredential, nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._fake = fake
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self._nonce = nonce  # tests fix the server nonce (RFC 7677's vector); else a fresh random one
        self.user: str | None = None
        self.complete = False

    def respond(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("Unexpected SCRAM message after the exchange completed")
        if self._first is None:
            return self._client_first(token)
        return self._client_final(token)

    def _client_first(self, token: bytes) -> bytes:
        first = ClientFirst.parse(token)
        if first.extensions.get("tokenauth", "").lower() == "true":
            # delegation tokens (KIP-48): herd has none, so no token id names a user
            raise AuthenticationFailed(f"Token Authentication failed: Invalid tokenId : {first.user}")
        if first.authzid and first.authzid != first.user:
            raise AuthenticationFailed(
                "authorization id differs from the user name",
                "Authentication failed: Client requested an authorization id that is different from username",
            )
        credential = self._lookup(first.user, self.mechanism)
        self._known = credential is not None
        if credential is None:
            credential = self._fake(first.user, self.mechanism)
        elif credential.iterations < self.mechanism.min_iterations:
            raise AuthenticationFailed(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism.mechanism_name}"
            )
        server_nonce = self._nonce if self._nonce is not None else secrets.token_urlsafe(24)
        self._first, self._credential = first, credential
        self._server_first = (
            f"r={first.nonce}{server_nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        )
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        final = ClientFinal.parse(token)
        if final.channel_binding != first.gs2_header.encode():
            raise AuthenticationFailed("Invalid channel binding in the final client message")
        if final.nonce != self._server_first[2 : self._server_first.index(",")]:
            raise AuthenticationFailed("Invalid client nonce in the final client message.")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        name = self.mechanism.mechanism_name
        signature = rfc5802.signature(name, credential.stored_key, auth_message)
        if len(final.proof) != len(signature):
            raise AuthenticationFailed("Invalid client credentials")
        client_key = rfc5802.xor(final.proof, signature)
        matches = hmac.compare_digest(rfc5802.stored_key(name, client_key), credential.stored_key)
        if not (matches and self._known):
            raise AuthenticationFailed("Invalid client credentials")
        self.complete = True
        self.user = first.user
        self._credential = None
        server_signature = rfc5802.signature(name, credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
