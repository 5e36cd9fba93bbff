"""The SCRAM credential store (herd.security.credentials): KIP-554's checks, the embedded file, and the shared
store's failed database write."""

from __future__ import annotations

import asyncio
import base64

import pytest

from herd.log.fs import OsFileSystem
from herd.log.postgres.errors import MetadataWriteError
from herd.protocol.scram import salted_password
from herd.security.credentials import (
    DUPLICATE_RESOURCE,
    NONE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNSUPPORTED_SASL_MECHANISM,
    CredentialStoreError,
    Deletion,
    FileCredentialStore,
    SharedCredentialStore,
    Upsertion,
)
from herd.security.scram import ScramMechanism, ScramServer

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


# Not a string the file's base64 (keys, the random secret) can hold by chance, as "pw" could (a fresh-clone run)
PASSWORD = "s3cret pass!"


def upsertion(
    user: str, mechanism: ScramMechanism = SHA256, iterations: int = 4096, password: str = PASSWORD
) -> Upsertion:
    salt = b"salt-" + user.encode()
    salted = salted_password(mechanism.mechanism_name, password, salt, iterations)
    return Upsertion(user, mechanism.type_code, iterations, salt, salted)


def codes(results) -> dict[str, tuple[int, str | None]]:
    return {r.user: (r.error_code, r.error_message) for r in results}


def test_upsert_describe_delete_and_survive_a_reload(tmp_path) -> None:
    store = FileCredentialStore(OsFileSystem(), str(tmp_path))
    store.load()
    assert codes(asyncio.run(store.alter([], [upsertion("alice"), upsertion("bob", SHA512, 8192)]))) == {
        "alice": (NONE, None),
        "bob": (NONE, None),
    }
    assert store.describe(None) == [("alice", NONE, None, [(1, 4096)]), ("bob", NONE, None, [(2, 8192)])]
    again = FileCredentialStore(OsFileSystem(), str(tmp_path))
    again.load()
    assert again.credentials == store.credentials and again.secret == store.secret
    assert PASSWORD not in (tmp_path / "scram-credentials.json").read_text()
    assert codes(asyncio.run(again.alter([Deletion("alice", 1)], []))) == {"alice": (NONE, None)}
    assert again.describe(["alice", "bob"])[0] == (
        "alice",
        RESOURCE_NOT_FOUND,
        "Attempt to describe a user credential that does not exist: alice",
        [],
    )
    server = ScramServer(SHA512, again.lookup, again.fake)
    assert server.respond(b"n,,n=bob,r=abc").endswith(b",i=8192")
    # an unknown user's answer has the shape of the real ones: the salt's length, the iterations
    unknown = ScramServer(SHA512, again.lookup, again.fake).respond(b"n,,n=nobody,r=abc").decode()
    fields = dict(item.split("=", 1) for item in unknown.split(","))
    assert fields["i"] == "8192" and len(base64.b64decode(fields["s"])) == len(b"salt-bob")


def test_kafkas_refusals() -> None:
    store = FileCredentialStore(OsFileSystem(), "/nonexistent-dir")
    results = codes(
        store.plan_alteration(
            [Deletion("gone", 1), Deletion("twice", 1)],
            [
                upsertion(""),
                upsertion("few", iterations=4095),
                upsertion("many", iterations=16385),
                Upsertion("mech", 3, 4096, b"s", b"p"),
                upsertion("twice"),
                upsertion("ok", iterations=16384),
            ],
        )[0]
    )
    assert results == {
        "gone": (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "twice": (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "few": (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "mech": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "ok": (NONE, None),
    }
    dup = codes(store.plan_alteration([], [upsertion("a"), upsertion("a", SHA512)])[0])
    assert dup == {"a": (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")}
    assert store.describe(["x", "x"])[0][1] == DUPLICATE_RESOURCE


def test_a_damaged_file_is_reported_not_replaced(tmp_path) -> None:
    (tmp_path / "scram-credentials.json").write_text("{not json")
    with pytest.raises(CredentialStoreError, match="cannot be read"):
        FileCredentialStore(OsFileSystem(), str(tmp_path)).load()
    assert (tmp_path / "scram-credentials.json").read_text() == "{not json"


def test_the_file_is_readable_by_its_owner_only(tmp_path) -> None:
    store = FileCredentialStore(OsFileSystem(), str(tmp_path))
    asyncio.run(store.alter([], [upsertion("alice")]))
    assert (tmp_path / "scram-credentials.json").stat().st_mode & 0o777 == 0o600


class FailingCluster:
    """A SharedCluster whose database fails every metadata write (SharedCluster._write raises MetadataWriteError)."""

    scram_credentials: dict[tuple[str, str], tuple[bytes, bytes, bytes, int]] = {}
    on_scram_credentials = None

    async def alter_scram_credentials(self, plan: object) -> None:
        raise MetadataWriteError("Could not store the SCRAM credentials: PostgreSQL at postgresql://herd@db/herd: gone")


def test_a_failed_database_write_is_a_credential_store_error() -> None:
    store = SharedCredentialStore(FailingCluster())
    with pytest.raises(CredentialStoreError, match="Could not store the SCRAM credentials: PostgreSQL"):
        asyncio.run(store.alter([], [upsertion("alice")]))
    with pytest.raises(CredentialStoreError):
        asyncio.run(store.ensure_secret())
    assert store.credentials == {}
