"""Group coordinator benchmark against a real `herd serve`, driven by a lightweight raw-protocol client on kio.

    .venv/bin/python bench/bench_groups.py [--sizes 10,100,1000] [--delays 0,300] [--heartbeat-ms 100]
                                           [--hb-seconds 5] [--hb-rate 0]

A Kafka client library is far too heavy for 1,000 members in one process, so each member here is a small
asyncio task speaking JoinGroup v9 / SyncGroup v5 / Heartbeat v4 / LeaveGroup v5 over its own connection
(as real consumers do: responses on a connection come back in order, so members that share one would wait
behind each other's parked JoinGroup). Requests and responses are encoded and decoded with kio; a member's
JoinGroup is encoded once per member id and a follower's SyncGroup once with only its generation patched
(kio's encoder costs 27-44 us a request, which this one process would otherwise spend on the critical path
of every rebalance), so the client can keep up.

Measured:
1. formation: time from the first JoinGroup to every one of N members holding its assignment in the
   generation that contains all N (members learn of newer rebalances from heartbeats, every
   --heartbeat-ms), for each initial rebalance delay in --delays; and the part of it after that
   generation's join phase ended (first JoinGroup answer to last SyncGroup answer), which is the
   broker's own work once everyone is in (the rest is the delay, its KIP-134 extensions while members
   keep arriving, and how fast this one-process client brings N members in); with when the first and the
   last member entered the group, when the join phase ended, and the CPU of broker and client;
2. rebalance after a leave: one member of a stable group of N leaves; time until every remaining member
   holds its new assignment, and the same measured from the moment the last member learned of the
   rebalance (its heartbeat answered REBALANCE_IN_PROGRESS), with when the join phase ended and the CPU;
3. heartbeats: 1,000 members of a stable group heartbeating over 10 shared connections (`HeartbeatLoad`:
   frames encoded once, answers matched by order), as fast as the broker answers (closed loop, every
   member with one heartbeat in flight) or paced at --hb-rate per second in 1 ms ticks, latency counted
   from when each was due; throughput, latency percentiles and CPU per heartbeat, after a warm-up;
4. the broker's resident memory (VmRSS) and peak (VmHWM) with 1,000 members connected.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import io
import os
import statistics
import struct
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _broker import BenchBroker
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from herd.protocol.messages import request_class, response_class
from herd.server.apis._build import make

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
VERSIONS = {JOIN: 9, SYNC: 5, HEARTBEAT: 4, LEAVE: 5}
MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS = 79, 27


# -- wire ------------------------------------------------------------------------------------------------------


def encode(api_key: int, request: Any, correlation_id: int = 0, client_id: str = "bench") -> bytes:
    cls = request_class(api_key, VERSIONS[api_key])
    header_cls = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_cls)(
        buf,
        header_cls(
            request_api_key=i16(api_key),
            request_api_version=i16(VERSIONS[api_key]),
            correlation_id=i32(correlation_id),
            client_id=client_id,
        ),
    )
    entity_writer(cls)(buf, request)
    body = buf.getvalue()
    return struct.pack(">i", len(body)) + body


def build(api_key: int, class_name: str | None = None, /, **fields: Any) -> Any:
    """A kio request (or one of its nested classes) of the version the bench speaks."""
    cls = request_class(api_key, VERSIONS[api_key])
    if class_name is not None:
        cls = getattr(sys.modules[cls.__module__], class_name)
    return make(cls, fields)


class Wire(asyncio.Protocol):
    """One connection: pipelined requests, responses matched by correlation id. Requests sent in one loop
    iteration leave in one write, and responses are parsed straight from the received bytes."""

    def __init__(self) -> None:
        self._next = 0
        self._waiting: dict[int, tuple[asyncio.Future[Any], Callable[[bytes], Any]]] = {}
        self._out: list[bytes] = []
        self._in = bytearray()

    async def connect(self, port: int) -> Wire:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self.transport, _ = await loop.create_connection(lambda: self, "127.0.0.1", port)
        return self

    def send(self, frame: bytes, decode: Callable[[bytes], Any]) -> asyncio.Future[Any]:
        self._next += 1
        frame = bytearray(frame)
        struct.pack_into(">i", frame, 8, self._next)
        future = self._loop.create_future()
        self._waiting[self._next] = (future, decode)
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(frame)
        return future

    def _flush(self) -> None:
        self.transport.write(b"".join(self._out))
        self._out.clear()

    async def call(self, api_key: int, request: Any) -> Any:
        cls = response_class(api_key, VERSIONS[api_key])
        header_reader, body_reader = entity_reader(cls.__header_schema__), entity_reader(cls)

        def decode(frame: bytes) -> Any:
            _, offset = header_reader(frame, 0)
            return body_reader(frame, offset)[0]

        return await self.send(encode(api_key, request), decode)

    def data_received(self, data: bytes) -> None:
        buf = self._in
        buf += data
        position = 0
        while len(buf) - position >= 4:
            size = struct.unpack_from(">i", buf, position)[0]
            if len(buf) - position - 4 < size:
                break
            frame = bytes(buf[position + 4 : position + 4 + size])
            position += 4 + size
            future, decode = self._waiting.pop(struct.unpack_from(">i", frame)[0])
            if not future.done():
                future.set_result(decode(frame))
        del buf[:position]

    def close(self) -> None:
        self.transport.close()


@functools.cache
def _decoder(api_key: int) -> Callable[[bytes], Any]:
    """kio's reader of the answers to `api_key` in the version the bench speaks."""
    cls = response_class(api_key, VERSIONS[api_key])
    header_reader, body_reader = entity_reader(cls.__header_schema__), entity_reader(cls)
    return lambda frame: body_reader(frame, header_reader(frame, 0)[1])[0]


def heartbeat_error(frame: bytes) -> int:
    """Heartbeat v4 response: correlation id, empty tagged fields, throttle time, error code."""
    return struct.unpack_from(">h", frame, 9)[0]


class GroupProgress:
    """How many members of a group have synced each generation; `changed` is set whenever one more has."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.changed = asyncio.Event()

    def synced(self, generation: int) -> None:
        self.counts[generation] = self.counts.get(generation, 0) + 1
        self.changed.set()


# -- members ---------------------------------------------------------------------------------------------------


@dataclass
class Member:
    index: int
    wire: Wire
    group: str
    heartbeat_ms: int
    progress: GroupProgress  # shared by the members of a group
    member_id: str = ""
    generation: int = -1
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    learned_at: float = 0.0  # when a heartbeat last said REBALANCE_IN_PROGRESS
    synced_at: float = 0.0
    joined_at: float = 0.0  # when the JoinGroup of the generation it holds was answered
    group_size: int = 0  # members in the generation this member synced (known to the leader only)
    stopping: bool = False
    id_join_sent: float = 0.0  # when its first JoinGroup with a member id was sent (it entered the group)
    _sync_template: tuple[str, bytes, int] | None = None
    _join_template: tuple[str, bytes] | None = None

    async def run(self) -> None:
        while not self.stopping:
            if not await self._join_and_sync():
                continue
            await self._heartbeat_until_rebalance()

    async def _join_and_sync(self) -> bool:
        if self.member_id and not self.id_join_sent:
            self.id_join_sent = time.perf_counter()
        r = await self.wire.send(self._join_frame(), _decoder(JOIN))
        if r.error_code == MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            return False
        if r.error_code:
            self.member_id = "" if r.error_code == 25 else self.member_id
            return False
        joined_at = time.perf_counter()
        assignments = ()
        if r.leader == r.member_id:
            assignments = tuple(
                build(SYNC, "SyncGroupRequestAssignment", member_id=m.member_id, assignment=b"a") for m in r.members
            )
        if assignments:
            s = await self.wire.call(
                SYNC,
                build(
                    SYNC,
                    group_id=self.group,
                    generation_id=r.generation_id,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=assignments,
                ),
            )
        else:
            s = await self.wire.send(self._follower_sync(r.generation_id), _decoder(SYNC))
        if s.error_code:
            return False
        self.generation, self.synced_at, self.joined_at = r.generation_id, time.perf_counter(), joined_at
        self.group_size = len(r.members)
        self.synced.set()
        self.progress.synced(r.generation_id)
        return True

    def _join_frame(self) -> bytes:
        """This member's JoinGroup, encoded with kio once per member id (kio's encoder takes ~44 us a request;
        1,000 members rejoining in a rebalance would spend 44 ms of the client's CPU on it)."""
        if self._join_template is None or self._join_template[0] != self.member_id:
            join = build(
                JOIN,
                group_id=self.group,
                session_timeout=30_000,
                rebalance_timeout=30_000,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                reason=None,
                protocols=(build(JOIN, "JoinGroupRequestProtocol", name="range", metadata=b"m"),),
            )
            self._join_template = (self.member_id, encode(JOIN, join))
        return self._join_template[1]

    def _follower_sync(self, generation: int) -> bytearray:
        """A follower's SyncGroup, encoded with kio once per member id and then only its generation patched:
        kio's encoder takes ~27 us a request, which for 1,000 followers is on the critical path of every
        rebalance this one-process client measures."""
        if self._sync_template is None or self._sync_template[0] != self.member_id:
            frame = encode(
                SYNC,
                build(
                    SYNC,
                    group_id=self.group,
                    generation_id=0,
                    member_id=self.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=(),
                ),
            )
            member = self.member_id.encode()
            assert len(member) < 127  # its compact-string length is one varint byte
            # SyncGroup v5: ... group id, generation id (int32), member id (compact string), ...
            at = frame.index(struct.pack(">ib", 0, len(member) + 1) + member)
            self._sync_template = (self.member_id, frame, at)
        _, frame, at = self._sync_template
        patched = bytearray(frame)
        struct.pack_into(">i", patched, at, generation)
        return patched

    async def _heartbeat_until_rebalance(self) -> None:
        frame = encode(
            HEARTBEAT,
            build(
                HEARTBEAT,
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=None,
            ),
        )
        while not self.stopping:
            await asyncio.sleep(self.heartbeat_ms / 1000)
            if self.stopping:
                return
            error = await self.wire.send(frame, heartbeat_error)
            if error:
                self.learned_at = time.perf_counter()
                self.synced.clear()
                return

    async def leave(self) -> None:
        self.stopping = True
        await self.wire.call(
            LEAVE,
            build(
                LEAVE,
                group_id=self.group,
                members=(
                    build(LEAVE, "MemberIdentity", member_id=self.member_id, group_instance_id=None, reason="bench"),
                ),
            ),
        )


async def form_group(
    port: int, group: str, n: int, heartbeat_ms: int
) -> tuple[list[Member], list[asyncio.Task], float]:
    """Start n members; returns them, their tasks, and seconds until all held the n-member generation."""
    wires = await asyncio.gather(*(Wire().connect(port) for _ in range(n)))
    progress = GroupProgress()
    members = [Member(i, w, group, heartbeat_ms, progress) for i, w in enumerate(wires)]
    start = time.perf_counter()
    tasks = [asyncio.get_running_loop().create_task(m.run()) for m in members]
    for t in tasks:
        t.add_done_callback(_crash_on_error)
    await until_synced(members, n)
    return members, tasks, time.perf_counter() - start


def _crash_on_error(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        print(f"a member failed: {task.exception()!r}", file=sys.stderr)
        os._exit(1)


async def until_synced(members: list[Member], size: int) -> int:
    """Wait until every member holds an assignment of one generation whose leader saw `size` members. Woken
    by each sync, and looking at the members only once a generation has been synced as many times as there
    are members (gathering 1,000 waits every millisecond, or scanning them on every sync, took the client's
    CPU from the members it was measuring)."""
    progress = members[0].progress
    while True:
        for generation, count in list(progress.counts.items()):
            if (
                count >= len(members)
                and all(m.synced.is_set() and m.generation == generation for m in members)
                and max(m.group_size for m in members) == size
            ):
                return generation
        progress.changed.clear()
        await progress.changed.wait()


async def stop_members(members: list[Member], tasks: list[asyncio.Task]) -> None:
    for m in members:
        m.stopping = True
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for m in members:
        m.wire.close()


# -- scenarios -------------------------------------------------------------------------------------------------


async def formation(port: int, n: int, heartbeat_ms: int, tag: str, broker_pid: int) -> dict[str, float]:
    """Seconds from the first JoinGroup to: every member having entered the group (its JoinGroup with a
    member id sent), the end of the join phase of the generation that has all n (its first JoinGroup answer),
    and every member holding its assignment in it."""
    cpu_broker, cpu_client = _cpu_seconds(broker_pid), time.process_time()
    members, tasks, elapsed = await form_group(port, f"form-{tag}-{n}", n, heartbeat_ms)
    start = time.perf_counter() - elapsed  # form_group's start, after its connections were made
    times = {
        "total": elapsed,
        "cpu_broker": _cpu_seconds(broker_pid) - cpu_broker,
        "cpu_client": time.process_time() - cpu_client,
        "first_in": min(m.id_join_sent for m in members) - start,
        "all_in": max(m.id_join_sent for m in members) - start,
        "join_end": min(m.joined_at for m in members) - start,
        "after_join": max(m.synced_at for m in members) - min(m.joined_at for m in members),
    }
    await stop_members(members, tasks)
    return times


async def leave_rebalance(
    port: int, n: int, heartbeat_ms: int, broker_pid: int
) -> tuple[float, float, float, float, float]:
    """(LeaveGroup -> all hold the new generation, the last member learning of the rebalance -> that, the last
    member learning of it -> the end of the join phase, i.e. the first JoinGroup answer; CPU seconds of the broker
    and of this client from the LeaveGroup to the end)."""
    members, tasks, _ = await form_group(port, f"leave-{n}", n, heartbeat_ms)
    leaver, rest = members[-1], members[:-1]
    for m in rest:
        m.learned_at = 0.0
    start = time.perf_counter()
    cpu_broker, cpu_client = _cpu_seconds(broker_pid), time.process_time()
    await leaver.leave()
    tasks[-1].cancel()
    await until_synced(rest, n - 1)
    cpu_broker, cpu_client = _cpu_seconds(broker_pid) - cpu_broker, time.process_time() - cpu_client
    done = max(m.synced_at for m in rest)
    last_learned = max(m.learned_at for m in rest)
    join_end = min(m.joined_at for m in rest)
    await stop_members(members, tasks)
    return done - start, done - last_learned, join_end - last_learned, cpu_broker, cpu_client


class HeartbeatLoad(asyncio.Protocol):
    """One shared connection carrying the heartbeats of many members, as lean as the client can be so that it
    is not the bottleneck: every member's request is encoded once (its correlation id is its index, never
    patched), requests go out in one write per batch, and answers are matched to send times by order (Kafka
    answers a connection's requests in the order they came), reading only each frame's size and error code."""

    def __init__(self, frames: list[bytes], latencies: list[float], closed_loop: bool) -> None:
        self.frames = frames
        self.latencies = latencies
        self.closed_loop = closed_loop
        self.sent_at: deque[float] = deque()
        self.errors = 0
        self.stopped = False
        self.sent = 0
        self._next = 0
        self._in = bytearray()

    async def connect(self, port: int) -> HeartbeatLoad:
        self.transport, _ = await asyncio.get_running_loop().create_connection(lambda: self, "127.0.0.1", port)
        return self

    def send(self, count: int, at: float | None = None) -> None:
        """`count` heartbeats in one write, the next members in turn; latency counted from `at` (the time they
        were due) or from now."""
        frames, n, k = self.frames, len(self.frames), self._next
        batch = [frames[(k + i) % n] for i in range(count)]
        self._next = (k + count) % n
        self.sent_at.extend([time.perf_counter() if at is None else at] * count)
        self.sent += count
        self.transport.write(b"".join(batch))

    def data_received(self, data: bytes) -> None:
        buf = self._in
        buf += data
        position, answered, now = 0, 0, time.perf_counter()
        sent_at, latencies = self.sent_at, self.latencies
        while len(buf) - position >= 4:
            size = struct.unpack_from(">i", buf, position)[0]
            if len(buf) - position - 4 < size:
                break
            error = struct.unpack_from(">h", buf, position + 13)[0]  # size, correlation id, tags, throttle, error
            if error:
                self.errors += 1
                self.last_error = error
            latencies.append(now - sent_at.popleft())
            position += 4 + size
            answered += 1
        del buf[:position]
        if self.closed_loop and answered and not self.stopped:
            self.send(answered)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def heartbeats(
    port: int,
    n: int,
    connections: int,
    seconds: float,
    rate: int,
    broker_pid: int,
    memory: Callable[[], tuple[float, float]],
    connect: Callable[[HeartbeatLoad], Any] | None = None,
    group: str = "heartbeats",
) -> dict[str, float]:
    """Heartbeats of n members of one stable group over `connections` shared connections: closed loop (every
    member always has one heartbeat in flight) when rate is 0, else paced at `rate` per second in all, sent
    in 1 ms ticks and timed from when each was due (so a slow answer also delays the count, no coordinated
    omission). Measured after a one-second warm-up. The group forms over `port`; `connect(load)`, when given, opens
    the heartbeat connections instead (bench_security: TLS and SASL on another listener)."""
    members, tasks, _ = await form_group(port, group, n, heartbeat_ms=100)
    for m in members:  # from now on the load below heartbeats for them (the members' own every 20 s)
        m.heartbeat_ms = 20_000
    await asyncio.sleep(0.2)
    frames = [
        encode(
            HEARTBEAT,
            build(
                HEARTBEAT, group_id=m.group, generation_id=m.generation, member_id=m.member_id, group_instance_id=None
            ),
            correlation_id=m.index,
        )
        for m in members
    ]
    result = await drive(port, frames, connections, seconds, rate, broker_pid, connect)
    result["rss_mib"], result["hwm_mib"] = memory()  # with the members still connected
    await stop_members(members, tasks)
    return result


async def drive(
    port: int,
    frames: list[bytes],
    connections: int,
    seconds: float,
    rate: int,
    broker_pid: int,
    connect: Callable[[HeartbeatLoad], Any] | None = None,
) -> dict[str, float]:
    """Send the members' heartbeat `frames` (one encoded request each, its correlation id the member's index) over
    `connections` shared connections, closed loop when rate is 0, else paced at `rate` per second (see
    `heartbeats`), a one-second warm-up first; throughput, latency percentiles and CPU per heartbeat. Any API's
    frames will do whose answers carry their error code where Heartbeat v4's does (a flexible response header,
    the throttle time, then the error code): bench_consumer_groups.py drives ConsumerGroupHeartbeat with it."""
    latencies: list[float] = []
    loads = [HeartbeatLoad(frames[c::connections], latencies, closed_loop=not rate) for c in range(connections)]
    for load in loads:
        await (connect(load) if connect is not None else load.connect(port))

    async def run(duration: float) -> float:
        start = time.perf_counter()
        if not rate:
            for load in loads:
                load.stopped = False
                load.send(len(load.frames))
            await asyncio.sleep(duration)
            for load in loads:
                load.stopped = True
        else:
            per_connection = rate / connections
            due = [0] * connections
            while (now := time.perf_counter()) < start + duration:
                for c, load in enumerate(loads):
                    target = int((now - start) * per_connection)
                    if target > due[c]:
                        load.send(target - due[c], at=start + target / per_connection)
                        due[c] = target
                await asyncio.sleep(0.001)
        while any(load.sent_at for load in loads):  # let the last answers arrive
            await asyncio.sleep(0.001)
        return time.perf_counter() - start

    await run(1.0)  # warm-up
    latencies.clear()
    errors_before = sum(load.errors for load in loads)
    cpu_broker, cpu_client = _cpu_seconds(broker_pid), time.process_time()
    elapsed = await run(seconds)
    cpu_broker, cpu_client = _cpu_seconds(broker_pid) - cpu_broker, time.process_time() - cpu_client
    for load in loads:
        load.transport.close()
    latencies.sort()
    count = len(latencies)
    return {
        "count": count,
        "per_s": count / elapsed,
        "errors": sum(load.errors for load in loads) - errors_before,
        "broker_us": 1e6 * cpu_broker / count,
        "client_us": 1e6 * cpu_client / count,
        "broker_cpu": cpu_broker / elapsed,
        "p50_ms": 1000 * latencies[count // 2],
        "p99_ms": 1000 * latencies[int(count * 0.99)],
        "p999_ms": 1000 * latencies[int(count * 0.999)],
        "mean_ms": 1000 * statistics.fmean(latencies),
    }


# -- broker ----------------------------------------------------------------------------------------------------


class Broker(BenchBroker):
    """`herd serve` in a child process on a free port."""

    def __init__(self, data_dir: str, delay_ms: int) -> None:
        super().__init__(data_dir, **{"group.max.size": "100000", "group.initial.rebalance.delay.ms": str(delay_ms)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--delays", default="0,300")
    parser.add_argument("--heartbeat-ms", type=int, default=100)
    parser.add_argument("--hb-members", type=int, default=1000)
    parser.add_argument("--hb-connections", type=int, default=10)
    parser.add_argument("--hb-seconds", type=float, default=5.0)
    parser.add_argument("--hb-rate", type=int, default=0, help="paced heartbeats/s (0: as fast as answered)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run

    print(f"{'scenario':<52} {'result':>30}")
    for delay in (int(d) for d in args.delays.split(",")):
        with tempfile.TemporaryDirectory() as data:
            broker = Broker(data, delay)
            try:
                for n in sizes:
                    t = {
                        k: 1000 * v
                        for k, v in runner(
                            formation(broker.port, n, args.heartbeat_ms, f"d{delay}", broker.proc.pid)
                        ).items()
                    }
                    print(
                        f"{f'formation, {n} members, initial delay {delay} ms':<52} {t['total']:>10.0f} ms "
                        f"({t['after_join']:.0f} ms after the join phase; first in the group at "
                        f"{t['first_in']:.0f}, all in at {t['all_in']:.0f}, join phase ended at "
                        f"{t['join_end']:.0f}; CPU "
                        f"broker {t['cpu_broker']:.0f}, client {t['cpu_client']:.0f})",
                        flush=True,
                    )
            finally:
                broker.stop()
    with tempfile.TemporaryDirectory() as data:
        broker = Broker(data, 0)
        try:
            for n in sizes:
                total, after_learning, join_end, cpu_broker, cpu_client = runner(
                    leave_rebalance(broker.port, n, args.heartbeat_ms, broker.proc.pid)
                )
                print(
                    f"{f'rebalance after a leave, {n} members (hb {args.heartbeat_ms} ms)':<52} "
                    f"{total * 1000:>10.0f} ms ({after_learning * 1000:.0f} ms after the last learned, whose "
                    f"join phase ended {join_end * 1000:.0f} ms after it; CPU broker {cpu_broker * 1000:.0f}, "
                    f"client {cpu_client * 1000:.0f})",
                    flush=True,
                )
            hb = runner(
                heartbeats(
                    broker.port,
                    args.hb_members,
                    args.hb_connections,
                    args.hb_seconds,
                    args.hb_rate,
                    broker.proc.pid,
                    broker.memory_mib,
                )
            )
            mode = f"paced {args.hb_rate}/s" if args.hb_rate else "closed loop"
            errors = f" ({hb['errors']} errors)" if hb["errors"] else ""
            print(
                f"{f'heartbeats, {args.hb_members} members / {args.hb_connections} conns, {mode}':<52} "
                f"{hb['per_s']:>12,.0f}/s p50 {hb['p50_ms']:.2f} p99 {hb['p99_ms']:.2f} p99.9 {hb['p999_ms']:.2f} ms; "
                f"broker {hb['broker_us']:.1f} us/hb ({100 * hb['broker_cpu']:.0f} % of a core), "
                f"client {hb['client_us']:.1f} us/hb{errors}"
            )
            print(
                f"{f'broker memory, {args.hb_members} members connected (RSS / peak)':<52} "
                f"{hb['rss_mib']:>17.0f} / {hb['hwm_mib']:.0f} MiB"
            )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
