"""herd's client transport: pipelining, version negotiation, coordinator rediscovery, lost connections.

Against the real broker where behaviour is normal; against a scripted fake broker (an asyncio server in
the test, speaking kio) where the test needs exact answers: a broker that only knows old ApiVersions, a
FindCoordinator that answers COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS a
few times, a connection that drops mid-request, a request that is never answered. Finally a group member
rides out a broker restart (SIGKILL, same port) and is stable again.
"""

from __future__ import annotations

import asyncio
import gc
import struct
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from brokers import BrokerProcess

from herd.client.admin import Admin
from herd.client.connection import Backoff, BrokerConnection, KafkaClient
from herd.client.errors import ConnectionLost, KafkaError
from herd.client.group import GroupMember
from herd.client.group_protocol import SimpleProtocol
from herd.client.membership import MemberState
from herd.client.wire import CLIENT_VERSIONS
from herd.protocol.messages import decode_request, encode_response, peek_prefix
from herd.server.apis._build import builder

OVERRIDES = {
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}
Handler = Callable[[int, Any], Any]  # (version, request) -> response, or None to drop the connection


@pytest.fixture(scope="module")
def conn_broker(tmp_path_factory) -> Iterable[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("client-connection") / "data", OVERRIDES).start()
    yield broker
    if broker.proc is not None and broker.proc.poll() is None:
        broker.stop()


# -- against the real broker ----------------------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_order(conn_broker):
    async def main() -> None:
        connection = BrokerConnection("127.0.0.1", conn_broker.port, "pipeline")
        await connection.connect()
        try:

            def metadata(i: int) -> Any:
                return lambda b: b.request(
                    topics=(b("MetadataRequestTopic", name=f"missing-{i}", topic_id=None),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )

            answers = await asyncio.gather(*(connection.send(3, metadata(i)) for i in range(100)))
            assert [body.topics[0].name for _, body in answers] == [f"missing-{i}" for i in range(100)]
        finally:
            connection.close()

    asyncio.run(main())


def test_versions_are_the_highest_both_sides_support(conn_broker):
    async def main() -> None:
        connection = BrokerConnection("127.0.0.1", conn_broker.port, "versions")
        await connection.connect()
        connection.close()
        for key, version in connection.versions.items():
            low, high = connection.broker_versions[key]
            assert version == min(high, CLIENT_VERSIONS[key][1]) and version >= low
        assert connection.versions[11] == 9 and connection.versions[14] == 5 and connection.versions[18] == 3

    asyncio.run(main())


# -- against a scripted fake broker ---------------------------------------------------------------------------


class FakeBroker:
    """An asyncio server answering each request with `handlers[api_key](version, request)`."""

    def __init__(self, handlers: dict[int, Handler]) -> None:
        self.handlers = handlers
        self.calls: list[tuple[int, int]] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def __aenter__(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                api_key, version, correlation_id = peek_prefix(frame)
                self.calls.append((api_key, version))
                response = await self._answer(api_key, version, frame)
                if response is None:
                    break
                writer.write(encode_response(correlation_id, response))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client hung up, or the test is over
        writer.close()

    async def _answer(self, api_key: int, version: int, frame: bytes) -> Any:
        if api_key == 18 and version > 2:  # this fake knows ApiVersions v0-v2 only: answer in v0 (KIP-511)
            return _api_versions(0, error=35)
        _, request = decode_request(api_key, version, frame)
        result = self.handlers[api_key](version, request)
        return await result if asyncio.iscoroutine(result) else result


def _api_versions(version: int, error: int = 0) -> Any:
    b = builder(18, version)
    ranges = {18: (0, 2), 3: (1, 12), 10: (0, 4)} if not error else {18: (0, 2)}
    keys = tuple(b("ApiVersion", api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ranges.items())
    return b.response(error_code=error, api_keys=keys, throttle_time=0)


def _metadata(port: int) -> Handler:
    def answer(version: int, request: Any) -> Any:
        b = builder(3, version)
        broker = b("MetadataResponseBroker", node_id=7, host="127.0.0.1", port=port, rack=None)
        return b.response(throttle_time=0, brokers=(broker,), cluster_id="fake", controller_id=7, topics=())

    return answer


def _find_coordinator(port: int, errors: list[int]) -> Handler:
    def answer(version: int, request: Any) -> Any:
        error = errors.pop(0) if errors else 0
        b = builder(10, version)
        fields = dict(
            node_id=-1 if error else 7,
            host="" if error else "127.0.0.1",
            port=-1 if error else port,
            error_code=error,
            error_message=None,
        )
        if version >= 4:
            return b.response(
                throttle_time=0, coordinators=(b("Coordinator", key=request.coordinator_keys[0], **fields),)
            )
        return b.response(throttle_time=0, **fields)

    return answer


def fake_handlers(port_of: Callable[[], int], coordinator_errors: list[int]) -> dict[int, Handler]:
    return {
        18: lambda v, r: _api_versions(v),
        3: lambda v, r: _metadata(port_of())(v, r),
        10: lambda v, r: _find_coordinator(port_of(), coordinator_errors)(v, r),
    }


def test_an_older_broker_gets_an_api_versions_it_knows_and_the_common_versions():
    async def main() -> None:
        async with FakeBroker({18: lambda v, r: _api_versions(v)}) as fake:
            connection = BrokerConnection("127.0.0.1", fake.port, "old")
            await connection.connect()
            connection.close()
            assert fake.calls == [(18, 3), (18, 2)]
            assert connection.versions == {18: 2, 3: 12, 10: 4}

    asyncio.run(main())


@pytest.mark.parametrize("error", [15, 16, 14])  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, LOAD_IN_PROGRESS
def test_find_coordinator_retries_coordinator_errors_with_backoff(error):
    async def main() -> None:
        errors = [error, error, error]
        fake = FakeBroker({})
        fake.handlers = fake_handlers(lambda: fake.port, errors)
        async with fake:
            client = KafkaClient(f"127.0.0.1:{fake.port}", backoff=Backoff(20, 100, jitter=0))
            loop = asyncio.get_running_loop()
            started = loop.time()
            node = await client.find_coordinator("g")
            elapsed = loop.time() - started
            await client.close()
        assert (node.node_id, node.port) == (7, fake.port) and errors == []
        assert [c for c in fake.calls if c[0] == 10] == [(10, 4)] * 4
        assert elapsed >= (20 + 40 + 80) / 1000  # exponential: 20, 40, 80 ms

    asyncio.run(main())


def test_find_coordinator_gives_up_at_its_deadline_with_the_last_error():
    async def main() -> None:
        fake = FakeBroker({})
        fake.handlers = fake_handlers(lambda: fake.port, [15] * 1000)
        async with fake:
            client = KafkaClient(f"127.0.0.1:{fake.port}", backoff=Backoff(10, 20, jitter=0))
            with pytest.raises(KafkaError) as raised:
                await client.find_coordinator("g", timeout_ms=200)
            await client.close()
        assert raised.value.code == 15

    asyncio.run(main())


def test_coordinator_dead_makes_the_next_lookup_ask_again():
    async def main() -> None:
        fake = FakeBroker({})
        fake.handlers = fake_handlers(lambda: fake.port, [])
        async with fake:
            client = KafkaClient(f"127.0.0.1:{fake.port}")
            await client.find_coordinator("g")
            await client.find_coordinator("g")
            client.coordinator_dead("g")
            await client.find_coordinator("g")
            await client.close()
        assert len([c for c in fake.calls if c[0] == 10]) == 2

    asyncio.run(main())


def test_a_dropped_connection_fails_the_request_and_the_next_call_reconnects():
    async def main() -> None:
        drops = [True]
        fake = FakeBroker({})
        handlers = fake_handlers(lambda: fake.port, [])
        metadata = handlers[3]
        handlers[3] = lambda v, r: None if drops and drops.pop() else metadata(v, r)
        fake.handlers = handlers
        async with fake:
            client = KafkaClient(f"127.0.0.1:{fake.port}")
            with pytest.raises(ConnectionLost):
                await client.metadata([])
            assert (await client.metadata([])).cluster_id == "fake"
            await client.close()

    asyncio.run(main())


def test_a_request_that_times_out_closes_the_connection_and_fails_the_others():
    """The timed-out request's own failure is retrieved too: asyncio reports no future whose exception was never
    retrieved."""
    reported: list[str] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: reported.append(context["message"]))

        async def never(version: int, request: Any) -> Any:
            await asyncio.sleep(3600)

        async with FakeBroker({18: lambda v, r: _api_versions(v), 3: never}) as fake:
            connection = BrokerConnection("127.0.0.1", fake.port, "slow")
            await connection.connect()

            def build(b: Any) -> Any:
                return b.request(topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False)

            slow = asyncio.ensure_future(connection.send(3, build, timeout_ms=5000))
            await asyncio.sleep(0.05)
            with pytest.raises(ConnectionLost, match="timed out"):
                await connection.send(3, build, timeout_ms=100)
            with pytest.raises(ConnectionLost):
                await slow
            assert connection.closed
        gc.collect()  # a failed future nobody retrieved says so when it is collected

    asyncio.run(main())
    assert not reported, reported


# -- a member across a broker restart --------------------------------------------------------------------------


def test_a_member_rides_out_a_broker_restart(conn_broker):
    """SIGKILL the broker under a stable member, restart it on the same port: the member reconnects, finds
    the coordinator again and stays in the group (still a member after a whole session timeout). The premise is a
    restart shorter than the session: herd's member, like Java's, treats a session without one heartbeat answered
    as lost and rejoins (herd.client.membership), so the group rebalances. With 2 s, a restart on a loaded 2-core
    machine (kill, start, load, reconnect) outlasted it once in a soak (f2e36eb, run 8: CompletingRebalance);
    6 s (the broker's minimum session) covers a restart with room, and the test still spans a whole session."""
    session_ms = 6000
    group = f"restart-{uuid.uuid4().hex[:8]}"

    async def described() -> tuple[str, list[str]]:
        async with Admin(conn_broker.bootstrap, request_timeout_ms=30_000) as admin:  # waits out the loading
            g = await admin.describe_group(group)
            return g.state, [m.member_id for m in g.members]

    async def main() -> None:
        member = GroupMember(
            conn_broker.bootstrap,
            group,
            SimpleProtocol("election", "v1"),
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=200,
            retry_backoff_ms=50,
            request_timeout_ms=3000,
        )
        async with member:
            await member.wait_for_assignment(20)
            await asyncio.to_thread(conn_broker.kill)
            await asyncio.to_thread(conn_broker.restart)
            await member.wait_for(lambda m: m.state is MemberState.STABLE, timeout=30)
            await described()  # the restarted broker has loaded the group (heartbeats are answered NONE until then)
            loop = asyncio.get_running_loop()
            until = loop.time() + session_ms / 1000 + 0.5
            while loop.time() < until:  # heartbeats reach the restarted broker: the member is never expired
                state, members = await described()
                assert state == "Stable" and members == [member.member_id], (state, members)
                await asyncio.sleep(0.2)
            assert member.state is MemberState.STABLE and member.error is None

    asyncio.run(main())
