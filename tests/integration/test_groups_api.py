"""The group APIs byte for byte, at every version herd serves, through a raw kio client over a real socket;
and the NOT_COORDINATOR path of a node that does not host a group's `__consumer_offsets` partition.

The module's broker runs on both backends (tests/backends.py). The raw client talks to one node: on a cluster
that is the coordinator of every group (the cluster runs a single `__consumer_offsets` partition), which is
where a client that found the coordinator sends these requests."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from backends import BACKENDS, embedded_only, start_broker
from inprocess import InProcessBroker
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, part, req

from herd.testing.wait import wait_until

JOIN, SYNC, HEARTBEAT, LEAVE, DESCRIBE, LIST, DELETE, COMMIT, FETCH, FIND = 11, 14, 12, 13, 15, 16, 42, 8, 9, 10


def join(c: RawClient, v: int, group: str, member_id: str = "", **kw: Any) -> Any:
    fields = dict(
        group_id=group,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        reason="test",
        protocols=(part(JOIN, v, "JoinGroupRequestProtocol", name="range", metadata=b"meta"),),
    )
    fields.update(kw)
    return c.request(JOIN, v, req(JOIN, v, **fields))


def joined(c: RawClient, v: int, group: str) -> Any:
    first = join(c, v, group)
    if v < 4:
        return first
    assert first.error_code == ErrorCode.member_id_required and first.member_id.startswith("raw-")
    return join(c, v, group, member_id=first.member_id)


@pytest.fixture(scope="module", params=BACKENDS)
def broker(request, tmp_path_factory):
    with start_broker(
        request, tmp_path_factory, "groups-api", {"offsets.topic.num.partitions": "5"}, single_coordinator=True
    ) as b:
        yield b


@pytest.fixture(scope="module")
def topic_id(broker):
    with RawClient(broker.port) as c:
        response = c.request(
            19,
            7,
            req(
                19,
                7,
                timeout=10_000,
                validate_only=False,
                topics=(
                    part(
                        19,
                        7,
                        "CreatableTopic",
                        name="data",
                        num_partitions=3,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    ),
                ),
            ),
        )
        return response.topics[0].topic_id


@pytest.mark.parametrize("v", range(10))
def test_join_sync_heartbeat_leave_describe_at_every_version(broker, v):
    group = f"api-{v}"
    sv, hv, lv, dv = min(v, 5), min(v, 4), min(v, 5), min(v, 6)
    with RawClient(broker.port) as c:
        r = joined(c, v, group)
        assert r.error_code == ErrorCode.none and r.generation_id == 1 and r.leader == r.member_id
        assert r.protocol_name == "range" and [(m.member_id, m.metadata) for m in r.members] == [(r.member_id, b"meta")]
        if v >= 7:
            assert r.protocol_type == "consumer"
        me = r.member_id

        assignment = (part(SYNC, sv, "SyncGroupRequestAssignment", member_id=me, assignment=b"mine"),)
        s = c.request(
            SYNC,
            sv,
            req(
                SYNC,
                sv,
                group_id=group,
                generation_id=1,
                member_id=me,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=assignment,
            ),
        )
        assert s.error_code == ErrorCode.none and s.assignment == b"mine"
        if sv >= 5:
            assert (s.protocol_type, s.protocol_name) == ("consumer", "range")

        def heartbeat(generation: int, member: str) -> ErrorCode:
            return c.request(
                HEARTBEAT,
                hv,
                req(HEARTBEAT, hv, group_id=group, generation_id=generation, member_id=member, group_instance_id=None),
            ).error_code

        assert heartbeat(1, me) == ErrorCode.none
        assert heartbeat(2, me) == ErrorCode.illegal_generation
        assert heartbeat(1, "nobody") == ErrorCode.unknown_member_id

        d = c.request(DESCRIBE, dv, req(DESCRIBE, dv, groups=(group,), include_authorized_operations=False))
        g = d.groups[0]
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
        assert [
            (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment) for m in g.members
        ] == [(me, "raw", "/127.0.0.1", b"meta", b"mine")]

        members = (part(LEAVE, lv, "MemberIdentity", member_id=me, group_instance_id=None, reason="done"),)
        left = c.request(LEAVE, lv, req(LEAVE, lv, group_id=group, member_id=me, members=members))
        assert left.error_code == ErrorCode.none
        if lv >= 3:
            assert [(m.member_id, m.error_code) for m in left.members] == [(me, ErrorCode.none)]
        d = c.request(DESCRIBE, dv, req(DESCRIBE, dv, groups=(group,), include_authorized_operations=False))
        assert (d.groups[0].group_state, d.groups[0].members) == ("Empty", ())


@pytest.mark.parametrize("v", range(2, 11))
def test_commit_and_fetch_offsets_at_every_version(broker, topic_id, v):
    group = f"offsets-{v}"
    fv = v if v > 1 else 1
    with RawClient(broker.port) as c:
        topic = part(
            COMMIT,
            v,
            "OffsetCommitRequestTopic",
            name="data",
            topic_id=topic_id,
            partitions=tuple(
                part(
                    COMMIT,
                    v,
                    "OffsetCommitRequestPartition",
                    partition_index=p,
                    committed_offset=100 + p,
                    committed_leader_epoch=3,
                    committed_metadata=f"m{p}",
                )
                for p in range(3)
            ),
        )
        r = c.request(
            COMMIT,
            v,
            req(
                COMMIT,
                v,
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                retention_time=-1,
                topics=(topic,),
            ),
        )
        assert [(p.partition_index, p.error_code) for p in r.topics[0].partitions] == [(p, 0) for p in range(3)]
        assert (r.topics[0].topic_id if v >= 10 else r.topics[0].name) == (topic_id if v >= 10 else "data")

        got = _fetch(c, fv, group, topic_id, (0, 1, 2, 7))
        assert got == {0: (100, "m0"), 1: (101, "m1"), 2: (102, "m2"), 7: (-1, "")}


def _fetch(c: RawClient, v: int, group: str, topic_id: Any, partitions: tuple[int, ...]) -> dict[int, tuple]:
    suffix = "s" if v >= 8 else ""
    ids = {"topic_id": topic_id} if v >= 8 else {}  # v1-v7's OffsetFetchRequestTopic has no id field
    topic = part(FETCH, v, "OffsetFetchRequestTopic" + suffix, name="data", **ids, partition_indexes=partitions)
    group_entry = part(FETCH, v, "OffsetFetchRequestGroup", group_id=group, topics=(topic,)) if v >= 8 else None
    r = c.request(FETCH, v, req(FETCH, v, group_id=group, topics=(topic,), groups=(group_entry,), require_stable=False))
    topics = r.groups[0].topics if v >= 8 else r.topics
    return {p.partition_index: (p.committed_offset, p.metadata) for t in topics for p in t.partitions}


@pytest.mark.parametrize("v", range(1, 11))
def test_offset_fetch_reads_every_version_and_all_offsets_of_a_group(broker, topic_id, v):
    with RawClient(broker.port) as c:
        topic = part(
            COMMIT,
            9,
            "OffsetCommitRequestTopic",
            name="data",
            partitions=(
                part(
                    COMMIT,
                    9,
                    "OffsetCommitRequestPartition",
                    partition_index=1,
                    committed_offset=5,
                    committed_leader_epoch=-1,
                    committed_metadata=None,
                ),
            ),
        )
        c.request(
            COMMIT,
            9,
            req(COMMIT, 9, group_id=f"all-{v}", generation_id_or_member_epoch=-1, member_id="", topics=(topic,)),
        )
        assert _fetch(c, v, f"all-{v}", topic_id, (1,)) == {1: (5, "")}
        if v >= 2:  # a null topic list: every committed offset of the group
            entry = part(FETCH, v, "OffsetFetchRequestGroup", group_id=f"all-{v}", topics=None) if v >= 8 else None
            r = c.request(FETCH, v, req(FETCH, v, group_id=f"all-{v}", topics=None, groups=(entry,)))
            topics = r.groups[0].topics if v >= 8 else r.topics
            assert [
                (t.topic_id if v >= 10 else t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
                for t in topics
            ] == [("data" if v < 10 else topic_id, [(1, 5)])]


@pytest.mark.parametrize("v", range(6))
def test_list_groups_with_filters_at_every_version(broker, v):
    with RawClient(broker.port) as c:
        joined(c, 9, f"listed-{v}")
        r = c.request(LIST, v, req(LIST, v, states_filter=("completingrebalance",), types_filter=("classic",)))
        assert r.error_code == ErrorCode.none
        listed = {g.group_id: g for g in r.groups}
        assert f"listed-{v}" in listed and listed[f"listed-{v}"].protocol_type == "consumer"
        if v >= 4:
            assert {g.group_state for g in r.groups} == {"CompletingRebalance"}
        if v >= 5:
            assert listed[f"listed-{v}"].group_type == "classic"
            none = c.request(LIST, v, req(LIST, v, states_filter=(), types_filter=("consumer",)))
            assert none.groups == ()


@pytest.mark.parametrize("v", range(3))
def test_delete_groups_at_every_version(broker, topic_id, v):  # topic_id: the topic "data" its commit names
    with RawClient(broker.port) as c:
        joined(c, 9, f"busy-{v}")
        topic = part(
            COMMIT,
            9,
            "OffsetCommitRequestTopic",
            name="data",
            partitions=(
                part(
                    COMMIT,
                    9,
                    "OffsetCommitRequestPartition",
                    partition_index=0,
                    committed_offset=1,
                    committed_leader_epoch=-1,
                    committed_metadata=None,
                ),
            ),
        )
        c.request(
            COMMIT,
            9,
            req(COMMIT, 9, group_id=f"idle-{v}", generation_id_or_member_epoch=-1, member_id="", topics=(topic,)),
        )
        r = c.request(DELETE, v, req(DELETE, v, groups_names=(f"idle-{v}", f"busy-{v}", "never", "")))
        assert [(x.group_id, x.error_code) for x in r.results] == [
            (f"idle-{v}", ErrorCode.none),
            (f"busy-{v}", ErrorCode.non_empty_group),
            ("never", ErrorCode.group_id_not_found),
            ("", ErrorCode.invalid_group_id),
        ]
        assert _fetch(c, 9, f"idle-{v}", None, (0,)) == {0: (-1, "")}


def test_invalid_requests_get_kafkas_error_codes(broker, topic_id):
    with RawClient(broker.port) as c:
        assert join(c, 9, "").error_code == ErrorCode.invalid_group_id
        assert join(c, 9, "g", session_timeout=1).error_code == ErrorCode.invalid_session_timeout
        assert join(c, 9, "g", session_timeout=1_800_001).error_code == ErrorCode.invalid_session_timeout
        assert join(c, 5, "g", protocols=()).error_code == ErrorCode.inconsistent_group_protocol
        assert join(c, 5, "g", protocol_type="").error_code == ErrorCode.inconsistent_group_protocol
        assert join(c, 9, "no-such-group", member_id="someone").error_code == ErrorCode.unknown_member_id
        s = c.request(SYNC, 5, req(SYNC, 5, group_id="", generation_id=1, member_id="m", assignments=()))
        assert s.error_code == ErrorCode.invalid_group_id
        s = c.request(SYNC, 5, req(SYNC, 5, group_id="nobody", generation_id=1, member_id="m", assignments=()))
        assert s.error_code == ErrorCode.unknown_member_id

        def commit(v: int, group: str, name: str, partition: int, topic: Any = None) -> ErrorCode:
            t = part(
                COMMIT,
                v,
                "OffsetCommitRequestTopic",
                name=name,
                topic_id=topic,
                partitions=(
                    part(
                        COMMIT,
                        v,
                        "OffsetCommitRequestPartition",
                        partition_index=partition,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            )
            r = c.request(
                COMMIT, v, req(COMMIT, v, group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=(t,))
            )
            return r.topics[0].partitions[0].error_code

        assert commit(9, "g", "data", 0) == ErrorCode.none
        assert commit(9, "", "data", 0) == ErrorCode.none  # Kafka accepts the empty group id on commits
        assert commit(9, "g", "no-such-topic", 0) == ErrorCode.unknown_topic_or_partition
        assert commit(9, "g", "data", 3) == ErrorCode.unknown_topic_or_partition
        assert commit(10, "g", "", 0, topic=topic_id) == ErrorCode.none
        assert commit(10, "g", "", 0, topic=uuid.uuid4()) == ErrorCode.unknown_topic_id
        # A commit with a generation to a group that does not exist: ILLEGAL_GENERATION before v9.
        t = part(
            COMMIT,
            8,
            "OffsetCommitRequestTopic",
            name="data",
            partitions=(
                part(
                    COMMIT,
                    8,
                    "OffsetCommitRequestPartition",
                    partition_index=0,
                    committed_offset=1,
                    committed_leader_epoch=-1,
                    committed_metadata=None,
                ),
            ),
        )
        for v, code in ((8, ErrorCode.illegal_generation), (9, ErrorCode.group_id_not_found)):
            r = c.request(
                COMMIT, v, req(COMMIT, v, group_id="ghost", generation_id_or_member_epoch=4, member_id="m", topics=(t,))
            )
            assert r.topics[0].partitions[0].error_code == code

        fetched = c.request(
            FETCH, 9, req(FETCH, 9, groups=(part(FETCH, 9, "OffsetFetchRequestGroup", group_id="", topics=None),))
        )
        assert fetched.groups[0].error_code == ErrorCode.none and fetched.groups[0].topics[0].name == "data"
        unknown = part(FETCH, 10, "OffsetFetchRequestTopics", topic_id=uuid.uuid4(), partition_indexes=(0,))
        fetched = c.request(
            FETCH,
            10,
            req(FETCH, 10, groups=(part(FETCH, 10, "OffsetFetchRequestGroup", group_id="g", topics=(unknown,)),)),
        )
        assert fetched.groups[0].topics[0].partitions[0].error_code == ErrorCode.unknown_topic_id
        nameless = part(FETCH, 5, "OffsetFetchRequestTopic", name="", partition_indexes=(0,))
        fetched = c.request(FETCH, 5, req(FETCH, 5, group_id="g", topics=(nameless,)))
        assert [(p.committed_offset, p.error_code) for p in fetched.topics[0].partitions] == [(-1, ErrorCode.none)]
        for v, state, code in ((5, "Dead", ErrorCode.none), (6, "Dead", ErrorCode.group_id_not_found)):
            d = c.request(DESCRIBE, v, req(DESCRIBE, v, groups=("ghost", ""), include_authorized_operations=True))
            assert [(g.group_id, g.error_code) for g in d.groups] == [("ghost", code), ("", ErrorCode.invalid_group_id)]
            assert d.groups[0].group_state == state


def test_find_coordinator_answers_this_node_for_every_group(broker):
    with RawClient(broker.port) as c:
        r = c.request(FIND, 4, req(FIND, 4, key_type=0, coordinator_keys=("a", "b", "c")))
        assert {(x.key, x.error_code, x.port) for x in r.coordinators} == {(k, 0, broker.port) for k in "abc"}


# -- a node that hosts only some coordinator partitions -----------------------------------------------------------


@embedded_only(
    "moves a coordinator partition away and back inside one in-process node; a cluster moves them "
    "between nodes (test_cluster)"
)
def test_groups_of_a_partition_this_node_does_not_host_get_not_coordinator(tmp_path):
    node = InProcessBroker({"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": "3"})
    runtime = node.server.broker.coordinator
    group = next(g for g in (f"moved{i}" for i in range(100)) if runtime.partition_for(g) == 1)
    try:
        with RawClient(node.port) as c:
            member = joined(c, 9, group).member_id
            c.request(SYNC, 5, req(SYNC, 5, group_id=group, generation_id=1, member_id=member, assignments=()))
            node.run(runtime.unload_partition(1))  # the partition moves away from this node

            find = c.request(FIND, 4, req(FIND, 4, key_type=0, coordinator_keys=(group,)))
            assert find.coordinators[0].error_code == ErrorCode.coordinator_not_available
            assert join(c, 9, group).error_code == ErrorCode.not_coordinator
            hb = c.request(HEARTBEAT, 4, req(HEARTBEAT, 4, group_id=group, generation_id=1, member_id=member))
            assert hb.error_code == ErrorCode.not_coordinator
            t = part(
                COMMIT,
                9,
                "OffsetCommitRequestTopic",
                name="__consumer_offsets",
                partitions=(
                    part(
                        COMMIT,
                        9,
                        "OffsetCommitRequestPartition",
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            )
            r = c.request(
                COMMIT,
                9,
                req(COMMIT, 9, group_id=group, generation_id_or_member_epoch=1, member_id=member, topics=(t,)),
            )
            assert r.topics[0].partitions[0].error_code == ErrorCode.not_coordinator
            d = c.request(DESCRIBE, 5, req(DESCRIBE, 5, groups=(group,), include_authorized_operations=False))
            assert d.groups[0].error_code == ErrorCode.not_coordinator
            assert group not in {g.group_id for g in c.request(LIST, 4, req(LIST, 4)).groups}

            async def move_back() -> None:
                await runtime.load_partition(1)

            node.run(move_back())  # and back: the group is replayed from the log
            hb = c.request(HEARTBEAT, 4, req(HEARTBEAT, 4, group_id=group, generation_id=1, member_id=member))
            assert hb.error_code == ErrorCode.none
            d = c.request(DESCRIBE, 5, req(DESCRIBE, 5, groups=(group,), include_authorized_operations=False))
            assert (d.groups[0].group_state, [m.member_id for m in d.groups[0].members]) == ("Stable", [member])
    finally:
        node.stop()


def test_a_join_parked_on_a_connection_that_closes_is_answered_into_the_void_and_the_group_goes_on(broker):
    # A parked JoinGroup's answer is a done callback on the coordinator's future (a `Deferred`); the connection
    # is gone when it comes, so nothing is written, and the rest of the group completes the rebalance as usual
    # (the silent member is dropped when it never sends SyncGroup, as in Kafka).
    group = f"parked-{uuid.uuid4()}"
    with RawClient(broker.port) as a:
        first = join(
            a, 9, group, member_id=join(a, 9, group, rebalance_timeout=1_000).member_id, rebalance_timeout=1_000
        )
        assert first.error_code == ErrorCode.none and first.generation_id == 1
        assert (
            a.request(
                SYNC,
                5,
                req(
                    SYNC,
                    5,
                    group_id=group,
                    generation_id=1,
                    member_id=first.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=(),
                ),
            ).error_code
            == ErrorCode.none
        )
        b = RawClient(broker.port)
        b_first = join(b, 9, group, rebalance_timeout=1_000)
        b.send_raw(
            b.encode(
                JOIN,
                9,
                req(
                    JOIN,
                    9,
                    group_id=group,
                    session_timeout=10_000,
                    rebalance_timeout=1_000,
                    member_id=b_first.member_id,
                    group_instance_id=None,
                    protocol_type="consumer",
                    reason="test",
                    protocols=(part(JOIN, 9, "JoinGroupRequestProtocol", name="range", metadata=b"meta"),),
                ),
            )
        )
        hb = req(HEARTBEAT, 4, group_id=group, generation_id=1, member_id=first.member_id, group_instance_id=None)
        assert a.request(HEARTBEAT, 4, hb).error_code == ErrorCode.rebalance_in_progress  # b's join is parked
        b.close()
        second = join(a, 9, group, member_id=first.member_id, rebalance_timeout=1_000)  # completes the join phase
        assert second.error_code == ErrorCode.none and second.generation_id == 2
        assert sorted(m.member_id for m in second.members) == sorted([first.member_id, b_first.member_id])
        synced = a.request(
            SYNC,
            5,
            req(
                SYNC,
                5,
                group_id=group,
                generation_id=2,
                member_id=first.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=(),
            ),
        )
        assert synced.error_code == ErrorCode.none
        # b never syncs: after the rebalance timeout (1 s) it is removed and a rebalances alone.
        wait_until(
            lambda: (
                a.request(
                    HEARTBEAT,
                    4,
                    req(
                        HEARTBEAT, 4, group_id=group, generation_id=2, member_id=first.member_id, group_instance_id=None
                    ),
                ).error_code
                == ErrorCode.rebalance_in_progress
            ),
            10,
            "b to be removed (a's heartbeat answered REBALANCE_IN_PROGRESS)",
            interval=0,
        )
        third = join(a, 9, group, member_id=first.member_id, rebalance_timeout=1_000)
        assert third.error_code == ErrorCode.none and [m.member_id for m in third.members] == [first.member_id]
    assert "Traceback" not in broker.log()
