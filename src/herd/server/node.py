"""What a node's data lives on, started by one constructor of one shape: `start_node` gives an `EmbeddedNode`
(segment files in log.dirs) or, with herd.cluster.database.url set, a `ClusterNode` (PostgreSQL). Each `start`
leaves the broker complete: its cluster and admin (herd.cluster.api), ACLs, SCRAM credentials and the group and
transaction coordinators; `where` says where the data is, `hand_over` is the controlled shutdown's first step and
`close` the last before the connections are drained. The server knows nothing more of the difference.

`EmbeddedNode.start` loads topics.json (the store locked log.dirs when it was opened), acls.json and
scram-credentials.json, and starts the coordinators, which create their topics and load their partitions.

`ClusterNode.start` (herd.server.cluster_node, imported only for a cluster node: an embedded node does not load
psycopg, 0.11 s of its start) opens the connection pool (one line and a non-zero exit if PostgreSQL cannot be reached,
refuses the password or lacks a privilege), brings the schema to this version (refusing a newer one), starts the
shared cluster (registration, lease, leadership) and the group and transaction coordinators, which host the
`__consumer_offsets` and `__transaction_state` partitions this node leads. From then on leadership moves are
followed as they happen (`_on_leadership`):
- a `__consumer_offsets` (or `__transaction_state`) partition gained is loaded (its groups, or transactional ids,
  answer COORDINATOR_LOAD_IN_PROGRESS until the replay is done), one lost is unloaded (its groups answer
  NOT_COORDINATOR and clients look the coordinator up again); a partition's moves are handled one after the
  other, in the order they happened;
- a data partition gained has its idempotent producers' state rebuilt from the stored batches, one lost forgets
  it.

`hand_over` (SIGTERM with controlled.shutdown.enable) gives this node's partitions to the live nodes before it
exits; `close` stops the cluster's background work and closes the store and the pool.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

from herd.config import BrokerConfig
from herd.runtime import CoordinatorRuntime
from herd.runtime.share_state import ShareStateRuntime
from herd.security.acl_store import open_file_store
from herd.security.credentials import FileCredentialStore
from herd.server.transactions import transaction_runtime

if TYPE_CHECKING:
    from herd.server.broker import Broker


class NodeBackend(Protocol):
    where: str  # where the data is, for the line `herd serve` logs once it listens

    async def hand_over(self) -> None:
        """Controlled shutdown: give this node's partitions to the other nodes (nothing to do on one node)."""
        ...

    async def close(self) -> None:
        """Stop the backend's background work and close what it opened (the broker closes its logs)."""
        ...


async def start_node(config: BrokerConfig, broker: Broker, http_url: str | None = None) -> NodeBackend:
    """The node herd.cluster.database.url asks for, started with `broker` (`http_url`: where this node's HTTP
    listener is reached, registered in a cluster). Raises MetadataError (embedded), DatabaseError, SchemaError
    or ClusterError (cluster mode)."""
    if config.get("herd.cluster.database.url") is None:
        return await EmbeddedNode.start(config, broker, http_url)
    from herd.server.cluster_node import ClusterNode  # only here: an embedded node does not load PostgreSQL's driver

    return await ClusterNode.start(config, broker, http_url)


class EmbeddedNode:
    """A single node over the broker's segment store (log.dirs)."""

    def __init__(self, config: BrokerConfig, broker: Broker) -> None:
        self.config = config
        self.broker = broker
        self.where = f"data in {', '.join(os.path.abspath(d) for d in config.log_dirs)}"

    @classmethod
    async def start(cls, config: BrokerConfig, broker: Broker, http_url: str | None = None) -> EmbeddedNode:
        """`http_url` is not needed: no other node looks for this one."""
        node = cls(config, broker)
        store = broker.store
        assert store is not None, "an embedded node has a segment store"
        broker.start()  # topics.json; raises MetadataError
        broker.use_acls(open_file_store(config, store.fs, store.root_dir))
        credentials = FileCredentialStore(store.fs, store.root_dir)
        credentials.load()
        broker.credentials = credentials
        broker.coordinator = CoordinatorRuntime(broker.cluster, config)
        broker.coordinator.start()
        broker.transactions = transaction_runtime(broker)
        broker.transactions.start()
        # share partitions' state, durable in __share_group_state (cluster_node.py: each node hosts what it leads)
        broker.share_state = ShareStateRuntime(broker.cluster, config, admin=broker.admin)
        broker.share_state.start()
        broker.shares.persister = broker.share_state
        return node

    async def hand_over(self) -> None:
        pass

    async def close(self) -> None:
        pass
