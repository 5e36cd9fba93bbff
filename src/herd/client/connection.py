"""The client's transport: asyncio connections to brokers, version negotiation and coordinator lookup.

`BrokerConnection` is one TCP connection. `send` writes a request at once and returns when its answer
arrives; many requests may be in flight (pipelined). Kafka answers each connection in request order, so
the reader task matches every response frame to the oldest request waiting and checks its correlation id.
A request that times out, a frame that does not match, or a broken socket closes the connection and fails
every request on it with `ConnectionLost`, since nothing later on it can be matched any more (Java's
NetworkClient does the same).

On connect the connection asks ApiVersions (v3 first; a broker that does not know v3 answers in v0 with
its own range, and the client asks again at a version it knows) and keeps, per API, the highest version
both sides support (`wire.negotiate`).

`KafkaClient` owns the connections: it bootstraps from a list of `host:port`, learns the brokers from
Metadata, and keeps two connections per broker: one for data and admin requests and one for a group
coordinator, so that a long-polling request never delays a heartbeat (Java keeps a separate coordinator
connection for the same reason). `find_coordinator(group)` asks FindCoordinator and retries with
exponential backoff (`Backoff`) on NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS
and lost connections, until the request timeout; `coordinator_dead(group)` forgets the answer so the next
call asks again. `call_coordinator` wraps a whole exchange in that rediscovery loop for admin requests.

Security (herd.client.security.ClientSecurity, PLAINTEXT unless given) is the same for every connection a
`KafkaClient` opens: bootstrap, data and coordinator. With SSL or SASL_SSL the socket is wrapped in TLS (one
`ssl.SSLContext` per client, the broker's host name checked unless turned off); with SASL_PLAINTEXT or SASL_SSL
the connection authenticates after ApiVersions, as Java's SaslClientAuthenticator does (apache/kafka
clients/src/main/java/org/apache/kafka/common/security/authenticator/SaslClientAuthenticator.java): SaslHandshake
v1 names the mechanism, then SaslAuthenticate requests carry the mechanism's messages until it is done. A refusal
raises `AuthenticationError` with the broker's error code and message, as does a failed TLS handshake; nothing
retries it (`retrying` retries only lost connections and coordinator errors). A SASL session with a lifetime
(KIP-368, the broker's connections.max.reauth.ms) is not re-authenticated: once 85% of the lifetime has passed,
new requests go to a new connection and the old one closes when its last answer is in.
"""

from __future__ import annotations

import asyncio
import collections
import random
import ssl
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from kio.schema.errors import ErrorCode

from herd import __version__
from herd.client.errors import (
    COORDINATOR_ERRORS,
    AuthenticationError,
    ConnectionLost,
    KafkaError,
    UnsupportedApi,
    error_name,
)
from herd.client.security import (
    PLAINTEXT,
    ClientSecurity,
    SaslCredentials,
    SaslError,
    as_security,
    sasl_client,
    ssl_reason,
)
from herd.client.wire import (
    API_NAMES,
    RequestBuilder,
    decode_response,
    encode_request,
    negotiate,
    request_builder,
)

__all__ = [
    "Backoff",
    "BrokerConnection",
    "ClusterMetadata",
    "KafkaClient",
    "Node",
    "TopicMetadata",
    "parse_bootstrap",
]

T = TypeVar("T")
Build = Callable[[RequestBuilder], Any]

API_VERSIONS: Final = 18
METADATA: Final = 3
FIND_COORDINATOR: Final = 10
SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
SESSION_RENEWAL: Final = 0.85  # the part of a SASL session's lifetime after which its connection is replaced
_INT32: Final = struct.Struct(">i")  # a response's size, then its correlation id
# Larger than any answer a broker sends (Fetch answers stay under fetch.max.bytes, 50 MiB by default; Kafka's
# own limit on a frame is socket.request.max.bytes, 100 MiB, on the broker's side); a larger size means the
# peer does not speak Kafka's protocol.
MAX_RESPONSE_BYTES: Final = 512 * 1024 * 1024  # also: any text (first byte >= 0x20) reads as at least this


class _NotKafka(Exception):
    """The peer's bytes cannot be a Kafka response."""


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """`"h1:9092,h2:9093"` or a list of `host:port` -> [(host, port)]; raises ValueError when malformed."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in (i.strip() for i in items):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap server given")
    return out


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter, as Kafka's retry.backoff.ms / retry.backoff.max.ms (KIP-580)."""

    initial_ms: float = 100.0
    max_ms: float = 1000.0
    jitter: float = 0.2

    def delay_ms(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry number `attempt` (0-based)."""
        base = min(self.max_ms, self.initial_ms * (2 ** min(attempt, 30)))
        return base * (1 - self.jitter + 2 * self.jitter * rand())


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    error_code: int
    partitions: Mapping[int, int]  # partition -> leader node id
    replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    isr: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: str | None = None
    internal: bool = False


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: Mapping[int, Node]
    topics: Mapping[str, TopicMetadata]
    controller_id: int = -1
    cluster_id: str | None = None


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    decode: Callable[[bytes], Any]
    future: asyncio.Future[Any]


class BrokerConnection:
    """One TCP connection to one broker, with pipelined requests answered in order; TLS and SASL as `security`
    says (`ssl_context`: the context of `security`, built once by the KafkaClient)."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        request_timeout_ms: int = 30000,
        *,
        security: ClientSecurity = PLAINTEXT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self._ssl = ssl_context if ssl_context is not None or not security.uses_tls else security.ssl_context()
        self._session_deadline: float | None = None
        self._retiring = False  # replaced (its SASL session is ending): closes once its last answer is in
        self.versions: dict[int, int] = {}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: collections.deque[_Pending] = collections.deque()
        self._correlation = 0
        self._read_task: asyncio.Task[None] | None = None
        self._closed: str | None = None

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def usable(self) -> bool:
        """Open, and not past the renewal point of its SASL session."""
        return (
            self._closed is None
            and not self._retiring
            and (self._session_deadline is None or asyncio.get_running_loop().time() < self._session_deadline)
        )

    async def connect(self, timeout_ms: int = 10000) -> None:
        """Open the socket (TLS), negotiate versions and authenticate (SASL); raises ConnectionLost, or
        AuthenticationError when the TLS handshake fails or the broker refuses the credentials."""
        try:
            self._reader, self._writer = await asyncio.wait_for(self._open(), timeout_ms / 1000)
        except (TimeoutError, OSError) as exc:
            self._closed = "not connected"
            if _tls_refused(exc):
                raise AuthenticationError(
                    ErrorCode.network_exception, f"TLS handshake with {self.host}:{self.port} failed: {ssl_reason(exc)}"
                ) from None
            raise ConnectionLost(f"cannot connect to {self.host}:{self.port}: {str(exc) or 'timed out'}") from None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        try:
            await self._negotiate()
            if self.security.sasl is not None:
                await self._authenticate(self.security.sasl)
        except ConnectionLost as exc:  # the broker hung up on the first requests: say what is likely wrong
            raise ConnectionLost(f"{exc.message} while setting the connection up ({self._setup_hint()})") from None
        except BaseException as exc:
            self.close(f"connection setup failed: {type(exc).__name__}")
            raise

    def _setup_hint(self) -> str:
        if self.security.uses_tls:
            return "does the broker accept this client's certificate (ssl.keystore.location, ssl.certificate.location)?"
        return f"does the listener speak {self.security.protocol} (security.protocol)?"

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._ssl is None:
            return await asyncio.open_connection(self.host, self.port)
        return await asyncio.open_connection(self.host, self.port, ssl=self._ssl, server_hostname=self.host)

    async def _authenticate(self, credentials: SaslCredentials) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done; raises AuthenticationError."""
        where = f"{self.host}:{self.port}"
        if self.versions.get(SASL_HANDSHAKE) != 1 or SASL_AUTHENTICATE not in self.versions:
            raise AuthenticationError(
                ErrorCode.illegal_sasl_state, f"{where} does not serve SaslHandshake v1 and SaslAuthenticate"
            )
        _, body = await self.send(SASL_HANDSHAKE, lambda b: b.request(mechanism=credentials.mechanism))
        if body.error_code:
            enabled = ", ".join(body.mechanisms) or "none"
            raise AuthenticationError(
                body.error_code,
                f"{where} refused SASL mechanism {credentials.mechanism}: "
                f"{error_name(body.error_code)} (it enables: {enabled})",
            )
        mechanism = sasl_client(credentials)
        challenge: bytes | None = None
        lifetime_ms = 0
        while True:
            try:
                message = mechanism.respond(challenge)
            except SaslError as exc:
                raise AuthenticationError(
                    ErrorCode.sasl_authentication_failed, f"SASL authentication with {where} failed: {exc}"
                ) from None
            if message is None:
                break
            _, body = await self.send(SASL_AUTHENTICATE, lambda b, m=message: b.request(auth_bytes=m))
            if body.error_code:
                raise AuthenticationError(
                    body.error_code,
                    body.error_message or f"SASL authentication with {where} failed: {error_name(body.error_code)}",
                )
            challenge = bytes(body.auth_bytes)
            lifetime = getattr(body, "session_lifetime", None)
            lifetime_ms = int(lifetime.total_seconds() * 1000) if lifetime else 0
        if lifetime_ms > 0:
            self._session_deadline = asyncio.get_running_loop().time() + SESSION_RENEWAL * lifetime_ms / 1000

    async def _negotiate(self) -> None:
        version = 3
        for _ in range(2):
            frame = await self._exchange(API_VERSIONS, version, self._api_versions_request(version), bytes)
            body = self._decode_api_versions(frame, version)
            if body.error_code == ErrorCode.unsupported_version:
                ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
                version = min(version, ranges.get(API_VERSIONS, (0, 0))[1])
                continue
            if body.error_code:
                raise KafkaError(body.error_code, "ApiVersions failed")
            self.broker_versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
            self.versions = negotiate(self.broker_versions)
            return
        raise KafkaError(ErrorCode.unsupported_version, "no ApiVersions version in common with the broker")

    @staticmethod
    def _api_versions_request(version: int) -> Any:
        return request_builder(API_VERSIONS, version).request(
            client_software_name="herd-client", client_software_version=__version__
        )

    @staticmethod
    def _decode_api_versions(frame: bytes, version: int) -> Any:
        try:
            body = decode_response(frame, API_VERSIONS, version)
        except Exception:  # a broker that does not know `version` answers in v0 (KIP-511)
            return decode_response(frame, API_VERSIONS, 0)
        if body.error_code == ErrorCode.unsupported_version and version:
            return decode_response(frame, API_VERSIONS, 0)
        return body

    def version(self, api_key: int) -> int:
        """The negotiated version of an API; raises UnsupportedApi."""
        try:
            return self.versions[api_key]
        except KeyError:
            raise UnsupportedApi(API_NAMES.get(api_key, f"API {api_key}")) from None

    async def send(
        self,
        api_key: int,
        build: Build,
        timeout_ms: int | None = None,
        *,
        decode: Callable[[bytes, int], Any] | None = None,
    ) -> tuple[int, Any]:
        """Build the request at the negotiated version, send it, return (version, response body).

        `decode(frame, version)` reads the response frame instead of kio (for an answer kio cannot read, such as
        DescribeTransactions' start time -1). Raises UnsupportedApi, or ConnectionLost when the connection breaks or
        the request times out.
        """
        version = self.version(api_key)
        request = build(request_builder(api_key, version))
        read = decode or (lambda frame, v: decode_response(frame, api_key, v))
        body = await self._exchange(api_key, version, request, lambda frame: read(frame, version), timeout_ms)
        return version, body

    async def _exchange(
        self, api_key: int, version: int, request: Any, decode: Callable[[bytes], T], timeout_ms: int | None = None
    ) -> T:
        if self._closed is not None or self._writer is None:
            raise ConnectionLost(f"connection to {self.host}:{self.port} is closed ({self._closed})")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(self._correlation, decode, future))
        self._writer.write(encode_request(request, api_key, version, self._correlation, self.client_id))
        timeout = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for returns an answer that arrives as the caller is
            # cancelled and drops the cancellation, so a cancelled task ran on (a test's poll loop never ended)
            async with asyncio.timeout(timeout):
                return await asyncio.shield(future)
        except TimeoutError:
            self.close(f"{API_NAMES.get(api_key, api_key)} timed out after {timeout:g}s")
            if future.done() and not future.cancelled():
                future.exception()  # failed by `close`, and awaited by no one now that the shield was cancelled
            raise ConnectionLost(f"request to {self.host}:{self.port} timed out") from None

    async def _read_loop(self) -> None:
        assert self._reader is not None
        try:
            while True:
                # The size is checked before the body is read: a peer that is not a Kafka broker (an HTTP
                # server, say) answers with text whose first bytes make an absurd size, and waiting for that
                # many bytes would only end in a confusing "connection lost".
                head = await self._reader.readexactly(4)
                (size,) = _INT32.unpack(head)
                if size < 4 or size > MAX_RESPONSE_BYTES or not self._pending:
                    raise _NotKafka(f"this is not a Kafka broker: its answer starts with {head!r}")
                self._deliver(await self._reader.readexactly(size))
        except asyncio.IncompleteReadError as exc:
            self.close("connection lost" + (f" after {len(exc.partial)} bytes of an answer" if exc.partial else ""))
        except OSError as exc:  # TLS 1.3: a broker refuses the client's certificate after the handshake
            if _tls_refused(exc):
                self.close(f"TLS connection refused: {ssl_reason(exc)}", error=AuthenticationError)
            else:
                self.close(f"connection lost: {exc}")
        except _NotKafka as exc:
            self.close(str(exc))
        except Exception as exc:  # a frame that does not match or cannot be decoded
            self.close(f"bad response: {exc}")

    def _deliver(self, frame: bytes) -> None:
        (correlation_id,) = _INT32.unpack_from(frame)
        if correlation_id != self._pending[0].correlation_id:  # left waiting: `close` fails it
            raise ValueError(f"correlation id {correlation_id}, expected {self._pending[0].correlation_id}")
        pending = self._pending.popleft()
        if not pending.future.done():
            try:
                pending.future.set_result(pending.decode(frame))
            except Exception as exc:
                pending.future.set_exception(ConnectionLost(f"cannot decode response: {exc}"))
        if self._retiring and not self._pending:
            self.close("SASL session renewal")

    def retire(self, reason: str) -> None:
        """Take no new requests; close once the requests in flight are answered (at once when there are none)."""
        self._retiring = True
        if not self._pending:
            self.close(reason)

    def close(self, reason: str = "closed", error: type[KafkaError] = ConnectionLost) -> None:
        """Close the socket and fail every request still waiting (with ConnectionLost, or AuthenticationError)."""
        if self._closed is not None:
            return
        self._closed = reason
        while self._pending:
            future = self._pending.popleft().future
            if not future.done():
                message = f"{self.host}:{self.port}: {reason}"
                future.set_exception(
                    ConnectionLost(message) if error is ConnectionLost else error(ErrorCode.network_exception, message)
                )
                future.exception()  # retrieved: a request whose waiter gave up (a timeout) logs nothing at close
        if self._writer is not None:
            self._writer.close()
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()


class KafkaClient:
    """Connections to a cluster, metadata, and group coordinator lookup with rediscovery.

    `security`: a ClientSecurity or Kafka client properties (`{"security.protocol": "SASL_SSL", ...}`), used by
    every connection; raises SecurityConfigError (a ValueError) when it is unusable."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = "127.0.0.1:9092",
        *,
        client_id: str = "herd",
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        backoff: Backoff = Backoff(),
        security: ClientSecurity | Mapping[str, str] | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = as_security(security)
        self._ssl_context = self.security.ssl_context()
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.backoff = backoff
        self.brokers: dict[int, Node] = {}
        self._connections: dict[tuple[str, str, int], BrokerConnection] = {}
        self._connecting: dict[tuple[str, str, int], asyncio.Future[BrokerConnection]] = {}
        self._coordinators: dict[str, Node] = {}

    async def __aenter__(self) -> KafkaClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to a bootstrap server and learn the brokers; raises ConnectionLost if none answers."""
        await self.metadata([])

    async def close(self) -> None:
        for connection in list(self._connections.values()):
            connection.close("client closed")
        self._connections.clear()

    # -- connections -------------------------------------------------------------------------------------

    async def connection(self, host: str, port: int, purpose: str = "data") -> BrokerConnection:
        """The open connection for (purpose, host, port), connecting when there is none."""
        key = (purpose, host, port)
        existing = self._connections.get(key)
        if existing is not None and existing.usable:
            return existing
        if existing is not None:
            existing.retire("SASL session renewal")  # a request parked on it (a JoinGroup) still gets its answer
        if key in self._connecting:
            return await asyncio.shield(self._connecting[key])
        future: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._connecting[key] = future
        try:
            connection = BrokerConnection(
                host,
                port,
                self.client_id,
                self.request_timeout_ms,
                security=self.security,
                ssl_context=self._ssl_context,
            )
            await connection.connect(self.connect_timeout_ms)
            self._connections[key] = connection
            future.set_result(connection)
            return connection
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: later waiters re-raise it
            raise
        except BaseException:  # cancelled: whoever waits on the same connection is cancelled too
            future.cancel()
            raise
        finally:
            del self._connecting[key]

    async def any_connection(self) -> BrokerConnection:
        """A connection to any known broker (bootstrap servers first); raises ConnectionLost."""
        addresses = list(dict.fromkeys(self.bootstrap + [(n.host, n.port) for n in self.brokers.values()]))
        last: ConnectionLost | None = None
        for host, port in addresses:
            try:
                return await self.connection(host, port)
            except ConnectionLost as exc:
                last = exc
        raise last or ConnectionLost("no broker to connect to")

    async def node_connection(self, node_id: int, purpose: str = "data") -> BrokerConnection:
        node = self.brokers.get(node_id)
        if node is None:
            await self.metadata([])
            node = self.brokers.get(node_id)
        if node is None:
            raise ConnectionLost(f"broker {node_id} is not in the cluster metadata")
        return await self.connection(node.host, node.port, purpose)

    async def send(
        self,
        api_key: int,
        build: Build,
        *,
        node: int | None = None,
        timeout_ms: int | None = None,
        decode: Callable[[bytes, int], Any] | None = None,
    ) -> tuple[int, Any]:
        """Send to broker `node` (any broker when None); returns (version, response body)."""
        connection = await (self.any_connection() if node is None else self.node_connection(node))
        return await connection.send(api_key, build, timeout_ms, decode=decode)

    async def version(self, api_key: int) -> int:
        """The version a request of this API would use; raises UnsupportedApi."""
        return (await self.any_connection()).version(api_key)

    # -- metadata ----------------------------------------------------------------------------------------

    async def metadata(
        self, topics: Sequence[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> ClusterMetadata:
        """Metadata for `topics` (every topic when None, none when empty); remembers the brokers."""

        def build(b: RequestBuilder) -> Any:
            requested = (
                None if topics is None else tuple(b("MetadataRequestTopic", name=t, topic_id=None) for t in topics)
            )
            if requested is None and b.version == 0:
                requested = ()
            return b.request(
                topics=requested,
                allow_auto_topic_creation=allow_auto_topic_creation,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )

        _, body = await self.send(METADATA, build)
        result = _cluster_metadata(body)
        if result.brokers:
            self.brokers = dict(result.brokers)
        return result

    # -- group coordinators ------------------------------------------------------------------------------

    def coordinator_dead(self, group_id: str) -> None:
        """Forget the coordinator of `group_id`; the next lookup asks FindCoordinator again."""
        self._coordinators.pop(group_id, None)

    async def find_coordinator(self, group_id: str, *, timeout_ms: int | None = None) -> Node:
        """The coordinator of `group_id`, looked up again after `coordinator_dead`.

        Retries with backoff on coordinator errors and lost connections until `timeout_ms` (the request
        timeout by default); then raises the last error. Other errors (INVALID_REQUEST, authorization)
        raise KafkaError at once.
        """
        known = self._coordinators.get(group_id)
        if known is not None:
            return known
        node = await self.retrying(lambda: self.lookup_coordinator(group_id), timeout_ms)
        self._coordinators[group_id] = node
        return node

    async def lookup_coordinator(self, key: str, key_type: int = 0) -> Node:
        """FindCoordinator for a group (key type 0) or a transactional id (1, FindCoordinator v1+); raises
        KafkaError with the answer's error."""

        def build(b: RequestBuilder) -> Any:
            if key_type and b.version < 1:
                raise KafkaError(
                    ErrorCode.unsupported_version,
                    "the broker cannot find transaction coordinators (FindCoordinator v1+)",
                )
            return b.request(key=key, key_type=key_type, coordinator_keys=(key,))

        version, body = await self.send(FIND_COORDINATOR, build)
        answer = body.coordinators[0] if version >= 4 else body
        if answer.error_code:
            raise KafkaError(answer.error_code, getattr(answer, "error_message", None))
        return Node(int(answer.node_id), answer.host, int(answer.port))

    async def coordinator_connection(self, group_id: str, timeout_ms: int | None = None) -> BrokerConnection:
        """The coordinator connection of `group_id`; raises like find_coordinator."""
        node = await self.find_coordinator(group_id, timeout_ms=timeout_ms)
        try:
            return await self.connection(node.host, node.port, "coordinator")
        except ConnectionLost:
            self.coordinator_dead(group_id)
            raise

    async def send_to_coordinator(
        self, group_id: str, api_key: int, build: Build, timeout_ms: int | None = None
    ) -> tuple[int, Any]:
        """One request to the group's coordinator, no retry; a lost connection forgets the coordinator."""
        connection = await self.coordinator_connection(group_id)
        try:
            return await connection.send(api_key, build, timeout_ms)
        except ConnectionLost:
            self.coordinator_dead(group_id)
            raise

    async def call_coordinator(
        self,
        group_id: str,
        api_key: int,
        build: Build,
        error_of: Callable[[int, Any], int],
        timeout_ms: int | None = None,
    ) -> tuple[int, Any]:
        """Send to the coordinator, finding it again and retrying (with backoff) while the answer's
        error (`error_of(version, body)`) is a coordinator error or the connection is lost."""

        async def attempt() -> tuple[int, Any]:
            version, body = await self.send_to_coordinator(group_id, api_key, build)
            code = error_of(version, body)
            if code in COORDINATOR_ERRORS:
                self.coordinator_dead(group_id)
                raise KafkaError(code)
            return version, body

        return await self.retrying(attempt, timeout_ms)

    async def retrying(self, attempt: Callable[[], Awaitable[T]], timeout_ms: int | None = None) -> T:
        """`attempt()`, tried again after a backoff while it raises ConnectionLost or a coordinator error, until
        `timeout_ms` (the request timeout by default); then the last error is raised."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        tries = 0
        while True:
            try:
                return await attempt()
            except KafkaError as exc:
                if not _rediscoverable(exc):
                    raise
                delay = self.backoff.delay_ms(tries) / 1000
                if loop.time() + delay > deadline:
                    raise
            tries += 1
            await asyncio.sleep(delay)


def _tls_refused(exc: BaseException) -> bool:
    """A TLS failure that trying again cannot mend: the broker's certificate is not trusted (or not for its host
    name), or the broker refuses the client's (an alert). An EOF in the middle of a handshake, or a reset, is a
    lost connection (ConnectionLost, retried)."""
    return isinstance(exc, ssl.SSLError) and not isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError))


def _rediscoverable(exc: KafkaError) -> bool:
    return isinstance(exc, ConnectionLost) or exc.code in COORDINATOR_ERRORS


def _cluster_metadata(body: Any) -> ClusterMetadata:
    brokers = {
        int(b.node_id): Node(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None)) for b in body.brokers
    }
    topics = {}
    for t in body.topics:
        parts = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
        replicas = {int(p.partition_index): tuple(int(r) for r in p.replica_nodes) for p in t.partitions}
        isr = {int(p.partition_index): tuple(int(r) for r in p.isr_nodes) for p in t.partitions}
        topic_id = getattr(t, "topic_id", None)
        topics[t.name] = TopicMetadata(
            t.name,
            int(t.error_code),
            parts,
            replicas,
            isr,
            str(topic_id) if topic_id is not None else None,
            bool(getattr(t, "is_internal", False)),
        )
    return ClusterMetadata(brokers, topics, int(getattr(body, "controller_id", -1)), getattr(body, "cluster_id", None))
