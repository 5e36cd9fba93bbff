"""Assignors by tables: inputs and the exact result Kafka's Java assignors give for them.

Cases come from the Javadoc and tests of apache/kafka (clients/src/main/java/org/apache/kafka/clients/
consumer/RangeAssignor.java, RoundRobinAssignor.java, CooperativeStickyAssignor.java and their tests
under clients/src/test/java/.../consumer/) or are worked out by hand from those algorithms.
"""

from __future__ import annotations

import pytest

from herd.client.assignors import (
    ASSIGNORS,
    Cluster,
    CooperativeStickyAssignor,
    PartitionAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for,
)
from herd.client.assignors.sticky import decode_sticky_user_data, encode_sticky_user_data
from herd.client.consumer_protocol import Assignment, Subscription, TopicPartition

TP = TopicPartition
Table = dict[str, list[str]]


def parts(spec: str) -> list[TopicPartition]:
    """ "t0:0,1 t1:2" -> [t0-0, t0-1, t1-2]."""
    out = []
    for group in spec.split():
        topic, numbers = group.split(":")
        out.extend(TP(topic, int(n)) for n in numbers.split(","))
    return out


def run(
    assignor: PartitionAssignor,
    counts: dict[str, int],
    subs: dict[str, Subscription],
    instance_ids: dict[str, str] | None = None,
    racks: dict[TopicPartition, frozenset[str]] | None = None,
) -> dict[str, list[TopicPartition]]:
    result = assignor.assign(Cluster(counts, racks or {}), subs, instance_ids)
    return {member: list(a.partitions) for member, a in result.items()}


def sub(*topics: str, owned: str = "", generation: int = -1, rack: str | None = None) -> Subscription:
    return Subscription(tuple(topics), None, tuple(parts(owned)) if owned else (), generation, rack)


def expect(table: dict[str, str]) -> dict[str, list[TopicPartition]]:
    return {member: parts(spec) if spec else [] for member, spec in table.items()}


def test_registry_uses_kafka_names() -> None:
    assert sorted(ASSIGNORS) == ["cooperative-sticky", "range", "roundrobin", "sticky"]
    assert isinstance(assignor_for("range", rack_id="r1"), RangeAssignor)
    assert assignor_for("range", rack_id="r1").metadata(["b", "a", "b"]) == Subscription(("a", "b"), rack_id="r1")
    with pytest.raises(KeyError):
        assignor_for("nope")


# --- range ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "subs", "instance_ids", "expected"),
    [
        pytest.param(  # RangeAssignor Javadoc
            {"t0": 3, "t1": 3},
            {"C0": sub("t0", "t1"), "C1": sub("t0", "t1")},
            None,
            {"C0": "t0:0,1 t1:0,1", "C1": "t0:2 t1:2"},
            id="javadoc",
        ),
        pytest.param(  # RangeAssignorTest.testMultipleConsumersMixedTopics
            {"topic1": 3, "topic2": 2},
            {"consumer1": sub("topic1"), "consumer2": sub("topic1", "topic2"), "consumer3": sub("topic1")},
            None,
            {"consumer1": "topic1:0", "consumer2": "topic1:1 topic2:0,1", "consumer3": "topic1:2"},
            id="mixed-topics",
        ),
        pytest.param(  # static members are ordered by instance id, before dynamic members
            {"t0": 3},
            {"m-a": sub("t0"), "m-b": sub("t0"), "m-c": sub("t0")},
            {"m-a": "i2", "m-c": "i1"},
            {"m-c": "t0:0", "m-a": "t0:1", "m-b": "t0:2"},
            id="static-members",
        ),
        pytest.param(
            {"t0": 2},
            {"C0": sub("t0"), "C1": sub("t0"), "C2": sub("t0")},
            None,
            {"C0": "t0:0", "C1": "t0:1", "C2": ""},
            id="more-members-than-partitions",
        ),
        pytest.param(  # testOneConsumerNonexistentTopic; topics nobody subscribes are not assigned
            {"other": 4},
            {"C0": sub("missing")},
            None,
            {"C0": ""},
            id="nonexistent-topic",
        ),
    ],
)
def test_range(
    counts: dict[str, int], subs: dict[str, Subscription], instance_ids: dict[str, str] | None, expected: dict[str, str]
) -> None:
    assert run(RangeAssignor(), counts, subs, instance_ids) == expect(expected)


RACKS = ("a", "b", "c")


def two_replica_racks(topic: str, n: int) -> dict[TopicPartition, frozenset[str]]:
    """Partition p has replicas on racks p % 3 and (p + 1) % 3, as RangeAssignorTest lays them out."""
    return {TP(topic, p): frozenset({RACKS[p % 3], RACKS[(p + 1) % 3]}) for p in range(n)}


def racked_members(*topics: str) -> dict[str, Subscription]:
    return {f"C{i}": sub(*topics, rack=rack) for i, rack in enumerate(RACKS)}


def test_range_rack_aware_prefers_local_replicas_within_quotas() -> None:
    result = run(RangeAssignor(), {"t": 6}, racked_members("t"), racks=two_replica_racks("t", 6))
    assert result == expect({"C0": "t:0,2", "C1": "t:1,3", "C2": "t:4,5"})


def test_range_rack_aware_keeps_co_partitioned_topics_together() -> None:
    racks = two_replica_racks("t1", 6) | {TP("t2", p): frozenset(RACKS) for p in range(6)}
    result = run(RangeAssignor(), {"t1": 6, "t2": 6}, racked_members("t1", "t2"), racks=racks)
    assert result == expect({"C0": "t1:0,2 t2:0,2", "C1": "t1:1,3 t2:1,3", "C2": "t1:4,5 t2:4,5"})


@pytest.mark.parametrize(
    "racks",
    [
        pytest.param({TP("t", p): frozenset({"x"}) for p in range(6)}, id="no-member-rack-has-replicas"),
        pytest.param({TP("t", p): frozenset(RACKS) for p in range(6)}, id="every-partition-on-every-rack"),
        pytest.param({}, id="no-replica-racks"),
    ],
)
def test_range_falls_back_to_plain_ranges(racks: dict[TopicPartition, frozenset[str]]) -> None:
    result = run(RangeAssignor(), {"t": 6}, racked_members("t"), racks=racks)
    assert result == expect({"C0": "t:0,1", "C1": "t:2,3", "C2": "t:4,5"})


def test_range_member_without_rack_takes_any_partition() -> None:
    subs = {"C0": sub("t"), "C1": sub("t", rack="b")}
    racks = {
        TP("t", 0): frozenset({"b"}),
        TP("t", 1): frozenset({"a"}),
        TP("t", 2): frozenset({"a"}),
        TP("t", 3): frozenset({"b"}),
    }
    # Java: rack pass first: C0 (no rack) matches anything -> 0,1; C1 (rack b) -> 3; plain pass: C1 -> 2.
    assert run(RangeAssignor(), {"t": 4}, subs, racks=racks) == expect({"C0": "t:0,1", "C1": "t:2,3"})


# --- roundrobin ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "subs", "instance_ids", "expected"),
    [
        pytest.param(  # RoundRobinAssignor Javadoc, first example
            {"t0": 3, "t1": 3},
            {"C0": sub("t0", "t1"), "C1": sub("t0", "t1")},
            None,
            {"C0": "t0:0,2 t1:1", "C1": "t0:1 t1:0,2"},
            id="javadoc-identical",
        ),
        pytest.param(  # RoundRobinAssignor Javadoc, second example
            {"t0": 1, "t1": 2, "t2": 3},
            {"C0": sub("t0"), "C1": sub("t0", "t1"), "C2": sub("t0", "t1", "t2")},
            None,
            {"C0": "t0:0", "C1": "t1:0", "C2": "t1:1 t2:0,1,2"},
            id="javadoc-unequal",
        ),
        pytest.param(  # RoundRobinAssignorTest.testMultipleConsumersMixedTopics
            {"topic1": 3, "topic2": 2},
            {"consumer1": sub("topic1"), "consumer2": sub("topic1", "topic2"), "consumer3": sub("topic1")},
            None,
            {"consumer1": "topic1:0", "consumer2": "topic1:1 topic2:0,1", "consumer3": "topic1:2"},
            id="mixed-topics",
        ),
        pytest.param(
            {"t0": 4},
            {"z": sub("t0"), "a": sub("t0")},
            {"z": "instance-0"},
            {"z": "t0:0,2", "a": "t0:1,3"},
            id="static-first",
        ),
    ],
)
def test_roundrobin(
    counts: dict[str, int], subs: dict[str, Subscription], instance_ids: dict[str, str] | None, expected: dict[str, str]
) -> None:
    assert run(RoundRobinAssignor(), counts, subs, instance_ids) == expect(expected)


# --- sticky --------------------------------------------------------------------------------------


def sticky_sub(*topics: str, owned: str = "", generation: int | None = None) -> Subscription:
    """An eager sticky member: its previous assignment in StickyAssignor user data (v0 without generation)."""
    data = encode_sticky_user_data(parts(owned) if owned else [], -1 if generation is None else generation)
    if generation is None:
        data = data[:-4]
    return Subscription(tuple(topics), data)


@pytest.mark.parametrize(
    ("subs", "expected"),
    [
        pytest.param({"a": sticky_sub("t"), "b": sticky_sub("t")}, {"a": "t:0,2,4", "b": "t:1,3"}, id="fresh"),
        pytest.param(  # a member joins: the two old members each keep the most they may
            {
                "a": sticky_sub("t", owned="t:0,2,4", generation=1),
                "b": sticky_sub("t", owned="t:1,3", generation=1),
                "c": sticky_sub("t"),
            },
            {"a": "t:0,2", "b": "t:1,3", "c": "t:4"},
            id="member-added",
        ),
        pytest.param(  # b left: its partitions are dealt out, a keeps its own
            {"a": sticky_sub("t", owned="t:0,1", generation=3), "c": sticky_sub("t", owned="t:4", generation=3)},
            {"a": "t:0,1,3", "c": "t:2,4"},
            id="member-removed",
        ),
        pytest.param(  # claims of an older generation do not count
            {"a": sticky_sub("t", owned="t:0,1,2", generation=1), "b": sticky_sub("t", owned="t:4", generation=2)},
            {"a": "t:0,2", "b": "t:1,3,4"},
            id="stale-generation",
        ),
        pytest.param(  # two members of one generation claiming a partition: neither keeps it
            {"a": sticky_sub("t", owned="t:0,1", generation=2), "b": sticky_sub("t", owned="t:1,2", generation=2)},
            {"a": "t:0,1,4", "b": "t:2,3"},
            id="double-claim",
        ),
        pytest.param(  # v0 user data (no generation) still counts when nobody reports a generation
            {"a": sticky_sub("t", owned="t:3,4"), "b": sticky_sub("t", owned="t:0")},
            {"a": "t:2,3,4", "b": "t:0,1"},
            id="v0-user-data",
        ),
    ],
)
def test_sticky(subs: dict[str, Subscription], expected: dict[str, str]) -> None:
    assert run(StickyAssignor(), {"t": 5}, subs) == expect(expected)


def test_sticky_falls_back_to_owned_partitions_without_user_data() -> None:
    subs = {"a": sub("t", owned="t:3,4", generation=5), "b": sub("t", owned="t:0,1,2", generation=5)}
    assert run(StickyAssignor(), {"t": 5}, subs) == expect({"a": "t:3,4", "b": "t:0,1,2"})


def test_sticky_rack_aware_deals_local_partitions_first() -> None:
    subs = {f"C{i}": sub("t", rack=rack) for i, rack in enumerate(RACKS)}
    racks = {TP("t", p): frozenset({RACKS[2 - p % 3]}) for p in range(6)}
    assert run(StickyAssignor(), {"t": 6}, subs, racks=racks) == expect({"C0": "t:2,5", "C1": "t:1,4", "C2": "t:0,3"})


def test_sticky_rack_aware_keeps_local_owned_partitions_when_trimming() -> None:
    racks = {TP("t", p): frozenset({"a" if p >= 2 else "b"}) for p in range(4)}
    subs = {"x": sub("t", owned="t:0,1,2,3", generation=1, rack="a"), "y": sub("t", generation=1, rack="b")}
    assert run(StickyAssignor(), {"t": 4}, subs, racks=racks) == expect({"x": "t:2,3", "y": "t:0,1"})


def test_sticky_general_case_balances_what_it_can() -> None:
    subs = {"a": sub("t0"), "b": sub("t0", "t1"), "c": sub("t1")}
    result = run(StickyAssignor(), {"t0": 4, "t1": 2}, subs)
    assert sorted(len(p) for p in result.values()) == [2, 2, 2]
    assert all(tp.topic == "t0" for tp in result["a"]) and all(tp.topic == "t1" for tp in result["c"])


def test_sticky_general_case_balances_along_chains() -> None:
    # m 8 / new 7 / n 6 allows no single move that helps; m -> new -> n does
    subs = {
        "m": sub("t0", owned="t0:0,1,2,3,4,5,6,7,8", generation=1),
        "n": sub("t1", owned="t1:0,1,2,3,4,5,6,7,8,9,10,11", generation=1),
        "new": sub("t0", "t1"),
    }
    result = run(StickyAssignor(), {"t0": 9, "t1": 12}, subs)
    assert result == expect({"m": "t0:2,3,4,5,6,7,8", "n": "t1:5,6,7,8,9,10,11", "new": "t0:0,1 t1:0,1,2,3,4"})


def test_sticky_general_case_revisits_a_member_that_gave_partitions_away() -> None:
    # y takes x's two owned t0 partitions, which leaves x with 2 partitions to n's 4: x must then take
    # one from n (balancing once started n, at 4, before x, down to 2 but still queued at 4, and n's
    # search reached x and settled it with two fewer)
    subs = {
        "n": sub("t1", generation=1),
        "x": sub("t0", "t1", owned="t0:0,1", generation=1),
        "y": sub("t0", generation=1),
    }
    result = run(StickyAssignor(), {"t0": 2, "t1": 6}, subs)
    assert result == expect({"n": "t1:1,2,4", "x": "t1:0,3,5", "y": "t0:0,1"})


def test_sticky_user_data_matches_kafka_python() -> None:
    user_data = pytest.importorskip("kafka.coordinator.assignors.sticky.user_data")
    ours = encode_sticky_user_data(parts("t:0,3 u:1"), 4)
    theirs = user_data.StickyAssignorUserData(previous_assignment=[("t", [0, 3]), ("u", [1])], generation=4)
    assert theirs.encode(header=False) == ours
    assert decode_sticky_user_data(ours).partitions == tuple(parts("t:0,3 u:1"))
    assert decode_sticky_user_data(ours[:-4]).generation is None
    with pytest.raises(ValueError):
        decode_sticky_user_data(b"\x00\x00\x00\x05")


def test_sticky_remembers_its_assignment_in_user_data() -> None:
    assignor = StickyAssignor()
    assert assignor.metadata(["t"]).user_data is None
    assignor.on_assignment(Assignment(tuple(parts("t:1,2"))), generation=9)
    data = decode_sticky_user_data(assignor.metadata(["t"]).user_data or b"")
    assert (data.partitions, data.generation) == (tuple(parts("t:1,2")), 9)


# --- cooperative-sticky ----------------------------------------------------------------------------


def test_cooperative_sticky_withholds_partitions_until_revoked() -> None:
    first = {"a": sub("t", owned="t:0,1,2,3", generation=1), "b": sub("t")}
    assert run(CooperativeStickyAssignor(), {"t": 4}, first) == expect({"a": "t:0,1", "b": ""})
    second = {"a": sub("t", owned="t:0,1", generation=2), "b": sub("t", generation=2)}
    assert run(CooperativeStickyAssignor(), {"t": 4}, second) == expect({"a": "t:0,1", "b": "t:2,3"})


def test_cooperative_sticky_reads_generation_from_old_user_data() -> None:
    old = (3).to_bytes(4, "big")
    subs = {
        "a": Subscription(("t",), old, tuple(parts("t:0,1"))),
        "b": Subscription(("t",), (2).to_bytes(4, "big"), tuple(parts("t:2,3"))),
    }
    # b's claims are from generation 2 < 3, so the algorithm ignores them; dealt out afresh, 2 and 3
    # land on b again, and nothing is withheld because nobody else claims them.
    assert run(CooperativeStickyAssignor(), {"t": 4}, subs) == expect({"a": "t:0,1", "b": "t:2,3"})


def test_cooperative_sticky_protocols_and_metadata() -> None:
    assignor = CooperativeStickyAssignor(rack_id="r")
    assert assignor.supported_protocols == (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)
    assert StickyAssignor.supported_protocols == (RebalanceProtocol.EAGER,)
    assignor.on_assignment(Assignment(tuple(parts("t:1"))), generation=6)
    assert assignor.metadata(["t"]) == Subscription(("t",), (6).to_bytes(4, "big"), tuple(parts("t:1")), 6, "r")


def test_cooperative_sticky_general_case_completes_a_join_in_two_rounds() -> None:
    # The falsifying example of test_cooperative_converges_to_the_sticky_result_in_two_rounds. Balancing
    # by single moves stopped round one at m 8, n 6, new 7; round two, with new owning nothing, reached
    # 7/7/7 the other way round and took t0-1 from m, who still owned it, so cooperative-sticky withheld
    # it and nobody was assigned it. Balanced along chains, round one is 7/7/7 already.
    counts = {"t0": 9, "t1": 12}
    first = run(CooperativeStickyAssignor(), counts, {"m": sub("t0"), "n": sub("t1")})
    assert first == expect({"m": "t0:0,1,2,3,4,5,6,7,8", "n": "t1:0,1,2,3,4,5,6,7,8,9,10,11"})
    joined = {
        "m": sub("t0", owned="t0:0,1,2,3,4,5,6,7,8", generation=1),
        "n": sub("t1", owned="t1:0,1,2,3,4,5,6,7,8,9,10,11", generation=1),
        "new": sub("t0", "t1"),
    }
    round_one = run(CooperativeStickyAssignor(), counts, joined)
    # new's partitions are all still owned by m or n: withheld
    assert round_one == expect({"m": "t0:2,3,4,5,6,7,8", "n": "t1:5,6,7,8,9,10,11", "new": ""})
    again = {
        "m": sub("t0", owned="t0:2,3,4,5,6,7,8", generation=2),
        "n": sub("t1", owned="t1:5,6,7,8,9,10,11", generation=2),
        "new": sub("t0", "t1", generation=2),
    }
    round_two = run(CooperativeStickyAssignor(), counts, again)
    assert round_two == expect({"m": "t0:2,3,4,5,6,7,8", "n": "t1:5,6,7,8,9,10,11", "new": "t0:0,1 t1:0,1,2,3,4"})
