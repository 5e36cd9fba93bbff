"""One seeded schedule: build it from the seed, run it, check the invariants at every step.

`Simulation(seed)` draws everything from `random.Random(seed)` and nothing else: the groups (1-2 in the
shard, topics of 1-6 partitions, one of herd's assignors, eager or cooperative), the members (2-6 per group,
each static or dynamic), the timeouts, the network's delays and the faults of the fault phase. Uuids come
from counters, every collection iterated is a list or an insertion-ordered dict, and time is the one
ManualClock of the event loop, so `run()` is a pure function of the seed: the same seed gives the same
trace (and `trace_hash`).

Faults, at random times during the fault phase: a member crashes (no LeaveGroup; it restarts later, a static
one with its group.instance.id, a dynamic one with a new identity, or stays dead), closes cleanly, pauses
(slow: misses heartbeats or the join phase), loses its connection (requests and answers in flight lost), a
new member joins; the coordinator moves (graceful unload and reload), its node crashes (kill -9: staged
writes lost, the write in flight lands or not), the next batch is refused before it is written, the next
write fails (the shard fails and reloads); an admin deletes an empty group or removes a static member
(LeaveGroup by group.instance.id). Then the faults stop and the schedule must converge (`liveness_bound_ms`).

A group speaks the classic protocol or the consumer protocol (KIP-848: consumer_members.py, with the server
assignor uniform or range), drawn from a generator of its own (`protocols`, seeded by the seed) so that a schedule
of classic groups draws from `rng` exactly what it drew before; `protocol=` pins every group to one.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import replace

from herd.client.consumer import partitions_of
from herd.client.consumer_membership import ConsumerMembership
from herd.client.consumer_membership import State as ConsumerState
from herd.client.consumer_protocol import TopicPartition
from herd.client.membership import MemberState
from herd.coordinator import CoordinatorConfig, GroupState
from herd.coordinator import requests as rq
from herd.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.group import ClassicGroup
from herd.coordinator.history import Rebalance

from .consumer_members import SimConsumerMember, topic_id
from .invariants import Checker, Violation, check_converged
from .loop import EventLoop
from .members import GroupSpec, SimMember
from .network import Network, Server
from .runtime import Host

ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")
SERVER_ASSIGNORS = ("uniform", "range")  # a consumer group's (KIP-848)
FAULTS = (
    "crash",
    "crash",
    "close",
    "pause",
    "pause",
    "drop",
    "drop",
    "join",
    "move",
    "node-crash",
    "refuse",
    "fail-write",
    "admin-delete",
    "admin-remove",
)
# a member of a loaded generation that rejoins may start the first rebalance after a coordinator move
# the timers that fence a consumer-protocol member (consumer_heartbeat.session_key, rebalance_key), and their causes
CONSUMER_TIMEOUTS_CAUSES = {
    "consumer-session-timeout": "session-timeout",
    "consumer-rebalance-timeout": "rebalance-timeout",
}
CONSUMER_TIMEOUTS = tuple(f"{key}:" for key in CONSUMER_TIMEOUTS_CAUSES)
JOIN_CAUSES = {
    "new": {"member-join"},
    "leader": {"leader-rejoin", "coordinator-moved"},
    "metadata": {"protocol-change", "coordinator-moved"},
    "static": {"static-member-replaced"},
}


class Simulation:
    def __init__(self, seed: int, *, size: str = "ci", tracing: bool = False, protocol: str | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        # Which groups speak the consumer protocol, and its timeouts, come from a generator of their own: a schedule
        # of classic groups draws from `rng` exactly what it drew before consumer groups were simulated, so the
        # regression seeds (protocol="classic") replay as they did.
        self.protocols = random.Random(f"protocols-{seed}")
        self.protocol = protocol
        self.tracing = tracing
        self.lines: list[str] = []
        self.hash = 0
        self.steps = 0
        self.loop = EventLoop()
        rng = self.rng
        ci = size == "ci"
        self.max_members = rng.choice((2, 3, 3, 4, 4, 6)) if ci else rng.randint(2, 10)
        self.fault_ms = rng.randint(500, 6_000) if ci else rng.randint(1_000, 120_000)
        consumer_session = self.protocols.choice((10_000, 45_000))
        consumer_interval = self.protocols.choice((2_000, 5_000))
        self.config = CoordinatorConfig(
            group_initial_rebalance_delay_ms=rng.choice((0, 0, 300, 3000)),
            new_member_join_timeout_ms=6000,
            group_consumer_session_timeout_ms=consumer_session,
            group_consumer_min_session_timeout_ms=consumer_session,
            group_consumer_heartbeat_interval_ms=consumer_interval,
            group_consumer_min_heartbeat_interval_ms=consumer_interval,
        )
        self.specs = [self._group_spec(i) for i in range(rng.choice((1, 1, 1, 2)) if ci else rng.choice((1, 2, 3)))]
        self.group_ids = [s.group_id for s in self.specs]
        self.topic_names = {topic_id(t): t for spec in self.specs for t in spec.topics}
        topics = TopicsImage.of((t, topic_id(t), n) for spec in self.specs for t, n in spec.topics.items())
        self.checker = Checker(self, self.config)
        self.network = Network(self.loop, rng, rng.choice((1, 10, 100, 400)))
        self.host = Host(self.loop, rng, self.config, self._reply, self.checker, self.trace, topics)
        self.server = Server(self.network, self.host, self._answered)
        self.members: list[SimMember | SimConsumerMember] = []
        self.offsets: dict[tuple[str, TopicPartition], int] = {}
        self.fault_times: dict[str, int] = {}  # member name ("*" for the coordinator) -> last fault
        self.owners: dict[str, SimMember | SimConsumerMember] = {}
        self.quiet_at = 0
        self._populate()
        self._schedule_faults(rng.randint(0, 6) if ci else rng.randint(0, 40))
        self.bound_ms = self.liveness_bound_ms()

    # -- building -----------------------------------------------------------------------------------

    def _group_spec(self, index: int) -> GroupSpec:
        rng = self.rng
        topics = {f"t{index}{c}": rng.randint(1, 6) for c in "ab"[: rng.choice((1, 1, 2))]}
        session = rng.choice((6000, 10000))
        spec = GroupSpec(
            f"g{index}", topics, rng.choice(ASSIGNORS), session, rng.choice((8000, 12000, 20000)), session // 3
        )
        protocol = self.protocol or self.protocols.choice(("classic", "consumer"))
        if protocol == "classic":
            return spec
        config = self.config  # the coordinator's session and interval: a consumer-protocol member has none of its own
        return replace(
            spec,
            protocol=protocol,
            assignor=self.protocols.choice(SERVER_ASSIGNORS),
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        )

    def _populate(self) -> None:
        for spec in self.specs:
            for _i in range(self.rng.randint(min(2, self.max_members), self.max_members)):
                self._add_member(spec, self.rng.randint(0, 1500))

    def _add_member(self, spec: GroupSpec, at: int) -> SimMember | SimConsumerMember:
        name = f"{spec.group_id}-m{len(self.members)}"
        static = self.rng.random() < 0.5
        kind = SimConsumerMember if spec.protocol == "consumer" else SimMember
        member = kind(self, name, spec, f"{name}-iid" if static else None)
        self.members.append(member)
        self.loop.at(at, member.start, "start")
        return member

    def _schedule_faults(self, count: int) -> None:
        for _ in range(count):
            at = self.rng.randint(0, self.fault_ms)
            kind = self.rng.choice(FAULTS)
            self.loop.at(at, self._fault_action(kind), kind)
        self.quiet_at = max(self.quiet_at, self.fault_ms)

    def _fault_action(self, kind: str) -> Callable[[], None]:
        return lambda: self._fault(kind)

    # -- faults -------------------------------------------------------------------------------------

    def _fault(self, kind: str) -> None:
        rng, now = self.rng, self.loop.now()
        member = rng.choice(self.members)
        self.trace(f"fault {kind} ({member.name})")
        if kind in ("crash", "close"):
            self._mark(member.name)
            member.crash() if kind == "crash" else member.close()
            if rng.random() < 0.75:
                self._later(rng.randint(0, 15_000), member.start, "restart")
        elif kind == "pause":
            ms = rng.randint(500, 25_000)
            member.pause(ms)
            self._mark(member.name, now + ms)
            self.quiet_at = max(self.quiet_at, now + ms)
        elif kind == "drop":
            if member.conn is not None:
                self._mark(member.name)
                self.network.drop(member.conn, "connection dropped")
        elif kind == "join":
            self._add_member(rng.choice(self.specs), now)
        else:
            self._coordinator_fault(kind)

    def _coordinator_fault(self, kind: str) -> None:
        rng = self.rng
        self._mark("*", self.loop.now() + 1000)
        if kind == "move":
            self.host.move(rng.randint(1, 300))
        elif kind == "node-crash":
            self.host.crash(rng.randint(1, 300))
            for member in self.members:
                if member.conn is not None:
                    self.network.drop(member.conn, "the coordinator's node died")
        elif kind == "refuse":
            self.host.faults.refuse_next += 1
        elif kind == "fail-write":
            self.host.faults.fail_next += 1
        elif kind == "admin-delete":
            self._admin(rq.DeleteGroups(groups_names=(rng.choice(self.group_ids),)))
        elif kind == "admin-remove":
            static = [m for m in self.members if m.instance_id is not None]
            if static:
                victim = rng.choice(static)
                self._mark(victim.name)
                who = rq.MemberIdentity(group_instance_id=victim.instance_id, reason="admin removal")
                self._admin(rq.LeaveGroup(group_id=victim.spec.group_id, members=(who,)))

    def _admin(self, request: object) -> None:
        admin = _Admin()
        self.network.send(self.network.connect(admin), request)

    def _later(self, delay: int, fn: Callable[[], None], label: str) -> None:
        self.loop.after(delay, fn, label)
        self.quiet_at = max(self.quiet_at, self.loop.now() + delay)

    def _mark(self, name: str, until: int | None = None) -> None:
        self.fault_times[name] = max(self.fault_times.get(name, 0), until or self.loop.now())

    # -- what the checker asks ----------------------------------------------------------------------

    def next_offset(self, group_id: str, tp: TopicPartition) -> int:
        value = self.offsets.get((group_id, tp), 0) + 1
        self.offsets[(group_id, tp)] = value
        return value

    def explained_causes(
        self, kind: str, detail: object, facts: dict[str, bool] | None, entry: Rebalance, previous: Rebalance | None
    ) -> frozenset[str]:
        """The rebalance causes the event that ran can explain (`check_cause`)."""
        if kind == "join_group" and facts is not None:
            return frozenset(c for fact, causes in JOIN_CAUSES.items() if facts[fact] for c in causes)
        if kind == "leave_group":
            return frozenset({"member-leave", "admin-removal"})
        if kind == "append-failed":
            return frozenset({"append-failure"})
        if kind == "consumer_group_heartbeat":
            leaving = detail.member_epoch < 0  # type: ignore[attr-defined]
            return frozenset({"member-leave"} if leaving else {"member-join"})
        if kind == "timer" and isinstance(detail, str) and detail.startswith(CONSUMER_TIMEOUTS):
            timeout, _group, member_id = detail.split(":", 2)
            if self.faulty(member_id):
                return frozenset({CONSUMER_TIMEOUTS_CAUSES[timeout]})
        if kind == "timer" and isinstance(detail, str) and detail.startswith("heartbeat-"):
            member_id = detail.split("-", 2)[2]
            if self.faulty(member_id):
                return frozenset({"session-timeout", "new-member-join-timeout"})
        if kind == "timer" and isinstance(detail, str) and detail.startswith("sync-"):
            laggards = [d.member_id for d in previous.dropped if d.phase == "sync"] if previous is not None else []
            if laggards and all(self.faulty(m) for m in laggards):
                return frozenset({"sync-timeout"})
        return frozenset()

    def faulty(self, member_id: str) -> bool:
        """Whether `member_id` may legitimately have gone silent: its process crashed, paused, restarted or
        moved on to another identity, or a fault hit it or the coordinator within a session timeout."""
        owner = self.owners.get(member_id)
        if owner is None or owner.machine is None or owner.status != "up":
            return True
        if owner.machine.member_id != member_id:
            return True
        window = owner.spec.session_timeout_ms + 2 * self.network.max_delay_ms + 1000
        now = self.loop.now()
        return max(self.fault_times.get(owner.name, -(10**9)), self.fault_times.get("*", -(10**9))) >= now - window

    # -- running ------------------------------------------------------------------------------------

    def _reply(self, handle: object, response: object) -> None:
        self.server.reply(handle, response)

    def _answered(self, out: object, answer: object) -> None:
        owner = out.conn.owner  # type: ignore[attr-defined]
        member_id = getattr(answer, "member_id", "")
        if member_id and isinstance(owner, SimMember):
            self.owners[member_id] = owner
        self.checker.answered(out.request, answer)  # type: ignore[attr-defined]

    def trace(self, line: str) -> None:
        if self.tracing:
            self.lines.append(f"{self.loop.now():>8} {line}")

    def liveness_bound_ms(self) -> int:
        """How long after the faults stop every group must be converged. A member that died silently is
        removed within its session timeout S; the rebalance that follows needs at most the initial delay
        D plus a join phase R (the rebalance timeout) plus a sync phase (R); a cooperative protocol needs a
        second round (R + R), and when the owner of the withheld partitions was replaced statically before
        it could revoke, the leader waits one more R before it starts that second round itself
        (herd.client.membership: the cooperative handover); members back off at most 1 s per retry, and each
        message may take the network's largest delay. Bound = S + D + 5 R + 10 s of slack for backoffs and
        delays. The faults stop when the last one strikes: a refusal or write failure armed before the quiet time
        strikes at the next write, which may be a session expiry's fence long after (seed 912203746: two armed
        write failures failed two fences 45 s apart, each reload arming the sessions again)."""
        s = max(spec.session_timeout_ms for spec in self.specs)
        r = max(spec.rebalance_timeout_ms for spec in self.specs)
        return s + self.config.group_initial_rebalance_delay_ms + 5 * r + 10_000
        # A consumer group (KIP-848) needs less: a silent member is fenced within the coordinator's session S; a
        # member that does not revoke within its rebalance timeout R is fenced; the others revoke and take their
        # partitions within a heartbeat interval of each answer. The classic bound covers it.

    def run(self) -> Simulation:
        """Run to convergence; raises Violation (with the seed) if an invariant breaks."""
        try:
            self._run()
        except Violation as violation:
            raise Violation(f"seed {self.seed}: {violation}") from None
        return self

    def _run(self) -> None:
        loop, checker = self.loop, self.checker
        while True:
            event = loop.run_next()
            if event is None:
                raise Violation("nothing left to run")
            self.steps += 1
            self.hash = zlib.crc32(event.label.encode(), zlib.crc32(event.time.to_bytes(8), self.hash))
            if self.tracing and event.label not in ("tick", "timer"):
                self.trace(event.label)
            checker.step()
            if loop.now() >= self.quiet_at:
                problem = self.convergence()
                if problem is None:
                    return
                # from the last fault: a storage fault armed before the quiet time strikes at the next write
                stopped = max(self.quiet_at, self.host.faults.struck_at)
                if loop.now() > stopped + self.bound_ms:
                    raise Violation(
                        f"liveness: {self.bound_ms} ms after the faults stopped (at {stopped} ms), {problem}; "
                        f"{self.describe()}"
                    )

    def describe(self) -> str:
        """The coordinator's groups and the members' machines, for a failure message."""
        shard = self.host.current.shard
        groups = [
            (
                g,
                shard.group(g)
                and (
                    shard.group(g).state.value,
                    shard.group(g).generation_id,  # type: ignore
                    list(shard.group(g).members),
                ),
            )
            for g in self.group_ids
        ]  # type: ignore
        for spec in self.specs:
            group = shard.consumer_group(spec.group_id)
            if group is not None:
                groups.append(
                    (
                        spec.group_id,
                        (
                            group.state.value,
                            group.group_epoch,
                            group.assignment_epoch,
                            [(m.member_id, m.member_epoch, m.state.name) for m in group.members.values()],
                        ),
                    )
                )
        members = [(m.name, m.status, m.machine and _machine_state(m.machine)) for m in self.members]
        return f"groups {groups}, members {members}"

    def convergence(self) -> str | None:
        incarnation = self.host.current
        if incarnation.state.value != "active" or incarnation.pending:
            return "the coordinator is not active and idle"
        for spec in self.specs:
            problem = check_converged(spec.group_id, self._facts(spec, incarnation.shard.group(spec.group_id)))
            if problem is not None:
                return problem
        return None

    def _facts(self, spec: GroupSpec, group: ClassicGroup | None) -> dict[str, object]:
        """The convergence facts of one group, cheapest first; stops at the first that fails."""
        if spec.protocol == "consumer":
            return self._consumer_facts(spec, self.host.current.shard.consumer_group(spec.group_id))
        live = [m for m in self.members if m.spec is spec and m.alive and m.machine is not None]
        if group is None or not live:
            empty = group is None or group.state in (GroupState.EMPTY, GroupState.DEAD)
            return {"no live member, the group is Empty": empty and not live}
        if group.state is not GroupState.STABLE:
            return {"group Stable": False}
        machines = [m.machine for m in live if m.machine is not None]
        if set(group.members) != {m.member_id for m in machines}:
            return {"members are the live members": False}
        if not all(m.state is MemberState.STABLE and m.generation_id == group.generation_id for m in machines):
            return {"every live member STABLE in the group's generation": False}
        held = [partitions_of(m.held.data) for m in machines if m.held is not None]
        every = {TopicPartition(t, p) for t, n in spec.topics.items() for p in range(n)}
        union = set().union(*held) if held else set()
        disjoint = sum(map(len, held)) == len(union)
        return {"every partition assigned exactly once": union == every and disjoint}

    def _consumer_facts(self, spec: GroupSpec, group: ConsumerGroup | None) -> dict[str, object]:
        """A consumer group's: Stable (or gone or Empty with no live member), its members exactly the live members,
        each STABLE at the group's epoch, every partition owned by exactly one of them, and balanced as its
        assignor balances (uniform: the members' counts differ by at most one; range: so do each topic's)."""
        live = [m for m in self.members if m.spec is spec and m.alive and isinstance(m, SimConsumerMember)]
        machines = [m.machine for m in live if m.machine is not None]
        if group is None or not live:
            empty = group is None or group.state is ConsumerGroupState.EMPTY
            return {"no live member, the consumer group is Empty": empty and not live}
        if group.state is not ConsumerGroupState.STABLE:
            return {"consumer group Stable": False}
        if set(group.members) != {m.member_id for m in machines}:
            return {"members are the live members": False}
        if not all(m.state is ConsumerState.STABLE and m.epoch == group.group_epoch for m in machines):
            return {"every live member STABLE at the group's epoch": False}
        owned = [m.owned() for m in live]
        every = {TopicPartition(t, p) for t, n in spec.topics.items() for p in range(n)}
        union = set().union(*owned)
        if not (union == every and sum(map(len, owned)) == len(union)):
            return {"every partition owned exactly once": False}
        scopes = [None] if spec.assignor == "uniform" else sorted(spec.topics)
        for scope in scopes:
            counts = [sum(1 for tp in held if scope is None or tp.topic == scope) for held in owned]
            if max(counts) - min(counts) > 1:
                return {f"balanced ({scope or 'all topics'}: {counts})": False}
        return {}


def _machine_state(machine: object) -> tuple[object, ...]:
    if isinstance(machine, ConsumerMembership):
        return machine.state.value, machine.member_id, machine.epoch
    return machine.state.value, machine.member_id, machine.generation_id  # type: ignore[attr-defined]


class _Admin:
    """The admin client's end of a connection: answers are ignored (their effects are checked)."""

    def on_answer(self, request: object, response: object) -> None:
        return None

    def on_failure(self, request: object, reason: str) -> None:
        return None
