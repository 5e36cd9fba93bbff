"""Group coordinator failover in cluster mode: members across a kill -9, loading a partition, commits during a move.

    .venv/bin/python bench/bench_failover.py [--runs 10] [--groups 10] [--members 10] [--load-groups 100]
                                             [--load-partitions 1000] [--load-runs 3] [--committers 16]
                                             [--pipeline 4] [--rate-moves kill,shutdown] [--quick] [--json]

The script starts a PostgreSQL server of its own and a cluster of --nodes `herd serve` processes over it
(bench_cluster's start-up: `broker.session.timeout.ms=3000`, the default lease renewal every 2 s;
`group.initial.rebalance.delay.ms=500`, which only shortens forming the groups), and runs:

1. failover (--runs times): --groups classic groups of --members members each, every member on its own
   connection (JoinGroup v9 with a 10 s session timeout, SyncGroup v5, Heartbeat v4 every --heartbeat-ms),
   all groups coordinated by one node: their ids are picked to hash to `__consumer_offsets` partitions that node
   leads, each group on a partition of its own when it leads enough. Once every member holds its assignment and
   has heartbeated, the node is killed with SIGKILL. A member behaves as a Java consumer does: a lost connection
   makes the coordinator unknown; it asks a live node for it (FindCoordinator) and connects, retrying every
   --retry-backoff-ms while the answer is the dead node or nobody, and heartbeats when its heartbeat is due (at
   once if one failed). Measured from the kill: when every member has had a heartbeat answered NONE by the new
   coordinator (the target: within 5 s); when every member has had one answered NONE that it sent after its
   group's partition was loaded (a heartbeat during the load is answered NONE blindly, as Kafka's
   GroupCoordinatorService does, so only a later one checks the member against the loaded group); and any
   rebalance: a heartbeat answered REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, or a member
   whose generation changed (the target: none). The members keep heartbeating until a session timeout and a
   second after the kill, so a session that the new coordinator did not re-arm would expire in the window. Where
   the time goes comes from the live nodes' logs (the lease running out and the move, "node N leads
   __consumer_offsets-P") and from a probe that polls FindCoordinator and OffsetFetch every 10 ms (the partition
   is loaded when OffsetFetch no longer answers COORDINATOR_LOAD_IN_PROGRESS). The members then leave, the node
   is restarted, and the next run waits until it leads partitions again.
2. load (--load-runs times): --load-groups groups that hash to one `__consumer_offsets` partition commit
   --load-partitions offsets each through the protocol (one OffsetCommit per group; 100,000 offsets by
   default) of a topic of --load-partitions partitions (a commit is accepted only for partitions that exist; a
   third of them move with the killed node), then the partition's leader is killed (--load-move kill) or shut down
   (shutdown). Measured: the
   time from the move (the new leader's "leads" line) until OffsetFetch no longer answers
   COORDINATOR_LOAD_IN_PROGRESS, and from the kill. Every committed offset is fetched back at the end.
3. commit rate (once per move in --rate-moves): --committers committers against the groups of that partition,
   each with --pipeline OffsetCommits in flight on its connection (committer i commits partition i of the
   load topic for group i mod --load-groups), following the coordinator as members do. The partition's leader
   is killed or shut down after --rate-seconds; the commits acknowledged per second before, in the
   --rate-seconds after the move, and over --rate-seconds once settled (from two seconds after the first
   commit the new coordinator acknowledged), with the gap (move to that first commit) and the series second
   by second. At the end each committer's offset is fetched: it must be at or above the last one
   acknowledged and at or below the last one sent.

Everything shares the machine: the nodes, PostgreSQL and this client (one process, one event loop).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import re
import signal
import statistics
import struct
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # HerdCluster

from bench_cluster import children, metadata_leaders, run_meta, start_postgres, stop_all  # noqa: E402
from bench_groups import Wire  # noqa: E402
from bench_offsets import _run, build, commit_template, frame, ok_response  # noqa: E402
from bench_produce_fetch import create_topic, machine_cpu, process_cpu, self_cpu  # noqa: E402
from kio.serial import entity_reader  # noqa: E402

from herd.coordinator.partition import coordinator_partition  # noqa: E402
from herd.protocol.messages import response_class  # noqa: E402
from herd.testing import HerdCluster  # noqa: E402

OFFSETS = "__consumer_offsets"
COMMIT, FETCH_OFFSETS, FIND, JOIN, HEARTBEAT, LEAVE, SYNC = 8, 9, 10, 11, 12, 13, 14
V = {COMMIT: 9, FETCH_OFFSETS: 8, FIND: 4, JOIN: 9, HEARTBEAT: 4, LEAVE: 5, SYNC: 5}
NONE, LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR = 0, 14, 15, 16
ILLEGAL_GENERATION, UNKNOWN_MEMBER, REBALANCE, MEMBER_ID_REQUIRED = 22, 25, 27, 79
COORDINATOR_ERRORS = {LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR}
REBALANCE_ERRORS = {ILLEGAL_GENERATION, UNKNOWN_MEMBER, REBALANCE}
SESSION_TIMEOUT_MS = 3000  # the nodes' lease
SUBSCRIBED = b"failover-topic"  # need not exist: nothing is fetched
# ConsumerProtocolSubscription v0 (version, topics, null user data) and an empty ConsumerProtocolAssignment v0
SUBSCRIPTION = struct.pack(">hih", 0, 1, len(SUBSCRIBED)) + SUBSCRIBED + struct.pack(">i", -1)
ASSIGNMENT = struct.pack(">hii", 0, 0, -1)
PROBE_INTERVAL_S = 0.01


# -- wire ------------------------------------------------------------------------------------------------------


@functools.cache
def decoder(api_key: int) -> Callable[[bytes], Any]:
    cls = response_class(api_key, V[api_key])
    header_reader, body_reader = entity_reader(cls.__header_schema__), entity_reader(cls)
    return lambda data: body_reader(data, header_reader(data, 0)[1])[0]


def request(api_key: int, class_name: str | None = None, /, **fields: Any) -> Any:
    """A kio request (or one of its nested classes) of the version this bench speaks."""
    return build(api_key, V[api_key], class_name, **fields)


class Conn(Wire):
    """bench_groups' pipelined connection, which also fails its pending requests (ConnectionError) when the
    connection is lost, as a client's network layer does when its broker dies."""

    def __init__(self, node: int = -1) -> None:
        super().__init__()
        self.node = node
        self.lost = asyncio.Event()

    @classmethod
    async def open(cls, port: int, node: int = -1) -> Conn:
        conn = cls(node)
        await conn.connect(port)
        return conn

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()
        for future, _ in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("connection lost"))
        self._waiting.clear()

    def _flush(self) -> None:
        if self.transport.is_closing():  # closed by this side with requests not yet written: they fail
            self.connection_lost(None)
            self._out.clear()
            return
        super()._flush()

    def send(self, data: bytes, decode: Callable[[bytes], Any]) -> asyncio.Future[Any]:
        if self.lost.is_set():
            future = self._loop.create_future()
            future.set_exception(ConnectionError("connection lost"))
            return future
        return super().send(data, decode)

    async def ask(self, api_key: int, body: Any) -> Any:
        return await self.send(frame(api_key, V[api_key], body), decoder(api_key))


class Backoff:
    """retry.backoff.ms, doubling up to retry.backoff.max.ms with 20 % jitter when that is larger (KIP-580)."""

    def __init__(self, initial_ms: int, max_ms: int) -> None:
        self.initial_ms, self.max_ms, self.attempts = initial_ms, max(max_ms, initial_ms), 0

    def next_s(self) -> float:
        ms = min(self.initial_ms * 2**self.attempts, self.max_ms)
        self.attempts += 1
        return ms / 1000 * (random.uniform(0.8, 1.2) if self.max_ms > self.initial_ms else 1.0)

    def reset(self) -> None:
        self.attempts = 0


class Finder:
    """A client's connection for FindCoordinator to some live node (the first of `ports` from `start` on that
    accepts one), as a consumer keeps one to its least loaded broker."""

    def __init__(self, ports: dict[int, int], start: int) -> None:
        self.ports = ports  # node id -> port
        self.order = sorted(ports)
        self.next = start % len(self.order)
        self.conn: Conn | None = None

    async def find(self, keys: Iterable[str]) -> dict[str, tuple[int, int]] | None:
        """key -> (node id, port) of the keys that have a coordinator; None when no node could be asked."""
        conn = await self._connection()
        if conn is None:
            return None
        try:
            answer = await conn.ask(FIND, request(FIND, key_type=0, coordinator_keys=tuple(keys)))
        except ConnectionError:
            self.conn = None
            return None
        return {c.key: (int(c.node_id), int(c.port)) for c in answer.coordinators if c.error_code == NONE}

    async def _connection(self) -> Conn | None:
        if self.conn is not None and not self.conn.lost.is_set():
            return self.conn
        for _ in self.order:
            node = self.order[self.next]
            self.next = (self.next + 1) % len(self.order)
            try:
                self.conn = await Conn.open(self.ports[node], node)
                return self.conn
            except OSError:
                continue
        return None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# -- members ---------------------------------------------------------------------------------------------------


async def coordinator_connection(group: str, finder: Finder, backoff: Backoff, conn: Conn | None,
                                 stopped: Callable[[], bool]) -> Conn | None:  # fmt: skip
    """`conn` while it is up, else a connection to `group`'s coordinator, looked up (again) after each backoff
    until one opens; None once `stopped()` (`conn`, if any, is closed then)."""
    while not stopped():
        if conn is not None and not conn.lost.is_set():
            return conn
        conn = None
        found = (await finder.find((group,)) or {}).get(group)
        if found is not None:
            try:
                conn = await Conn.open(found[1], found[0])
                backoff.reset()
                continue
            except OSError:
                pass
        await asyncio.sleep(backoff.next_s())
    if conn is not None:
        conn.close()
    return None


@dataclass
class Beat:
    sent: float  # wall clock (the nodes' logs are in it too)
    answered: float
    node: int
    error: int


@dataclass
class Member:
    """A consumer's group membership as the Java client's AbstractCoordinator runs it, with only what matters
    here: join, sync, and heartbeats every `heartbeat_s` to a coordinator it finds again when it is lost."""

    group: str
    finder: Finder
    heartbeat_s: float
    session_ms: int
    backoff: Backoff
    member_id: str = ""
    generation: int = -1
    generations: list[int] = field(default_factory=list)
    conn: Conn | None = None
    beats: list[Beat] = field(default_factory=list)
    stable: asyncio.Event = field(default_factory=asyncio.Event)
    stopping: bool = False

    async def run(self) -> None:
        await self._join()
        due = time.time() + self.heartbeat_s
        while not self.stopping:
            conn = await self._coordinator()
            if conn is None:
                return
            wait = due - time.time()
            if wait > 0:
                try:
                    await asyncio.wait_for(conn.lost.wait(), wait)
                    continue  # lost before the heartbeat was due: find the coordinator now
                except TimeoutError:
                    pass
            if self.stopping:
                return  # leaving: a heartbeat after the LeaveGroup would be answered UNKNOWN_MEMBER_ID
            sent = time.time()
            try:
                error = await conn.ask(
                    HEARTBEAT,
                    request(
                        HEARTBEAT,
                        group_id=self.group,
                        generation_id=self.generation,
                        member_id=self.member_id,
                        group_instance_id=None,
                    ),
                )
            except ConnectionError:
                self.conn, due = None, time.time() + self.backoff.next_s()
                continue
            error = int(error.error_code)
            self.beats.append(Beat(sent, time.time(), conn.node, error))
            if error == NONE:
                self.backoff.reset()
                due = sent + self.heartbeat_s
            elif error in COORDINATOR_ERRORS:
                self._lose_coordinator()
                due = time.time() + self.backoff.next_s()
            elif error in REBALANCE_ERRORS:
                if error == UNKNOWN_MEMBER:
                    self.member_id = ""
                await self._join()
                due = time.time() + self.heartbeat_s
            else:
                due = time.time() + self.backoff.next_s()

    async def _coordinator(self) -> Conn | None:
        self.conn = await coordinator_connection(
            self.group, self.finder, self.backoff, self.conn, lambda: self.stopping
        )
        return self.conn

    def _lose_coordinator(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    async def _join(self) -> None:
        """JoinGroup (again with the member id it is given) and SyncGroup until it holds an assignment."""
        self.stable.clear()
        while not self.stopping:
            conn = await self._coordinator()
            if conn is None:
                return
            try:
                joined = await conn.ask(
                    JOIN,
                    request(
                        JOIN,
                        group_id=self.group,
                        session_timeout=self.session_ms,
                        rebalance_timeout=30_000,
                        member_id=self.member_id,
                        group_instance_id=None,
                        protocol_type="consumer",
                        reason=None,
                        protocols=(request(JOIN, "JoinGroupRequestProtocol", name="range", metadata=SUBSCRIPTION),),
                    ),
                )
                if joined.error_code == MEMBER_ID_REQUIRED:
                    self.member_id = joined.member_id
                    continue
                if joined.error_code:
                    self._joining_failed(int(joined.error_code))
                    await asyncio.sleep(self.backoff.next_s())
                    continue
                self.member_id = joined.member_id
                assignments = (
                    tuple(
                        request(SYNC, "SyncGroupRequestAssignment", member_id=m.member_id, assignment=ASSIGNMENT)
                        for m in joined.members
                    )
                    if joined.leader == joined.member_id
                    else ()
                )
                synced = await conn.ask(
                    SYNC,
                    request(
                        SYNC,
                        group_id=self.group,
                        generation_id=joined.generation_id,
                        member_id=self.member_id,
                        group_instance_id=None,
                        protocol_type="consumer",
                        protocol_name="range",
                        assignments=assignments,
                    ),
                )
            except ConnectionError:
                self.conn = None
                continue
            if synced.error_code:
                self._joining_failed(int(synced.error_code))
                continue
            self.generation = int(joined.generation_id)
            self.generations.append(self.generation)
            self.stable.set()
            return

    def _joining_failed(self, error: int) -> None:
        if error in COORDINATOR_ERRORS:
            self._lose_coordinator()
        elif error == UNKNOWN_MEMBER:
            self.member_id = ""

    async def leave(self) -> None:
        self.stopping = True
        if self.conn is not None and not self.conn.lost.is_set():
            try:
                await asyncio.wait_for(
                    self.conn.ask(
                        LEAVE,
                        request(
                            LEAVE,
                            group_id=self.group,
                            members=(
                                request(
                                    LEAVE,
                                    "MemberIdentity",
                                    member_id=self.member_id,
                                    group_instance_id=None,
                                    reason="bench",
                                ),
                            ),
                        ),
                    ),
                    5,
                )
            except (TimeoutError, ConnectionError):
                pass

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.finder.close()


# -- the cluster -----------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, cluster: HerdCluster) -> None:
        self.cluster = cluster

    @property
    def live(self) -> dict[int, int]:
        """node id -> port of the nodes that run."""
        return {i: n.port for i, n in enumerate(self.cluster.nodes) if self.cluster.running(i)}

    def leaders(self) -> dict[int, int]:
        """__consumer_offsets partition -> its leader, as a live node sees it."""
        for port in self.live.values():
            seen = metadata_leaders(port, OFFSETS)
            if seen:
                return {p: leader for p, (leader, _) in seen.items()}
        raise RuntimeError(f"no live node answers Metadata for {OFFSETS}")

    def wait_leading(self, node: int, timeout: float = 60.0) -> None:
        """Until node `node` leads partitions of __consumer_offsets (a restarted node took its share back),
        and a second more for the moves to settle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if node in self.leaders().values():
                time.sleep(1.0)
                return
            time.sleep(0.1)
        raise RuntimeError(f"node {node} leads nothing of {OFFSETS} after {timeout} s")

    def move(self, node: int, how: str) -> float:
        """Kill node `node` (SIGKILL) or begin its controlled shutdown (SIGTERM); the wall-clock time it was sent."""
        at = time.time()
        if how == "kill":
            self.cluster.kill(node)
        else:
            proc = self.cluster.nodes[node].proc
            assert proc is not None
            proc.send_signal(signal.SIGTERM)
        return at

    def restart(self, node: int) -> None:
        proc = self.cluster.nodes[node].proc
        if proc is not None:
            proc.wait(60)
        self.cluster.restart(node)
        self.wait_leading(node)

    def events(self, since: float) -> list[tuple[float, int, str]]:
        """(wall-clock time, node, message) of the lines the nodes logged at or after `since`, in time order."""
        found = []
        for i in range(len(self.cluster.nodes)):
            for line in self.cluster.log(i).splitlines():
                match = _LOG_LINE.match(line)
                if match:
                    at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    if at >= since - 0.002:  # the log's millisecond is truncated
                        found.append((at, i, match.group(2)))
        return sorted(found)


_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ [\w.]+: (.*)$")


def phases(events: list[tuple[float, int, str]], victim: int, partitions: Iterable[int], t0: float) -> dict[str, float]:
    """From the nodes' log lines after the move at `t0`: seconds until the victim's lease was found to have run
    out, until the move was stored, and until the last of `partitions` was taken by its new leader."""
    out: dict[str, float] = {}
    for at, _, message in events:
        if "expired" not in out and re.search(rf"the leases of nodes \[.*\b{victim}\b.*\] ran out", message):
            out["expired"] = at - t0
        if "moved" not in out and (message.startswith("moved the leadership of") or "handed" in message):
            out["moved"] = at - t0
    wanted = set(partitions)
    taken = {}
    for at, _node, message in events:
        match = re.match(rf"node (\d+) leads {OFFSETS}-(\d+) at epoch", message)
        if match and int(match.group(1)) != victim and int(match.group(2)) in wanted:
            taken.setdefault(int(match.group(2)), at - t0)
    if taken and len(taken) == len(wanted):
        out["taken"] = max(taken.values())
    return out


async def watch_load(
    ports: dict[int, int], groups: dict[str, int], victim: int, probe: tuple[str, int] | None, t0: float, timeout: float
) -> dict[str, tuple[float, float, int]]:
    """Poll until each group's partition is loaded by a node other than `victim`: FindCoordinator to a live
    node, then OffsetFetch (of `probe`'s topic and partition, or of everything) to the node it names. group ->
    (seconds from `t0` until FindCoordinator named another node, until OffsetFetch answered without
    COORDINATOR_LOAD_IN_PROGRESS, answers COORDINATOR_LOAD_IN_PROGRESS seen)."""
    finder = Finder({n: p for n, p in ports.items() if n != victim}, 0)
    conns: dict[int, Conn] = {}
    named: dict[str, float] = {}
    loaded: dict[str, tuple[float, float, int]] = {}
    loading: dict[str, int] = dict.fromkeys(groups, 0)
    topics = (
        None
        if probe is None
        else (request(FETCH_OFFSETS, "OffsetFetchRequestTopics", name=probe[0], partition_indexes=(probe[1],)),)
    )
    deadline = time.monotonic() + timeout
    try:
        while len(loaded) < len(groups) and time.monotonic() < deadline:
            pending = [g for g in groups if g not in loaded]
            found = await finder.find(pending) or {}
            by_node: dict[int, list[str]] = {}
            for group, (node, _port) in found.items():
                if node != victim:
                    named.setdefault(group, time.time() - t0)
                    by_node.setdefault(node, []).append(group)
            for node, asked in by_node.items():
                conn = conns.get(node)
                if conn is None or conn.lost.is_set():
                    conn = conns[node] = await Conn.open(ports[node], node)
                answer = await conn.ask(
                    FETCH_OFFSETS,
                    request(
                        FETCH_OFFSETS,
                        require_stable=False,
                        groups=tuple(
                            request(FETCH_OFFSETS, "OffsetFetchRequestGroup", group_id=g, topics=topics) for g in asked
                        ),
                    ),
                )
                for g in answer.groups:
                    if g.error_code == NONE:
                        loaded[g.group_id] = (named[g.group_id], time.time() - t0, loading[g.group_id])
                    elif g.error_code == LOAD_IN_PROGRESS:
                        loading[g.group_id] += 1
            await asyncio.sleep(PROBE_INTERVAL_S)
    finally:
        finder.close()
        for conn in conns.values():
            conn.close()
    return loaded


def groups_on(partitions: list[int], count: int, prefix: str, num_partitions: int) -> dict[str, int]:
    """`count` group ids hashing to `partitions` (in turn) -> their partition."""
    out: dict[str, int] = {}
    j = 0
    for k in range(count):
        target = partitions[k % len(partitions)]
        while coordinator_partition(name := f"{prefix}-{k}-{j}", num_partitions) != target:
            j += 1
        out[name] = target
        j += 1
    return out


# -- 1. members across a kill ----------------------------------------------------------------------------------


async def failover_run(
    bench: Bench, args: argparse.Namespace, run: int, victim: int, groups: dict[str, int]
) -> dict[str, Any]:
    ports = bench.live
    members = [
        Member(
            g,
            Finder(ports, i),
            args.heartbeat_ms / 1000,
            args.session_ms,
            Backoff(args.retry_backoff_ms, args.retry_backoff_max_ms),
        )
        for g in groups
        for i in range(args.members)
    ]
    tasks = [asyncio.create_task(m.run()) for m in members]
    try:
        await asyncio.wait_for(asyncio.gather(*(m.stable.wait() for m in members)), 60)
        await settled(members, args.heartbeat_ms / 1000, victim)
        marks = {id(m): len(m.generations) for m in members}
        t0 = bench.move(victim, "kill")
        loaded = await watch_load(ports, groups, victim, None, t0, 30)
        deadline = t0 + args.session_ms / 1000 + 1.0
        while time.time() < t0 + 60 and not (
            time.time() >= deadline and all(confirmed(m, t0, victim, loaded) for m in members)
        ):
            await asyncio.sleep(0.1)
        end = time.time()
    finally:
        await asyncio.gather(*(m.leave() for m in members))
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for m in members:
            m.close()
    return summarise_run(members, marks, loaded, (t0, end), victim, run)


async def settled(members: list[Member], heartbeat_s: float, coordinator: int, timeout: float = 60) -> None:
    """Until every group has one generation and each member's last heartbeat, sent in it, was answered NONE by
    `coordinator` (a group may rebalance while it forms, when a member joins after the first join phase)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(heartbeat_s)
        by_group: dict[str, set[int]] = {}
        for m in members:
            by_group.setdefault(m.group, set()).add(m.generation)
        if all(len(g) == 1 for g in by_group.values()) and all(
            m.stable.is_set() and m.beats and m.beats[-1].error == NONE and m.beats[-1].node == coordinator
            for m in members
        ):
            return
    raise RuntimeError("the groups did not settle")


def first_ok(m: Member, t0: float, victim: int, after: float | None = None) -> float | None:
    """Seconds from t0 until `m` had a heartbeat answered NONE by a node other than the victim (one sent at or
    after t0 + `after`, when given)."""
    for b in m.beats:
        if b.sent >= t0 and b.node != victim and b.error == NONE and (after is None or b.sent >= t0 + after):
            return b.answered - t0
    return None


def confirmed(m: Member, t0: float, victim: int, loaded: dict[str, tuple[float, float, int]]) -> bool:
    return m.group in loaded and first_ok(m, t0, victim, loaded[m.group][1]) is not None


def summarise_run(
    members: list[Member],
    marks: dict[int, int],
    loaded: dict[str, tuple[float, float, int]],
    window: tuple[float, float],
    victim: int,
    run: int,
) -> dict[str, Any]:
    """`marks`: each member's count of generations at the kill; `window`: the kill, and the end of the
    measurement (the members leave after it)."""
    t0, end = window
    oks = [first_ok(m, t0, victim) for m in members]
    sure = [first_ok(m, t0, victim, loaded[m.group][1]) if m.group in loaded else None for m in members]
    changed = sum(1 for m in members if len(m.generations) > marks[id(m)])
    errors: dict[int, int] = {}
    for m in members:
        for b in m.beats:
            if t0 <= b.sent < end and b.error != NONE:
                errors[b.error] = errors.get(b.error, 0) + 1
    rebalance_errors = sum(n for e, n in errors.items() if e in REBALANCE_ERRORS)
    return {
        "run": run,
        "victim": victim,
        "members": len(members),
        "t0": t0,
        "all_ok_s": max(oks) if None not in oks else None,
        "first_ok_s": min(o for o in oks if o is not None) if any(o is not None for o in oks) else None,
        "all_ok_after_load_s": max(sure) if None not in sure else None,
        "missing": sum(1 for o in oks if o is None),
        "loaded_s": max(v[1] for v in loaded.values()) if len(loaded) == len({m.group for m in members}) else None,
        "named_s": max(v[0] for v in loaded.values()) if loaded else None,
        "load_in_progress_answers": sum(v[2] for v in loaded.values()),
        "rebalance_errors": rebalance_errors,
        "generation_changes": changed,
        "heartbeat_errors": errors,
        "heartbeats_after_kill": sum(1 for m in members for b in m.beats if t0 <= b.sent < end),
    }


def run_failovers(bench: Bench, args: argparse.Namespace, num_partitions: int) -> list[dict[str, Any]]:
    results = []
    nodes = len(bench.cluster.nodes)
    for run in range(args.runs):
        victim = run % nodes
        led = sorted(p for p, leader in bench.leaders().items() if leader == victim)
        if not led:
            raise RuntimeError(f"node {victim} leads no partition of {OFFSETS}")
        groups = groups_on(led, args.groups, f"fo{run}-{uuid.uuid4().hex[:4]}", num_partitions)
        result = _run(failover_run(bench, args, run, victim, groups))
        t0 = result.pop("t0")
        result.update(phases(bench.events(t0), victim, set(groups.values()), t0))
        result["partitions"] = len(set(groups.values()))
        results.append(result)
        print(f"# failover {run + 1}: {describe_run(result)}", file=sys.stderr, flush=True)
        bench.restart(victim)
    return results


def describe_run(r: dict[str, Any]) -> str:
    def s(key: str) -> str:
        return "-" if r.get(key) is None else f"{r[key]:.2f}"

    return (
        f"node {r['victim']} killed; every member heartbeated NONE to the new coordinator after {s('all_ok_s')} s "
        f"(first {s('first_ok_s')}, {r['missing']} never), after its load {s('all_ok_after_load_s')} s; lease "
        f"expired {s('expired')}, moved {s('moved')}, taken {s('taken')}, FindCoordinator named the new node "
        f"{s('named_s')}, loaded {s('loaded_s')}; rebalance errors {r['rebalance_errors']}, generation changes "
        f"{r['generation_changes']}, heartbeat errors {r['heartbeat_errors']}"
    )


# -- 2. loading a partition ------------------------------------------------------------------------------------

LOAD_TOPIC = "bench"  # bench_offsets' commit_template commits to it


def committed_value(group_index: int, partition: int) -> int:
    return 1_000_000 * (group_index + 1) + partition


async def commit_history(port: int, groups: list[str], partitions: int, connections: int = 4) -> int:
    """One OffsetCommit of `partitions` offsets per group (a simple commit, generation -1), to `port`;
    retried while the node does not know the topic yet. Returns the offsets committed."""
    queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
    for item in enumerate(groups):
        queue.put_nowait(item)

    async def worker() -> None:
        conn = await Conn.open(port)
        try:
            while not queue.empty():
                k, group = queue.get_nowait()
                body = request(
                    COMMIT,
                    group_id=group,
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    group_instance_id=None,
                    topics=(
                        request(
                            COMMIT,
                            "OffsetCommitRequestTopic",
                            name=LOAD_TOPIC,
                            partitions=tuple(
                                request(
                                    COMMIT,
                                    "OffsetCommitRequestPartition",
                                    partition_index=p,
                                    committed_offset=committed_value(k, p),
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                )
                                for p in range(partitions)
                            ),
                        ),
                    ),
                )
                for _ in range(100):
                    answer = await conn.ask(COMMIT, body)
                    errors = {int(p.error_code) for t in answer.topics for p in t.partitions}
                    if errors == {NONE}:
                        break
                    await asyncio.sleep(0.1)
                else:
                    raise RuntimeError(f"committing for {group} failed: {errors}")
        finally:
            conn.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return len(groups) * partitions


async def fetch_all(port: int, groups: list[str]) -> dict[str, dict[int, int]]:
    """Every committed offset of `groups` (of the load topic), from their coordinator at `port`."""
    out: dict[str, dict[int, int]] = {}
    conn = await Conn.open(port)
    try:
        for i in range(0, len(groups), 10):
            asked = groups[i : i + 10]
            for _ in range(100):
                answer = await conn.ask(
                    FETCH_OFFSETS,
                    request(
                        FETCH_OFFSETS,
                        require_stable=False,
                        groups=tuple(
                            request(FETCH_OFFSETS, "OffsetFetchRequestGroup", group_id=g, topics=None) for g in asked
                        ),
                    ),
                )
                if all(g.error_code == NONE for g in answer.groups):
                    break
                await asyncio.sleep(0.1)
            for g in answer.groups:
                out[g.group_id] = {
                    int(p.partition_index): int(p.committed_offset)
                    for t in g.topics
                    if t.name == LOAD_TOPIC
                    for p in t.partitions
                }
    finally:
        conn.close()
    return out


@dataclass
class LoadSetup:
    partition: int  # of __consumer_offsets
    groups: list[str]
    offsets: int
    seconds: float


def setup_load(bench: Bench, args: argparse.Namespace, num_partitions: int) -> LoadSetup:
    """The load topic, and --load-groups groups on one __consumer_offsets partition committing --load-partitions
    offsets each."""
    create_topic(bench.cluster.bootstrap, LOAD_TOPIC, args.load_partitions)
    leaders = bench.leaders()
    partition = min(leaders)
    groups = list(groups_on([partition], args.load_groups, "load", num_partitions))
    port = bench.live[leaders[partition]]
    started = time.perf_counter()
    offsets = _run(commit_history(port, groups, args.load_partitions))
    return LoadSetup(partition, groups, offsets, time.perf_counter() - started)


def check_offsets(bench: Bench, setup: LoadSetup, partitions: int) -> int:
    """How many of the offsets committed by `setup_load` are not fetched back as committed (0 is right)."""
    port = bench.live[bench.leaders()[setup.partition]]
    fetched = _run(fetch_all(port, setup.groups))
    return sum(
        1
        for k, group in enumerate(setup.groups)
        for p in range(partitions)
        if fetched.get(group, {}).get(p) != committed_value(k, p)
    )


def wait_loaded(bench: Bench, setup: LoadSetup) -> int:
    """Until the load partition's leader has loaded it (a restarted node may have just taken it back); its
    leader."""
    leader = bench.leaders()[setup.partition]
    ready = _run(watch_load(bench.live, {setup.groups[0]: setup.partition}, -1, (LOAD_TOPIC, 0), time.time(), 60))
    if setup.groups[0] not in ready or bench.leaders()[setup.partition] != leader:
        raise RuntimeError(f"{OFFSETS}-{setup.partition} is not loaded on node {leader}")
    return leader


def load_run(bench: Bench, args: argparse.Namespace, setup: LoadSetup, run: int) -> dict[str, Any]:
    """Move the load partition away from its leader (kill or controlled shutdown); when the new leader took it
    and when its load was done."""
    leader = wait_loaded(bench, setup)
    probe = setup.groups[0]
    ports = bench.live
    t0 = bench.move(leader, args.load_move)
    loaded = _run(watch_load(ports, {probe: setup.partition}, leader, (LOAD_TOPIC, 0), t0, 60))
    if args.load_move == "shutdown":
        bench.cluster.nodes[leader].proc.wait(60)  # type: ignore[union-attr]
    time.sleep(0.3)  # the last log lines
    result: dict[str, Any] = {"run": run, "victim": leader, "move": args.load_move}
    result.update(phases(bench.events(t0), leader, [setup.partition], t0))
    if probe in loaded:
        result["named_s"], result["loaded_s"], result["load_in_progress_answers"] = loaded[probe]
        if "taken" in result:
            result["load_s"] = result["loaded_s"] - result["taken"]
    print(
        f"# load {run + 1}: node {leader} {'killed' if args.load_move == 'kill' else 'shut down'}; "
        + ", ".join(
            f"{k} {v:.2f}" for k, v in result.items() if k.endswith("_s") or k in ("expired", "moved", "taken")
        ),
        file=sys.stderr,
        flush=True,
    )
    bench.restart(leader)
    return result


# -- 3. commits during a move ----------------------------------------------------------------------------------


@dataclass
class Committer:
    """One consumer committing one partition for its group, --pipeline OffsetCommits in flight on the connection
    to the group's coordinator, which it finds again as a member does when it is lost or answers a coordinator
    error. A commit that is not acknowledged is not resent: the next one carries a later offset."""

    group: str
    partition: int
    depth: int
    finder: Finder
    backoff: Backoff
    acks: list[tuple[float, int]] = field(default_factory=list)  # (wall clock, node)
    refusals: list[tuple[float, int, int]] = field(default_factory=list)  # (wall clock, node, error)
    sent: int = 0  # the last offset sent
    acked: int = 0  # the last offset acknowledged
    errors: dict[int, int] = field(default_factory=dict)
    conn: Conn | None = None

    async def run(self, stop: asyncio.Event) -> None:
        template, at = commit_template(self.group, self.partition)
        expected = ok_response(self.partition)[4:]  # without the correlation id
        decode = decoder(COMMIT)
        frame_ = bytearray(template)
        while not stop.is_set():
            conn = await self._coordinator(stop)
            if conn is None:
                return
            inflight: deque[tuple[int, asyncio.Future[Any]]] = deque()
            lost = loading = False
            while not (stop.is_set() or lost or loading) or inflight:
                while not (stop.is_set() or lost or loading) and len(inflight) < self.depth:
                    self.sent += 1
                    struct.pack_into(">q", frame_, at, self.sent)
                    inflight.append((self.sent, conn.send(bytes(frame_), bytes)))
                offset, future = inflight.popleft()
                try:
                    body = await future
                except ConnectionError:
                    self._error(-1)
                    lost = True
                    continue
                if body[4:] == expected:
                    self.acks.append((time.time(), conn.node))
                    self.acked = max(self.acked, offset)
                    continue
                error = int(decode(body).topics[0].partitions[0].error_code)
                self._error(error)
                self.refusals.append((time.time(), conn.node, error))
                loading = loading or error == LOAD_IN_PROGRESS
                lost = lost or error in COORDINATOR_ERRORS - {LOAD_IN_PROGRESS}
            if lost:  # the coordinator is unknown: found again after the backoff
                self.conn = None
                conn.close()
            if lost or loading:  # COORDINATOR_LOAD_IN_PROGRESS: the same coordinator, after the backoff
                await asyncio.sleep(self.backoff.next_s())
            else:
                self.backoff.reset()

    def _error(self, error: int) -> None:
        self.errors[error] = self.errors.get(error, 0) + 1

    async def _coordinator(self, stop: asyncio.Event) -> Conn | None:
        self.conn = await coordinator_connection(self.group, self.finder, self.backoff, self.conn, stop.is_set)
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.finder.close()


async def commit_through_move(
    bench: Bench, args: argparse.Namespace, setup: LoadSetup, how: str, victim: int
) -> tuple[list[Committer], float, dict[str, tuple[float, float, int]]]:
    ports = bench.live
    committers = [
        Committer(
            setup.groups[i % len(setup.groups)],
            i % args.load_partitions,
            args.pipeline,
            Finder(ports, i),
            Backoff(args.retry_backoff_ms, args.retry_backoff_max_ms),
        )
        for i in range(args.committers)
    ]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(c.run(stop)) for c in committers]
    try:
        await asyncio.sleep(1.0 + args.rate_seconds)  # a warm-up second, then the "before" window
        t0 = bench.move(victim, how)
        probe = asyncio.create_task(
            watch_load(ports, {setup.groups[0]: setup.partition}, victim, (LOAD_TOPIC, 0), t0, 60)
        )
        while time.time() < t0 + 60:
            await asyncio.sleep(0.2)
            new = [at for c in committers for at, node in c.acks if at > t0 and node != victim]
            if new and time.time() > min(new) + 2.0 + args.rate_seconds:
                break
        loaded = await probe
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in committers:
            c.close()
    for task in tasks:
        if task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return committers, t0, loaded


def rate_run(bench: Bench, args: argparse.Namespace, setup: LoadSetup, how: str) -> dict[str, Any]:
    victim = wait_loaded(bench, setup)
    committers, t0, loaded = _run(commit_through_move(bench, args, setup, how, victim))
    if how == "shutdown":
        bench.cluster.nodes[victim].proc.wait(60)  # type: ignore[union-attr]
    time.sleep(0.3)
    events = phases(bench.events(t0), victim, [setup.partition], t0)
    acks = sorted(at - t0 for c in committers for at, _ in c.acks)
    new = min((at - t0 for c in committers for at, node in c.acks if at > t0 and node != victim), default=None)
    refused = [(at - t0, node, error) for c in committers for at, node, error in c.refusals if at > t0]
    events["loaded_s"] = loaded[setup.groups[0]][1] if loaded else None
    for error, name in ((NOT_COORDINATOR, "not_coordinator"), (LOAD_IN_PROGRESS, "load_in_progress")):
        times = [at for at, node, e in refused if e == error]
        if times:
            events[f"{name}_first_s"], events[f"{name}_last_s"] = min(times), max(times)
    w = args.rate_seconds

    def rate(start: float, end: float) -> float:
        return sum(1 for a in acks if start <= a < end) / (end - start)

    per_committer = [
        sum(1 for at, _ in c.acks if new is not None and new + 2 <= at - t0 < new + 2 + w) for c in committers
    ]
    lost = late = 0
    port = bench.live[bench.leaders()[setup.partition]]
    fetched = _run(fetch_all(port, sorted({c.group for c in committers})))
    for c in committers:
        got = fetched.get(c.group, {}).get(c.partition, -1)
        lost += got < c.acked
        late += got > c.sent
    result = {
        "move": how,
        "victim": victim,
        "before_per_s": rate(-w, 0),
        "during_per_s": rate(0, w),
        "gap_s": new,
        "after_per_s": rate(new + 2, new + 2 + w) if new is not None else None,
        "series": [round(rate(s, s + 1)) for s in range(-3, int((new or 0) + 2 + w))],
        "errors": dict(sorted(sum((Counter(c.errors) for c in committers), Counter()).items())),
        "acknowledged_then_lost": lost,
        "above_last_sent": late,
        "settled_per_committer": per_committer,
        **events,
    }
    print(
        f"# commits, {how}: before {result['before_per_s']:.0f}/s, {w:g} s after the move "
        f"{result['during_per_s']:.0f}/s, settled {result['after_per_s'] or 0:.0f}/s; first commit to the new "
        f"coordinator after {new or -1:.2f} s ({', '.join(f'{k} {v:.2f}' for k, v in events.items())}); per second "
        f"from -3 s: {result['series']}; errors {result['errors']}; "
        f"lost {lost}",
        file=sys.stderr,
        flush=True,
    )
    bench.restart(victim)
    return result


# -- the machine -----------------------------------------------------------------------------------------------


class CpuSampler:
    """On a shared machine: how much of the CPU went to this benchmark (the nodes, PostgreSQL and its backends,
    this process) and how much to everything else. A thread reads the CPU time of the benchmark's processes
    every half second (a node is killed and restarted, backends come and go: each process counts with what it
    used between its first and its last sample; a backend that lived less than half a second is missed)."""

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self._pids = pids
        self._seen: dict[int, tuple[float, float]] = {}  # pid -> (first, last) CPU seconds seen
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()

    def sample(self) -> None:
        for pid in self._pids():
            cpu = process_cpu(pid)
            if cpu:
                with self._lock:
                    first, _ = self._seen.get(pid, (cpu, cpu))
                    self._seen[pid] = (first, cpu)

    def ours(self) -> float:
        with self._lock:
            return sum(last - first for first, last in self._seen.values())

    def mark(self) -> tuple[float, float, float, float, float]:
        self.sample()
        busy, steal, total = machine_cpu()
        return time.monotonic(), self.ours() + self_cpu(), busy, steal, total

    @staticmethod
    def usage(start: tuple[float, ...], end: tuple[float, ...]) -> dict[str, float]:
        """Cores used on average between two marks: by the benchmark, by everything else; the steal's share."""
        wall, ours, busy, steal, total = (b - a for a, b in zip(start, end))
        return {
            "seconds": round(wall),
            "bench_cores": round(ours / wall, 2),
            "other_cores": round(max(0.0, busy - ours) / wall, 2),
            "steal": round(steal / max(total, 1e-9), 3),
        }

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


# -- driver ----------------------------------------------------------------------------------------------------


def median_max(values: list[float | None]) -> dict[str, Any]:
    present = [v for v in values if v is not None]
    return {
        "median": round(statistics.median(present), 2) if present else None,
        "max": round(max(present), 2) if present else None,
        "missing": len(values) - len(present),
        "runs": [None if v is None else round(v, 2) for v in values],
    }


def summarise(failovers: list[dict[str, Any]], loads: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if failovers:
        out["failover"] = {
            key: median_max([r.get(key) for r in failovers])
            for key in (
                "all_ok_s",
                "all_ok_after_load_s",
                "first_ok_s",
                "expired",
                "moved",
                "taken",
                "named_s",
                "loaded_s",
            )
        }
        out["failover"]["within_5s"] = sum(1 for r in failovers if r["all_ok_s"] is not None and r["all_ok_s"] <= 5)
        out["failover"]["rebalances"] = sum(r["rebalance_errors"] + r["generation_changes"] for r in failovers)
    if loads:
        out["load"] = {key: median_max([r.get(key) for r in loads]) for key in ("load_s", "loaded_s", "taken")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10, help="kills of the coordinator of the member groups")
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--members", type=int, default=10, help="members per group")
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--session-ms", type=int, default=10_000, help="the members' session timeout")
    parser.add_argument("--retry-backoff-ms", type=int, default=100)
    parser.add_argument(
        "--retry-backoff-max-ms",
        type=int,
        default=100,
        help="above --retry-backoff-ms: the backoff doubles up to it, with 20 %% jitter",
    )
    parser.add_argument("--load-groups", type=int, default=100)
    parser.add_argument("--load-partitions", type=int, default=1000, help="offsets committed per load group")
    parser.add_argument("--load-runs", type=int, default=3)
    parser.add_argument("--load-move", choices=("kill", "shutdown"), default="kill")
    parser.add_argument("--committers", type=int, default=16)
    parser.add_argument("--pipeline", type=int, default=4, help="commits in flight per committer")
    parser.add_argument("--rate-seconds", type=float, default=5.0)
    parser.add_argument("--rate-moves", default="kill,shutdown")
    parser.add_argument("--skip", action="append", default=[], choices=("failover", "load", "rate"))
    parser.add_argument("--quick", action="store_true", help="a smoke run: everything small")
    parser.add_argument("--keep-logs", action="store_true", help="keep the nodes' logs (their directory is printed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.groups, args.members = 2, 3, 3
        args.load_groups, args.load_partitions, args.load_runs = 10, 100, 1
        args.committers, args.rate_seconds, args.rate_moves = 4, 2.0, "kill"
    started, load, clock = time.strftime("%Y-%m-%d %H:%M"), os.getloadavg(), time.monotonic()
    pg, base = start_postgres()
    cluster = None
    failovers: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    rates: list[dict[str, Any]] = []
    setup = None
    wrong = None
    sampler: CpuSampler | None = None
    machine: dict[str, dict[str, float]] = {}

    def used(part: str, start: tuple[float, ...]) -> tuple[float, ...]:
        assert sampler is not None
        end = sampler.mark()
        machine[part] = CpuSampler.usage(start, end)
        print(f"# {part}: {machine[part]}", file=sys.stderr, flush=True)
        return end

    try:
        url = pg.create_database("herd_bench_failover", replace=True)
        cluster = HerdCluster(
            Path(base) / "cluster",
            args.nodes,
            {
                "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "group.initial.rebalance.delay.ms": "500",
                "num.partitions": "1",
            },
            database_url=url,
            faults=False,
        )
        cluster.start(balanced=False)  # Bench.wait_leading below waits for each node's share
        sampler = CpuSampler(
            lambda: [*(n.proc.pid for n in cluster.nodes if n.proc and n.proc.poll() is None), *children(pg.pid or 0)]
        )
        bench = Bench(cluster)
        for node in range(args.nodes):
            bench.wait_leading(node)
        num_partitions = len(bench.leaders())
        print(
            f"# PostgreSQL {pg.pid}, cluster {cluster.bootstrap}, {num_partitions} {OFFSETS} partitions; data "
            f"under {base}",
            file=sys.stderr,
            flush=True,
        )
        mark = sampler.mark()
        if "failover" not in args.skip:
            failovers = run_failovers(bench, args, num_partitions)
            mark = used("failover", mark)
        if "load" not in args.skip or "rate" not in args.skip:
            setup = setup_load(bench, args, num_partitions)
            print(
                f"# load: {setup.offsets:,} offsets of {len(setup.groups)} groups committed to {OFFSETS}-"
                f"{setup.partition} in {setup.seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )
        if "load" not in args.skip:
            assert setup is not None
            loads = [load_run(bench, args, setup, run) for run in range(args.load_runs)]
            wrong = check_offsets(bench, setup, args.load_partitions)
            print(f"# load: {wrong} committed offsets not fetched back as committed", file=sys.stderr, flush=True)
            mark = used("load", mark)
        if "rate" not in args.skip:
            assert setup is not None
            rates = [rate_run(bench, args, setup, how) for how in args.rate_moves.split(",")]
            mark = used("rate", mark)
    finally:
        if sampler is not None:
            sampler.close()
        stop_all(cluster, pg, base, args.keep_logs)
    result = {
        "meta": {
            **run_meta(started, load, args),
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "seconds": round(time.monotonic() - clock),
        },
        "machine": machine,
        "summary": summarise(failovers, loads),
        "load_setup": None
        if setup is None
        else {
            "partition": setup.partition,
            "groups": len(setup.groups),
            "offsets": setup.offsets,
            "seconds": round(setup.seconds, 1),
            "wrong_after_moves": wrong,
        },
        "failovers": failovers,
        "loads": loads,
        "rates": rates,
    }
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return
    print_report(result)


def print_report(result: dict[str, Any]) -> None:
    summary = result["summary"]
    if "failover" in summary:
        f = summary["failover"]
        runs = len(result["failovers"])
        print(
            f"failover, {runs} kills: every member heartbeating NONE to the new coordinator: median "
            f"{f['all_ok_s']['median']} s, worst {f['all_ok_s']['max']} s ({f['within_5s']} of {runs} within 5 s; "
            f"missing {f['all_ok_s']['missing']}); with a heartbeat sent after the load: median "
            f"{f['all_ok_after_load_s']['median']} s, worst {f['all_ok_after_load_s']['max']} s; rebalances "
            f"{f['rebalances']}"
        )
        for key, label in (
            ("expired", "lease found expired"),
            ("moved", "move stored"),
            ("taken", "partitions taken by the new leaders"),
            ("named_s", "FindCoordinator names it"),
            ("loaded_s", "loaded (OffsetFetch NONE)"),
            ("first_ok_s", "first member NONE"),
        ):
            print(f"  {label:40s} median {f[key]['median']}, worst {f[key]['max']} s after the kill: {f[key]['runs']}")
    if "load" in summary:
        s, setup = summary["load"], result["load_setup"]
        print(
            f"load of {setup['offsets']:,} offsets in {setup['groups']} groups: taken -> loaded median "
            f"{s['load_s']['median']} s, worst {s['load_s']['max']} s {s['load_s']['runs']}; move -> loaded "
            f"{s['loaded_s']['runs']}; offsets not fetched back {setup['wrong_after_moves']}"
        )
    for r in result["rates"]:
        print(
            f"commits, {r['move']}: before {r['before_per_s']:.0f}/s, first "
            f"{result['meta']['args']['rate_seconds']:g} s "
            f"after the move {r['during_per_s']:.0f}/s, settled {r['after_per_s'] or 0:.0f}/s, gap "
            f"{r['gap_s'] or -1:.2f} s; per second from -3 s {r['series']}; errors {r['errors']}; acknowledged "
            f"then lost "
            f"{r['acknowledged_then_lost']}"
        )
    for part, u in result["machine"].items():
        print(
            f"{part}: {u['seconds']} s, the benchmark used {u['bench_cores']} cores, other processes "
            f"{u['other_cores']}, steal {100 * u['steal']:.1f} %"
        )
    m = result["meta"]
    print(
        f"commit {m['commit']}, {m['date']}, {m['seconds']} s, {m['cpus']} CPUs, load average before "
        f"{m['load_before']}, after {m['load_after']}: {m['command']}"
    )


if __name__ == "__main__":
    main()
