"""Simulated members of a consumer group on the consumer protocol (KIP-848): herd's sans-IO `ConsumerMembership`
(herd.client.consumer_membership), driven as herd.client.consumer_group_member drives it.

A `SimConsumerMember` has `SimMember`'s life (members.py): `start` creates a fresh machine with a new member id
(`<name>-<run>`: the client makes its id, KIP-1082; a static member keeps its group.instance.id), `crash` kills it
without a leave heartbeat, `close` revokes and leaves (epoch -1, or -2 for a static member), `pause` makes it
unresponsive for a while. The machine's actions are carried out in order, as herd's client does: `Send` goes on the
member's connection (a request unanswered for 30 s, KafkaClient's request timeout, drops the connection), `Revoked`
commits the revoked partitions first (on the same connection, so the commit reaches the coordinator before the
heartbeat that says they are gone), `Assigned` and `Lost` change what the member owns (the machine's `owned`,
which the checker reads), `Failed` stops the process and a supervisor starts it again 1 s later. While STABLE a
member commits what it owns every 1-5 s, with its member epoch.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from herd.client import consumer_membership as cm
from herd.client.consumer_membership import ConsumerMembership, State
from herd.client.consumer_protocol import TopicPartition
from herd.coordinator import requests as rq

from .loop import Event
from .members import GroupSpec
from .network import Connection

if TYPE_CHECKING:
    from .sim import Simulation

REQUEST_TIMEOUT_MS = 30_000  # herd.client's request.timeout.ms


class SimConsumerMember:
    protocol = "consumer"

    def __init__(self, sim: Simulation, name: str, spec: GroupSpec, instance_id: str | None) -> None:
        self.sim, self.name, self.spec, self.instance_id = sim, name, spec, instance_id
        self.machine: ConsumerMembership | None = None
        self.conn: Connection | None = None
        self.status = "down"  # "up", "paused", "down"
        self.runs = 0
        self.inbox: list[tuple[str, object, object]] = []
        self._tick: Event | None = None

    @property
    def alive(self) -> bool:
        return self.status != "down"

    def owned(self) -> set[TopicPartition]:
        """What the member owns now, by topic name (empty when it is down)."""
        machine = self.machine
        if machine is None:
            return set()
        names = self.sim.topic_names
        return {TopicPartition(names[t], p) for t, parts in machine.owned.items() for p in parts}

    # -- life ------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.alive:
            return
        self.runs += 1
        self.machine = ConsumerMembership(
            self.spec.group_id,
            tuple(sorted(self.spec.topics)),
            self.sim.loop.clock,
            member_id=f"{self.name}-{self.runs}",
            instance_id=self.instance_id,
            rebalance_timeout_ms=self.spec.rebalance_timeout_ms,
            server_assignor=self.spec.assignor,
        )
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
            self.conn.open = False
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

    def _resume(self, machine: ConsumerMembership | None) -> None:
        if self.status != "paused" or machine is not self.machine:
            return
        self.status = "up"
        inbox, self.inbox = self.inbox, []
        for kind, request, response in inbox:
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
        if self.machine is None or isinstance(request, rq.OffsetCommit):
            return  # the checker saw a commit's answer leave the server
        assert isinstance(request, cm.ConsumerGroupHeartbeatRequest)
        if kind == "answer":
            assert isinstance(payload, cm.ConsumerGroupHeartbeatResponse)
            self._run(self.machine.receive(request, payload))
        else:
            self._run(self.machine.request_failed(request, str(payload)))

    def _tick_now(self) -> None:
        if self.status == "up" and self.machine is not None:
            self._run(self.machine.tick())

    # -- actions ---------------------------------------------------------------------------------

    def _run(self, actions: list[cm.Action]) -> None:
        for action in actions:
            if isinstance(action, cm.Send):
                self._send(action.request, REQUEST_TIMEOUT_MS)
            elif isinstance(action, cm.Revoked):
                self._commit_partitions(action.partitions)
            elif isinstance(action, cm.Assigned):
                self.sim.checker.owned_changed()
            elif isinstance(action, cm.Failed):
                self.sim.trace(f"{self.name} failed: {action.error}")
                self._stop()
                self.sim.loop.after(1000, self.start, "supervisor-restart")
                return
            elif isinstance(action, cm.Closed):
                self.sim.trace(f"{self.name} closed")
                self._stop()
                return
        self._arm_tick()

    def _send(self, request: object, timeout_ms: int) -> None:
        if self.conn is None or not self.conn.open:
            self.conn = self.sim.network.connect(self)
        out = self.sim.network.send(self.conn, request)
        conn = self.conn
        self.sim.loop.after(timeout_ms, lambda: self._timed_out(conn, out), "request-timeout")

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

    def _commit(self, machine: ConsumerMembership | None) -> None:
        if machine is not self.machine or machine is None:
            return
        self._schedule_commit()
        if self.status == "up" and machine.state is State.STABLE:
            self._commit_partitions(machine.owned)

    def _commit_partitions(self, partitions: cm.Partitions) -> None:
        machine = self.machine
        if machine is None or machine.epoch <= 0 or not partitions:
            return
        names = self.sim.topic_names
        by_topic: dict[str, list[rq.CommitPartition]] = {}
        for topic_id, parts in sorted(partitions.items(), key=lambda kv: names[kv[0]]):
            for partition in sorted(parts):
                offset = self.sim.next_offset(self.spec.group_id, TopicPartition(names[topic_id], partition))
                by_topic.setdefault(names[topic_id], []).append(rq.CommitPartition(partition, offset))
        request = rq.OffsetCommit(
            group_id=self.spec.group_id,
            generation_id_or_member_epoch=machine.epoch,
            member_id=machine.member_id,
            group_instance_id=self.instance_id,
            topics=tuple(rq.CommitTopic(t, tuple(p)) for t, p in by_topic.items()),
        )
        if self.conn is None or not self.conn.open:
            self.conn = self.sim.network.connect(self)
        self.sim.network.send(self.conn, request)


def topic_id(name: str) -> uuid.UUID:
    """A topic's id in the simulation: a pure function of its name."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"herd-sim:{name}")
