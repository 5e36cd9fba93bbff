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

from herd.client import consumer_membership as cm
from herd.client.consumer_membership import ConsumerMembership, State
from herd.client.consumer_protocol import TopicPartition
from herd.coordinator import requests as rq

from .members import SimMember

REQUEST_TIMEOUT_MS = 30_000  # herd.client's request.timeout.ms


class SimConsumerMember(SimMember):
    """SimMember's life, connection, pauses, ticks and commit schedule, with a consumer-protocol machine."""

    machine: ConsumerMembership | None  # type: ignore[assignment]

    def owned(self) -> set[TopicPartition]:
        """What the member owns now, by topic name (empty when it is down)."""
        machine = self.machine
        if machine is None:
            return set()
        names = self.sim.topic_names
        return {TopicPartition(names[t], p) for t, parts in machine.owned.items() for p in parts}

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
        self._run(self.machine.start())  # type: ignore[arg-type]
        self._schedule_commit()

    def _run(self, actions: list[cm.Action]) -> None:  # type: ignore[override]
        for action in actions:
            if isinstance(action, cm.Send):
                self._send(action.request)
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

    def _request_timeout(self, request: object) -> int:
        return REQUEST_TIMEOUT_MS

    def _commit(self, machine: ConsumerMembership | None) -> None:  # type: ignore[override]
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
