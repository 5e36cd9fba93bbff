"""What every API handler can reach: the configuration, the cluster's topics and logs, this node's address on each
listener, the group and transaction coordinators and the table of the APIs it serves (for ApiVersions).

Clients are told where the nodes are (Metadata, FindCoordinator, DescribeCluster) on the listener their request came
in on (`nodes(listener)`, `node(node_id, listener)`), as Kafka's MetadataCache answers with the endpoints of the
request's listener name: a client of the SSL listener is given SSL ports. The nodes reach each other on
inter.broker.listener.name (the first listener by default): `nodes()` and `node(node_id)` without a listener.

`Broker` also carries the one piece of cross-request coordination the data path needs: Fetch requests that
long-poll register a future per partition they wait on, and a Produce that appends to one of those partitions
wakes them (`notify_append`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herd.cluster.api import ClusterAdmin, LocalAdmin
from herd.cluster.topics import Cluster, Node, TopicStore
from herd.config import BrokerConfig
from herd.log.producer_state import ProducerStates
from herd.protocol.messages import ApiSpec, RequestHeader
from herd.runtime.share_sessions import ShareSession, ShareSessions
from herd.runtime.share_state import ShareStateRuntime
from herd.runtime.shares import SharePartitions
from herd.security.tls import ANONYMOUS  # Kafka's KafkaPrincipal.ANONYMOUS, as ACLs name principals (type:name)
from herd.server.group_configs import RemoteGroupConfigs
from herd.server.metrics import ServerCounters
from herd.server.peers import Peers

if TYPE_CHECKING:
    from herd.runtime import CoordinatorRuntime
    from herd.runtime.transactions import TransactionRuntime
    from herd.security.tls import PrincipalMapper

PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


class Broker:
    def __init__(self, config: BrokerConfig, store: TopicStore | None, cluster: Any = None) -> None:
        """`store`: the embedded node's segment store (topics.json lives in its directory, written through its
        filesystem: log.dirs, unless a test hands in a store of its own, e.g. on the in-memory filesystem). In
        cluster mode `store` is None and `cluster` is the started `herd.cluster.shared.SharedCluster`."""
        self.config = config
        self.node_id: int = config.get("node.id")
        self.store = store  # the embedded node's log directories (DescribeLogDirs, AlterReplicaLogDirs)
        if cluster is None and store is not None:
            cluster = Cluster(
                store, config.log_config(), self.node_id, max_partitions=config.get("max.broker.partitions")
            )
        self.cluster: Cluster = cluster  # None only until the server has started a shared cluster
        # what changes the metadata (herd.cluster.api), whichever backend keeps it; set with a shared cluster too
        self.admin: ClusterAdmin = None  # type: ignore[assignment]
        if cluster is not None:
            cluster.on_broker_configs = self.reconfigure
            self.admin = LocalAdmin(cluster, store, self.forget_topics)
        # called with the new configuration after a dynamic broker config changed (the server's connection quotas)
        self.reconfigure_hooks: list[Callable[[BrokerConfig], None]] = []
        self.endpoint = Endpoint("127.0.0.1", 9092)  # the first listener's advertised address, set by the server
        # every listener's advertised address by listener name (upper case), the first being `endpoint`, and the
        # listener the nodes use among themselves; set by the server once it is listening (`set_endpoints`)
        self.endpoints: dict[str, Endpoint] = {}
        self.inter_broker_listener = config.inter_broker_listener
        # the principal mapper (ssl.principal.mapping.rules) of each SSL listener, set by the server
        self.principal_mappers: dict[str, PrincipalMapper] = {}
        # the producers' state of every partition of this node, kept by each partition's log (the store hands it
        # to each log it opens; in cluster mode the node's store is given it: herd.server.node)
        self.producers = ProducerStates(
            config.get("producer.id.expiration.ms"),
            config.get("herd.producer.state.max.entries"),
            clock=lambda: self.now_ms(),
        )
        if store is not None:
            store.producers = self.producers
        self.coordinator: CoordinatorRuntime | None = None  # the group coordinator, set by the server at start
        self.transactions: TransactionRuntime | None = None  # the transaction coordinator, set by the server too
        # the share partitions this node leads (KIP-932: ShareFetch, ShareAcknowledge), with the group configs of
        # the groups this node coordinates
        self.shares = SharePartitions(config, self._group_config, topic_id=self._topic_id)
        # the share coordinator (__share_group_state), set by the node at start: it makes `shares` durable
        self.share_state: ShareStateRuntime | None = None
        self.share_sessions = ShareSessions(config.get("group.share.max.share.sessions"))
        self.remote_group_configs = RemoteGroupConfigs(self)  # configs of groups another node coordinates
        self.apis: dict[int, ApiSpec] = {}  # API key -> what serves it (herd.server.apis), set by the server
        # herd.server.faults.FaultRegistry with herd.faults.enable=true (set by the server), else None: connections
        # test it once per request. Typed Any: herd.server.faults imports this module.
        self.faults: Any = None
        self.metrics = ServerCounters(config.get("herd.metrics.max.series"))  # what /metrics exports (metrics.py)
        self.peers = Peers(self.node_id)  # connections to the other nodes of a cluster, opened when first needed
        # With authorizer.class.name set, what decides whether a principal may do an operation on a resource
        # (herd.security); None: every client may do everything, and handlers test only this attribute.
        self.authorizer: Any = None
        self.acl_store: Any = None  # where the ACLs are kept (herd.security.acl_store), with the authorizer
        # the SCRAM credentials (herd.security.credentials: the embedded node's file store, or in cluster mode the
        # view of herd_scram_credentials), set by the server at start
        self.credentials: Any = None
        self.sasl_listeners: dict[str, Any] = {}  # listener -> its SASL settings (herd.server.sasl), when first used
        self._waiters: dict[PartitionKey, set[asyncio.Future[None]]] = {}
        self._releases: set[asyncio.Task[None]] = set()  # share sessions of closed connections being given back

    def connection_closed(self, session: Session) -> None:
        """A client connection closed: the share session it opened, if still open, closes and its member's records
        of the session's partitions are given back (Kafka's ShareSessionCache connection listener)."""
        closed = self.share_sessions.connection_closed(session)
        if closed is not None:
            task = asyncio.get_running_loop().create_task(self.release_share_session(closed))
            self._releases.add(task)
            task.add_done_callback(self._releases.discard)

    async def release_share_session(self, closed: ShareSession) -> None:
        """Give back what a closed share session's member holds of the session's partitions, and wake the fetches
        waiting on them (SharePartitionManager.releaseSession)."""
        keys = []
        for topic_id, partition in closed.partitions:
            topic = self.cluster.by_id(topic_id)
            if topic is not None:
                keys.append((topic.name, partition))
        await self.shares.release(closed.group_id, closed.member_id, keys, self.now_ms())
        for key in keys:
            self.notify_append(key)

    def _topic_id(self, name: str) -> uuid.UUID | None:
        topic = self.cluster.get(name)
        return topic.topic_id if topic is not None else None

    def _group_config(self, group_id: str, name: str) -> str | None:
        if self.coordinator is None:
            return None
        if self.coordinator.hosts(group_id):
            return self.coordinator.group_config(group_id, name)
        return self.remote_group_configs.get(group_id, name)

    def start(self) -> None:
        """Load the topics (the store locked log.dirs when it was opened); raises MetadataError if the data
        directory's metadata cannot be used (the embedded node's: a shared cluster is started by its node,
        herd.server.node)."""
        self.cluster.load()

    def forget_topics(self, names: list[str]) -> None:
        """Topics deleted (by any node of a cluster): their producers are forgotten here, and this node's
        coordinator shards write tombstones for the offsets their groups committed on them (Kafka's
        onPartitionsDeleted)."""
        for name in names:
            self.producers.forget(name)
        if self.coordinator is not None:
            self.coordinator.on_topics_deleted(names)

    def use_acls(self, store: Any) -> None:
        """Authorize requests with the ACLs of `store` (herd.security.acl_store; None: no authorizer)."""
        if store is not None:
            self.authorizer, self.acl_store = store.authorizer, store

    def reconfigure(self, dynamic: dict[str, dict[str, str]]) -> None:
        """Apply the dynamic broker configs (by resource name: "" the cluster default, else a node id; the cluster
        calls this when they change): the configuration in force becomes the static one with them over it, the
        partitions take the new topic defaults, and the other reconfigurable parts their settings at once, as
        Kafka's BrokerReconfigurables do (apache/kafka core/src/main/scala/kafka/server/DynamicBrokerConfig.scala)."""
        self.config = self.config.with_dynamic(dynamic.get("", {}), dynamic.get(str(self.node_id), {}))
        self.cluster.set_defaults(self.config.log_config())
        self.producers.expiration_ms = self.config.get("producer.id.expiration.ms")
        for hook in self.reconfigure_hooks:
            hook(self.config)

    def set_endpoints(self, endpoints: dict[str, Endpoint]) -> None:
        """Every listener's advertised address, by listener name, the first listener first."""
        self.endpoints = dict(endpoints)
        self.endpoint = next(iter(self.endpoints.values()))

    def nodes(self, listener: str | None = None) -> list[Node]:
        """The live nodes, by id, with their addresses on `listener` (a node without that listener is left out, as
        Kafka does); without one, on the inter-broker listener."""
        # mode test kept (tests/unit/server/test_one_seam.py): only a shared cluster knows other nodes; a single
        # node's one address is the broker's own listeners, which the metadata side (herd.cluster) never sees
        if self.cluster.shared:
            return self.cluster.nodes(listener or self.inter_broker_listener)
        return [self._own(listener)]

    def node(self, node_id: int, listener: str | None = None) -> Node | None:
        """Node `node_id` with its address on `listener` (see `nodes`), or None when it is not live (or has no such
        listener)."""
        if self.cluster.shared:  # mode test kept: as in `nodes`
            return self.cluster.node(node_id, listener or self.inter_broker_listener)
        return self._own(listener) if node_id == self.node_id else None

    def _own(self, listener: str | None) -> Node:
        endpoint = self.endpoints.get(listener or self.inter_broker_listener, self.endpoint)
        return Node(self.node_id, endpoint.host, endpoint.port)

    def close(self) -> None:
        self.peers.close()
        self.cluster.close()  # the embedded node's logs (a shared cluster's node closed its store: herd.server.node)

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    # -- long polling ------------------------------------------------------------------------------------------

    def notify_append(self, key: PartitionKey) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait_for_append(self, keys: Iterable[PartitionKey], timeout_s: float) -> None:
        """Return when any of `keys` gets new data, or after `timeout_s`."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]


class Session:
    """Who is at the other end of one connection (Kafka's RequestContext/Session): the listener it came in on and
    that listener's security protocol, the peer's address, and the principal ("User:alice"), ANONYMOUS until
    SASL authentication or a client certificate names one. One per connection; the connection updates it when
    the client (re-)authenticates."""

    __slots__ = ("listener", "protocol", "host", "principal", "expires_at", "sasl")

    def __init__(
        self,
        listener: str = "PLAINTEXT",
        protocol: str = "PLAINTEXT",
        host: str = "127.0.0.1",
        principal: str = ANONYMOUS,
    ) -> None:
        self.listener = listener
        self.protocol = protocol
        self.host = host
        self.principal = principal
        self.expires_at: float | None = None  # loop time the SASL session ends (connections.max.reauth.ms, KIP-368)
        # on a SASL listener, the connection's SASL exchange (herd.security.sasl.Authenticator), set by the
        # connection; None elsewhere
        self.sasl: Any = None

    @property
    def authenticated(self) -> bool:
        """False on a SASL listener until SaslAuthenticate succeeds (only ApiVersions, SaslHandshake and
        SaslAuthenticate are served meanwhile); its user stays through re-authentications."""
        return self.sasl is None or self.sasl.user is not None


_DEFAULT_SESSION = Session()


class RequestContext:
    """What a handler gets besides its request. Made once per request, so a plain slotted class (a frozen
    dataclass costs three times as much to construct); handlers treat it as read-only."""

    __slots__ = ("broker", "header", "client_host", "session")

    def __init__(
        self, broker: Broker, header: RequestHeader, client_host: str, session: Session = _DEFAULT_SESSION
    ) -> None:
        self.broker = broker
        self.header = header
        self.client_host = client_host
        self.session = session

    @property
    def principal(self) -> str:
        return self.session.principal

    @property
    def api_version(self) -> int:
        return self.header.api_version


class Deferred:
    """An answer that is not known yet: `respond(future.result())` once `future` is done. A handler returns one
    instead of a coroutine when all it waits for is a single future (a parked JoinGroup or SyncGroup, a commit
    waiting to be durable); the connection then adds a done callback instead of running a task, which costs
    about 2.5 us per parked request instead of 10 (uvloop, the 2-core machine), and a rebalance of 1,000
    members parks 2,000 of them on its critical path."""

    __slots__ = ("future", "respond")

    def __init__(self, future: asyncio.Future[Any], respond: Callable[[Any], Any]) -> None:
        self.future = future
        self.respond = respond
