"""Share groups (KIP-932) against a consumer group on the same data: records/s delivered and acknowledged.

    .venv/bin/python bench/bench_share_groups.py [--records 50000] [--consumers 4] [--partitions 1 8] [--repeat 3]

For each partition count the script starts a fresh broker (`herd serve`, a subprocess on a free port with a
temporary log.dirs), produces `--records` records of 100 bytes into a new topic (one producer, batches of up to
`--batch-bytes`, 1 MB), and then, `--repeat` times, reads all of them:

- with a share group of `--consumers` confluent-kafka ShareConsumers (one thread each, implicit acknowledgement,
  max.poll.records 500; the group's share state set to offset 0 before they join), from the first record received
  until the last (*delivered*), and until the broker has acknowledged every record (*acknowledged*:
  herd_share_acknowledgements_total{type=accept} on /metrics). The acknowledgements of a poll ride on the next
  ShareFetch, and librdkafka sends that only when the one in flight returns: after the last record, the fetch in
  flight finds nothing and waits fetch.wait.max.ms (500 ms), so the acknowledged figure carries that wait once
  (close sends the last acknowledgements when it returns) and is a throughput figure only for runs much longer;
- with a consumer group of as many classic confluent-kafka Consumers (subscribe, auto.offset.reset=earliest,
  auto commit off, `PREFETCH`), from the first record received until every record is in Python;
- with `--raw`, also with as many raw share consumers (kio requests on one event loop, a connection each: ShareFetch
  v1 of every partition, max_records 500, each fetch carrying the acceptance of what the previous one acquired, and
  a last ShareAcknowledge), from the first record to the last acceptance answered (durable): what herd serves
  when the client costs next to nothing, where a ShareConsumer's poll loop is what limits the figure above.
Both are timed from their first record, so that neither's group formation (the consumer group's join and sync,
the share group's heartbeats) is in the figure, and the share group's state is initialized before its members join
(`initialized_share_group`). The broker keeps Kafka's group.initial.rebalance.delay.ms (3 s), so that the consumer
group's four members join one generation: with no delay the first member is given every partition and starts
reading, and the rebalance when the others join stops it in the middle of the timing (the consumer group's figure
then halved or worse, at random). Share groups have no such delay: a member reads what it is given at once.

It prints the median records/s of each and their ratio, the broker's CPU per record (user + system, from
/proc) and the client's (this process: the consumers' threads, librdkafka's included, and Python), and for the
share group the bytes written to `__share_group_state` per 1,000 acknowledged records (the durable share state: a
ShareUpdate per acknowledgement write, a ShareSnapshot every 500 of them) and its fsyncs
(herd_share_coordinator_fsyncs_total). Each repeat uses a new group.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
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
import asyncio  # noqa: E402

from _broker import BenchBroker  # noqa: E402
from bench_groups import VERSIONS, Wire, build, encode  # noqa: E402
from kio.serial import entity_reader  # noqa: E402

from herd.protocol.messages import response_class  # noqa: E402

METADATA, SHARE_FETCH, SHARE_ACK = 3, 78, 79
VERSIONS.update({METADATA: 12, SHARE_FETCH: 1, SHARE_ACK: 1})
ACCEPT = 1

VALUE = b"x" * 100
# librdkafka's Consumer stops fetching once queued.min.messages (100,000) wait in its queue and then backs off
# fetch.queue.backoff.ms (1 s): past 100,000 records the consumer group would idle most of the time (bench_produce_fetch
# sets the same two)
PREFETCH = {"queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 5}


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _metric(http: str, prefix: str) -> int:
    with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(prefix):
                return int(float(line.rsplit(" ", 1)[1]))
    return 0


def accepted(http: str) -> int:
    return _metric(http, 'herd_share_acknowledgements_total{type="accept"}')


def state_fsyncs(http: str) -> int:
    """Durable writes of __share_group_state partitions (an fsync each) so far."""
    return _metric(http, "herd_share_coordinator_fsyncs_total ")


def state_bytes(data_dir: str) -> int:
    return sum(f.stat().st_size for f in Path(data_dir).glob("__share_group_state-*/*.log"))


def earliest_share_group(broker: BenchBroker, prefix: str) -> str:
    """A new share group id, set to share.auto.offset.reset=earliest (it reads what was produced before it)."""
    group = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    earliest = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[earliest])]
    ).values():
        future.result(30)
    return group


def initialized_share_group(broker: BenchBroker, topic: str) -> str:
    """A new share group id whose share state of `topic` starts at offset 0 before any member joins (`herd
    share-groups reset-offsets` on a group that does not exist yet, as kafka-share-groups.sh allows). A new group's
    share state is otherwise initialized by its first member's first heartbeat, and that member is assigned the
    partitions only at its next heartbeat, group.share.heartbeat.interval.ms (5 s) later, as in Kafka
    (docs/kip-932/share-group-rules.md section 4): with several partitions the first member would sit idle that long
    while the others read, and the figure would time group formation rather than delivery."""
    group = f"share-{uuid.uuid4().hex[:8]}"
    command = [sys.executable, "-m", "herd.cli", "share-groups", "reset-offsets", "--group", group, "--topic", topic,
               "--to-earliest", "--execute", "--bootstrap-server", broker.bootstrap]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    return group


def share_run(broker: BenchBroker, topic: str, records: int, consumers: int, http: str) -> tuple[float, float]:
    """(records/s delivered, records/s delivered and acknowledged), both from the first record received."""
    group = initialized_share_group(broker, topic)
    before = accepted(http)
    received = [0]
    first: list[float] = []
    last: list[float] = []  # when the last record was received
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
                if received[0] >= records and not last:
                    last.append(time.perf_counter())
        c.close()

    threads = [threading.Thread(target=run) for _ in range(consumers)]
    for t in threads:
        t.start()
    while not last:
        time.sleep(0.001)
    stop.set()
    for t in threads:
        t.join()
    while accepted(http) - before < records:
        time.sleep(0.01)  # each look is a scrape of /metrics, whose CPU counts as the broker's
    return records / (last[0] - first[0]), records / (time.perf_counter() - first[0])


def _decoder(api_key: int) -> object:
    cls = response_class(api_key, VERSIONS[api_key])
    read_header, read_body = entity_reader(cls.__header_schema__), entity_reader(cls)
    return lambda frame: read_body(frame, read_header(frame, 0)[1])[0]


async def _raw_share(port: int, topic: str, partitions: int, group: str, records: int, consumers: int) -> float:
    """Raw share consumers (see the module docstring): records/s from the first record to the last acceptance."""
    wire = await Wire().connect(port)
    wanted = (build(METADATA, "MetadataRequestTopic", name=topic, topic_id=None),)
    asked = build(METADATA, topics=wanted, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    meta = await wire.send(encode(METADATA, asked), _decoder(METADATA))
    wire.transport.close()
    topic_id = meta.topics[0].topic_id
    fetched = [0]
    first: list[float] = []

    def ack_batches(api: int, kind: str, ranges: list[tuple[int, int]]) -> tuple[object, ...]:
        return tuple(build(api, kind, first_offset=f, last_offset=la, acknowledge_types=(ACCEPT,)) for f, la in ranges)

    async def consumer() -> None:
        wire = await Wire().connect(port)
        member, epoch = uuid.uuid4().hex, 0
        pending: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        decode = _decoder(SHARE_FETCH)
        while fetched[0] < records:
            parts = tuple(
                build(SHARE_FETCH, "FetchPartition", partition_index=p,
                      acknowledgement_batches=ack_batches(SHARE_FETCH, "AcknowledgementBatch", pending[p]))
                for p in range(partitions) if epoch == 0 or pending[p]
            )  # fmt: skip
            topics = (build(SHARE_FETCH, "FetchTopic", topic_id=topic_id, partitions=parts),) if parts else ()
            request = build(SHARE_FETCH, group_id=group, member_id=member, share_session_epoch=epoch, max_wait=100,
                            min_bytes=1, max_bytes=1 << 22, max_records=500, batch_size=500, topics=topics,
                            forgotten_topics_data=())  # fmt: skip
            answer = await wire.send(encode(SHARE_FETCH, request), decode)
            assert answer.error_code == 0, answer.error_code
            epoch += 1
            pending = {p: [] for p in range(partitions)}
            for t in answer.responses:
                for p in t.partitions:
                    assert p.error_code == 0 and p.acknowledge_error_code == 0, (p.error_code, p.acknowledge_error_code)
                    for r in p.acquired_records:
                        pending[p.partition_index].append((r.first_offset, r.last_offset))
                        if not first:
                            first.append(time.perf_counter())
                        fetched[0] += r.last_offset - r.first_offset + 1
        parts = tuple(
            build(SHARE_ACK, "AcknowledgePartition", partition_index=p,
                  acknowledgement_batches=ack_batches(SHARE_ACK, "AcknowledgementBatch", ranges))
            for p, ranges in pending.items() if ranges
        )  # fmt: skip
        topics = (build(SHARE_ACK, "AcknowledgeTopic", topic_id=topic_id, partitions=parts),)
        request = build(SHARE_ACK, group_id=group, member_id=member, share_session_epoch=-1, topics=topics)
        answer = await wire.send(encode(SHARE_ACK, request), _decoder(SHARE_ACK))
        assert answer.error_code == 0 and all(p.error_code == 0 for t in answer.responses for p in t.partitions)
        wire.transport.close()

    await asyncio.gather(*(consumer() for _ in range(consumers)))
    return records / (time.perf_counter() - first[0])


def raw_share_run(broker: BenchBroker, topic: str, partitions: int, records: int, consumers: int, http: str) -> float:
    group = earliest_share_group(broker, "raw")
    before = accepted(http)
    rate = asyncio.run(_raw_share(broker.port, topic, partitions, group, records, consumers))
    assert accepted(http) - before == records, "the raw share consumers' acceptances were not all counted"
    return rate


def group_run(broker: BenchBroker, topic: str, records: int, consumers: int) -> float:
    group = f"classic-{uuid.uuid4().hex[:8]}"
    received = [0]
    first: list[float] = []
    last: list[float] = []  # when the last record was received
    lock = threading.Lock()
    stop = threading.Event()

    def run() -> None:
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": "false", **PREFETCH})  # fmt: skip
        c.subscribe([topic])
        while not stop.is_set():
            got = sum(1 for m in c.consume(500, 0.1) if m.error() is None)
            with lock:
                if got and not first:
                    first.append(time.perf_counter())
                received[0] += got
                if received[0] >= records and not last:
                    last.append(time.perf_counter())
        c.close()

    threads = [threading.Thread(target=run) for _ in range(consumers)]
    for t in threads:
        t.start()
    while not last:
        time.sleep(0.001)
    stop.set()
    for t in threads:
        t.join()
    return records / (last[0] - first[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--raw", action="store_true", help="also raw share consumers (kio requests)")
    parser.add_argument("--batch-bytes", type=int, default=1_000_000,
                        help="the producer's batch.size (librdkafka's default is 16384)")  # fmt: skip
    args = parser.parse_args()
    for partitions in args.partitions:
        with tempfile.TemporaryDirectory() as data:
            broker = BenchBroker(data, **{"herd.http.listener": "127.0.0.1:0"})
            try:
                assert broker.http_port, "the broker's HTTP listener (herd.http.listener) did not start"
                http = f"127.0.0.1:{broker.http_port}"
                topic = f"bench-{uuid.uuid4().hex[:8]}"
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
                batching = {"linger.ms": 5, "batch.size": args.batch_bytes}
                producer = Producer({"bootstrap.servers": broker.bootstrap, **batching})
                for i in range(args.records):
                    producer.produce(topic, VALUE, partition=i % partitions)
                    if i % 10_000 == 0:
                        producer.poll(0)
                assert producer.flush(60) == 0
                share, acked, classic, share_cpu, classic_cpu, state, fsyncs, raw = [], [], [], [], [], [], [], []
                share_client, classic_client = [], []  # this process's CPU (the consumers' threads) per record
                for _ in range(args.repeat):
                    if args.raw:
                        raw.append(raw_share_run(broker, topic, partitions, args.records, args.consumers, http))
                    cpu, mine, written = cpu_seconds(broker.proc.pid), cpu_seconds(os.getpid()), state_bytes(data)
                    synced = state_fsyncs(http)
                    rates = share_run(broker, topic, args.records, args.consumers, http)
                    share.append(rates[0])
                    acked.append(rates[1])
                    share_cpu.append((cpu_seconds(broker.proc.pid) - cpu) / args.records * 1e6)
                    share_client.append((cpu_seconds(os.getpid()) - mine) / args.records * 1e6)
                    state.append((state_bytes(data) - written) / args.records * 1000)
                    fsyncs.append((state_fsyncs(http) - synced) / args.records * 1000)
                    cpu, mine = cpu_seconds(broker.proc.pid), cpu_seconds(os.getpid())
                    classic.append(group_run(broker, topic, args.records, args.consumers))
                    classic_cpu.append((cpu_seconds(broker.proc.pid) - cpu) / args.records * 1e6)
                    classic_client.append((cpu_seconds(os.getpid()) - mine) / args.records * 1e6)
                s, a, c = statistics.median(share), statistics.median(acked), statistics.median(classic)
                print(
                    f"partitions={partitions} consumers={args.consumers} records={args.records}: "
                    f"share group {s:,.0f} records/s delivered, {a:,.0f} delivered and acknowledged "
                    f"({statistics.median(share_cpu):.1f} us broker CPU/record, "
                    f"{statistics.median(share_client):.1f} us client CPU/record, "
                    f"{statistics.median(state):,.0f} state bytes and {statistics.median(fsyncs):.1f} fsyncs per "
                    f"1,000 acknowledged); "
                    f"consumer group {c:,.0f} records/s ({statistics.median(classic_cpu):.1f} us broker, "
                    f"{statistics.median(classic_client):.1f} us client CPU/record); "
                    f"ratio {s / c:.2f} delivered, {a / c:.2f} acknowledged  "
                    f"[share runs: {', '.join(f'{x:,.0f}/{y:,.0f}' for x, y in zip(share, acked))}; "
                    f"group runs: {', '.join(f'{x:,.0f}' for x in classic)}]",
                    flush=True,
                )
                if raw:
                    r = statistics.median(raw)
                    print(f"  raw share consumers {r:,.0f} records/s (ratio to the consumer group {r / c:.2f}) "
                          f"[runs: {', '.join(f'{x:,.0f}' for x in raw)}]", flush=True)  # fmt: skip
            finally:
                broker.proc.terminate()
                broker.proc.wait(30)


if __name__ == "__main__":
    main()
