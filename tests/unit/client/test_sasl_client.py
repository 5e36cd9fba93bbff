"""The client halves of SASL PLAIN and SCRAM (herd.client.security), against the RFCs' test vectors.

RFC 5802 section 5 gives a SCRAM-SHA-1 exchange (user "user", password "pencil"), RFC 7677 section 3 a SCRAM-SHA-256
one; the client's nonce is fixed to theirs, so every message must match the RFC byte for byte, and the server's
final message from the RFC must verify (a changed signature must not)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from herd.client.security import PlainClient, SaslError, ScramClient, salted_password


def exchange(mechanism: str, nonce: str, server_first: str, server_final: str) -> tuple[bytes, bytes, ScramClient]:
    client = ScramClient(mechanism, "user", "pencil", nonce=nonce)
    first = client.respond(None)
    final = client.respond(server_first.encode())
    assert client.respond(server_final.encode()) is None
    assert first is not None and final is not None
    return first, final, client


RFC5802 = (
    "SCRAM-SHA-1",
    "fyko+d2lbbFgONRv9qkxdawL",
    "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
    "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
)
RFC7677 = (
    "SCRAM-SHA-256",
    "rOprNGfwEbeRWgbNEkqO",
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
)


def test_rfc5802_scram_sha1_vector() -> None:
    first, final, client = exchange(*RFC5802)
    assert first == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    assert final == b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    assert client.complete


def test_rfc7677_scram_sha256_vector() -> None:
    first, final, client = exchange(*RFC7677)
    assert first == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert client.complete


@pytest.mark.parametrize("vector", [RFC5802, RFC7677])
def test_a_wrong_server_signature_is_refused(vector: tuple[str, str, str, str]) -> None:
    mechanism, nonce, server_first, server_final = vector
    client = ScramClient(mechanism, "user", "pencil", nonce=nonce)
    client.respond(None)
    client.respond(server_first.encode())
    signature = bytearray(base64.b64decode(server_final[2:]))
    signature[0] ^= 1
    with pytest.raises(SaslError, match="signature is wrong"):
        client.respond(b"v=" + base64.b64encode(bytes(signature)))
    assert not client.complete


def test_a_server_error_is_reported_without_the_password() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677[1])
    client.respond(None)
    client.respond(RFC7677[2].encode())
    with pytest.raises(SaslError) as caught:
        client.respond(b"e=invalid-proof")
    assert "invalid-proof" in str(caught.value) and "pencil" not in str(caught.value)


@pytest.mark.parametrize(
    "server_first, complaint",
    [
        ("r=someoneelse123,s=QSXCR+Q6sek8bf92,i=4096", "nonce"),
        ("r=abc,s=QSXCR+Q6sek8bf92,i=4096", "nonce"),  # the client's nonce, not extended
        ("r=abcdef,s=QSXCR+Q6sek8bf92,i=1024", "iteration"),
        ("r=abcdef,s=QSXCR+Q6sek8bf92,i=many", "iteration"),
        ("r=abcdef,s=!!!,i=4096", "base64"),
        ("r=abcdef,i=4096", "lacks"),
        ("m=ext,r=abcdef,s=QSXCR+Q6sek8bf92,i=4096", "extension"),
        ("garbage", "malformed"),
    ],
)
def test_a_bad_server_first_message_is_refused(server_first: str, complaint: str) -> None:
    client = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    client.respond(None)
    with pytest.raises(SaslError, match=complaint):
        client.respond(server_first.encode())


def test_extensions_of_the_server_first_message_are_skipped() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC7677[1])
    client.respond(None)
    final = client.respond((RFC7677[2] + ",tokenauth=true").encode())
    assert final is not None and final.startswith(b"c=biws,r=")


def test_user_names_are_escaped() -> None:
    client = ScramClient("SCRAM-SHA-512", "a,b=c", "pw", nonce="xyz")
    assert client.respond(None) == b"n,,n=a=2Cb=3Dc,r=xyz"


def test_a_random_nonce_is_printable_and_new_each_time() -> None:
    nonces = {ScramClient("SCRAM-SHA-512", "u", "p").respond(None) for _ in range(20)}
    assert len(nonces) == 20
    for message in nonces:
        assert message is not None
        nonce = message.decode().split(",r=", 1)[1]
        assert len(nonce) >= 24 and "," not in nonce and nonce.isprintable()


def test_scram_sha512_round_trip_against_a_server_computed_here() -> None:
    """The server side of RFC 5802 written out with hashlib/hmac: the client's proof verifies against the stored
    key and the client accepts the server's signature."""
    salt, iterations = b"0123456789abcdef", 4096
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret", nonce="clientnonce")
    first = client.respond(None)
    assert first is not None
    server_first = f"r=clientnonceSERVER,s={base64.b64encode(salt).decode()},i={iterations}"
    final = client.respond(server_first.encode())
    assert final is not None
    without_proof, proof_b64 = final.decode().rsplit(",p=", 1)
    auth = f"{first.decode()[3:]},{server_first},{without_proof}".encode()
    salted = hashlib.pbkdf2_hmac("sha512", b"alice-secret", salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    stored_key = hashlib.sha512(client_key).digest()
    signature = hmac.new(stored_key, auth, "sha512").digest()
    recovered = bytes(a ^ b for a, b in zip(base64.b64decode(proof_b64), signature))
    assert hashlib.sha512(recovered).digest() == stored_key
    server_signature = hmac.new(hmac.new(salted, b"Server Key", "sha512").digest(), auth, "sha512").digest()
    assert client.respond(b"v=" + base64.b64encode(server_signature)) is None and client.complete
    assert salted_password("SCRAM-SHA-512", "alice-secret", salt, iterations) == salted


def test_plain_sends_one_message() -> None:
    client = PlainClient("alice", "alice-secret")
    assert client.respond(None) == b"\0alice\0alice-secret"
    assert client.respond(b"") is None and client.complete
    assert "secret" not in repr(client)
