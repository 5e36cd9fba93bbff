"""The SCRAM credentials herd keeps: per user and mechanism the salt, StoredKey, ServerKey and iteration count
(RFC 5802 section 3), never a password.

Embedded (`FileCredentialStore`): `<first log.dir>/scram-credentials.json`, replaced atomically (temporary file,
fsync, rename, directory fsync: herd.log.fs.write_atomically, as topics.json is) before a change takes effect,
and read at start. The file also keeps a random secret of this data directory, from which the answers to users
that do not exist are derived (herd.security.scram.fake_credential), so they stay the same across restarts.

Cluster mode keeps them in PostgreSQL's `herd_scram_credentials` (schema version 6), read by every node with the
rest of the cluster's metadata (herd.cluster.shared) and handed to a `CredentialView`.

Changes follow KIP-554 (AlterUserScramCredentials): `plan_alteration` checks a request's deletions and
upsertions as Kafka's controller does (apache/kafka metadata/src/main/java/org/apache/kafka/controller/
ScramControlManager.java) and gives per user either an error or the change; the store applies the changes
together.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from herd.cluster.topics import KAFKA_STORAGE_ERROR, MetadataError
from herd.log.fs import FileSystem, read_whole, write_atomically
from herd.log.postgres.errors import MetadataWriteError
from herd.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted,
    fake_credential,
)

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "scram-credentials.json"

# Kafka's error codes for the per-user results
NONE, RESOURCE_NOT_FOUND, UNSUPPORTED_SASL_MECHANISM, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = 0, 91, 33, 92, 93
UNKNOWN_SERVER_ERROR = -1

Credentials = dict[str, dict[ScramMechanism, ScramCredential]]  # user -> mechanism -> credential


class CredentialStoreError(MetadataError):
    """The credentials could not be read or stored; the message is one line for the log and the client (a
    MetadataError: `herd serve` reports a damaged file at start as it does a damaged topics.json)."""


@dataclass(frozen=True, slots=True)
class Deletion:
    user: str
    mechanism_type: int


@dataclass(frozen=True, slots=True)
class Upsertion:
    user: str
    mechanism_type: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"Upsertion({self.user!r}, {self.mechanism_type}, iterations={self.iterations})"


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error_code: int = NONE
    error_message: str | None = None


class CredentialView:
    """The credentials as the SASL exchanges read them (a dict in memory; the owner replaces it on a change)."""

    def __init__(self, credentials: Credentials | None = None, secret: bytes = b"") -> None:
        self.credentials: Credentials = credentials or {}
        self.secret = secret or secrets.token_bytes(32)
        self._shapes: tuple[Credentials, dict[ScramMechanism, tuple[int, int]]] | None = None

    def fake(self, user: str, mechanism: ScramMechanism) -> ScramCredential:
        """The stand-in credential of a user without one: its salt as long as most real users' salts of the
        mechanism, with their most common iteration count (32 bytes and 4096 with none), so that an unknown user's
        first answer cannot be told from a real one's by its shape."""
        if self._shapes is None or self._shapes[0] is not self.credentials:
            counts: dict[ScramMechanism, Counter[tuple[int, int]]] = {}
            for by_mechanism in self.credentials.values():
                for m, c in by_mechanism.items():
                    counts.setdefault(m, Counter())[(len(c.salt), c.iterations)] += 1
            self._shapes = (self.credentials, {m: c.most_common(1)[0][0] for m, c in counts.items()})
        salt_size, iterations = self._shapes[1].get(mechanism, (32, DEFAULT_ITERATIONS))
        return fake_credential(mechanism, user, self.secret, salt_size, iterations)

    def _replace_rows(self, rows: dict[tuple[str, str], tuple[bytes, bytes, bytes, int]]) -> None:
        """The credentials of stored rows (user, mechanism name) -> (salt, StoredKey, ServerKey, iterations)."""
        credentials: Credentials = {}
        for (user, name), (salt, stored_key, server_key, iterations) in rows.items():
            mechanism = ScramMechanism.from_name(name)
            if mechanism is not None and user:
                credentials.setdefault(user, {})[mechanism] = ScramCredential(salt, stored_key, server_key, iterations)
        self.credentials = credentials

    def lookup(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.credentials.get(user, {}).get(mechanism)

    def describe(self, users: list[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
        """(user, error code, message, [(mechanism type, iterations)]) per user asked (all users for None or []),
        as Kafka's ScramImage.describe answers DescribeUserScramCredentials."""
        if not users:
            return [(u, NONE, None, self._infos(u)) for u in sorted(self.credentials)]
        counts: dict[str, int] = {}
        for user in users:
            counts[user] = counts.get(user, 0) + 1
        results = []
        for user, count in counts.items():
            if count > 1:
                results.append(
                    (
                        user,
                        DUPLICATE_RESOURCE,
                        f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}",
                        [],
                    )
                )
            elif not self.credentials.get(user):
                results.append(
                    (user, RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {user}", [])
                )
            else:
                results.append((user, NONE, None, self._infos(user)))
        return results

    def _infos(self, user: str) -> list[tuple[int, int]]:
        return sorted((m.type_code, c.iterations) for m, c in self.credentials.get(user, {}).items())

    def plan_alteration(
        self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]
    ) -> tuple[list[UserResult], Credentials]:
        """The per-user results of an AlterUserScramCredentials request and the credentials after it (the view is
        not changed: the store writes them first). A user named twice fails as a whole (DUPLICATE_RESOURCE)."""
        errors: dict[str, UserResult] = {}
        deletes: dict[str, Deletion] = {}
        upserts: dict[str, Upsertion] = {}
        for deletion in deletions:
            if deletion.user in errors:
                continue
            if deletes.pop(deletion.user, None) is not None:
                errors[deletion.user] = _duplicate(deletion.user)
            elif (error := self._check_deletion(deletion)) is not None:
                errors[deletion.user] = error
            else:
                deletes[deletion.user] = deletion
        for upsertion in upsertions:
            if upsertion.user in errors:
                continue
            if deletes.pop(upsertion.user, None) is not None or upserts.pop(upsertion.user, None) is not None:
                errors[upsertion.user] = _duplicate(upsertion.user)
            elif (error := _check_upsertion(upsertion)) is not None:
                errors[upsertion.user] = error
            else:
                upserts[upsertion.user] = upsertion
        after = {user: dict(by_mechanism) for user, by_mechanism in self.credentials.items()}
        results = []
        for user, deletion in deletes.items():
            mechanism = ScramMechanism.from_type(deletion.mechanism_type)
            assert mechanism is not None
            after[user].pop(mechanism, None)
            if not after[user]:
                del after[user]
            results.append(UserResult(user))
        for user, upsertion in upserts.items():
            mechanism = ScramMechanism.from_type(upsertion.mechanism_type)
            assert mechanism is not None
            after.setdefault(user, {})[mechanism] = credential_from_salted(
                mechanism, upsertion.salted_password, upsertion.salt, upsertion.iterations
            )
            results.append(UserResult(user))
        results.extend(errors.values())
        return results, after

    def _check_deletion(self, deletion: Deletion) -> UserResult | None:
        error = _check_name_and_mechanism(deletion.user, deletion.mechanism_type)
        if error is not None:
            return error
        mechanism = ScramMechanism.from_type(deletion.mechanism_type)
        if mechanism not in self.credentials.get(deletion.user, {}):
            return UserResult(
                deletion.user, RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            )
        return None


def _duplicate(user: str) -> UserResult:
    return UserResult(user, DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")


def _check_name_and_mechanism(user: str, mechanism_type: int) -> UserResult | None:
    if not user:
        return UserResult(user, UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if ScramMechanism.from_type(mechanism_type) is None:
        return UserResult(user, UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def _check_upsertion(upsertion: Upsertion) -> UserResult | None:
    error = _check_name_and_mechanism(upsertion.user, upsertion.mechanism_type)
    if error is not None:
        return error
    mechanism = ScramMechanism.from_type(upsertion.mechanism_type)
    assert mechanism is not None
    if upsertion.iterations < mechanism.min_iterations:
        return UserResult(upsertion.user, UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        return UserResult(upsertion.user, UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    if not upsertion.salt or not upsertion.salted_password:
        return UserResult(upsertion.user, UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    return None


# -- the embedded store ----------------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encode_credentials(credentials: Credentials, secret: bytes) -> bytes:
    users = {
        user: {
            m.mechanism_name: {
                "salt": _b64(c.salt),
                "stored_key": _b64(c.stored_key),
                "server_key": _b64(c.server_key),
                "iterations": c.iterations,
            }
            for m, c in sorted(by_mechanism.items(), key=lambda i: i[0].type_code)
        }
        for user, by_mechanism in sorted(credentials.items())
    }
    return json.dumps({"version": 1, "secret": _b64(secret), "users": users}, indent=1).encode()


def decode_credentials(data: bytes, where: str) -> tuple[Credentials, bytes]:
    """Raises CredentialStoreError for a file that is not what encode_credentials wrote."""
    try:
        doc = json.loads(data)
        if doc.get("version") != 1:
            raise ValueError(f"unknown version {doc.get('version')!r}")
        credentials: Credentials = {}
        for user, by_name in doc["users"].items():
            for name, c in by_name.items():
                mechanism = ScramMechanism.from_name(name)
                if mechanism is None:
                    raise ValueError(f"unknown mechanism {name!r}")
                credentials.setdefault(user, {})[mechanism] = ScramCredential(
                    base64.b64decode(c["salt"]),
                    base64.b64decode(c["stored_key"]),
                    base64.b64decode(c["server_key"]),
                    int(c["iterations"]),
                )
        return credentials, base64.b64decode(doc["secret"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CredentialStoreError(f"{where} cannot be read: {e}") from None


class CredentialStore(Protocol):
    """Where a node's credentials are changed, in either backend (`FileCredentialStore`, `SharedCredentialStore`);
    the SASL exchanges read them as a `CredentialView`."""

    failure_code: int  # what each user's result is when the change could not be stored

    async def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> list[UserResult]:
        """Apply an AlterUserScramCredentials request, durably before it takes effect. Raises
        CredentialStoreError (nothing changed)."""
        ...


class FileCredentialStore(CredentialView):
    """The embedded node's credentials, in `<root_dir>/scram-credentials.json` through `fs`."""

    failure_code = KAFKA_STORAGE_ERROR  # the file could not be written

    def __init__(self, fs: FileSystem, root_dir: str) -> None:
        super().__init__()
        self._fs = fs
        self.path = os.path.join(root_dir, CREDENTIALS_FILE)

    def load(self) -> None:
        """Read the file if there is one (else start empty with a new secret, written with the first user).
        Raises CredentialStoreError for a damaged file: it is reported, never replaced."""
        try:
            data = read_whole(self._fs, self.path)
        except FileNotFoundError:
            return
        except OSError as e:
            raise CredentialStoreError(f"{self.path} cannot be read: {e}") from None
        self.credentials, self.secret = decode_credentials(data, self.path)

    async def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> list[UserResult]:
        """Apply an AlterUserScramCredentials request: durable before it takes effect (the file is written on the
        loop, as topics.json is). Raises CredentialStoreError when the file cannot be written (nothing changed)."""
        results, after = self.plan_alteration(deletions, upsertions)
        if after != self.credentials:
            try:
                write_atomically(self._fs, self.path, encode_credentials(after, self.secret))
            except OSError as e:
                raise CredentialStoreError(f"could not write {self.path}: {e}") from None
            _owner_only(self.path)
            self.credentials = after
            changed = sorted(r.user for r in results if r.error_code == NONE)
            log.info("SCRAM credentials of %s changed", ", ".join(changed))
        return results


def _owner_only(path: str) -> None:
    """StoredKey and ServerKey are not the password, but with a recorded exchange they let one log in: the file
    is made readable by the broker's user only (on a real filesystem; the temporary file it was renamed from had
    the process's umask for the moment it existed)."""
    try:
        if os.path.isfile(path):
            os.chmod(path, 0o600)
    except OSError as e:
        log.warning("could not make %s readable by its owner only: %s", path, e)


# -- cluster mode ----------------------------------------------------------------------------------------------------

SECRET_MECHANISM = "herd-secret"  # the row (user "", this mechanism) holds the cluster's secret in its salt column


class SharedCredentialStore(CredentialView):
    """A cluster node's view of herd_scram_credentials (herd.cluster.shared.SharedCluster reads it with the rest of
    the metadata and calls back on every change, whichever node made it). Alterations run in one transaction
    against the rows as stored, so two nodes changing users at once lose nothing. The row of the empty user name
    (which no user can have: Kafka refuses it) keeps the cluster's random secret for unknown users' answers."""

    failure_code = UNKNOWN_SERVER_ERROR  # the database could not be reached

    def __init__(self, cluster: Any) -> None:
        super().__init__()
        self._cluster = cluster
        self._replace(cluster.scram_credentials)
        cluster.on_scram_credentials = self._replace

    def _replace(self, rows: dict[tuple[str, str], tuple[bytes, bytes, bytes, int]]) -> None:
        secret = rows.get(("", SECRET_MECHANISM))
        if secret is not None:
            self.secret = secret[0]
        self._replace_rows(rows)

    async def ensure_secret(self) -> None:
        """Store a random secret for the cluster unless one is stored (at a node's start). Raises
        CredentialStoreError."""

        def plan(rows: dict[tuple[str, str], Any]) -> tuple[None, dict[tuple[str, str], Any]]:
            if ("", SECRET_MECHANISM) in rows:
                return None, {}
            return None, {("", SECRET_MECHANISM): (secrets.token_bytes(32), b"", b"", 0)}

        await self._alter(plan)

    async def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> list[UserResult]:
        """Apply an AlterUserScramCredentials request in the database. Raises CredentialStoreError (nothing
        changed)."""
        deletions, upsertions = list(deletions), list(upsertions)

        def plan(rows: dict[tuple[str, str], Any]) -> tuple[list[UserResult], dict[tuple[str, str], Any]]:
            stored = CredentialView(secret=self.secret)
            stored._replace_rows(rows)
            results, after = stored.plan_alteration(deletions, upsertions)
            changes: dict[tuple[str, str], Any] = {}
            for user in {*stored.credentials, *after}:
                before, now = stored.credentials.get(user, {}), after.get(user, {})
                for mechanism in {*before, *now}:
                    if before.get(mechanism) != now.get(mechanism):
                        c = now.get(mechanism)
                        changes[(user, mechanism.mechanism_name)] = (
                            None if c is None else (c.salt, c.stored_key, c.server_key, c.iterations)
                        )
            return results, changes

        results = await self._alter(plan)
        changed = sorted(r.user for r in results if r.error_code == NONE)
        if changed:
            log.info("SCRAM credentials of %s changed", ", ".join(changed))
        return results

    async def _alter(self, plan: Any) -> Any:
        try:
            return await self._cluster.alter_scram_credentials(plan)
        except MetadataWriteError as e:
            raise CredentialStoreError(str(e)) from None
