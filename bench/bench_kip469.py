"""KIP-469 benchmark: a stable group of static confluent-kafka consumers scaled up by K instances arriving one
by one, with and without pre-registering their group.instance.ids, against a real `herd serve`.

    .venv/bin/python bench/bench_kip469.py [--old 4] [--new 4] [--partitions 16] [--arrival-ms 2000]
                                           [--heartbeat-ms 500] [--processing-ms 0] [--runs 3]

Each consumer runs in its own thread (eager "range" assignment, librdkafka's default), polls (20 ms, then
--processing-ms of simulated work without polling: librdkafka serves rebalance callbacks from the poll, so a
rebalance waits for every member's next poll) and logs every assignment and revocation with its time. From
the union of those logs, for the window from the first new instance starting to the last assignment of the
scale-up:
- unowned partition-seconds: the sum over partitions of the time no consumer owned the partition (the work
  the group could not do), and the wall time during which at least one partition was unowned;
- rebalances: how far the generation advanced (read on the wire: DescribeGroups names a member, a Heartbeat
  with its id answers NONE only for the current generation);
- scale-up time: from the first new instance starting to every partition owned in the final assignment.
With pre-registration the ids are registered before the first instance starts (IncrementalAlterConfigs on
the GROUP resource, herd.expected.instance.ids). Each figure is the median of --runs runs.
"""

from __future__ import annotations

import argparse
import io
import socket
import statistics
import struct
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from _broker import BenchBroker
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from herd.protocol.messages import request_class, response_class
from herd.server.apis._build import make

CONFIG = "herd.expected.instance.ids"


# -- broker ----------------------------------------------------------------------------------------------------


class Broker(BenchBroker):
    """`herd serve` in a child process on a free port."""

    def __init__(self, data_dir: str) -> None:
        super().__init__(
            data_dir,
            **{"num.partitions": "1", "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"},
        )


def raw_call(port: int, api_key: int, version: int, **fields: Any) -> Any:
    """One request on a fresh connection, encoded and decoded with kio."""
    cls = request_class(api_key, version)
    header_cls = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_cls)(
        buf,
        header_cls(
            request_api_key=i16(api_key), request_api_version=i16(version), correlation_id=i32(1), client_id="bench"
        ),
    )
    entity_writer(cls)(buf, make(cls, fields))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        size = struct.unpack(">i", _read(s, 4))[0]
        frame = _read(s, size)
    rcls = response_class(api_key, version)
    _, offset = entity_reader(rcls.__header_schema__)(frame, 0)
    return entity_reader(rcls)(frame, offset)[0]


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def generation(port: int, group: str) -> int:
    """The Stable group's generation (see the module docstring)."""
    (g,) = raw_call(port, 15, 5, groups=(group,), include_authorized_operations=False).groups
    member = g.members[0]
    for candidate in range(1, 1000):
        answer = raw_call(
            port,
            12,
            4,
            group_id=group,
            generation_id=candidate,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
        )
        if answer.error_code == 0:
            return candidate
    raise RuntimeError(f"no generation of {group} answered")


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def pre_register(bootstrap: str, group: str, ids: list[str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry(CONFIG, ",".join(ids), incremental_operation=AlterConfigOpType.SET)
    client = admin(bootstrap)
    (future,) = client.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]
    ).values()
    future.result(15)


# -- consumers -------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class Member(threading.Thread):
    bootstrap: str
    topic: str
    group: str
    instance_id: str
    heartbeat_ms: int
    processing_ms: int = 0
    events: list[tuple[float, str, frozenset[int]]] = field(default_factory=list)
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True)

    def run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "group.instance.id": self.instance_id,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": self.heartbeat_ms,
                "max.poll.interval.ms": 30_000,
                "enable.auto.commit": False,
                "partition.assignment.strategy": "range",
                "topic.metadata.refresh.interval.ms": 1000,
                "log_level": 3,
            }
        )
        work = self.processing_ms / 1000

        def on_assign(c: Any, partitions: Any) -> None:
            self.events.append((time.monotonic(), "assign", frozenset(tp.partition for tp in partitions)))

        def on_revoke(c: Any, partitions: Any) -> None:
            self.events.append((time.monotonic(), "revoke", frozenset(tp.partition for tp in partitions)))

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        while not self.stop_event.is_set():
            consumer.consume(num_messages=100, timeout=0.02)
            if work:
                time.sleep(work)  # the application's work on a batch: rebalance callbacks wait for the next poll
        consumer.close()

    def owned(self, before: float = float("inf")) -> frozenset[int]:
        """The partitions held after the events logged before `before` (all of them by default)."""
        held: frozenset[int] = frozenset()
        for t, kind, partitions in list(self.events):
            if t < before:
                held = held | partitions if kind == "assign" else held - partitions
        return held


def settle(members: list[Member], partitions: int, quiet_s: float, timeout: float = 90.0) -> None:
    """Every partition owned by exactly one member, every member owning one, and no event for `quiet_s`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owned = [m.owned() for m in members]
        last = max((e[0] for m in members for e in list(m.events)), default=0.0)
        whole = sorted(p for o in owned for p in o) == list(range(partitions)) and all(owned)
        if whole and time.monotonic() - last >= quiet_s:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the group did not settle: {[sorted(m.owned()) for m in members]}")


def unowned(members: list[Member], partitions: int, start: float) -> tuple[float, float, float]:
    """(unowned partition-seconds, wall seconds with some partition unowned, seconds to the last assignment)
    from `start` to the last event."""
    events = sorted((t, kind, ps) for m in members for t, kind, ps in m.events if t >= start)
    owners = [0] * partitions
    for m in members:  # who owned what at `start`
        for p in m.owned(before=start):
            owners[p] += 1
    total = wall = 0.0
    previous = start
    for t, kind, ps in events:
        missing = sum(1 for c in owners if c == 0)
        total += missing * (t - previous)
        wall += (t - previous) if missing else 0.0
        previous = t
        for p in ps:
            owners[p] += 1 if kind == "assign" else -1
    last_assign = max((t for t, kind, ps in events if kind == "assign" and ps), default=start)
    return total, wall, last_assign - start


# -- the scenario ----------------------------------------------------------------------------------------------


def scale_up(broker: Broker, args: argparse.Namespace, preregister: bool) -> dict[str, float]:
    tag = uuid.uuid4().hex[:6]
    topic, group = f"kip469-{tag}", f"kip469-{tag}"
    create_topic(broker.bootstrap, topic, args.partitions)
    old = [
        Member(broker.bootstrap, topic, group, f"old-{i}", args.heartbeat_ms, args.processing_ms)
        for i in range(args.old)
    ]
    for m in old:
        m.start()
    settle(old, args.partitions, quiet_s=2.0)
    before = generation(broker.port, group)
    new_ids = [f"new-{i}" for i in range(args.new)]
    if preregister:
        pre_register(broker.bootstrap, group, new_ids)
    new = [Member(broker.bootstrap, topic, group, i, args.heartbeat_ms, args.processing_ms) for i in new_ids]
    start = time.monotonic()
    for i, m in enumerate(new):
        m.start()
        if i < len(new) - 1:
            time.sleep(args.arrival_ms / 1000)
    everyone = old + new
    settle(everyone, args.partitions, quiet_s=3.0)
    partition_s, wall_s, scale_s = unowned(everyone, args.partitions, start)
    rebalances = generation(broker.port, group) - before
    for m in everyone:
        m.stop_event.set()
    for m in everyone:
        m.join(30)
    return {"rebalances": rebalances, "partition_s": partition_s, "wall_s": wall_s, "scale_s": scale_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=int, default=4, help="members of the stable group")
    parser.add_argument("--new", type=int, default=4, help="instances added, one by one")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--arrival-ms", type=int, default=2000, help="time between two new instances starting")
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument(
        "--processing-ms",
        type=int,
        default=0,
        help="work after each poll (consume(timeout=20 ms) then this long without polling)",
    )
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.partitions < args.old + args.new:
        parser.error("--partitions must be at least --old + --new (every member owns a partition)")
    print(
        f"{args.old} static members + {args.new} arriving every {args.arrival_ms} ms, {args.partitions} "
        f"partitions, heartbeat {args.heartbeat_ms} ms, processing {args.processing_ms} ms per poll, median of "
        f"{args.runs} runs"
    )
    print(f"{'':<26} {'rebalances':>10} {'unowned partition-s':>20} {'any unowned (s)':>16} {'scale-up (s)':>13}")
    with tempfile.TemporaryDirectory() as data:
        broker = Broker(data)
        try:
            for label, preregister in (("without pre-registration", False), ("with pre-registration", True)):
                runs = [scale_up(broker, args, preregister) for _ in range(args.runs)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                print(
                    f"{label:<26} {med['rebalances']:>10.0f} {med['partition_s']:>20.2f} {med['wall_s']:>16.2f} "
                    f"{med['scale_s']:>13.2f}   (runs: "
                    + ", ".join(f"{r['rebalances']}/{r['partition_s']:.2f}" for r in runs)
                    + ")",
                    flush=True,
                )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
