"""kill -9 of random coordinator nodes of a three-node cluster while committers pipeline offset commits to
groups coordinated by every node: after every kill, each commit acknowledged until then is fetched at or above
its offset from the group's new coordinator, no offset above the last one attempted is ever fetched, and no
fetch goes back below an earlier one.

The budget is fixed: KILLS (20) kills, one node down at a time, about 70 s on two cores shared with other
work. Each group (two per `__consumer_offsets` partition, six partitions, so every node coordinates some) has
one committer thread that behaves as a client does: it looks its coordinator up with FindCoordinator and sends
OffsetCommit v8 simple commits (generation -1) over one raw socket, WINDOW at a time back to back (pipelined,
so several are in flight when a node dies), with offsets that only grow per partition. On an error the Java
consumer retries (RETRIABLE: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) or a lost connection it reads
what is still due, looks the coordinator up again and goes on with new offsets: a failed commit is never sent
again, the next one supersedes it, as a consumer's next commit does. Any other error fails the test at the
end. Per partition it records the highest offset attempted (before sending it) and the highest acknowledged
with NONE.

Each round: commit a while, pick a node that coordinates some group (FindCoordinator), kill -9 it; a thread
fetches every group's offsets with OffsetFetch v8 from whichever node coordinates it (retrying what a client
retries, so it also waits for the groups to have a coordinator again) while the main thread restarts the node
once its lease can have run out (`broker.session.timeout.ms` after the kill). Acknowledgements are read just
before the fetch and attempts just after its answer: acknowledged-before <= fetched <= attempted-after. The
restarted node takes partitions back when it registers (a controlled move), so the rounds see both kinds of
move. A short session timeout keeps each kill short.

A fetched offset below an acknowledged one is a lost acknowledged commit; one above the last attempted was
never sent; one below an earlier fetch was visible before it was durable. All three are bugs in herd;
retriable errors and resets are what a client lives with and are only counted.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from backends import ClusterBroker
from kio.schema.errors import ErrorCode
from rawkafka import RawClient
from test_groups_api import part, req

from herd.coordinator.partition import coordinator_partition
from herd.testing import HerdCluster
from herd.testing import wait as waiting

COMMIT, FETCH, FIND = 8, 9, 10
COMMIT_V, FETCH_V, FIND_V = 8, 8, 4
NODES = 3
OFFSETS_PARTITIONS = 6
GROUPS_PER_PARTITION = 2
TOPIC, PARTITIONS = "data", 4
KILLS = 20
WINDOW = 4  # commits sent back to back, in flight together
PAUSE_S = 0.05  # between two bursts: the machine has two cores for everything
SESSION_MS = 1500
SETTINGS = {
    "broker.session.timeout.ms": str(SESSION_MS),
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
}
# what the Java consumer retries after an OffsetCommit (apache/kafka clients/src/main/java/org/apache/kafka/
# clients/consumer/internals/ConsumerCoordinator.java, OffsetCommitResponseHandler)
RETRIABLE = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out,
    ErrorCode.unknown_topic_or_partition,
}
IO_TIMEOUT_S = 15.0  # a dead node resets its connections at once; this only bounds a hang
FAILOVER_TIMEOUT_S = 30.0  # from a kill until every group answers again: ~1.5 s expected, generous for load

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def crash_groups() -> list[str]:
    """GROUPS_PER_PARTITION group ids for each `__consumer_offsets` partition: every node coordinates some."""
    chosen: dict[int, list[str]] = {p: [] for p in range(OFFSETS_PARTITIONS)}
    i = 0
    while any(len(g) < GROUPS_PER_PARTITION for g in chosen.values()):
        group = f"crash-{i}"
        slot = chosen[coordinator_partition(group, OFFSETS_PARTITIONS)]
        if len(slot) < GROUPS_PER_PARTITION:
            slot.append(group)
        i += 1
    return sorted(g for groups in chosen.values() for g in groups)


def find_coordinators(ports: list[int], groups: list[str], rng: random.Random) -> dict[str, tuple[int, int]]:
    """(node id, port) of the coordinator of each group that has one, asked of the first node that answers."""
    for port in rng.sample(ports, len(ports)):
        try:
            with RawClient(port, timeout=IO_TIMEOUT_S) as c:
                r = c.request(FIND, FIND_V, req(FIND, FIND_V, key_type=0, coordinator_keys=tuple(groups)))
        except OSError:
            continue  # a dead node
        return {x.key: (x.node_id, x.port) for x in r.coordinators if x.error_code == ErrorCode.none}
    return {}


def fetch_offsets(ports: list[int], groups: list[str], rng: random.Random,
                  timeout: float = FAILOVER_TIMEOUT_S) -> dict[str, list[int]]:  # fmt: skip
    """Every group's committed offsets, each from the node that coordinates it when asked; retries what a
    client retries (no coordinator yet, a dead node, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) until all
    answered, so it returns once every group has a coordinator again."""
    fetched: dict[str, list[int]] = {}

    def all_fetched() -> bool:
        pending = [g for g in groups if g not in fetched]
        if not pending:
            return True
        by_port: dict[int, list[str]] = {}
        for group, (_, port) in find_coordinators(ports, pending, rng).items():
            by_port.setdefault(port, []).append(group)
        for port, asked in by_port.items():
            try:
                with RawClient(port, timeout=IO_TIMEOUT_S) as c:
                    r = c.request(FETCH, FETCH_V, fetch_request(asked))
            except OSError:
                continue  # the coordinator named died (or is the one just killed)
            for g in r.groups:
                if g.error_code == ErrorCode.none:
                    offsets = {p.partition_index: p.committed_offset for p in g.topics[0].partitions}
                    assert all(p.error_code == ErrorCode.none for p in g.topics[0].partitions), g
                    fetched[g.group_id] = [offsets[p] for p in range(PARTITIONS)]
                else:
                    assert g.error_code in RETRIABLE, f"{g.group_id}: {ErrorCode(g.error_code).name}"
        return len(fetched) >= len(groups)

    waiting.wait_until(
        all_fetched,
        timeout,
        lambda: f"a coordinator to answer for {[g for g in groups if g not in fetched]}",
        interval=0.03,
    )
    return fetched


def fetch_request(groups: list[str]) -> Any:
    topic = part(FETCH, FETCH_V, "OffsetFetchRequestTopics", name=TOPIC, partition_indexes=tuple(range(PARTITIONS)))
    return req(
        FETCH,
        FETCH_V,
        require_stable=True,
        groups=tuple(part(FETCH, FETCH_V, "OffsetFetchRequestGroup", group_id=g, topics=(topic,)) for g in groups),
    )


def commit_request(group: str, offsets: dict[int, int]) -> Any:
    topic = part(
        COMMIT,
        COMMIT_V,
        "OffsetCommitRequestTopic",
        name=TOPIC,
        partitions=tuple(
            part(
                COMMIT,
                COMMIT_V,
                "OffsetCommitRequestPartition",
                partition_index=p,
                committed_offset=o,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
            for p, o in offsets.items()
        ),
    )
    return req(
        COMMIT,
        COMMIT_V,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(topic,),
    )


Offsets = dict[str, list[int]]  # group -> an offset for each partition (-1: none)


class Committer(threading.Thread):
    """One group's client: commits ever-growing offsets to the group's coordinator, following it as it moves.
    `attempted[p]` is set before a commit of partition p is sent, `acked[p]` when NONE comes back for it; the
    test thread reads both (lists of ints, one writer)."""

    def __init__(self, group: str, ports: list[int], stopping: threading.Event) -> None:
        super().__init__(name=f"committer-{group}", daemon=True)
        self.group, self.ports, self.stopping = group, ports, stopping
        self.attempted = [-1] * PARTITIONS
        self.acked = [-1] * PARTITIONS
        self.acks = 0
        self.refused = 0  # answered with a retriable error
        self.unknown = 0  # in flight when the connection was lost: outcome unknown to the client
        self.unexpected: list[str] = []
        self._rng = random.Random(group)
        self._turn = 0

    def run(self) -> None:
        while not self.stopping.is_set():
            found = find_coordinators(self.ports, [self.group], self._rng).get(self.group)
            if found is None:
                time.sleep(0.05)  # COORDINATOR_NOT_AVAILABLE, or no node answered
            elif self._session(found[1]) == ErrorCode.coordinator_load_in_progress:
                time.sleep(0.02)

    def _session(self, port: int) -> int | None:
        """Pipeline commits to `port` until one is refused with a retriable error or the connection is lost,
        reading every answer still due after a refusal. Returns that error, if any."""
        try:
            client = RawClient(port, timeout=IO_TIMEOUT_S)
        except OSError:
            time.sleep(0.02)  # the coordinator named has died
            return None
        in_flight: deque[dict[int, int]] = deque()
        refusal: int | None = None
        try:
            while True:
                if not in_flight:
                    if refusal is not None or self.stopping.is_set():
                        return refusal
                    time.sleep(PAUSE_S)
                    for _ in range(WINDOW):
                        offsets = self._next_commit()
                        client.send_raw(client.encode(COMMIT, COMMIT_V, commit_request(self.group, offsets)))
                        in_flight.append(offsets)
                response = client.read_response(COMMIT, COMMIT_V)
                offsets = in_flight.popleft()
                for p in response.topics[0].partitions:
                    code = self._answered(p.partition_index, offsets[p.partition_index], p.error_code)
                    refusal = code or refusal
        except (OSError, ConnectionError):
            self.unknown += len(in_flight)
            return refusal
        finally:
            client.close()

    def _next_commit(self) -> dict[int, int]:
        """One or two partitions, each at its last attempted offset plus one (recorded before it is sent)."""
        chosen = {self._turn % PARTITIONS, self._rng.randrange(PARTITIONS)}
        self._turn += 1
        offsets = {}
        for p in sorted(chosen):
            self.attempted[p] += 1
            offsets[p] = self.attempted[p]
        return offsets

    def _answered(self, partition: int, offset: int, code: int) -> int | None:
        if code == ErrorCode.none:
            self.acked[partition] = max(self.acked[partition], offset)
            self.acks += 1
            return None
        if code in RETRIABLE:
            self.refused += 1
            return code
        self.unexpected.append(f"{self.group}/{partition} offset {offset}: {ErrorCode(code).name}")
        return None


def violations(groups: list[str], acked: Offsets, fetched: Offsets, attempted: Offsets,
               before: Offsets) -> list[str]:  # fmt: skip
    """What breaks acknowledged <= fetched <= attempted, or fetched >= fetched before, one line per (group,
    partition). Offsets only grow per partition, so a fetch that goes back saw a commit not yet durable."""
    found = []
    for g in groups:
        for p in range(PARTITIONS):
            a, f, t, b = acked[g][p], fetched[g][p], attempted[g][p], before[g][p]
            where = f"{g}/{TOPIC}-{p}"
            if f < a:
                found.append(f"{where}: acknowledged {a}, fetched {f} (an acknowledged commit lost)")
            if f > t:
                found.append(f"{where}: fetched {f}, last attempted {t} (never sent)")
            if f < b:
                found.append(f"{where}: fetched {b} before, {f} now (a commit visible before it was durable)")
    return found


def restart_when_allowed(cluster: HerdCluster, i: int, killed_at: float) -> None:
    """Restart node i once its lease can have run out; a registration still refused (the lease ran from a
    renewal the test did not see) is tried again. Called on the test's main thread: the nodes are started
    with PR_SET_PDEATHSIG, which fires when the *thread* that started them ends."""
    time.sleep(max(0.0, killed_at + SESSION_MS / 1000 - time.monotonic()))
    cluster.restart(i, FAILOVER_TIMEOUT_S)


class Check(threading.Thread):
    """The check after a kill, in a thread while the main thread restarts the node: every group's offsets
    fetched from its coordinator against what was acknowledged before and attempted after."""

    def __init__(self, committers: list[Committer], ports: list[int], rng: random.Random,
                 before: Offsets) -> None:  # fmt: skip
        super().__init__(name="check", daemon=True)
        self.committers, self.ports, self.rng, self.before = committers, ports, rng, before
        self.fetched: Offsets = {}
        self.found: list[str] = []
        self.error: BaseException | None = None
        self.answered_at = 0.0

    def run(self) -> None:
        try:
            self.found = check(self.committers, self.ports, self.rng, self.before, self.fetched)
            self.answered_at = time.monotonic()
        except BaseException as e:  # noqa: BLE001 (raised again on the main thread)
            self.error = e


def check(committers: list[Committer], ports: list[int], rng: random.Random, before: Offsets,
          fetched: Offsets) -> list[str]:  # fmt: skip
    """Fetch every group's offsets into `fetched`, acknowledgements read before and attempts after; the
    violations."""
    groups = [c.group for c in committers]
    acked = {c.group: list(c.acked) for c in committers}
    fetched.update(fetch_offsets(ports, groups, rng))
    attempted = {c.group: list(c.attempted) for c in committers}
    return violations(groups, acked, fetched, attempted, before)


def coordinating(ports: list[int], groups: list[str], rng: random.Random) -> set[int] | None:
    """The nodes that coordinate the groups, or None while some group has no coordinator."""
    found = find_coordinators(ports, groups, rng)
    return {node for node, _ in found.values()} if len(found) == len(groups) else None


def wait_until(condition: Any, what: str, timeout: float = FAILOVER_TIMEOUT_S) -> None:
    waiting.wait_until(condition, timeout, what, interval=0.05)


def test_acknowledged_commits_survive_kill_9_of_random_coordinators(new_cluster: HerdCluster,
                                                                    tmp_path: Path) -> None:  # fmt: skip
    started = time.monotonic()
    seed = random.randrange(1 << 32)  # the victims and pauses; the rest is timing, which no seed repeats
    rng = random.Random(seed)
    cluster = new_cluster
    cluster.overrides.update(SETTINGS)
    cluster.start(nodes=NODES, balanced=False)
    ports = [node.port for node in cluster.nodes]
    groups = crash_groups()
    wait_until(lambda: coordinating(ports, groups, rng) == set(range(NODES)), "every node coordinating", 60)
    ClusterBroker(cluster, None).create_topic(TOPIC, PARTITIONS)

    stopping = threading.Event()
    committers = [Committer(g, ports, stopping) for g in groups]
    for c in committers:
        c.start()
    kills: list[int] = []
    fetched: Offsets = {g: [-1] * PARTITIONS for g in groups}
    failovers: list[float] = []
    try:
        wait_until(lambda: all(c.acks for c in committers), "every group's first acknowledged commit")
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.1, 0.6))
            exited = [i for i in range(NODES) if not cluster.running(i)]
            assert not exited, f"node {exited[0]} exited by itself:\n{cluster.log(exited[0])[-3000:]}"
            coordinators = find_coordinators(ports, groups, rng)
            candidates = sorted({n for n, _ in coordinators.values() if cluster.running(n)})
            assert candidates, "no node coordinates anything"
            victim = rng.choice(candidates)
            cluster.kill(victim)
            killed_at = time.monotonic()
            kills.append(victim)
            checking = Check(committers, ports, random.Random(rng.random()), fetched)
            checking.start()
            restart_when_allowed(cluster, victim, killed_at)
            checking.join(FAILOVER_TIMEOUT_S + IO_TIMEOUT_S)
            assert not checking.is_alive(), "the check hung"
            if checking.error is not None:
                raise checking.error
            assert not checking.found, report(cluster, tmp_path, seed, victim, len(kills), checking.found)
            fetched = checking.fetched
            failovers.append(checking.answered_at - killed_at)
        acks_at_last_kill = {c.group: c.acks for c in committers}
        wait_until(
            lambda: all(c.acks > acks_at_last_kill[c.group] for c in committers),
            "every group's commits acknowledged after the last kill",
        )
    finally:
        stopping.set()
        for c in committers:
            c.join(IO_TIMEOUT_S * 2)
    assert not any(c.is_alive() for c in committers), "a committer hung"
    found = check(committers, ports, rng, fetched, {})
    assert not found, report(cluster, tmp_path, seed, -1, len(kills), found)
    unexpected = [u for c in committers for u in c.unexpected]
    assert not unexpected, f"non-retriable answers to OffsetCommit: {unexpected[:20]}"

    failovers.sort()
    by_node = "/".join(str(kills.count(i)) for i in range(NODES))
    median, worst = failovers[len(failovers) // 2], failovers[-1]
    print(
        f"\nfailover crash: {len(kills)} kills (node 0/1/2: {by_node}), "
        f"{sum(c.acks for c in committers)} partition commits acknowledged, "
        f"{sum(c.refused for c in committers)} refused (retriable), "
        f"{sum(c.unknown for c in committers)} lost in flight with their connection; every group answering "
        f"again {median:.1f} s (median) / {worst:.1f} s (max) after a kill; "
        f"{time.monotonic() - started:.0f} s (seed {seed})"
    )


def report(cluster: HerdCluster, tmp_path: Path, seed: int, victim: int, kill: int, found: list[str]) -> str:
    """The violations, with every node's log saved next to the test's files (their paths in the message)."""
    paths = []
    for i in range(len(cluster.nodes)):
        path = tmp_path / f"node-{i}-at-kill-{kill}.log"
        path.write_bytes(cluster.nodes[i].log_path.read_bytes())  # every run of the node, not only the last
        paths.append(str(path))
    where = f"after kill {kill} (node {victim})" if victim >= 0 else "at the end"
    where += f" (seed {seed})"
    return f"{where}: {len(found)} violations:\n" + "\n".join(found[:30]) + "\nnode logs: " + " ".join(paths)


def test_the_check_finds_each_kind_of_violation() -> None:
    """The harness itself: what the crash test would report, on made-up offsets."""
    groups = ["g"]
    assert (
        violations(
            groups,
            acked={"g": [5, -1, 3, 0]},
            fetched={"g": [5, -1, 4, 0]},
            attempted={"g": [6, -1, 4, 2]},
            before={"g": [5, -1, 2, 0]},
        )
        == []
    )
    found = violations(
        groups,
        acked={"g": [5, 0, 0, 0]},
        fetched={"g": [4, 7, 1, 0]},
        attempted={"g": [6, 6, 1, 0]},
        before={"g": [0, 0, 2, 0]},
    )
    assert found == [
        f"g/{TOPIC}-0: acknowledged 5, fetched 4 (an acknowledged commit lost)",
        f"g/{TOPIC}-1: fetched 7, last attempted 6 (never sent)",
        f"g/{TOPIC}-2: fetched 2 before, 1 now (a commit visible before it was durable)",
    ]
