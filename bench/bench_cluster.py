"""Cluster mode against the embedded single node, side by side in one run on the same machine.

    .venv/bin/python bench/bench_cluster.py [--mb 200] [--repeat 3] [--partitions 3] [--nodes 3]
                                            [--commit-seconds 5] [--committers 64,1] [--failovers 5]
                                            [--wait-quiet CORES] [--json]

The script starts a PostgreSQL server of its own (`herd.cli.localpg.LocalPostgres`, data in a temporary
directory under /tmp, fsync and synchronous_commit on), one embedded `herd serve` (segment files) and a cluster
of --nodes `herd serve` processes over PostgreSQL (herd.testing's HerdCluster,
broker.session.timeout.ms=3000), and measures each of them with the same clients:

1. produce: --mb of 1 KB values with acks=all to a topic of --partitions partitions, message i to partition
   i mod P (`bench_produce_fetch.produce`: one confluent-kafka Producer, linger.ms=5, batch.size 1 MB). The
   cluster's producer bootstraps with every node and sends each partition's batches to its leader; placement
   spreads the partitions over the nodes.
2. fetch: the same values read back by one Consumer assigned every partition (`bench_produce_fetch.fetch`).
3. commits: 64 committers in 8 groups (--committers: other counts too), one OffsetCommit in flight each
   (`bench_offsets.bench_commits`); in the cluster each committer connects to its group's coordinator
   (FindCoordinator), which writes the commit to PostgreSQL before it answers.
4. failover (cluster only): the leader of a partition is killed with SIGKILL; a probe asks a live node for
   Metadata every 10 ms and, once a live node leads the partition, produces one batch to it (acks=all). The
   figure is the time from the kill to the first successful produce. The node is then restarted and the next
   round waits until it leads partitions again.

Each of 1-3 runs --repeat times per side, alternating embedded and cluster; the medians are reported, with
the CPU of the herd processes, of PostgreSQL (the postmaster and all its children), of this client and of
everything else on the machine, the hypervisor's steal, and PostgreSQL's WAL bytes (the insert position),
WAL syncs and transactions per phase (pg_stat_wal, pg_stat_database: backends report these at most once a
second, so over a short phase they are approximate).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # HerdCluster, RawClient

import psycopg  # noqa: E402
from bench_offsets import bench_commits, build, group_of  # noqa: E402
from bench_offsets import create_topic as create_commit_topic  # noqa: E402
from bench_pg_store import make_batch  # noqa: E402
from bench_produce_fetch import (  # noqa: E402
    Broker,
    Profiler,
    create_topic,
    fetch,
    machine_cpu,
    process_cpu,
    produce,
    self_cpu,
    source_commit,
    wait_quiet,
)
from rawkafka import RawClient  # noqa: E402

from herd.cli.localpg import LocalPostgres  # noqa: E402
from herd.testing import HerdCluster  # noqa: E402

VALUE_SIZE = 1024
COMMITTERS, COMMIT_GROUPS = 64, 8
SESSION_TIMEOUT_MS = 3000
METADATA, PRODUCE, FIND_COORDINATOR = 3, 0, 10
PROBE_INTERVAL_S = 0.01


# -- accounting ------------------------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    """`pid` and its children (PostgreSQL's backends are children of the postmaster)."""
    found = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


@dataclass
class Usage:
    """What one phase cost: seconds of wall clock, CPU seconds per process group, PostgreSQL's counters."""

    seconds: float = 0.0
    herd_cpu: float = 0.0  # the herd process(es): the embedded node or every cluster node
    pg_cpu: float = 0.0
    client_cpu: float = 0.0
    others_cpu: float = 0.0
    steal: float = 0.0  # share of the machine's CPU time
    wal_bytes: int = 0
    wal_syncs: int = 0
    xacts: int = 0  # transactions committed in the cluster's database
    per_node_cpu: list[float] = field(default_factory=list)


class Meter:
    """Snapshots of the herd processes, PostgreSQL and the machine around a phase."""

    def __init__(self, pg: LocalPostgres, dbname: str) -> None:
        self.pg = pg
        self.dbname = dbname
        self.conn = psycopg.connect(pg.url(dbname), autocommit=True)

    def _pg_counters(self) -> tuple[int, int, int]:
        row = self.conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0'), w.wal_sync, d.xact_commit "
            "FROM pg_stat_wal w, pg_stat_database d WHERE d.datname = %s",
            (self.dbname,),
        ).fetchone()
        assert row is not None
        return int(row[0]), int(row[1]), int(row[2])

    def _pg_cpu(self) -> dict[int, float]:
        assert self.pg.pid is not None
        return {pid: process_cpu(pid) for pid in children(self.pg.pid)}

    @contextmanager
    def measure(self, herd_pids: list[int]) -> Iterator[Usage]:
        usage = Usage()
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        counters0, pg0 = self._pg_counters(), self._pg_cpu()
        nodes0, client0, machine0 = [process_cpu(p) for p in herd_pids], self_cpu(), machine_cpu()
        started = time.perf_counter()
        yield usage
        usage.seconds = time.perf_counter() - started
        machine1, client1, nodes1 = machine_cpu(), self_cpu(), [process_cpu(p) for p in herd_pids]
        pg1 = self._pg_cpu()
        time.sleep(1.2)  # backends report their statistics at most once a second (the WAL position is exact)
        self.conn.execute("SELECT pg_stat_clear_snapshot()")
        counters1 = self._pg_counters()
        usage.per_node_cpu = [b - a for a, b in zip(nodes0, nodes1)]
        usage.herd_cpu = sum(usage.per_node_cpu)
        usage.pg_cpu = sum(cpu - pg0.get(pid, 0.0) for pid, cpu in pg1.items())
        usage.client_cpu = client1 - client0
        usage.others_cpu = max(0.0, machine1[0] - machine0[0] - usage.herd_cpu - usage.pg_cpu - usage.client_cpu)
        usage.steal = (machine1[1] - machine0[1]) / max(machine1[2] - machine0[2], 1e-9)
        usage.wal_bytes, usage.wal_syncs, usage.xacts = (b - a for a, b in zip(counters0, counters1))

    def close(self) -> None:
        self.conn.close()


# -- one side: the embedded node or the cluster ----------------------------------------------------------------


@dataclass
class Side:
    name: str  # "embedded" or "cluster"
    bootstrap: str
    pids: list[int]
    ports: list[int]
    node_ids: list[int]


@dataclass
class Row:
    side: str
    phase: str
    rate: float  # MB/s of values, or commits/s
    usage: Usage
    extra: dict[str, Any] = field(default_factory=dict)


def run_data(side: Side, meter: Meter, args: argparse.Namespace, rep: int) -> list[Row]:
    topic = f"bench-{side.name}-{rep}-{uuid.uuid4().hex[:6]}"
    create_topic(side.bootstrap, topic, args.partitions)
    count = args.mb * 1_000_000 // VALUE_SIZE
    rows = []
    for phase, fn, extra in (("produce", produce, {"acks": "all"}), ("fetch", fetch, {})):
        quiet(side, args)
        with (
            profiled(args.py_spy if side.name == "cluster" else None, side, f"{phase}-{rep}"),
            meter.measure(side.pids) as usage,
        ):
            result = fn(side.bootstrap, topic, count, VALUE_SIZE, extra, args.partitions)
        rows.append(Row(side.name, phase, result.mb_per_s, usage))
        report(rows[-1])
    return rows


def quiet(side: Side, args: argparse.Namespace) -> None:
    """With --wait-quiet: wait until the rest of the machine is quiet (bench_produce_fetch.wait_quiet)."""
    if args.wait_quiet is not None:
        wait_quiet(side.pids[0], args.wait_quiet, args.wait_quiet_timeout)


@contextmanager
def profiled(directory: str | None, side: Side, name: str) -> Iterator[None]:
    """py-spy on every process of `side` (bench_produce_fetch's Profiler), or nothing without a directory."""
    with ExitStack() as stack:
        for i, pid in enumerate(side.pids if directory else []):
            stack.enter_context(Profiler(directory, "raw", pid, f"{name}-node{i}", 250, False))
        yield


def coordinators(side: Side, groups: list[str]) -> dict[str, int]:
    """The port of each group's coordinator (FindCoordinator v4, retried while it is being loaded)."""
    found: dict[str, int] = {}
    deadline = time.monotonic() + 60
    with RawClient(side.ports[0]) as client:
        while len(found) < len(groups):
            answer = client.request(
                FIND_COORDINATOR,
                4,
                build(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=tuple(g for g in groups if g not in found)),
            )
            for c in answer.coordinators:
                if c.error_code == 0:
                    found[c.key] = c.port
            if time.monotonic() > deadline:
                raise RuntimeError(f"no coordinator for {sorted(set(groups) - set(found))}")
            time.sleep(0.05)
    return found


def run_commits(side: Side, meter: Meter, args: argparse.Namespace, committers: int) -> Row:
    groups = sorted({group_of(i, COMMIT_GROUPS) for i in range(committers)})
    ports = coordinators(side, groups) if len(side.ports) > 1 else None
    bench_commits(side.ports[0], committers, 1.0, COMMIT_GROUPS, coordinators=ports)  # groups loaded, warm
    quiet(side, args)
    with (
        profiled(args.py_spy if side.name == "cluster" else None, side, f"commits-{time.time():.0f}"),
        meter.measure(side.pids) as usage,
    ):
        result = bench_commits(side.ports[0], committers, args.commit_seconds, COMMIT_GROUPS, coordinators=ports)
    usage.seconds = args.commit_seconds  # the committers' own clock; the rest of the window is connecting
    phase = "commits" if committers == COMMITTERS else f"commits-{committers}"
    row = Row(
        side.name, phase, result["per_second"], usage, {k: result[k] for k in ("commits", "p50_ms", "p99_ms", "errors")}
    )
    report(row)
    return row


def report(row: Row) -> None:
    u = row.usage
    unit = "commits/s" if row.phase.startswith("commits") else "MB/s"
    print(
        f"# {row.side:8s} {row.phase:8s} {row.rate:10,.1f} {unit:9s} herd {u.herd_cpu / u.seconds:4.0%} "
        f"pg {u.pg_cpu / u.seconds:4.0%} client {u.client_cpu / u.seconds:4.0%} "
        f"others {u.others_cpu / u.seconds:4.0%} steal {u.steal:4.0%}  WAL {u.wal_bytes / 1e6:7.1f} MB "
        f"{u.wal_syncs} syncs {u.xacts} xacts {row.extra or ''}",
        file=sys.stderr,
        flush=True,
    )


# -- failover --------------------------------------------------------------------------------------------------


def metadata_leaders(port: int, topic: str) -> dict[int, tuple[int, int]] | None:
    """partition -> (leader, port of the leader) as node `port` sees it; None if it cannot be asked."""
    try:
        with RawClient(port, timeout=1.0) as client:
            answer = client.request(
                METADATA,
                12,
                build(
                    METADATA,
                    12,
                    topics=(build(METADATA, 12, "MetadataRequestTopic", name=topic, topic_id=uuid.UUID(int=0)),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                ),
            )
    except OSError:
        return None
    brokers = {b.node_id: b.port for b in answer.brokers}
    return {p.partition_index: (p.leader_id, brokers.get(p.leader_id, -1)) for t in answer.topics for p in t.partitions}


def produce_one(port: int, topic: str, partition: int, batch: bytes) -> int:
    """Produce v9, acks=all: the partition's error code (-1 when the node cannot be reached)."""
    try:
        with RawClient(port, timeout=5.0) as client:
            answer = client.request(
                PRODUCE,
                9,
                build(
                    PRODUCE,
                    9,
                    transactional_id=None,
                    acks=-1,
                    timeout=5000,
                    topic_data=(
                        build(
                            PRODUCE,
                            9,
                            "TopicProduceData",
                            name=topic,
                            partition_data=(build(PRODUCE, 9, "PartitionProduceData", index=partition, records=batch),),
                        ),
                    ),
                ),
            )
    except OSError:
        return -1
    return int(answer.responses[0].partition_responses[0].error_code)


def failover_once(cluster: HerdCluster, topic: str, victim: int, batch: bytes) -> float:
    """Kill node `victim` (which leads partitions of `topic`); seconds until a produce to one of them succeeds."""
    port = cluster.nodes[victim].port
    leaders = metadata_leaders(port, topic)
    assert leaders is not None
    partition = next(p for p, (leader, _) in sorted(leaders.items()) if leader == victim)
    live = [n.port for i, n in enumerate(cluster.nodes) if i != victim and cluster.running(i)]
    killed = time.monotonic()
    cluster.kill(victim)
    while time.monotonic() - killed < 60:
        for ask in live:
            seen = metadata_leaders(ask, topic)
            if seen is None:
                continue
            leader, leader_port = seen.get(partition, (-1, -1))
            if leader not in (-1, victim) and produce_one(leader_port, topic, partition, batch) == 0:
                return time.monotonic() - killed
            break
        time.sleep(PROBE_INTERVAL_S)
    raise RuntimeError(f"partition {partition} of {topic} not writable 60 s after node {victim} was killed")


def wait_leading(cluster: HerdCluster, topic: str, node: int, timeout: float = 60.0) -> None:
    """Until node `node` leads a partition of `topic` (a restarted node took its share back)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leaders = metadata_leaders(cluster.nodes[node].port, topic)
        if leaders and any(leader == node for leader, _ in leaders.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"node {node} leads nothing of {topic} after {timeout} s")


def run_failovers(cluster: HerdCluster, args: argparse.Namespace) -> list[float]:
    topic = f"failover-{uuid.uuid4().hex[:6]}"
    nodes = len(cluster.nodes)
    create_topic(cluster.bootstrap, topic, nodes * 2)
    batch = make_batch(1, VALUE_SIZE)
    times = []
    for round_ in range(args.failovers):
        victim = round_ % nodes
        wait_leading(cluster, topic, victim)
        time.sleep(1.0)  # let the leases settle after the restart
        seconds = failover_once(cluster, topic, victim, batch)
        times.append(seconds)
        print(
            f"# failover {round_ + 1}: node {victim} killed, writable again after {seconds:.2f} s",
            file=sys.stderr,
            flush=True,
        )
        cluster.restart(victim)
    return times


# -- driver ----------------------------------------------------------------------------------------------------


def start_postgres() -> tuple[LocalPostgres, str]:
    """A LocalPostgres under /tmp (its unprivileged user must reach the directory when we are root)."""
    base = tempfile.mkdtemp(prefix="herd-bench-cluster-", dir="/tmp")
    os.chmod(base, 0o755)
    pg = LocalPostgres(Path(base) / "pgdata")
    pg.start()
    return pg, base


def stop_all(cluster: HerdCluster | None, pg: LocalPostgres, base: str, keep_logs: bool) -> None:
    """Stop the nodes and PostgreSQL; remove their directory unless the logs are to be kept."""
    if cluster is not None:
        cluster.close()
    pg.stop()
    if keep_logs:
        print(f"# logs kept under {base}", file=sys.stderr)
    else:
        shutil.rmtree(base, ignore_errors=True)


def run_meta(started: str, load_before: tuple[float, float, float], args: argparse.Namespace) -> dict[str, Any]:
    """What a JSON result says of the run: when, which commit, the machine and its load, the command."""
    return {
        "date": started,
        "commit": source_commit(None),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": [round(x, 2) for x in load_before],
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "args": vars(args),
    }


def start_cluster(pg: LocalPostgres, base: str, nodes: int) -> tuple[HerdCluster, str]:
    dbname = "herd_bench"
    url = pg.create_database(dbname, replace=True)
    cluster = HerdCluster(
        Path(base) / "cluster",
        nodes,
        {
            "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
        },
        database_url=url,
        faults=False,
    )
    cluster.start(balanced=False)  # the bench waits for leadership itself
    return cluster, dbname


def wait_balanced(cluster: HerdCluster, timeout: float = 60.0) -> None:
    """Until every node leads a share of a probe topic (placement has seen all of them)."""
    topic = f"probe-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap, topic, len(cluster.nodes))
    for i in range(len(cluster.nodes)):
        wait_leading(cluster, topic, i, timeout)


def cluster_side(cluster: HerdCluster) -> Side:
    return Side(
        "cluster",
        cluster.bootstrap,
        [n.proc.pid for n in cluster.nodes if n.proc],
        [n.port for n in cluster.nodes],
        list(range(len(cluster.nodes))),
    )


def summarise(rows: list[Row]) -> list[dict[str, Any]]:
    out = []
    for phase in dict.fromkeys(r.phase for r in rows):
        for side in ("embedded", "cluster"):
            runs = [r for r in rows if r.side == side and r.phase == phase]
            if not runs:
                continue

            def per(r: Row) -> float:  # MB of values, or commits
                return r.rate * r.usage.seconds

            out.append({
                "side": side, "phase": phase, "runs": [round(r.rate, 1) for r in runs],
                "median": round(statistics.median(r.rate for r in runs), 1),
                "herd_cpu_pct": round(100 * statistics.median(r.usage.herd_cpu / r.usage.seconds for r in runs)),
                "pg_cpu_pct": round(100 * statistics.median(r.usage.pg_cpu / r.usage.seconds for r in runs)),
                "client_cpu_pct": round(100 * statistics.median(r.usage.client_cpu / r.usage.seconds for r in runs)),
                "others_cpu_pct": round(100 * statistics.median(r.usage.others_cpu / r.usage.seconds for r in runs)),
                "steal_pct": round(100 * statistics.median(r.usage.steal for r in runs)),
                # per MB of values (produce, fetch) or per commit
                "herd_cpu_us_per_unit": round(statistics.median(1e6 * r.usage.herd_cpu / per(r) for r in runs), 1),
                "pg_cpu_us_per_unit": round(statistics.median(1e6 * r.usage.pg_cpu / per(r) for r in runs), 1),
                "wal_bytes_per_unit": round(statistics.median(r.usage.wal_bytes / per(r) for r in runs)),
                "wal_syncs_per_s": round(statistics.median(r.usage.wal_syncs / r.usage.seconds for r in runs)),
                "xacts_per_s": round(statistics.median(r.usage.xacts / r.usage.seconds for r in runs)),
            })  # fmt: skip
    return out


def ratios(summary: list[dict[str, Any]]) -> dict[str, float]:
    med = {(s["side"], s["phase"]): s["median"] for s in summary}
    return {
        phase: round(med[("cluster", phase)] / med[("embedded", phase)], 3)
        for phase in dict.fromkeys(s["phase"] for s in summary)
        if ("cluster", phase) in med and ("embedded", phase) in med
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="MB of 1 KB values per produce/fetch run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each phase per side")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the produce/fetch topic")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--commit-seconds", type=float, default=5.0)
    parser.add_argument(
        "--committers",
        default=str(COMMITTERS),
        help=f"committer counts for the commit phase, e.g. {COMMITTERS},1 (always {COMMIT_GROUPS} groups at most)",
    )
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--skip", action="append", default=[], choices=("data", "commits", "failover"))
    parser.add_argument(
        "--wait-quiet",
        type=float,
        metavar="CORES",
        help="before each phase, wait until other processes use less than CORES of CPU",
    )
    parser.add_argument("--wait-quiet-timeout", type=float, default=120, metavar="SECONDS")
    parser.add_argument("--sides", default="embedded,cluster", help="which to measure (profiling: one only)")
    parser.add_argument(
        "--py-spy",
        metavar="DIR",
        help="record every cluster node with py-spy during the "
        "cluster's phases (the figures are then not the benchmark's)",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the nodes' logs (their directory is printed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.py_spy:
        os.makedirs(args.py_spy, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M")
    load = os.getloadavg()
    pg, base = start_postgres()
    embedded = cluster = meter = None
    rows: list[Row] = []
    failovers: list[float] = []
    try:
        embedded = Broker(None, "WARNING", [], {})
        embedded.wait_ready()
        cluster, dbname = start_cluster(pg, base, args.nodes)
        wait_balanced(cluster)
        meter = Meter(pg, dbname)
        sides = [
            side
            for side in (
                Side("embedded", embedded.bootstrap, [embedded.proc.pid], [embedded.port], [0]),
                cluster_side(cluster),
            )
            if side.name in args.sides.split(",")
        ]
        print(
            f"# PostgreSQL {pg.pid}, embedded {embedded.bootstrap}, cluster {cluster.bootstrap}; data under {base}",
            file=sys.stderr,
            flush=True,
        )
        if "data" not in args.skip:
            for rep in range(args.repeat):
                for side in sides:
                    rows += run_data(side, meter, args, rep)
        if "commits" not in args.skip:
            create_commit_topic(embedded.port)
            create_commit_topic(cluster.nodes[0].port)
            for committers in (int(n) for n in args.committers.split(",")):
                for _ in range(args.repeat):
                    for side in sides:
                        rows.append(run_commits(side, meter, args, committers))
        if "failover" not in args.skip:
            failovers = run_failovers(cluster, args)
    finally:
        if meter is not None:
            meter.close()
        if embedded is not None:
            embedded.stop()
        stop_all(cluster, pg, base, args.keep_logs)
    summary = summarise(rows)
    result = {
        "meta": run_meta(started, load, args),
        "summary": summary,
        "ratios": ratios(summary),
        "failover_s": {
            "runs": [round(t, 2) for t in failovers],
            "median": round(statistics.median(failovers), 2) if failovers else None,
            "max": round(max(failovers), 2) if failovers else None,
        },
        "runs": [{**asdict(r.usage), "side": r.side, "phase": r.phase, "rate": r.rate, **r.extra} for r in rows],
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print_table(result)


def print_table(result: dict[str, Any]) -> None:
    print(
        f"{'side':9s} {'phase':8s} {'median':>10s} {'runs':30s} {'herd':>5s} {'pg':>5s} {'client':>6s} "
        f"{'others':>6s} {'steal':>5s} {'herd us/u':>9s} {'pg us/u':>8s} {'WAL B/u':>8s} {'syncs/s':>7s} "
        f"{'xacts/s':>7s}"
    )
    for s in result["summary"]:
        print(
            f"{s['side']:9s} {s['phase']:8s} {s['median']:>10,.1f} {str(s['runs']):30s} {s['herd_cpu_pct']:>4d}% "
            f"{s['pg_cpu_pct']:>4d}% {s['client_cpu_pct']:>5d}% {s['others_cpu_pct']:>5d}% {s['steal_pct']:>4d}% "
            f"{s['herd_cpu_us_per_unit']:>9,.0f} {s['pg_cpu_us_per_unit']:>8,.0f} {s['wal_bytes_per_unit']:>8,d} "
            f"{s['wal_syncs_per_s']:>7,d} {s['xacts_per_s']:>7,d}"
        )
    print(
        "(produce/fetch: MB/s of 1 KB values, per unit = per MB; commits(-N: N committers): commits/s, per unit "
        "= per commit; CPU as a share of one core)"
    )
    print("ratios cluster/embedded:", result["ratios"])
    print("failover (s):", result["failover_s"])
    m = result["meta"]
    print(f"commit {m['commit']}, {m['date']}, {m['cpus']} CPUs, load before {m['load_before']}: {m['command']}")


if __name__ == "__main__":
    main()
