"""The group config herd.expected.instance.ids: SET/APPEND/SUBTRACT/DELETE, idempotence, Kafka's error codes,
DescribeConfigs' view, append failures, and replay after a restart."""

from __future__ import annotations

import pytest

from herd.coordinator import ErrorCode, GroupState, Record
from herd.coordinator.preregistration import MAX_EXPECTED_INSTANCES
from herd.coordinator.records import expected_members_record
from herd.coordinator.requests import (
    AlterGroupConfigs,
    DeleteGroups,
    DescribeGroupConfigs,
    GroupConfigOp,
    LeaveGroup,
    MemberIdentity,
)

from .context import Ctx, reply
from .test_preregistration import APPEND, DELETE, NAME, SET, SUBTRACT, alter, react, static_group


def describe(c: Ctx, group: str = "g") -> object:
    handle, result = c.run("describe_group_configs", DescribeGroupConfigs(group_id=group))
    return reply(result, handle)


def test_set_append_subtract_delete():
    c = Ctx()
    assert alter(c, SET, "a, b,a")[0].error_code == 0  # items trimmed, duplicates dropped
    assert c.shard.expected_members("g") == ("a", "b")
    alter(c, APPEND, "b,c")
    assert c.shard.expected_members("g") == ("a", "b", "c")
    alter(c, SUBTRACT, "a,zz")  # an id that is not there is ignored
    assert c.shard.expected_members("g") == ("b", "c")
    _, deleted = alter(c, DELETE, None)
    assert c.shard.expected_members("g") == () and deleted.records == (Record(b"\x7e\x00\x00\x01g", None),)
    _, emptied = alter(c, SET, "")
    assert emptied.records == ()  # already empty: nothing to write


def test_repeating_a_change_writes_nothing():
    c = Ctx()
    _, first = alter(c, APPEND, "a,b")
    response, again = alter(c, APPEND, "b,a")
    assert first.records and again.records == () and response.error_code == 0
    assert alter(c, SUBTRACT, "zz")[1].records == ()


def test_ids_that_are_already_members_have_arrived_and_are_not_registered():
    c = Ctx()
    static_group(c, n=2)
    _, result = alter(c, SET, "s0,e0")
    assert c.shard.expected_members("g") == ("e0",)
    assert result.records == (expected_members_record("g", ("e0",), applied=True),)


@pytest.mark.parametrize(
    "value, message",
    [
        ("a,,b", "cannot be empty"),
        ("x" * 250, "longer than 249"),
        ("pod/1", "contains a character"),
        ("a b", "contains a character"),
        ("é", "contains a character"),
    ],
)
def test_invalid_ids_are_invalid_config(value, message):
    c = Ctx()
    alter(c, SET, "keep")
    response, result = alter(c, APPEND, value)
    assert response.error_code == ErrorCode.invalid_config and message in response.error_message
    assert result.records == () and c.shard.expected_members("g") == ("keep",)


def test_longest_valid_id_and_every_legal_character():
    c = Ctx()
    assert alter(c, SET, "x" * 249 + ",A-z_0.9")[0].error_code == 0


def test_oversized_lists_are_invalid_config():
    c = Ctx()
    ids = [f"i{n}" for n in range(MAX_EXPECTED_INSTANCES)]
    assert alter(c, SET, ",".join(ids))[0].error_code == 0
    response, _ = alter(c, APPEND, "one-more")
    assert (
        response.error_code == ErrorCode.invalid_config
        and f"at most {MAX_EXPECTED_INSTANCES}" in response.error_message
    )
    response, _ = alter(c, SET, ",".join(ids + ["x"]))
    assert response.error_code == ErrorCode.invalid_config
    assert len(c.shard.expected_members("g")) == MAX_EXPECTED_INSTANCES


def test_unknown_config_names_operations_duplicates_and_the_default_group():
    c = Ctx()

    def run(ops: tuple[GroupConfigOp, ...], group: str = "g") -> object:
        handle, result = c.run("alter_group_configs", AlterGroupConfigs(group_id=group, ops=ops))
        assert result.records == ()
        return reply(result, handle)

    unknown = run((GroupConfigOp("consumer.session.timeout", SET, "45000"),))
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.invalid_config,
        "Unknown group config name: consumer.session.timeout",
    )
    assert run((GroupConfigOp(NAME, 7, "a"),)).error_code == ErrorCode.invalid_request
    duplicate = run((GroupConfigOp(NAME, SET, "a"), GroupConfigOp(NAME, APPEND, "b")))
    assert (duplicate.error_code, duplicate.error_message) == (
        ErrorCode.invalid_request,
        "Error due to duplicate config keys",
    )
    assert run((GroupConfigOp(NAME, SET, None),)).error_code == ErrorCode.invalid_config
    assert run((GroupConfigOp(NAME, SET, "a"),), group="").error_code == ErrorCode.invalid_request
    # a bad entry fails the whole resource: the valid one beside it is not applied
    mixed = run((GroupConfigOp(NAME, SET, "a"), GroupConfigOp("other", SET, "1")))
    assert mixed.error_code == ErrorCode.invalid_config and c.shard.expected_members("g") == ()


def test_validate_only_checks_and_changes_nothing():
    c = Ctx()
    handle, result = c.run(
        "alter_group_configs", AlterGroupConfigs(group_id="g", ops=(GroupConfigOp(NAME, SET, "a"),), validate_only=True)
    )
    assert reply(result, handle).error_code == 0 and result.records == () and c.shard.expected_members("g") == ()
    handle, result = c.run(
        "alter_group_configs",
        AlterGroupConfigs(group_id="g", ops=(GroupConfigOp(NAME, SET, "bad id"),), validate_only=True),
    )
    assert reply(result, handle).error_code == ErrorCode.invalid_config


def test_describe_shows_the_ids_still_missing():
    c = Ctx()
    default = describe(c, "nobody")
    assert default.error_code == 0
    entry = default.configs[-1]  # after Kafka's own group configs (test_kafka_group_configs.py)
    assert (entry.name, entry.value, entry.is_set) == (NAME, "", False) and "KIP-469" in entry.documentation
    static_group(c, n=1)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")  # arrived (not yet persisted in a generation)
    entry = describe(c).configs[-1]
    assert (entry.name, entry.value, entry.is_set) == (NAME, "e1", True)
    assert c.shard.expected_members("g") == ("e0", "e1")
    assert describe(c, "").error_code == ErrorCode.invalid_request


def test_a_failed_append_puts_the_previous_set_back():
    c = Ctx()
    alter(c, SET, "a")
    result = c.shard.alter_group_configs(AlterGroupConfigs(group_id="g", ops=(GroupConfigOp(NAME, APPEND, "b"),)), "hx")
    assert c.shard.expected_members("g") == ("a", "b")
    failed = c.shard.on_append_failed(result, ErrorCode.not_leader_or_follower)
    assert reply(failed, "hx").error_code == ErrorCode.not_coordinator
    assert c.shard.expected_members("g") == ("a",)


def test_replay_after_restart_keeps_the_expected_set_and_applies_tombstones():
    c = Ctx()
    alter(c, SET, "a,b")
    alter(c, SET, "b,c", group="other")
    alter(c, SUBTRACT, "a")

    def restarted(log: list[Record]) -> Ctx:
        fresh = Ctx()
        for record in log:
            fresh.shard.replay(Record(record.key, record.value))  # as read back from the log
        fresh.apply(fresh.shard.on_loaded())
        return fresh

    fresh = restarted(c.log)
    assert fresh.shard.expected_members("g") == ("b",) and fresh.shard.expected_members("other") == ("b", "c")
    assert fresh.shard.group("g") is None  # a registration does not create the group
    alter(c, DELETE, None)
    assert restarted(c.log).shard.expected_members("g") == ()


def restarted(c: Ctx) -> Ctx:
    """A new coordinator loading the partition c wrote."""
    fresh = Ctx()
    for record in c.log:
        fresh.shard.replay(Record(record.key, record.value))  # as read back from the log
    fresh.apply(fresh.shard.on_loaded())
    return fresh


def test_a_restarted_coordinator_resumes_holding_and_rebalances_at_the_last_arrival():
    c = Ctx()
    before = static_group(c, n=2)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")  # held: persisted in the group's record, no rebalance
    fresh = restarted(c)
    g = fresh.shard.group("g")
    assert g.state is GroupState.STABLE and g.generation_id == before and "e0" in g.static_members
    assert fresh.timer.deadline("expected-members-g") == fresh.clock.now_ms() + 20000
    fresh.join(group_instance_id="e1")
    react(fresh)
    react(fresh)
    assert g.generation_id == before + 1 and len(g.members) == 4 and fresh.shard.expected_members("g") == ()


def test_a_restarted_coordinator_ends_the_hold_at_the_rebalance_timeout():
    c = Ctx()
    before = static_group(c, n=2)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")
    fresh = restarted(c)
    for _ in range(20):
        react(fresh)
        fresh.sleep(1000)
    g = fresh.shard.group("g")
    assert g.state is GroupState.PREPARING_REBALANCE and fresh.shard.expected_members("g") == ("e0",)
    react(fresh)
    assert g.state is GroupState.STABLE and g.generation_id == before + 1 and len(g.members) == 3


def test_an_unknown_value_version_is_unreadable_and_unload_forgets_the_sets():
    c = Ctx()
    alter(c, SET, "a")
    with pytest.raises(ValueError):
        c.shard.replay(Record(b"\x7e\x00\x00\x01g", b"\x00\x09\x00"))  # the runtime skips such a record
    c.shard.on_unloaded()
    assert c.shard.expected_members("g") == ()


def test_the_registration_survives_deleting_the_group_and_batch_leave_leaves_it_alone():
    c = Ctx()
    static_group(c, n=2)
    alter(c, SET, "e0")
    handle, result = c.run(
        "leave_group", LeaveGroup(group_id="g", members=(MemberIdentity("", "s0"), MemberIdentity("", "s1")))
    )
    assert all(m.error_code == 0 for m in reply(result, handle).members)
    assert c.shard.group("g").state is GroupState.EMPTY and c.shard.expected_members("g") == ("e0",)
    handle, result = c.run("delete_groups", DeleteGroups(groups_names=("g",)))
    assert reply(result, handle).results[0].error_code == 0 and c.shard.group("g") is None
    assert c.shard.expected_members("g") == ("e0",)  # as a Kafka group config outlives its group
