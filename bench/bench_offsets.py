"""Offset benchmark: durable commits against a real `herd serve`, and loading 1,000,000 committed offsets.

    .venv/bin/python bench/bench_offsets.py [--committers 1,64] [--commit-groups 8] [--seconds 10] [--runs 1]
                                            [--groups 10000] [--partitions 100] [--history 3]
                                            [--skip-commits] [--skip-load]

1. commits: N committers, each on its own connection with one OffsetCommit v9 in flight (a simple commit,
   generation -1, of one partition of a 64-partition topic: committer i commits partition i). Committers are
   spread over --commit-groups groups as the consumers of a deployment are (committer i commits for group
   bench-(i mod G); the default 8 groups of 8 committers land on 8 `__consumer_offsets` partitions; 0 gives
   every committer a group of its own, 64 groups on 46 partitions). An answer means the commit is durable
   (fsynced, group-committed with whatever else was pending). Throughput, latency percentiles and the CPU
   time of the broker and of this client per commit, for each N in --committers, after a one-second warm-up
   with the same committers, --runs times. Requests are encoded once with kio and only the offset is
   patched; a response is checked against the bytes of a successful answer (decoded with kio when it
   differs).
2. load: --groups groups of --partitions committed offsets (1,000,000 by default), written as consumers
   commit them (one batch per group commit, all of a group's partitions), --history times each, into a
   fresh data directory with 256 KiB `__consumer_offsets` segments (the active segment is never compacted). A fresh
   process then starts the
   coordinator runtime on it and reports the time until every partition is loaded and its resident memory
   (VmRSS growth and peak); then every partition is compacted and the load is measured again.

The broker and this client share the machine: on a small one the client's own CPU is part of the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from _broker import BenchBroker
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from herd.protocol.messages import request_class, response_class
from herd.server.apis._build import make

COMMIT, CREATE_TOPICS = 8, 19
COMMIT_VERSION = 9
SENTINEL = 0x0123456789ABCDEF
TOPIC = "bench"
TOPIC_PARTITIONS = 64
ROOT = Path(__file__).resolve().parent.parent


# -- the broker ------------------------------------------------------------------------------------------------

Broker = BenchBroker


# -- wire ------------------------------------------------------------------------------------------------------


def frame(api_key: int, version: int, request: Any, correlation_id: int = 1) -> bytes:
    cls = request_class(api_key, version)
    header_cls = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_cls)(
        buf,
        header_cls(
            request_api_key=i16(api_key),
            request_api_version=i16(version),
            correlation_id=i32(correlation_id),
            client_id="bench",
        ),
    )
    entity_writer(cls)(buf, request)
    return struct.pack(">i", len(buf.getvalue())) + buf.getvalue()


def build(api_key: int, version: int, class_name: str | None = None, /, **fields: Any) -> Any:
    cls = request_class(api_key, version)
    if class_name is not None:
        cls = getattr(sys.modules[cls.__module__], class_name)
    return make(cls, fields)


def commit_template(group: str, partition: int) -> tuple[bytes, int]:
    """An OffsetCommit frame and the position of its 8-byte offset."""
    v = COMMIT_VERSION
    topic = build(
        COMMIT,
        v,
        "OffsetCommitRequestTopic",
        name=TOPIC,
        partitions=(
            build(
                COMMIT,
                v,
                "OffsetCommitRequestPartition",
                partition_index=partition,
                committed_offset=SENTINEL,
                committed_leader_epoch=-1,
                committed_metadata="",
            ),
        ),
    )
    data = frame(
        COMMIT,
        v,
        build(
            COMMIT,
            v,
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(topic,),
        ),
    )
    return data, data.index(SENTINEL.to_bytes(8, "big"))


def ok_response(partition: int) -> bytes:
    """The body of a successful answer to `commit_template` (correlation id 1)."""
    cls = response_class(COMMIT, COMMIT_VERSION)
    module = sys.modules[cls.__module__]
    response = make(
        cls,
        {
            "throttle_time": 0,
            "topics": (
                make(
                    module.OffsetCommitResponseTopic,
                    {
                        "name": TOPIC,
                        "partitions": (
                            make(module.OffsetCommitResponsePartition, {"partition_index": partition, "error_code": 0}),
                        ),
                    },
                ),
            ),
        },
    )
    buf = io.BytesIO()
    header_cls = cls.__header_schema__
    entity_writer(header_cls)(buf, header_cls(correlation_id=i32(1)))
    entity_writer(cls)(buf, response)
    return buf.getvalue()


def create_topic(port: int) -> None:
    async def run() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        topic = build(
            CREATE_TOPICS,
            7,
            "CreatableTopic",
            name=TOPIC,
            num_partitions=TOPIC_PARTITIONS,
            replication_factor=1,
            assignments=(),
            configs=(),
        )
        writer.write(
            frame(CREATE_TOPICS, 7, build(CREATE_TOPICS, 7, timeout=10_000, validate_only=False, topics=(topic,)))
        )
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        await reader.readexactly(size)
        writer.close()

    asyncio.run(run())


# -- 1. commits ------------------------------------------------------------------------------------------------


def group_of(index: int, groups: int) -> str:
    """The group committer `index` commits for."""
    return f"bench-{index % groups if groups else index}"


async def committer(
    port: int,
    index: int,
    groups: int,
    stop_at: float,
    latencies: list[float],
    errors: list[int],
    coordinators: Mapping[str, int] | None = None,
) -> None:
    partition = index % TOPIC_PARTITIONS
    group = group_of(index, groups)
    template, at = commit_template(group, partition)
    expected = ok_response(partition)
    if coordinators is not None:  # several nodes: each group's commits go to its coordinator
        port = coordinators[group]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = bytearray(template)
    offset = 0
    while time.monotonic() < stop_at:
        offset += 1
        struct.pack_into(">q", request, at, offset)
        started = time.perf_counter()
        writer.write(request)
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        body = await reader.readexactly(size)
        latencies.append(time.perf_counter() - started)
        if body != expected:
            cls = response_class(COMMIT, COMMIT_VERSION)
            header, pos = entity_reader(cls.__header_schema__)(body, 0)
            response, _ = entity_reader(cls)(body, pos)
            errors.append(int(response.topics[0].partitions[0].error_code))
    writer.close()


def bench_commits(
    port: int,
    n: int,
    seconds: float,
    groups: int = 0,
    broker_pid: int | None = None,
    warmup: float = 0.0,
    coordinators: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """`coordinators`: the port of each group's coordinator, when it is not `port` (a cluster)."""
    latencies: list[float] = []
    errors: list[int] = []
    marks: dict[str, float] = {}

    async def run() -> float:
        started = time.monotonic()
        end = started + warmup + seconds

        async def measure() -> None:  # the counters and the clock start after the warm-up
            await asyncio.sleep(warmup)
            latencies.clear()
            marks["started"], marks["client"] = time.monotonic(), time.process_time()
            marks["broker"] = _cpu_seconds(broker_pid) if broker_pid else 0.0

        await asyncio.gather(
            measure(), *(committer(port, i, groups, end, latencies, errors, coordinators) for i in range(n))
        )
        marks["client"] = time.process_time() - marks["client"]
        marks["broker"] = (_cpu_seconds(broker_pid) if broker_pid else 0.0) - marks["broker"]
        return time.monotonic() - marks["started"]

    elapsed = _run(run())
    latencies.sort()
    q = statistics.quantiles(latencies, n=100)
    count = len(latencies)
    result = {
        "committers": n,
        "groups": groups or n,
        "commits": count,
        "per_second": round(count / elapsed),
        "p50_ms": round(q[49] * 1000, 2),
        "p99_ms": round(q[98] * 1000, 2),
        "max_ms": round(latencies[-1] * 1000, 2),
        "errors": len(errors),
        "client_us": round(1e6 * marks["client"] / count, 1),
    }
    if broker_pid:
        result["broker_us"] = round(1e6 * marks["broker"] / count, 1)
    return result


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process (all its threads) has used so far (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run(coroutine: Any) -> Any:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


# -- 2. load ---------------------------------------------------------------------------------------------------


def write_history(data_dir: str, groups: int, partitions: int, history: int) -> int:
    """Commits as consumers make them, written straight to the partitions' logs; returns records written."""
    from herd.cluster.topics import Cluster
    from herd.config import BrokerConfig
    from herd.coordinator.partition import coordinator_partition
    from herd.coordinator.records import OffsetValue, Record, offset_commit_record
    from herd.log.store import SegmentStore
    from herd.runtime import CoordinatorRuntime
    from herd.runtime.batches import encode_batch

    config = BrokerConfig.from_properties(_load_props(data_dir))
    cluster = Cluster(SegmentStore(data_dir), config.log_config(), 0)
    cluster.load()
    runtime = CoordinatorRuntime(cluster, config)
    topic = runtime._host.ensure_topic()
    logs = topic.partitions
    now = int(time.time() * 1000)
    written = 0
    for round_ in range(history):
        for g in range(groups):
            group = f"group-{g:05d}"
            records = [
                offset_commit_record(
                    group, f"topic-{p // 10}", p % 10, OffsetValue(1000 * round_ + p, -1, "", now + round_)
                )
                for p in range(partitions)
            ]
            log = logs[coordinator_partition(group, len(logs))]
            log.append(encode_batch(records, now + round_), now)
            written += len(records)
    for log in logs:
        log.flush()
    cluster.close()
    del Record
    return written


def _load_props(data_dir: str) -> dict[str, str]:
    return {"log.dirs": data_dir, "offsets.topic.segment.bytes": str(256 << 10)}


def measure_load(data_dir: str) -> dict[str, Any]:
    """In this (fresh) process: start the coordinator runtime on `data_dir`; time and memory of the load."""
    from herd.cluster.topics import Cluster
    from herd.config import BrokerConfig
    from herd.log.store import SegmentStore
    from herd.runtime import CoordinatorRuntime

    config = BrokerConfig.from_properties(_load_props(data_dir))
    cluster = Cluster(SegmentStore(data_dir), config.log_config(), 0)
    cluster.load()
    rss_before = _memory()["VmRSS"]

    async def run() -> dict[str, Any]:
        runtime = CoordinatorRuntime(cluster, config)
        started, cpu_started = time.perf_counter(), time.process_time()
        runtime.start()
        await runtime.wait_loaded()
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        shards = runtime.shards.values()
        offsets = sum(len(o) for s in shards for o in s.shard._ctx.offsets.values())
        groups = sum(len(s.shard._ctx.groups) for s in shards)
        size = sum(s.log.size_in_bytes for s in shards)
        memory = _memory()
        await runtime.close()
        return {
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu_seconds, 2),
            "groups": groups,
            "offsets": offsets,
            "log_mib": round(size / 2**20, 1),
            "rss_growth_mib": round((memory["VmRSS"] - rss_before) / 1024),
            "peak_rss_mib": round(memory["VmHWM"] / 1024),
        }

    result = asyncio.run(run())
    cluster.close()
    return result


def compact_all(data_dir: str) -> None:
    from herd.cluster.topics import Cluster
    from herd.config import BrokerConfig
    from herd.log.store import SegmentStore
    from herd.runtime import CoordinatorRuntime

    config = BrokerConfig.from_properties(_load_props(data_dir))
    cluster = Cluster(SegmentStore(data_dir), config.log_config(), 0)
    cluster.load()

    async def run() -> None:
        runtime = CoordinatorRuntime(cluster, config)
        runtime.start()
        await runtime.wait_loaded()
        for shard in runtime.shards.values():
            await shard.compactor.run_now()
        await runtime.close()

    asyncio.run(run())
    cluster.close()


def _memory() -> dict[str, int]:
    with open("/proc/self/status") as f:
        status = f.read()
    return {k: int(re.search(rf"{k}:\s+(\d+)", status).group(1)) for k in ("VmRSS", "VmHWM")}


def _in_fresh_process(phase: str, data_dir: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--phase", phase, "--dir", data_dir], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_load(groups: int, partitions: int, history: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="herd-bench-offsets-") as data_dir:
        started = time.perf_counter()
        written = write_history(data_dir, groups, partitions, history)
        print(f"wrote {written:,} commit records in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        before = _in_fresh_process("measure-load", data_dir)
        started = time.perf_counter()
        _in_fresh_process("compact", data_dir)
        compaction_s = time.perf_counter() - started
        after = _in_fresh_process("measure-load", data_dir)
        return {
            "records_written": written,
            "before_compaction": before,
            "compaction_s": round(compaction_s, 1),
            "after_compaction": after,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--committers", default="1,64")
    parser.add_argument(
        "--commit-groups", type=int, default=8, help="groups the committers are spread over (0: one each)"
    )
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--history", type=int, default=3)
    parser.add_argument("--skip-commits", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--phase", choices=("measure-load", "compact"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "measure-load":
        print(json.dumps(measure_load(args.dir)))
        return
    if args.phase == "compact":
        compact_all(args.dir)
        print(json.dumps({}))
        return
    if not args.skip_commits:
        with tempfile.TemporaryDirectory(prefix="herd-bench-commits-") as data_dir:
            broker = Broker(data_dir)
            try:
                create_topic(broker.port)
                for n in (int(x) for x in args.committers.split(",")):
                    for _ in range(args.runs):
                        print(
                            json.dumps(
                                {
                                    "commits": bench_commits(
                                        broker.port, n, args.seconds, args.commit_groups, broker.proc.pid, warmup=1.0
                                    )
                                }
                            ),
                            flush=True,
                        )
            finally:
                broker.stop()
    if not args.skip_load:
        print(json.dumps({"load": bench_load(args.groups, args.partitions, args.history)}), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
