"""Offset retention (KIP-211) on a manual clock: when each kind of group's offsets expire, the exact
tombstones the cleanup writes, and when the group goes with them (apache/kafka OffsetMetadataManagerTest
#testCleanupExpiredOffsets* and GroupMetadataManagerTest#testCleanupGroupMetadata are the models)."""

from __future__ import annotations

from herd.client.consumer_protocol import Subscription, encode_subscription
from herd.coordinator import CoordinatorConfig, GroupState, Record
from herd.coordinator.member import MemberProtocol
from herd.coordinator.records import group_tombstone, offset_tombstone, rebalance_history_tombstone
from herd.coordinator.requests import CommitPartition, LeaveGroup, OffsetCommit
from herd.coordinator.retention import RETENTION_KEY

from .context import Ctx, reply
from .test_offsets_fencing import commit_req

MINUTE = 60_000
RETENTION = 10 * MINUTE  # offsets.retention.minutes = 10
INTERVAL = MINUTE  # offsets.retention.check.interval.ms


def ctx() -> Ctx:
    c = Ctx(
        config=CoordinatorConfig(
            group_initial_rebalance_delay_ms=0,
            offsets_retention_minutes=10,
            offsets_retention_check_interval_ms=INTERVAL,
        )
    )
    c.shard.on_loaded()  # starts the cleanup timer, as the runtime does after loading
    return c


def commit(c: Ctx, *partitions: int, topic: str = "t", **kw) -> None:
    req = commit_req(partitions=tuple(CommitPartition(p, 100 + p) for p in partitions), topic=topic, **kw)
    handle, result = c.run("offset_commit", req)
    assert all(p.error_code == 0 for p in reply(result, handle).topics[0].partitions)


def tombstones(c: Ctx, ms: int, alive: tuple[str, ...] = (), group: str = "g") -> list[Record]:
    """Advance the clock by `ms`, the `alive` members of `group` heartbeating every 5 s; the tombstones the
    cleanups in that window wrote (cleanups write nothing else). The clock moves at most one check interval
    at a time: the test context replays a window's records only after all of its timers ran, where the
    runtime replays each timer's records at once."""
    out: list[Record] = []
    while ms > 0:
        step = min(ms, 5_000 if alive else INTERVAL)
        out += [r for result in c.sleep(step) for r in result.records if r.value is None]
        for member in alive:
            c.heartbeat(member, c.shard.group(group).generation_id, group)
        ms -= step
    return out


def consumer_protocols(*topics: str) -> tuple[MemberProtocol, ...]:
    return (MemberProtocol("range", encode_subscription(Subscription(topics=topics))),)


def test_cleanup_runs_every_check_interval_and_re_arms_itself() -> None:
    c = ctx()
    assert c.timer.deadline(RETENTION_KEY) == INTERVAL
    c.sleep(INTERVAL)
    assert c.timer.deadline(RETENTION_KEY) == 2 * INTERVAL
    c.shard.on_unloaded()
    assert c.timer.deadline(RETENTION_KEY) is None


def test_a_simple_group_expires_per_offset_from_its_commit_time_then_is_deleted() -> None:
    c = ctx()
    commit(c, 0)
    c.sleep(5 * MINUTE)
    commit(c, 1)
    assert tombstones(c, 5 * MINUTE - 1) == []
    assert tombstones(c, MINUTE) == [offset_tombstone("g", "t", 0)]  # 10 min after its commit
    assert c.shard.committed_offsets("g").keys() == {("t", 1)} and c.shard.group("g") is not None
    assert tombstones(c, 5 * MINUTE) == [offset_tombstone("g", "t", 1), group_tombstone("g")]
    assert c.shard.group("g") is None and c.shard.committed_offsets("g") == {}


def test_an_empty_group_counts_from_when_it_became_empty_not_from_the_commit() -> None:
    c = ctx()
    (member,) = c.stable_group(1, protocols=consumer_protocols("t"))
    commit(c, 0, 1, gen=1, member=member)
    assert tombstones(c, 30 * MINUTE, (member,)) == []  # Stable and subscribed to t: nothing expires
    assert c.shard.committed_offsets("g").keys() == {("t", 0), ("t", 1)}
    c.run("leave_group", LeaveGroup(group_id="g", member_id=member, api_version=0))
    became_empty = c.clock.now_ms()
    assert c.shard.group("g").state is GroupState.EMPTY
    assert tombstones(c, RETENTION - MINUTE) == []
    expired = tombstones(c, 2 * MINUTE)
    assert expired == [
        offset_tombstone("g", "t", 0),
        offset_tombstone("g", "t", 1),
        group_tombstone("g"),
        rebalance_history_tombstone("g"),
    ]
    assert c.clock.now_ms() - became_empty >= RETENTION and c.shard.group("g") is None


def test_a_stable_consumer_group_expires_only_topics_no_member_subscribes_to() -> None:
    c = ctx()
    (member,) = c.stable_group(1, protocols=consumer_protocols("t"))
    assert c.shard.group("g").subscribed_topics == {"t"}
    commit(c, 0, gen=1, member=member)
    commit(c, 0, topic="old", gen=1, member=member)
    assert tombstones(c, RETENTION + INTERVAL, (member,)) == [offset_tombstone("g", "old", 0)]
    assert c.shard.committed_offsets("g").keys() == {("t", 0)} and c.shard.group("g").state is GroupState.STABLE


def test_groups_rebalancing_or_of_other_protocol_types_or_unknown_subscriptions_keep_their_offsets() -> None:
    c = ctx()
    # "g": a consumer group in PreparingRebalance; "h": members send metadata that is not the consumer
    # protocol (the context's default), so the coordinator does not know their topics; "k": another type.
    # Sessions of 30 min outlast the test.
    long = {"session_timeout_ms": 1_800_000}
    a, _ = c.stable_group(2, protocols=consumer_protocols("t"), **long)
    commit(c, 0, topic="unsubscribed", gen=1, member=a)
    c.join(member_id=a, protocols=consumer_protocols("t"), **long)
    c.timer.cancel("join-g")  # keep g rebalancing for the whole test
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE
    (h,) = c.stable_group(1, group="h", **long)
    assert c.shard.group("h").subscribed_topics is None
    c.run("offset_commit", commit_req(group="h", gen=1, member=h, topic="x"))
    (k,) = c.stable_group(1, group="k", protocol_type="connect", **long)
    c.run("offset_commit", commit_req(group="k", gen=1, member=k, topic="x"))
    assert tombstones(c, RETENTION + 2 * INTERVAL) == []
    assert {g: len(c.shard.committed_offsets(g)) for g in "ghk"} == {"g": 1, "h": 1, "k": 1}


def test_an_explicit_retention_time_from_offset_commit_v2_to_v4_wins() -> None:
    c = ctx()
    commit(c, 0, v=2, retention=2 * MINUTE)
    commit(c, 1, v=4, retention=30 * MINUTE)
    commit(c, 2)
    assert tombstones(c, 2 * MINUTE) == [offset_tombstone("g", "t", 0)]
    assert tombstones(c, 10 * MINUTE) == [offset_tombstone("g", "t", 2)]
    assert tombstones(c, 20 * MINUTE) == [offset_tombstone("g", "t", 1), group_tombstone("g")]


def test_an_empty_group_without_offsets_is_deleted_at_the_next_cleanup() -> None:
    c = ctx()
    (member,) = c.stable_group(1, protocols=consumer_protocols("t"))
    c.run("leave_group", LeaveGroup(group_id="g", member_id=member, api_version=0))
    assert tombstones(c, INTERVAL) == [group_tombstone("g"), rebalance_history_tombstone("g")]
    assert c.shard.group("g") is None


def test_a_group_keeps_living_while_one_offset_remains() -> None:
    c = ctx()
    commit(c, 0, v=2, retention=MINUTE)
    commit(c, 1, v=2, retention=60 * MINUTE)
    assert tombstones(c, INTERVAL) == [offset_tombstone("g", "t", 0)]
    assert c.shard.group("g") is not None


def test_after_a_reload_an_empty_group_still_counts_from_its_recorded_state_timestamp() -> None:
    c = ctx()
    (member,) = c.stable_group(1, protocols=consumer_protocols("t"))
    commit(c, 0, gen=1, member=member)
    tombstones(c, 3 * MINUTE, (member,))
    c.run("leave_group", LeaveGroup(group_id="g", member_id=member, api_version=0))
    became_empty = c.clock.now_ms()
    c.sleep(4 * MINUTE)
    fresh = Ctx(config=c.config)
    fresh.clock.set(c.clock.now_ms())
    for r in c.log:
        fresh.shard.replay(Record(r.key, r.value))
    fresh.shard.on_loaded()
    assert fresh.shard.group("g").state_timestamp_ms == became_empty
    assert tombstones(fresh, became_empty + RETENTION - fresh.clock.now_ms() - 1) == []
    assert tombstones(fresh, INTERVAL) == [
        offset_tombstone("g", "t", 0),
        group_tombstone("g"),
        rebalance_history_tombstone("g"),
    ]


def test_offsets_committed_after_an_expiry_live_again() -> None:
    c = ctx()
    commit(c, 0)
    tombstones(c, RETENTION + INTERVAL)
    assert c.shard.group("g") is None
    handle, result = c.run("offset_commit", OffsetCommit(group_id="g", topics=commit_req().topics))
    assert reply(result, handle).topics[0].partitions[0].error_code == 0
    assert c.shard.committed_offsets("g")[("t", 0)].offset == 42
