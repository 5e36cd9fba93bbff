"""End-to-end produce and fetch throughput of a herd broker, with confluent-kafka (librdkafka) as the client.

    .venv/bin/python bench/bench_produce_fetch.py [--messages N] [--value-size 100 1024] [--repeat 3] [--json]

For each value size the script starts a fresh broker (`herd serve`, a subprocess on a free port with a
temporary log.dirs), and then, `--repeat` times:

- creates a topic with one partition;
- produces `--messages` values of that size with one Producer (acks=1, linger.ms=5, batch.size=1000000,
  compression none) and times it from the first `produce()` until `flush()` returns, i.e. until every message
  is acknowledged;
- reads them all back with one Consumer (`assign` from offset 0, no group, no commits; fetch.max.bytes 50 MiB,
  max.partition.fetch.bytes 1 MiB unless `--partition-fetch-bytes` says otherwise; prefetching tuned so that
  librdkafka never idles, see `fetch`) and times it from `assign()` until the last message is in Python.

It prints the median of the repeats (messages/s and MB/s of value bytes, MB = 10**6 bytes), with the CPU the
broker and the client used (share of one core) and the broker's CPU seconds per GB of values, which says more
than MB/s when the client is the bottleneck. The broker and the client are separate processes; on a small
machine they share its cores, which is part of what is measured: the `others` and `steal` columns show how
much of the machine other processes and the hypervisor took during the runs. The broker subprocess and the
data directory are removed however the run ends.

Profiling: `--py-spy DIR` records the broker with py-spy during each produce and fetch phase
(DIR/<phase>-<size>-<repeat>.<ext>; `--py-spy-format` raw/speedscope/flamegraph). Figures taken with it are
slowed down by the sampler and are not the benchmark's figures. `--src DIR` runs the broker from another
source tree (prepended to PYTHONPATH), for measuring a prototype against the installed one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BATCH_SIZE = 1_000_000  # librdkafka's batch.size must not exceed its message.max.bytes (default 1000000)
PARTITION_FETCH_BYTES = 1_048_576  # the consumer's max.partition.fetch.bytes (Kafka's default); see the docs


@dataclass
class Result:
    phase: str  # "produce" or "fetch"
    value_size: int
    messages: int
    seconds: float
    broker_cpu: float = 0.0  # CPU seconds the broker process used during the phase (user + system)
    client_cpu: float = 0.0  # CPU seconds this process (Python + librdkafka threads) used during the phase
    steal: float = 0.0  # share of the machine's CPU time stolen by the hypervisor during the phase
    others: float = 0.0  # user + system CPU seconds of every other process on the machine during the phase

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.messages * self.value_size / self.seconds / 1e6


def process_cpu(pid: int) -> float:
    """user + system CPU seconds of a process, from /proc (0.0 where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[float, float, float]:
    """(user + system, steal, total) CPU seconds of the whole machine so far, from /proc/stat. Interrupt time
    (loopback networking runs much of its work there) is in the total only."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0, 0.0
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system) / tick, steal / tick, sum(fields) / tick


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def wait_quiet(broker_pid: int, max_cores: float, timeout: float) -> float:
    """On a shared machine: wait (up to `timeout` s) until other processes use less than `max_cores` of CPU
    over one second; returns what they used in the last second."""
    deadline = time.monotonic() + timeout
    while True:
        m0, b0, c0 = machine_cpu(), process_cpu(broker_pid), self_cpu()
        time.sleep(1.0)
        m1, b1, c1 = machine_cpu(), process_cpu(broker_pid), self_cpu()
        others = (m1[0] - m0[0]) - (b1 - b0) - (c1 - c0)
        if others < max_cores or time.monotonic() > deadline:
            return others
        time.sleep(2.0)


# -- the broker ------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """`herd serve` in a subprocess on a free port, with its own temporary data directory."""

    def __init__(self, src: str | None, log_level: str, extra: list[str], extra_env: dict[str, str]) -> None:
        self.port = free_port()
        self.data_dir = tempfile.mkdtemp(prefix="herd-bench-")
        self.log_path = os.path.join(self.data_dir, "broker.log")
        herd = Path(sys.executable).with_name("herd")
        cmd = [str(herd)] if herd.exists() else [sys.executable, "-c", "from herd.cli import main; main()"]
        cmd += ["serve", "--log-level", log_level,
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "--override", f"log.dirs={os.path.join(self.data_dir, 'logs')}",
                "--override", "num.partitions=1", "--override", "auto.create.topics.enable=true"]  # fmt: skip
        for item in extra:
            cmd += ["--override", item]
        env = {**os.environ, **extra_env}
        if src:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath(src), env.get("PYTHONPATH")]))
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)  # fmt: skip
        self.bootstrap = f"127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"broker did not listen within {timeout} s:\n{self.tail()}")

    def tail(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


class Profiler:
    """py-spy recording the broker for the duration of a `with` block (or nothing when dir is None)."""

    def __init__(self, directory: str | None, fmt: str, pid: int, name: str, rate: int, native: bool) -> None:
        self.directory, self.fmt, self.pid, self.name, self.rate = directory, fmt, pid, name, rate
        self.native = native
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Profiler:
        if self.directory is None:
            return self
        ext = {"raw": "txt", "speedscope": "json", "flamegraph": "svg"}[self.fmt]
        out = os.path.join(self.directory, f"{self.name}.{ext}")
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.proc = subprocess.Popen([py_spy, "record", "--pid", str(self.pid), "--rate", str(self.rate),
                                      "--format", self.fmt, "--output", out,
                                      *(["--native"] if self.native else ["--nonblocking"])],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        time.sleep(0.5)  # let it attach
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=60)
            if self.proc.returncode not in (0, -signal.SIGINT):
                print(f"py-spy exited {self.proc.returncode}: {err.decode(errors='replace')[-500:]}", file=sys.stderr)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- the client ------------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """CreateTopics with `partitions` partitions; if the broker refuses it, auto-creation on Metadata (the
    broker runs with num.partitions=1 and auto.create.topics.enable=true). Returns once every partition has a
    leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1)
    futures = admin.create_topics([new], operation_timeout=10)
    try:
        futures[topic].result(timeout=30)
    except KafkaException as e:
        print(f"# CreateTopics failed ({e}); relying on auto-creation", file=sys.stderr)
        Producer({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
        admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until Metadata shows a leader
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if (
            t is not None
            and t.error is None
            and len(t.partitions) == max(partitions, 1)
            and all(p.leader >= 0 for p in t.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} did not appear")


def produce(
    bootstrap: str, topic: str, messages: int, value_size: int, extra: dict[str, str], partitions: int = 1
) -> Result:
    """Message i goes to partition i mod `partitions`."""
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": 5,
        "batch.size": BATCH_SIZE,
        "compression.type": "none",
        "enable.idempotence": False,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True,  # callbacks only for failures: keeps Python out of the way
        "on_delivery": on_delivery,
        **extra,
    })  # fmt: skip
    producer.list_topics(topic, timeout=10)  # connect and learn the leader before the clock starts
    value = os.urandom(value_size)
    produce_ = producer.produce
    start = time.perf_counter()
    for i in range(messages):
        partition = i % partitions
        try:
            produce_(topic, value, partition=partition)
        except BufferError:
            producer.poll(0.001)
            produce_(topic, value, partition=partition)
        if i & 0x3FFF == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors {errors[:3]}")
    return Result("produce", value_size, messages, elapsed)


def fetch(
    bootstrap: str, topic: str, messages: int, value_size: int, extra: dict[str, str], partitions: int = 1
) -> Result:
    """Reads `messages` from the topic's first `partitions` partitions (from offset 0)."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "herd-bench-unused",  # required by the client; assign() never joins or commits
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": PARTITION_FETCH_BYTES,
        "receive.message.max.bytes": 104_857_600,
        "fetch.wait.max.ms": 100,
        # librdkafka stops fetching once queued.min.messages wait in its queue and then backs off for
        # fetch.queue.backoff.ms (1 s by default): with the defaults a fast consumer idles most of the time.
        "queued.min.messages": 1_000_000,
        "queued.max.messages.kbytes": 262_144,
        "fetch.queue.backoff.ms": 5,
        "enable.partition.eof": False,
        **extra,
    })  # fmt: skip
    consumer.list_topics(topic, timeout=10)
    count = 0
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    expected = [0] * partitions  # the next offset of each partition
    try:
        while count < messages:
            # consume() returns when it has num_messages or the timeout passes: never ask for more than remain
            batch = consumer.consume(num_messages=min(10_000, messages - count), timeout=1.0)
            for msg in batch:
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                if partitions > 1:  # offsets dense from 0 in each partition
                    p = msg.partition()
                    if msg.offset() != expected[p]:
                        raise RuntimeError(f"partition {p}: offset {msg.offset()}, expected {expected[p]}")
                    expected[p] += 1
            if batch:  # spot check: offsets are dense from 0 and values arrive whole
                last = batch[-1]
                dense = partitions > 1 or last.offset() == count + len(batch) - 1
                if not dense or len(last.value()) != value_size:
                    raise RuntimeError(f"unexpected message at offset {last.offset()} (expected "
                                       f"{count + len(batch) - 1}, {len(last.value())} bytes)")  # fmt: skip
            count += len(batch)
            if time.perf_counter() - start > 300:
                raise RuntimeError(f"fetch stalled at {count}/{messages}")
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    if count != messages:
        raise RuntimeError(f"fetched {count} messages, expected {messages}")
    return Result("fetch", value_size, messages, elapsed)


def source_commit(src: str | None) -> str | None:
    """The git commit of the broker's source tree ("+dirty" if it has uncommitted changes), if it has one."""
    if src:
        where = src
    else:
        import herd

        where = os.path.dirname(herd.__file__)
    try:
        commit = subprocess.run(["git", "-C", where, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", where, "status", "--porcelain", "--", "."], capture_output=True,
                               text=True, check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+dirty" if dirty else "")


# -- driver ----------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> list[Result]:
    results: list[Result] = []
    for size in args.value_size:
        count = args.messages or max(10_000, args.mb * 1_000_000 // size)
        broker = Broker(args.src, args.broker_log_level, args.override, args.broker_env)
        try:
            broker.wait_ready()
            print(f"# {size}-byte values: broker pid {broker.proc.pid} on {broker.bootstrap}, "
                  f"{count} messages x {args.repeat}", file=sys.stderr)  # fmt: skip
            for rep in range(args.repeat):
                topic = f"bench-{size}-{rep}"
                create_topic(broker.bootstrap, topic)
                name = f"{size}-{rep}"
                pid = broker.proc.pid
                phase_results = []
                for phase, fn, extra in (("produce", produce, args.producer_config),
                                         ("fetch", fetch, args.consumer_config)):  # fmt: skip
                    with Profiler(
                        args.py_spy, args.py_spy_format, pid, f"{phase}-{name}", args.py_spy_rate, args.py_spy_native
                    ):
                        if args.wait_quiet is not None:
                            wait_quiet(pid, args.wait_quiet, args.wait_quiet_timeout)
                        b0, c0, m0 = process_cpu(pid), self_cpu(), machine_cpu()
                        r = fn(broker.bootstrap, topic, count, size, extra)
                        r.broker_cpu, r.client_cpu = process_cpu(pid) - b0, self_cpu() - c0
                        m1 = machine_cpu()
                        r.steal = (m1[1] - m0[1]) / max(m1[2] - m0[2], 1e-9)
                        r.others = max(0.0, (m1[0] - m0[0]) - r.broker_cpu - r.client_cpu)
                    phase_results.append(r)
                    print(f"#   run {rep + 1}: {r.phase:7s} {r.msgs_per_s:12,.0f} msg/s"
                          f" {r.mb_per_s:8.1f} MB/s"
                          f"  broker CPU {r.broker_cpu / r.seconds:4.0%}"
                          f"  client CPU {r.client_cpu / r.seconds:4.0%}  "
                          f"others {r.others / r.seconds:4.0%}  steal {r.steal:4.0%}",
                          file=sys.stderr)  # fmt: skip
                results += phase_results
        except Exception:
            print(broker.tail(), file=sys.stderr)
            raise
        finally:
            broker.stop()
    return results


def summarise(results: list[Result]) -> list[dict[str, object]]:
    rows = []
    keys = sorted({(r.value_size, r.phase) for r in results}, key=lambda k: (k[0], k[1] != "produce"))
    for size, phase in keys:
        runs = [r for r in results if r.value_size == size and r.phase == phase]
        rows.append({
            "phase": phase,
            "value_size": size,
            "messages": runs[0].messages,
            "runs": len(runs),
            "median_msgs_per_s": statistics.median(r.msgs_per_s for r in runs),
            "median_mb_per_s": statistics.median(r.mb_per_s for r in runs),
            "min_mb_per_s": min(r.mb_per_s for r in runs),
            "max_mb_per_s": max(r.mb_per_s for r in runs),
            "broker_cpu_pct": round(100 * statistics.median(r.broker_cpu / r.seconds for r in runs)),
            "client_cpu_pct": round(100 * statistics.median(r.client_cpu / r.seconds for r in runs)),
            "others_cpu_pct": round(100 * statistics.median(r.others / r.seconds for r in runs)),
            "steal_pct": round(100 * statistics.median(r.steal for r in runs)),
            # what the broker spends per gigabyte of values, whoever the bottleneck is
            "broker_cpu_s_per_gb": round(statistics.median(r.broker_cpu / (r.messages * r.value_size / 1e9)
                                                           for r in runs), 2),
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--messages", type=int, default=0, help="messages per run (default: enough for --mb of values, at least 10,000)"
    )
    parser.add_argument("--mb", type=int, default=500, help="value megabytes per run when --messages is not given")
    parser.add_argument("--value-size", type=int, nargs="+", default=[100, 1024], help="value sizes in bytes")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the median is reported")
    parser.add_argument(
        "--partition-fetch-bytes",
        type=int,
        default=PARTITION_FETCH_BYTES,
        help="the consumer's max.partition.fetch.bytes (its fetch.max.bytes is 50 MiB)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    parser.add_argument("--src", metavar="DIR", help="run the broker from this source tree (PYTHONPATH)")
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="extra broker property (repeatable)"
    )
    parser.add_argument(
        "--producer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra librdkafka producer property (repeatable)",
    )
    parser.add_argument(
        "--consumer-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra librdkafka consumer property (repeatable)",
    )
    parser.add_argument(
        "--broker-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment variable for the broker process (repeatable)",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        metavar="CORES",
        help="before each phase, wait until other processes use less than CORES of CPU",
    )
    parser.add_argument(
        "--wait-quiet-timeout",
        type=float,
        default=900,
        metavar="SECONDS",
        help="longest wait for --wait-quiet before measuring anyway",
    )
    parser.add_argument("--broker-log-level", default="WARNING")
    parser.add_argument("--py-spy", metavar="DIR", help="record the broker with py-spy per phase into DIR")
    parser.add_argument("--py-spy-format", default="raw", choices=["raw", "speedscope", "flamegraph"])
    parser.add_argument("--py-spy-rate", type=int, default=250)
    parser.add_argument(
        "--py-spy-native",
        action="store_true",
        help="include C frames (py-spy --native; stops the broker for each sample)",
    )
    args = parser.parse_args()  # fmt: skip
    args.broker_env = dict(item.split("=", 1) for item in args.broker_env)
    args.producer_config = dict(item.split("=", 1) for item in args.producer_config)
    args.consumer_config = {"max.partition.fetch.bytes": args.partition_fetch_bytes,
                            **dict(item.split("=", 1) for item in args.consumer_config)}  # fmt: skip
    if args.py_spy:
        os.makedirs(args.py_spy, exist_ok=True)
    results = run(args)
    rows = summarise(results)
    busy = [r for r in results if r.others / r.seconds > 0.25]
    if busy:
        print(f"# warning: other processes used more than a quarter of a core during {len(busy)} of "
              f"{len(results)} phases; these figures are not from a quiet machine",
              file=sys.stderr)  # fmt: skip
    if args.json:
        meta = {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine(),
                "date": time.strftime("%Y-%m-%d"), "commit": source_commit(args.src),
                "producer_config": args.producer_config, "consumer_config": args.consumer_config,
                "broker_overrides": args.override, "broker_env": args.broker_env}  # fmt: skip
        print(json.dumps({"meta": meta, "summary": rows, "runs": [asdict(r) for r in results]}, indent=2))
        return
    print(
        f"{'phase':8s} {'value':>6s} {'messages':>10s} {'msg/s':>12s} {'MB/s':>8s} {'min-max MB/s':>14s} "
        f"{'broker CPU':>10s} {'client CPU':>10s} {'broker s/GB':>11s} {'others':>6s} {'steal':>5s}"
    )
    for row in rows:
        print(
            f"{row['phase']:8s} {row['value_size']:>6d} {row['messages']:>10,d} "
            f"{row['median_msgs_per_s']:>12,.0f} {row['median_mb_per_s']:>8.1f} "
            f"{row['min_mb_per_s']:>6.1f}-{row['max_mb_per_s']:<7.1f} "
            f"{row['broker_cpu_pct']:>9d}% {row['client_cpu_pct']:>9d}% "
            f"{row['broker_cpu_s_per_gb']:>11.2f} {row['others_cpu_pct']:>5d}% {row['steal_pct']:>4d}%"
        )
    print(
        f"(median of {rows[0]['runs']} runs; MB = 10**6 value bytes; CPU = share of one core during the "
        "phase; broker s/GB = broker CPU seconds per 10**9 value bytes; others = CPU of other processes; "
        "steal = hypervisor steal, share of all cores)"
    )


if __name__ == "__main__":
    main()
