"""SCRAM credentials of users (KIP-554): DescribeUserScramCredentials and AlterUserScramCredentials.

`UserAdmin` is mixed into herd.client.admin.Admin; it needs only `self.client`. Both requests go to any broker (a
herd cluster keeps the credentials in its shared store; Kafka forwards them to its controller). An upsertion never
carries the password: the client draws a random salt and sends SaltedPassword = PBKDF2(password, salt, iterations)
with the mechanism's HMAC, from which the broker derives the stored and server keys (RFC 5802), as Java's Admin
does (apache/kafka clients/src/main/java/org/apache/kafka/clients/admin/KafkaAdminClient.java,
alterUserScramCredentials, and clients/src/main/java/org/apache/kafka/common/security/scram/internals/
ScramFormatter.java). Errors raise the admin's error type with one line: the broker's message, or the name of its
error code (RESOURCE_NOT_FOUND for a user without credentials, UNACCEPTABLE_CREDENTIAL for iterations out of
Kafka's 4096..16384, UNSUPPORTED_VERSION from a broker that has no SCRAM store).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kio.schema.errors import ErrorCode

from herd.client.connection import KafkaClient
from herd.client.errors import KafkaError, error_name
from herd.client.security import salted_password
from herd.client.wire import RequestBuilder

__all__ = ["SCRAM_MECHANISM_TYPES", "ScramCredential", "ScramUpsertion", "UserAdmin", "UserScramCredentials"]

DESCRIBE_USER_SCRAM_CREDENTIALS: Final = 50
ALTER_USER_SCRAM_CREDENTIALS: Final = 51
# Kafka's ScramMechanism type bytes (org.apache.kafka.clients.admin.ScramMechanism)
SCRAM_MECHANISM_TYPES: Final = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
DEFAULT_ITERATIONS: Final = 4096  # Kafka's default for kafka-configs.sh --add-config 'SCRAM-SHA-512=[password=..]'
SALT_BYTES: Final = 32


def mechanism_name(mechanism_type: int) -> str:
    return next((name for name, t in SCRAM_MECHANISM_TYPES.items() if t == mechanism_type), "UNKNOWN")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramCredentials:
    user: str
    credentials: tuple[ScramCredential, ...]


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    """A user's new credential of one mechanism; `salt` None: a random one is drawn."""

    user: str
    password: str = field(repr=False)
    mechanism: str = "SCRAM-SHA-512"
    iterations: int = DEFAULT_ITERATIONS
    salt: bytes | None = None

    def __post_init__(self) -> None:
        if self.mechanism not in SCRAM_MECHANISM_TYPES:
            raise ValueError(f"mechanism must be one of {', '.join(SCRAM_MECHANISM_TYPES)}, not {self.mechanism!r}")


class UserAdmin:
    """SCRAM credential operations (see the module docstring)."""

    client: KafkaClient
    error_type: type[KafkaError] = KafkaError

    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None) -> list[UserScramCredentials]:
        """The credentials (mechanism and iterations, never secrets) of `users`, or of every user that has some
        when None; sorted by user. Raises on an error, e.g. RESOURCE_NOT_FOUND for a named user without any."""
        names = None if users is None else tuple(users)

        def build(b: RequestBuilder) -> Any:
            return b.request(users=None if names is None else tuple(b("UserName", name=n) for n in names))

        _, body = await self.client.send(DESCRIBE_USER_SCRAM_CREDENTIALS, build)
        if body.error_code:
            raise self.error_type(
                body.error_code,
                body.error_message or f"Describing SCRAM credentials failed: {error_name(body.error_code)}",
            )
        out = []
        for result in body.results:
            if result.error_code:
                raise self._user_error(result.user, result.error_code, result.error_message)
            out.append(
                UserScramCredentials(
                    result.user,
                    tuple(
                        ScramCredential(mechanism_name(int(c.mechanism)), int(c.iterations))
                        for c in result.credential_infos
                    ),
                )
            )
        return sorted(out, key=lambda u: u.user)

    async def upsert_user_scram_credential(
        self, user: str, password: str, mechanism: str = "SCRAM-SHA-512", iterations: int = DEFAULT_ITERATIONS
    ) -> None:
        """Create or replace one credential of `user`; raises on an error."""
        await self.alter_user_scram_credentials(upsertions=[ScramUpsertion(user, password, mechanism, iterations)])

    async def delete_user_scram_credential(self, user: str, mechanism: str = "SCRAM-SHA-512") -> None:
        """Delete one credential of `user`; raises on an error (RESOURCE_NOT_FOUND when it has none)."""
        await self.alter_user_scram_credentials(deletions=[(user, mechanism)])

    async def alter_user_scram_credentials(
        self, upsertions: Sequence[ScramUpsertion] = (), deletions: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Upsert and delete (user, mechanism) credentials in one request; raises the first user's error."""
        for _, mechanism in deletions:
            if mechanism not in SCRAM_MECHANISM_TYPES:
                raise ValueError(f"mechanism must be one of {', '.join(SCRAM_MECHANISM_TYPES)}, not {mechanism!r}")

        def build(b: RequestBuilder) -> Any:
            ups = []
            for u in upsertions:
                salt = u.salt if u.salt is not None else secrets.token_bytes(SALT_BYTES)
                ups.append(
                    b(
                        "ScramCredentialUpsertion",
                        name=u.user,
                        mechanism=SCRAM_MECHANISM_TYPES[u.mechanism],
                        iterations=u.iterations,
                        salt=salt,
                        salted_password=salted_password(u.mechanism, u.password, salt, u.iterations),
                    )
                )
            dels = [
                b("ScramCredentialDeletion", name=user, mechanism=SCRAM_MECHANISM_TYPES[m]) for user, m in deletions
            ]
            return b.request(deletions=tuple(dels), upsertions=tuple(ups))

        _, body = await self.client.send(ALTER_USER_SCRAM_CREDENTIALS, build)
        for result in body.results:
            if result.error_code:
                raise self._user_error(result.user, result.error_code, result.error_message)

    def _user_error(self, user: str, code: int, message: str | None) -> KafkaError:
        if code == ErrorCode.resource_not_found and not message:
            return self.error_type(code, f"User '{user}' has no SCRAM credentials.")
        return self.error_type(code, message or f"user '{user}': {error_name(code)}")
