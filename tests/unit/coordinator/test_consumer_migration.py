"""Classic and consumer-protocol members in one group, and the online upgrade and downgrade between a classic and a
consumer group (herd.coordinator.migration, consumer_classic), in the pure core with a manual clock: Kafka's rules
as GroupMetadataManagerTest and ConsumerProtocolMigrationTest (confluentinc/kafka branch 4.2) state them. Records
are replayed as the runtime does, and a shard reloaded from the log must hold the same group."""

from __future__ import annotations

import io
import struct
import uuid

import pytest
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription, TopicPartition
from kio.serial import entity_writer
from kio.static.primitive import i32

from herd.coordinator import CoordinatorConfig, GroupCoordinatorShard, ManualClock, ManualTimer
from herd.coordinator.consumer import embedded
from herd.coordinator.consumer.assignment import Assignment, assignment
from herd.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from herd.coordinator.consumer.member import MemberState
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.consumer_heartbeat import ConsumerGroupDescribe, ConsumerGroupHeartbeat
from herd.coordinator.errors import ErrorCode
from herd.coordinator.member import MemberProtocol
from herd.coordinator.requests import (
    CommitPartition,
    CommitTopic,
    LeaveGroup,
    MemberIdentity,
    OffsetCommit,
)
from herd.coordinator.responses import JoinGroupResponse, SyncGroupResponse
from herd.coordinator.state import GroupState

from .context import Ctx, reply
from .test_consumer_heartbeat import Consumer

FOO = uuid.UUID(int=1)
TOPICS = TopicsImage.of([("foo", FOO, 6)], version=1)


def subscription(topics: tuple[str, ...] = ("foo",), owned: dict[str, tuple[int, ...]] | None = None) -> bytes:
    """A ConsumerProtocolSubscription v1 (the Java client's cooperative members send their owned partitions)."""
    out = io.BytesIO()
    out.write(struct.pack(">h", 1))
    entity_writer(ConsumerProtocolSubscription)(
        out,
        ConsumerProtocolSubscription(
            topics=topics,
            user_data=None,
            owned_partitions=tuple(
                TopicPartition(topic=t, partitions=tuple(i32(p) for p in parts)) for t, parts in (owned or {}).items()
            ),
        ),
    )
    return out.getvalue()


def protocols(owned: dict[str, tuple[int, ...]] | None = None, name: str = "range") -> tuple[MemberProtocol, ...]:
    return (MemberProtocol(name, subscription(owned=owned)),)


def foo(*partitions: int) -> Assignment:
    return assignment([(FOO, partitions)])


def partitions_of(data: bytes) -> set[int]:
    by_name, _ = embedded.decode_assignment(data)
    return set(by_name.get("foo", ()))


def new_ctx(**config: object) -> Ctx:
    ctx = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=0, **config))  # type: ignore[arg-type]
    ctx.shard.set_topics(TOPICS)
    return ctx


def classic_group(ctx: Ctx, n: int = 2) -> list[str]:
    """A Stable classic "consumer" group of `n` members splitting foo's six partitions."""
    ids = ctx.stable_group(n, protocols=protocols())
    group = ctx.shard.group("g")
    assert group is not None and group.is_in(GroupState.STABLE)
    share = 6 // n
    for i, member_id in enumerate(ids):  # what the leader's assignment would have said
        group.members[member_id].assignment = embedded.encode_assignment(
            {"foo": frozenset(range(i * share, (i + 1) * share))}, 1
        )
    return ids


class Classic:
    """A classic member of the test in a consumer group: JoinGroup, SyncGroup, Heartbeat; it owns what its last
    SyncGroup gave it and revokes (eagerly or cooperatively) when it rejoins."""

    def __init__(self, ctx: Ctx, member_id: str = "", generation: int = -1, owned: set[int] | None = None) -> None:
        self.ctx, self.member_id, self.generation, self.owned = ctx, member_id, generation, set(owned or ())

    def join(self, **kw: object) -> JoinGroupResponse:
        handle, result = self.ctx.join(
            "g", member_id=self.member_id, protocols=protocols({"foo": tuple(sorted(self.owned))}), **kw
        )
        response = reply(result, handle)
        assert isinstance(response, JoinGroupResponse)
        if response.error_code == ErrorCode.member_id_required:
            self.member_id = response.member_id
            return self.join(**kw)
        if response.error_code == ErrorCode.none:
            self.member_id, self.generation = response.member_id, response.generation_id
        return response

    def sync(self, **kw: object) -> SyncGroupResponse:
        handle, result = self.ctx.sync(self.member_id, self.generation, "g", **kw)
        response = reply(result, handle)
        assert isinstance(response, SyncGroupResponse)
        if response.error_code == ErrorCode.none:
            self.owned = partitions_of(response.assignment)
        return response

    def heartbeat(self) -> int:
        return self.ctx.heartbeat(self.member_id, self.generation, "g")

    def rebalance(self) -> None:
        """What a cooperative client does when told REBALANCE_IN_PROGRESS: rejoin with what it owns, then sync,
        revoking what the answer leaves out, and rejoin again while its heartbeat says so (it revoked some)."""
        for _ in range(3):
            assert self.join().error_code == ErrorCode.none
            assert self.sync().error_code == ErrorCode.none
            if self.heartbeat() == ErrorCode.none:
                return
        raise AssertionError(f"{self.member_id} still told to rejoin after three rounds")


def consumer_group(ctx: Ctx) -> ConsumerGroup:
    group = ctx.shard.consumer_group("g")
    assert group is not None
    return group


def reloaded(ctx: Ctx) -> GroupCoordinatorShard:
    """A new shard that replays the log, as a restarted or new coordinator does."""
    clock = ManualClock(ctx.clock.now_ms())
    shard = GroupCoordinatorShard(clock=clock, timer=ManualTimer(clock), config=ctx.config)
    shard.set_topics(TOPICS)
    for record in ctx.log:
        shard.replay_loaded(record.key, record.value)
    shard.on_loaded()
    return shard


def no_partition_owned_twice(group: ConsumerGroup) -> None:
    seen: dict[int, str] = {}
    for member in group.members.values():
        for of in (member.assigned, member.pending_revocation):
            for partition in of.get(FOO, ()):
                assert partition not in seen, f"partition {partition} of {member.member_id} and {seen[partition]}"
                seen[partition] = member.member_id


# --- upgrade ----------------------------------------------------------------------------------------------------


def test_a_consumer_member_upgrades_a_classic_group_and_takes_partitions_only_once_revoked() -> None:
    ctx = new_ctx()
    ids = classic_group(ctx)
    generation = ctx.shard.group("g").generation_id
    before = len(ctx.log)

    a = Consumer(ctx, "a")
    response = a.heartbeat()
    assert response.error_code == ErrorCode.none
    assert ctx.shard.group("g") is None
    group = consumer_group(ctx)
    assert group.num_classic == 2 and group.group_epoch == generation + 1
    assert response.assignment == {}  # every partition is still owned by the classic members
    kinds = [(int.from_bytes(r.key[:2], "big"), r.value is None) for r in ctx.log[before:]]
    assert kinds[0] == (2, True)  # the classic group's tombstone, then the consumer group (createConsumerGroupRecords)
    assert kinds[1:9] == [
        (5, False),
        (5, False),
        (3, False),
        (7, False),
        (7, False),
        (6, False),
        (8, False),
        (8, False),
    ]
    for member_id in ids:
        member = group.members[member_id]
        assert member.member_epoch == generation and member.state is MemberState.STABLE
        assert member.classic is not None and member.classic.session_timeout_ms == 10000

    classics = [Classic(ctx, m, generation, set(range(i * 3, (i + 1) * 3))) for i, m in enumerate(ids)]
    for c in classics:
        assert c.heartbeat() == ErrorCode.rebalance_in_progress  # the group epoch moved past it
    for c in classics:
        c.rebalance()
        no_partition_owned_twice(consumer_group(ctx))
    assert sum(len(c.owned) for c in classics) == 4  # each gave one up for the new member
    assert size_of(a.heartbeat().assignment) == 2
    group = consumer_group(ctx)
    no_partition_owned_twice(group)
    for c in classics:
        assert c.heartbeat() == ErrorCode.none
    assert group.state is ConsumerGroupState.STABLE


def size_of(of: Assignment | None) -> int:
    return sum(len(parts) for parts in (of or {}).values())


def test_a_reloaded_coordinator_holds_the_upgraded_group_as_written() -> None:
    ctx = new_ctx()
    classic_group(ctx)
    Consumer(ctx, "a").heartbeat()
    live = consumer_group(ctx)
    shard = reloaded(ctx)
    again = shard.consumer_group("g")
    assert shard.group("g") is None and again is not None
    assert (again.group_epoch, again.assignment_epoch, again.num_classic) == (
        live.group_epoch,
        live.assignment_epoch,
        live.num_classic,
    )
    assert again.members == live.members


def test_joins_parked_in_a_rebalancing_classic_group_are_sent_back_to_rejoin() -> None:
    ctx = new_ctx()
    ids = classic_group(ctx)
    generation = ctx.shard.group("g").generation_id
    parked, result = ctx.join("g", member_id=ids[0], protocols=protocols())  # a rejoin: the group rebalances
    assert result.replies == ()
    request = ConsumerGroupHeartbeat(
        group_id="g",
        member_id="a",
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("foo",),
        owned={},
    )
    upgraded = ctx.run("consumer_group_heartbeat", request)[1]
    answered = {r.handle: r.response for r in upgraded.replies}
    assert answered[parked].error_code == ErrorCode.rebalance_in_progress
    assert consumer_group(ctx).members[ids[0]].member_epoch == generation


@pytest.mark.parametrize(
    ("config", "why"),
    [
        (dict(group_consumer_migration_policy="downgrade"), "online upgrade is disabled"),
        (dict(group_consumer_migration_policy="disabled"), "online upgrade is disabled"),
        (dict(group_consumer_max_size=1), "the group size exceeds the consumer group maximum size"),
    ],
)
def test_an_upgrade_the_policy_or_the_size_forbids_is_refused(config: dict, why: str) -> None:
    ctx = new_ctx(**config)
    classic_group(ctx)
    refused = Consumer(ctx, "a").heartbeat()
    assert refused.error_code == ErrorCode.group_id_not_found
    assert refused.error_message == f"Cannot upgrade classic group g to consumer group because {why}."
    assert ctx.shard.group("g") is not None and ctx.shard.consumer_group("g") is None


def test_a_custom_assignor_s_user_data_refuses_the_upgrade() -> None:
    ctx = new_ctx()
    ids = classic_group(ctx)
    group = ctx.shard.group("g")
    group.members[ids[0]].assignment = group.members[ids[0]].assignment[:-4] + struct.pack(">i", 1) + b"x"
    refused = Consumer(ctx, "a").heartbeat()
    assert refused.error_code == ErrorCode.group_id_not_found
    assert "an unsupported custom assignor is in use" in (refused.error_message or "")


def test_a_group_of_another_protocol_type_is_not_upgraded() -> None:
    ctx = new_ctx()
    ctx.stable_group(1, protocol_type="connect", protocols=protocols())
    refused = Consumer(ctx, "a").heartbeat()
    assert refused.error_code == ErrorCode.group_id_not_found
    assert "does not use the consumer embedded protocol" in (refused.error_message or "")


# --- classic members in a consumer group -----------------------------------------------------------------------


def test_a_classic_member_joins_a_consumer_group_syncs_and_heartbeats() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    c = Classic(ctx)
    joined = c.join()
    assert joined.error_code == ErrorCode.none and c.member_id == "uuid0"
    assert (joined.generation_id, joined.protocol_type, joined.protocol_name) == (2, "consumer", "range")
    assert joined.leader == "" and joined.members == ()  # the coordinator assigns: every classic member follows
    assert c.sync().error_code == ErrorCode.none and c.owned == set()  # a's partitions are not released yet
    assert c.heartbeat() == ErrorCode.none  # it waits for them
    a.heartbeat()  # a is told to revoke three
    a.heartbeat()  # and says it did
    assert c.heartbeat() == ErrorCode.rebalance_in_progress  # they are free: rejoin to take them
    c.rebalance()
    assert len(c.owned) == 3 and c.heartbeat() == ErrorCode.none
    no_partition_owned_twice(consumer_group(ctx))
    assert consumer_group(ctx).state is ConsumerGroupState.STABLE


def test_classic_joins_and_syncs_get_kafka_s_errors() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    c = Classic(ctx)
    c.join()
    handle, result = ctx.join("g", protocols=protocols(name="roundrobin"), member_id="other")
    assert reply(result, handle).error_code == ErrorCode.inconsistent_group_protocol  # c supports range only
    handle, result = ctx.join("g", protocol_type="connect", member_id="other", protocols=protocols())
    assert reply(result, handle).error_code == ErrorCode.inconsistent_group_protocol
    handle, result = ctx.sync("a", 1, "g")
    assert reply(result, handle).error_code == ErrorCode.unknown_member_id  # a speaks the consumer protocol
    handle, result = ctx.sync(c.member_id, c.generation + 1, "g")
    assert reply(result, handle).error_code == ErrorCode.illegal_generation
    handle, result = ctx.sync(c.member_id, c.generation, "g", protocol_name="roundrobin")
    assert reply(result, handle).error_code == ErrorCode.inconsistent_group_protocol
    Consumer(ctx, "b").heartbeat()  # the epoch moves past c
    handle, result = ctx.sync(c.member_id, c.generation, "g")
    assert reply(result, handle).error_code == ErrorCode.rebalance_in_progress
    assert ctx.heartbeat("nobody", 1, "g") == ErrorCode.unknown_member_id


def test_a_classic_member_told_to_rejoin_that_does_not_is_fenced_after_its_rebalance_timeout() -> None:
    ctx = new_ctx()
    Consumer(ctx, "a").heartbeat()
    c = Classic(ctx)
    c.join()
    c.sync()
    Consumer(ctx, "b").heartbeat()
    assert c.heartbeat() == ErrorCode.rebalance_in_progress
    for _ in range(2):
        ctx.sleep(9_000)
        assert c.heartbeat() == ErrorCode.rebalance_in_progress
    ctx.sleep(1_999)
    assert c.heartbeat() == ErrorCode.rebalance_in_progress and c.member_id in consumer_group(ctx).members
    ctx.sleep(1)  # 20 s (its rebalance timeout) after it was told, whatever it heartbeat since
    assert c.member_id not in consumer_group(ctx).members


def test_a_classic_member_that_joins_and_never_syncs_is_fenced() -> None:
    ctx = new_ctx()
    Consumer(ctx, "a").heartbeat()
    c = Classic(ctx)
    c.join()
    for _ in range(3):  # it heartbeats, but a member that does not sync within its rebalance timeout goes
        ctx.sleep(7_000)
        c.heartbeat()
    assert c.member_id not in consumer_group(ctx).members


def test_a_classic_member_s_session_is_its_own_session_timeout() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    c = Classic(ctx)
    c.join(session_timeout_ms=6_000)
    c.sync()
    ctx.sleep(5_999)
    a.heartbeat()
    assert c.member_id in consumer_group(ctx).members
    ctx.sleep(1)
    assert c.member_id not in consumer_group(ctx).members  # 6 s, not the group's 45 s


def test_leave_group_fences_a_classic_member_and_a_consumer_one() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a"), Consumer(ctx, "b")
    a.heartbeat()
    b.heartbeat()
    c = Classic(ctx)
    c.join()
    epoch = consumer_group(ctx).group_epoch
    handle, result = ctx.run(
        "leave_group", LeaveGroup(group_id="g", members=(MemberIdentity(c.member_id), MemberIdentity("nobody")))
    )
    response = reply(result, handle)
    assert [m.error_code for m in response.members] == [ErrorCode.none, ErrorCode.unknown_member_id]
    assert c.member_id not in consumer_group(ctx).members and consumer_group(ctx).group_epoch == epoch + 1
    handle, result = ctx.run("leave_group", LeaveGroup(group_id="g", member_id="b", api_version=1))
    assert reply(result, handle).error_code == ErrorCode.none and "b" not in consumer_group(ctx).members


def test_a_classic_member_commits_offsets_at_its_generation() -> None:
    ctx = new_ctx()
    Consumer(ctx, "a").heartbeat()
    c = Classic(ctx)
    c.join()

    def commit(generation: int, version: int = 8) -> int:
        req = OffsetCommit(
            group_id="g",
            member_id=c.member_id,
            generation_id_or_member_epoch=generation,
            topics=(CommitTopic("foo", (CommitPartition(0, 5),)),),
            api_version=version,
        )
        handle, result = ctx.run("offset_commit", req)
        return reply(result, handle).topics[0].partitions[0].error_code

    assert commit(c.generation) == ErrorCode.none  # v8: a classic member may use any version
    assert commit(c.generation - 1) == ErrorCode.illegal_generation


def test_a_consumer_member_takes_a_classic_static_member_s_place_at_once() -> None:
    ctx = new_ctx(group_consumer_migration_policy="upgrade")  # no downgrade: the group stays a consumer group
    Consumer(ctx, "a").heartbeat()
    c = Classic(ctx)
    c.join(group_instance_id="i1")
    c.sync()
    taken = Consumer(ctx, "b", instance_id="i1").heartbeat()
    assert taken.error_code == ErrorCode.none  # no UNRELEASED_INSTANCE_ID: a classic member never leaves with -2
    group = consumer_group(ctx)
    assert c.member_id not in group.members and group.members["b"].classic is None and group.num_classic == 0


# --- downgrade ---------------------------------------------------------------------------------------------------


def test_the_last_consumer_member_leaving_downgrades_the_group_to_classic() -> None:
    ctx = new_ctx()
    ids = classic_group(ctx)
    a = Consumer(ctx, "a")
    a.heartbeat()
    group = consumer_group(ctx)
    epoch = group.group_epoch
    targets = {m: set(group.target(m).get(FOO, ())) for m in ids}
    before = len(ctx.log)
    a.heartbeat(member_epoch=-1)
    assert ctx.shard.consumer_group("g") is None
    classic = ctx.shard.group("g")
    assert classic is not None and classic.generation_id == epoch and classic.protocol_name == "range"
    assert classic.is_in(GroupState.PREPARING_REBALANCE)  # the leaving member's partitions go to someone
    for member_id in ids:
        assert partitions_of(classic.members[member_id].assignment) == targets[member_id]
    kinds = [int.from_bytes(r.key[:2], "big") for r in ctx.log[before:]]
    assert kinds[-1] == 2 and kinds.count(3) == 1  # the consumer group's tombstones, then the classic GroupMetadata
    shard = reloaded(ctx)
    again = shard.group("g")
    assert shard.consumer_group("g") is None and again is not None and set(again.members) == set(ids)
    assert again.generation_id == epoch


def test_no_downgrade_when_the_policy_forbids_it() -> None:
    ctx = new_ctx(group_consumer_migration_policy="upgrade")
    ids = classic_group(ctx)
    a = Consumer(ctx, "a")
    a.heartbeat()
    a.heartbeat(member_epoch=-1)
    group = consumer_group(ctx)
    assert set(group.members) == set(ids) and group.num_classic == 2


@pytest.mark.parametrize(("topics", "rebalancing"), [(("foo",), False), (("foo", "bar"), True)])
def test_a_classic_static_member_replacing_the_last_consumer_one_downgrades_the_group(
    topics: tuple[str, ...], rebalancing: bool
) -> None:
    """validateOnlineDowngradeWithReplacedMember: the group goes back to classic at once, and rebalances only if
    the newcomer's subscription differs from the member it replaced."""
    ctx = new_ctx()
    s = Consumer(ctx, "s", instance_id="i1")
    s.heartbeat()
    c = Classic(ctx)
    c.join()
    c.sync()
    s.heartbeat()
    s.heartbeat()
    c.rebalance()
    handle, result = ctx.join(
        "g", group_instance_id="i1", protocols=(MemberProtocol("range", subscription(topics)),), member_id=""
    )
    joined = reply(result, handle)
    assert joined.error_code == ErrorCode.none and joined.member_id == "uuid1"
    assert ctx.shard.consumer_group("g") is None
    classic = ctx.shard.group("g")
    assert classic is not None and set(classic.members) == {c.member_id, "uuid1"}
    assert classic.is_in(GroupState.PREPARING_REBALANCE) is rebalancing
    assert classic.static_member_id("i1") == "uuid1"
    if not rebalancing:  # the newcomer takes over the replaced member's partitions
        assert partitions_of(classic.members["uuid1"].assignment) == set(s.owned.get(FOO, ()))


def test_consumer_group_describe_tells_classic_members_from_consumer_ones() -> None:
    ctx = new_ctx()
    Consumer(ctx, "a").heartbeat()
    c = Classic(ctx)
    c.join()
    handle, result = ctx.run("consumer_group_describe", ConsumerGroupDescribe(group_ids=("g",)))
    (described,) = reply(result, handle).groups
    assert {m.member_id: m.member_type for m in described.members} == {"a": 1, c.member_id: 0}
