"""KIP-469 pre-registration and the join phase, on a manual clock: one rebalance for a scale-up of four,
the rebalance timeout as the bound, the interplay with KIP-134's initial delay, and the exact records."""

from __future__ import annotations

import logging

from herd.coordinator import CoordinatorConfig, GroupState, Record
from herd.coordinator.records import expected_members_record
from herd.coordinator.requests import AlterGroupConfigs, GroupConfigOp

from .context import Ctx, reply, replies

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
NAME = "herd.expected.instance.ids"
NEW = ("e0", "e1", "e2", "e3")
ARRIVALS_MS = (0, 3333, 6667, 10000)  # four instances over 10 s


def alter(c: Ctx, op: int, value: str | None, group: str = "g") -> tuple[object, object]:
    handle, result = c.run("alter_group_configs", AlterGroupConfigs(group_id=group,
                                                                    ops=(GroupConfigOp(NAME, op, value),)))
    return reply(result, handle), result


def react(c: Ctx, group: str = "g") -> None:
    """What well-behaved members do next: rejoin while the group prepares a rebalance (their heartbeat said
    REBALANCE_IN_PROGRESS), sync once the join phase has completed."""
    g = c.shard.group(group)
    if g is None:
        return
    if g.state is GroupState.PREPARING_REBALANCE:
        for m in [m for m in g.members.values() if not m.is_awaiting_join]:
            c.join(group, member_id=m.member_id, group_instance_id=m.group_instance_id)
    if g.state is GroupState.COMPLETING_REBALANCE:
        c.sync(g.leader_id, g.generation_id, group, {m: m.encode() for m in g.members})
        for m in [m for m in g.members if m != g.leader_id]:
            c.sync(m, g.generation_id, group)


def static_group(c: Ctx, n: int = 4, group: str = "g") -> int:
    """n static members s0.. in a Stable group; returns its generation."""
    for i in range(n):
        c.join(group, group_instance_id=f"s{i}")
    c.sleep(c.config.group_initial_rebalance_delay_ms)
    react(c, group)
    g = c.shard.group(group)
    assert g.state is GroupState.STABLE and len(g.members) == n
    return g.generation_id


def scale_up(c: Ctx, group: str = "g") -> list[object]:
    """NEW join at ARRIVALS_MS while the others behave; returns every result of the scale-up."""
    results, now = [], 0
    for at, instance in zip(ARRIVALS_MS, NEW):
        results += c.sleep(at - now)
        now = at
        react(c, group)
        results.append(c.join(group, group_instance_id=instance)[1])
        react(c, group)
    return results


def generations_started(c: Ctx, since: int, group: str = "g") -> list[int]:
    return [r.generation for r in c.shard.rebalance_history(group) if r.generation and r.generation > since]


# --- one rebalance for K members ------------------------------------------------------------------------


def test_four_pre_registered_instances_joining_over_ten_seconds_make_exactly_one_generation():
    c = Ctx()
    before = static_group(c)
    alter(c, SET, ",".join(NEW))
    results = scale_up(c)
    g = c.shard.group("g")
    assert g.generation_id == before + 1 and generations_started(c, before) == [before + 1]
    assert g.state is GroupState.STABLE and sorted(g.static_members) == ["e0", "e1", "e2", "e3", "s0", "s1", "s2", "s3"]
    # the join phase ended when e3 joined (t = 10 s), not at a timer: all eight joins answered by that request
    answered = replies(results[-1])
    assert len(answered) == 8 and {r.generation_id for r in answered.values()} == {before + 1}
    assert c.shard.rebalance_history("g")[-1].join_completed_ms == ARRIVALS_MS[-1]


def test_without_pre_registration_the_same_arrivals_make_a_generation_each():
    c = Ctx()
    before = static_group(c)
    scale_up(c)
    g = c.shard.group("g")
    assert generations_started(c, before) == [before + 1, before + 2, before + 3, before + 4]
    assert g.state is GroupState.STABLE and len(g.members) == 8


def test_a_missing_instance_is_waited_for_until_the_rebalance_timeout_then_released_and_logged(caplog):
    c = Ctx()
    before = static_group(c)
    alter(c, SET, ",".join(NEW))
    started = c.clock.now_ms()
    for instance in NEW[:3]:  # e3 never comes
        c.join(group_instance_id=instance)
        react(c)
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE and g.has_all_members_joined()
    assert c.timer.deadline("join-g") == started + 20000  # the rebalance timeout bounds the wait
    waited = c.sleep(19999)  # session timers fire on the way (members awaiting a join are alive): nothing else
    assert replies(waited) == {} and not any(r.records for r in waited) and g.state is GroupState.PREPARING_REBALANCE
    with caplog.at_level(logging.WARNING, logger="herd.coordinator.preregistration"):
        (released,) = c.sleep(1)
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == before + 1 and len(g.members) == 7
    assert "without pre-registered instances ['e3']" in caplog.text
    # the release is recorded: e3's registration is dropped (e0..e2 have arrived: they go at the next sync)
    assert released.records == (expected_members_record("g", ("e0", "e1", "e2"), applied=True),)
    assert c.shard.expected_members("g") == ("e0", "e1", "e2")
    react(c)
    assert c.shard.expected_members("g") == () and g.state is GroupState.STABLE


def test_the_wait_is_logged_with_the_missing_ids(caplog):
    c = Ctx()
    static_group(c)
    alter(c, SET, "e0,e1")
    with caplog.at_level(logging.INFO, logger="herd.coordinator.rebalance"):
        c.join(group_instance_id="e0")
        react(c)
    assert "join phase waiting for pre-registered instances ['e1']" in caplog.text


def test_records_of_a_pre_registered_scale_up_exactly():
    c = Ctx()
    static_group(c)
    response, registered = alter(c, SET, "e0,e1")
    assert response.error_code == 0
    assert registered.records == (expected_members_record("g", ("e0", "e1"), applied=True),)
    (record,) = registered.records
    assert record.applied
    assert record.key == b"\x7e\x00" + b"\x00\x01g"  # record type 0x7E00, then the key {group: "g"}
    assert record.value == b"\x00\x00" + b"\x03" + b"\x03e0" + b"\x03e1" + b"\x00"  # v0: compact [e0, e1], no tags
    joins = [c.join(group_instance_id=i)[1] for i in ("e0", "e1")]
    assert all(r.records == () for r in joins)  # joining writes nothing (classic groups persist at sync)
    g = c.shard.group("g")
    for m in [m for m in g.members.values() if not m.is_awaiting_join]:
        c.join(member_id=m.member_id, group_instance_id=m.group_instance_id)
    assert g.state is GroupState.COMPLETING_REBALANCE
    h, synced = c.sync(g.leader_id, g.generation_id, assignments={m: m.encode() for m in g.members})
    assert [r.key for r in synced.records][1:] == [b"\x7e\x00\x00\x01g"]
    assert synced.records[1] == Record(b"\x7e\x00\x00\x01g", None)  # fulfilled: the registration's tombstone
    assert synced.records[0].key[:2] == b"\x00\x02"  # with the generation's GroupMetadata, in one batch


def test_the_last_arrival_ends_kip134s_initial_delay_of_a_group_that_did_not_exist():
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    response, _ = alter(c, SET, ",".join(NEW), group="fresh")
    assert response.error_code == 0 and c.shard.group("fresh") is None  # configured before the group exists
    results = scale_up(c, "fresh")
    g = c.shard.group("fresh")
    assert g.state is GroupState.STABLE and g.generation_id == 1 and len(g.members) == 4
    assert len(replies(results[-1])) == 4 and c.shard.rebalance_history("fresh")[-1].join_completed_ms == 10000


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


def test_members_that_are_not_expected_change_nothing_while_expected_ones_are_missing():
    c = Ctx()
    before = static_group(c)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")
    react(c)
    c.join(group_instance_id="stranger")  # a static member nobody announced: joins the phase, ends nothing
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE
    c.join(group_instance_id="e1")
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == before + 1 and len(g.members) == 7


def test_a_dynamic_member_that_has_not_rejoined_still_holds_the_phase_after_the_last_arrival():
    c = Ctx()
    leader, follower = c.stable_group(2)
    alter(c, SET, "e0")
    c.join(group_instance_id="e0")  # Stable -> PreparingRebalance; the dynamic members must rejoin
    g = c.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE
    c.join(member_id=leader)
    assert g.state is GroupState.PREPARING_REBALANCE  # the follower has not rejoined: Kafka's rule, unchanged
    c.join(member_id=follower)
    assert g.state is GroupState.COMPLETING_REBALANCE


def test_withdrawing_the_last_missing_instance_ends_the_wait_at_once():
    c = Ctx()
    before = static_group(c)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")
    react(c)
    response, result = alter(c, SUBTRACT, "e1")
    assert response.error_code == 0
    g = c.shard.group("g")
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == before + 1
    assert len(replies(result)) == 1 + 5  # the alter's answer and the five parked joins
    # e0 has arrived, so the set keeps nothing: the registration's tombstone
    assert result.records == (Record(b"\x7e\x00\x00\x01g", None),) and c.shard.expected_members("g") == ()


def test_an_expected_instance_that_arrives_while_the_group_is_stable_starts_one_rebalance_for_all():
    c = Ctx()
    before = static_group(c, n=2)
    alter(c, SET, "e0")
    c.join(group_instance_id="e0")
    react(c)
    react(c)
    assert c.shard.group("g").generation_id == before + 1 and c.shard.expected_members("g") == ()
