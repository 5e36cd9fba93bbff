"""Share groups (KIP-932) against a consumer group on the same data: records/s delivered and acknowledged.

    .venv/bin/python bench/bench_share_groups.py [--records 50000] [--consumers 4] [--partitions 1 8] [--repeat 3]

For each partition count the script starts a fresh broker (`herd serve`, a subprocess on a free port with a
temporary log.dirs), produces `--records` records of 100 bytes into a new topic (one producer, batches of up to
1 MB), and then, `--repeat` times, reads all of them:

- with a share group of `--consumers` confluent-kafka ShareConsumers (one thread each, implicit acknowledgement,
  max.poll.records 500; the group set to share.auto.offset.reset=earliest), from the first record received until
  the broker has acknowledged every record (herd_share_acknowledgements_total{type=accept} on /metrics: the
  acknowledgements of the last poll are sent by close, which is inside the timing);
- with a consumer group of as many classic confluent-kafka Consumers (subscribe, auto.offset.reset=earliest,
  auto commit off), from the first record received until every record is in Python.
Both are timed from their first record, so that neither's group formation (the consumer group's join and sync,
the share group's share-state initialization) is in the figure; the broker runs with
group.initial.rebalance.delay.ms=0.

It prints the median records/s of each and their ratio, the broker's CPU per record (user + system, from
/proc), and for the share group the bytes written to `__share_group_state` per 1,000 acknowledged records (the
durable share state: herd writes one ShareSnapshot per acknowledgement request). Each repeat uses a new group.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

sys.path.insert(0, str(Path(__file__).parent))
from _broker import BenchBroker  # noqa: E402

VALUE = b"x" * 100


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def accepted(http: str) -> int:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith('herd_share_acknowledgements_total{type="accept"}'):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def state_bytes(data_dir: str) -> int:
    return sum(f.stat().st_size for f in Path(data_dir).glob("__share_group_state-*/*.log"))


def share_run(broker: BenchBroker, topic: str, records: int, consumers: int, http: str) -> float:
    group = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])]
    ).values():
        future.result(30)
    before = accepted(http)
    received = [0]
    first: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()

    def run() -> None:
        c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "max.poll.records": "500"})
        c.subscribe([topic])
        while not stop.is_set():
            got = sum(1 for m in c.poll(0.1) if m.error() is None)
            with lock:
                if got and not first:
                    first.append(time.perf_counter())
                received[0] += got
        c.close()

    threads = [threading.Thread(target=run) for _ in range(consumers)]
    for t in threads:
        t.start()
    while received[0] < records:
        time.sleep(0.01)
    stop.set()
    for t in threads:
        t.join()
    while accepted(http) - before < records:
        time.sleep(0.01)
    return records / (time.perf_counter() - first[0])


def group_run(broker: BenchBroker, topic: str, records: int, consumers: int) -> float:
    group = f"classic-{uuid.uuid4().hex[:8]}"
    received = [0]
    first: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()

    def run() -> None:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": "false"})  # fmt: skip
        c.subscribe([topic])
        while not stop.is_set():
            got = sum(1 for m in c.consume(500, 0.1) if m.error() is None)
            with lock:
                if got and not first:
                    first.append(time.perf_counter())
                received[0] += got
        c.close()

    threads = [threading.Thread(target=run) for _ in range(consumers)]
    for t in threads:
        t.start()
    while received[0] < records:
        time.sleep(0.01)
    elapsed = time.perf_counter() - first[0]
    stop.set()
    for t in threads:
        t.join()
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for partitions in args.partitions:
        with tempfile.TemporaryDirectory() as data:
            broker = BenchBroker(data, **{"herd.http.listener": "127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"})
            try:
                assert broker.http_port, "the broker's HTTP listener (herd.http.listener) did not start"
                http = f"127.0.0.1:{broker.http_port}"
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
                producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 1_000_000})
                for i in range(args.records):
                    producer.produce(topic, VALUE, partition=i % partitions)
                    if i % 10_000 == 0:
                        producer.poll(0)
                assert producer.flush(60) == 0
                share, classic, share_cpu, classic_cpu, state = [], [], [], [], []
                for _ in range(args.repeat):
                    cpu, written = cpu_seconds(broker.proc.pid), state_bytes(data)
                    share.append(share_run(broker, topic, args.records, args.consumers, http))
                    share_cpu.append((cpu_seconds(broker.proc.pid) - cpu) / args.records * 1e6)
                    state.append((state_bytes(data) - written) / args.records * 1000)
                    cpu = cpu_seconds(broker.proc.pid)
                    classic.append(group_run(broker, topic, args.records, args.consumers))
                    classic_cpu.append((cpu_seconds(broker.proc.pid) - cpu) / args.records * 1e6)
                s, c = statistics.median(share), statistics.median(classic)
                print(
                    f"partitions={partitions} consumers={args.consumers} records={args.records}: "
                    f"share group {s:,.0f} records/s ({statistics.median(share_cpu):.1f} us broker CPU/record, "
                    f"{statistics.median(state):,.0f} state bytes per 1,000 acknowledged); "
                    f"consumer group {c:,.0f} records/s ({statistics.median(classic_cpu):.1f} us/record); "
                    f"ratio {s / c:.2f}  [share runs: {', '.join(f'{x:,.0f}' for x in share)}; "
                    f"group runs: {', '.join(f'{x:,.0f}' for x in classic)}]",
                    flush=True,
                )
            finally:
                broker.proc.terminate()
                broker.proc.wait(30)


if __name__ == "__main__":
    main()
