"""A Connection stops reading its socket when 64 of its requests are unanswered, and when the broker-wide
queued.max.requests is spent (a connection with nothing outstanding may still send one), and takes up the
buffered requests, in order, once answers go out. A real Connection and Broker; the transport records what the
connection asks of it, and the handler parks every request until the test answers it."""

from __future__ import annotations

import asyncio
import socket
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse

from herd.config import BrokerConfig
from herd.log.fs import MemoryFileSystem
from herd.log.store import SegmentStore
from herd.protocol.messages import ApiSpec
from herd.server.broker import Broker, Deferred
from herd.server.connection import MAX_IN_FLIGHT, Budgets, Connection, ConnectionQuotas

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from rawkafka import RawClient  # noqa: E402


class Transport:
    def __init__(self) -> None:
        self.paused = False
        self.written = b""

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: bytes) -> None:
        self.written += bytes(data)

    def writelines(self, parts: list[bytes]) -> None:
        self.written += b"".join(bytes(p) for p in parts)

    def get_write_buffer_size(self) -> int:
        return 0

    def abort(self) -> None:
        raise AssertionError("the connection was aborted")

    close = abort


class Owner:
    """The server's side of a connection (`ConnectionOwner`), with one API: Heartbeat, parked until answered."""

    def __init__(self, max_requests: int) -> None:
        config = BrokerConfig.from_properties({"queued.max.requests": str(max_requests)})
        self.broker = Broker(config, SegmentStore("/data", MemoryFileSystem()))
        self.broker.apis = {12: ApiSpec(12, "Heartbeat", 0, 4, self.handle)}
        self.budgets = Budgets(max_requests, -1)
        self.quotas = ConnectionQuotas(100, 100)
        self.connections: set[Connection] = set()
        self.parked: list[asyncio.Future[None]] = []

    def handle(self, ctx: Any, request: Any) -> Deferred:
        future = asyncio.get_running_loop().create_future()
        self.parked.append(future)
        return Deferred(future, lambda _: HeartbeatResponse(throttle_time=timedelta(0), error_code=ErrorCode.none))

    def answer_all(self) -> None:
        for future in self.parked:
            if not future.done():
                future.set_result(None)


def heartbeats(count: int) -> bytes:
    encoder = RawClient(0, sock=socket.socket())
    request = HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    try:
        return b"".join(encoder.encode(12, 4, request) for _ in range(count))
    finally:
        encoder.close()


def connect(owner: Owner) -> tuple[Connection, Transport]:
    conn, transport = Connection(owner), Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_reading_stops_at_max_in_flight_and_resumes_in_order() -> None:
    async def main() -> None:
        owner = Owner(max_requests=500)
        conn, transport = connect(owner)
        conn.data_received(heartbeats(MAX_IN_FLIGHT + 6))
        assert len(owner.parked) == MAX_IN_FLIGHT and transport.paused  # the 6 others wait, unread
        owner.answer_all()
        await settle()
        assert len(owner.parked) == MAX_IN_FLIGHT + 6 and not transport.paused
        owner.answer_all()
        await settle()
        ids = []
        data = transport.written
        while data:
            size = int.from_bytes(data[:4], "big")
            ids.append(int.from_bytes(data[4:8], "big"))
            data = data[4 + size :]
        assert ids == list(range(1, MAX_IN_FLIGHT + 7))  # every answer, in request order

    asyncio.run(main())


def test_queued_max_requests_pauses_pipelining_but_not_a_first_request() -> None:
    async def main() -> None:
        owner = Owner(max_requests=5)
        busy, busy_transport = connect(owner)
        busy.data_received(heartbeats(8))
        assert len(owner.parked) == 5 and busy_transport.paused  # the budget is spent
        other, other_transport = connect(owner)
        other.data_received(heartbeats(2))
        assert len(owner.parked) == 6 and other_transport.paused  # its first request went in, not the second
        owner.answer_all()
        await settle()
        assert len(owner.parked) == 10 and not other_transport.paused  # both taken up again once answered
        owner.answer_all()
        await settle()
        assert not busy_transport.paused and len(owner.parked) == 10

    asyncio.run(main())
