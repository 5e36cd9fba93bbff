"""One client connection: frames in, handlers called, responses out in request order.

Clients pipeline requests (up to max.in.flight per connection) and Kafka answers them in the order they came.
Each decoded request takes a slot at the tail of `_slots`; a handler either answers at once (most APIs) or
fills its slot later: it returns a `Deferred` (one future and how to answer from its result: a parked
JoinGroup/SyncGroup, a commit waiting to be durable), completed by a done callback, or a coroutine (Fetch long
polls, anything awaiting more than one thing), run as a task. Whenever the head
slot is filled, responses are written from the head until an unfilled slot. A Produce with acks=0 gets a slot
with no response, so later answers are not held back by it.

Anything the peer gets wrong at the framing or header level (garbage, a frame over socket.request.max.bytes,
an unknown API key, a version herd does not serve, a body kio cannot decode) closes this connection only, and
is logged; Kafka does the same. The single exception is ApiVersions at a version that is too new, which Kafka
answers with UNSUPPORTED_VERSION in a v0 response so the client can retry lower.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from types import CoroutineType
from typing import TYPE_CHECKING, Any

from herd.protocol.framing import FrameDecoder, FramingError
from herd.protocol.messages import MalformedRequest, decode_request, encode_response_parts, peek_prefix
from herd.server.broker import Deferred, RequestContext

if TYPE_CHECKING:
    from herd.server.server import Server

log = logging.getLogger(__name__)

_NO_RESPONSE = object()  # a slot that sends nothing (acks=0)
_PENDING = object()
MAX_IN_FLIGHT = 64  # reading pauses beyond this many unanswered requests
_JOIN_MAX = 64 * 1024  # answers up to this size in all are joined into one write


class _Slot:
    __slots__ = ("correlation_id", "response")

    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id
        self.response: Any = _PENDING


class Connection(asyncio.Protocol):
    def __init__(self, server: "Server") -> None:
        self._server = server
        self._broker = server.broker
        self._decoder = FrameDecoder(server.broker.config.get("socket.request.max.bytes"))
        self._slots: deque[_Slot] = deque()
        self._out: list[bytes] = []  # encoded responses not yet handed to the transport
        self._tasks: set[asyncio.Task[None]] = set()
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self._host = "?"
        self._closing = False
        self._reading_paused = False
        self._writing_paused = False
        self.drained = asyncio.Event()
        self.drained.set()

    # -- asyncio.Protocol --------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._host = peer[0] if peer else "?"
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._server.connections.discard(self)
        for task in list(self._tasks):
            task.cancel()
        self.drained.set()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        try:
            frames = self._decoder.feed(data)
        except FramingError as e:
            self.abort(f"framing error: {e}")
            return
        for frame in frames:
            if self._closing:
                return
            self._on_frame(frame)
        self._send_out()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    # -- requests ----------------------------------------------------------------------------------------------

    def _on_frame(self, frame: bytes) -> None:
        try:
            api_key, api_version, correlation_id = peek_prefix(frame)
        except MalformedRequest as e:
            self.abort(str(e))
            return
        spec = self._server.apis.get(api_key)
        if spec is None:
            self.abort(f"unknown API key {api_key}")
            return
        if not spec.supports(api_version):
            if api_key == 18:  # ApiVersions: answer so the client can downgrade
                self._push_ready(correlation_id, self._server.api_versions_unsupported())
            else:
                self.abort(f"{spec.name} v{api_version} is not supported (v{spec.min_version}-v{spec.max_version})")
            return
        try:
            header, request = decode_request(api_key, api_version, frame)
        except MalformedRequest as e:
            log.debug("undecodable frame from %s: %s", self._peer, frame[:512].hex())
            self.abort(str(e))
            return
        ctx = RequestContext(self._broker, header, self._host)
        try:
            result = spec.handler(ctx, request)
        except Exception:
            log.exception("%s v%d from %s failed; closing the connection", spec.name, api_version, self._peer)
            self.abort(None)
            return
        if type(result) is Deferred:
            slot = self._park(correlation_id)
            result.future.add_done_callback(partial(self._deferred_done, slot, result.respond, spec.name))
        elif type(result) is CoroutineType:  # handlers are `async def` when they answer later; asyncio.iscoroutine
            # goes through an ABC check that cost half a microsecond per request
            slot = self._park(correlation_id)
            task = asyncio.get_running_loop().create_task(self._complete(slot, result, spec.name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._push_ready(correlation_id, _NO_RESPONSE if result is None else result)

    async def _complete(self, slot: _Slot, coro: Any, name: str) -> None:
        try:
            response = await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s from %s failed; closing the connection", name, self._peer)
            self.abort(None)
            return
        self._fill(slot, response)

    def _deferred_done(self, slot: _Slot, respond: Callable[[Any], Any], name: str, future: asyncio.Future[Any]) -> None:
        if self._closing or future.cancelled():
            return
        try:
            response = respond(future.result())
        except Exception:
            log.exception("%s from %s failed; closing the connection", name, self._peer)
            self.abort(None)
            return
        self._fill(slot, response)

    def _fill(self, slot: _Slot, response: Any) -> None:
        """A parked request's answer is known: send it and whatever was waiting behind it."""
        slot.response = _NO_RESPONSE if response is None else response
        self._flush()
        self._send_out()

    def _park(self, correlation_id: int) -> _Slot:
        """A slot for an answer that comes later; reading pauses once too many are unanswered."""
        slot = _Slot(correlation_id)
        self._slots.append(slot)
        self.drained.clear()
        self._update_reading()
        return slot

    def _push_ready(self, correlation_id: int, response: Any) -> None:
        if not self._slots:  # fast path: nothing ahead of it
            if response is not _NO_RESPONSE:
                self._write(correlation_id, response)
            return
        slot = _Slot(correlation_id)
        slot.response = response
        self._slots.append(slot)
        self._flush()

    def _flush(self) -> None:
        slots = self._slots
        while slots and slots[0].response is not _PENDING:
            slot = slots.popleft()
            if slot.response is not _NO_RESPONSE:
                self._write(slot.correlation_id, slot.response)
        if not slots:
            self.drained.set()
        self._update_reading()

    def _write(self, correlation_id: int, response: Any) -> None:
        if not self._closing:
            self._out.extend(encode_response_parts(correlation_id, response))

    def _send_out(self) -> None:
        """One write for every answer produced while handling one read from the socket (or one completion):
        a pipelining client gets its answers in one send instead of one per request."""
        out = self._out
        if not out or self._closing or self._transport is None:
            out.clear()
            return
        if len(out) == 1:
            self._transport.write(out[0])
        elif sum(map(len, out)) <= _JOIN_MAX:
            self._transport.write(b"".join(out))
        else:  # record data: hand the buffers over as they are (one writev), no joined copy
            self._transport.writelines(out)
        self._out = []

    def _update_reading(self) -> None:
        if self._transport is None or self._closing:
            return
        should_pause = self._writing_paused or len(self._slots) >= MAX_IN_FLIGHT
        if should_pause and not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            self._transport.resume_reading()
            self._reading_paused = False

    # -- closing -----------------------------------------------------------------------------------------------

    def abort(self, reason: str | None) -> None:
        """Close this connection at once (the peer broke the protocol)."""
        if reason:
            log.warning("closing connection from %s: %s", self._peer, reason)
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        """Close after what is already written has been sent."""
        self._closing = True
        if self._transport is not None:
            self._transport.close()
