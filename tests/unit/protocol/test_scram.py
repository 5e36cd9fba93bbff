"""SCRAM's arithmetic (herd.protocol.scram), which the client and the broker share, against the test vectors of
RFC 5802 section 5 (SCRAM-SHA-1) and RFC 7677 section 3 (SCRAM-SHA-256): user "user", password "pencil"."""

from __future__ import annotations

import base64

import pytest

from herd.protocol.scram import (
    client_key,
    salted_password,
    saslname,
    server_key,
    signature,
    stored_key,
    user_of_saslname,
    xor,
)

# mechanism, client-first-bare, server-first, client-final-without-proof, ClientProof, ServerSignature (base64)
VECTORS = [
    (
        "SCRAM-SHA-1",
        "n=user,r=fyko+d2lbbFgONRv9qkxdawL",
        "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j",
        "v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        "rmF9pqV8S7suAoZWja4dJRkFsKQ=",
    ),
    (
        "SCRAM-SHA-256",
        "n=user,r=rOprNGfwEbeRWgbNEkqO",
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    ),
]


@pytest.mark.parametrize("mechanism, first_bare, server_first, without_proof, proof, server_signature", VECTORS)
def test_rfc_vectors(
    mechanism: str, first_bare: str, server_first: str, without_proof: str, proof: str, server_signature: str
) -> None:
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = salted_password(mechanism, "pencil", base64.b64decode(fields["s"]), int(fields["i"]))
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    key = client_key(mechanism, salted)
    stored = stored_key(mechanism, key)
    client_signature = signature(mechanism, stored, auth_message)
    assert base64.b64encode(xor(key, client_signature)).decode() == proof
    assert base64.b64encode(signature(mechanism, server_key(mechanism, salted), auth_message)).decode() == (
        server_signature
    )
    # what the server does with the proof: ClientKey back, whose hash must be the StoredKey it keeps
    assert stored_key(mechanism, xor(base64.b64decode(proof), client_signature)) == stored


def test_sha512_is_pbkdf2_with_hmac_sha512() -> None:
    import hashlib

    salt = b"\x01" * 32
    assert salted_password("SCRAM-SHA-512", "pencil", salt, 4096) == hashlib.pbkdf2_hmac(
        "sha512", b"pencil", salt, 4096
    )


def test_saslnames() -> None:
    assert saslname("a=b,c") == "a=3Db=2Cc"
    assert user_of_saslname("a=3Db=2Cc") == "a=b,c"
    assert user_of_saslname(saslname("=2C,=")) == "=2C,="
