"""One broker for a module's tests on either of herd's backends: the embedded single node (segment files in
`log.dirs`) or a cluster of three nodes over PostgreSQL. The integration modules whose behaviour is the same on
both make their module-scoped broker fixture with `start_broker`, parametrized over `BACKENDS`; each test id then
names the backend it ran on (`test_x[cluster]`).

    @pytest.fixture(scope="module", params=BACKENDS)
    def shared_broker(request, tmp_path_factory):
        with start_broker(request, tmp_path_factory, "shared", {"num.partitions": "3"}) as b:
            yield b

Either backend gives the attributes the tests use of a `BrokerProcess`: `bootstrap` (every node, for real
clients), `host` and `port` (the node a raw-protocol test talks to), `log()` and `stop()`; and
`stored_partitions(topic)`, what the backend still stores of a topic.

Raw-protocol tests send every request to `port`, as to a node that leads everything. A cluster started with
`single_coordinator=True` runs one `__consumer_offsets` partition, so one node coordinates every group, and
`port` is that node: group and offset APIs sent there are answered as a client that found the coordinator would
have them answered. Without it, the cluster has no such node and `port` refuses to answer.

A test that fails on a cluster because herd's cluster mode deviates from Kafka there says how with
`xfail_on_cluster(reason)`: it runs on both, and its cluster run is reported as an expected failure.

A test that checks what only the embedded node does (a kill -9 and restart on its data directory, one broker
in Metadata, bad input on a single connection) says so with `embedded_only(reason)`: it then runs once, as
`[embedded]`.

A cluster's database is created afresh for each fixture (named after the module and the fixture), on the
session's PostgreSQL server, which is started only when a cluster is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
import pytest
from brokers import BrokerProcess
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i8
from pgcluster import create_topic_on, database_name, module_id
from rawkafka import RawClient

from herd.testing import HerdCluster
from herd.testing.wait import wait_until

BACKENDS = ("embedded", "cluster")
CLUSTER_NODES = 3
OFFSETS_TOPIC = "__consumer_offsets"
READY_TIMEOUT_S = 60.0
_PROBE_GROUPS = ("probe-a", "probe-b", "probe-c")

T = TypeVar("T")


class EmbeddedBroker(BrokerProcess):
    """The embedded single node: a `BrokerProcess` that also says what it stores."""

    backend = "embedded"
    host = "127.0.0.1"

    @property
    def ports(self) -> list[int]:
        """Every node's port: this one's."""
        return [self.port]

    def create_topic(self, topic: str, partitions: int) -> None:
        from groupmembers import create_topic  # tests/integration, where the tests that call this live

        create_topic(self.bootstrap, topic, partitions)

    def stored_partitions(self, topic: str) -> list[int]:
        """The partitions of `topic` that have a directory in log.dirs."""
        return sorted(
            int(d.name.rpartition("-")[2])
            for d in self.data_dir.glob(f"{topic}-*")
            if d.is_dir() and d.name.rpartition("-")[0] == topic
        )


class ClusterBroker:
    """A started HerdCluster (herd.testing's), seen by the tests as one broker."""

    backend = "cluster"
    host = "127.0.0.1"

    def __init__(self, cluster: HerdCluster, coordinator_port: int | None) -> None:
        self.cluster = cluster
        self._coordinator_port = coordinator_port

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def port(self) -> int:
        """The node that coordinates every group (see the module's docstring)."""
        if self._coordinator_port is None:
            raise AttributeError(
                "this cluster has several coordinators: start it with single_coordinator=True "
                "for a test that talks to one node"
            )
        return self._coordinator_port

    @property
    def ports(self) -> list[int]:
        """Every node's port (a raw request may go to each)."""
        return [node.port for node in self.cluster.nodes]

    def log(self) -> str:
        return "".join(f"--- node {i} ---\n{self.cluster.log(i)}" for i in range(len(self.cluster.nodes)))

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM to every node (each hands its partitions over); the first non-zero exit code, else 0."""
        self.cluster.close(timeout)
        codes = [node.proc.returncode for node in self.cluster.nodes if node.proc is not None]
        return next((code for code in codes if code != 0), 0)

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create `topic` and wait until every node knows it and its leaders. A node learns of a new topic from
        the database's notification, a few milliseconds after the node that created it answered: a produce to
        a leader that has not learned yet gets a retriable error, and a producer without idempotence and with
        several requests in flight (librdkafka's defaults) may then write a retried batch after later ones, as
        on Kafka. A test that checks the order of such a producer's writes creates its topic with this."""
        create_topic_on(self.cluster, topic, partitions)

    def stored_partitions(self, topic: str) -> list[int]:
        """The partitions of `topic` that the database still holds."""
        with psycopg.connect(self.cluster.database_url) as conn:
            rows = conn.execute(
                "SELECT p.partition FROM herd_partitions p JOIN herd_topics t "
                "ON t.topic_id = p.topic_id WHERE t.name = %s ORDER BY 1",
                (topic,),
            ).fetchall()
        return [r[0] for r in rows]


Broker = EmbeddedBroker | ClusterBroker


@contextmanager
def start_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str,
                 overrides: dict[str, str] | None = None, *,
                 single_coordinator: bool = False) -> Iterator[Broker]:  # fmt: skip
    """A broker on the backend `request.param` names, with `overrides` (on every node of a cluster), stopped
    when the block ends. `name`: the fixture's, for its directory and its database. `single_coordinator`: a
    cluster runs one `__consumer_offsets` partition, and `port` is the node that leads it (see the module's
    docstring); it does not change the embedded node."""
    overrides = dict(overrides or {})
    if request.param == "embedded":
        embedded = EmbeddedBroker(tmp_path_factory.mktemp(name) / "data", overrides).start()
        try:
            yield embedded
        finally:
            embedded.stop()
        return
    if single_coordinator:
        overrides["offsets.topic.num.partitions"] = "1"
    server = request.getfixturevalue("postgres_server")
    url = server.create_database(database_name(f"{module_id(request)}__{name}"), replace=True)
    cluster = HerdCluster(tmp_path_factory.mktemp(name), overrides=overrides, database_url=url, faults=False)
    try:
        cluster.start(nodes=CLUSTER_NODES, balanced=False)
        yield ClusterBroker(cluster, _wait_until_ready(cluster, single_coordinator))
    finally:
        cluster.close()


def _wait_until_ready(cluster: HerdCluster, single_coordinator: bool) -> int | None:
    """Wait until every node lists every node and sees a leader for each `__consumer_offsets` partition; with
    a single coordinator, also until every node names the same one and it has loaded its groups. Returns that
    coordinator's port (None without a single coordinator)."""
    ports = [node.port for node in cluster.nodes]
    _wait_for(lambda: all(_registered(port, len(ports)) for port in ports), "every node listing every node")
    if not single_coordinator:
        return None
    named = _wait_for(lambda: _same_coordinator(ports), "every node naming the same coordinator")
    _wait_for(lambda: _coordinator_loaded(named), "the coordinator loading its groups")
    return named


def _registered(port: int, nodes: int) -> bool:
    with RawClient(port) as c:
        r = c.request(
            3,
            12,
            MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        )
    offsets = [t for t in r.topics if t.name == OFFSETS_TOPIC]
    return (
        len(r.brokers) == nodes
        and len(offsets) == 1
        and bool(offsets[0].partitions)
        and all(p.leader_id >= 0 for p in offsets[0].partitions)
    )


def _same_coordinator(ports: list[int]) -> int | None:
    named = set()
    for port in ports:
        with RawClient(port) as c:
            r = c.request(10, 4, FindCoordinatorRequest(key_type=i8(0), coordinator_keys=_PROBE_GROUPS))
        if any(x.error_code != ErrorCode.none for x in r.coordinators):
            return None
        named |= {x.port for x in r.coordinators}
    return named.pop() if len(named) == 1 else None


def _coordinator_loaded(port: int) -> bool:
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    with RawClient(port) as c:
        r = c.request(15, 5, DescribeGroupsRequest(groups=_PROBE_GROUPS, include_authorized_operations=False))
    return all(g.error_code == ErrorCode.none for g in r.groups)


def _wait_for(condition: Callable[[], T], what: str, timeout: float = READY_TIMEOUT_S) -> T:
    # OSError: a node not answering yet
    return wait_until(condition, timeout, f"{what} (the cluster was not ready)", interval=0.05, ignore=(OSError,))


def xfail_on_cluster(reason: str, fixture: str) -> Callable[[Any], Any]:
    """Run a test on both backends, expecting it to fail on the cluster, where herd deviates from Kafka in the way
    `reason` says. Not strict: a deviation that depends on which node a client happens to ask may pass."""
    assert reason, "say how the cluster deviates"
    return pytest.mark.parametrize(
        fixture,
        ["embedded", pytest.param("cluster", marks=pytest.mark.xfail(reason=reason, strict=False))],
        indirect=True,
    )


# -- tests that only the embedded node runs -------------------------------------------------------------------


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The backend a test that takes no broker fixture of `start_broker` runs on (see `embedded_only`)."""
    return getattr(request, "param", "embedded")


def embedded_only(reason: str, fixture: str = "backend") -> Callable[[Any], Any]:
    """Run a test on the embedded node only, as `[embedded]`; `reason` says why the cluster cannot run it.
    `fixture`: the module's broker fixture when the test takes it (it is then started embedded only);
    otherwise the test is tagged through the `backend` fixture."""
    assert reason, "say why the test is embedded-only"

    def mark(test: Any) -> Any:
        test = pytest.mark.parametrize(fixture, ["embedded"], indirect=True)(test)
        test = pytest.mark.embedded_only(reason)(test)
        return pytest.mark.usefixtures(fixture)(test) if fixture == "backend" else test

    return mark
