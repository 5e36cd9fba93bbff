"""The broker process: listeners, connections, background duties and a graceful shutdown.

`Server.start()` opens the logs (recovering them), starts the group coordinator (which creates
__consumer_offsets if needed and loads its partitions in the background), binds every listener and starts the
periodic duties (retention, time-based flushing, and reopening data partitions that failed on a disk error,
herd.runtime.recovery; the coordinator flushes and reloads its own partitions). `Server.shutdown()`
stops accepting, unloads the coordinator (pending writes finish, parked joins are answered NOT_COORDINATOR,
timers stop), gives open connections a bounded time to send the answers they owe, closes them, and flushes and
closes every log. With herd.http.listener set, the HTTP listener (herd.server.http: fault injection) starts before
the Kafka listeners accept and stops first at shutdown, when fault rules are cleared (stalled connections carry
on). `run_server()` wires this to SIGINT and SIGTERM for `herd serve`: the first signal shuts down gracefully, a second one exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from typing import TYPE_CHECKING

from herd.config import BrokerConfig
from herd.cluster.topics import TopicStore
from herd.log.api import LogError, as_remote
from herd.log.fs import OsFileSystem
from herd.log.handles import BoundedFileSystem, descriptor_limit, max_open_files
from herd.log.segments import SegmentLog
from herd.log.store import SegmentStore
from herd.runtime import CoordinatorRuntime
from herd.runtime.recovery import Backoff
from herd.server import apis
from herd.server.broker import Broker, Endpoint
from herd.server.connection import Budgets, Connection, ConnectionQuotas
from herd.server.faults import FaultRegistry
from herd.server.transactions import transaction_runtime

if TYPE_CHECKING:
    from herd.server.http import HttpListener
    from herd.server.node import ClusterNode

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5.0


def max_connections(configured: int) -> int:
    """`configured` (max.connections), or when it is 0 half of the process's RLIMIT_NOFILE soft limit less a few
    descriptors for listeners and short-lived files: the log's segment files keep the other half
    (herd.log.max.open.files), so connections alone can never take every descriptor."""
    return configured if configured > 0 else max(16, descriptor_limit() // 2 - 32)


class Server:
    def __init__(self, config: BrokerConfig, store: TopicStore | None = None) -> None:
        self.database_url: str | None = config.get("herd.cluster.database.url")
        if store is None and self.database_url is None:
            fs = BoundedFileSystem(OsFileSystem(), max_open_files(config.get("herd.log.max.open.files")))
            store = SegmentStore(config.log_dirs, fs)
        self.config = config
        self.broker = Broker(config, store)  # in cluster mode its cluster is set by `start`
        self.node: ClusterNode | None = None  # cluster mode: this node's database, store and shared cluster
        self.broker.apis = apis.table()
        if config.get("herd.faults.enable"):
            self.broker.faults = FaultRegistry(self.broker)
        self.http: HttpListener | None = None  # herd.http.listener, when set
        self.connections: set[Connection] = set()
        self.budgets = Budgets(config.get("queued.max.requests"), config.get("queued.max.request.bytes"))
        self.quotas = ConnectionQuotas(max_connections(config.get("max.connections")),
                                       config.get("max.connections.per.ip"))
        self.broker.reconfigure_hooks.append(self._reconfigure_quotas)
        self._servers: list[asyncio.base_events.Server] = []
        self._duties: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()

    def _reconfigure_quotas(self, config: BrokerConfig) -> None:
        """max.connections and max.connections.per.ip changed at run time: new connections are counted against
        the new limits (open ones stay, as in Kafka)."""
        self.quotas.max_connections = max_connections(config.get("max.connections"))
        self.quotas.max_per_ip = config.get("max.connections.per.ip")

    @property
    def port(self) -> int:
        return self.broker.endpoint.port

    async def start(self) -> None:
        """Open the data (the segment store, or in cluster mode the database), start the group coordinator,
        then serve. Listeners are bound first (a node's registration names its port) but accept only once
        everything is ready. Raises DatabaseError/SchemaError/ClusterError in cluster mode, MetadataError or
        OSError."""
        loop = asyncio.get_running_loop()
        await self._bind()
        try:
            if self.database_url is None:
                self.broker.start()
                self.broker.coordinator = CoordinatorRuntime(self.broker.cluster, self.config)
                self.broker.coordinator.start()
                self.broker.transactions = transaction_runtime(self.broker)
                self.broker.transactions.start()
                where = f"data in {', '.join(os.path.abspath(d) for d in self.config.log_dirs)}"
            else:  # cluster mode; psycopg is imported only here, so an embedded node never loads it
                from herd.log.postgres.db import redact
                from herd.server.node import ClusterNode

                self.node = await ClusterNode.start(self.config, self.broker)
                where = f"cluster {self.broker.cluster.cluster_id}, state in {redact(self.database_url)}"
            await self._start_http()
        except BaseException:
            for srv in self._servers:
                srv.close()
            raise
        for srv in self._servers:
            await srv.start_serving()
        self._duties.append(loop.create_task(self._retention_loop()))
        self._duties.append(loop.create_task(self._flush_loop()))
        self._duties.append(loop.create_task(self._recovery_loop()))
        self._duties.append(loop.create_task(self._idle_loop()))
        log.info("herd listening on %s:%d (node %d, %s)", self.broker.endpoint.host, self.port,
                 self.broker.node_id, where)

    async def _start_http(self) -> None:
        """The HTTP listener (herd.server.http), when herd.http.listener is set; aiohttp is imported only then."""
        address = self.config.http_listener
        if address is None:
            return
        from herd.server.http import HttpListener

        self.http = HttpListener(self, *address)
        await self.http.start()

    async def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self.config.listeners:
            host = listener.host or "0.0.0.0"
            try:
                srv = await loop.create_server(lambda: Connection(self), host, listener.port, start_serving=False)
            except OSError as e:  # the port is taken, the host does not resolve or is not this machine's
                reason = e.strerror if isinstance(e, socket.gaierror) or not e.errno else os.strerror(e.errno)
                for bound in self._servers:
                    bound.close()
                raise OSError(e.errno, f"cannot listen on {host}:{listener.port}: {reason}") from e
            self._servers.append(srv)
        host, port = self._servers[0].sockets[0].getsockname()[:2]
        advertised = self.config.get("advertised.listeners")
        if advertised:
            first = self.config.__class__.from_properties({"listeners": advertised}).listeners[0]
            self.broker.endpoint = Endpoint(first.host or self._bound_host(host), first.port or port)
        else:
            self.broker.endpoint = Endpoint(self._bound_host(host), port)

    @staticmethod
    def _bound_host(host: str) -> str:
        """The address clients are given for a listener bound to `host` (the wildcard gives loopback)."""
        return host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"

    async def _retention_loop(self) -> None:
        interval = self.config.get("log.retention.check.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            now = self.broker.now_ms()
            for topic in self.broker.cluster.topics():
                if topic.internal:
                    continue  # compacted, and written only by the coordinator runtime
                for partition in topic.partitions:
                    if partition is None:  # led by another node
                        continue
                    try:
                        if partition.remote:
                            await as_remote(partition).apply_retention_async(now)
                        else:
                            partition.apply_retention(now)
                    except LogError as e:  # a remote log taken over or the database gone: next time
                        log.debug("retention of %s-%d skipped: %s", topic.name, partition.partition, e)

    async def _flush_loop(self) -> None:
        interval_ms = min(self.config.get("log.flush.scheduler.interval.ms"),
                          self.config.get("log.flush.interval.ms") or 2**62, 1000)
        while True:
            await asyncio.sleep(interval_ms / 1000)
            now = self.broker.now_ms()
            for topic in self.broker.cluster.topics():
                if topic.internal:
                    continue  # the coordinator runtime fsyncs its partitions before every answer
                for partition in topic.partitions:
                    if partition is not None and not partition.remote:  # a remote log commits every append
                        partition.maybe_flush(now)

    async def _recovery_loop(self) -> None:
        """Reopen data partitions that failed on a disk error (`recover`), each after its backoff; a failed
        attempt is logged when a streak of them starts (the partition logged its failure itself)."""
        backoff = Backoff(self.config.get("herd.log.recovery.backoff.ms"),
                          self.config.get("herd.log.recovery.backoff.max.ms"))
        while True:
            await asyncio.sleep(backoff.initial_ms / 1000)
            now = self.broker.now_ms()
            for topic in self.broker.cluster.topics():
                if topic.internal:
                    continue  # the coordinator runtime reloads its partitions (CoordinatorRuntime._reload)
                for index, partition in enumerate(topic.partitions):
                    if partition is None:  # led by another node
                        continue
                    failure = partition.failure
                    key = (topic.name, index)
                    if failure is None or failure == "closed" or not backoff.due(key, now):
                        continue
                    try:
                        if partition.remote:  # the database failed under it: read its state again, and
                            # its producers' (what the failed commit stored, if anything, is only known there)
                            await as_remote(partition).reload()
                            await self.broker.producers.rebuild(as_remote(partition), self.broker.now_ms)
                        else:
                            partition.recover()  # logs its success
                            if isinstance(partition, SegmentLog):  # what survived is the log's, not memory's
                                self.broker.producers.attach(partition, now)
                        backoff.succeeded(key)
                    except LogError as error:
                        if backoff.failed(key, now):
                            log.error("%s-%d cannot be recovered from disk yet (retrying, up to every %d ms): %s",
                                      topic.name, index, backoff.max_ms, error)

    async def _idle_loop(self) -> None:
        """Close connections idle for connections.max.idle.ms (checked every tenth of it, at most every second)."""
        idle_s = self.config.get("connections.max.idle.ms") / 1000
        interval = min(max(idle_s / 10, 0.01), 1.0)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for conn in list(self.connections):
                conn.sweep(now, idle_s)

    async def shutdown(self) -> None:
        """Stop accepting, let connections send what they owe (bounded), then flush and close the logs. In
        cluster mode with controlled.shutdown.enable, this node's partitions are handed to the other nodes
        first, while its connections still answer (clients then move on NOT_LEADER_OR_FOLLOWER and
        NOT_COORDINATOR, both retriable)."""
        for srv in self._servers:
            srv.close()
        for task in self._duties:
            task.cancel()
        if self.broker.faults is not None:
            self.broker.faults.clear()  # stalled connections carry on, and nothing more is injected
            self.broker.faults = None
        if self.http is not None:
            await self.http.stop()
        if self.node is not None:
            await self.node.hand_over()
        if self.broker.transactions is not None:  # first: its markers go through the group coordinator
            await self.broker.transactions.close()
        if self.broker.coordinator is not None:
            await self.broker.coordinator.close()
        if self.node is not None:
            await self.node.close()
        pending = [c.drained.wait() for c in list(self.connections)]
        if pending:
            await asyncio.wait([asyncio.ensure_future(p) for p in pending], timeout=SHUTDOWN_GRACE_S)
        for conn in list(self.connections):
            conn.close()
        for srv in self._servers:
            await srv.wait_closed()
        self.broker.close()
        self._stopped.set()
        log.info("herd stopped")

    async def wait_stopped(self) -> None:
        await self._stopped.wait()


async def _serve(config: BrokerConfig) -> None:
    server = Server(config)
    await server.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            log.warning("second signal: exiting now")
            os._exit(1)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    await stop.wait()
    log.info("shutting down")
    await server.shutdown()


def tune_malloc() -> None:
    """Keep glibc from returning (and re-faulting) the memory of every large buffer: with its defaults each
    allocation above the dynamic mmap threshold is a fresh mmap or heap trim, so every copy of a ~1 MB request
    or response pays for page faults and zeroing (copies run at ~0.8 GB/s instead of ~15 GB/s)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    mallopt(M_MMAP_THRESHOLD, 64 * 1024 * 1024)
    mallopt(M_TRIM_THRESHOLD, 128 * 1024 * 1024)


def run_server(config: BrokerConfig) -> None:
    tune_malloc()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        asyncio.run(_serve(config))
    else:
        uvloop.run(_serve(config))
