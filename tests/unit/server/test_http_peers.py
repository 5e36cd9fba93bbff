"""What a node makes of another node's answer to /v1/groups?scope=local (herd.server.http._peer_groups): an
answer that is not the expected JSON is that node's error in the merged listing, never an exception. The peer
is a real HTTP server on a loopback port that answers whatever the test says."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from aiohttp import web

from herd.server import http


async def _ask(answer: web.Response) -> tuple[list[dict[str, Any]], str | None]:
    async def handler(request: web.Request) -> web.Response:
        assert request.query.get("scope") == "local"
        assert request.headers[http.FORWARDED_HEADER] == "7"
        return answer

    peer = web.Application()
    peer.router.add_get("/v1/groups", handler)
    runner = web.AppRunner(peer)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    asking = web.Application()
    asking[http.PEERS] = {}
    asking[http.BROKER] = SimpleNamespace(node_id=7)  # the only part of the broker the question uses
    try:
        return await http._peer_groups(asking, SimpleNamespace(http_url=f"http://127.0.0.1:{port}"))
    finally:
        await http._close_peers(asking)
        await runner.cleanup()


def test_a_well_formed_answer_gives_its_groups() -> None:
    groups = [{"group": "g", "state": "Stable"}]
    assert asyncio.run(_ask(web.json_response({"groups": groups}))) == (groups, None)


def test_answers_that_are_not_a_group_listing_are_the_peers_error() -> None:
    cases = {
        "not JSON": web.Response(text="<html>oops</html>"),
        "a list": web.json_response([1, 2]),
        "groups not a list": web.json_response({"groups": "all of them"}),
        "an error status": web.json_response({"error": "busy"}, status=503),
    }
    for what, answer in cases.items():
        groups, error = asyncio.run(_ask(answer))
        assert groups == [] and error, what
    assert (
        asyncio.run(_ask(web.json_response({"error": "busy"}, status=503)))[1] == "answered 503: 'busy'"
    )  # quoted: the peer's words


def test_a_node_without_an_http_listener_is_said_so() -> None:
    asking = web.Application()
    asking[http.PEERS] = {}
    groups, error = asyncio.run(http._peer_groups(asking, SimpleNamespace(http_url=None)))
    assert groups == [] and "herd.http.listener" in (error or "")
