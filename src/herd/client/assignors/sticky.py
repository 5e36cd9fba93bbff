"""The `sticky` assignor and the algorithm it shares with `cooperative-sticky`, after Java's
AbstractStickyAssignor and StickyAssignor (apache/kafka clients/src/main/java/org/apache/kafka/clients/
consumer/internals/AbstractStickyAssignor.java, clients/.../consumer/StickyAssignor.java).

Goals in order: balance, then stickiness (a partition stays with the member that owned it), then rack
locality (KIP-881), with every tie broken by sorted member id and sorted partition so the result is
deterministic.

Previous ownership. Each member reports the partitions it owned and its generation (how depends on the
assignor: `member_data`). Only claims from the highest generation present count (claims without a
generation count only when nobody reports one), only for partitions that still exist in topics the
member still subscribes to, and a partition claimed by two members of that generation counts for
neither.

Identical subscriptions (Java's constrainedAssign). With P partitions and M members every member gets
P // M partitions and P % M of them one more. Members are visited in id order and keep their owned
partitions up to that quota (rack-local ones first, and one over the minimum while such slots remain).
The rest are dealt out in sorted order, round-robin to the members still under the minimum, then one
each to members at the minimum until the extra slots are used. With racks, a first dealing round gives
each member only partitions with a replica on its rack; a second deals whatever is left.

Other subscriptions (in place of Java's generalAssign, whose exact choices herd does not reproduce):
owned partitions are kept; each remaining partition, fewest eligible members first, goes to the eligible
member with the fewest partitions (rack-local first among equals); then while some member A holds a
partition that an eligible member B could take with |A| > |B| + 1, it moves (partitions A did not own
before move first). That is the balance Java's isBalanced checks. It costs O(partitions x members) per
pass, so it is seconds, not milliseconds, at 1,000 members x 10,000 partitions; identical subscriptions
(the common case, and the benchmarked one) take the constrained path.
"""

from __future__ import annotations

import io
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kio.serial.readers import read_int32, read_legacy_array_length, read_legacy_string
from kio.serial.writers import write_int32, write_legacy_array_length, write_legacy_string
from kio.static.primitive import i32

from herd.client.assignors.base import (
    Cluster,
    Member,
    PartitionAssignor,
    RawAssignment,
    use_rack_aware_assignment,
)
from herd.client.consumer_protocol import (
    NO_GENERATION,
    Assignment,
    Subscription,
    TopicPartition,
    group_by_topic,
)

__all__ = [
    "AbstractStickyAssignor",
    "MemberData",
    "StickyAssignor",
    "decode_sticky_user_data",
    "encode_sticky_user_data",
]

Pick = Callable[[str], TopicPartition | None]


@dataclass(frozen=True, slots=True)
class MemberData:
    """What a member owned before this rebalance, and in which generation (None: unknown)."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """Java StickyAssignor's user data, schema V1: [topic string, partitions [int32]], generation int32."""
    buffer = io.BytesIO()
    grouped = group_by_topic(partitions)
    write_legacy_array_length(buffer, i32(len(grouped)))
    for topic, numbers in grouped.items():
        write_legacy_string(buffer, topic)
        write_legacy_array_length(buffer, i32(len(numbers)))
        for number in numbers:
            write_int32(buffer, i32(number))
    write_int32(buffer, i32(generation))
    return buffer.getvalue()


def decode_sticky_user_data(data: bytes) -> MemberData:
    """Read schema V1, or V0 (no generation) when the generation is missing; raises ValueError."""
    try:
        count, offset = read_legacy_array_length(data, 0)
        partitions: list[TopicPartition] = []
        for _ in range(max(count, 0)):
            topic, size = read_legacy_string(data, offset)
            offset += size
            n, size = read_legacy_array_length(data, offset)
            offset += size
            for _ in range(max(n, 0)):
                number, size = read_int32(data, offset)
                offset += size
                partitions.append(TopicPartition(topic, number))
    except Exception as exc:  # kio raises BufferUnderflow and decoding errors
        raise ValueError(f"malformed sticky assignor user data: {exc}") from exc
    generation = read_int32(data, offset)[0] if len(data) >= offset + 4 else None
    return MemberData(tuple(partitions), generation)


def previous_owners(
    cluster: Cluster, members: Mapping[str, Member], data: Mapping[str, MemberData]
) -> dict[str, list[TopicPartition]]:
    """The owned partitions that count, per member id (see the module docstring)."""
    generations = [d.generation for d in data.values() if d.generation is not None]
    highest = max(generations, default=NO_GENERATION)
    claims: dict[str, list[TopicPartition]] = {}
    claimants: defaultdict[TopicPartition, int] = defaultdict(int)
    for member_id, member in members.items():
        gen = data[member_id].generation
        valid = gen == highest if gen is not None else highest == NO_GENERATION
        claimed = [
            tp
            for tp in dict.fromkeys(data[member_id].partitions)
            if valid and tp.topic in member.topics and 0 <= tp.partition < cluster.partition_counts[tp.topic]
        ]
        claims[member_id] = claimed
        for tp in claimed:
            claimants[tp] += 1
    return {m: [tp for tp in claimed if claimants[tp] == 1] for m, claimed in claims.items()}


class _Racks:
    """Who is on which rack, and whether rack-aware assignment applies (Java's RackInfo)."""

    def __init__(
        self, cluster: Cluster, members: Mapping[str, Member], partitions: list[TopicPartition]
    ) -> None:
        self.member_rack = {m: member.rack for m, member in members.items()}
        consumer_racks = {r for r in self.member_rack.values() if r is not None}
        self.partition_racks = {tp: cluster.racks_of(tp) for tp in partitions} if consumer_racks else {}
        all_racks: set[str] = set().union(*self.partition_racks.values())
        self.enabled = use_rack_aware_assignment(consumer_racks, all_racks, self.partition_racks)

    def matches(self, member_id: str, tp: TopicPartition) -> bool:
        rack = self.member_rack[member_id]
        return self.enabled and rack is not None and rack in self.partition_racks.get(tp, ())


class _Quota:
    """P // M partitions each, and how many members may still take one more."""

    def __init__(self, partitions: int, members: int) -> None:
        self.min, self.extra_left = divmod(partitions, members)

    def keep(self, owned: int) -> int:
        """How many owned partitions a member may keep (claims an extra slot if it keeps one more)."""
        if owned > self.min and self.extra_left > 0:
            self.extra_left -= 1
            return self.min + 1
        return min(owned, self.min)


class _Pool:
    """Unassigned partitions in sorted order, also indexed by rack; taking one removes it everywhere."""

    def __init__(self, unassigned: list[TopicPartition], racks: _Racks) -> None:
        self.queue = deque(unassigned)
        self.taken: set[TopicPartition] = set()
        self.by_rack: defaultdict[str, deque[TopicPartition]] = defaultdict(deque)
        if racks.enabled:
            for tp in unassigned:
                for rack in sorted(racks.partition_racks.get(tp, ())):
                    self.by_rack[rack].append(tp)
        self.racks = racks

    def _pop(self, queue: deque[TopicPartition]) -> TopicPartition | None:
        while queue:
            tp = queue.popleft()
            if tp not in self.taken:
                self.taken.add(tp)
                return tp
        return None

    def any(self, member_id: str) -> TopicPartition | None:
        return self._pop(self.queue)

    def on_rack(self, member_id: str) -> TopicPartition | None:
        rack = self.racks.member_rack[member_id]
        return None if rack is None else self._pop(self.by_rack.get(rack, deque()))


def _deal(order: list[str], result: RawAssignment, quota: _Quota, pick: Pick) -> None:
    """Round-robin up to the minimum, then one extra each to members at the minimum while slots remain."""
    under = [m for m in order if len(result[m]) < quota.min]
    at_min = [m for m in order if len(result[m]) == quota.min]
    while under:
        still_under = []
        for member_id in under:
            tp = pick(member_id)
            if tp is None:
                continue
            result[member_id].append(tp)
            (still_under if len(result[member_id]) < quota.min else at_min).append(member_id)
        under = still_under
    for member_id in at_min:
        if quota.extra_left == 0:
            return
        tp = pick(member_id)
        if tp is not None:
            result[member_id].append(tp)
            quota.extra_left -= 1


def constrained_assign(
    partitions: list[TopicPartition],
    order: list[str],
    owned: Mapping[str, list[TopicPartition]],
    racks: _Racks,
) -> RawAssignment:
    """Identical subscriptions: `partitions` sorted, `order` the member ids sorted."""
    result: RawAssignment = {m: [] for m in order}
    if not order:
        return result
    quota = _Quota(len(partitions), len(order))
    for member_id in order:
        mine = sorted(owned[member_id], key=lambda tp: not racks.matches(member_id, tp))
        result[member_id] = mine[: quota.keep(len(mine))]
    assigned = {tp for kept in result.values() for tp in kept}
    pool = _Pool([tp for tp in partitions if tp not in assigned], racks)
    if racks.enabled:
        _deal(order, result, quota, pool.on_rack)
    _deal(order, result, quota, pool.any)
    return result


class _Balancer:
    """Counts and eligibility for the general case."""

    def __init__(
        self, members: Mapping[str, Member], owned: Mapping[str, list[TopicPartition]], racks: _Racks
    ) -> None:
        self.rank = {m: i for i, m in enumerate(sorted(members))}
        self.eligible: defaultdict[str, list[str]] = defaultdict(list)
        for member_id in sorted(members):
            for topic in members[member_id].topics:
                self.eligible[topic].append(member_id)
        self.result: dict[str, dict[TopicPartition, None]] = {m: dict.fromkeys(owned[m]) for m in members}
        self.owned = {m: set(owned[m]) for m in members}
        self.racks = racks

    def best(self, tp: TopicPartition) -> str:
        return min(
            self.eligible[tp.topic],
            key=lambda m: (len(self.result[m]), not self.racks.matches(m, tp), self.rank[m]),
        )

    def rebalance_once(self) -> bool:
        moved = False
        for giver in sorted(self.result, key=lambda m: (-len(self.result[m]), self.rank[m])):
            for tp in sorted(self.result[giver], key=lambda tp: (tp in self.owned[giver], tp)):
                taker = self.best(tp)
                if len(self.result[giver]) > len(self.result[taker]) + 1:
                    del self.result[giver][tp]
                    self.result[taker][tp] = None
                    moved = True
        return moved


def general_assign(
    partitions: list[TopicPartition],
    members: Mapping[str, Member],
    owned: Mapping[str, list[TopicPartition]],
    racks: _Racks,
) -> RawAssignment:
    """Different subscriptions: keep owned, place the rest on the least loaded, then even out."""
    balancer = _Balancer(members, owned, racks)
    assigned = {tp for kept in owned.values() for tp in kept}
    unassigned = sorted(
        (tp for tp in partitions if tp not in assigned), key=lambda tp: (len(balancer.eligible[tp.topic]), tp)
    )
    for tp in unassigned:
        balancer.result[balancer.best(tp)][tp] = None
    while balancer.rebalance_once():
        pass
    return {m: list(parts) for m, parts in balancer.result.items()}


class AbstractStickyAssignor(PartitionAssignor):
    """The shared sticky algorithm; subclasses say where a member's previous ownership comes from."""

    def member_data(self, subscription: Subscription) -> MemberData:
        raise NotImplementedError

    def assign_partitions(self, cluster: Cluster, members: Mapping[str, Member]) -> RawAssignment:
        data = {m: self.member_data(member.subscription) for m, member in members.items()}
        owned = previous_owners(cluster, members, data)
        topics = sorted({t for member in members.values() for t in member.topics})
        partitions = [TopicPartition(t, p) for t in topics for p in range(cluster.partition_counts[t])]
        racks = _Racks(cluster, members, partitions)
        if len({member.topics for member in members.values()}) <= 1:
            return constrained_assign(partitions, sorted(members), owned, racks)
        return general_assign(partitions, members, owned, racks)


class StickyAssignor(AbstractStickyAssignor):
    """Java StickyAssignor (KIP-54), eager: the previous assignment travels in the user data.

    Members running the eager protocol revoke everything before joining, so Java reads ownership from
    the StickyAssignorUserData this assignor writes; a subscription without it falls back to its owned
    partitions and generation id (v1+).
    """

    name = "sticky"

    def __init__(self, rack_id: str | None = None) -> None:
        super().__init__(rack_id)
        self._previous: tuple[tuple[TopicPartition, ...], int] | None = None

    def user_data(self) -> bytes | None:
        if self._previous is None:
            return None
        return encode_sticky_user_data(*self._previous)

    def on_assignment(self, assignment: Assignment, generation: int) -> None:
        self._previous = (assignment.partitions, generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.user_data:
            try:
                return decode_sticky_user_data(subscription.user_data)
            except ValueError:
                pass
        generation = subscription.generation_id if subscription.generation_id >= 0 else None
        return MemberData(subscription.owned_partitions, generation)
