"""OffsetFetch against `herd serve` and librdkafka's in-memory mock cluster, in one run (issue 33 point 1).

    .venv/bin/python bench/bench_offset_fetch.py [--partitions 100,10,1] [--seconds 3] [--runs 3] [--api commit]

Each broker gets a topic of 100 partitions and a group with an offset committed on every one of them (an admin
commit: OffsetCommit v8, generation -1, as a consumer's first commit of an empty group is); then one connection
asks OffsetFetch for that group's offsets of the first P partitions, one request in flight at a time (closed
loop, as a consumer does after every rebalance), for --seconds; the first answer is decoded and checked to carry
the offset committed on each partition asked, every later one to be the same bytes. Reported per broker and P:
requests/s and the broker process's CPU per request, the median of --runs runs, the two brokers measured in turn
for each run so that both see the same machine. The version is the highest both serve (ApiVersions), at most v8
(one group per request); herd's answers come from memory, as the mock's do. The mock is
`../shared/tools/mockcluster.py` (librdkafka's rd_kafka_mock_* API, from the pinned confluent-kafka wheel).

`--api commit` measures OffsetCommit instead, the same way: one connection commits the first P partitions (v8,
generation -1, offsets 1000 + p) in a closed loop, the first answer checked to accept every partition and the later
ones to be the same bytes. herd answers each commit once it is fsynced; the mock keeps commits in memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _broker import BenchBroker
from bench_groups import VERSIONS, Wire, build, encode
from kio.serial import entity_reader

from herd.protocol.messages import response_class

API_VERSIONS, OFFSET_COMMIT, OFFSET_FETCH, CREATE_TOPICS = 18, 8, 9, 19
TOPIC, GROUP, PARTITIONS = "offsets-bench", "offsets-bench-group", 100
MOCK = Path(__file__).resolve().parent.parent.parent / "shared" / "tools" / "mockcluster.py"
VERSIONS.update({API_VERSIONS: 2, OFFSET_COMMIT: 8, CREATE_TOPICS: 7})  # ApiVersions v2: the mock has no v3


def _decoder(api_key: int, version: int) -> Any:
    cls = response_class(api_key, version)
    read_header, read_body = entity_reader(cls.__header_schema__), entity_reader(cls)

    def decode(frame: bytes) -> Any:
        _, offset = read_header(frame, 0)
        return read_body(frame, offset)[0]

    return decode


async def _call(wire: Wire, api_key: int, request: Any) -> Any:
    return await wire.send(encode(api_key, request), _decoder(api_key, VERSIONS[api_key]))


async def prepare(port: int, create: bool) -> int:
    """The topic (unless the broker has it already), the group's commits; the OffsetFetch version to speak."""
    wire = await Wire().connect(port)
    try:
        versions = await _call(wire, API_VERSIONS, build(API_VERSIONS))
        fetch = next(k for k in versions.api_keys if k.api_key == OFFSET_FETCH)
        VERSIONS[OFFSET_FETCH] = min(8, int(fetch.max_version))
        if create:
            topic = build(CREATE_TOPICS, "CreatableTopic", name=TOPIC, num_partitions=PARTITIONS, replication_factor=1,
                          assignments=(), configs=())  # fmt: skip
            await _call(wire, CREATE_TOPICS, build(CREATE_TOPICS, topics=(topic,), timeout=15000, validate_only=False))
        answer = await _call(wire, OFFSET_COMMIT, commit_request(PARTITIONS))
        assert _commit_codes(answer) == {0}, f"the commits were refused: {_commit_codes(answer)}"
    finally:
        wire.transport.close()
    return VERSIONS[OFFSET_FETCH]


def commit_request(partitions: int) -> Any:
    """OffsetCommit v8 of the first `partitions` partitions, offset 1000 + p each (an admin commit)."""
    parts = tuple(
        build(
            OFFSET_COMMIT,
            "OffsetCommitRequestPartition",
            partition_index=p,
            committed_offset=1000 + p,
            committed_leader_epoch=-1,
            committed_metadata="",
        )  # fmt: skip
        for p in range(partitions)
    )
    topics = (build(OFFSET_COMMIT, "OffsetCommitRequestTopic", name=TOPIC, partitions=parts),)
    return build(OFFSET_COMMIT, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                 group_instance_id=None, topics=topics)  # fmt: skip


def _commit_codes(answer: Any) -> set[int]:
    return {int(p.error_code) for t in answer.topics for p in t.partitions}


def fetch_request(partitions: int) -> Any:
    indexes = tuple(range(partitions))
    if VERSIONS[OFFSET_FETCH] >= 8:
        topic = build(OFFSET_FETCH, "OffsetFetchRequestTopics", name=TOPIC, partition_indexes=indexes)
        group = build(OFFSET_FETCH, "OffsetFetchRequestGroup", group_id=GROUP, member_id=None, member_epoch=-1,
                      topics=(topic,))  # fmt: skip
        return build(OFFSET_FETCH, groups=(group,), require_stable=False)
    topic = build(OFFSET_FETCH, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=indexes)
    return build(OFFSET_FETCH, group_id=GROUP, topics=(topic,), require_stable=False)


def _offsets(answer: Any) -> list[int]:
    topics = answer.groups[0].topics if hasattr(answer, "groups") else answer.topics
    return [int(p.committed_offset) for t in topics for p in t.partitions]


async def closed_loop(port: int, partitions: int, seconds: float, pid: int, api: str = "fetch") -> dict[str, float]:
    wire = await Wire().connect(port)
    try:
        if api == "commit":
            frame = encode(OFFSET_COMMIT, commit_request(partitions))
            answer = await wire.send(frame, _decoder(OFFSET_COMMIT, VERSIONS[OFFSET_COMMIT]))
            assert _commit_codes(answer) == {0} and sum(len(t.partitions) for t in answer.topics) == partitions
        else:
            frame = encode(OFFSET_FETCH, fetch_request(partitions))
            answer = await wire.send(frame, _decoder(OFFSET_FETCH, VERSIONS[OFFSET_FETCH]))
            assert _offsets(answer) == [1000 + p for p in range(partitions)], "the broker answered other offsets"
        # every later answer must be the same bytes after its correlation id: compared, not decoded (decoding 100
        # partitions with kio in Python would make this client the bottleneck)
        first = await wire.send(frame, bytes)
        same = first[4:]

        def check(answer: bytes) -> bool:
            return answer[4:] == same

        warm_until = time.perf_counter() + 0.5
        while time.perf_counter() < warm_until:
            assert await wire.send(frame, check)
        count, cpu = 0, _cpu_seconds(pid)
        started = time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds:
            assert await wire.send(frame, check), "an answer differed from the first"
            count += 1
        cpu = _cpu_seconds(pid) - cpu
    finally:
        wire.transport.close()
    return {"per_s": count / elapsed, "broker_us": 1e6 * cpu / count}


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks of 1/100 s


class Mock:
    """mockcluster.py in a child process: one broker with the topic."""

    def __init__(self, scratch: str) -> None:
        bootstrap_file = Path(scratch) / "mock.bootstrap"
        self.proc = subprocess.Popen(
            [sys.executable, str(MOCK), "--brokers", "1", "--topic", f"{TOPIC}:{PARTITIONS}", "--bootstrap-file",
             str(bootstrap_file), "--lifetime", "3600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not bootstrap_file.exists() or not bootstrap_file.read_text().strip():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the mock cluster did not start")
            time.sleep(0.05)
        self.port = int(bootstrap_file.read_text().strip().split(",")[0].rsplit(":", 1)[1])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="100,10,1")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--api", choices=("fetch", "commit"), default="fetch")
    args = parser.parse_args()
    sizes = [int(p) for p in args.partitions.split(",")]
    with tempfile.TemporaryDirectory(prefix="herd-bench-of-") as scratch:
        herd = BenchBroker(str(Path(scratch) / "herd"), **{"offsets.topic.num.partitions": "4"})
        mock = Mock(scratch)
        try:
            versions = {"herd": asyncio.run(prepare(herd.port, True)), "mock": asyncio.run(prepare(mock.port, False))}
            VERSIONS[OFFSET_FETCH] = min(versions.values())
            brokers = {"herd": (herd.port, herd.proc.pid), "mock": (mock.port, mock.proc.pid)}
            results: dict[str, dict[int, list[dict[str, float]]]] = {b: {p: [] for p in sizes} for b in brokers}
            for run in range(args.runs):
                order = list(brokers) if run % 2 == 0 else list(reversed(brokers))
                for p in sizes:
                    for name in order:
                        port, pid = brokers[name]
                        results[name][p].append(asyncio.run(closed_loop(port, p, args.seconds, pid, args.api)))
        finally:
            herd.stop()
            mock.stop()
    report: dict[str, Any] = {"api": args.api, "offset_fetch_version": VERSIONS[OFFSET_FETCH],
                              "offset_commit_version": VERSIONS[OFFSET_COMMIT]}  # fmt: skip
    for p in sizes:
        row = {}
        for name in brokers:
            runs = results[name][p]
            row[name] = {
                "per_s": round(statistics.median(r["per_s"] for r in runs)),
                "per_s_runs": [round(r["per_s"]) for r in runs],
                "broker_us": round(statistics.median(r["broker_us"] for r in runs), 1),
            }
        row["ratio_herd_to_mock"] = round(row["herd"]["per_s"] / row["mock"]["per_s"], 2)
        report[f"{p} partitions"] = row
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
