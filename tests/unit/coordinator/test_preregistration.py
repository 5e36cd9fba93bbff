"""KIP-469 pre-registration on a manual clock: four instances joining one by one over 10 s cost one
generation; arrivals at a Stable group are held (no rebalance, partitions stay owned) until the last one or
the rebalance timeout; a rebalance in progress waits for missing instances up to the rebalance timeout;
KIP-134's initial delay; the exact records."""

from __future__ import annotations

import logging

from herd.coordinator import CoordinatorConfig, ErrorCode, GroupState, Record
from herd.coordinator.member import MemberProtocol
from herd.coordinator.preregistration import EMPTY_CONSUMER_ASSIGNMENT
from herd.coordinator.records import decode_group_metadata_value, expected_members_record
from herd.coordinator.requests import AlterGroupConfigs, GroupConfigOp, LeaveGroup, MemberIdentity

from .context import Ctx, replies, reply

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
NAME = "herd.expected.instance.ids"
NEW = ("e0", "e1", "e2", "e3")
ARRIVALS_MS = (0, 3333, 6667, 10000)  # four instances over 10 s
TOMBSTONE = Record(b"\x7e\x00\x00\x01g", None)  # record type 0x7E00, key {group: "g"}, no value


def alter(c: Ctx, op: int, value: str | None, group: str = "g") -> tuple[object, object]:
    handle, result = c.run(
        "alter_group_configs", AlterGroupConfigs(group_id=group, ops=(GroupConfigOp(NAME, op, value),))
    )
    return reply(result, handle), result


def react(c: Ctx, group: str = "g") -> None:
    """What well-behaved members do next: heartbeat while the group is Stable, rejoin while it prepares a
    rebalance (their heartbeat said REBALANCE_IN_PROGRESS), sync once the join phase has completed."""
    g = c.shard.group(group)
    if g is None:
        return
    if g.state is GroupState.STABLE:
        for m in list(g.members.values()):
            c.heartbeat(m.member_id, g.generation_id, group, group_instance_id=m.group_instance_id)
    if g.state is GroupState.PREPARING_REBALANCE:
        rejoin(c, group)
    if g.state is GroupState.COMPLETING_REBALANCE:
        c.sync(g.leader_id, g.generation_id, group, {m: m.encode() for m in g.members})
        for m in [m for m in g.members if m != g.leader_id]:
            c.sync(m, g.generation_id, group)


def rejoin(c: Ctx, group: str = "g") -> None:
    g = c.shard.group(group)
    for m in [m for m in g.members.values() if not m.is_awaiting_join]:
        c.join(group, member_id=m.member_id, group_instance_id=m.group_instance_id)


def wait(c: Ctx, ms: int, group: str = "g") -> list[object]:
    """Let `ms` pass in steps of a second, members reacting (heartbeating) after each."""
    results = []
    while ms > 0:
        step = min(ms, 1000)
        results += c.sleep(step)
        ms -= step
        react(c, group)
    return results


def static_group(c: Ctx, n: int = 4, group: str = "g") -> int:
    """n static members s0.. in a Stable group; returns its generation."""
    for i in range(n):
        c.join(group, group_instance_id=f"s{i}")
    c.sleep(c.config.group_initial_rebalance_delay_ms)
    react(c, group)
    g = c.shard.group(group)
    assert g.state is GroupState.STABLE and len(g.members) == n
    return g.generation_id


def scale_up(c: Ctx, group: str = "g", instances: tuple[str, ...] = NEW) -> list[object]:
    """`instances` join at ARRIVALS_MS while the others behave; returns every result of the scale-up."""
    results, now = [], c.clock.now_ms()
    start = now
    for at, instance in zip(ARRIVALS_MS, instances):
        results += wait(c, start + at - now, group)
        now = start + at
        react(c, group)
        results.append(c.join(group, group_instance_id=instance)[1])
        react(c, group)
        react(c, group)
    return results


def generations_started(c: Ctx, since: int, group: str = "g") -> list[int]:
    return [r.generation for r in c.shard.rebalance_history(group) if r.generation and r.generation > since]


def old_members_consume(c: Ctx, generation: int, group: str = "g") -> bool:
    """The original members' heartbeats are answered NONE: they keep their partitions."""
    g = c.shard.group(group)
    olds = [m for i, m in g.static_members.items() if i.startswith("s")]
    return all(
        c.heartbeat(m, generation, group, group_instance_id=g.member(m).group_instance_id) == ErrorCode.none
        for m in olds
    )


# --- a Stable group: arrivals are held, one rebalance at the last -----------------------------------------


def test_four_pre_registered_instances_joining_over_ten_seconds_make_exactly_one_generation():
    c = Ctx()
    before = static_group(c)
    alter(c, SET, ",".join(NEW))
    start, joins = c.clock.now_ms(), []
    for at, instance in zip(ARRIVALS_MS[:3], NEW[:3]):
        wait(c, start + at - c.clock.now_ms())
        joins.append(c.join(group_instance_id=instance))
        g = c.shard.group("g")
        assert g.state is GroupState.STABLE and g.generation_id == before and old_members_consume(c, before)
    handle, result = joins[0]
    held = reply(result, handle)  # answered at once, in the current generation, not as the leader
    assert (held.error_code, held.generation_id, held.members) == (ErrorCode.none, before, ())
    h, synced = c.sync(held.member_id, before, group_instance_id="e0")
    assert reply(synced, h).assignment == EMPTY_CONSUMER_ASSIGNMENT  # no partitions while held
    assert c.heartbeat(held.member_id, before, group_instance_id="e0") == ErrorCode.none

    wait(c, start + ARRIVALS_MS[-1] - c.clock.now_ms())
    c.join(group_instance_id="e3")  # the last one, at 10 s: the one rebalance starts
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE
    rejoin(c)  # all eight rejoin at their next heartbeat: the join phase ends at once
    assert g.state is GroupState.COMPLETING_REBALANCE
    react(c)
    assert g.state is GroupState.STABLE and g.generation_id == before + 1
    assert generations_started(c, before) == [before + 1]
    assert sorted(g.static_members) == ["e0", "e1", "e2", "e3", "s0", "s1", "s2", "s3"]
    assert c.shard.expected_members("g") == ()


def test_without_pre_registration_the_same_arrivals_make_a_generation_each():
    c = Ctx()
    before = static_group(c)
    scale_up(c)
    g = c.shard.group("g")
    assert generations_started(c, before) == [before + 1, before + 2, before + 3, before + 4]
    assert g.state is GroupState.STABLE and len(g.members) == 8


def test_with_pre_registration_the_scale_up_helper_makes_one_generation():
    c = Ctx()
    before = static_group(c)
    alter(c, SET, ",".join(NEW))
    scale_up(c)
    assert generations_started(c, before) == [before + 1] and c.shard.group("g").generation_id == before + 1


def test_records_of_a_held_scale_up_exactly():
    c = Ctx()
    before = static_group(c)
    response, registered = alter(c, SET, "e0,e1")
    assert response.error_code == 0
    assert registered.records == (expected_members_record("g", ("e0", "e1"), applied=True),)
    (record,) = registered.records
    assert record.applied and record.key == b"\x7e\x00" + b"\x00\x01g"  # type 0x7E00, then {group: "g"}
    assert record.value == b"\x00\x00" + b"\x03" + b"\x03e0" + b"\x03e1" + b"\x00"  # v0: compact [e0, e1], no tags

    _, held = c.join(group_instance_id="e0")
    (membership,) = held.records  # the held member is persisted, as a static replacement in Stable is
    g = c.shard.group("g")
    assert membership.key[:2] == b"\x00\x02" and membership.applied
    value = decode_group_metadata_value(membership.value)
    assert value.generation == before and [m.group_instance_id for m in value.members] == ["s0", "s1", "s2", "s3", "e0"]
    assert value.members[-1].assignment == EMPTY_CONSUMER_ASSIGNMENT

    _, last = c.join(group_instance_id="e1")
    assert last.records == ()  # the last arrival takes the normal path: persisted with the generation
    rejoin(c)
    h, synced = c.sync(g.leader_id, g.generation_id, assignments={m: m.encode() for m in g.members})
    assert len(synced.records) == 3 and synced.records[0].key[:2] == b"\x00\x02"
    assert synced.records[1] == TOMBSTONE  # fulfilled, in the generation's batch
    assert synced.records[2].key[:2] == b"\x7e\x01"  # the rebalance history, in the same batch


def test_the_hold_ends_at_the_rebalance_timeout_and_releases_the_missing_instances(caplog):
    c = Ctx()
    before = static_group(c)
    alter(c, SET, ",".join(NEW))
    first = c.clock.now_ms()
    for instance in NEW[:3]:  # e3 never comes
        c.join(group_instance_id=instance)
        wait(c, 1000)
    g = c.shard.group("g")
    assert c.timer.deadline("expected-members-g") == first + 20000  # from the first arrival
    waited = wait(c, first + 19999 - c.clock.now_ms())  # the members heartbeat: the old ones keep consuming
    assert replies(waited) == {} and g.state is GroupState.STABLE
    with caplog.at_level(logging.WARNING, logger="herd.coordinator.preregistration"):
        ended = c.sleep(1)
    assert "without pre-registered instances ['e3']" in caplog.text
    assert g.state is GroupState.PREPARING_REBALANCE
    assert [r.records for r in ended if r.records] == [
        (expected_members_record("g", ("e0", "e1", "e2"), applied=True),)
    ]
    react(c)
    react(c)
    assert g.state is GroupState.STABLE and g.generation_id == before + 1 and len(g.members) == 7
    assert c.shard.expected_members("g") == ()


def test_withdrawing_the_last_missing_instance_rebalances_the_held_ones_in_at_once():
    c = Ctx()
    before = static_group(c)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")
    g = c.shard.group("g")
    assert g.state is GroupState.STABLE
    response, result = alter(c, SUBTRACT, "e1")
    assert response.error_code == 0 and g.state is GroupState.PREPARING_REBALANCE
    assert result.records == (expected_members_record("g", ("e0",), applied=True),)  # e0 waits for its generation
    assert "expected-members-g" not in c.timer.keys()
    react(c)
    react(c)
    assert g.generation_id == before + 1 and c.shard.expected_members("g") == ()


def test_arrivals_are_not_held_for_protocols_whose_assignment_the_coordinator_cannot_write():
    c = Ctx()
    for i in range(2):
        c.join(group_instance_id=f"s{i}", protocol_type="connect")
    react(c)
    react(c)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0", protocol_type="connect")
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE  # the join-phase path instead


# --- a rebalance in progress waits for missing instances --------------------------------------------------


def start_rebalance_by_a_leave(c: Ctx) -> None:
    """Scale-down and scale-up at once: s3 is removed by instance id (KIP-345), which starts a rebalance."""
    handle, result = c.run("leave_group", LeaveGroup(group_id="g", members=(MemberIdentity("", "s3"),)))
    assert reply(result, handle).members[0].error_code == 0
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE


def test_a_rebalance_waits_for_a_missing_instance_until_the_rebalance_timeout_then_releases_it(caplog):
    c = Ctx()
    before = static_group(c)
    alter(c, SET, "e0,e1")
    start_rebalance_by_a_leave(c)
    started = c.clock.now_ms()
    react(c)
    c.join(group_instance_id="e0")
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE and g.has_all_members_joined()
    assert c.timer.deadline("join-g") == started + 20000  # the rebalance timeout bounds the wait
    waited = c.sleep(19999)  # session timers fire on the way (members awaiting a join are alive): nothing else
    assert replies(waited) == {} and not any(r.records for r in waited)
    assert g.state is GroupState.PREPARING_REBALANCE
    with caplog.at_level(logging.WARNING, logger="herd.coordinator.preregistration"):
        (released,) = c.sleep(1)
    assert "without pre-registered instances ['e1']" in caplog.text
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == before + 1 and len(g.members) == 4
    assert released.records == (expected_members_record("g", ("e0",), applied=True),)
    assert len(replies(released)) == 4  # the four parked joins, answered by the timer
    react(c)
    assert c.shard.expected_members("g") == () and g.state is GroupState.STABLE


def test_the_last_arrival_ends_the_join_phase_at_once(caplog):
    c = Ctx()
    before = static_group(c)
    alter(c, SET, "e0,e1")
    start_rebalance_by_a_leave(c)
    with caplog.at_level(logging.INFO, logger="herd.coordinator.rebalance"):
        react(c)
        c.join(group_instance_id="e0")
        c.sleep(5000)
    assert "join phase waiting for pre-registered instances ['e1']" in caplog.text
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE
    _, last = c.join(group_instance_id="e1")
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == before + 1
    assert len(replies(last)) == 5


def test_members_that_are_not_expected_change_nothing_while_expected_ones_are_missing():
    c = Ctx()
    before = static_group(c)
    alter(c, SET, "e0,e1")
    start_rebalance_by_a_leave(c)
    react(c)
    c.join(group_instance_id="stranger")  # a static member nobody announced: joins the phase, ends nothing
    c.join(group_instance_id="e0")
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE
    c.join(group_instance_id="e1")
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == before + 1 and len(g.members) == 6


def test_withdrawing_the_last_missing_instance_ends_a_waiting_join_phase_at_once():
    c = Ctx()
    before = static_group(c)
    alter(c, SET, "e0,e1")
    start_rebalance_by_a_leave(c)
    react(c)
    c.join(group_instance_id="e0")
    response, result = alter(c, SUBTRACT, "e1")
    g = c.shard.group("g")
    assert response.error_code == 0 and g.state is GroupState.COMPLETING_REBALANCE
    assert g.generation_id == before + 1 and len(replies(result)) == 1 + 4  # the alter's answer, four joins


def test_a_dynamic_member_that_has_not_rejoined_still_holds_the_phase_after_the_last_arrival():
    c = Ctx()
    leader, follower = c.stable_group(2)
    alter(c, SET, "e0")
    c.join(group_instance_id="e0")  # the only one expected: Stable -> PreparingRebalance, as in Kafka
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE
    c.join(member_id=leader)
    assert g.state is GroupState.PREPARING_REBALANCE  # the follower has not rejoined: Kafka's rule, unchanged
    c.join(member_id=follower)
    assert g.state is GroupState.COMPLETING_REBALANCE


def test_a_group_without_registrations_rebalances_exactly_as_before():
    c = Ctx()
    leader, follower = c.stable_group(2)
    alter(c, SET, "e0,e1", group="another")
    c.join(member_id=follower, protocols=(MemberProtocol("roundrobin", b"x"),))
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE
    c.join(member_id=leader)
    assert g.state is GroupState.COMPLETING_REBALANCE


# --- an Empty or new group: KIP-134's initial delay -------------------------------------------------------


def test_the_last_arrival_ends_kip134s_initial_delay_of_a_group_that_did_not_exist():
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    response, _ = alter(c, SET, ",".join(NEW), group="fresh")
    assert response.error_code == 0 and c.shard.group("fresh") is None  # configured before the group exists
    results = scale_up(c, "fresh")
    g = c.shard.group("fresh")
    assert g.state is GroupState.STABLE and g.generation_id == 1 and len(g.members) == 4
    joined = [r for r in results if len(replies(r)) == 4]
    assert joined and c.shard.rebalance_history("fresh")[-1].join_completed_ms == 10000


def test_kip134_alone_forms_the_same_group_in_several_generations():
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    scale_up(c, "fresh")
    assert c.shard.group("fresh").generation_id > 1


def test_an_initial_rebalance_waiting_for_pre_registered_instances_is_capped_by_the_rebalance_timeout():
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")
    results = c.sleep(19999)
    assert c.shard.group("g").state is GroupState.PREPARING_REBALANCE
    results += c.sleep(1)
    assert c.shard.group("g").state is GroupState.COMPLETING_REBALANCE
    assert [r.generation_id for r in replies(results).values()] == [1]
    assert c.shard.expected_members("g") == ("e0",)  # e1 released; e0 arrived and goes at the sync


def test_a_held_arrival_whose_record_fails_is_not_admitted():
    from herd.coordinator.requests import JoinGroup

    from .context import PROTOCOLS

    c = Ctx()
    static_group(c, n=2)
    alter(c, SET, "e0,e1")
    result = c.shard.join_group(
        JoinGroup(group_id="g", session_timeout_ms=10000, group_instance_id="e0", protocols=PROTOCOLS), "hx"
    )
    assert "e0" in c.shard.group("g").static_members and result.records
    failed = c.shard.on_append_failed(result, ErrorCode.not_leader_or_follower)
    assert reply(failed, "hx").error_code == ErrorCode.not_coordinator
    g = c.shard.group("g")
    assert "e0" not in g.static_members and len(g.members) == 2 and g.state is GroupState.STABLE
    assert "expected-members-g" not in c.timer.keys()  # nothing held: no rebalance at the hold's deadline


def test_a_held_member_that_restarts_is_replaced_without_a_rebalance_and_stays_held():
    c = Ctx()
    before = static_group(c, n=2)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")
    h, restarted = c.join(group_instance_id="e0")  # the instance restarts: unknown member id, known instance
    g = c.shard.group("g")
    assert reply(restarted, h).error_code == 0 and g.state is GroupState.STABLE and g.generation_id == before
    assert g.member(g.static_members["e0"]).assignment == EMPTY_CONSUMER_ASSIGNMENT
    c.join(group_instance_id="e1")
    react(c)
    react(c)
    assert g.generation_id == before + 1 and len(g.members) == 4
