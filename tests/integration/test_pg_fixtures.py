"""The fixtures of tests/pgcluster.py: one PostgreSQL per session, a fresh database per module, herd processes
that never outlive their HerdCluster (herd.testing's, on the test's database)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
from pgcluster import database_name

from herd.cli.localpg import process_state
from herd.testing import HerdCluster
from herd.testing.wait import wait_until

TESTS_DIR = Path(__file__).parent.parent


def _alive(pid: int) -> bool:
    return process_state(pid) not in ("", "Z")


def test_pg_url_is_a_database_named_after_the_module(pg_url, postgres_server):
    with psycopg.connect(pg_url) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]
        conn.execute("CREATE TABLE mine (v int)")
    assert name == database_name("integration/test_pg_fixtures") == "integration_test_pg_fixtures"
    assert pg_url == postgres_server.url(name)


def test_pg_test_url_is_another_fresh_database(pg_url, pg_test_url):
    with psycopg.connect(pg_test_url) as conn:
        name = conn.execute("SELECT current_database()").fetchone()[0]
        assert "test_pg_test_url_is_another_fresh_database" in name and len(name) <= 63
        assert conn.execute("SELECT to_regclass('mine')").fetchone() == (None,)


def test_database_names_are_valid_and_distinct():
    long_a, long_b = "a" * 80 + "/x", "b" + "a" * 79 + "/x"
    assert database_name("unit/log/postgres/test_store") == "unit_log_postgres_test_store"
    assert database_name("m__test_x[1-2]") == "m__test_x_1_2"
    assert len(database_name(long_a)) <= 63 and database_name(long_a) != database_name(long_b)


@pytest.mark.pg  # in a pytest of its own
def test_two_modules_get_their_own_databases_and_the_session_leaves_no_server(tmp_path):
    """A pytest session of its own, with two modules: each gets its database on the one server, and when the
    session ends that server is gone with its directory."""
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS_DIR)!r})
        from pgcluster import pg_url, postgres_server  # noqa: F401
    """)
    )
    body = textwrap.dedent("""
        import psycopg

        def test_record(pg_url, postgres_server):
            with psycopg.connect(pg_url) as conn:
                name = conn.execute("SELECT current_database()").fetchone()[0]
                conn.execute("CREATE TABLE same_name (v int)")  # the other module's is elsewhere
            with open({out!r}, "a") as f:
                f.write(f"{{name}} {{postgres_server.pid}} {{postgres_server.data_dir}}\\n")
    """)
    out = tmp_path / "seen.txt"
    for module in ("test_first.py", "test_second.py"):
        (tmp_path / module).write_text(body.format(out=str(out)))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    seen = [line.split() for line in out.read_text().splitlines()]
    assert sorted(name for name, _, _ in seen) == ["test_first", "test_second"]
    (_, pid, data_dir), (_, other_pid, _) = seen
    assert pid == other_pid  # one server for the session
    wait_until(lambda: not _alive(int(pid)), 10, f"the session's PostgreSQL ({pid}) to exit", interval=0.05)
    assert not Path(data_dir).exists()


def test_herd_cluster_runs_signals_and_closes_its_nodes(pg_test_url, tmp_path):
    cluster = HerdCluster(tmp_path / "cluster", database_url=pg_test_url, faults=False)
    with cluster.start(nodes=2, balanced=False):
        assert len(cluster.addresses) == 2 and cluster.bootstrap == ",".join(cluster.addresses)
        pids = [node.proc.pid for node in cluster.nodes]
        config = tmp_path / "cluster" / "node-0.properties"
        assert config.read_text() == f"herd.cluster.database.url={pg_test_url}\n"
        assert config.stat().st_mode & 0o077 == 0
        assert pg_test_url not in Path(f"/proc/{pids[0]}/cmdline").read_text()

        cluster.pause(1)
        assert cluster.paused(1)
        cluster.resume(1)
        assert not cluster.paused(1)
        assert cluster.terminate(1) == 0  # graceful
        assert cluster.addresses == [cluster.address(0)]
        cluster.restart(1)
        assert cluster.running(1) and cluster.address(1) in cluster.addresses

        assert cluster.add_node() == 2
        assert "node.id=2" in " ".join(cluster.nodes[2].proc.args)
        cluster.kill(2)
        assert not cluster.running(2)
        cluster.pause(0)  # close() copes with a paused node
        pids = [node.proc.pid for node in cluster.nodes]
    assert not any(_alive(pid) for pid in pids)
