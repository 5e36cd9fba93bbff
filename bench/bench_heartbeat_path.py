"""The broker's own CPU per heartbeat, without sockets: a precise figure where the end-to-end benchmark is noisy.

    PYTHONPATH=<a checkout's src> .venv/bin/python bench/bench_heartbeat_path.py [--repeats 9] [--batches 2000]
                                                                                 [--serve] [--protocol consumer]
                                                                                 [--baseline-connection FILE]

A `herd serve` Server runs in this process; a group of 10 members is formed over real sockets (bench_groups'
members), then a `Connection` of that server with a transport that discards what it is given is fed batches
of 100 pipelined Heartbeat v4 frames of those members (as one socket read would bring them): decoding, the
handler's fast path, encoding and queueing the answers, and whatever the connection records per request. The
CPU time of --batches batches is measured --repeats times; the minimum per heartbeat is printed (the least
disturbed run: the machine only ever adds time), with the median. Both are in nanoseconds.

With --protocol consumer the group is a KIP-848 consumer group of 10 members (bench_consumer_groups' members,
joined over real sockets and reconciled), and the frames are their keep-alive ConsumerGroupHeartbeat v1 requests
(the member's epoch, nothing else set, as a consumer heartbeats between changes).

With --protocol both, both groups are formed on one server and the two kinds of frames are fed to two connections
in turn, --repeats times each (the order alternating): the medians of both and of the paired ratios (consumer
over classic: below 1, the consumer heartbeat is the cheaper), which the machine's noise moves far less than it
moves two figures taken one after the other (issue 31 point 12).

With --serve it sets up once, then measures --batches batches each time it reads a line on stdin and prints the
nanoseconds per heartbeat, until stdin closes: bench_metrics_overhead.py runs one such process per tree and
alternates between them every fraction of a second, so that both see the same machine (on a shared 2-core VM,
CPU time per heartbeat of the same code moved between 5.1 and 8.3 us from one run to the next).

With --baseline-connection (the connection.py of another checkout, e.g. before a change to it) a second
connection of that class is fed the same frames in the same process, alternating with this checkout's every
--batches batches, --repeats times: the paired ratios isolate what the change to connection.py costs, with
everything else (the handlers, the coordinator) shared.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from typing import Any

import bench_consumer_groups
from bench_consumer_groups import CGH
from bench_groups import HEARTBEAT, VERSIONS, build, encode, form_group, stop_members
from kio.serial import entity_reader

from herd.config import BrokerConfig
from herd.protocol.messages import response_class
from herd.server.connection import Connection
from herd.server.server import Server

FRAMES_PER_BATCH = 100


class Sink:
    """A transport that keeps the last answer written and discards the rest."""

    def __init__(self) -> None:
        self.last = b""

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None

    def write(self, data: bytes) -> None:
        self.last = data

    def writelines(self, parts: list[bytes]) -> None:
        self.last = b"".join(parts)

    def pause_reading(self) -> None:
        raise AssertionError("paused")

    resume_reading = pause_reading

    def get_write_buffer_size(self) -> int:
        return 0

    def abort(self) -> None:
        pass

    close = abort


def _error_code(answer: bytes, api_key: int = HEARTBEAT) -> int:
    """The error code of the first answer in `answer` (size, header, body), of Heartbeat or `api_key`."""
    cls = response_class(api_key, VERSIONS[api_key])
    size = int.from_bytes(answer[:4], "big")
    frame = answer[4 : 4 + size]
    _, offset = entity_reader(cls.__header_schema__)(frame, 0)
    return int(entity_reader(cls)(frame, offset)[0].error_code)


async def stable_group(server: Server) -> tuple[list[Any], list[Any], bytes]:
    """A stable group of 10 members on `server` (their own heartbeats slowed to every 20 s), and one batch of
    FRAMES_PER_BATCH pipelined heartbeats of theirs: (members, their tasks for stop_members, the frames)."""
    members, tasks, _ = await form_group(server.port, "hb", 10, heartbeat_ms=100)
    for m in members:
        m.heartbeat_ms = 20_000
    await asyncio.sleep(0.2)
    frames = b"".join(
        encode(
            HEARTBEAT,
            build(
                HEARTBEAT, group_id=m.group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None
            ),
            i,
        )
        for i, m in enumerate(members * (FRAMES_PER_BATCH // len(members)))
    )
    return members, tasks, frames


async def stable_consumer_group(server: Server) -> tuple[list[Any], list[Any], bytes]:
    """A KIP-848 group of 10 members on `server`, every member at the group's epoch (subscribed to a topic of 10
    partitions, one each), and one batch of FRAMES_PER_BATCH pipelined keep-alive heartbeats of theirs:
    (members, their wires, the frames). The members send nothing else: their session is the broker's default."""
    port = server.port
    await bench_consumer_groups.create_topic(port, 10)
    members = await bench_consumer_groups.form(port, "hb-consumer", 10, 1, 10)
    frames = b"".join(
        bench_consumer_groups.keep_alive_frame(m, i) for i, m in enumerate(members * (FRAMES_PER_BATCH // len(members)))
    )
    return members, [members[0].wire], frames


def warmed_connection(
    server: Server,
    sink: Sink,
    frames: bytes,
    batches: int,
    cls: type[Connection] = Connection,
    api_key: int = HEARTBEAT,
) -> Connection:
    """A connection of `server` writing to `sink`, fed `batches` batches of `frames` and checked to answer them."""
    conn = cls(server)
    conn.connection_made(sink)  # type: ignore[arg-type]
    for _ in range(batches):
        conn.data_received(frames)
    assert _error_code(sink.last, api_key) == 0, "the heartbeats were not answered NONE"
    return conn


def ns_per_heartbeat(conn: Connection, frames: bytes, batches: int) -> float:
    """CPU nanoseconds per heartbeat over `batches` batches of `frames` handled by `conn`."""
    started = time.process_time_ns()
    for _ in range(batches):
        conn.data_received(frames)
    return (time.process_time_ns() - started) / (batches * FRAMES_PER_BATCH)


def _baseline_class(path: str) -> type[Connection]:
    spec = importlib.util.spec_from_file_location("herd_baseline_connection", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    baseline: type[Connection] = module.Connection
    return baseline


async def measure(
    repeats: int, batches: int, serve: bool = False, baseline: str | None = None, protocol: str = "classic"
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="herd-bench-hb-") as data:
        config = BrokerConfig.from_properties(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data, "group.initial.rebalance.delay.ms": "0"}
        )
        server = Server(config)
        await server.start()
        try:
            if protocol == "both":
                return await _paired(server, repeats, batches)
            api_key = CGH if protocol == "consumer" else HEARTBEAT
            if protocol == "consumer":
                members, wires, frames = await stable_consumer_group(server)
            else:
                members, tasks, frames = await stable_group(server)
            sink = Sink()
            conn = warmed_connection(server, sink, frames, batches // 4, api_key=api_key)
            per_heartbeat = []
            gc.collect()

            def run() -> float:
                return ns_per_heartbeat(conn, frames, batches)

            if baseline is not None:
                other = warmed_connection(server, Sink(), frames, batches // 4, _baseline_class(baseline), api_key)

                def run_other() -> float:
                    return ns_per_heartbeat(other, frames, batches)

                pairs = []
                for i in range(repeats):
                    if i % 2:
                        ours, theirs = run(), run_other()
                    else:
                        theirs, ours = run_other(), run()
                    pairs.append((ours, theirs))
                other.connection_lost(None)
                ratios = [a / b for a, b in pairs]
                per_heartbeat = [a for a, _ in pairs]
                quartiles = statistics.quantiles(ratios, n=4)
                return {
                    "ns": round(statistics.median(a for a, _ in pairs)),
                    "baseline_ns": round(statistics.median(b for _, b in pairs)),
                    "min_ns": round(min(a for a, _ in pairs)),
                    "baseline_min_ns": round(min(b for _, b in pairs)),
                    "ratio_median": round(statistics.median(ratios), 4),
                    "ratio_quartiles": [round(quartiles[0], 4), round(quartiles[2], 4)],
                }
            if serve:
                print("ready", flush=True)
                while sys.stdin.readline():
                    per_heartbeat.append(run())
                    print(round(per_heartbeat[-1]), flush=True)
            else:
                per_heartbeat = [run() for _ in range(repeats)]
            conn.connection_lost(None)
            if protocol == "consumer":
                for wire in wires:
                    wire.close()
            else:
                await stop_members(members, tasks)
        finally:
            await server.shutdown()
    if not per_heartbeat:
        return {}
    return {"min_ns": round(min(per_heartbeat)), "median_ns": round(statistics.median(per_heartbeat))}


async def _paired(server: Server, repeats: int, batches: int) -> dict[str, float]:
    """Classic and consumer heartbeats on one server, measured in turn: medians and the paired ratios."""
    members, tasks, classic_frames = await stable_group(server)
    consumers, wires, consumer_frames = await stable_consumer_group(server)
    classic = warmed_connection(server, Sink(), classic_frames, batches // 4)
    consumer = warmed_connection(server, Sink(), consumer_frames, batches // 4, api_key=CGH)
    gc.collect()
    pairs = []
    for i in range(repeats):
        if i % 2:
            c = ns_per_heartbeat(consumer, consumer_frames, batches)
            k = ns_per_heartbeat(classic, classic_frames, batches)
        else:
            k = ns_per_heartbeat(classic, classic_frames, batches)
            c = ns_per_heartbeat(consumer, consumer_frames, batches)
        pairs.append((k, c))
    classic.connection_lost(None)
    consumer.connection_lost(None)
    for wire in wires:
        wire.close()
    await stop_members(members, tasks)
    ratios = [c / k for k, c in pairs]
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "classic_ns": round(statistics.median(k for k, _ in pairs)),
        "consumer_ns": round(statistics.median(c for _, c in pairs)),
        "ratio_median": round(statistics.median(ratios), 4),
        "ratio_quartiles": [round(quartiles[0], 4), round(quartiles[2], 4)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--baseline-connection")
    parser.add_argument("--protocol", choices=("classic", "consumer", "both"), default="classic")
    args = parser.parse_args()
    result = asyncio.run(measure(args.repeats, args.batches, args.serve, args.baseline_connection, args.protocol))
    if not args.serve:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
