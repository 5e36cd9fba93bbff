"""A test context like Kafka's GroupMetadataManagerTestContext: manual clock and timer, deterministic
uuids, helpers that run requests and collect replies by handle."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from herd.coordinator import CoordinatorConfig, GroupCoordinatorShard, ManualClock, ManualTimer, Record, Result
from herd.coordinator.member import MemberProtocol
from herd.coordinator.requests import Heartbeat, JoinGroup, SyncAssignment, SyncGroup

PROTOCOLS = (MemberProtocol("range", b"sub-range"), MemberProtocol("roundrobin", b"sub-rr"))


@dataclass
class Ctx:
    config: CoordinatorConfig = field(default_factory=lambda: CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    clock: ManualClock = field(default_factory=ManualClock)
    log: list[Record] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.timer = ManualTimer(self.clock)
        counter = itertools.count()
        self.shard = GroupCoordinatorShard(
            clock=self.clock,
            timer=self.timer,
            config=self.config,
            uuid_factory=lambda: f"uuid{next(counter)}",
        )
        self.handles = itertools.count()

    # --- running -------------------------------------------------------------------------------

    def apply(self, result: Result) -> Result:
        """The runtime's success path: append, replay (with the producer id of a transactional Result; a
        transaction marker with replay_end_transaction_marker)."""
        marker, transaction = result.marker, result.transaction or ()
        if marker is not None:
            self.shard.replay_end_transaction_marker(marker.producer_id, marker.commit, marker.producer_epoch)
        for record in result.records:
            self.log.append(record)
            self.shard.replay(record, *transaction)
        return result

    def run(self, method: str, req: object) -> tuple[object, Result]:
        handle = f"h{next(self.handles)}"
        result = self.apply(getattr(self.shard, method)(req, handle))
        return handle, result

    def sleep(self, ms: int) -> list[Result]:
        return [self.apply(r) for r in self.timer.advance(ms)]

    # --- shortcuts -----------------------------------------------------------------------------

    def join(self, group: str = "g", member_id: str = "", **kw: object) -> tuple[object, Result]:
        args = dict(
            group_id=group,
            member_id=member_id,
            session_timeout_ms=10000,
            rebalance_timeout_ms=20000,
            protocols=PROTOCOLS,
            client_id="client",
            client_host="/127.0.0.1",
        )
        args.update(kw)
        return self.run("join_group", JoinGroup(**args))  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        group: str = "g",
        assignments: dict[str, bytes] | None = None,
        **kw: object,
    ) -> tuple[object, Result]:
        asg = tuple(SyncAssignment(m, a) for m, a in (assignments or {}).items())
        return self.run(
            "sync_group",
            SyncGroup(group_id=group, generation_id=generation, member_id=member_id, assignments=asg, **kw),
        )  # type: ignore[arg-type]

    def heartbeat(self, member_id: str, generation: int, group: str = "g", **kw: object) -> int:
        handle, result = self.run(
            "heartbeat", Heartbeat(group_id=group, generation_id=generation, member_id=member_id, **kw)
        )  # type: ignore[arg-type]
        return reply(result, handle).error_code

    def join_dynamic(self, group: str = "g", **kw: object) -> str:
        """v4+ two-step join; returns the member id (its join stays parked)."""
        handle, result = self.join(group, **kw)
        first = reply(result, handle)
        assert first.error_code == 79, first
        self.join(group, member_id=first.member_id, **kw)
        return first.member_id

    def stable_group(self, n: int, group: str = "g", **kw: object) -> list[str]:
        """n dynamic members joined (v4+), join phase completed, leader synced. Returns member ids."""
        ids, handles = [], []
        for _ in range(n):
            handle, result = self.join(group, **kw)
            member_id = reply(result, handle).member_id
            ids.append(member_id)
            handles.append(self.join(group, member_id=member_id, **kw))
        self.sleep(0)
        g = self.shard.group(group)
        assert g is not None
        if g.state.value == "PreparingRebalance":
            self.sleep(30000)
        g = self.shard.group(group)
        leader = g.leader_id
        self.sync(leader, g.generation_id, group, {m: f"a-{m}".encode() for m in ids})
        for m in ids:
            if m != leader:
                self.sync(m, g.generation_id, group)
        return ids


def reply(result: Result, handle: object) -> object:
    found = [r.response for r in result.replies if r.handle == handle]
    assert len(found) == 1, f"expected one reply for {handle}, got {found} in {result.replies}"
    return found[0]


def replies(results: list[Result] | Result) -> dict[object, object]:
    if isinstance(results, Result):
        results = [results]
    return {r.handle: r.response for res in results for r in res.replies}
