"""Rebalance history on a manual clock: each cause, the member that started it, the phases and their durations,
late and dropped members, assignment sizes, bounding, the observer, the 0x7E01 record (exact bytes of its key,
round trip, replay after a restart, tombstones), and the read-only group config herd.rebalance.history."""

from __future__ import annotations

import json

import pytest

from herd.coordinator import CoordinatorConfig, ErrorCode, GroupState, Record
from herd.coordinator import history as history_module
from herd.coordinator.history import RebalanceHistory, consumer_partitions
from herd.coordinator.records import (
    REBALANCE_HISTORY_KEY_TYPE,
    decode_rebalance_history_value,
    group_tombstone,
    rebalance_history_tombstone,
    record_type,
)
from herd.coordinator.requests import (
    AlterGroupConfigs,
    DeleteGroups,
    DescribeGroupConfigs,
    GroupConfigOp,
    LeaveGroup,
    MemberIdentity,
    SyncGroup,
)

from .context import PROTOCOLS, Ctx, reply
from .test_preregistration import SET, alter, react, rejoin, static_group


def assignment(*partitions: int, topic: str = "t") -> bytes:
    """ConsumerProtocolAssignment v0: one topic with `partitions`, null user data."""
    body = len(partitions).to_bytes(4, "big") + b"".join(p.to_bytes(4, "big") for p in partitions)
    return b"\x00\x00" + b"\x00\x00\x00\x01" + len(topic).to_bytes(2, "big") + topic.encode() + body + b"\xff" * 4


def entries(c: Ctx, group: str = "g") -> list[dict]:
    return [e.to_json() for e in c.shard.rebalance_history(group)]


def last(c: Ctx, group: str = "g") -> dict:
    return entries(c, group)[-1]


def rebalance(c: Ctx, members: tuple[str, ...], times: int) -> None:
    """`times` rebalances of group "g": every member rejoins, then every member syncs."""
    for _ in range(times):
        for m in members:
            c.join(member_id=m)
        sync_all(c)


def sync_all(c: Ctx, group: str = "g", sizes: dict[str, int] | None = None) -> None:
    g = c.shard.group(group)
    given = {m: assignment(*range((sizes or {}).get(m, 1))) for m in g.members}
    c.sync(g.leader_id, g.generation_id, group, given)
    for m in [m for m in g.members if m != g.leader_id]:
        c.sync(m, g.generation_id, group)


def heartbeats(c: Ctx, ms: int, *members: str, group: str = "g") -> None:
    """`ms` pass, the members heartbeating every 5 s (alive, whatever else they fail to do)."""
    for _ in range(ms // 5000):
        c.sleep(5000)
        for m in members:
            if m in c.shard.group(group).members:
                c.heartbeat(m, c.shard.group(group).generation_id, group)


def reloaded(c: Ctx, config: CoordinatorConfig | None = None) -> Ctx:
    """A restart: a new shard replaying every record the first one wrote."""
    fresh = Ctx(config=config or c.config)
    fresh.clock.set(c.clock.now_ms())
    fresh.shard.replay_loaded_batch([(r.key, r.value) for r in c.log])
    fresh.shard.on_loaded()
    return fresh


# --- causes, phases, members ------------------------------------------------------------------------------


def test_a_new_group_records_its_first_rebalance_phases_and_assignment_sizes():
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=3000))
    h1, r1 = c.join()
    a = reply(r1, h1).member_id
    c.join(member_id=a)  # KIP-394: the member comes back with its id; the rebalance starts now
    c.clock.set(c.clock.now_ms() + 1200)
    h2, r2 = c.join()
    b = reply(r2, h2).member_id
    c.join(member_id=b)
    c.sleep(4800)  # KIP-134: b's arrival extended the initial delay by 3 s; it ends the join phase at 6 s
    c.clock.set(c.clock.now_ms() + 40)
    g = c.shard.group("g")
    c.sync(a, 1, assignments={a: assignment(0, 1, 2), b: b""})
    e = last(c)
    assert (e["cause"], e["member_id"], e["from_generation"], e["generation"]) == ("member-join", a, 0, 1)
    assert (e["join_ms"], e["sync_ms"], e["join_end"], e["outcome"]) == (6000, 40, "initial-delay", "stable")
    assert (e["protocol"], e["leader"], e["members_total"]) == ("range", g.leader_id, 2)
    assert [(m["member_id"], m["joined_after_ms"], m["partitions"]) for m in e["members"]] == [(a, 0, 3), (b, 1200, 0)]
    assert e["late"] == [{"member_id": b, "group_instance_id": None, "after_ms": 1200}]
    assert e["completed_ms"] - e["started_ms"] == 6040 and e["dropped"] == []


def test_late_members_are_listed_latest_first_with_how_long_after_the_first():
    c = Ctx()
    a, b, d = c.stable_group(3)
    c.join(member_id=a)  # the leader asks for a rebalance
    c.clock.set(c.clock.now_ms() + 250)
    c.join(member_id=d)
    c.clock.set(c.clock.now_ms() + 500)
    c.join(member_id=b)  # the last one: the join phase ends at once
    e = last(c)
    assert (e["cause"], e["member_id"], e["join_end"], e["join_ms"]) == ("leader-rejoin", a, "all-joined", 750)
    assert [m["after_ms"] for m in e["late"]] == [750, 250] and [m["member_id"] for m in e["late"]] == [b, d]
    assert {m["member_id"]: m["joined_after_ms"] for m in e["members"]} == {a: 0, d: 250, b: 750}
    assert e["outcome"] is None and e["sync_ms"] is None  # the sync phase runs


def test_members_that_miss_the_join_phase_are_dropped_when_the_rebalance_timeout_ends_it():
    c = Ctx()
    a, b = c.stable_group(2)
    c.join(member_id=b, protocols=PROTOCOLS[::-1])  # a follower's new metadata
    for _ in range(4):  # the leader keeps heartbeating but never rejoins
        c.sleep(5000)
        c.heartbeat(a, 1)
    e = last(c)
    assert (e["cause"], e["member_id"], e["join_end"], e["generation"]) == (
        "protocol-change",
        b,
        "rebalance-timeout",
        2,
    )
    assert e["dropped"] == [{"member_id": a, "group_instance_id": None, "phase": "join"}]
    assert [m["member_id"] for m in e["members"]] == [b] and e["join_ms"] == 20000 and e["leader"] == b


def test_members_that_miss_the_sync_are_dropped_from_their_generation_and_start_a_sync_timeout_rebalance():
    c = Ctx()
    a, b = c.stable_group(2)
    c.join(member_id=a)
    c.join(member_id=b)
    c.sync(a, 2, assignments={a: b"", b: b""})  # the leader syncs (the generation is Stable); b never does
    heartbeats(c, 20000, a, b)
    generation, following = entries(c)[-2:]
    assert generation["generation"] == 2 and generation["outcome"] == "stable"
    assert generation["dropped"] == [{"member_id": b, "group_instance_id": None, "phase": "sync"}]
    assert (following["cause"], following["member_id"], following["from_generation"]) == ("sync-timeout", b, 2)

    c = Ctx()
    a, b = c.stable_group(2)
    c.join(member_id=a)
    c.join(member_id=b)
    heartbeats(c, 20000, a, b)  # nobody syncs, the leader neither: the generation never completes
    generation, following = entries(c)[-2:]
    assert generation["outcome"] == "superseded-by-sync-timeout" and generation["sync_ms"] == 20000
    assert [d["member_id"] for d in generation["dropped"]] == [a, b] and following["member_id"] is None


def test_a_session_timeout_names_the_member_and_one_during_the_join_phase_drops_it():
    c = Ctx()
    a, b = c.stable_group(2)
    for _ in range(3):
        c.sleep(4000)
        c.heartbeat(a, 1)
    e = last(c)  # b's 10 s session ended
    assert (e["cause"], e["member_id"], e["from_generation"]) == ("session-timeout", b, 1)
    assert "heartbeat expiration" in e["reason"]

    c = Ctx()
    a, b, d = c.stable_group(3)
    c.join(member_id=a)  # a rebalance; b rejoins, d is silent
    c.join(member_id=b)
    c.sleep(10000)  # d's session ends inside the join phase: it is dropped, the phase completes
    e = last(c)
    assert e["dropped"] == [{"member_id": d, "group_instance_id": None, "phase": "join"}]
    assert e["join_end"] == "all-joined" and e["generation"] == 2


def test_a_member_leaving_keeps_its_kip800_reason_and_an_admin_removal_is_told_apart():
    c = Ctx()
    a, b = c.stable_group(2)
    c.run("leave_group", LeaveGroup(group_id="g", members=(MemberIdentity(b, reason="the consumer is closing"),)))
    e = last(c)
    assert (e["cause"], e["member_id"]) == ("member-leave", b) and "the consumer is closing" in e["reason"]

    c = Ctx()
    for i in range(2):
        c.join(group_instance_id=f"s{i}")
    c.sleep(0)
    react(c)
    who = MemberIdentity(group_instance_id="s1", reason="member was removed by an admin")  # KIP-345 + KIP-800
    c.run("leave_group", LeaveGroup(group_id="g", members=(who,)))
    e = last(c)
    assert (e["cause"], e["member_id"], e["group_instance_id"]) == ("admin-removal", None, "s1")

    c = Ctx()
    a, b = c.stable_group(2)  # Kafka's admin client removing a dynamic member names it, with its reason
    c.run(
        "leave_group",
        LeaveGroup(group_id="g", members=(MemberIdentity(b, reason="member was removed by an admin: scaling down"),)),
    )
    assert last(c)["cause"] == "admin-removal"


def test_a_static_member_replaced_while_completing_rebalance_is_its_own_cause():
    c = Ctx()
    for i in range(2):
        c.join(group_instance_id=f"s{i}")
    c.sleep(0)
    react(c)
    g = c.shard.group("g")
    for m in list(g.members.values()):
        c.join(member_id=m.member_id, group_instance_id=m.group_instance_id, protocols=PROTOCOLS[::-1])
    assert g.state is GroupState.COMPLETING_REBALANCE
    c.join(group_instance_id="s1", protocols=PROTOCOLS[::-1])  # s1 restarted: a new member id
    e = last(c)
    assert (e["cause"], e["group_instance_id"]) == ("static-member-replaced", "s1")
    assert e["member_id"] == g.static_members["s1"] and e["member_id"].startswith("s1-")
    assert entries(c)[-2]["outcome"] == "superseded-by-static-member-replaced"


def test_kip469s_last_arrival_starts_an_expected_members_complete_rebalance():
    c = Ctx()
    static_group(c)
    alter(c, SET, "e0,e1")
    c.join(group_instance_id="e0")  # held: no rebalance
    assert last(c)["cause"] == "member-join"  # still the group's first rebalance
    c.join(group_instance_id="e1")
    e = last(c)
    assert (e["cause"], e["group_instance_id"]) == ("expected-members-complete", "e1")
    rejoin(c)
    assert last(c)["join_end"] == "all-joined" and last(c)["generation"] is not None


def test_the_first_rebalance_after_a_load_started_by_a_rejoining_member_is_coordinator_moved():
    c = Ctx()
    a, b = c.stable_group(2)
    fresh = reloaded(c)
    assert entries(fresh) == entries(c)  # the history survived the restart
    fresh.join(member_id=a)  # the leader was rebalancing when the coordinator moved: it rejoins
    e = last(fresh)
    assert e["cause"] == "coordinator-moved" and e["member_id"] == a and "leader-rejoin" in e["reason"]
    fresh.join(member_id=b)
    sync_all(fresh)
    fresh.join(member_id=a)
    assert last(fresh)["cause"] == "leader-rejoin"  # only the first one

    later = reloaded(c)
    heartbeats(later, 25000, a, b)  # past the rebalance timeout (20 s) of the load: an ordinary rejoin
    later.join(member_id=a)
    assert last(later)["cause"] == "leader-rejoin"


def test_a_failed_generation_write_reopens_its_entry_and_the_append_failure_supersedes_it():
    c = Ctx()
    a, b = c.stable_group(2)
    c.join(member_id=a)
    c.join(member_id=b)
    result = c.shard.sync_group(SyncGroup(group_id="g", generation_id=2, member_id=a, assignments=()), "sync")
    assert entries(c)[-1]["outcome"] == "stable"
    c.apply(c.shard.on_append_failed(result, ErrorCode.not_coordinator))
    failed, following = entries(c)[-2:]
    assert failed["generation"] == 2 and failed["outcome"] == "superseded-by-append-failure"
    assert (following["cause"], following["member_id"]) == ("append-failure", a)


def test_the_last_member_leaving_ends_in_an_empty_generation():
    c = Ctx()
    (a,) = c.stable_group(1)
    c.run("leave_group", LeaveGroup(group_id="g", member_id=a, api_version=0))
    e = last(c)
    assert (e["cause"], e["generation"], e["outcome"], e["members"], e["sync_ms"]) == (
        "member-leave",
        2,
        "empty",
        [],
        None,
    )


# --- bounding, observer, partitions -----------------------------------------------------------------------


def test_each_group_keeps_its_last_n_rebalances_and_the_record_stays_under_its_byte_bound(monkeypatch):
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=0, rebalance_history_size=3))
    a, b = c.stable_group(2)
    rebalance(c, (a, b), 4)
    assert [e["generation"] for e in entries(c)] == [3, 4, 5]
    assert [e["generation"] for e in entries(reloaded(c))] == [3, 4, 5]
    full = len(c.shard.history.record("g").value)
    monkeypatch.setattr(history_module, "MAX_RECORD_BYTES", full - 1)  # the oldest entry goes
    trimmed = c.shard.history.record("g").value
    assert len(trimmed) <= full - 1 and [e.generation for e in decode_rebalance_history_value(trimmed)] == [4, 5]
    full = len(trimmed)
    assert len(c.shard.history.record("g", budget=full - 1).value) <= full - 1  # left out of the record only
    assert len(c.shard.rebalance_history("g")) == 2 and c.shard.history.record("g", budget=10) is None
    monkeypatch.setattr(history_module, "MAX_RECORD_BYTES", 1)  # the newest entry is kept, whatever its size
    record = c.shard.history.record("g")
    assert len(decode_rebalance_history_value(record.value)) == 1 and len(c.shard.rebalance_history("g")) == 1


def test_a_batch_without_room_for_the_history_is_written_without_it():
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=0, history_batch_bytes=100))
    (a,) = c.stable_group(1)  # its GroupMetadata record alone takes more than 100 bytes
    assert [record_type(r.key) for r in c.log] == [2, 2] and len(c.shard.rebalance_history("g")) == 1


def test_with_a_size_of_zero_nothing_is_kept_or_written_but_the_observer_still_sees_rebalances():
    c = Ctx(config=CoordinatorConfig(group_initial_rebalance_delay_ms=0, rebalance_history_size=0))
    seen: list[str] = []
    c.shard.history.observer = lambda event, group, entry: seen.append(event)
    (a,) = c.stable_group(1)
    assert seen == ["started", "joined", "completed"] and c.shard.rebalance_history("g") == ()
    assert all(record_type(r.key) != REBALANCE_HISTORY_KEY_TYPE for r in c.log)
    c.run("leave_group", LeaveGroup(group_id="g", member_id=a, api_version=0))
    h, r = c.run("delete_groups", DeleteGroups(groups_names=("g",)))
    assert r.records[-1] == rebalance_history_tombstone("g")  # a record written before the size was 0 goes


def test_the_observer_sees_started_joined_completed_and_cannot_break_the_coordinator(caplog):
    c = Ctx()
    seen: list[tuple[str, str, str | None]] = []
    c.shard.history.observer = lambda event, group, entry: seen.append((event, group, entry.outcome))
    c.stable_group(1)
    assert seen == [("started", "g", None), ("joined", "g", None), ("completed", "g", "stable")]

    def broken(event: str, group: str, entry: object) -> None:
        raise RuntimeError("metrics are down")

    c.shard.history.observer = broken
    (a,) = c.shard.group("g").members
    c.join(member_id=a)
    sync_all(c)
    assert last(c)["outcome"] == "stable" and "metrics are down" in caplog.text


def test_consumer_partitions_counts_any_assignment_cheaply():
    assert consumer_partitions(assignment(0, 1, 2)) == 3 and consumer_partitions(b"") == 0
    two_topics = (
        b"\x00\x01\x00\x00\x00\x02"
        + b"\x00\x01a\x00\x00\x00\x01\x00\x00\x00\x00"
        + b"\x00\x01b\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01"
        + b"\x00\x00\x00\x00"
    )
    assert consumer_partitions(two_topics) == 3
    assert consumer_partitions(b"\x00\x00\x00\x00\x00\x05\x00") is None  # truncated
    history = RebalanceHistory(2)
    history.start("g", "member-join", "r", 0, 0, "m")
    history.join_completed("g", 1, "x", "m", [("m", None, "c", "h", True)], "all-joined", 5)
    history.finish("g", {"m": b"not the consumer protocol"}, False, 6)
    assert history.of("g")[0].members[0].partitions is None  # another protocol type: unknown


# --- the record, replay, tombstones, the group config -------------------------------------------------------


def test_the_record_is_written_with_the_generation_round_trips_and_is_replayed_after_a_restart():
    c = Ctx()
    a, b = c.stable_group(2)
    c.clock.set(c.clock.now_ms() + 100)
    c.join(member_id=b, protocols=PROTOCOLS[::-1])
    c.clock.set(c.clock.now_ms() + 30)
    c.join(member_id=a, protocols=PROTOCOLS[::-1])
    c.clock.set(c.clock.now_ms() + 7)
    _, synced = c.sync(a, 2, assignments={a: assignment(0), b: assignment(1, 2)})
    history = [r for r in synced.records if record_type(r.key) == REBALANCE_HISTORY_KEY_TYPE]
    assert len(history) == 1 and history[0].applied and history[0].key == b"\x7e\x01\x00\x01g"
    assert synced.records[0].key[:2] == b"\x00\x02"  # in the batch that writes the generation
    fresh = reloaded(c)
    assert entries(fresh) == entries(c) and len(entries(c)) == 2
    e = last(fresh)
    assert [(m["joined_after_ms"], m["partitions"]) for m in e["members"]] == [(30, 1), (0, 2)]
    assert (e["join_ms"], e["sync_ms"], e["cause"]) == (30, 7, "protocol-change")


def test_deleting_the_group_writes_the_history_tombstone_and_the_replay_forgets_it():
    c = Ctx()
    (a,) = c.stable_group(1)
    c.run("leave_group", LeaveGroup(group_id="g", member_id=a, api_version=0))
    h, r = c.run("delete_groups", DeleteGroups(groups_names=("g",)))
    assert r.records == (group_tombstone("g"), rebalance_history_tombstone("g"))
    assert c.shard.rebalance_history("g") == () and reloaded(c).shard.rebalance_history("g") == ()


def test_the_read_only_group_config_answers_the_json_only_when_named_and_refuses_changes():
    c = Ctx()
    c.stable_group(2)
    h, r = c.run("describe_group_configs", DescribeGroupConfigs(group_id="g"))
    names = [e.name for e in reply(r, h).configs]
    assert "herd.rebalance.history" not in names and names[-1] == "herd.expected.instance.ids"
    h, r = c.run("describe_group_configs", DescribeGroupConfigs(group_id="g", include_history=True))
    entry = reply(r, h).configs[-1]
    assert (entry.name, entry.read_only, entry.kind, entry.is_set) == ("herd.rebalance.history", True, "string", True)
    value = json.loads(entry.value)
    assert (value["group"], value["state"], value["omitted"]) == ("g", "Stable", 0)
    assert value["rebalances"] == entries(c)
    h, r = c.run("describe_group_configs", DescribeGroupConfigs(group_id="nope", include_history=True))
    assert json.loads(reply(r, h).configs[-1].value) == {
        "group": "nope",
        "state": "Dead",
        "rebalances": [],
        "omitted": 0,
    }
    op = GroupConfigOp("herd.rebalance.history", SET, "[]")
    h, r = c.run("alter_group_configs", AlterGroupConfigs(group_id="g", ops=(op,)))
    refused = reply(r, h)
    assert refused.error_code == ErrorCode.invalid_request and r.records == ()
    assert refused.error_message == "Cannot update these configs dynamically: Set(herd.rebalance.history)"


def test_the_json_leaves_out_the_oldest_rebalances_beyond_its_size(monkeypatch):
    from herd.coordinator import group_configs

    c = Ctx()
    a, b = c.stable_group(2)
    rebalance(c, (a, b), 3)
    monkeypatch.setattr(group_configs, "MAX_HISTORY_JSON", 2000)
    value = json.loads(c.shard.rebalance_history_json("g"))
    assert value["omitted"] >= 1 and value["rebalances"] == entries(c)[value["omitted"] :]


def test_below_describe_configs_v4_the_json_fits_a_legacy_string(monkeypatch):
    """DescribeConfigs v0-3 strings hold at most 32,767 bytes: the oldest rebalances are left out to fit."""
    c = Ctx()
    a, b = c.stable_group(2)
    rebalance(c, (a, b), 12)
    whole = json.loads(c.shard.rebalance_history_json("g"))
    from herd.coordinator import group_configs

    monkeypatch.setattr(group_configs, "MAX_LEGACY_STRING", 2000)
    for version, limit in ((3, 2000), (4, 10**9)):
        h, r = c.run(
            "describe_group_configs", DescribeGroupConfigs(group_id="g", include_history=True, api_version=version)
        )
        value = reply(r, h).configs[-1].value
        assert len(value.encode()) <= limit
        parsed = json.loads(value)
        assert parsed["rebalances"] == whole["rebalances"][parsed["omitted"] :]
        assert (parsed["omitted"] > 0) == (version == 3)


def test_an_entry_larger_than_the_limit_is_left_out_too(monkeypatch):
    """Even the newest entry goes when it alone does not fit: the value stays within the legacy string's bytes."""
    from herd.coordinator import group_configs

    c = Ctx()
    c.stable_group(2)
    monkeypatch.setattr(group_configs, "MAX_LEGACY_STRING", 120)
    h, r = c.run("describe_group_configs", DescribeGroupConfigs(group_id="g", include_history=True, api_version=3))
    value = reply(r, h).configs[-1].value
    assert len(value.encode()) <= 120
    assert json.loads(value) == {"group": "g", "state": "Stable", "rebalances": [], "omitted": len(entries(c))}


@pytest.mark.parametrize("record", [Record(b"\x7e\x01\x00\x01g", b"\x00\x07garbage"), Record(b"\x7e\x01", b"")])
def test_an_unreadable_history_record_is_skipped_on_load(record: Record):
    c = Ctx()
    assert c.shard.replay_loaded_batch([(record.key, record.value)]) == 1
    assert c.shard.rebalance_history("g") == ()


def test_the_spark_consumer_offsets_reader_types_the_record():
    from herd.spark.consumer_offsets import decode_record

    c = Ctx()
    c.stable_group(1)
    (record,) = [r for r in c.log if record_type(r.key) == REBALANCE_HISTORY_KEY_TYPE]
    assert decode_record(record.key, record.value) == {
        "kind": "rebalance_history",
        "group": "g",
        "tombstone": False,
        "generation": 1,
    }
    assert decode_record(record.key, None) == {"kind": "rebalance_history", "group": "g", "tombstone": True}
    assert decode_record(record.key, b"\x00\x00\x09")["kind"] == "unknown"  # unreadable: one odd row, no failure


def test_log_compaction_keeps_the_latest_history_of_each_group_and_drops_a_deleted_groups():
    """The shard's batches in a compacted `__consumer_offsets` segment log: a restart replaying what compaction
    left has the same history; a deleted group's history is gone once its tombstone has been cleaned too."""
    from herd.log import compaction
    from herd.log.api import LogConfig
    from herd.log.fs import MemoryFileSystem
    from herd.log.store import SegmentStore
    from herd.runtime.batches import decode_batches, encode_batch

    c = Ctx()
    a, b = c.stable_group(2)
    rebalance(c, (a, b), 3)
    (gone,) = c.stable_group(1, group="gone")
    c.run("leave_group", LeaveGroup(group_id="gone", member_id=gone, api_version=0))
    c.run("delete_groups", DeleteGroups(groups_names=("gone",)))
    log = SegmentStore("/data", MemoryFileSystem()).open_partition(
        "__consumer_offsets", 0, LogConfig(segment_bytes=2000, index_interval_bytes=100, cleanup_policy="compact")
    )
    for record in c.log:  # one batch per record is enough here
        log.append(encode_batch([record], 0), 0)
    log.roll()  # every batch in a sealed segment: compaction may clean them all
    log.flush()
    plan = compaction.plan(log, now_ms=10**12, delete_retention_ms=0, force=True)  # tombstones are old enough
    compaction.install(log, compaction.clean(plan))
    kept, offset = [], log.log_start_offset
    while offset < log.log_end_offset:  # a read stops at the end of a segment
        for offset, records in decode_batches(log.read(offset, 1 << 24)):  # noqa: B007, B020 (the next read starts there)
            kept += records
    assert len(kept) < len(c.log)
    assert sum(record_type(k) == REBALANCE_HISTORY_KEY_TYPE for k, _ in kept) == 1  # g's latest; gone's: none
    fresh = Ctx()
    fresh.shard.replay_loaded_batch(kept)
    fresh.shard.on_loaded()
    assert entries(fresh) == entries(c) and fresh.shard.rebalance_history("gone") == ()
