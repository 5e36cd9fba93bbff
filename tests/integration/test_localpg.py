"""LocalPostgres, the real PostgreSQL server herd runs for `herd cluster up` and the tests: it starts, keeps
its data across restarts, runs unprivileged when started by root, and every way it can fail is one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest
from processes import first_line

from herd.cli import localpg
from herd.cli.localpg import LocalPostgres, LocalPostgresError, process_state
from herd.testing.wait import wait_until


def _gone(pid: int, timeout: float = 15.0) -> None:
    def exited() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return process_state(pid) == "Z"  # a zombie awaiting its reaper

    wait_until(exited, timeout, f"process {pid} to exit", interval=0.05)


def test_starts_keeps_data_across_restarts_and_stops(open_tmp_path):
    pg = LocalPostgres(open_tmp_path / "data")
    with pg:
        port, pid = pg.port, pg.pid
        assert port > 0
        url = pg.create_database("kept")
        with psycopg.connect(url) as conn:
            assert conn.execute("SHOW fsync").fetchone() == ("on",)
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
            assert conn.execute("SHOW max_connections").fetchone() == ("200",)
            assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
            conn.execute("CREATE TABLE t (v text)")
            conn.execute("INSERT INTO t VALUES ('survives')")
        owner = Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0]
        assert int(owner) == (65534 if os.geteuid() == 0 else os.geteuid())  # nobody when started by root
    assert pid is not None
    _gone(pid)
    assert not pg.running
    with pg:  # the initialised directory is reused, on the same port
        assert pg.port == port
        assert pg.create_database("kept") == url  # exists already: kept as it is
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT v FROM t").fetchall() == [("survives",)]


def test_a_password_is_required_over_tcp(open_tmp_path):
    with LocalPostgres(open_tmp_path / "data") as pg:
        assert pg.password and pg.password not in pg.display_url("x")
        assert pg.password_file.stat().st_mode & 0o077 == 0
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(f"postgresql://postgres@127.0.0.1:{pg.port}/postgres", connect_timeout=5)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(f"postgresql://postgres:wrong@127.0.0.1:{pg.port}/postgres", connect_timeout=5)


def test_create_database_replace_starts_empty(open_tmp_path):
    with LocalPostgres(open_tmp_path / "data") as pg:
        url = pg.create_database("fresh")
        with psycopg.connect(url) as conn:
            conn.execute("CREATE TABLE t (v int)")
            conn.commit()
            assert pg.create_database("fresh", replace=True) == url  # its session is closed by the drop
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('t')").fetchone() == (None,)


def test_a_taken_port_is_one_line(open_tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        expected = f"^cannot start PostgreSQL: port {port} on 127.0.0.1 is in use$"
        with pytest.raises(LocalPostgresError, match=expected):
            LocalPostgres(open_tmp_path / "data", port=port).start()


def test_no_binaries_is_one_line(monkeypatch, open_tmp_path):
    monkeypatch.setenv("HERD_PG_BIN", str(open_tmp_path / "nothing"))
    with pytest.raises(LocalPostgresError, match="HERD_PG_BIN=.*holds no initdb and postgres"):
        LocalPostgres(open_tmp_path / "data").start()
    monkeypatch.delenv("HERD_PG_BIN")
    monkeypatch.setattr(localpg, "_pgserver_bin", lambda: [])
    monkeypatch.setattr(localpg, "_machine_bins", lambda: [])
    with pytest.raises(LocalPostgresError) as e:
        LocalPostgres(open_tmp_path / "data").start()
    assert "no PostgreSQL server binaries found: pip install herd[cluster]" in str(e.value)
    assert "install PostgreSQL" in str(e.value) and "\n" not in str(e.value)


def test_binaries_found_without_importing_pgserver():
    code = (
        "import sys; from herd.cli.localpg import find_binaries; print(find_binaries()); "
        "print('pgserver' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = result.stdout.split()
    assert out[0].endswith("pgserver/pginstall/bin")
    assert out[1] == "False"


def test_initdb_failure_shows_the_end_of_its_log(monkeypatch, open_tmp_path):
    fake = open_tmp_path / "bin"
    fake.mkdir()
    (fake / "initdb").write_text("#!/bin/sh\necho starting\necho 'initdb: error: something broke' >&2\nexit 1\n")
    (fake / "postgres").write_text("#!/bin/sh\nexit 1\n")
    for name in ("initdb", "postgres"):
        os.chmod(fake / name, 0o755)
    monkeypatch.setenv("HERD_PG_BIN", str(fake))
    with pytest.raises(LocalPostgresError) as e:
        LocalPostgres(open_tmp_path / "data").start()
    message = str(e.value)
    assert message.startswith("initdb failed (exit 1; log ") and "\n" not in message
    assert message.endswith("starting | initdb: error: something broke")
    assert not any((open_tmp_path / "data").iterdir())  # emptied, so that the next start can try again


def test_a_directory_root_cannot_hand_over_is_one_line(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root hands PostgreSQL to another user")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(LocalPostgresError) as e:
        LocalPostgres(private / "data").start()
    message = str(e.value)
    assert "PostgreSQL runs as nobody (it refuses root) and cannot reach the data directory" in message
    assert "is not searchable by nobody" in message and "\n" not in message


def test_a_directory_that_is_something_else_is_refused(open_tmp_path):
    (open_tmp_path / "data").mkdir()
    (open_tmp_path / "data" / "mine.txt").write_text("not PostgreSQL's")
    with pytest.raises(LocalPostgresError, match="is neither empty nor a PostgreSQL data directory"):
        LocalPostgres(open_tmp_path / "data").start()


def test_a_second_server_on_the_same_directory_is_one_line(open_tmp_path):
    with LocalPostgres(open_tmp_path / "data") as first:
        with pytest.raises(LocalPostgresError) as e:
            LocalPostgres(open_tmp_path / "data").start()
        assert str(e.value) == (
            f"a PostgreSQL server (pid {first.pid}) already runs on "
            f"{open_tmp_path / 'data'}; stop it first (kill -INT {first.pid})"
        )
        assert first.running


def test_a_killed_launcher_leaves_no_server_and_the_next_start_works(open_tmp_path):
    """The launcher dies with SIGKILL (no cleanup): the server stops by itself, and its stale postmaster.pid
    does not stop the next start on the same directory."""
    script = textwrap.dedent(f"""
        import sys, time
        from herd.cli.localpg import LocalPostgres
        pg = LocalPostgres({str(open_tmp_path / "data")!r}).start()
        print(pg.pid, flush=True)
        time.sleep(600)
    """)
    launcher = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(first_line(launcher, 60, "the launcher's PostgreSQL server pid"))
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(10)
        _gone(pid)
    finally:
        launcher.kill()
        launcher.wait()
    pid_file = open_tmp_path / "data" / "postmaster.pid"
    if not pid_file.exists():  # a fast shutdown removes it; leave one behind as a crash would
        pid_file.write_text(f"{pid}\n{open_tmp_path / 'data'}\n0\n5432\n\n127.0.0.1\n0 0\nready\n")
    with LocalPostgres(open_tmp_path / "data") as pg:
        with psycopg.connect(pg.url()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
