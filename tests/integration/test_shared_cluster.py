"""Cluster metadata and partition leadership in PostgreSQL (herd.cluster.shared), against a real server: several
SharedCluster instances on one loop, and nodes in their own processes where a real kill is needed.

The log store is a stand-in that records which partitions a node opened (with the epoch it was given) and
closed: leadership is what is tested here; the PostgreSQL log store has its own tests.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from processes import first_line, reaped

from herd.cluster.database import locked
from herd.cluster.shared import ClusterError, SharedCluster
from herd.cluster.topics import (
    INVALID_PARTITIONS,
    KAFKA_STORAGE_ERROR,
    OFFSETS_TOPIC,
    POLICY_VIOLATION,
    TOPIC_ALREADY_EXISTS,
    UNKNOWN_TOPIC_OR_PARTITION,
    TopicError,
)
from herd.log.api import LogConfig
from herd.log.postgres import metadata_sql as q
from herd.log.postgres.db import open_pool
from herd.log.postgres.errors import MetadataWriteError
from herd.log.postgres.schema import migrate
from herd.testing.wait import wait_until_async

SRC = str(Path(__file__).resolve().parents[2] / "src")
_sequence = itertools.count()


# -- the database ----------------------------------------------------------------------------------------------


@pytest.fixture
def db(pg_url: str) -> str:
    """The module's database, migrated and emptied for this test."""

    async def reset() -> None:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            await migrate(conn, "test")
            await conn.execute("TRUNCATE herd_nodes, herd_topics, herd_partitions, herd_batches, herd_aborted_txns")
            await conn.commit()

    asyncio.run(reset())
    return pg_url


# -- a recording stand-in for the log store --------------------------------------------------------------------


@dataclass
class FakeLog:
    topic: str
    partition: int
    pid: int
    leader_epoch: int


@dataclass
class RecordingStore:
    events: list[tuple[Any, ...]] = field(default_factory=list)  # (sequence, what, topic, partition, epoch, ...)
    open: dict[tuple[str, int], FakeLog] = field(default_factory=dict)

    def open_partition(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        pid: int,
        leader_epoch: int,
        log_start_offset: int,
        log_end_offset: int,
    ) -> FakeLog:
        assert (topic, partition) not in self.open, "opened twice"
        opened = FakeLog(topic, partition, pid, leader_epoch)
        self.open[topic, partition] = opened
        self.events.append((next(_sequence), "open", topic, partition, leader_epoch))
        return opened

    async def close_partition(self, log: FakeLog, *, flush: bool) -> None:
        assert self.open.pop((log.topic, log.partition)) is log
        self.events.append((next(_sequence), "close", log.topic, log.partition, log.leader_epoch, flush))


@dataclass
class Member:
    cluster: SharedCluster
    store: RecordingStore
    changes: list[tuple[str, int, Any]] = field(default_factory=list)  # what on_leadership heard

    def led(self) -> set[tuple[str, int]]:
        return {(t.name, i) for t in self.cluster.topics() for i, p in enumerate(t.partitions) if p is not None}


class Nodes:
    """Starts SharedCluster members on the running loop and stops whatever a test left running."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.members: list[Member] = []

    async def start(
        self,
        node_id: int,
        *,
        url: str | None = None,
        session_ms: int = 3000,
        heartbeat_ms: int = 500,
        max_partitions: int = 10_000,
    ) -> Member:
        pool = await open_pool(url or self.url, min_size=1, max_size=4)
        async with pool.connection() as conn:
            cluster_id = await migrate(conn, "test")
        store = RecordingStore()
        changes: list[tuple[str, int, Any]] = []
        cluster = SharedCluster(
            pool,
            store,
            LogConfig(),
            node_id=node_id,
            endpoint=("127.0.0.1", 9000 + node_id),
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=heartbeat_ms,
            max_partitions=max_partitions,
            cluster_id=cluster_id,
            on_leadership=lambda t, i, p: changes.append((t, i, p)),
        )
        member = Member(cluster, store, changes)
        try:
            await cluster.start()
        except BaseException:
            await pool.close()
            raise
        self.members.append(member)
        return member

    async def stop(self, member: Member, *, controlled: bool = True) -> None:
        await member.cluster.shutdown(controlled)
        await member.cluster._pool.close()
        self.members.remove(member)

    async def stop_all(self) -> None:
        for member in list(self.members):
            await self.stop(member, controlled=False)


def run(db: str, test: Callable[[Nodes], Awaitable[None]]) -> None:
    async def main() -> None:
        nodes = Nodes(db)
        try:
            await asyncio.wait_for(test(nodes), 120)
        finally:  # bounded: a stop that hangs fails the test instead of holding the suite to its timeout
            await asyncio.wait_for(nodes.stop_all(), 60)

    asyncio.run(main())


async def eventually(check: Callable[[], bool], timeout: float = 10.0, what: str = "") -> float:
    """Wait until `check()` holds; returns how long it took."""
    started = time.monotonic()
    await wait_until_async(check, timeout, what or repr(check), interval=0.01)
    return time.monotonic() - started


def leaders(member: Member) -> dict[tuple[str, int], tuple[int, int]]:
    return {
        (t.name, i): member.cluster.leader(t.name, i) for t in member.cluster.topics() for i in range(len(t.partitions))
    }


def agreed(members: list[Member]) -> bool:
    """Every member's view names the same leaders, each partition is opened by exactly its leader, and the
    leader opened it at the epoch the views show."""
    views = [leaders(m) for m in members]
    if not views[0] or any(v != views[0] for v in views):
        return False
    by_id = {m.cluster.node_id: m for m in members}
    for key, (leader, epoch) in views[0].items():
        if leader not in by_id:
            return False
        holders = [m for m in members if key in m.led()]
        if holders != [by_id[leader]] or by_id[leader].store.open[key].leader_epoch != epoch:
            return False
    return True


def spread(member: Member, topic: str) -> Counter[int]:
    return Counter(member.cluster.leader(topic, i)[0] for i in range(len(member.cluster.get(topic).partitions)))


# -- placement and views ---------------------------------------------------------------------------------------


def test_partitions_spread_evenly_and_every_node_sees_the_same_leaders(db: str) -> None:
    async def test(nodes: Nodes) -> None:
        a, b, c = [await nodes.start(n) for n in (1, 2, 3)]
        await a.cluster.create_topic(OFFSETS_TOPIC, 50, {"cleanup.policy": "compact"})
        await b.cluster.create_topic("events", 7)
        await eventually(lambda: agreed([a, b, c]), what="the three views agree")
        assert sorted(spread(a, OFFSETS_TOPIC).values()) == [16, 17, 17]
        assert sorted(spread(a, "events").values()) == [2, 2, 3]
        assert [n.node_id for n in c.cluster.nodes()] == [1, 2, 3]
        assert c.cluster.node(2).port == 9002
        for member in (a, b, c):  # each gained exactly what it leads, at epoch 0 (created with its leader)
            gained = {(t, i) for t, i, p in member.changes if p is not None}
            assert gained == member.led()
            assert {log.leader_epoch for log in member.store.open.values()} == {0}

    run(db, test)


def test_a_joining_node_takes_its_share_with_new_epochs(db: str) -> None:
    async def test(nodes: Nodes) -> None:
        a = await nodes.start(1)
        await a.cluster.create_topic(OFFSETS_TOPIC, 10)
        await a.cluster.create_topic("events", 6)
        assert len(a.led()) == 16
        b = await nodes.start(2)
        await eventually(lambda: agreed([a, b]))
        assert spread(a, OFFSETS_TOPIC) == {1: 5, 2: 5} and spread(a, "events") == {1: 3, 2: 3}
        moved = b.led()
        assert all(b.store.open[k].leader_epoch == 1 for k in moved)  # one leadership change each
        # the old leader closes what it gave up in the background: the views may agree before it is done
        await eventually(
            lambda: {(e[2], e[3]) for e in a.store.events if e[1] == "close"} == moved,
            what="the old leader closing what moved",
        )
        assert {(t, i) for t, i, p in a.changes if p is None} == moved  # the old leader was told, too

    run(db, test)


# -- losing a node ---------------------------------------------------------------------------------------------

NODE_PROCESS = textwrap.dedent("""
    import asyncio, sys
    from herd.cluster.shared import SharedCluster
    from herd.log.api import LogConfig
    from herd.log.postgres.db import open_pool
    from herd.log.postgres.schema import migrate

    class Store:
        def open_partition(self, topic, partition, config, **row):
            return (topic, partition)
        async def close_partition(self, log, *, flush):
            pass

    async def main(url, node_id, session_ms, heartbeat_ms):
        pool = await open_pool(url, min_size=1, max_size=2)
        async with pool.connection() as conn:
            cluster_id = await migrate(conn, "node")
        cluster = SharedCluster(pool, Store(), LogConfig(), node_id=node_id, endpoint=("127.0.0.1", 9000 + node_id),
                                session_timeout_ms=session_ms, heartbeat_interval_ms=heartbeat_ms,
                                cluster_id=cluster_id)
        await cluster.start()
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main(sys.argv[1], *map(int, sys.argv[2:])))
""")


def node_process(url: str, node_id: int, session_ms: int, heartbeat_ms: int) -> subprocess.Popen[str]:
    """A node in a process of its own, once it said it is ready (its stderr goes to the test's, shown when the
    test fails); the caller kills and reaps it, and a start that fails reaps it here."""
    proc = subprocess.Popen(
        [sys.executable, "-c", NODE_PROCESS, url, str(node_id), str(session_ms), str(heartbeat_ms)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    try:
        assert first_line(proc, 60, f"node {node_id} to say it is ready") == "ready"
    except BaseException:
        with reaped(proc):
            raise
    return proc


async def renewed(url: str, node_id: int) -> None:
    """Returns as soon as `node_id` renewed its lease."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        query = "SELECT lease_until FROM herd_nodes WHERE node_id = %s"
        first = await (await conn.execute(query, (node_id,))).fetchone()

        async def moved() -> bool:
            return await (await conn.execute(query, (node_id,))).fetchone() != first

        await wait_until_async(
            moved, 30, f"node {node_id} to renew its lease (lease_until was {first})", interval=0.002
        )


@pytest.mark.parametrize("heartbeat_ms", [1000, 2000])
def test_the_partitions_of_a_killed_node_move_within_the_session_timeout(db: str, heartbeat_ms: int) -> None:
    """kill -9 of a node right after it renewed its lease: another node leads each of its partitions at the next
    epoch. The figure printed is the time from the kill until the last of them was opened on its new leader
    (broker.session.timeout.ms 3000); the issue asks for at most session timeout + 1 s. Not asserted: the
    machines are shared."""

    async def test(nodes: Nodes) -> None:
        a = await nodes.start(1, session_ms=3000, heartbeat_ms=heartbeat_ms)
        await a.cluster.create_topic(OFFSETS_TOPIC, 12)
        await a.cluster.create_topic("events", 6)
        victim = await asyncio.to_thread(node_process, db, 2, 3000, heartbeat_ms)
        try:
            await eventually(lambda: len(a.led()) == 9, what="the new node took its share")
            theirs = {k for k, (leader, _) in leaders(a).items() if leader == 2}
            epochs = {k: a.cluster.leader(*k)[1] for k in theirs}
            await renewed(db, 2)  # the worst moment: the lease was just renewed, it runs a whole session timeout
            victim.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            took = await eventually(lambda: theirs <= a.led(), timeout=15, what="the killed node's partitions")
        finally:
            victim.kill()
            victim.wait()
        assert all(a.store.open[k].leader_epoch == epochs[k] + 1 for k in theirs)
        assert [n.node_id for n in a.cluster.nodes()] == [1]
        print(
            f"\nkilled node's {len(theirs)} partitions led again {time.monotonic() - killed:.2f} s after the kill "
            f"(session timeout 3.0 s, heartbeat {heartbeat_ms / 1000:.1f} s; waited {took:.2f} s)"
        )

    run(db, test)


class Proxy:
    """A TCP relay to the database that a test can cut: `blackhole` keeps the connections open but carries
    nothing (a network partition, or a node stopped in its tracks); `refuse` closes them and refuses new ones
    (the database gone); `mode = "carry"` carries again."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = target
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 5432
        self.mode = "carry"
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        parts = urlsplit(self.target)
        port = self.server.sockets[0].getsockname()[1]
        user = parts.netloc.rpartition("@")[0] + "@" if "@" in parts.netloc else ""  # user and password
        return urlunsplit((parts.scheme, f"{user}127.0.0.1:{port}", parts.path, parts.query, ""))

    async def __aenter__(self) -> Proxy:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        self.refuse()

    def refuse(self) -> None:
        self.mode = "refuse"
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "refuse":
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    while self.mode == "blackhole":
                        await asyncio.sleep(0.01)
                    if self.mode == "refuse":
                        break
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def test_a_node_cut_off_from_the_database_gives_up_everything_and_comes_back_with_new_epochs(db: str) -> None:
    async def test(nodes: Nodes) -> None:
        async with Proxy(db) as proxy:
            a = await nodes.start(1, session_ms=2000, heartbeat_ms=300)
            b = await nodes.start(2, url=proxy.url, session_ms=2000, heartbeat_ms=300)
            await a.cluster.create_topic("events", 4)
            await eventually(lambda: agreed([a, b]))
            theirs = b.led()
            assert len(theirs) == 2
            before = leaders(a)
            proxy.mode = "blackhole"
            cut = time.monotonic()
            await eventually(lambda: not b.led(), what="the cut-off node gives up its partitions")
            gave_up = time.monotonic() - cut
            assert {(t, i) for t, i, p in b.changes if p is None} == theirs
            assert b.cluster.partition("events", 0) is None and b.cluster.partition("events", 1) is None
            assert all(b.cluster.leader(*k)[0] != 2 for k in theirs)  # its own view no longer names itself
            assert 2 not in {n.node_id for n in b.cluster.nodes()}
            await eventually(lambda: a.led() == {("events", i) for i in range(4)}, what="the other takes over")
            assert all(a.cluster.leader(*k)[1] == before[k][1] + 1 for k in theirs)
            assert gave_up < 2.5, gave_up  # its own clock: the session timeout, whatever the database does
            proxy.mode = "carry"
            await eventually(
                lambda: len(b.led()) == 2 and agreed([a, b]), timeout=20, what="the node comes back and takes its share"
            )
            assert all(b.store.open[k].leader_epoch > before[k][1] for k in b.led())  # moved again: next epoch

    run(db, test)


def test_controlled_shutdown_commits_first_then_hands_over(db: str) -> None:
    async def test(nodes: Nodes) -> None:
        a, b = await nodes.start(1), await nodes.start(2)
        await a.cluster.create_topic(OFFSETS_TOPIC, 8)
        await a.cluster.create_topic("events", 4)
        await eventually(lambda: agreed([a, b]))
        theirs = b.led()
        epochs = {k: b.cluster.leader(*k)[1] for k in theirs}
        await nodes.stop(b, controlled=True)
        closes = {(e[2], e[3]): e for e in b.store.events if e[1] == "close"}
        assert set(closes) == theirs and all(e[5] is True for e in closes.values())  # flushed
        await eventually(lambda: a.led() == {(t.name, i) for t in a.cluster.topics() for i in range(len(t.partitions))})
        opens = {(e[2], e[3]): e for e in a.store.events if e[1] == "open" and (e[2], e[3]) in theirs}
        assert all(closes[k][0] < opens[k][0] for k in theirs)  # committed and closed before the other opened
        assert all(opens[k][4] == epochs[k] + 1 for k in theirs)
        assert [n.node_id for n in a.cluster.nodes()] == [1]
        async with await psycopg.AsyncConnection.connect(db) as conn:
            cursor = await conn.execute(
                "SELECT state, lease_until <= clock_timestamp() FROM herd_nodes WHERE node_id = 2"
            )
            assert await cursor.fetchone() == ("stopped", True)
        b2 = await nodes.start(2)  # the same node.id at once: its row was released
        await eventually(lambda: agreed([a, b2]))

    run(db, test)


def test_a_second_live_process_with_the_same_node_id_is_refused(db: str) -> None:
    async def test(nodes: Nodes) -> None:
        first = await nodes.start(7)
        with pytest.raises(ClusterError) as refused:
            await nodes.start(7)
        message = str(refused.value)
        assert "node.id 7 is already registered" in message and "127.0.0.1:9007" in message
        assert "\n" not in message
        assert [n.node_id for n in first.cluster.nodes()] == [7]
        await nodes.stop(first, controlled=False)
        await nodes.start(7)

    run(db, test)


# -- admin changes ---------------------------------------------------------------------------------------------


def test_admin_changes_from_any_node_are_seen_by_every_node_at_once(db: str) -> None:
    async def test(nodes: Nodes) -> None:
        # session timeout 60 s: the periodic re-read cannot explain what the other node sees; NOTIFY must
        a, b = await nodes.start(1, session_ms=60_000), await nodes.start(2, session_ms=60_000)
        created = await a.cluster.create_topic("orders", 3, {"retention.ms": "1000"})
        assert a.cluster.get("orders") is created and created.configs == {"retention.ms": "1000"}
        seen = await eventually(lambda: b.cluster.get("orders") is not None, timeout=5)
        assert b.cluster.get("orders").topic_id == created.topic_id
        assert b.cluster.log_config(b.cluster.get("orders").configs).retention_ms == 1000
        await b.cluster.add_partitions("orders", 5)
        await eventually(lambda: len(a.cluster.get("orders").partitions) == 5, timeout=5)
        await eventually(lambda: agreed([a, b]), timeout=5)
        assert sorted(spread(a, "orders").values()) == [2, 3]
        async with await psycopg.AsyncConnection.connect(db) as conn:  # the deleted topic's data goes too
            cursor = await conn.execute("SELECT pid FROM herd_partitions")
            for (pid,) in await cursor.fetchall():
                await conn.execute(
                    "INSERT INTO herd_batches (pid, base_offset, last_offset, max_timestamp, "
                    "leader_epoch, record_count, size, data) SELECT %s, o, o, 0, 0, 1, 1, 'x' "
                    "FROM generate_series(0, 4999) o",
                    (pid,),
                )
            await conn.commit()
        deleted = await a.cluster.delete_topic("orders")
        assert deleted.topic_id == created.topic_id
        await eventually(lambda: b.cluster.get("orders") is None and not b.led(), timeout=5)
        assert {(t, i) for t, i, p in b.changes if p is None} == {(t, i) for t, i, p in b.changes if p is not None}

        async def rows() -> tuple[int, int]:
            async with await psycopg.AsyncConnection.connect(db) as conn:
                cursor = await conn.execute(
                    "SELECT (SELECT count(*) FROM herd_batches), (SELECT count(*) FROM herd_partitions)"
                )
                return await cursor.fetchone()

        for _ in range(200):  # bounded by tries (each a query), not by a time: kept, so the bound stays the same
            if await rows() == (0, 0):
                break
            await asyncio.sleep(0.05)
        assert await rows() == (0, 0)
        print(f"\na topic made on one node was seen by the other after {seen * 1000:.0f} ms")

    run(db, test)


def test_admin_errors_are_the_embedded_clusters(db: str) -> None:
    async def test(nodes: Nodes) -> None:
        a, b = await nodes.start(1, max_partitions=10), await nodes.start(2, max_partitions=10)
        await a.cluster.create_topic("t", 2)
        await eventually(lambda: b.cluster.get("t") is not None)

        async def refused(work: Awaitable[Any]) -> tuple[int, str]:
            with pytest.raises(TopicError) as e:
                await work
            return e.value.error_code, str(e.value)

        assert await refused(b.cluster.create_topic("t", 1)) == (TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")
        assert await refused(b.cluster.add_partitions("t", 2)) == (
            INVALID_PARTITIONS,
            "Topic currently has 2 partitions, 2 would not be an increase.",
        )
        assert await refused(b.cluster.delete_topic("nope")) == (
            UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        )
        code, message = await refused(b.cluster.create_topic("big", 9))
        assert code == POLICY_VIOLATION and "max.broker.partitions=10" in message
        await b.cluster.create_topic("dry", 3, validate_only=True)
        assert a.cluster.get("dry") is None and b.cluster.get("dry") is None

    run(db, test)


def test_a_failed_metadata_write_says_what_failed(db: str) -> None:
    """The database failing under an ACL or SCRAM change is a MetadataWriteError (herd.security makes it an
    AclStoreError or a CredentialStoreError); under a topic change it stays TopicError(KAFKA_STORAGE_ERROR)."""

    async def test(nodes: Nodes) -> None:
        a = await nodes.start(1)
        await a.cluster._pool.close()  # every connection asked for now fails (PoolClosed, a psycopg error)

        async def nothing(conn: Any) -> None:
            pass

        with pytest.raises(MetadataWriteError, match="Could not store the ACLs"):
            await a.cluster.change_acls(nothing)
        with pytest.raises(MetadataWriteError, match="Could not store the SCRAM credentials"):
            await a.cluster.alter_scram_credentials(lambda rows: (None, {}))
        with pytest.raises(TopicError) as e:
            await a.cluster.create_topic("t", 1)
        assert e.value.error_code == KAFKA_STORAGE_ERROR and str(e.value).startswith("Could not create topic t")

    run(db, test)


def test_concurrent_creates_of_one_topic_on_two_nodes(db: str) -> None:
    async def test(nodes: Nodes) -> None:
        a, b = await nodes.start(1), await nodes.start(2)
        for round in range(5):
            name = f"race-{round}"
            results = await asyncio.gather(
                a.cluster.create_topic(name, 4), b.cluster.create_topic(name, 4), return_exceptions=True
            )
            errors = [r for r in results if isinstance(r, TopicError)]
            assert len(errors) == 1 and errors[0].error_code == TOPIC_ALREADY_EXISTS, results
            assert a.cluster.get(name) is not None and b.cluster.get(name) is not None  # both see the winner
            assert a.cluster.get(name).topic_id == b.cluster.get(name).topic_id
        await eventually(lambda: agreed([a, b]))

    run(db, test)


def test_the_background_work_survives_the_database_going_away(db: str, caplog: pytest.LogCaptureFixture) -> None:
    async def test(nodes: Nodes) -> None:
        async with Proxy(db) as proxy:
            a = await nodes.start(1, url=proxy.url, session_ms=2000, heartbeat_ms=200)
            await a.cluster.create_topic("events", 2)
            tasks = list(a.cluster._tasks)
            with caplog.at_level(logging.INFO, logger="herd.cluster"):
                proxy.refuse()
                await eventually(lambda: not a.led(), what="the node gives its partitions up")
                await asyncio.sleep(1.5)
                assert not any(t.done() for t in tasks)  # still trying, not crashed
                proxy.mode = "carry"
                await eventually(lambda: len(a.led()) == 2, timeout=20, what="back with its partitions")
                await a.cluster.create_topic("after", 1)
            failures = Counter(
                r.getMessage().split(" failed")[0] for r in caplog.records if "failed (retrying)" in r.getMessage()
            )
            assert failures and all(n == 1 for n in failures.values()), failures  # once each, not every retry
            assert any("works again" in r.getMessage() for r in caplog.records)

    run(db, test)


def test_a_topic_made_again_under_its_name_gets_new_logs_everywhere(db: str) -> None:
    """The other node hears of the delete and the new create at once (its connections held up meanwhile):
    the same leaders and epochs as before, only the partitions' ids differ."""

    async def test(nodes: Nodes) -> None:
        async with Proxy(db) as proxy:
            a, b = await nodes.start(1, url=proxy.url), await nodes.start(2)
            first = await a.cluster.create_topic("t", 2)
            await eventually(lambda: agreed([a, b]))
            old = {k: log.pid for m in (a, b) for k, log in m.store.open.items()}
            proxy.mode = "blackhole"
            await b.cluster.delete_topic("t")
            again = await b.cluster.create_topic("t", 2)
            await asyncio.sleep(0.3)
            proxy.mode = "carry"
            assert again.topic_id != first.topic_id
            await eventually(lambda: agreed([a, b]) and a.cluster.get("t").topic_id == again.topic_id)
            new = {k: log.pid for m in (a, b) for k, log in m.store.open.items()}
            assert set(new) == set(old) and not set(new.values()) & set(old.values())

    run(db, test)


def test_a_node_stalled_under_the_metadata_lock_holds_the_others_up_only_for_its_session_timeout(db: str) -> None:
    """A node cut off right after PostgreSQL granted it the metadata lock (its next statement and its COMMIT held
    up, as by a network partition or a paused process) must not stop every other node's steps and changes until
    it comes back: PostgreSQL ends its session once it has been quiet for its session timeout, and the lock goes
    on. (PostgreSQL alone would keep the lock until TCP gave up on the node; the test above once hung so, when the
    proxy cut off node 1's controller step between the lock and its COMMIT.)"""

    async def test(nodes: Nodes) -> None:
        async with Proxy(db) as proxy:
            b = await nodes.start(2)
            pool = await open_pool(proxy.url, min_size=1, max_size=1)
            granted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

            async def cut_off_under_the_lock() -> None:  # as every registration, step and admin change of a node
                async with locked(pool, 1.0) as conn:
                    proxy.mode = "blackhole"
                    granted.set_result(conn.info.backend_pid)

            holder = asyncio.create_task(cut_off_under_the_lock())
            try:
                pid = await granted
                try:
                    async with asyncio.timeout(30):
                        await b.cluster.create_topic("t", 2)
                except TimeoutError:
                    pytest.fail("node 2 waited 30 s for the metadata lock of a session cut off for 1 s")
                async with await psycopg.AsyncConnection.connect(db, autocommit=True) as conn:
                    cursor = await conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
                    assert await cursor.fetchone() == (0,)  # ended by PostgreSQL while still cut off
                assert not holder.done()
                proxy.mode = "carry"
                with pytest.raises(psycopg.Error):  # its COMMIT: the session is gone, nothing was committed
                    await holder
            finally:
                holder.cancel()
                await pool.close()

    run(db, test)


def test_a_change_waits_for_the_metadata_lock_at_most_twice_the_session_timeout(db: str) -> None:
    """A session that holds the metadata lock without herd's bounds (an operator's psql, say) does not hold up a
    node's change for ever: the wait gives up after twice the session timeout, and the change fails saying why."""

    async def test(nodes: Nodes) -> None:
        b = await nodes.start(2, session_ms=1000, heartbeat_ms=200)
        async with await psycopg.AsyncConnection.connect(db) as other:
            await other.execute(q.LOCK, (q.METADATA_LOCK,))  # held until its transaction ends
            with pytest.raises(TopicError) as e:
                await b.cluster.create_topic("t", 1)
            await other.rollback()
        assert e.value.error_code == KAFKA_STORAGE_ERROR and "lock timeout" in str(e.value), e.value
        assert b.cluster.get("t") is None
        await b.cluster.create_topic("t", 1)

    run(db, test)


def test_a_node_stopped_past_its_lease_loses_its_partitions_and_rejoins_when_resumed(db: str) -> None:
    """SIGSTOP of a node process: its partitions move at the next epoch; after SIGCONT it registers again
    (a new incarnation) and takes its share back, at yet another epoch."""

    async def test(nodes: Nodes) -> None:
        a = await nodes.start(1, session_ms=2000, heartbeat_ms=300)
        await a.cluster.create_topic("events", 4)
        paused = await asyncio.to_thread(node_process, db, 2, 2000, 300)
        try:
            await eventually(lambda: len(a.led()) == 2, what="the new node took its share")
            theirs = {k for k, (leader, _) in leaders(a).items() if leader == 2}
            epochs = {k: a.cluster.leader(*k)[1] for k in theirs}
            paused.send_signal(signal.SIGSTOP)
            await eventually(lambda: len(a.led()) == 4, what="the stopped node's partitions")
            assert all(a.cluster.leader(*k) == (1, epochs[k] + 1) for k in theirs)
            paused.send_signal(signal.SIGCONT)
            await eventually(
                lambda: len(a.led()) == 2 and {n.node_id for n in a.cluster.nodes()} == {1, 2},
                what="the resumed node is back with its share",
            )
            assert all(a.cluster.leader(*k)[1] == epochs[k] + 2 for k in theirs if a.cluster.leader(*k)[0] == 2)
        finally:
            paused.kill()
            paused.wait()

    run(db, test)
