"""herd's pytest plugin, loaded through the `pytest11` entry point of the installed package (docs/testing.md).

Fixtures (all named `herd_*`; none starts anything until a test asks for it, and loading the plugin imports
nothing but this module):

    herd_broker          session   a `herd serve` process on free ports, faults enabled (a HerdBroker)
    herd_cluster         session   PostgreSQL and 3 nodes (a HerdCluster); skipped without PostgreSQL
    herd_admin           session   blocking admin helpers on herd_broker (a HerdAdmin: waits for group states)
    herd_faults          function  herd_broker's Faults; every rule is removed after the test
    herd_topic           function  a fresh topic (1 partition) on herd_broker
    herd_topic_factory   function  make(partitions=1, name=None, configs=None) -> a fresh topic's name
    herd_group           function  a fresh group id

Options (command line, or the ini keys in brackets): `--herd-bootstrap HOST:PORT` [herd_bootstrap] points
herd_broker at a broker that runs already, `--herd-http HOST:PORT` [herd_http] names its HTTP listener (for
faults), `--herd-override KEY=VALUE` (repeatable) [herd_overrides, one per line] sets broker properties of the
brokers the plugin starts.

After every test that used one of the fixtures, the fault rules of the brokers in use are removed and a broker
of the plugin's that the test stopped or killed is started again (same data, same ports), so that the next
test finds it as the session began.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import pytest

if TYPE_CHECKING:
    from herd.testing.admin import HerdAdmin
    from herd.testing.broker import HerdBroker, HerdCluster
    from herd.testing.faults import Faults

_LIVE = pytest.StashKey["list[HerdBroker | HerdCluster]"]()
_FIXTURES = frozenset({"herd_broker", "herd_cluster"})
_T = TypeVar("_T", "HerdBroker", "HerdCluster")


@dataclass(frozen=True)
class _Options:
    bootstrap: str | None
    http: str | None
    overrides: dict[str, str]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("herd", "herd broker fixtures (docs/testing.md)")
    group.addoption(
        "--herd-bootstrap",
        metavar="HOST:PORT",
        help="herd_broker is this running broker instead of one the tests start",
    )
    group.addoption(
        "--herd-http",
        metavar="HOST:PORT",
        help="the HTTP listener of the --herd-bootstrap broker (herd.http.listener), for faults",
    )
    group.addoption(
        "--herd-override",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a broker property of the brokers the fixtures start (repeatable)",
    )
    parser.addini("herd_bootstrap", "herd_broker is this running broker (as --herd-bootstrap)")
    parser.addini("herd_http", "the HTTP listener of the herd_bootstrap broker (as --herd-http)")
    parser.addini("herd_overrides", "broker properties KEY=VALUE, one per line (as --herd-override)", type="linelist")


def pytest_configure(config: pytest.Config) -> None:
    _options(config)  # a bad option stops the session before it starts, in one line


def _options(config: pytest.Config) -> _Options:
    bootstrap = config.getoption("herd_bootstrap") or config.getini("herd_bootstrap") or None
    http = config.getoption("herd_http") or config.getini("herd_http") or None
    if http and not bootstrap:
        raise pytest.UsageError(
            "--herd-http names the HTTP listener of the --herd-bootstrap broker: give both, or neither"
        )
    overrides = {}
    for item in [*config.getini("herd_overrides"), *config.getoption("herd_override")]:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"--herd-override {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return _Options(bootstrap, http, overrides)


def _live(config: pytest.Config) -> list[HerdBroker | HerdCluster]:
    return config.stash.setdefault(_LIVE, [])


def _in_session(config: pytest.Config, started: _T) -> Iterator[_T]:
    """A session fixture's body for a started broker or cluster: known to the after-test reset while it is in
    use, closed at the end."""
    _live(config).append(started)
    try:
        yield started
    finally:
        _live(config).remove(started)
        started.close()


# -- the brokers ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def herd_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdBroker]:
    """A `herd serve` process for the session (or the --herd-bootstrap broker)."""
    from herd.testing.broker import HerdBroker

    options = _options(request.config)
    if options.bootstrap:
        broker = HerdBroker.attach(options.bootstrap, options.http)
    else:
        broker = HerdBroker(tmp_path_factory.mktemp("herd-broker"), options.overrides).start()
    yield from _in_session(request.config, broker)


@pytest.fixture(scope="session")
def herd_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HerdCluster]:
    """PostgreSQL and three nodes for the session; the test is skipped when no PostgreSQL can be had."""
    from herd.cli.localpg import LocalPostgresError
    from herd.testing.broker import HerdCluster

    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("herd_cluster needs psycopg: pip install herd[cluster]")
    cluster = HerdCluster(tmp_path_factory.mktemp("herd-cluster"), 3, _options(request.config).overrides)
    try:
        cluster.start()
    except LocalPostgresError as e:
        pytest.skip(f"herd_cluster: {e}")
    yield from _in_session(request.config, cluster)


@pytest.fixture(autouse=True)
def _herd_after_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used herd_broker or herd_cluster: their fault rules removed, their stopped nodes
    started again. Costs one set intersection for the tests that use neither."""
    yield
    if _FIXTURES.isdisjoint(request.fixturenames):
        return
    from herd.testing.broker import HerdCluster

    for started in list(_live(request.config)):
        if isinstance(started, HerdCluster):
            for i, node in enumerate(started.nodes):
                if not node.running:
                    started.restart(i)
                _clear_faults(node)
        else:
            if started.proc is not None and not started.running:
                started.restart()
            _clear_faults(started)


def _clear_faults(broker: HerdBroker) -> None:
    if broker.faults_enabled:
        broker.faults.clear()


# -- per test ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def herd_admin(herd_broker: HerdBroker) -> HerdAdmin:
    """Blocking admin helpers on herd_broker: create_topic, describe_group, wait_for_group_state,
    wait_for_members, committed."""
    from herd.testing.admin import HerdAdmin

    return HerdAdmin(herd_broker.bootstrap)


@pytest.fixture
def herd_faults(herd_broker: HerdBroker) -> Iterator[Faults]:
    """herd_broker's fault injection; every rule is removed when the test ends."""
    faults = herd_broker.faults
    try:
        yield faults
    finally:
        faults.clear()


@pytest.fixture
def herd_topic_factory(herd_admin: HerdAdmin, request: pytest.FixtureRequest) -> Callable[..., str]:
    """make(partitions=1, name=None, configs=None): create a topic (a fresh name unless given); its name."""
    from herd.testing.admin import unique_name

    def make(partitions: int = 1, name: str | None = None, configs: Mapping[str, str] | None = None) -> str:
        topic = name or unique_name("herd-topic", request.node.name)
        return herd_admin.create_topic(topic, partitions, configs)

    return make


@pytest.fixture
def herd_topic(herd_topic_factory: Callable[..., str]) -> str:
    """A fresh topic of one partition."""
    return herd_topic_factory()


@pytest.fixture
def herd_group(request: pytest.FixtureRequest) -> str:
    """A fresh consumer group id."""
    from herd.testing.admin import unique_name

    return unique_name("herd-group", request.node.name)
