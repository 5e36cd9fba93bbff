"""What one scrape of /metrics costs the broker, by the number of groups and committed offsets it holds.

    .venv/bin/python bench/bench_metrics_scrape.py [--groups 100,1000,10000] [--partitions 10] [--max-series 10000]

A `herd serve` Server runs in this process (embedded, segment files in a temporary directory); for each size,
--groups groups commit --partitions offsets each of a topic of that many partitions (through the coordinator
runtime, as OffsetCommit does), then the exporter renders the text format five times (herd.server.metrics
Exporter.render: the lag of every group, groups by state, every family) while a task on the loop ticks every
millisecond: the median time of a render, the longest the loop went without ticking during the renders (what
the node's requests wait for at worst: the lag and the snapshot are taken on the loop, the text is encoded in
a worker thread, which shares the GIL with the loop), the size of the text and the number of lag series.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from herd.config import BrokerConfig  # noqa: E402
from herd.coordinator import GroupCoordinatorShard  # noqa: E402
from herd.coordinator.requests import CommitPartition, CommitTopic, OffsetCommit  # noqa: E402
from herd.server.metrics import Exporter  # noqa: E402
from herd.server.server import Server  # noqa: E402


async def measure(groups: int, partitions: int, max_series: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="herd-bench-scrape-") as data:
        config = BrokerConfig.from_properties(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data, "herd.metrics.max.series": str(max_series)}
        )
        server = Server(config)
        await server.start()
        try:
            await server.broker.coordinator.wait_loaded()
            server.broker.cluster.create_topic("scraped", partitions, {})
            topic = CommitTopic("scraped", tuple(CommitPartition(p, p + 1) for p in range(partitions)))
            pending = []
            for g in range(groups):
                outcome = server.broker.coordinator.call(
                    f"group-{g}",
                    GroupCoordinatorShard.offset_commit,
                    OffsetCommit(group_id=f"group-{g}", topics=(topic,)),
                )
                if isinstance(outcome, asyncio.Future):
                    pending.append(outcome)
            await asyncio.gather(*pending)
            exporter = Exporter(server)
            seconds, size, longest = [], 0, 0.0
            ticking = True

            async def tick() -> None:
                nonlocal longest
                last = time.perf_counter()
                while ticking:
                    await asyncio.sleep(0.001)
                    now = time.perf_counter()
                    longest, last = max(longest, now - last), now

            ticker = asyncio.get_running_loop().create_task(tick())
            await asyncio.sleep(0.01)
            longest = 0.0
            for _ in range(5):
                started = time.perf_counter()
                body, _ = await exporter.render()
                seconds.append(time.perf_counter() - started)
                size = len(body)
            ticking = False
            await ticker
            lag_series = body.count(b"\nherd_consumer_group_lag{")
        finally:
            await server.shutdown()
    return {
        "groups": groups,
        "offsets": groups * partitions,
        "scrape_ms": round(statistics.median(seconds) * 1000, 1),
        "loop_held_max_ms": round(longest * 1000, 1),
        "text_kib": round(size / 1024),
        "lag_series": lag_series,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default="100,1000,10000")
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--max-series", type=int, default=10000)
    args = parser.parse_args()
    for groups in (int(g) for g in args.groups.split(",")):
        print(asyncio.run(measure(groups, args.partitions, args.max_series)), flush=True)


if __name__ == "__main__":
    main()
