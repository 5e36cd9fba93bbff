"""herd's client SASL exchange (BrokerConnection) against a scripted fake broker: an asyncio server in the test that
speaks kio and plays SCRAM's server side with hashlib and hmac, so that the test can answer what a real broker
never would: a server signature that does not verify (a broker that does not know the user's keys), an iteration
count below Kafka's minimum, a broker without SaslHandshake v1, a refused mechanism. Each must end the connection
with AuthenticationError at once, without the password in its message. The normal path is also checked here, byte
for byte on the broker's side: the client-first message, the proof (verified against the stored key) and the
request order ApiVersions, SaslHandshake, SaslAuthenticate x2, then Metadata."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import struct
from typing import Any

import pytest

from herd.client.connection import KafkaClient
from herd.client.errors import AuthenticationError, ErrorCode
from herd.protocol.messages import decode_request, encode_response, peek_prefix
from herd.server.apis._build import builder

PASSWORD = "fake-broker-secret"
SALT, ITERATIONS = b"salt-of-the-fake", 4096


class FakeScramBroker:
    """ApiVersions, SaslHandshake v1, SaslAuthenticate (SCRAM-SHA-512 server side) and Metadata."""

    def __init__(
        self,
        *,
        tamper: bool = False,
        iterations: int = ITERATIONS,
        handshake: bool = True,
        mechanisms: tuple[str, ...] = ("SCRAM-SHA-512",),
    ) -> None:
        self.tamper, self.iterations, self.handshake, self.mechanisms = tamper, iterations, handshake, mechanisms
        self.calls: list[int] = []
        self.proof_ok: bool | None = None
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._first_bare = self._server_first = ""

    async def __aenter__(self) -> FakeScramBroker:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                frame = await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
                api_key, version, correlation_id = peek_prefix(frame)
                self.calls.append(api_key)
                _, request = decode_request(api_key, version, frame)
                writer.write(encode_response(correlation_id, self._answer(api_key, version, request)))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        writer.close()

    def _answer(self, api_key: int, version: int, request: Any) -> Any:
        b = builder(api_key, version)
        if api_key == 18:
            ranges = {18: (0, 3), 3: (1, 12), 36: (0, 2)}
            if self.handshake:
                ranges[17] = (0, 1)
            keys = tuple(b("ApiVersion", api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ranges.items())
            return b.response(error_code=0, api_keys=keys, throttle_time=0)
        if api_key == 17:
            ok = request.mechanism in self.mechanisms
            return b.response(error_code=0 if ok else ErrorCode.unsupported_sasl_mechanism, mechanisms=self.mechanisms)
        if api_key == 36:
            return b.response(
                error_code=0, error_message=None, auth_bytes=self._scram(bytes(request.auth_bytes)), session_lifetime=0
            )
        return b.response(
            throttle_time=0,
            brokers=(b("MetadataResponseBroker", node_id=1, host="127.0.0.1", port=self.port, rack=None),),
            cluster_id="fake",
            controller_id=1,
            topics=(),
        )

    def _scram(self, message: bytes) -> bytes:
        text = message.decode()
        if text.startswith("n,,"):
            self._first_bare = text[3:]
            nonce = dict(p.split("=", 1) for p in self._first_bare.split(","))["r"]
            self._server_first = f"r={nonce}SERVER,s={base64.b64encode(SALT).decode()},i={self.iterations}"
            return self._server_first.encode()
        without_proof, proof = text.rsplit(",p=", 1)
        auth = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        salted = hashlib.pbkdf2_hmac("sha512", PASSWORD.encode(), SALT, self.iterations)
        stored = hashlib.sha512(hmac.new(salted, b"Client Key", "sha512").digest()).digest()
        signature = hmac.new(stored, auth, "sha512").digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature))
        self.proof_ok = hashlib.sha512(client_key).digest() == stored
        server_signature = hmac.new(hmac.new(salted, b"Server Key", "sha512").digest(), auth, "sha512").digest()
        if self.tamper:
            server_signature = bytes([server_signature[0] ^ 1]) + server_signature[1:]
        return b"v=" + base64.b64encode(server_signature)


def security(mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": PASSWORD,
    }


def test_the_exchange_in_order_and_the_proof_verifies() -> None:
    async def main() -> None:
        async with FakeScramBroker() as fake:
            async with KafkaClient(f"127.0.0.1:{fake.port}", security=security()) as client:
                assert client.brokers[1].port == fake.port
            assert fake.calls == [18, 17, 36, 36, 3] and fake.proof_ok

    asyncio.run(main())


@pytest.mark.parametrize(
    "fake_args, mechanism, code, words",
    [
        ({"tamper": True}, "SCRAM-SHA-512", ErrorCode.sasl_authentication_failed, "signature is wrong"),
        ({"iterations": 1024}, "SCRAM-SHA-512", ErrorCode.sasl_authentication_failed, "iteration count"),
        ({"handshake": False}, "SCRAM-SHA-512", ErrorCode.illegal_sasl_state, "does not serve SaslHandshake v1"),
        ({}, "PLAIN", ErrorCode.unsupported_sasl_mechanism, "refused SASL mechanism PLAIN"),
    ],
)
def test_what_a_client_refuses_or_is_refused(
    fake_args: dict[str, Any], mechanism: str, code: ErrorCode, words: str
) -> None:
    async def main() -> None:
        async with FakeScramBroker(**fake_args) as fake:
            client = KafkaClient(f"127.0.0.1:{fake.port}", security=security(mechanism))
            with pytest.raises(AuthenticationError) as caught:
                await client.start()
            await client.close()
            assert caught.value.code == code and words in str(caught.value), caught.value
            assert PASSWORD not in str(caught.value) and not caught.value.retriable
            assert 3 not in fake.calls  # nothing was asked before the login

    asyncio.run(main())
