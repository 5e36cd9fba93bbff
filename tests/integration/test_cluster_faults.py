"""Cluster mode when PostgreSQL is not what it should be: a node that cannot use the database says why in one
line (never showing the password) and exits non-zero; a database that goes away while nodes run costs only
retriable errors (never an acknowledgement of something not stored), and the nodes carry on by themselves when
it comes back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from clients import confluent_read_all
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from groupmembers import wait_for
from ports import refused_port

from herd.cli.localpg import LocalPostgres
from herd.testing import HerdCluster

pytestmark = pytest.mark.timeout(240)


def _serve(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "herd",
            "serve",
            "--override",
            f"herd.cluster.database.url={url}",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={tmp_path / 'data'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _with_password(url: str, password: str, user: str | None = None) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    name = user or parts.username
    return urlunsplit((parts.scheme, f"{name}:{password}@{host}", parts.path, parts.query, ""))


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("herd: error: ")
    assert "Traceback" not in result.stderr
    return lines[0]


def test_an_unreachable_database_is_one_line_naming_it_without_the_password(tmp_path: Path) -> None:
    with refused_port() as port:
        line = _one_line_error(_serve(f"postgresql://herd:s3cret@127.0.0.1:{port}/herd", tmp_path))
    assert f"postgresql://herd@127.0.0.1:{port}/herd" in line
    assert "s3cret" not in line


def test_a_wrong_password_is_one_line(pg_url: str, tmp_path: Path) -> None:
    line = _one_line_error(_serve(_with_password(pg_url, "not-the-password"), tmp_path))
    assert "password" in line and "not-the-password" not in line


def test_a_missing_privilege_is_one_line(pg_url: str, tmp_path: Path) -> None:
    """A user that may connect but not create herd's tables (PostgreSQL 15+ gives only the owner CREATE on
    the public schema)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS herd_reader")
        conn.execute("CREATE ROLE herd_reader LOGIN PASSWORD 'reader-pw'")
    line = _one_line_error(_serve(_with_password(pg_url, "reader-pw", user="herd_reader"), tmp_path))
    assert "privilege" in line and "reader-pw" not in line


def test_a_newer_schema_is_refused_in_one_line(pg_test_url: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_test_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE herd_meta (key text PRIMARY KEY, value text NOT NULL)")
        conn.execute("INSERT INTO herd_meta VALUES ('schema_version', '99')")
    line = _one_line_error(_serve(pg_test_url, tmp_path))
    assert "schema version 99" in line and "upgrade herd" in line


@pytest.mark.parametrize("outage_s", [2.0, 4.5], ids=["shorter-than-the-lease", "longer-than-the-lease"])
def test_the_database_gone_while_running_costs_only_retriable_errors_and_the_nodes_recover(
    open_tmp_path: Path, tmp_path: Path, outage_s: float
) -> None:
    """PostgreSQL (a server of this test's own) is stopped while a producer sends and a consumer commits, then
    started again on the same port: every produce and commit during the outage fails retriably or waits; once
    it is back, everything acknowledged is readable exactly once and commits succeed, with no node restarted.
    Shorter than the nodes' 3 s lease, they keep their partitions and reload them (stored state and producers)
    after the failed commits; longer, they give everything up and take it back."""
    server = LocalPostgres(open_tmp_path / "pg").start()
    try:
        url = server.create_database("outage")
        cluster = HerdCluster(
            tmp_path / "cluster",
            overrides={
                "broker.session.timeout.ms": "3000",
                "broker.heartbeat.interval.ms": "500",
                "group.initial.rebalance.delay.ms": "0",
                "offsets.topic.num.partitions": "3",
            },
            database_url=url,
            faults=False,
        )
        with cluster.start(nodes=2, balanced=False):
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            _eventually(lambda: len(admin.list_topics(timeout=5).brokers) == 2)
            admin.create_topics([NewTopic("outage", 4, 1)])["outage"].result(20)
            acked: dict[int, list[bytes]] = defaultdict(list)
            failed: list[KafkaError] = []
            producer = Producer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 120000,
                    "topic.metadata.refresh.interval.ms": 1000,
                }
            )

            def delivered(error: KafkaError | None, message) -> None:  # type: ignore[no-untyped-def]
                if error is not None:
                    failed.append(error)
                else:
                    acked[message.partition()].append(message.value())

            stop = threading.Event()
            sent = 0

            def produce() -> None:
                nonlocal sent
                while not stop.is_set():
                    producer.produce("outage", value=b"%08d" % sent, partition=sent % 4, on_delivery=delivered)
                    sent += 1
                    producer.poll(0.002)
                producer.flush(120)

            thread = threading.Thread(target=produce, daemon=True)
            thread.start()
            _eventually(lambda: sum(map(len, acked.values())) >= 500)
            commits: list[tuple[KafkaError | None, int]] = []
            consumer = Consumer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "group.id": "outage-group",
                    "enable.auto.commit": False,
                    "on_commit": lambda e, tps: commits.append((e, tps[0].offset if tps else -1)),
                }
            )
            consumer.commit(offsets=[TopicPartition("outage", 0, 5)], asynchronous=False)

            server.stop()
            time.sleep(1)  # answers sent before it stopped have arrived
            during = sum(map(len, acked.values()))
            time.sleep(outage_s - 1)
            acked_while_down = sum(map(len, acked.values())) - during
            commits.clear()
            consumer.commit(offsets=[TopicPartition("outage", 0, 7)], asynchronous=True)  # answered later
            consumer.poll(2)
            assert not [c for c in commits if c[0] is None], "a commit acknowledged while the database was down"
            server.start()  # the same port: the nodes' pools reconnect by themselves

            before_recovery = sent
            _eventually(lambda: sum(map(len, acked.values())) > during + 500 and sent > before_recovery, timeout=60)
            stop.set()
            thread.join(150)
            _eventually(lambda: consumer.poll(0.2) is None and bool(commits), timeout=60)
            commit_errors = [e for e, _ in commits if e is not None]
            if not commit_errors:  # acknowledged once the database was back: it is stored (read it once the
                # group's coordinator answers: right after the outage it may still be moving, NOT_COORDINATOR)
                _eventually(lambda: _committed(consumer, 0) == 7)
            _eventually(lambda: _commit(consumer, 11), timeout=60)
            consumer.close()

            assert not [e for e in failed if not e.retriable()], failed
            assert acked_while_down == 0, "acknowledged while the database was down"
            for i in range(2):
                assert "Traceback" not in cluster.log(i)
            assert all(e.retriable() or e.code() in _COORDINATOR_ERRORS for e in commit_errors), commit_errors
            read = confluent_read_all(cluster.bootstrap, "outage", sum(map(len, acked.values())))
            for partition, values in acked.items():
                got = read.get(partition, [])
                assert len(got) == len(set(got)), f"partition {partition}: duplicates"
                assert not set(values) - set(got), f"partition {partition}: acknowledged records lost"
    finally:
        server.stop()


# What a commit answered during or right after the outage may fail with, none an acknowledgement. _TRANSPORT:
# a node whose lease ran out leaves the metadata until it registers again, and librdkafka tears down the
# connection to a broker that left it, failing the commit in flight on it (a node's own error would have left a
# Traceback in its log, which is checked first).
_COORDINATOR_ERRORS = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
}


def _commit(consumer: Consumer, offset: int) -> bool:
    try:
        consumer.commit(offsets=[TopicPartition("outage", 0, offset)], asynchronous=False)
    except KafkaException:
        return False
    return _committed(consumer, 0) == offset


def _committed(consumer: Consumer, partition: int) -> int:
    return consumer.committed([TopicPartition("outage", partition)], timeout=10)[0].offset


def _eventually(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    wait_for(condition, timeout, "the cluster to answer", interval=0.2, ignore=(Exception,))


def _postgres_processes(postmaster: int) -> list[int]:
    """The postmaster and every process it started (backends, background workers)."""
    found = [postmaster]
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == postmaster:
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_a_node_whose_database_hangs_still_stops_within_its_shutdown_limit(open_tmp_path: Path, tmp_path: Path) -> None:
    """Every PostgreSQL process is frozen (SIGSTOP: connections neither answer nor fail), then the node gets
    SIGTERM. Each step of its controlled shutdown waits up to the session timeout, and the waits add up; the
    node exits by twice the session timeout plus the connections' grace (herd.server.server.shutdown_limit_s:
    9 s here), saying so in its log, as it did not when `herd cluster up` was killed with its PostgreSQL."""
    server = LocalPostgres(open_tmp_path / "pg").start()
    frozen: list[int] = []
    try:
        url = server.create_database("frozen")
        cluster = HerdCluster(
            tmp_path / "cluster",
            overrides={
                "broker.session.timeout.ms": "2000",
                "broker.heartbeat.interval.ms": "500",
                "offsets.topic.num.partitions": "3",
            },
            database_url=url,
            faults=False,
        )
        with cluster.start(nodes=1, balanced=False):
            node = cluster.nodes[0]
            assert server.proc is not None and node.proc is not None
            frozen = _postgres_processes(server.proc.pid)
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            time.sleep(0.5)  # the node's lease renewal is now waiting on the database
            started = time.monotonic()
            node.proc.send_signal(signal.SIGTERM)
            code = node.proc.wait(60)
            took = time.monotonic() - started
            print(f"stopped after {took:.1f} s with code {code}")
            assert took < 9 + 5, f"{took:.1f} s"  # the limit, and room for a loaded machine
            if code != 0:
                assert code == 1 and "shutting down took longer than 9 s" in node.log(), node.log()[-3000:]
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        server.stop()
