"""Transactions (issue 17): transactions per second, and what read_committed costs a fetch, in one run.

    .venv/bin/python bench/bench_transactions.py [--seconds 5] [--sizes 1,10,100] [--value-size 1024]
                                                 [--fetch-mb 100] [--repeat 3] [--src DIR] [--json]

One `herd serve` (segment files, in a temporary directory), and confluent-kafka clients:

1. transactions: one transactional producer (linger.ms 5) runs begin / produce N records of --value-size bytes
   to a topic of 3 partitions (record i to partition i mod 3) / commit_transaction, back to back, for
   --seconds, for each N in --sizes; transactions/s, records/s, the median and p99 of a whole transaction, and
   the broker's CPU per transaction. A commit returns once the broker has the PrepareCommit durable; the
   markers follow.
2. consume-transform-produce: the same with a read_committed consumer and `send_offsets_to_transaction` in
   each transaction (N = 10): what an exactly-once pipeline gets.
3. fetch: --fetch-mb of values written in transactions of 100 records (one aborted in ten), then read back by
   one consumer with isolation.level read_uncommitted and with read_committed, alternating, --repeat times;
   MB/s and the broker's CPU per MB of each. read_committed stops at the last stable offset and gets each
   range's aborted transactions with the data, which the client filters.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_produce_fetch import Broker, process_cpu, source_commit  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

PARTITIONS = 3


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        future.result(30)


def transactions(broker: Broker, size: int, seconds: float, value: bytes) -> dict[str, float]:
    topic = f"txn-{size}-{uuid.uuid4().hex[:6]}"
    create_topics(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic, "linger.ms": 5})
    producer.init_transactions(30)
    durations = []
    cpu0, start = process_cpu(broker.proc.pid), time.perf_counter()
    while time.perf_counter() - start < seconds:
        t = time.perf_counter()
        producer.begin_transaction()
        for i in range(size):
            producer.produce(topic, value, partition=i % PARTITIONS)
        producer.commit_transaction(30)
        durations.append(time.perf_counter() - t)
    elapsed, cpu = time.perf_counter() - start, process_cpu(broker.proc.pid) - cpu0
    return _summary(durations, elapsed, cpu, size)


def pipeline(broker: Broker, seconds: float, value: bytes, size: int = 10) -> dict[str, float]:
    source, sink = f"in-{uuid.uuid4().hex[:6]}", f"out-{uuid.uuid4().hex[:6]}"
    create_topics(broker.bootstrap, source, sink)
    feeder = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(200_000):
        feeder.produce(source, value, partition=i % PARTITIONS)
        if i % 10_000 == 0:
            feeder.poll(0)
    feeder.flush(60)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": source,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([source])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": sink, "linger.ms": 5})
    producer.init_transactions(30)
    while not consumer.assignment():
        consumer.poll(0.1)
    durations = []
    cpu0, start = process_cpu(broker.proc.pid), time.perf_counter()
    while time.perf_counter() - start < seconds:
        t = time.perf_counter()
        records = [m for m in consumer.consume(size, 1.0) if m.error() is None]
        producer.begin_transaction()
        for m in records:
            producer.produce(sink, m.value(), partition=m.partition())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)
        durations.append(time.perf_counter() - t)
    elapsed, cpu = time.perf_counter() - start, process_cpu(broker.proc.pid) - cpu0
    consumer.close()
    return _summary(durations, elapsed, cpu, size)


def _summary(durations: list[float], elapsed: float, cpu: float, size: int) -> dict[str, float]:
    ordered = sorted(durations)
    return {
        "txn_per_s": len(durations) / elapsed,
        "records_per_s": len(durations) * size / elapsed,
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[int(0.99 * (len(ordered) - 1))],
        "broker_us_per_txn": 1e6 * cpu / max(len(durations), 1),
    }


def fill(broker: Broker, topic: str, mb: int, value: bytes) -> tuple[int, int]:
    """--fetch-mb of values in transactions of 100 records, every tenth aborted; (committed, written) records."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": topic, "linger.ms": 5, "batch.size": 1_000_000}
    )
    producer.init_transactions(30)
    total, committed, n = mb * 1024 * 1024 // len(value), 0, 0
    while n * 100 < total:
        producer.begin_transaction()
        for i in range(100):
            producer.produce(topic, value, partition=i % PARTITIONS)
        if n % 10 == 9:
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += 100
        n += 1
    return committed, n * 100


def fetch(broker: Broker, topic: str, isolation: str, value_size: int) -> dict[str, float]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"r-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.min.messages": 1_000_000,
            "fetch.queue.backoff.ms": 5,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    count, ended = 0, set()
    cpu0, start = process_cpu(broker.proc.pid), time.perf_counter()
    while len(ended) < PARTITIONS:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                count += 1
            elif m.error().code() == KafkaError._PARTITION_EOF:
                ended.add(m.partition())
    elapsed, cpu = time.perf_counter() - start, process_cpu(broker.proc.pid) - cpu0
    consumer.close()
    mb = count * value_size / 1024 / 1024
    return {"records": count, "mb_per_s": mb / elapsed, "broker_ms_per_mb": 1000 * cpu / mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--sizes", default="1,10,100", help="records per transaction")
    parser.add_argument("--value-size", type=int, default=1024)
    parser.add_argument("--fetch-mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--src", help="a herd source tree to run the broker from (its src directory)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    value = os.urandom(args.value_size)
    broker = Broker(args.src, "warning", [], {})
    results: dict[str, object] = {}
    try:
        broker.wait_ready()
        for size in (int(s) for s in args.sizes.split(",")):
            results[f"transactions-{size}"] = r = transactions(broker, size, args.seconds, value)
            print(
                f"# {size:>3} records per transaction: {r['txn_per_s']:8.1f} txn/s {r['records_per_s']:10.0f} "
                f"records/s p50 {r['p50_ms']:.1f} ms p99 {r['p99_ms']:.1f} ms, broker "
                f"{r['broker_us_per_txn']:.0f} us per txn",
                file=sys.stderr,
            )
        results["pipeline-10"] = r = pipeline(broker, args.seconds, value)
        print(
            f"# consume-transform-produce, 10 records: {r['txn_per_s']:.1f} txn/s p50 {r['p50_ms']:.1f} ms "
            f"p99 {r['p99_ms']:.1f} ms",
            file=sys.stderr,
        )
        topic = f"fetch-{uuid.uuid4().hex[:6]}"
        create_topics(broker.bootstrap, topic)
        committed, written = fill(broker, topic, args.fetch_mb, value)
        runs: dict[str, list[dict[str, float]]] = {"read_uncommitted": [], "read_committed": []}
        for _ in range(args.repeat):
            for isolation in runs:
                runs[isolation].append(r := fetch(broker, topic, isolation, args.value_size))
                print(
                    f"# fetch {isolation:<17} {r['mb_per_s']:7.1f} MB/s broker {r['broker_ms_per_mb']:.2f} ms/MB "
                    f"({r['records']} records)",
                    file=sys.stderr,
                )
        for isolation, rs in runs.items():
            expected = committed if isolation == "read_committed" else written
            assert all(r["records"] == expected for r in rs), (isolation, [r["records"] for r in rs], expected)
            results[f"fetch-{isolation}"] = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
    finally:
        broker.stop()
    results["meta"] = {
        "commit": source_commit(args.src),
        "when": time.strftime("%Y-%m-%d %H:%M"),
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "argv": sys.argv[1:],
    }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, r in results.items():
            print(key, {k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()})


if __name__ == "__main__":
    main()
