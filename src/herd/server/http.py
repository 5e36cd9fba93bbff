"""The node's HTTP listener (herd.http.listener): the groups and topics API and the web console, fault injection
and coordinator/leader moves, JSON in and out.

    GET    /v1/groups                 -> 200 {"groups": [summary, ...], "nodes": [id, ...], "unreachable": [...]}
    GET    /v1/groups/{group}         -> 200 detail (members, assignments, lag, history); 404 unknown group
    GET    /v1/topics                 -> 200 {"topics": [topic, ...]}
    GET    /, /groups/{group}, /topics   the web console (console/index.html), /console/* its scripts and styles

    GET    /v1/faults                 -> 200 {"faults": [rule, ...]}
    POST   /v1/faults        rule     -> 201 rule (with its id); a bad rule -> 400
    DELETE /v1/faults                 -> 200 {"removed": n}
    DELETE /v1/faults/{id}            -> 200 rule, or 404
    POST   /v1/connections/drop {"client_id": ..., "host": ...}  -> 200 {"dropped": n}
    POST   /v1/moves  {"group": ...} or {"topic": ..., "partition": ...}, "to"  -> herd.server.moves

The documents are herd.server.views'. A group is described by the node that coordinates it: in cluster mode
/v1/groups merges this node's groups with those of every other live node, asked over HTTP (`?scope=local`, each
node's URL from herd_nodes.http_url, PEER_TIMEOUT_S each, concurrently); a node that does not answer is listed in
"unreachable" with why, and its groups are missing. /v1/groups/{group} on a node that does not coordinate the
group is proxied to the node that does. A request a node sends to another carries FORWARDED_HEADER and is always
answered locally: a group not coordinated there (it moved meanwhile) is a 503, never forwarded again, so two
nodes that disagree for a moment cannot pass a request back and forth. 503 also answers a group whose
coordinator is unknown, loading or unreachable.

The groups, topics and console routes only read, and answer whatever herd.faults.enable says: anyone who reaches
the listener sees the groups' members, hosts and offsets (bind it to loopback or a trusted network).

aiohttp is imported only by this module, which the server imports only when the listener is set. Every error is
`{"error": "<one line>"}`: 400 bad JSON, a refused rule or a bad `scope`, 403 while herd.faults.enable is false
(for every /v1/faults, /v1/connections and /v1/moves route), 404 an unknown route, rule or group, 405 a wrong
method, 413 a body over MAX_BODY, 503 a group that cannot be described now (above) or topics the database cannot
give. The rule count is bounded by the registry (herd.server.faults.MAX_RULES). `HttpListener.stop` stops
accepting and lets requests in progress finish (bounded), as part of the server's graceful shutdown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
from aiohttp import web

from herd.cluster.topics import TopicError
from herd.server import metrics, moves, views
from herd.server.broker import Broker
from herd.server.coalesced import Coalesced
from herd.server.connection import Connection
from herd.server.faults import FaultRegistry, RuleError
from herd.server.moves import MoveError

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024
_GUARDED = ("/v1/faults", "/v1/connections", "/v1/moves")
DISABLED = "fault injection is disabled: start the node with herd.faults.enable=true"
FORWARDED_HEADER = "X-Herd-Forwarded-By"  # a request from another node (its id): answered locally, or 503
PEER_TIMEOUT_S = 2.0  # how long a node waits for another's answer
CONSOLE_DIR = Path(__file__).parent / "console"


class Server(Protocol):
    """What the listener uses of herd.server.server.Server (which imports this module)."""

    broker: Broker
    connections: set[Connection]


BROKER = web.AppKey("broker", Broker)
SERVER = web.AppKey("server", Server)
PEERS = web.AppKey("peers", dict)  # "session": the aiohttp ClientSession asking other nodes, made on first use
# this node's groups and the topics: concurrent requests share their computations (herd.server.coalesced)
RECENT_GROUPS = web.AppKey("recent_groups", Coalesced)
RECENT_TOPICS = web.AppKey("recent_topics", Coalesced)
routes = web.RouteTableDef()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": " ".join(message.split())}, status=status)


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """403 while faults are disabled, and for a change asked by another site's page (a browser sends its Origin:
    a page elsewhere must not inject faults or move leaders through a console the operator has open); every HTTP
    error as one line of JSON."""
    if request.path.startswith(_GUARDED) and request.app[BROKER].faults is None:
        return _error(403, DISABLED)
    if request.method not in ("GET", "HEAD", "OPTIONS") and _cross_site(request):
        return _error(403, "requests from another site's page are refused")
    try:
        return await handler(request)
    except web.HTTPException as e:
        if e.status < 400:
            raise
        reason = e.text if e.text and not e.text.startswith(f"{e.status}:") else e.reason
        return _error(e.status, reason or "error")


def _cross_site(request: web.Request) -> bool:
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        return True
    origin = request.headers.get("Origin")
    return origin is not None and origin.partition("://")[2].rstrip("/") != request.host


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


# -- groups and topics ------------------------------------------------------------------------------------------


def _forwarded(request: web.Request) -> bool:
    return FORWARDED_HEADER in request.headers


def _local_scope(request: web.Request) -> bool:
    """Whether to answer from this node only (`?scope=local`, or a request another node sent)."""
    scope = request.query.get("scope", "cluster")
    if scope not in ("local", "cluster"):
        raise web.HTTPBadRequest(text=f"scope is local or cluster, not {scope!r}")
    return scope == "local" or _forwarded(request)


async def _ask_peer(app: web.Application, url: str, path: str) -> tuple[int, Any]:
    """(status, JSON body) of GET `path` on the node at `url`; raises aiohttp.ClientError, TimeoutError or
    ValueError (an answer that is not JSON)."""
    peers = app[PEERS]
    if "session" not in peers:
        peers["session"] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PEER_TIMEOUT_S))
    headers = {FORWARDED_HEADER: str(app[BROKER].node_id)}
    async with peers["session"].get(url.rstrip("/") + path, headers=headers) as response:
        return response.status, await response.json(content_type=None)


async def _close_peers(app: web.Application) -> None:
    session = app[PEERS].pop("session", None)
    if session is not None:
        await session.close()


def _peer_failure(error: BaseException) -> str:
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):
        return f"no answer within {PEER_TIMEOUT_S} s"
    return " ".join(str(error).split()) or type(error).__name__


async def _peer_groups(app: web.Application, node: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The groups another node coordinates, or why it could not say."""
    url = getattr(node, "http_url", None)
    if not url:
        return [], "the node has no HTTP listener (herd.http.listener)"
    try:
        status, body = await _ask_peer(app, url, "/v1/groups?scope=local")
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        return [], _peer_failure(e)
    if status != 200 or not isinstance(body, dict) or not isinstance(body.get("groups"), list):
        return [], f"answered {status}: {body.get('error') if isinstance(body, dict) else body!r}"
    return body["groups"], None


@routes.get("/v1/groups")
async def list_groups(request: web.Request) -> web.Response:
    """Every group: this node's, and in cluster mode every other live node's (see the module docstring)."""
    broker = request.app[BROKER]
    groups = await request.app[RECENT_GROUPS].get(lambda: views.local_groups(broker))
    others = [node for node in broker.nodes() if node.node_id != broker.node_id]  # none on one node
    if _local_scope(request) or not others:
        return web.json_response({"groups": groups, "nodes": [broker.node_id], "unreachable": []})
    answers = await asyncio.gather(*(_peer_groups(request.app, node) for node in others))
    by_id = {g["group"]: g for g in groups}
    unreachable = []
    for node, (found, error) in zip(others, answers):
        if error is not None:
            unreachable.append({"node_id": node.node_id, "url": getattr(node, "http_url", None), "error": error})
        for group in found:
            if isinstance(group, dict) and isinstance(group.get("group"), str):
                by_id.setdefault(group["group"], group)  # a group that just moved may be listed twice: the first
    return web.json_response(
        {
            "groups": [by_id[g] for g in sorted(by_id)],
            "nodes": sorted([broker.node_id] + [n.node_id for n in others]),
            "unreachable": unreachable,
        }
    )


@routes.get("/v1/groups/{group:.+}")
async def get_group(request: web.Request) -> web.Response:
    """One group, from its coordinator: this node, or the node it is proxied to."""
    broker = request.app[BROKER]
    group_id = request.match_info["group"]
    try:
        detail = await views.group_detail(broker, group_id)
    except views.NotHere:
        # mode test kept (tests/unit/server/test_one_seam.py): only a cluster has another node to ask, and a
        # single node's answer (this 503 and its text) stays as it is
        if _local_scope(request) or not broker.cluster.shared:
            return _error(
                503,
                f"node {broker.node_id} does not coordinate group {group_id!r} now (or its "
                f"partition is loading): ask again",
            )
        return await _proxy_group(request, group_id)
    if detail is None:
        return _error(404, f"no group {group_id!r}")
    return web.json_response(detail)


async def _proxy_group(request: web.Request, group_id: str) -> web.Response:
    broker = request.app[BROKER]
    node_id = views.coordinator_node(broker, group_id)
    if node_id == broker.node_id:
        return _error(503, f"group {group_id!r} is loading on this node (its coordinator): ask again")
    node = broker.node(node_id) if node_id is not None else None
    url = getattr(node, "http_url", None)
    if node is None or not url:
        why = "has no HTTP listener" if node is not None else "is not known"
        return _error(503, f"the coordinator of group {group_id!r} (node {node_id}) {why}")
    try:
        status, body = await _ask_peer(request.app, url, f"/v1/groups/{quote(group_id, safe='')}")
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        return _error(
            503, f"the coordinator of group {group_id!r}, node {node_id} at {url}, did not answer: {_peer_failure(e)}"
        )
    return web.json_response(body, status=status)


@routes.get("/v1/topics")
async def list_topics(request: web.Request) -> web.Response:
    try:
        found = await request.app[RECENT_TOPICS].get(lambda: views.topics(request.app[BROKER]))
    except TopicError as e:
        return _error(503, str(e))
    return web.json_response({"topics": found})


# -- the console -------------------------------------------------------------------------------------------------


async def _console_page(request: web.Request) -> web.FileResponse:
    """The console is one page; its script renders what the path names (/, /groups/{group}, /topics)."""
    return web.FileResponse(CONSOLE_DIR / "index.html", headers={"Cache-Control": "no-cache"})


def make_app(server: Server) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_guard])
    app[BROKER] = server.broker
    app[SERVER] = server
    app[RECENT_GROUPS] = Coalesced()
    app[RECENT_TOPICS] = Coalesced()
    app[PEERS] = {}
    app.on_cleanup.append(_close_peers)
    app.add_routes(routes)
    for path in ("/", "/topics", "/groups/{group:.+}"):
        app.router.add_get(path, _console_page)
    app.router.add_static("/console/", CONSOLE_DIR)
    metrics.add_route(app, server)  # GET /metrics (herd.server.metrics)
    return app


class HttpListener:
    """`bind` takes the address (a cluster node registers its URL before it serves), `start` serves. A host that
    names several addresses (localhost, or none: every address of both families) is listened on at each, on the
    same port, as asyncio's create_server does."""

    def __init__(self, server: Server, host: str, port: int) -> None:
        self._runner = web.AppRunner(make_app(server), access_log=None, handle_signals=False, shutdown_timeout=5.0)
        self.host = host
        self.port = port
        self._socks: list[socket.socket] = []
        self._started = False

    def bind(self) -> None:
        """Take the address without accepting yet; raises OSError when it cannot be listened on."""
        try:
            found = socket.getaddrinfo(self.host or None, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            port = self.port
            for family, kind, proto, _, address in dict.fromkeys(found):
                sock = socket.socket(family, kind, proto)
                self._socks.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], port, *address[2:]))
                sock.setblocking(False)
                port = sock.getsockname()[1]  # port 0: the others take the port the first was given
        except OSError as e:
            self._close_sockets()
            raise OSError(
                e.errno, f"cannot listen on {self.host}:{self.port} (herd.http.listener): {e.strerror}"
            ) from e
        self.port = port

    def _close_sockets(self) -> None:
        for sock in self._socks:
            sock.close()
        self._socks.clear()

    def url(self, advertised_host: str) -> str:
        """The URL other nodes reach this listener at: its host, or `advertised_host` (the Kafka listener's) when
        it listens on every address."""
        host = self.host if self.host not in ("", "0.0.0.0", "::") else advertised_host
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    async def start(self) -> None:
        """Serve (binding first if `bind` was not called); raises OSError when the address cannot be listened on."""
        if not self._socks:
            self.bind()
        await self._runner.setup()
        self._started = True
        for sock in self._socks:
            await web.SockSite(self._runner, sock).start()
        log.info("herd http listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._started:
            await self._runner.cleanup()
        self._close_sockets()
