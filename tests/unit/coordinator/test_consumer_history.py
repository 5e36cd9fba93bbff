"""The rebalance history of KIP-848 consumer groups (history.py, consumer_heartbeat.py): an entry per group epoch
bump with its cause, the target assignment as its join phase, "stable" once every member reconciled (sync_ms is
how long that took), "empty" when the last member goes, superseded by the next bump; written with the heartbeat
that closes it, replayed after a restart, tombstoned with the group; the JSON of herd.rebalance.history."""

from __future__ import annotations

import json

from herd.coordinator.consumer.group import ConsumerGroupState
from herd.coordinator.records import rebalance_history_tombstone
from herd.coordinator.requests import DeleteGroups, DescribeGroupConfigs

from .context import reply
from .test_consumer_heartbeat import Consumer, foo, new_ctx
from .test_history_core import reloaded


def entries(ctx, group: str = "g") -> list[dict]:
    return [e.to_json() for e in ctx.shard.rebalance_history(group)]


def brief(e: dict) -> tuple:
    return e["group_type"], e["cause"], e["from_generation"], e["generation"], e["outcome"]


def test_a_join_is_an_entry_that_is_stable_once_every_member_reconciled() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a", client_id="ca"), Consumer(ctx, "b")
    a.heartbeat()
    (first,) = entries(ctx)
    assert brief(first) == ("consumer", "member-join", 0, 1, "stable")
    assert (first["member_id"], first["join_end"], first["protocol"], first["sync_ms"]) == (
        "a",
        "target-assignment",
        "uniform",
        0,
    )
    assert [(m["member_id"], m["client_id"], m["partitions"]) for m in first["members"]] == [("a", "ca", 6)]
    ctx.sleep(100)
    b.heartbeat()  # epoch 2: b's target is half of a's partitions, still a's to revoke
    running = entries(ctx)[-1]
    assert brief(running) == ("consumer", "member-join", 1, 2, None) and running["join_ms"] == 0
    assert sorted((m["member_id"], m["partitions"]) for m in running["members"]) == [("a", 3), ("b", 3)]
    ctx.sleep(200)
    a.heartbeat()  # a revokes
    a.heartbeat(owned=a.owned)  # and reaches epoch 2
    assert entries(ctx)[-1]["outcome"] is None  # b has not
    ctx.sleep(300)
    b.heartbeat()
    done = entries(ctx)[-1]
    assert brief(done) == ("consumer", "member-join", 1, 2, "stable") and done["sync_ms"] == 500
    assert ctx.shard.consumer_group("g").state is ConsumerGroupState.STABLE
    assert ctx.log[-1].key == rebalance_history_tombstone("g").key  # written with b's heartbeat


def test_leaves_timeouts_and_the_last_member_gone() -> None:
    ctx = new_ctx()
    a, b = Consumer(ctx, "a"), Consumer(ctx, "b")
    a.heartbeat(), b.heartbeat(), a.heartbeat(), a.heartbeat(owned=a.owned), b.heartbeat()
    b.heartbeat(member_epoch=-1)
    leave = entries(ctx)[-1]
    assert brief(leave)[:4] == ("consumer", "member-leave", 2, 3) and leave["member_id"] == "b"
    a.heartbeat()
    assert entries(ctx)[-1]["outcome"] == "stable" and a.owned == foo(0, 1, 2, 3, 4, 5)
    ctx.sleep(45_001)  # a is silent
    gone = entries(ctx)[-1]
    assert brief(gone) == ("consumer", "session-timeout", 3, 4, "empty")
    assert gone["reason"] == "member a fenced: the member session expired"
    assert [e["cause"] for e in entries(reloaded(ctx))] == ["member-join", "member-join", "member-leave",
                                                           "session-timeout"]  # fmt: skip


def test_a_bump_before_reconciliation_supersedes_the_running_entry() -> None:
    ctx = new_ctx()
    a, b, c = Consumer(ctx, "a"), Consumer(ctx, "b"), Consumer(ctx, "c", topics=("foo", "bar"))
    a.heartbeat(), b.heartbeat(), c.heartbeat()
    assert [brief(e) for e in entries(ctx)] == [
        ("consumer", "member-join", 0, 1, "stable"),
        ("consumer", "member-join", 1, 2, "superseded-by-member-join"),
        ("consumer", "member-join", 2, 3, None),
    ]
    a.heartbeat(full=True, subscribed_topic_names=("bar",))
    assert entries(ctx)[-1]["cause"] == "subscription-change" and entries(ctx)[-2]["outcome"].startswith("superseded")


def test_the_json_of_herd_rebalance_history_and_the_tombstone_when_the_group_is_deleted() -> None:
    ctx = new_ctx()
    a = Consumer(ctx, "a")
    a.heartbeat()
    handle, result = ctx.run("describe_group_configs", DescribeGroupConfigs(group_id="g", include_history=True))
    value = json.loads(reply(result, handle).configs[-1].value)
    assert (value["state"], [brief(e) for e in value["rebalances"]]) == (
        "Stable",
        [("consumer", "member-join", 0, 1, "stable")],
    )
    a.heartbeat(member_epoch=-1)
    handle, result = ctx.run("delete_groups", DeleteGroups(groups_names=("g",)))
    assert rebalance_history_tombstone("g") in result.records
    assert entries(ctx) == [] and entries(reloaded(ctx)) == []
