"""What the group API modules share: routing a core request to the coordinator runtime, and answering.

An API module turns the kio request into a version-independent core request (herd.coordinator.requests),
then `route` hands it to the runtime with the core's handler for it (`GroupCoordinatorShard.join_group`,
...). The runtime answers with the core response at once (most requests), with a future (a parked
JoinGroup/SyncGroup, or a reply waiting for a durable write), or refuses with a `CoordinatorError`
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), which `route` turns into the core response the module's
`on_error` builds. `respond` translates a core response into the kio response of the request's version; it
runs when the answer is known, so a waiting answer is returned as a `Deferred` (one future) or a coroutine
(several), which the connection completes while keeping the order of responses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from herd.cluster.topics import Node
from herd.coordinator import CoordinatorError
from herd.runtime.shard import Handler, Request
from herd.server.broker import Broker, Deferred, RequestContext
from herd.server.peers import forwarded

Respond = Callable[[Any], Any]


def client_id(ctx: RequestContext) -> str:
    return ctx.header.client_id or ""


def client_host(ctx: RequestContext) -> str:
    """As Kafka shows it (Java's InetAddress.toString): "/127.0.0.1"."""
    return "/" + ctx.client_host


def call(
    ctx: RequestContext, group_id: str, handler: Handler[Request], request: Request, on_error: Callable[[int], Any]
) -> Any:
    """`handler`'s core response, a future of it, or `on_error(code)` when the coordinator refuses."""
    try:
        return ctx.broker.coordinator.call(group_id, handler, request)
    except CoordinatorError as e:
        return on_error(e.code)


def route(
    ctx: RequestContext,
    group_id: str,
    handler: Handler[Request],
    request: Request,
    respond: Respond,
    on_error: Callable[[int], Any],
) -> Any:
    return then(call(ctx, group_id, handler, request, on_error), respond)


def then(outcome: Any, respond: Respond) -> Any:
    """`respond(outcome)` now, or a `Deferred` doing it once the future `outcome` is resolved."""
    if isinstance(outcome, asyncio.Future):
        return Deferred(outcome, respond)
    return respond(outcome)


async def resolved(outcome: Any) -> Any:
    """`outcome` (a coordinator's answer, or the future of one: `call`) once it is known."""
    return await outcome if isinstance(outcome, asyncio.Future) else outcome


def gather(outcomes: Sequence[Any], respond: Callable[[list[Any]], Any]) -> Any:
    """`respond(list of responses)` once every outcome (response or future) is known."""
    if not any(isinstance(o, asyncio.Future) for o in outcomes):
        return respond(list(outcomes))
    return _gather_later(outcomes, respond)


async def _gather_later(outcomes: Sequence[Any], respond: Callable[[list[Any]], Any]) -> Any:
    resolved = [await o if isinstance(o, asyncio.Future) else o for o in outcomes]
    return respond(resolved)


def coordinator_node(broker: Broker, runtime: Any, key: str) -> Node | None:
    """In cluster mode, the live node other than this one that leads `key`'s partition of the coordinator
    `runtime` (the group or the transaction coordinator); else None (always on one node, which leads them all)."""
    if runtime is None or not runtime.num_partitions:
        return None
    leader, _ = broker.cluster.leader(runtime.topic, runtime.partition_for(key))
    return broker.node(leader) if leader != broker.node_id else None


async def ask_coordinator_node(ctx: RequestContext, group_id: str, request: Any) -> Any | None:
    """In cluster mode, the answer of the node that coordinates `group_id` to `request` (the client's request cut
    down to the group's resource, sent at the client's version: herd.server.peers), or None when there is no other
    node to ask: not cluster mode, this node or no live node leads the group's partition, or the request was
    itself forwarded here. Raises PeerError when that node does not answer."""
    node = None if forwarded(ctx.header.client_id) else coordinator_node(ctx.broker, ctx.broker.coordinator, group_id)
    if node is None:
        return None
    return await ctx.broker.peers.request(node.host, node.port, ctx.header.api_key, ctx.api_version, request)
