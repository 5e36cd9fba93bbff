"""The node's HTTP listener (herd.http.listener): fault injection and coordinator/leader moves, JSON in and out.

    GET    /v1/faults                 -> 200 {"faults": [rule, ...]}
    POST   /v1/faults        rule     -> 201 rule (with its id); a bad rule -> 400
    DELETE /v1/faults                 -> 200 {"removed": n}
    DELETE /v1/faults/{id}            -> 200 rule, or 404
    POST   /v1/connections/drop {"client_id": ..., "host": ...}  -> 200 {"dropped": n}
    POST   /v1/moves  {"group": ...} or {"topic": ..., "partition": ...}, "to"  -> herd.server.moves

aiohttp is imported only by this module, which the server imports only when the listener is set. Every error is
a 4xx with `{"error": "<one line>"}`: 400 bad JSON or a refused rule, 403 while herd.faults.enable is false (for
every /v1/faults, /v1/connections and /v1/moves route), 404 an unknown route or rule, 405 a wrong method, 413 a
body over MAX_BODY. The rule count is bounded by the registry (herd.server.faults.MAX_RULES). `HttpListener.stop`
stops accepting and lets requests in progress finish (bounded), as part of the server's graceful shutdown.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, Callable, Protocol

from aiohttp import web

from herd.server import moves
from herd.server.broker import Broker
from herd.server.connection import Connection
from herd.server.faults import FaultRegistry, RuleError
from herd.server.moves import MoveError

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
_GUARDED = ("/v1/faults", "/v1/connections", "/v1/moves")
DISABLED = "fault injection is disabled: start the node with herd.faults.enable=true"


class Server(Protocol):
    """What the listener uses of herd.server.server.Server (which imports this module)."""

    broker: Broker
    connections: set[Connection]


BROKER = web.AppKey("broker", Broker)
SERVER = web.AppKey("server", Server)
routes = web.RouteTableDef()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": " ".join(message.split())}, status=status)


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """403 while faults are disabled; every HTTP error as one line of JSON."""
    if request.path.startswith(_GUARDED) and request.app[BROKER].faults is None:
        return _error(403, DISABLED)
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        reason = e.text if e.text and not e.text.startswith(f"{e.status}:") else e.reason
        return _error(e.status, reason or "error")


async def _json(request: web.Request) -> Any:
    try:
        return json.loads(await request.read() or b"null")
    except (ValueError, UnicodeDecodeError) as e:
        raise web.HTTPBadRequest(text=f"the body is not JSON: {e}") from None


def _faults(request: web.Request) -> FaultRegistry:
    faults: FaultRegistry = request.app[BROKER].faults
    return faults


@routes.get("/v1/faults")
async def list_faults(request: web.Request) -> web.Response:
    return web.json_response({"faults": [rule.to_json() for rule in _faults(request).rules]})


@routes.post("/v1/faults")
async def add_fault(request: web.Request) -> web.Response:
    data = await _json(request)
    try:
        rule = _faults(request).add(data)
    except RuleError as e:
        return _error(400, str(e))
    log.info("fault rule %d added: %s", rule.id, json.dumps(rule.to_json()))
    return web.json_response(rule.to_json(), status=201)


@routes.delete("/v1/faults")
async def clear_faults(request: web.Request) -> web.Response:
    removed = _faults(request).clear()
    if removed:
        log.info("%d fault rules removed", removed)
    return web.json_response({"removed": removed})


@routes.delete("/v1/faults/{id}")
async def remove_fault(request: web.Request) -> web.Response:
    faults = _faults(request)
    try:
        rule_id = int(request.match_info["id"])
    except ValueError:
        return _error(404, f"no fault rule {request.match_info['id']!r}")
    rule = faults.remove(rule_id)
    if rule is None:
        return _error(404, f"no fault rule {rule_id} (it may have expired after its count)")
    log.info("fault rule %d removed", rule_id)
    return web.json_response(rule.to_json())


@routes.post("/v1/connections/drop")
async def drop_connections(request: web.Request) -> web.Response:
    data = await _json(request)
    data = {} if data is None else data
    if not isinstance(data, dict) or set(data) - {"client_id", "host"}:
        return _error(400, 'expected {"client_id": ..., "host": ...} (both optional)')
    client_id, host = data.get("client_id"), data.get("host")
    server = request.app[SERVER]
    dropped = 0
    for conn in list(server.connections):
        if (client_id is None or conn.client_id == client_id) and (host is None or conn.host == host):
            conn.abort(None)
            dropped += 1
    log.info("dropped %d connections (client id %s, host %s)", dropped, client_id, host)
    return web.json_response({"dropped": dropped})


@routes.post("/v1/moves")
async def post_move(request: web.Request) -> web.Response:
    """A group's coordinator or a partition's leadership moved on demand (herd.server.moves)."""
    try:
        answer = await moves.move(request.app[BROKER], moves.parse_move(await _json(request)))
    except MoveError as e:
        return _error(e.status, str(e))
    return web.json_response(answer)


def make_app(server: Server) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_guard])
    app[BROKER] = server.broker
    app[SERVER] = server
    app.add_routes(routes)
    return app


class HttpListener:
    def __init__(self, server: Server, host: str, port: int) -> None:
        self._runner = web.AppRunner(make_app(server), access_log=None, handle_signals=False,
                                     shutdown_timeout=5.0)
        self.host = host
        self.port = port

    async def start(self) -> None:
        """Bind and serve; raises OSError when the address cannot be listened on."""
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            raise OSError(e.errno, f"cannot listen on {self.host}:{self.port} (herd.http.listener): "
                          f"{e.strerror}") from e
        self.port = self._runner.addresses[0][1]
        log.info("herd http listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        await self._runner.cleanup()
