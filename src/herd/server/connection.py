"""One client connection: frames in, handlers called, responses out in request order, with back-pressure.

Clients pipeline requests (up to max.in.flight per connection) and Kafka answers them in the order they came.
Each decoded request takes a slot at the tail of `_slots`; a handler either answers at once (most APIs) or
fills its slot later: it returns a `Deferred` (one future and how to answer from its result: a parked
JoinGroup/SyncGroup, a commit waiting to be durable), completed by a done callback, or a coroutine (Fetch long
polls, anything awaiting more than one thing), run as a task. An answer is encoded as soon as it is known; whenever
the head slot is filled, answers are written from the head until an unfilled slot. A Produce with acks=0 gets a
slot with no response, so later answers are not held back by it.

Back-pressure (Kafka mutes a connection while its answer is outstanding and bounds what the broker queues:
apache/kafka core/src/main/scala/kafka/network/SocketServer.scala, clients/src/main/java/org/apache/kafka/common/
network/Selector.java, clients/src/main/java/org/apache/kafka/common/memory/SimpleMemoryPool.java). Frames are
handled one at a time, and before each one the connection checks whether it must pause: its transport holds more
unsent bytes than its high-water mark (the peer is not reading its answers), it has MAX_IN_FLIGHT requests
unanswered, the answers waiting behind an unanswered one exceed MAX_HELD_BYTES, or a broker-wide budget
(`Budgets`: queued.max.requests, queued.max.request.bytes) is spent. Pausing stops reading the socket; the bytes
already read stay undecoded in the FrameDecoder (at most one socket read, plus the frame being received, whose
declared size was reserved from queued.max.request.bytes up front, as Kafka's memory pool does), and handling
resumes where it stopped once the condition clears. A connection with nothing outstanding may always take one
request whatever the broker-wide request count says (Kafka's one request in flight per connection), so a
rebalance with more members than queued.max.requests cannot stall on its own JoinGroups.

`Server` sweeps the connections for connections.max.idle.ms: a connection that has received no bytes, sent none
and is owed no answer for that long is closed (a frame half sent and then stalled counts as idle), as Kafka's
Selector expires channels without socket activity; the sweep also logs a connection paused for long, once.

Fault injection (herd.server.faults, only with herd.faults.enable=true; otherwise it costs one attribute test per
request): a request matching a rule is answered with an injected error, or closes the connection (drop before),
or takes a slot like a parked request and is handled later by a task (delay; stall, which also stops reading and
handling this connection meanwhile; drop after, which handles it and closes the connection instead of answering).

Metrics (herd.server.metrics): each request is counted by API with its latency in the broker's plain lists; one
answered at once is counted when the pass over the frames of its socket read ends (one clock reading per pass),
one that answers later when its slot is filled. Accepted and closed connections are counted too.

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
from time import perf_counter_ns
from types import CoroutineType
from typing import Any, Protocol

from herd.protocol.framing import FrameDecoder, FramingError
from herd.protocol.messages import (
    ApiSpec,
    MalformedRequest,
    RequestHeader,
    decode_request,
    encode_response_parts,
    peek_prefix,
)
from herd.security import tls
from herd.security.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, Authenticator, State
from herd.server.apis.api_versions import unsupported_version_response
from herd.server.broker import Broker, Deferred, RequestContext, Session
from herd.server.sasl import new_authenticator

log = logging.getLogger(__name__)

_NO_RESPONSE: list[Any] = []  # the parts of a slot that sends nothing (acks=0)
MAX_IN_FLIGHT = 64  # handling pauses at this many unanswered requests on one connection
MAX_HELD_BYTES = 4 * 1024 * 1024  # ... or when this many bytes of answers wait behind an unanswered request
_JOIN_MAX = 64 * 1024  # answers up to this size in all are joined into one write; beyond it they go out at once
LONG_PAUSE_S = 30.0  # a connection paused this long is logged (once per pause)
# Kafka's connection.failed.authentication.delay.ms default: the answer to a failed SASL authentication is sent and
# the connection closed this long after the failure, which slows down password guessing
FAILED_AUTHENTICATION_DELAY_S = 0.1


class Budgets:
    """The broker-wide limits every connection draws on (one per Server).

    `requests` counts the requests read and not yet answered on the wire (every connection's slots; one answered
    at once never takes a slot); `request_bytes` is Kafka's memory pool: bytes reserved for frames being
    received. Each may overshoot its limit by one request or frame (Kafka's pool is not strict: a frame is
    admitted while any memory is left). Connections that paused on them wait in `waiting` and are resumed together
    when both are below their limits, as Kafka's Selector unmutes every channel when the pool has memory again.
    """

    __slots__ = (
        "max_requests",
        "max_request_bytes",
        "requests",
        "request_bytes",
        "waiting",
        "_wake_scheduled",
        "_logged_at",
    )

    def __init__(self, max_requests: int, max_request_bytes: int) -> None:
        self.max_requests = max_requests
        self.max_request_bytes = max_request_bytes if max_request_bytes > 0 else 2**63
        self.requests = 0
        self.request_bytes = 0
        self.waiting: dict[Connection, None] = {}  # insertion-ordered: resumed first come, first served
        self._wake_scheduled = False
        self._logged_at = -1e18

    def wait(self, conn: Connection, reason: str) -> None:
        if not self.waiting:
            now = asyncio.get_running_loop().time()
            if now - self._logged_at >= 60:  # at most one line a minute, however often the limit is touched
                self._logged_at = now
                log.warning(
                    "%s reached: pausing reads from connections until queued requests are answered "
                    "(%d requests, %d request bytes queued)",
                    reason,
                    self.requests,
                    self.request_bytes,
                )
        self.waiting[conn] = None

    def released(self) -> None:
        """A request was answered or a frame's memory returned: resume waiting connections if there is room."""
        if (
            self.waiting
            and not self._wake_scheduled
            and self.request_bytes < self.max_request_bytes
            and self.requests < self.max_requests
        ):
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake)

    def _wake(self) -> None:
        self._wake_scheduled = False
        waiting, self.waiting = self.waiting, {}
        for conn in waiting:
            conn.resume()


class ConnectionQuotas:
    """How many connections the broker takes, in all and from one address (Kafka's ConnectionQuotas,
    apache/kafka core/src/main/scala/kafka/network/SocketServer.scala: max.connections, max.connections.per.ip).

    A connection over either limit is closed as soon as it is accepted, and that is logged at most once a minute.
    (Kafka closes one over the per-address limit the same way; over max.connections it stops accepting until a
    connection closes, leaving the new ones in the listen backlog.) Bounding the connections bounds their file
    descriptors and what each may hold (MAX_HELD_BYTES of answers, one socket read of requests)."""

    __slots__ = ("max_connections", "max_per_ip", "total", "by_host", "refused", "_logged_at")

    def __init__(self, max_connections: int, max_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.total = 0
        self.by_host: dict[str, int] = {}
        self.refused = 0
        self._logged_at = -1e18

    def admit(self, host: str, now: float) -> bool:
        """Count a new connection from `host`; False (and not counted) if it is over a limit."""
        count = self.by_host.get(host, 0)
        if self.total >= self.max_connections:
            self._refuse(now, f"the broker has max.connections={self.max_connections} connections")
            return False
        if count >= self.max_per_ip:
            self._refuse(now, f"{host} has max.connections.per.ip={self.max_per_ip} connections")
            return False
        self.total += 1
        self.by_host[host] = count + 1
        return True

    def release(self, host: str) -> None:
        self.total -= 1
        left = self.by_host[host] - 1
        if left:
            self.by_host[host] = left
        else:
            del self.by_host[host]

    def _refuse(self, now: float, why: str) -> None:
        self.refused += 1
        if now - self._logged_at >= 60:
            self._logged_at = now
            log.warning("refusing new connections: %s (%d refused so far)", why, self.refused)


class _Slot:
    __slots__ = ("correlation_id", "parts", "size", "api_key", "started")

    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id
        self.parts: list[Any] | None = None  # the encoded answer; None while it is not known
        self.size = 0
        self.api_key = -1  # a request's parked answer: its API key and when handling began, for its latency
        self.started = 0


class ConnectionOwner(Protocol):
    """What a `Connection` uses of the server that accepted it (herd.server.server.Server): the broker, the
    broker-wide budgets and quotas, and the set of open connections, which a connection joins and leaves."""

    broker: Broker
    budgets: Budgets
    quotas: ConnectionQuotas
    connections: set[Connection]


class Connection(asyncio.Protocol):
    def __init__(self, server: ConnectionOwner, listener: str = "PLAINTEXT", protocol: str = "PLAINTEXT") -> None:
        self._server = server
        self.session = Session(listener, protocol)  # its host is set when the connection is made
        # On a SASL listener its SASL exchange (herd.security.sasl), which every request passes: the frames go to
        # `_on_sasl_frame`, which applies the gate before `_on_frame`, so other listeners pay nothing for it.
        self._sasl: Authenticator | None = None
        if protocol.startswith("SASL_"):
            self._sasl = self.session.sasl = new_authenticator(server.broker, listener)
            self._on_frame = self._on_sasl_frame  # type: ignore[method-assign]
        self._broker = server.broker
        self._budgets = server.budgets
        # request counts by API and latency bucket, and latency sums (herd.server.metrics: plain lists, bumped here)
        self._latency = server.broker.metrics.latency
        self._latency_ns = server.broker.metrics.latency_ns
        self._decoder = FrameDecoder(server.broker.config.get("socket.request.max.bytes"))
        self._slots: deque[_Slot] = deque()
        self._held = 0  # bytes of encoded answers waiting in slots behind an unanswered one
        self._out: list[bytes] = []  # encoded responses not yet handed to the transport
        self._out_bytes = 0
        self._reserved = 0  # request bytes reserved for the frame being received
        self._tasks: set[asyncio.Task[None]] = set()
        self._transport: asyncio.Transport | None = None
        self._peer = "?"
        self._host = "?"
        self._closing = False
        self._counted = False  # admitted by the server's ConnectionQuotas
        self._processing = False
        self._writing_paused = False
        self._paused: str | None = None  # why handling (and reading) stopped, while it is stopped
        self._paused_at = 0.0
        self._pause_logged = False
        self._reads = 0  # data_received calls, for the idle sweep
        self._seen_reads = 0
        self._seen_unsent = 0
        self._active_at = 0.0
        self._stalled = False  # a fault rule stalls this connection (herd.server.faults)
        self.client_id: str | None = None  # of its latest request, kept only while fault injection is enabled
        self.drained = asyncio.Event()
        self.drained.set()

    @property
    def host(self) -> str:
        """The peer's address."""
        return self._host

    # -- asyncio.Protocol --------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._host = self.session.host = peer[0] if peer else "?"
        self._active_at = asyncio.get_running_loop().time()
        if self.session.protocol == "SSL":  # the client certificate names the principal (herd.security.tls)
            try:
                self.session.principal = tls.principal(
                    transport.get_extra_info("ssl_object"), self._broker.principal_mappers[self.session.listener]
                )
            except (tls.NoMatchingRule, tls.CertificateError) as e:  # Kafka fails the authentication
                log.warning("closing the connection from %s on listener %s: %s", self._peer, self.session.listener, e)
                self._closing = True
                transport.abort()
                return
        if not self._server.quotas.admit(self._host, self._active_at):
            self._closing = True
            transport.abort()
            return
        self._counted = True
        self._broker.metrics.accepted += 1
        self._server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._counted:
            self._counted = False
            self._server.quotas.release(self._host)
            self._broker.metrics.closed += 1
        self._server.connections.discard(self)
        self._broker.connection_closed(self.session)
        for task in list(self._tasks):
            task.cancel()
        budgets = self._budgets
        budgets.requests -= len(self._slots)
        budgets.request_bytes -= self._reserved
        self._slots.clear()
        self._reserved = self._held = 0
        budgets.waiting.pop(self, None)
        budgets.released()
        self.drained.set()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self._reads += 1
        self._decoder.push(data)
        self._process()
        self._send_out()

    def pause_writing(self) -> None:
        self._writing_paused = True
        if not self._processing:
            self._pause("its answers are not being read")

    def resume_writing(self) -> None:
        self._writing_paused = False
        self.resume()

    # -- handling frames, one at a time --------------------------------------------------------------------------

    def _process(self) -> None:
        """Handle buffered frames until none is complete or the connection must pause."""
        decoder, budgets = self._decoder, self._budgets
        self._processing = True
        started = perf_counter_ns()  # the requests handled in this pass count their latency from here
        # the requests answered at once, counted when the pass ends: `count` of `api_key` in a row, then `others`
        api_key, count, others = -1, 0, None
        try:
            while not self._closing:
                # one test on the fast path; the reasons are looked at only when one of them may apply
                if self._writing_paused or self._slots or budgets.request_bytes >= budgets.max_request_bytes:
                    reason = self._pause_reason()
                    if reason is not None:
                        self._pause(reason)
                        return
                try:
                    frame = decoder.next_frame()
                except FramingError as e:
                    self.abort(f"framing error: {e}")
                    return
                if frame is None:
                    break
                answered = self._on_frame(frame, started)
                if answered is not None:
                    if answered == api_key:
                        count += 1
                    else:
                        if count:
                            others = [(api_key, count)] if others is None else [*others, (api_key, count)]
                        api_key, count = answered, 1
                if self._reserved:
                    budgets.request_bytes -= self._reserved
                    self._reserved = 0
                    budgets.released()
                if self._out_bytes >= _JOIN_MAX:
                    self._send_out()  # may call pause_writing, which the next turn sees
        finally:
            self._processing = False
            if count:
                self._count_answered(started, api_key, count, others)
        if self._closing:
            return
        if decoder.partial_size > 0 and not self._reserved:  # a frame is arriving: reserve all of it (Kafka's pool)
            self._reserved = decoder.partial_size
            budgets.request_bytes += self._reserved
        if self._writing_paused or self._slots:  # stop reading now rather than after one more read
            reason = self._pause_reason()
            if reason is not None:
                self._pause(reason)
                return
        if self._paused is not None:
            self._unpause()

    def _pause_reason(self) -> str | None:
        if self._writing_paused:
            return "its answers are not being read"
        if self._stalled:
            return "stalled by a fault rule"
        budgets = self._budgets
        if not self._reserved and budgets.request_bytes >= budgets.max_request_bytes:
            return "queued.max.request.bytes"
        slots = len(self._slots)
        if not slots:
            return None  # nothing outstanding: one more is always allowed
        if slots >= MAX_IN_FLIGHT:
            return f"{slots} requests unanswered"
        if self._held >= MAX_HELD_BYTES:
            return f"{self._held} bytes of answers waiting behind an unanswered request"
        if budgets.requests >= budgets.max_requests:
            return "queued.max.requests"
        return None

    def _pause(self, reason: str) -> None:
        if self._closing or self._transport is None:
            return
        if self._paused is None:
            self._transport.pause_reading()
            self._paused_at = asyncio.get_running_loop().time()
            self._pause_logged = False
        self._paused = reason
        if reason.startswith("queued."):
            self._budgets.wait(self, reason)

    def _unpause(self) -> None:
        if self._closing or self._transport is None:
            return
        if self._pause_logged:
            log.info(
                "connection from %s is read again after %.0f s",
                self._peer,
                asyncio.get_running_loop().time() - self._paused_at,
            )
        self._paused = None
        self._transport.resume_reading()

    def resume(self) -> None:
        """A reason to pause may have cleared: handle the frames already buffered and read again if possible."""
        if self._paused is None or self._processing or self._closing:
            return
        reason = self._pause_reason()
        if reason is not None:
            self._pause(reason)
            return
        self._process()
        self._send_out()

    # -- requests ----------------------------------------------------------------------------------------------

    def _on_frame(self, frame: bytes, started: int) -> int | None:
        """Handle one request; its API key if it was answered at once (for the metrics), else None."""
        try:
            api_key, api_version, correlation_id = peek_prefix(frame)
        except MalformedRequest as e:
            self.abort(str(e))
            return
        spec = self._broker.apis.get(api_key)
        if spec is None:
            self.abort(f"unknown API key {api_key}")
            return
        if not spec.supports(api_version):
            if api_key == 18:  # ApiVersions: answer so the client can downgrade
                self._push_ready(correlation_id, unsupported_version_response())
            else:
                self.abort(f"{spec.name} v{api_version} is not supported (v{spec.min_version}-v{spec.max_version})")
            return
        try:
            header, request = decode_request(api_key, api_version, frame)
        except MalformedRequest as e:
            log.debug("undecodable frame from %s: %s", self._peer, bytes(frame[:512]).hex())
            self.abort(str(e))
            return
        if self._broker.faults is not None and self._faulted(spec, header, request):
            return
        ctx = RequestContext(self._broker, header, self._host, self.session)
        try:
            result = spec.handler(ctx, request)
        except Exception:
            log.exception("%s v%d from %s failed; closing the connection", spec.name, api_version, self._peer)
            self.abort(None)
            return
        if type(result) is Deferred:
            slot = self._park(correlation_id)
            slot.api_key, slot.started = api_key, started
            result.future.add_done_callback(partial(self._deferred_done, slot, result.respond, spec.name))
        elif type(result) is CoroutineType:  # handlers are `async def` when they answer later; asyncio.iscoroutine
            # goes through an ABC check that cost half a microsecond per request
            slot = self._park(correlation_id)
            slot.api_key, slot.started = api_key, started
            task = asyncio.get_running_loop().create_task(self._complete(slot, result, spec.name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._push_ready(correlation_id, result)
            return api_key
        return None

    # -- SASL (herd.security.sasl; only on SASL listeners) ----------------------------------------------------------

    def _on_sasl_frame(self, frame: bytes, started: int) -> int | None:
        """`_on_frame` on a SASL listener: the gate first. A frame whose prefix, API or version is wrong goes
        straight to `_on_frame`, which refuses it as on any listener."""
        try:
            api_key, api_version, _ = peek_prefix(frame)
        except MalformedRequest:
            return Connection._on_frame(self, frame, started)
        spec = self._broker.apis.get(api_key)
        if spec is not None and spec.supports(api_version) and self._sasl_gate(api_key, spec, frame):
            return None
        return Connection._on_frame(self, frame, started)

    def _sasl_gate(self, api_key: int, spec: ApiSpec, frame: bytes) -> bool:
        """True when this request was taken over: a SASL request handled here, or one refused (the connection is
        closed), as Kafka's SaslServerAuthenticator and SocketServer do (apache/kafka clients/src/main/java/org/
        apache/kafka/common/security/authenticator/SaslServerAuthenticator.java handleKafkaRequest; core/src/main/
        scala/kafka/network/SocketServer.scala closes a connection whose session expired, "expired credential",
        unless the request starts a re-authentication)."""
        sasl = self._sasl
        if api_key == SASL_HANDSHAKE or api_key == SASL_AUTHENTICATE:
            if sasl.state is State.FAILED:
                return True  # the connection closes once the failure's answer is out
            reason = sasl.refusal(api_key)
            if reason is not None:  # SaslAuthenticate before SaslHandshake, or a second SaslHandshake
                self.abort(f"{reason} (SASL listener {self.session.listener})")
            else:
                self._sasl_request(spec, frame)
            return True
        if sasl.state is State.AUTHENTICATED or sasl.reauthenticating:
            expires = self.session.expires_at
            if expires is not None and asyncio.get_running_loop().time() >= expires:
                log.info(
                    "closing connection from %s (%s): its SASL session expired (connections.max.reauth.ms) "
                    "and it did not re-authenticate",
                    self._peer,
                    self.session.principal,
                )
                self._broker.metrics.expired += 1
                self.abort(None)
                return True
            return False
        reason = sasl.refusal(api_key)
        if reason is None:
            return False
        if sasl.state is not State.FAILED:
            self.abort(f"{reason} (SASL listener {self.session.listener})")
        return True

    def _sasl_request(self, spec: ApiSpec, frame: bytes) -> None:
        """SaslHandshake or SaslAuthenticate: answered now, or after a failure answered with a delay and followed by
        closing the connection."""
        try:
            header, request = decode_request(spec.key, peek_prefix(frame)[1], frame)  # checked by _on_sasl_frame
        except MalformedRequest as e:
            self.abort(str(e))
            return
        sasl = self._sasl
        before, reauthenticating = sasl.state, sasl.reauthenticating
        try:
            response = spec.handler(RequestContext(self._broker, header, self._host, self.session), request)
        except Exception:
            log.exception("%s from %s failed; closing the connection", spec.name, self._peer)
            self.abort(None)
            return
        if sasl.state is State.FAILED or sasl.state is State.AUTHENTICATED and before is State.AUTHENTICATE:
            # herd_sasl_authentications (herd.server.metrics): succeeded, failed, then the same re-authenticating
            self._broker.metrics.sasl[(sasl.state is State.FAILED) + 2 * reauthenticating] += 1
        if sasl.state is State.FAILED:
            log.info(
                "failed authentication with %s on listener %s: %s",
                self._peer,
                self.session.listener,
                self._sasl.failure,
            )
            asyncio.get_running_loop().call_later(
                FAILED_AUTHENTICATION_DELAY_S, self._answer_and_close, header.correlation_id, response
            )
        else:
            self._push_ready(header.correlation_id, response)

    def _answer_and_close(self, correlation_id: int, response: Any) -> None:
        if self._closing:
            return
        self._push_ready(correlation_id, response)
        self._send_out()
        self.close()

    def _count_answered(self, started: int, api_key: int, count: int, others: list[tuple[int, int]] | None) -> None:
        """The requests answered at once in a pass over the frames of a socket read (`count` of `api_key` last, and
        `others` before) are counted when it ends, as their answers leave together after it: one clock reading
        for all of them, and one update per run of requests of one API (herd.server.metrics)."""
        elapsed = perf_counter_ns() - started
        bits = elapsed.bit_length()
        latency, latency_ns = self._latency, self._latency_ns
        for key, n in [*others, (api_key, count)] if others else ((api_key, count),):
            latency[(key << 6) + bits] += n  # 6: herd.server.metrics.API_BITS
            latency_ns[key] += elapsed * n

    # -- fault injection (herd.server.faults; only with herd.faults.enable=true) -------------------------------------

    def _faulted(self, spec: ApiSpec, header: RequestHeader, request: Any) -> bool:
        """Apply the fault rule this request matches, if any; True when the rule took the request over."""
        faults = self._broker.faults
        self.client_id = header.client_id
        rule = faults.match(spec.key, header, request)
        if rule is None:
            return False
        log.log(
            logging.INFO if rule.hits == 1 else logging.DEBUG,
            "fault rule %d (hit %d): %s on %s v%d from %s (client %s)",
            rule.id,
            rule.hits,
            rule.action,
            spec.name,
            header.api_version,
            self._peer,
            header.client_id,
        )
        if rule.action == "error":
            self._push_ready(header.correlation_id, faults.error_response(rule, header, request))
        elif rule.action == "drop" and rule.when == "before":
            self.abort(None)
        else:
            slot = self._park(header.correlation_id)
            if rule.action == "stall":
                self._stalled = True  # handling and reading stop from the next frame on
            task = asyncio.get_running_loop().create_task(self._fault_later(slot, rule, spec, header, request))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return True

    async def _fault_later(self, slot: _Slot, rule: Any, spec: ApiSpec, header: RequestHeader, request: Any) -> None:
        """Delay: handle after delay_ms. Stall: the same, with the connection not read meanwhile (or until the rule
        is removed). Drop after: handle, then close with the answer unsent."""
        try:
            if rule.action == "stall":
                await self._stall(rule)
            elif rule.action == "delay":
                await asyncio.sleep(rule.delay_ms / 1000)
            response = await self._answer(spec, header, request)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s from %s failed; closing the connection", spec.name, self._peer)
            self.abort(None)
            return
        if rule.action == "drop":
            self._send_out()  # the answers before this one were sent; this one is lost with the connection
            self.abort(None)
            return
        self._fill(slot, response)

    async def _stall(self, rule: Any) -> None:
        try:
            timeout = None if rule.delay_ms is None else rule.delay_ms / 1000
            await asyncio.wait_for(rule.released.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._stalled = False
            asyncio.get_running_loop().call_soon(self.resume)

    async def _answer(self, spec: ApiSpec, header: RequestHeader, request: Any) -> Any:
        result = spec.handler(RequestContext(self._broker, header, self._host, self.session), request)
        if type(result) is Deferred:
            return result.respond(await result.future)
        if type(result) is CoroutineType:
            return await result
        return result

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

    def _deferred_done(
        self, slot: _Slot, respond: Callable[[Any], Any], name: str, future: asyncio.Future[Any]
    ) -> None:
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
        if self._closing:
            return
        self._set(slot, response)
        if slot.api_key >= 0:
            elapsed = perf_counter_ns() - slot.started
            self._latency_ns[slot.api_key] += elapsed
            self._latency[(slot.api_key << 6) + elapsed.bit_length()] += 1
        self._flush()
        self._send_out()

    def _park(self, correlation_id: int) -> _Slot:
        """A slot for an answer that comes later."""
        slot = _Slot(correlation_id)
        self._slots.append(slot)
        self._budgets.requests += 1
        self.drained.clear()
        return slot

    def _set(self, slot: _Slot, response: Any) -> None:
        if response is None:
            slot.parts = _NO_RESPONSE
            return
        parts = slot.parts = encode_response_parts(slot.correlation_id, response)
        slot.size = size = sum(map(len, parts))
        self._held += size

    def _push_ready(self, correlation_id: int, response: Any) -> None:
        if not self._slots:  # fast path: nothing ahead of it
            if response is not None:
                parts = encode_response_parts(correlation_id, response)
                self._write(parts, len(parts[0]) if len(parts) == 1 else sum(map(len, parts)))
            return
        slot = _Slot(correlation_id)
        self._set(slot, response)
        self._slots.append(slot)
        self._budgets.requests += 1
        self._flush()

    def _flush(self) -> None:
        slots = self._slots
        if not slots or slots[0].parts is None:
            return
        budgets = self._budgets
        while slots and slots[0].parts is not None:
            slot = slots.popleft()
            budgets.requests -= 1
            if slot.parts:
                self._held -= slot.size
                self._write(slot.parts, slot.size)
        if not slots:
            self.drained.set()
        budgets.released()
        if self._paused is not None and not self._processing:
            asyncio.get_running_loop().call_soon(self.resume)  # after this answer has been handed to the transport

    def _write(self, parts: list[Any], size: int) -> None:
        if not self._closing:
            self._out.extend(parts)
            self._out_bytes += size

    def _send_out(self) -> None:
        """One write for every answer produced while handling one read from the socket (or one completion):
        a pipelining client gets its answers in one send instead of one per request."""
        out = self._out
        if not out or self._closing or self._transport is None:
            out.clear()
            self._out_bytes = 0
            return
        self._out = []
        if len(out) == 1:
            self._transport.write(out[0])
        elif self._out_bytes <= _JOIN_MAX:
            self._transport.write(b"".join(out))
        else:  # record data: hand the buffers over as they are (one writev), no joined copy
            self._transport.writelines(out)
        self._out_bytes = 0

    # -- idle and paused connections (called by the Server's sweep) ------------------------------------------------

    def sweep(self, now: float, idle_s: float) -> None:
        """Close this connection if it has been idle for `idle_s` seconds; log it once if paused for long."""
        if self._closing or self._transport is None:
            return
        unsent = self._transport.get_write_buffer_size()
        owed = self._slots or (self._paused is not None and self._paused.startswith("queued."))
        if self._reads != self._seen_reads or unsent != self._seen_unsent or owed:
            self._seen_reads, self._seen_unsent, self._active_at = self._reads, unsent, now
        elif now - self._active_at >= idle_s:
            self._close_idle(now, unsent)
            return
        if self._paused is not None and not self._pause_logged and now - self._paused_at >= LONG_PAUSE_S:
            self._pause_logged = True
            log.info(
                "connection from %s has not been read for %.0f s: %s (%d bytes of answers unsent, %d "
                "requests unanswered)",
                self._peer,
                now - self._paused_at,
                self._paused,
                unsent,
                len(self._slots),
            )

    def _close_idle(self, now: float, unsent: int) -> None:
        what = []
        if self._decoder.partial_size >= 0:
            what.append(f"{self._decoder.buffered} of the {self._decoder.partial_size} bytes of a request")
        elif self._decoder.buffered:
            what.append(f"{self._decoder.buffered} bytes of requests unread")
        if unsent:
            what.append(f"{unsent} bytes of answers unsent")
        log.info(
            "closing connection from %s: idle for %.0f ms (connections.max.idle.ms)%s",
            self._peer,
            (now - self._active_at) * 1000,
            f", with {' and '.join(what)}" if what else "",
        )
        self.abort(None)

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
