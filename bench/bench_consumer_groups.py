"""KIP-848 consumer groups against a real `herd serve`, beside the classic protocol in the same session and driver
(issue 31 point 12).

    .venv/bin/python bench/bench_consumer_groups.py [--members 1000] [--partitions 10000] [--hb-seconds 5]
                                                    [--connections 10] [--interval-ms 5000]

Measured, each against one broker started for the run:
1. steady-state heartbeats/s of a stable group of --members members over --connections shared connections,
   closed loop (every member with one heartbeat in flight), for the classic protocol (Heartbeat v4, the driver
   of bench_groups.py) and for the consumer protocol (ConsumerGroupHeartbeat v1 at the member's epoch, nothing
   else set, as a consumer heartbeats between changes); throughput, latency percentiles, broker CPU per
   heartbeat;
2. one member added to that consumer group (--partitions partitions, every member subscribed): how long until
   it owns its partitions, counted in heartbeat intervals of --interval-ms (group.consumer.heartbeat.interval.ms)
   while the others heartbeat on that interval and revoke at once, as librdkafka does; and how many of the others
   lost partitions;
3. the uniform assignor alone (in this process) computing that group's target assignment: the first one, and
   with one member added, median of 5 runs.

The bench's members are raw kio clients (bench_groups.Member for the classic group; `ConsumerMember` here): a
Kafka client library is too heavy for 1,000 members in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from typing import Any

import bench_groups
from _broker import BenchBroker
from bench_groups import Wire, build, encode

from herd.coordinator.consumer.assignors import MemberSpec, UniformAssignor

CGH = 68
bench_groups.VERSIONS[CGH] = 1
TOPIC = "bench-848"


class ConsumerMember:
    """A consumer-protocol member: joins with epoch 0, then heartbeats with its epoch and the partitions it owns
    (a full request, the simple way to stay in sync), taking its answer's assignment at once."""

    def __init__(self, wire: Wire, group: str, index: int) -> None:
        self.wire, self.group, self.index = wire, group, index
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.owned: dict[uuid.UUID, tuple[int, ...]] = {}
        self.changed_at = 0.0

    async def heartbeat(self) -> Any:
        owned = tuple(build(CGH, "TopicPartitions", topic_id=t, partitions=p) for t, p in sorted(self.owned.items()))
        response = await self.wire.call(
            CGH,
            build(
                CGH,
                group_id=self.group,
                member_id=self.member_id,
                member_epoch=self.epoch,
                rebalance_timeout=60_000,
                subscribed_topic_names=(TOPIC,),
                topic_partitions=owned,
            ),
        )
        if response.error_code:
            raise RuntimeError(f"member {self.index}: ConsumerGroupHeartbeat error {response.error_code}")
        self.epoch = response.member_epoch
        if response.assignment is not None:
            new = {tp.topic_id: tuple(tp.partitions) for tp in response.assignment.topic_partitions}
            if new != self.owned:
                self.owned, self.changed_at = new, time.perf_counter()
        return response

    def size(self) -> int:
        return sum(len(p) for p in self.owned.values())


async def create_topic(port: int, partitions: int) -> None:
    bench_groups.VERSIONS[19] = 7
    wire = await Wire().connect(port)
    topic = build(
        19, "CreatableTopic", name=TOPIC, num_partitions=partitions, replication_factor=1, assignments=(), configs=()
    )
    answer = await wire.call(19, build(19, topics=(topic,), timeout=60_000, validate_only=False))
    assert answer.topics[0].error_code == 0, answer
    wire.close()


async def form(port: int, group: str, n: int, connections: int, partitions: int) -> list[ConsumerMember]:
    """n members joined and stable: every member at the group's epoch owning its target, partitions all owned."""
    wires = [await Wire().connect(port) for _ in range(connections)]
    members = [ConsumerMember(wires[i % connections], group, i) for i in range(n)]
    for start in range(0, n, 100):  # join in slices so that the group grows as a fleet starting would
        await asyncio.gather(*(m.heartbeat() for m in members[start : start + 100]))
    for _ in range(50):
        await asyncio.gather(*(m.heartbeat() for m in members))
        epochs = {m.epoch for m in members}
        if len(epochs) == 1 and sum(m.size() for m in members) == partitions:
            return members
    raise RuntimeError(f"the group did not settle: epochs {sorted({m.epoch for m in members})[:5]}")


def keep_alive_frame(member: ConsumerMember, correlation_id: int) -> bytes:
    """A member's keep-alive ConsumerGroupHeartbeat: its epoch, nothing else set (as a reconciled consumer sends)."""
    return encode(
        CGH,
        build(
            CGH,
            group_id=member.group,
            member_id=member.member_id,
            member_epoch=member.epoch,
            rebalance_timeout=-1,
            subscribed_topic_names=None,
            topic_partitions=None,
        ),
        correlation_id,
    )


async def consumer_heartbeats(
    port: int, members: list[ConsumerMember], connections: int, seconds: float, pid: int
) -> dict[str, float]:
    frames = [keep_alive_frame(m, m.index) for m in members]
    return await bench_groups.drive(port, frames, connections, seconds, 0, pid)


async def add_member(port: int, members: list[ConsumerMember], interval_ms: int, partitions: int) -> dict[str, float]:
    """A new member joins the stable group; every member heartbeats every interval (the old ones spread over it,
    as clients started at different times are) until the newcomer owns its share."""
    before = {m.index: dict(m.owned) for m in members}
    wire = await Wire().connect(port)
    newcomer = ConsumerMember(wire, members[0].group, len(members))
    share = partitions // (len(members) + 1)
    start = time.perf_counter()
    await newcomer.heartbeat()
    interval = interval_ms / 1000

    async def keep_heartbeating(m: ConsumerMember, offset: float) -> None:
        await asyncio.sleep(offset)
        while newcomer.size() < share:
            await m.heartbeat()
            await asyncio.sleep(interval)

    tasks = [asyncio.create_task(keep_heartbeating(m, interval * i / len(members))) for i, m in enumerate(members)]
    while newcomer.size() < share and time.perf_counter() - start < 20 * interval:
        await asyncio.sleep(interval)
        await newcomer.heartbeat()
    took = time.perf_counter() - start
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    moved = sum(1 for m in members if m.owned != before[m.index])
    wire.close()
    return {"seconds": took, "intervals": took / interval, "owned": newcomer.size(), "share": share, "moved": moved}


def assignor_timing(members: int, partitions: int) -> tuple[float, float]:
    topic = uuid.uuid4()
    specs = [MemberSpec(f"m{i:05d}", frozenset({topic})) for i in range(members)]
    assignor = UniformAssignor()
    firsts, adds = [], []
    for _ in range(5):
        t = time.perf_counter()
        first = assignor.assign(specs, {topic: partitions})
        firsts.append(time.perf_counter() - t)
        grown = [MemberSpec(s.member_id, s.topics, first[s.member_id]) for s in specs] + [
            MemberSpec("new", frozenset({topic}))
        ]
        t = time.perf_counter()
        assignor.assign(grown, {topic: partitions})
        adds.append(time.perf_counter() - t)
    return statistics.median(firsts), statistics.median(adds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--hb-seconds", type=float, default=5.0)
    parser.add_argument("--interval-ms", type=int, default=5000)
    args = parser.parse_args()
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run

    first, added = assignor_timing(args.members, args.partitions)
    print(
        f"uniform assignor, {args.members} members x {args.partitions} partitions: first {first * 1000:.1f} ms, "
        f"one member added {added * 1000:.1f} ms (median of 5)",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as data:
        broker = BenchBroker(
            data,
            **{
                "group.max.size": "100000",
                "max.broker.partitions": str(args.partitions + 1000),  # the topic and __consumer_offsets
                "group.initial.rebalance.delay.ms": "0",
                "group.consumer.heartbeat.interval.ms": str(args.interval_ms),
                "group.consumer.min.heartbeat.interval.ms": str(min(args.interval_ms, 5000)),
                "group.consumer.session.timeout.ms": "60000",
                "group.consumer.max.session.timeout.ms": "60000",
            },
        )
        try:
            pid = broker.proc.pid
            classic = runner(
                bench_groups.heartbeats(
                    broker.port,
                    args.members,
                    args.connections,
                    args.hb_seconds,
                    0,
                    pid,
                    broker.memory_mib,
                    group="classic-848",
                )
            )
            print(
                f"classic Heartbeat v4, {args.members} members: {classic['per_s']:,.0f}/s, "
                f"p50 {classic['p50_ms']:.2f} ms, "
                f"p99 {classic['p99_ms']:.2f} ms, broker {classic['broker_us']:.1f} us CPU each, "
                f"errors {classic['errors']}",
                flush=True,
            )

            async def consumer_run() -> tuple[dict[str, float], dict[str, float]]:
                await create_topic(broker.port, args.partitions)
                members = await form(broker.port, "consumer-848", args.members, args.connections, args.partitions)
                steady = await consumer_heartbeats(broker.port, members, args.connections, args.hb_seconds, pid)
                grown = await add_member(broker.port, members, args.interval_ms, args.partitions)
                return steady, grown

            steady, grown = runner(consumer_run())
            print(
                f"ConsumerGroupHeartbeat v1, {args.members} members: {steady['per_s']:,.0f}/s, "
                f"p50 {steady['p50_ms']:.2f} ms, "
                f"p99 {steady['p99_ms']:.2f} ms, broker {steady['broker_us']:.1f} us CPU each, "
                f"errors {steady['errors']}",
                flush=True,
            )
            print(f"ratio consumer/classic heartbeats/s: {steady['per_s'] / classic['per_s']:.2f}")
            print(
                f"member added to {args.members} members x {args.partitions} partitions: owns {grown['owned']:.0f} "
                f"(its share {grown['share']:.0f}) after {grown['seconds']:.1f} s = {grown['intervals']:.2f} heartbeat "
                f"intervals; {grown['moved']:.0f} of the others lost partitions",
                flush=True,
            )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
