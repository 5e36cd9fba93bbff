"""The arithmetic of SCRAM (RFC 5802 section 3, RFC 7677), which the client (herd.client.security) and the broker
(herd.security.scram) share, as Kafka's ScramFormatter serves both its ScramSaslClient and ScramSaslServer
(apache/kafka clients/src/main/java/org/apache/kafka/common/security/scram/internals/ScramFormatter.java).

    SaltedPassword  := Hi(password, salt, i)              `salted_password` (PBKDF2 with the mechanism's HMAC)
    ClientKey       := HMAC(SaltedPassword, "Client Key")  `client_key`
    StoredKey       := H(ClientKey)                        `stored_key`
    ServerKey       := HMAC(SaltedPassword, "Server Key")  `server_key`
    ClientSignature := HMAC(StoredKey, AuthMessage)        `signature`
    ClientProof     := ClientKey XOR ClientSignature       `xor`
    ServerSignature := HMAC(ServerKey, AuthMessage)        `signature`

A mechanism is named as SASL names it ("SCRAM-SHA-256", "SCRAM-SHA-512"; "SCRAM-SHA-1" only for RFC 5802's test
vector, Kafka has no SHA-1). The password is taken as its UTF-8 bytes, without SASLprep, as Kafka does. User names
travel as RFC 5802 saslnames: "=2C" is a comma and "=3D" an equals sign (`saslname`, `user_of_saslname`).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

# hashlib's name of each SCRAM mechanism's hash
SCRAM_HASHES: Final = {"SCRAM-SHA-1": "sha1", "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword = Hi(password, salt, i): PBKDF2 with the mechanism's HMAC (Kafka's
    ScramFormatter.hi, the password as UTF-8 without SASLprep, as Kafka normalizes it)."""
    return hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode(), salt, iterations)


def signature(mechanism: str, key: bytes, message: bytes) -> bytes:
    """HMAC(key, message) with the mechanism's hash: a signature of the AuthMessage with StoredKey (the
    client's) or ServerKey (the server's)."""
    return hmac.new(key, message, SCRAM_HASHES[mechanism]).digest()


def client_key(mechanism: str, salted: bytes) -> bytes:
    return signature(mechanism, salted, b"Client Key")


def server_key(mechanism: str, salted: bytes) -> bytes:
    return signature(mechanism, salted, b"Server Key")


def stored_key(mechanism: str, client_key: bytes) -> bytes:
    return hashlib.new(SCRAM_HASHES[mechanism], client_key).digest()


def xor(a: bytes, b: bytes) -> bytes:
    """ClientProof from ClientKey and ClientSignature, and ClientKey back from ClientProof (same lengths)."""
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def saslname(user: str) -> str:
    """RFC 5802 section 5.1: "," and "=" of a user name are sent as "=2C" and "=3D"."""
    return user.replace("=", "=3D").replace(",", "=2C")


def user_of_saslname(name: str) -> str:
    """The user name a saslname stands for (Kafka's ScramFormatter.username)."""
    return name.replace("=2C", ",").replace("=3D", "=")
