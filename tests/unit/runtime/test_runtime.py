"""The coordinator runtime on a real asyncio loop and real logs: offsets topic, loading, routing, durable
group-committed writes, failure and unloading. Each test runs its own loop (`asyncio.run`)."""

from __future__ import annotations

import asyncio

import pytest

from herd.cluster.topics import OFFSETS_TOPIC
from herd.coordinator import CoordinatorError, ErrorCode
from herd.coordinator import GroupCoordinatorShard as Shard
from herd.coordinator.requests import Heartbeat, JoinGroup, LeaveGroup, MemberIdentity
from herd.coordinator.retention import RETENTION_KEY
from herd.log.fs import MemoryFileSystem
from herd.runtime import ShardState

from .helpers import (
    PROTOCOLS,
    commit,
    fetch,
    group_on,
    make_runtime,
    offsets_of,
    resolve,
    stable_group,
    started,
    until,
)


def test_offsets_topic_is_created_once_compacted_with_its_configured_partitions(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path, **{"offsets.topic.segment.bytes": "65536"}))
        topic = runtime._cluster.get(OFFSETS_TOPIC)
        assert len(topic.partitions) == 4 and topic.internal
        assert topic.configs["cleanup.policy"] == "compact" and topic.configs["segment.bytes"] == "65536"
        assert sorted(runtime.shards) == [0, 1, 2, 3]
        await runtime.close()
        runtime._cluster.close()

        # An existing topic keeps its partition count: group placement must not move under the data.
        again = await started(make_runtime(tmp_path, **{"offsets.topic.num.partitions": "7"}))
        assert again.num_partitions == 4 and sorted(again.shards) == [0, 1, 2, 3]
        await again.close()

    asyncio.run(main())


def test_groups_get_load_in_progress_until_their_partition_is_replayed(tmp_path):
    async def main() -> None:
        runtime = make_runtime(tmp_path)
        runtime.start()
        with pytest.raises(CoordinatorError) as e:
            runtime.call("g", Shard.offset_fetch, fetch("g", (0,)))
        assert e.value.code == ErrorCode.coordinator_load_in_progress
        with pytest.raises(CoordinatorError) as e:
            runtime.call_all(Shard.list_groups, None)
        assert e.value.code == ErrorCode.coordinator_load_in_progress
        assert runtime.hosts("g")
        await runtime.wait_loaded()
        assert offsets_of(await resolve(runtime.call("g", Shard.offset_fetch, fetch("g", (0,))))) == {0: -1}
        await runtime.close()

    asyncio.run(main())


def test_a_partition_this_node_does_not_host_answers_not_coordinator(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path), partitions=[1])
        hosted, elsewhere = group_on(runtime, 1), group_on(runtime, 2)
        assert runtime.hosts(hosted) and not runtime.hosts(elsewhere)
        with pytest.raises(CoordinatorError) as e:
            runtime.call(elsewhere, Shard.offset_commit, commit(elsewhere, {0: 5}))
        assert e.value.code == ErrorCode.not_coordinator
        response = await resolve(runtime.call(hosted, Shard.offset_commit, commit(hosted, {0: 5})))
        assert response.topics[0].partitions[0].error_code == ErrorCode.none
        await runtime.close()

    asyncio.run(main())


def test_commits_are_answered_after_one_shared_fsync(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path))
        group = group_on(runtime, 0)
        shard = runtime.shards[0]
        outcomes = [runtime.call(group, Shard.offset_commit, commit(group, {p: 10 + p})) for p in range(20)]
        assert all(isinstance(o, asyncio.Future) and not o.done() for o in outcomes), "answered before durable"
        assert shard.log.flushed_offset == 0
        responses = [await resolve(o) for o in outcomes]
        assert all(r.topics[0].partitions[0].error_code == ErrorCode.none for r in responses)
        assert (shard.writes, shard.fsyncs) == (20, 1)
        assert shard.log.flushed_offset == shard.log.log_end_offset == 20
        await runtime.close()

    asyncio.run(main())


def test_an_answer_without_records_waits_behind_earlier_writes(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path))
        group = group_on(runtime, 0)
        order: list[str] = []
        committed = runtime.call(group, Shard.offset_commit, commit(group, {0: 42}))
        fetched = runtime.call(group, Shard.offset_fetch, fetch(group, (0,)))
        assert isinstance(fetched, asyncio.Future), "a read overtook a pending write"
        committed.add_done_callback(lambda _: order.append("commit"))
        fetched.add_done_callback(lambda _: order.append("fetch"))
        assert offsets_of(await resolve(fetched)) == {0: 42}
        await resolve(committed)
        assert order == ["commit", "fetch"]
        # With nothing pending, a read is answered at once, without a future.
        assert offsets_of(runtime.call(group, Shard.offset_fetch, fetch(group, (0,)))) == {0: 42}
        await runtime.close()

    asyncio.run(main())


def test_the_heartbeat_fast_path_answers_as_the_general_path_and_yields_to_pending_writes(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path))
        group = group_on(runtime, 0)
        members = await stable_group(runtime, group, 2)
        cases = [(1, members[1], None), (2, members[1], None), (1, "nobody", None), (1, members[1], "nobody")]
        for generation, member, instance in cases:
            hb = Heartbeat(group_id=group, generation_id=generation, member_id=member, group_instance_id=instance)
            general = runtime.call(group, Shard.heartbeat, hb)
            assert runtime.heartbeat(group, generation, member, instance) == general.error_code
        assert runtime.heartbeat(group, 1, members[1], None) == ErrorCode.none
        # The fast path moved the session deadline, as a heartbeat must.
        member = runtime.shards[0].shard.group(group).member(members[1])
        before = member.session_deadline_ms
        await asyncio.sleep(0.01)
        runtime.heartbeat(group, 1, members[1], None)
        assert member.session_deadline_ms > before
        # Behind a pending write there is no fast answer: the caller goes through `call`, whose answer waits.
        committed = runtime.call(
            group, Shard.offset_commit, commit(group, {0: 1}, generation_id_or_member_epoch=1, member_id=members[1])
        )
        assert runtime.heartbeat(group, 1, members[1], None) is None
        waiting = runtime.call(group, Shard.heartbeat, Heartbeat(group_id=group, generation_id=1, member_id=members[1]))
        assert isinstance(waiting, asyncio.Future)
        await resolve(committed)
        assert (await resolve(waiting)).error_code == ErrorCode.none
        await runtime.unload_partition(1)
        with pytest.raises(CoordinatorError) as e:
            runtime.heartbeat(group_on(runtime, 1), 1, "m", None)
        assert e.value.code == ErrorCode.not_coordinator
        await runtime.close()

    asyncio.run(main())


def test_acknowledged_commits_and_groups_survive_a_crash(tmp_path):
    async def main() -> tuple[MemoryFileSystem, str, list[str]]:
        fs = MemoryFileSystem()
        runtime = await started(make_runtime(tmp_path, fs))
        group = group_on(runtime, 2)
        members = await stable_group(runtime, group, 2)
        request = commit(group, {0: 7, 1: 8}, generation_id_or_member_epoch=1, member_id=members[1])
        response = await resolve(runtime.call(group, Shard.offset_commit, request))
        assert [p.error_code for p in response.topics[0].partitions] == [ErrorCode.none, ErrorCode.none]
        return fs, group, members

    fs, group, members = asyncio.run(main())

    async def after_crash() -> None:
        runtime = await started(make_runtime(tmp_path, fs.crash()))  # only what was fsynced survives
        assert offsets_of(await resolve(runtime.call(group, Shard.offset_fetch, fetch(group, (0, 1))))) == {0: 7, 1: 8}
        loaded = runtime.shards[2].shard.group(group)
        assert loaded.state.value == "Stable" and list(loaded.members) == members
        assert loaded.generation_id == 1 and loaded.leader_id == members[0]
        # The reloaded members carry on where they were: their heartbeats are accepted.
        hb = Heartbeat(group_id=group, generation_id=1, member_id=members[1])
        assert (await resolve(runtime.call(group, Shard.heartbeat, hb))).error_code == ErrorCode.none
        await runtime.close()

    asyncio.run(after_crash())


def test_a_failed_fsync_answers_with_errors_and_fails_the_partition(tmp_path):
    async def main() -> None:
        fs = MemoryFileSystem()
        runtime = await started(make_runtime(tmp_path, fs))
        group = group_on(runtime, 3)
        fs.fail("fsync")
        response = await resolve(runtime.call(group, Shard.offset_commit, commit(group, {0: 1})))
        assert response.topics[0].partitions[0].error_code == ErrorCode.not_coordinator
        assert runtime.shards[3].state is ShardState.FAILED
        assert not runtime.hosts(group)
        with pytest.raises(CoordinatorError) as e:
            runtime.call(group, Shard.offset_fetch, fetch(group, (0,)))
        assert e.value.code == ErrorCode.not_coordinator
        other = group_on(runtime, 0)  # other partitions keep working
        response = await resolve(runtime.call(other, Shard.offset_commit, commit(other, {0: 1})))
        assert response.topics[0].partitions[0].error_code == ErrorCode.none

    asyncio.run(main())


def test_a_batch_larger_than_the_partition_accepts_is_refused_before_it_changes_anything(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path, **{"message.max.bytes": "2000"}))
        group = group_on(runtime, 0)
        response = await resolve(runtime.call(group, Shard.offset_commit, commit(group, {p: p for p in range(100)})))
        assert {p.error_code for p in response.topics[0].partitions} == {ErrorCode.invalid_commit_offset_size}
        assert runtime.shards[0].state is ShardState.ACTIVE and runtime.shards[0].log.log_end_offset == 0
        assert offsets_of(await resolve(runtime.call(group, Shard.offset_fetch, fetch(group, (0, 1))))) == {
            0: -1,
            1: -1,
        }
        await runtime.close()

    asyncio.run(main())


def test_a_refused_write_that_nothing_undoes_reloads_the_shard_so_live_state_stays_what_the_log_holds(tmp_path):
    """The group's last sessions expire and it becomes Empty in memory; its GroupMetadata record is refused
    (message.max.bytes lowered by the operator since). Kafka only logs that; herd fails the shard and reloads it,
    so the group is again what its log says (Stable, its members) instead of an Empty group no replay produces.
    Found by the coordinator simulator (tests/simulation, known issue 1 of issue 15)."""

    async def main() -> None:
        runtime = await started(make_runtime(tmp_path))
        group = group_on(runtime, 0)
        members = await stable_group(runtime, group, 2, session_timeout_ms=100)
        await runtime.close()
        runtime._cluster.close()

        again = await started(
            make_runtime(tmp_path, **{"message.max.bytes": "1", "herd.log.recovery.backoff.ms": "10"})
        )
        first = again.shards[0]
        end = first.log.log_end_offset
        await until(lambda: again.shards.get(0) not in (None, first) and again.shards[0].state is ShardState.ACTIVE)
        assert first.state is ShardState.FAILED and again.shards[0].log.log_end_offset == end
        reloaded = again.shards[0].shard.group(group)
        assert reloaded.state.value == "Stable" and sorted(reloaded.members) == sorted(members)
        await again.close()

    asyncio.run(main())


def test_unloading_answers_parked_joins_and_loading_again_replays_the_group(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path))
        group = group_on(runtime, 1)
        members = await stable_group(runtime, group, 2)
        join = dict(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, protocols=PROTOCOLS)
        newcomer = (await resolve(runtime.call(group, Shard.join_group, JoinGroup(**join)))).member_id
        parked = runtime.call(group, Shard.join_group, JoinGroup(member_id=newcomer, **join))
        assert isinstance(parked, asyncio.Future) and not parked.done()

        await runtime.unload_partition(1)
        assert (await resolve(parked)).error_code == ErrorCode.not_coordinator
        assert not runtime.hosts(group)
        with pytest.raises(CoordinatorError):
            runtime.call(group, Shard.heartbeat, Heartbeat(group_id=group, generation_id=1, member_id=members[0]))

        await runtime.load_partition(1)
        loaded = runtime.shards[1].shard.group(group)
        assert loaded.state.value == "Stable" and list(loaded.members) == members  # the rebalance was not persisted
        await runtime.close()

    asyncio.run(main())


def test_timers_run_on_the_loop_a_member_that_stops_is_expired(tmp_path):
    async def main() -> None:
        runtime = await started(make_runtime(tmp_path))
        group = group_on(runtime, 0)
        leader, follower = await stable_group(runtime, group, 2, session_timeout_ms=50)
        leave = LeaveGroup(group_id=group, members=(MemberIdentity(leader),))
        assert (await resolve(runtime.call(group, Shard.leave_group, leave))).members[0].error_code == 0
        # The follower never heartbeats: its session (50 ms) expires through the asyncio timer, and the group
        # ends up Empty, a state that is written to the log.
        shard = runtime.shards[0]
        await until(lambda: shard.shard.group(group).state.value == "Empty" and not shard.pending)
        assert follower not in shard.shard.group(group).members
        assert len(shard.timer) == 1 and shard.timer.deadline(RETENTION_KEY) is not None  # only offset retention
        await runtime.close()

    asyncio.run(main())
