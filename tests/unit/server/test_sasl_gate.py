"""The SASL gate of a Connection (herd.server.connection, herd.security.sasl) without sockets: a real Connection,
Broker and API table; the transport records what is written and whether the connection was closed."""

from __future__ import annotations

import asyncio
import struct
import sys
from pathlib import Path
from typing import Any

from kio.serial import entity_reader

from herd.config import BrokerConfig
from herd.log.fs import MemoryFileSystem
from herd.log.store import SegmentStore
from herd.protocol.messages import response_class
from herd.security.credentials import FileCredentialStore
from herd.server import apis
from herd.server.broker import ANONYMOUS, Broker
from herd.server.connection import Budgets, Connection, ConnectionQuotas

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from rawkafka import RawClient, req  # noqa: E402

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'


class Transport:
    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None

    def write(self, data: bytes) -> None:
        self.written += bytes(data)

    def writelines(self, parts: list[bytes]) -> None:
        self.written += b"".join(bytes(p) for p in parts)

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        self.closed = True

    close = abort


class Owner:
    def __init__(self, **settings: str) -> None:
        config = BrokerConfig.from_properties(
            {
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                **settings,
            }
        )
        fs = MemoryFileSystem()
        self.broker = Broker(config, SegmentStore("/data", fs))
        self.broker.apis = apis.table()
        self.broker.credentials = FileCredentialStore(fs, "/data")
        self.budgets = Budgets(1000, -1)
        self.quotas = ConnectionQuotas(100, 100)
        self.connections: set[Connection] = set()


def connect(owner: Owner, listener: str, protocol: str) -> tuple[Connection, Transport, RawClient]:
    conn = Connection(owner, listener, protocol)
    transport = Transport()
    conn.connection_made(transport)
    return conn, transport, RawClient(0, sock=_NoSocket())


class _NoSocket:
    def close(self) -> None:
        pass


def answer(transport: Transport, api_key: int, version: int) -> Any:
    size = struct.unpack(">i", transport.written[:4])[0]
    frame, transport.written = transport.written[4 : 4 + size], transport.written[4 + size :]
    cls = response_class(api_key, version)
    _, offset = entity_reader(cls.__header_schema__)(frame, 0)
    return entity_reader(cls)(frame, offset)[0]


def test_a_plaintext_connection_runs_the_ungated_path() -> None:
    async def run() -> None:
        conn, transport, raw = connect(Owner(), "PLAINTEXT", "PLAINTEXT")
        assert "_on_frame" not in vars(conn)  # the class's _on_frame: nothing added per request
        conn.data_received(raw.encode(17, 1, req(17, 1, mechanism="PLAIN")))
        assert answer(transport, 17, 1).error_code == 34  # ILLEGAL_SASL_STATE, as Kafka's KafkaApis
        assert not transport.closed and conn.session.principal == ANONYMOUS and conn.session.authenticated

    asyncio.run(run())


def test_a_sasl_connection_serves_only_authentication_first() -> None:
    async def run() -> None:
        owner = Owner()
        conn, transport, raw = connect(owner, "SASL_PLAINTEXT", "SASL_PLAINTEXT")
        assert not conn.session.authenticated
        conn.data_received(raw.encode(17, 1, req(17, 1, mechanism="PLAIN")))
        assert answer(transport, 17, 1).error_code == 0
        conn.data_received(raw.encode(36, 2, req(36, 2, auth_bytes=b"\0alice\0alice-pw")))
        assert answer(transport, 36, 2).error_code == 0
        assert conn.session.principal == "User:alice" and conn.session.authenticated
        assert owner.broker.metrics.sasl == [1, 0, 0, 0]  # herd_sasl_authentications
        conn.data_received(raw.encode(3, 1, req(3, 1, topics=())))
        assert answer(transport, 3, 1).brokers and not transport.closed

        other, closed, raw = connect(owner, "SASL_PLAINTEXT", "SASL_PLAINTEXT")
        other.data_received(raw.encode(3, 1, req(3, 1, topics=())))
        assert closed.closed and closed.written == b""

    asyncio.run(run())


def test_an_expired_session_closes_at_the_next_request() -> None:
    async def run() -> None:
        owner = Owner(**{"connections.max.reauth.ms": "1000"})
        conn, transport, raw = connect(owner, "SASL_PLAINTEXT", "SASL_PLAINTEXT")
        conn.data_received(raw.encode(17, 1, req(17, 1, mechanism="PLAIN")))
        conn.data_received(raw.encode(36, 1, req(36, 1, auth_bytes=b"\0alice\0alice-pw")))
        answer(transport, 17, 1)
        assert answer(transport, 36, 1).session_lifetime.total_seconds() == 1
        conn.session.expires_at = asyncio.get_running_loop().time() - 0.001  # the second has passed
        conn.data_received(raw.encode(3, 1, req(3, 1, topics=())))
        assert transport.closed and transport.written == b""
        assert owner.broker.metrics.expired == 1  # herd_connections_expired

    asyncio.run(run())


def test_the_counters_are_exported() -> None:
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from herd.server.metrics import HerdCollector

    owner = Owner()
    owner.broker.metrics.sasl[:] = [5, 3, 2, 1]
    owner.broker.metrics.expired = 4
    registry = CollectorRegistry()
    registry.register(HerdCollector(owner))
    text = generate_latest(registry).decode()
    assert 'herd_sasl_authentications_total{reauthentication="false",result="failed"} 3.0' in text
    assert 'herd_sasl_authentications_total{reauthentication="true",result="succeeded"} 2.0' in text
    assert "herd_connections_expired_total 4.0" in text
