"""SCRAM-SHA-256/512 server exchange (herd.security.scram): RFC 7677's test vector, Kafka's refusals, message
parsing edge cases and wrong proofs. A small client written here from RFC 5802 drives the server."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from herd.protocol.scram import salted_password
from herd.security.scram import (
    AuthenticationFailed,
    ClientFirst,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    fake_credential,
    make_credential,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
SECRET = b"s" * 32


def rfc7677_credential() -> ScramCredential:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    return make_credential(SHA256, "pencil", 4096, salt)


def server_for(
    credentials: dict[str, ScramCredential], mechanism: ScramMechanism = SHA256, nonce: str | None = None
) -> ScramServer:
    return ScramServer(
        mechanism,
        lambda user, m: credentials.get(user) if m is mechanism else None,
        lambda user, m: fake_credential(m, user, SECRET),
        nonce,
    )


def client_final(
    mechanism: ScramMechanism, password: str, first_bare: str, server_first: str, channel: str = "biws"
) -> str:
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = salted_password(mechanism.mechanism_name, password, base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored = hashlib.new(mechanism.hash_name, client_key).digest()
    without_proof = f"c={channel},r={fields['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored, auth, mechanism.hash_name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def login(server: ScramServer, user: str, password: str, nonce: str = "clientnonce123") -> bytes:
    bare = f"n={user},r={nonce}"
    server_first = server.respond(f"n,,{bare}".encode()).decode()
    return server.respond(client_final(server.mechanism, password, bare, server_first).encode())


def test_rfc7677_vector() -> None:
    server = server_for({"user": rfc7677_credential()}, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.respond(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.respond(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.user == "user"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_a_good_password_completes_and_a_wrong_one_fails(mechanism: ScramMechanism) -> None:
    credentials = {"alice": make_credential(mechanism, "alice-secret", 8192)}
    server = server_for(credentials, mechanism)
    assert login(server, "alice", "alice-secret").startswith(b"v=")
    assert server.user == "alice"
    with pytest.raises(AuthenticationFailed) as failed:
        login(server_for(credentials, mechanism), "alice", "wrong")
    assert failed.value.client_message is None  # the generic message: nothing about why
    assert "secret" not in str(failed.value) and "wrong" not in str(failed.value)


def test_an_unknown_user_gets_a_first_answer_like_a_known_one_and_fails_the_same_way() -> None:
    credentials = {"alice": make_credential(SHA256, "pw", 4096)}
    first = server_for(credentials).respond(b"n,,n=mallory,r=abc").decode()
    again = server_for(credentials).respond(b"n,,n=mallory,r=abc").decode()
    salt = lambda m: m.split(",")[1]  # noqa: E731
    assert salt(first) == salt(again) and first.endswith(",i=4096")
    assert len(base64.b64decode(salt(first)[2:])) == 32  # as long as make_credential's salts
    with pytest.raises(AuthenticationFailed) as failed:
        login(server_for(credentials), "mallory", "pw")
    assert failed.value.client_message is None
    fake = fake_credential(SHA256, "mallory", SECRET)
    assert fake.salt != fake_credential(SHA256, "mallory2", SECRET).salt


def test_a_proof_for_another_nonce_or_a_changed_message_fails() -> None:
    credentials = {"alice": make_credential(SHA256, "pw", 4096)}
    server = server_for(credentials)
    first = server.respond(b"n,,n=alice,r=abc").decode()
    nonce = first.split(",")[0][2:]
    final = client_final(SHA256, "pw", "n=alice,r=abc", first)
    with pytest.raises(AuthenticationFailed, match="nonce"):
        server.respond(final.replace(nonce, nonce + "x").encode())
    server = server_for(credentials)
    first = server.respond(b"n,,n=alice,r=abc").decode()
    proof = client_final(SHA256, "pw", "n=alice,r=abc", first)
    flipped = proof[:-6] + ("A" if proof[-6] != "A" else "B") + proof[-5:]
    with pytest.raises(AuthenticationFailed, match="Invalid client credentials"):
        server.respond(flipped.encode())


def test_channel_binding_must_repeat_the_gs2_header() -> None:
    credentials = {"alice": make_credential(SHA256, "pw", 4096)}
    server = server_for(credentials)
    first = server.respond(b"n,,n=alice,r=abc").decode()
    bad = base64.b64encode(b"y,,").decode()
    with pytest.raises(AuthenticationFailed, match="channel binding"):
        server.respond(client_final(SHA256, "pw", "n=alice,r=abc", first, channel=bad).encode())


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"n,,",
        b"y,,n=alice,r=abc",
        b"p=tls-unique,,n=alice,r=abc",
        b"n,,n=,r=abc",
        b"n,,n=al=ice,r=abc",
        b"n,,n=alice,r=a,bc",
        b"n,,r=abc,n=alice",
        b"n,,n=alice",
        b"\xff\xfe",
        b"n,,n=alice,r=abc,tokenauth",
    ],
)
def test_malformed_first_messages_are_refused(message: bytes) -> None:
    with pytest.raises(AuthenticationFailed):
        server_for({}).respond(message)


def test_saslname_escapes_and_extensions() -> None:
    first = ClientFirst.parse(b"n,a=a=2Cb,m=x,n=a=2Cb=3Dc,r=nonce,ext=1,other=two")
    assert first.user == "a,b=c" and first.authzid == "a,b" and first.nonce == "nonce"
    assert first.extensions == {"ext": "1", "other": "two"}
    assert first.bare == "m=x,n=a=2Cb=3Dc,r=nonce,ext=1,other=two"


def test_tokenauth_is_refused_and_another_authzid_is_told() -> None:
    credentials = {"alice": make_credential(SHA256, "pw", 4096)}
    with pytest.raises(AuthenticationFailed, match="Token Authentication failed"):
        server_for(credentials).respond(b"n,,n=alice,r=abc,tokenauth=true")
    with pytest.raises(AuthenticationFailed) as failed:
        server_for(credentials).respond(b"n,a=bob,n=alice,r=abc")
    assert failed.value.client_message == (
        "Authentication failed: Client requested an authorization id that is different from username"
    )
    assert server_for(credentials).respond(b"n,a=alice,n=alice,r=abc").startswith(b"r=abc")


def test_too_few_iterations_in_a_stored_credential_fail() -> None:
    credentials = {"alice": make_credential(SHA256, "pw", 1000)}
    with pytest.raises(AuthenticationFailed, match="less than the minimum 4096"):
        server_for(credentials).respond(b"n,,n=alice,r=abc")


def test_the_exchange_is_over_after_it_completes() -> None:
    credentials = {"alice": make_credential(SHA512, "pw", 4096)}
    server = server_for(credentials, SHA512)
    login(server, "alice", "pw")
    with pytest.raises(AuthenticationFailed):
        server.respond(b"n,,n=alice,r=abc")


def test_repr_hides_the_keys() -> None:
    credential = make_credential(SHA256, "pw", 4096)
    assert base64.b64encode(credential.stored_key).decode() not in repr(credential)
    assert repr(credential) == "ScramCredential(iterations=4096)"
