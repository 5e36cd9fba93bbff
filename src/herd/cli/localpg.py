"""A real PostgreSQL server on loopback, for `herd cluster up`, development and the tests.

`LocalPostgres(data_dir, port)` runs the `postgres` binary in the foreground as a child process: `start()`
runs `initdb` on an empty (or missing) data directory, reuses an initialised one, starts the server and
returns once it accepts connections; `stop()` asks for PostgreSQL's fast shutdown and waits. The binaries come
from `HERD_PG_BIN` if set, else from the pinned `pgserver` package (`pip install herd[cluster]`, which bundles
them; found without importing it, since its import starts work of its own), else from the machine's
`/usr/lib/postgresql/*/bin`.

Root: `initdb` and `postgres` refuse to run as root, and these machines run everything as root. Then both run
as the unprivileged `nobody` (group `nogroup`, no supplementary groups), through Popen's user/group arguments;
the data directory is handed to that user, and every directory above it must be searchable by it, which is
checked first (one line naming the directory that is not).

Authentication: the `postgres` superuser gets a random password at initdb, kept in `herd.password` in the data
directory (readable by its owner only), and TCP connections must give it (scram-sha-256). Trust would be
simpler, but a server listening on 127.0.0.1 is reachable by every user and process of the machine, and these
machines are shared: with trust any of them would be superuser of it. The Unix socket lives in the data
directory, which only its owner can enter, so connections over it are trusted. `url(dbname)` carries the
password; print `display_url` instead.

Settings suit a development and test server: 127.0.0.1 only, max_connections 200 (several herd nodes, each
with a pool, plus the tests), shared_buffers 512MB, and fsync and synchronous_commit ON: what herd's cluster
tests check is that an acknowledged write survives, which needs a server that really syncs.

A server left behind must not break the next start: the server is asked to stop when its launcher dies
(Linux's parent-death signal), and a stale `postmaster.pid` on a reused data directory is handled by
PostgreSQL itself, which removes it when its process is gone; a live one is reported in one line.
"""

from __future__ import annotations

import glob
import grp
import importlib.util
import os
import pwd
import random
import re
import secrets
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

UNPRIVILEGED_USER = "nobody"
UNPRIVILEGED_GROUP = "nogroup"
SUPERUSER = "postgres"
PASSWORD_FILE = "herd.password"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
KILL_GRACE_S = 10.0
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "max_connections": "200",
    "shared_buffers": "512MB",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "timezone": "UTC",
    "log_timezone": "UTC",
    "huge_pages": "off",
}
_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with its terminating NUL


class LocalPostgresError(Exception):
    """The local server cannot be set up, started or used; the message is one line for the user."""


def find_binaries() -> Path:
    """The directory holding `initdb` and `postgres`; raises LocalPostgresError when there is none."""
    explicit = os.environ.get("HERD_PG_BIN")
    if explicit:
        if not _has_binaries(Path(explicit)):
            raise LocalPostgresError(f"HERD_PG_BIN={explicit} holds no initdb and postgres")
        return Path(explicit)
    for candidate in [*_pgserver_bin(), *_machine_bins()]:
        if _has_binaries(candidate):
            return candidate
    raise LocalPostgresError(
        "no PostgreSQL server binaries found: pip install herd[cluster] (bundles them), "
        "install PostgreSQL, or set HERD_PG_BIN to the directory holding initdb and "
        "postgres"
    )


def _has_binaries(directory: Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in ("initdb", "postgres"))


def _pgserver_bin() -> list[Path]:
    # find_spec does not import the package (a top-level name runs no code); a module of the same name that is
    # not the package (no submodule_search_locations) is skipped.
    try:
        spec = importlib.util.find_spec("pgserver")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(location) / "pginstall" / "bin" for location in spec.submodule_search_locations]


def _machine_bins() -> list[Path]:
    def version(path: str) -> tuple[int, ...]:
        digits = re.findall(r"\d+", Path(path).parent.name)
        return tuple(int(d) for d in digits)

    return [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]


# Where free_port looks: above the well-known and most registered ports, and outside the range the kernel hands
# out to port-0 binds and outgoing connections (net.ipv4.ip_local_port_range, 32768-60999 by default).
_PICK_FLOOR = 10000
_PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for port-0 binds and outgoing connections (Linux's default where it cannot be read)."""
    try:
        low, high = (int(part) for part in _PORT_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def free_port(count: int = 1) -> int:
    """The first of `count` consecutive TCP ports on 127.0.0.1 that are free at the time of the call.

    For a server that cannot listen on port 0 and report its port (PostgreSQL, or `herd cluster up --base-port`).
    The ports are picked at random outside the kernel's ephemeral range, so no other process binding port 0 or
    connecting out can be given them between this call and the server's bind; two callers picking the same one
    is left to chance (1 in thousands), and the second to bind must try another (LocalPostgres does)."""
    low, high = _ephemeral_range()
    spans = [(_PICK_FLOOR, low - count), (high + 1, 65536 - count)]
    spans = [(first, last) for first, last in spans if last > first]
    for _ in range(100):
        if not spans:
            break
        first, last = random.choice(spans)
        base = random.randrange(first, last + 1)
        if all(port_is_free(base + i) for i in range(count)):
            return base
    if count == 1:  # no room outside the ephemeral range: any port free now
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    raise OSError(f"no {count} consecutive free ports on 127.0.0.1")


def port_is_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:`port` now (SO_REUSEADDR, as servers set it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def read_log(path: Path, offset: int = 0) -> str:
    """What was written to the log at `path` from byte `offset` on (a run's part of a log appended to by each
    run); '' when there is no log yet."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""


def write_private(path: Path, text: str) -> None:
    """Write `path` readable by its owner only (it holds a password), made anew: an older file's mode could
    be looser, and opening it would keep that mode."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def die_with_parent(sig: int) -> Callable[[], None] | None:
    """A Popen preexec_fn asking Linux to send `sig` to the child when the process that started it dies, so
    that a launcher killed with SIGKILL leaves no server behind; None elsewhere. It runs after Popen has
    changed the child's user (a change of user would clear it). Linux sends the signal when the *thread* that
    started the child ends (prctl(2), PR_SET_PDEATHSIG): start such children from a thread that lives as long
    as they should (the main thread), never from a short-lived worker thread."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)

    return preexec


class _RunAs:
    """Who runs initdb and postgres: this process's user, or `nobody` when this process is root."""

    def __init__(self) -> None:
        self.root = os.geteuid() == 0
        if not self.root:
            self.uid, self.gid, self.name = os.geteuid(), os.getegid(), pwd.getpwuid(os.geteuid()).pw_name
            return
        try:
            self.uid = pwd.getpwnam(UNPRIVILEGED_USER).pw_uid
            self.gid = grp.getgrnam(UNPRIVILEGED_GROUP).gr_gid
        except KeyError:
            raise LocalPostgresError(
                f"PostgreSQL refuses to run as root and this machine has no "
                f"{UNPRIVILEGED_USER}/{UNPRIVILEGED_GROUP} user to run it as"
            ) from None
        self.name = UNPRIVILEGED_USER

    def popen_args(self) -> dict:
        if not self.root:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def can_search(self, directory: Path) -> bool:
        st = directory.stat()
        if st.st_uid == self.uid:
            return bool(st.st_mode & stat.S_IXUSR)
        if st.st_gid == self.gid:
            return bool(st.st_mode & stat.S_IXGRP)
        return bool(st.st_mode & stat.S_IXOTH)

    def check_reachable(self, path: Path, what: str) -> None:
        """Every directory above `path` searchable by the server's user, or LocalPostgresError."""
        if not self.root:
            return
        for directory in reversed(path.parents):
            if not self.can_search(directory):
                raise LocalPostgresError(
                    f"PostgreSQL runs as {self.name} (it refuses root) and cannot reach the {what} {path}: "
                    f"{directory} is not searchable by {self.name}; use a directory under /tmp or "
                    f"chmod o+x {directory}"
                )


class LocalPostgres:
    """A PostgreSQL server on 127.0.0.1 whose data lives in `data_dir`; `port` 0 picks a free port.

    Use as a context manager or call `start()` and `stop()`. Raises LocalPostgresError (one line) when the
    binaries are missing, the data directory is unusable, the port is taken or the server does not start."""

    def __init__(self, data_dir: Path | str, port: int = 0) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.requested_port = port
        self.port = port
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.password: str | None = None

    # -- the server ------------------------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_S) -> LocalPostgres:
        """Initialise the data directory if needed, start the server, return when it accepts connections."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        bin_dir = find_binaries()
        run_as = _RunAs()
        run_as.check_reachable(bin_dir / "postgres", "PostgreSQL binaries in")
        try:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise LocalPostgresError(f"cannot create {self.data_dir.parent}: {e.strerror}") from None
        run_as.check_reachable(self.data_dir, "data directory")
        self._init(bin_dir, run_as)
        self.password = self._read_password()
        self._wait_for_reaping()
        for port in self._ports():
            self.port = port
            if not port_is_free(port):
                continue
            try:
                self._run(bin_dir, run_as, timeout)
                return self
            except _PortTaken:
                continue
        raise LocalPostgresError(f"cannot start PostgreSQL: port {self.port} on 127.0.0.1 is in use")

    def _wait_for_reaping(self, timeout: float = 10.0) -> None:
        """A server whose launcher was killed stops by itself but stays a zombie until its new parent reaps it,
        and PostgreSQL takes a zombie named in postmaster.pid for a running server: wait for it to be gone."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return
        deadline = time.monotonic() + timeout
        while _is_zombie(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def _ports(self) -> list[int]:
        """The ports to try: the one asked for; with 0, the one of the previous start (so that a restarted
        server keeps its URL) and then free ones, since another process may take a picked port first."""
        if self.requested_port:
            return [self.requested_port]
        previous = [self.port] if self.port else []
        return [*previous, *(free_port() for _ in range(3))]

    def stop(self, timeout: float = STOP_TIMEOUT_S, report: Callable[[str], None] | None = None) -> None:
        """Fast shutdown (active sessions are disconnected, a checkpoint is written) and wait for it; an
        immediate shutdown if that does not finish within `timeout`, and SIGKILL if that does not within
        KILL_GRACE_S, each step said to `report` (a line) if given. Returns within timeout + 2 * KILL_GRACE_S
        (unless a killed process is stuck in the kernel)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        say = report or (lambda line: None)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            pass
        say(
            f"PostgreSQL (pid {proc.pid}) did not finish its fast shutdown within {timeout:g} s: "
            f"immediate shutdown (log {self.log_path})"
        )
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            pass
        say(f"PostgreSQL (pid {proc.pid}) did not stop within {KILL_GRACE_S:g} s of SIGQUIT: killing it")
        proc.kill()
        try:
            proc.wait(KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            say(f"PostgreSQL (pid {proc.pid}) still runs {KILL_GRACE_S:g} s after SIGKILL; leaving it")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- databases -------------------------------------------------------------------------------------------

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL for `dbname` as the superuser, password included."""
        auth = f"{SUPERUSER}:{self.password}" if self.password else SUPERUSER
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{dbname}"

    def display_url(self, dbname: str = "postgres") -> str:
        """`url(dbname)` without the password, to be shown."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    @property
    def password_file(self) -> Path:
        return self.data_dir / PASSWORD_FILE

    def create_database(self, name: str, *, replace: bool = False) -> str:
        """Create database `name` unless it exists (`replace`: drop it first, with its sessions); its URL."""
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(self.url("postgres"), autocommit=True, connect_timeout=10) as conn:
                if replace:
                    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                    conn.execute(drop.format(sql.Identifier(name)))
                exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
                if not exists:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.Error as e:
            raise LocalPostgresError(
                f"cannot create database {name} on {self.display_url()}: {str(e).strip().splitlines()[-1]}"
            ) from None
        return self.url(name)

    # -- internals -------------------------------------------------------------------------------------------

    def _init(self, bin_dir: Path, run_as: _RunAs) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if any(self.data_dir.iterdir()):
            raise LocalPostgresError(f"{self.data_dir} is neither empty nor a PostgreSQL data directory")
        if run_as.root:
            os.chown(self.data_dir, run_as.uid, run_as.gid)
        os.chmod(self.data_dir, 0o700)
        password = secrets.token_urlsafe(24)
        with tempfile.NamedTemporaryFile("w", prefix="herd-pg-", suffix=".pw") as pwfile:
            pwfile.write(password + "\n")
            pwfile.flush()
            if run_as.root:
                os.chown(pwfile.name, run_as.uid, run_as.gid)
            args = [
                str(bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile.name}",
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "--encoding=UTF8",
                "--locale=C",
            ]
            result = subprocess.run(
                args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/", env=self._env(), **run_as.popen_args()
            )
        with open(self.log_path, "ab") as log:
            log.write(result.stdout)
        if result.returncode != 0:
            output = result.stdout.decode(errors="replace").splitlines()
            tail = " | ".join(line.strip() for line in output[-3:] if line.strip())
            self._remove_partial_init()
            raise LocalPostgresError(f"initdb failed (exit {result.returncode}; log {self.log_path}): {tail}")
        write_private(self.password_file, password + "\n")
        if run_as.root:
            os.chown(self.password_file, run_as.uid, run_as.gid)

    def _remove_partial_init(self) -> None:
        """Empty the data directory again after a failed initdb (it removes what it made itself, but not
        always), so that the next start can retry."""
        import shutil

        for child in self.data_dir.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    def _read_password(self) -> str | None:
        try:
            return self.password_file.read_text().strip() or None
        except FileNotFoundError:  # a data directory made by someone else: connect without a password
            return None

    def _run(self, bin_dir: Path, run_as: _RunAs, timeout: float) -> None:
        args = [
            str(bin_dir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-c",
            f"unix_socket_directories={self._socket_dir()}",
        ]
        for key, value in SETTINGS.items():
            args += ["-c", f"{key}={value}"]
        log = open(self.log_path, "ab")
        offset = log.tell()
        try:
            self.proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd="/",
                env=self._env(),
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGINT),
                **run_as.popen_args(),
            )
        finally:
            log.close()
        self._wait_ready(offset, timeout)

    def _socket_dir(self) -> str:
        # The socket path is bounded (sun_path): a data directory too deep for it gets no socket; TCP works.
        socket_path = f"{self.data_dir}/.s.PGSQL.{self.port}.lock"
        return str(self.data_dir) if len(socket_path.encode()) <= _SOCKET_PATH_MAX else ""

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG") and not k.startswith("LC_")}
        env["LC_ALL"] = "C"
        return env

    def _wait_ready(self, log_offset: int, timeout: float) -> None:
        """Until postmaster.pid names our process with status 'ready'; then one connection proves it."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._fail(log_offset)
            if self._pid_file_ready():
                break
            time.sleep(0.02)
        else:
            self.stop()
            raise LocalPostgresError(
                f"PostgreSQL did not start within {timeout:.0f} s; log {self.log_path}: {self._log_tail(log_offset)}"
            )
        self._check_connect(deadline)

    def _pid_file_ready(self) -> bool:
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
        except (FileNotFoundError, PermissionError):
            return False
        assert self.proc is not None
        return len(lines) >= 8 and lines[0].strip() == str(self.proc.pid) and lines[7].strip() == "ready"

    def _check_connect(self, deadline: float) -> None:
        import psycopg

        while True:
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=5).close()
                return
            except psycopg.OperationalError as e:
                if time.monotonic() > deadline:
                    self.stop()
                    raise LocalPostgresError(
                        f"PostgreSQL at {self.display_url()} started but refuses "
                        f"connections: {str(e).strip().splitlines()[-1]}"
                    ) from None
                time.sleep(0.1)

    def _fail(self, log_offset: int) -> None:
        assert self.proc is not None
        code, self.proc = self.proc.returncode, None
        text = read_log(self.log_path, log_offset)
        if "Address already in use" in text or "could not create any TCP/IP sockets" in text:
            raise _PortTaken()
        running = re.search(r'lock file "postmaster.pid" already exists.*?\(PID (\d+)\)', text, re.S)
        if running:
            raise LocalPostgresError(
                f"a PostgreSQL server (pid {running.group(1)}) already runs on "
                f"{self.data_dir}; stop it first (kill -INT {running.group(1)})"
            )
        raise LocalPostgresError(
            f"PostgreSQL exited at start (exit {code}; log {self.log_path}): {self._log_tail(log_offset)}"
        )

    def _log_tail(self, offset: int, lines: int = 3) -> str:
        text = [line.strip() for line in read_log(self.log_path, offset).splitlines() if line.strip()]
        return " | ".join(text[-lines:]) or "(no output)"


def process_state(pid: int) -> str:
    """The process's state letter from /proc (R, S, T stopped, Z zombie...); '' when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""


def _is_zombie(pid: int) -> bool:
    return process_state(pid) == "Z"


class _PortTaken(Exception):
    pass
