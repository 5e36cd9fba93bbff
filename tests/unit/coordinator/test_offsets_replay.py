"""Loading: the batch fast path (`replay_loaded_batch`) builds exactly the state `replay` builds, record by
record, on arbitrary mixes of commits, tombstones, group records, unknown types and garbage."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.static.primitive import i32, i64

from herd.coordinator import GroupCoordinatorShard, ManualClock, ManualTimer, Record
from herd.coordinator.records import (
    GroupMetadataValueV3,
    OffsetValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
    group_metadata_record,
    group_tombstone,
)

groups = st.sampled_from(["g1", "g2", "gé", "g"])  # same lengths, and a prefix of the others
topics = st.sampled_from(["t", "u"])
partitions = st.integers(0, 3)

commits = st.builds(
    lambda g, t, p, o, md, exp: (
        encode_offset_commit_key(g, t, p),
        encode_offset_commit_value(OffsetValue(o, 1, md, 5, exp)),
    ),
    groups,
    topics,
    partitions,
    st.integers(0, 10**12),
    st.sampled_from(["", "", "meta"]),
    st.sampled_from([-1, 99]),
)
tombstones = st.builds(lambda g, t, p: (encode_offset_commit_key(g, t, p), None), groups, topics, partitions)
group_records = st.builds(
    lambda g: group_metadata_record(
        g,
        GroupMetadataValueV3(
            protocol_type="consumer",
            generation=i32(3),
            protocol=None,
            leader=None,
            current_state_timestamp=i64(7),
            members=(),
        ),
        applied=False,
    ),
    groups,
).map(lambda r: (r.key, r.value))
group_deletions = groups.map(lambda g: (group_tombstone(g).key, None))
unknown = st.just((b"\x00\x63\x00\x00", b"x"))
garbage = st.sampled_from(
    [
        (b"\x00\x01\x00\x09g", b"v"),
        (b"\x00", None),
        (encode_offset_commit_key("g1", "t", 0), b"\x00\x03\x00"),
        (encode_offset_commit_key("g2", "t", 0)[:-1], b"v"),  # a tail cut short
        (encode_offset_commit_key("g2", "t", 0) + b"\x00", b"v"),  # a byte too many
    ]
)
record = st.one_of(commits, commits, tombstones, group_records, group_deletions, unknown, garbage)


def shard() -> GroupCoordinatorShard:
    clock = ManualClock(1000)
    return GroupCoordinatorShard(clock=clock, timer=ManualTimer(clock))


def state(s: GroupCoordinatorShard) -> tuple[object, object]:
    ctx = s._ctx
    groups_ = {g: (x.state, x.protocol_type, x.generation_id) for g, x in ctx.groups.items()}
    return groups_, {g: dict(o) for g, o in ctx.offsets.items()}


@settings(max_examples=300)
@given(st.lists(st.lists(record, max_size=12), max_size=6))
def test_batch_replay_builds_the_state_record_replay_builds(batches: list[list[tuple[bytes, bytes | None]]]) -> None:
    one_by_one, batched = shard(), shard()
    skipped = 0
    for batch in batches:
        for key, value in batch:
            try:
                one_by_one.replay(Record(key, value))
            except (ValueError, IndexError, KeyError):
                skipped += 1
    assert sum(batched.replay_loaded_batch(batch) for batch in batches) == skipped
    assert state(batched) == state(one_by_one)


def test_a_commit_for_an_unknown_group_creates_a_simple_group_and_a_tombstone_keeps_it() -> None:
    s = shard()
    s.replay_loaded_batch(
        [(encode_offset_commit_key("g", "t", 0), encode_offset_commit_value(OffsetValue(5, -1, "", 9)))]
    )
    group = s.group("g")
    assert group is not None and group.protocol_type is None and group.state.value == "Empty"
    s.replay_loaded_batch([(encode_offset_commit_key("g", "t", 0), None)])
    assert s.committed_offsets("g") == {} and s.group("g") is group
