"""Simulated group members: herd's sans-IO `MembershipMachine` with the consumer protocol and a real assignor.

A `SimMember` is one process that may run several times: `start` creates a fresh machine (a dynamic member
starts without a member id, so it gets a new identity; a static one keeps its group.instance.id), `crash`
kills it without a LeaveGroup (its connection closes, its machine is forgotten), `close` shuts it down
cleanly (revokes, and LeaveGroup for a dynamic member), `pause` makes it unresponsive for a while (a GC pause or
a slow poll loop: answers and ticks wait), which is how a member misses a join phase or its session.

The member carries out its machine's actions as herd.client.group does: `Send` goes on its connection (with
herd.client.group's request timeouts: the rebalance timeout + 5 s for JoinGroup and SyncGroup, the session
timeout for a heartbeat, 30 s otherwise, after which the connection is dropped, as Java's client does),
`ComputeAssignment` runs the group protocol's assignor (herd.client.assignors through ConsumerGroupProtocol)
after a short delay, then `assignment_ready`; `tick` runs at `next_deadline`.
While STABLE a member commits offsets for the partitions it holds, with its generation and member id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from herd.client import membership as ms
from herd.client.assignors import Cluster
from herd.client.consumer import ConsumerGroupProtocol, partitions_of
from herd.client.group import request_timeout_ms
from herd.client.membership import MembershipConfig, MembershipMachine, MemberState
from herd.coordinator import requests as rq

from .loop import Event
from .network import Connection

if TYPE_CHECKING:
    from .sim import Simulation


@dataclass(frozen=True, slots=True)
class GroupSpec:
    group_id: str
    topics: Mapping[str, int]  # topic -> partitions
    assignor: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    heartbeat_interval_ms: int
    protocol: str = "classic"  # or "consumer" (KIP-848: consumer_members.py; the assignor is the server's)


def run_now(value: Mapping[str, bytes] | Awaitable[Mapping[str, bytes]]) -> Mapping[str, bytes]:
    """The result of ConsumerGroupProtocol.assign, a coroutine that never waits when its cluster is a plain
    Cluster: driven to its end in one step."""
    if not hasattr(value, "send"):
        return value  # type: ignore[return-value]
    coro: Any = value
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the assignor waited")


class SimMember:
    def __init__(self, sim: Simulation, name: str, spec: GroupSpec, instance_id: str | None) -> None:
        self.sim, self.name, self.spec, self.instance_id = sim, name, spec, instance_id
        self.machine: MembershipMachine | None = None
        self.conn: Connection | None = None
        self.status = "down"  # "up", "paused", "down"
        self.runs = 0
        self.inbox: list[tuple[str, object, object]] = []
        self._tick: Event | None = None

    @property
    def alive(self) -> bool:
        return self.status != "down"

    # -- life ------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.alive:
            return
        self.runs += 1
        s = self.spec
        protocol = ConsumerGroupProtocol(
            sorted(s.topics), (s.assignor,), cluster=lambda topics: Cluster(dict(s.topics))
        )
        config = MembershipConfig(
            s.group_id,
            s.session_timeout_ms,
            s.rebalance_timeout_ms,
            s.heartbeat_interval_ms,
            100,
            1000,
            self.instance_id,
        )
        self.machine = MembershipMachine(config, protocol, self.sim.loop.clock)
        self.status, self.conn, self.inbox = "up", None, []
        self.sim.trace(f"{self.name} starts (run {self.runs})")
        self._run(self.machine.start())
        self._schedule_commit()

    def crash(self) -> None:
        if not self.alive:
            return
        self.sim.trace(f"{self.name} crashes")
        self._stop()

    def _stop(self) -> None:
        self.status, self.machine, self.inbox = "down", None, []
        if self.conn is not None:
            self.conn.open = False  # the OS closes the socket; the machine is gone, nobody hears failures
        self.conn = None
        if self._tick is not None:
            self._tick.live = False

    def close(self) -> None:
        if self.status != "up" or self.machine is None:
            return
        self.sim.trace(f"{self.name} closes")
        self._run(self.machine.close())

    def pause(self, ms: int) -> None:
        if self.status != "up":
            return
        self.sim.trace(f"{self.name} pauses {ms} ms")
        self.status = "paused"
        machine = self.machine
        self.sim.loop.after(ms, lambda: self._resume(machine), "resume")

    def _resume(self, machine: MembershipMachine | None) -> None:
        if self.status != "paused" or machine is not self.machine:
            return
        self.status = "up"
        inbox, self.inbox = self.inbox, []
        for kind, request, response in inbox:
            if kind == "assign":
                self._assign(self.machine, request)  # type: ignore[arg-type]
            else:
                self._feed(kind, request, response)
        self._tick_now()

    # -- inputs ----------------------------------------------------------------------------------

    def on_answer(self, request: object, response: object) -> None:
        self._feed("answer", request, response)

    def on_failure(self, request: object, reason: str) -> None:
        self._feed("failure", request, reason)

    def _feed(self, kind: str, request: object, payload: object) -> None:
        if self.status == "paused":
            self.inbox.append((kind, request, payload))
            return
        if self.machine is None:
            return
        if isinstance(request, rq.OffsetCommit):
            return  # the checker saw the answer leave the server
        if kind == "answer":
            self._run(self.machine.receive(request, payload))  # type: ignore[arg-type]
        else:
            self._run(self.machine.request_failed(request, str(payload)))  # type: ignore[arg-type]

    def _tick_now(self) -> None:
        if self.status == "up" and self.machine is not None:
            self._run(self.machine.tick())

    # -- actions ---------------------------------------------------------------------------------

    def _run(self, actions: list[ms.Action]) -> None:
        machine = self.machine
        for action in actions:
            if isinstance(action, ms.Send):
                self._send(action.request)
            elif isinstance(action, ms.ComputeAssignment):
                delay = self.sim.rng.randint(0, 50)
                self.sim.loop.after(delay, lambda a=action: self._assign(machine, a), "assign")
            elif isinstance(action, ms.Failed):
                self.sim.trace(f"{self.name} failed: {action.error}")
                self._stop()
                self.sim.loop.after(1000, self.start, "supervisor-restart")
                return
            elif isinstance(action, ms.Closed):
                self.sim.trace(f"{self.name} closed")
                self._stop()
                return
        self._arm_tick()

    def _assign(self, machine: MembershipMachine | None, action: ms.ComputeAssignment) -> None:
        if machine is not self.machine or machine is None:
            return
        if self.status == "paused":
            self.inbox.append(("assign", action, None))
            return
        assignments = run_now(machine.protocol.assign(action.protocol_name, action.members))
        self._run(machine.assignment_ready(action.generation_id, assignments))

    def _send(self, request: object) -> None:
        if self.conn is None or not self.conn.open:
            self.conn = self.sim.network.connect(self)
        out = self.sim.network.send(self.conn, request)
        conn = self.conn
        self.sim.loop.after(self._request_timeout(request), lambda: self._timed_out(conn, out), "request-timeout")

    def _request_timeout(self, request: object) -> int:
        """herd.client.group's timeouts (KafkaClient's request timeout is 30 s): a heartbeat unanswered for a
        session timeout gives its connection up, which also frees a connection whose answers wait behind a
        SyncGroup the coordinator never answers (a member removed while its SyncGroup was parked: seed 375820957)."""
        assert self.machine is not None
        return request_timeout_ms(request, self.machine.config, 30_000)  # type: ignore[arg-type]

    def _timed_out(self, conn: Connection, out: object) -> None:
        if conn.open and out in conn.outstanding:
            self.sim.trace(f"{self.name}: request timed out, dropping its connection")
            self.sim.network.drop(conn, "request timed out")

    def _arm_tick(self) -> None:
        if self._tick is not None:
            self._tick.live = False
            self._tick = None
        machine = self.machine
        deadline = machine.next_deadline() if machine is not None else None
        if deadline is not None:
            self._tick = self.sim.loop.at(deadline, self._tick_now, "tick")

    # -- offset commits --------------------------------------------------------------------------

    def _schedule_commit(self) -> None:
        machine = self.machine
        self.sim.loop.after(self.sim.rng.randint(1000, 5000), lambda: self._commit(machine), "commit")

    def _commit(self, machine: MembershipMachine | None) -> None:
        if machine is not self.machine or machine is None:
            return
        self._schedule_commit()
        held = machine.held
        if self.status != "up" or machine.state is not MemberState.STABLE or held is None:
            return
        parts = sorted(partitions_of(held.data))
        if not parts:
            return
        by_topic: dict[str, list[rq.CommitPartition]] = {}
        for tp in parts:
            offset = self.sim.next_offset(self.spec.group_id, tp)
            by_topic.setdefault(tp.topic, []).append(rq.CommitPartition(tp.partition, offset))
        request = rq.OffsetCommit(
            group_id=self.spec.group_id,
            generation_id_or_member_epoch=machine.generation_id,
            member_id=machine.member_id,
            group_instance_id=self.instance_id,
            topics=tuple(rq.CommitTopic(t, tuple(p)) for t, p in by_topic.items()),
        )
        if self.conn is None or not self.conn.open:
            self.conn = self.sim.network.connect(self)
        self.sim.network.send(self.conn, request)
