"""herd.server.peers, one node asking another: an answer from a real broker over a kept connection, and
PeerError (never a hang, never a wrong answer) when the peer is gone, garbles its answer or answers late."""

from __future__ import annotations

import asyncio
import struct

import pytest
from inprocess import InProcessBroker
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from ports import refused_port

from herd.protocol.messages import decode_request, encode_response, response_class
from herd.protocol.values import make
from herd.server.peers import FORWARDED_CLIENT_ID, PeerError, Peers, forwarded

API_VERSIONS = 18
REQUEST = ApiVersionsRequest(client_software_name="herd", client_software_version="test")


def test_a_peer_answers_over_one_kept_connection_and_says_who_forwarded(tmp_path):
    broker = InProcessBroker({"log.dirs": str(tmp_path)})
    try:

        async def main() -> None:
            peers = Peers(7)
            first = await peers.request("127.0.0.1", broker.port, API_VERSIONS, 3, REQUEST)
            (connection,) = peers._connections.values()
            second = await peers.request("127.0.0.1", broker.port, API_VERSIONS, 3, REQUEST)
            assert first.error_code == 0 and any(k.api_key == API_VERSIONS for k in first.api_keys)
            assert second == first and list(peers._connections.values()) == [connection]  # the same one, kept
            peers.close()

        asyncio.run(main())
    finally:
        broker.stop()
    assert forwarded(f"{FORWARDED_CLIENT_ID}7") and not forwarded("rdkafka") and not forwarded(None)


def test_a_forwarded_request_names_the_node_that_sent_it() -> None:
    async def main() -> None:
        seen: list[str | None] = []

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            frame = await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            header, _ = decode_request(API_VERSIONS, 3, frame)
            seen.append(header.client_id)
            writer.write(
                encode_response(
                    header.correlation_id,
                    make(response_class(API_VERSIONS, 3), {"error_code": 0, "api_keys": (), "throttle_time": 0}),
                )
            )
            await writer.drain()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        peers = Peers(7)
        await peers.request("127.0.0.1", port, API_VERSIONS, 3, REQUEST)
        assert seen == [f"{FORWARDED_CLIENT_ID}7"] and forwarded(seen[0])
        peers.close()
        server.close()

    asyncio.run(main())


@pytest.mark.parametrize("peer", ["gone", "garbled", "another answer", "silent"])
def test_a_peer_that_cannot_answer_raises_peer_error_and_its_connection_is_dropped(peer):
    async def main() -> None:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            if peer == "garbled":
                writer.write(struct.pack(">i", 2**31 - 1))  # a frame larger than any answer may be
            elif peer == "another answer":
                writer.write(struct.pack(">ii", 4, 999))  # the answer to a request never sent (correlation 999)
            await asyncio.sleep(5 if peer == "silent" else 0)
            writer.close()

        with refused_port() as refused:  # held, for "gone": a port nothing listens on
            server = await asyncio.start_server(answer, "127.0.0.1", 0) if peer != "gone" else None
            port = server.sockets[0].getsockname()[1] if server is not None else refused
            peers = Peers(1, timeout_s=0.5)
            with pytest.raises(PeerError):
                await peers.request("127.0.0.1", port, API_VERSIONS, 3, REQUEST)
            assert peers._connections == {}
            if server is not None:
                server.close()

    asyncio.run(main())
