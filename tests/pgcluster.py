"""PostgreSQL and herd clusters for the tests: one real PostgreSQL server per test session, a fresh database
per module (or per test), for herd.testing's `HerdCluster` (N `herd serve` processes sharing one database), and
the probes of such a cluster that need the tests' own libraries (`create_topic`, `leaders`, `wait_offsets_spread`,
`stored_generation`).

Fixtures (registered in tests/conftest.py):
    postgres_server  session: a started LocalPostgres (herd.cli.localpg); set up only when a test asks for it
    pg_url           module:  the URL of a fresh database named after the test module
    pg_test_url      function: the URL of a fresh database named after the test
    new_cluster      function: a herd.testing.HerdCluster on pg_test_url (no fault listener), not started yet;
                     closed after the test
    open_tmp_path    function: a temporary directory PostgreSQL's unprivileged user can reach (see below)

The server's data lives under <tmp>/herd-tests-pg/<pid>-*, not under pytest's own temporary directory: that
one is private to its user (0700), and when the tests run as root PostgreSQL runs as `nobody`, which must
reach its data directory. A directory left by a session that was killed (its pid gone) is removed by the next
session; its server was stopped when that session died (LocalPostgres asks for that), and PostgreSQL would
stop by itself once its data directory is gone.

The module is not called pgserver: tests/ is on sys.path, and a module of that name would hide the pgserver
package whose binaries LocalPostgres runs.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from rawkafka import RawClient

from herd.cli.localpg import LocalPostgres
from herd.cluster.topics import OFFSETS_TOPIC
from herd.coordinator.partition import coordinator_partition
from herd.coordinator.records import (
    GROUP_METADATA_KEY_TYPE,
    decode_group_metadata_key,
    decode_group_metadata_value,
    record_type,
)
from herd.runtime.batches import decode_batches
from herd.testing import HerdCluster
from herd.testing.broker import remove_leftovers
from herd.testing.wait import wait_until

_NAME_MAX = 63  # PostgreSQL's identifier length


def database_name(text: str) -> str:
    """A valid, readable database name for `text` (a module path or a test id); a long one keeps its end and a
    hash of the whole, so distinct texts give distinct names."""
    name = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_") or "db"
    if len(name) > _NAME_MAX:
        digest = hashlib.sha1(text.encode()).hexdigest()[:10]
        name = f"{name[-(_NAME_MAX - 11) :]}_{digest}".lstrip("_")
    return name


def shared_tmp_root() -> Path:
    """<tmp>/herd-tests-pg, open to every user as /tmp is (PostgreSQL's `nobody` must reach into it)."""
    root = Path(tempfile.gettempdir()) / "herd-tests-pg"
    root.mkdir(exist_ok=True)
    if root.stat().st_uid == os.geteuid():
        os.chmod(root, 0o1777)
    return root


# -- probes of a herd.testing.HerdCluster that need the tests' libraries (confluent-kafka, RawClient, psycopg) ---


def leaders_of(cluster: HerdCluster, topic: str) -> dict[int, int]:
    """partition -> the node leading it, as the running nodes tell a client (confluent-kafka's Metadata)."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=30)
    return {p: m.leader for p, m in metadata.topics[topic].partitions.items()}


def create_topic_on(cluster: HerdCluster, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Create `topic` (through any node) and wait until every running node knows it and a leader, among the
    nodes it lists, for each partition: a node learns of a new topic from PostgreSQL's notification, a few
    milliseconds after the node that created it answered."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout)
    _until(
        lambda: all(
            knows_topic(cluster.nodes[i].port, topic, partitions)
            for i in range(len(cluster.nodes))
            if cluster.running(i) and not cluster.paused(i)
        ),
        f"every node knowing {topic}",
        timeout,
    )


def knows_topic(port: int, topic: str, partitions: int) -> bool:
    """Whether the node on `port` lists `topic` with `partitions` partitions, each led by a node it lists."""
    request = MetadataRequest(
        topics=(MetadataRequestTopic(name=topic, topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with RawClient(port) as c:
        answer = c.request(3, 12, request)
    listed = {b.node_id for b in answer.brokers}
    found = [p for t in answer.topics if t.name == topic and t.error_code == 0 for p in t.partitions]
    return len(found) == partitions and all(p.leader_id in listed for p in found)


def wait_offsets_spread(cluster: HerdCluster, partitions: int, timeout: float = 60.0) -> None:
    """Wait until every running node names the same leaders of the `partitions` partitions of
    `__consumer_offsets`, as many on each running node, and each leader has loaded its own (DescribeGroups of
    a group stored there answers NONE, not COORDINATOR_LOAD_IN_PROGRESS)."""
    probes: dict[int, str] = {}
    for n in itertools.count():
        if len(probes) == partitions:
            break
        probes.setdefault(coordinator_partition(f"probe-{n}", partitions), f"probe-{n}")
    running = [i for i in range(len(cluster.nodes)) if cluster.running(i)]
    request = MetadataRequest(
        topics=(MetadataRequestTopic(name="__consumer_offsets", topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )

    def leaders(i: int) -> dict[int, int]:
        with RawClient(cluster.nodes[i].port) as c:
            return {p.partition_index: p.leader_id for t in c.request(3, 12, request).topics for p in t.partitions}

    def spread_and_loaded() -> bool:
        views = [leaders(i) for i in running]
        if any(view != views[0] for view in views) or sorted(views[0].values()) != sorted(
            running * (partitions // len(running))
        ):
            return False
        for partition, leader in views[0].items():
            with RawClient(cluster.nodes[leader].port) as c:
                (group,) = c.request(
                    15, 5, DescribeGroupsRequest(groups=(probes[partition],), include_authorized_operations=False)
                ).groups
            if group.error_code != 0:
                return False
        return True

    _until(spread_and_loaded, "the offsets partitions spread over the nodes and loaded", timeout)


def stored_generation(cluster: HerdCluster, group: str) -> int:
    """The generation of the group's last GroupMetadata record in `__consumer_offsets` (what a coordinator
    loading the group starts from); -1 if there is none."""
    assert cluster.database_url is not None
    with psycopg.connect(cluster.database_url) as conn:
        rows = conn.execute(
            "SELECT b.data FROM herd_batches b JOIN herd_partitions p ON p.pid = b.pid JOIN herd_topics t "
            "ON t.topic_id = p.topic_id WHERE t.name = %s ORDER BY p.partition, b.base_offset",
            (OFFSETS_TOPIC,),
        ).fetchall()
    generation = -1
    for (data,) in rows:
        for _, records in decode_batches(bytes(data)):
            for key, value in records:
                if record_type(key) == GROUP_METADATA_KEY_TYPE and decode_group_metadata_key(key).group == group:
                    generation = -1 if value is None else decode_group_metadata_value(value).generation
    return generation


def _until(condition: Callable[[], bool], what: str, timeout: float) -> None:
    """Wait until `condition()` holds, polling every 50 ms; a node that refuses connections (OSError) is not
    ready yet."""
    wait_until(condition, timeout, what, interval=0.05, ignore=(OSError,))


# -- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[LocalPostgres]:
    root = shared_tmp_root()
    remove_leftovers(root)
    session_dir = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
    os.chmod(session_dir, 0o755)
    server = LocalPostgres(session_dir / "data")
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(session_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_url(postgres_server: LocalPostgres, request: pytest.FixtureRequest) -> str:
    return postgres_server.create_database(database_name(module_id(request)), replace=True)


@pytest.fixture
def pg_test_url(postgres_server: LocalPostgres, request: pytest.FixtureRequest) -> str:
    return postgres_server.create_database(database_name(f"{module_id(request)}__{request.node.name}"), replace=True)


@pytest.fixture
def new_cluster(pg_test_url: str, tmp_path: Path) -> Iterator[HerdCluster]:
    cluster = HerdCluster(tmp_path / "cluster", database_url=pg_test_url, faults=False)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def open_tmp_path() -> Iterator[Path]:
    """A directory for a LocalPostgres of a test's own (pytest's tmp_path is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=shared_tmp_root()))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def module_id(request: pytest.FixtureRequest) -> str:
    """The module's path below tests/ (two test modules of the same name in different directories differ)."""
    path = Path(request.module.__file__)
    tests_dir = Path(__file__).parent
    try:
        return str(path.relative_to(tests_dir).with_suffix(""))
    except ValueError:
        return path.stem
