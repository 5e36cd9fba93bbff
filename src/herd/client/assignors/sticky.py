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
owned partitions are kept; each remaining partition goes to the least loaded eligible member (rack-local
first among equals), partitions of topics with the fewest eligible members first, topics with equally
many taking turns partition by partition. Then the assignment is balanced: no member may be able to pass
a partition, directly or along a chain (A gives B a partition of a topic B subscribes to, B gives C one
of a topic C subscribes to, ...), to a member holding two or more fewer. Single moves are not enough:
with m on t0 (9 partitions), n on t1 (12) and new on both, m 8 / new 7 / n 6 allows no single move
that helps, but m -> new -> n gives 7/7/7. (Java's isBalanced fails whenever a member could take a
partition from one holding more, but performReassignments only makes single moves, from A to B when
|A| > |B| + 1, and stops when there are none.) Balancing first moves only partitions whose holder did not
own them, and owned ones only while that is not enough; a chain is a shortest one, and the most loaded
member at that distance gives.

Why chains matter: without an improving chain an assignment is optimal (Harvey, Ladner, Lovasz and
Tamir, "Semi-matchings for bipartite graphs and load balancing", 2003: no cost-reducing path means
optimal), and all optimal assignments have the same sorted counts. So if some balanced assignment keeps
every owned partition, balancing with unowned partitions alone finds one, and nothing owned moves. That
is what cooperative-sticky's second round relies on: the owned partitions are the first round's balanced
result less what it withheld, so the second round hands the withheld partitions over and moves nothing
else. With single moves only, the first round could stop short of balance and the second, starting
elsewhere, take an owned partition and withhold it: a partition nobody was assigned.

Cost: heaps per topic pick the least loaded member when placing and the most loaded holder for a direct
move; a chain needs a breadth-first search over members and topics, and a search that finds nothing
is not repeated. 1,000 members with differing subscriptions over 10,000 partitions take tens of
milliseconds (bench/bench_assignors.py); when most members are new and every move takes an owned
partition, up to about a second.
"""

from __future__ import annotations

import heapq
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

    def __init__(self, cluster: Cluster, members: Mapping[str, Member], partitions: list[TopicPartition]) -> None:
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


class _LeastLoaded:
    """The eligible members of one topic by (count, rank), to place that topic's unowned partitions.

    Heap entries go stale as counts grow (they only grow while a topic is placed); a stale top is pushed
    back with the current count. With racks, a heap per member rack finds a rack-local member among
    the least loaded.
    """

    def __init__(self, members: list[str], general: _General) -> None:
        self.count = general.count
        self.rank = general.rank
        self.racks = general.racks
        self.heap = [(self.count[m], self.rank[m], m) for m in members]
        heapq.heapify(self.heap)
        self.by_rack: dict[str, list[tuple[int, int, str]]] = {}
        if self.racks.enabled:
            for entry in self.heap:
                rack = self.racks.member_rack[entry[2]]
                if rack is not None:
                    self.by_rack.setdefault(rack, []).append(entry)
            for heap in self.by_rack.values():
                heapq.heapify(heap)

    def _top(self, heap: list[tuple[int, int, str]]) -> tuple[int, int, str]:
        while heap[0][0] != self.count[heap[0][2]]:
            _, rank, member_id = heapq.heappop(heap)
            heapq.heappush(heap, (self.count[member_id], rank, member_id))
        return heap[0]

    def pick(self, tp: TopicPartition) -> str:
        best = self._top(self.heap)
        if self.by_rack:
            local = [
                self._top(self.by_rack[rack]) for rack in self.racks.partition_racks.get(tp, ()) if rack in self.by_rack
            ]
            local = [entry for entry in local if entry[0] == best[0]]
            if local:
                best = min(local)
        return best[2]


class _General:
    """The general case: who holds what, per member and topic, and which of it the member owned before.

    `sticky[m][t]` are the partitions of topic t that member m holds and owned before; `free[m][t]` the
    rest of what it holds (insertion-ordered dicts, so every choice is deterministic).
    """

    def __init__(self, members: Mapping[str, Member], owned: Mapping[str, list[TopicPartition]], racks: _Racks) -> None:
        order = sorted(members)
        self.order = order
        self.rank = {m: i for i, m in enumerate(order)}
        self.topics = {m: sorted(members[m].topics) for m in order}
        self.eligible: defaultdict[str, list[str]] = defaultdict(list)
        for member_id in order:
            for topic in self.topics[member_id]:
                self.eligible[topic].append(member_id)
        self.racks = racks
        self.owner = {tp: m for m, kept in owned.items() for tp in kept}
        self.count = {m: len(owned[m]) for m in order}
        self.sticky: dict[str, dict[str, dict[TopicPartition, None]]] = {m: {} for m in order}
        self.free: dict[str, dict[str, dict[TopicPartition, None]]] = {m: {} for m in order}
        for member_id in order:
            for tp in owned[member_id]:
                self.sticky[member_id].setdefault(tp.topic, {})[tp] = None

    def _add(self, member_id: str, tp: TopicPartition) -> None:
        held = self.sticky if self.owner.get(tp) == member_id else self.free
        held[member_id].setdefault(tp.topic, {})[tp] = None
        self.count[member_id] += 1

    def _move(self, tp: TopicPartition, giver: str, taker: str) -> None:
        held = self.sticky if self.owner.get(tp) == giver else self.free
        del held[giver][tp.topic][tp]
        self.count[giver] -= 1
        self._add(taker, tp)

    def place(self, unassigned: Iterable[TopicPartition]) -> None:
        """Each partition to the least loaded eligible member: fewest eligible members first, and
        topics with as many taking turns partition by partition."""
        heaps: dict[str, _LeastLoaded] = {}
        for tp in sorted(unassigned, key=lambda tp: (len(self.eligible[tp.topic]), tp.partition, tp.topic)):
            if tp.topic not in heaps:
                heaps[tp.topic] = _LeastLoaded(self.eligible[tp.topic], self)
            self._add(heaps[tp.topic].pick(tp), tp)

    def _movable(self, member_id: str, topic: str, owned_too: bool) -> bool:
        """Whether the member holds a partition of the topic that balancing may move."""
        return bool(self.free[member_id].get(topic) or (owned_too and self.sticky[member_id].get(topic)))

    def _choose(self, giver: str, taker: str, topic: str) -> TopicPartition:
        """The partition of `topic` that `giver` hands to `taker`: not owned before, rack-local to the
        taker, not rack-local to the giver, lowest."""
        candidates = self.free[giver].get(topic) or self.sticky[giver][topic]
        if not self.racks.enabled:
            return min(candidates)
        return min(candidates, key=lambda tp: (not self.racks.matches(taker, tp), self.racks.matches(giver, tp), tp))

    def _movable_topics(self, member_id: str, owned_too: bool) -> list[str]:
        topics = [t for t, parts in self.free[member_id].items() if parts]
        if owned_too:
            topics += [t for t, parts in self.sticky[member_id].items() if parts]
        return topics

    def balance(self, owned_too: bool) -> None:
        """Move partitions until no member can pass one, directly or along a chain, to a member holding
        two or more fewer. Only partitions their holders did not own before move unless `owned_too`.

        Members start by (count, rank). A start with L partitions first takes one from the most loaded
        member holding a movable partition of a topic it subscribes to, if that one holds L + 2 or more
        (a max-heap of holders per topic). Otherwise a breadth-first search goes backwards (who holds a
        movable partition of a topic the start subscribes to; who holds one of a topic that one
        subscribes to; ...), and the first layer with a member holding L + 2 or more has the most loaded
        of them (then by rank) give one along the search path. A search that moves is undone and its
        members start again. A search that finds nobody stays: everything it reached holds at most
        L + 1, and nothing later lets a member outside it pass a partition in, since a chain only gives
        out topics its own search expanded and a direct move only topics no search has (a reached holder
        holds too few to give). Every member is started or reached in order of its count, so in the end
        no member can pass a partition to one holding two fewer.
        """
        holders: dict[str, list[tuple[int, int, str]]] = {}  # per topic: (-count, rank, member), lazily

        def note(member_id: str) -> None:
            entry = (-self.count[member_id], self.rank[member_id], member_id)
            for topic in self._movable_topics(member_id, owned_too):
                heapq.heappush(holders.setdefault(topic, []), entry)

        def most_loaded(start: str) -> tuple[str, str] | None:
            best: tuple[tuple[int, int, str], str] | None = None
            for topic in self.topics[start]:
                heap = holders.get(topic, [])
                while heap and not (
                    -heap[0][0] == self.count[heap[0][2]] and self._movable(heap[0][2], topic, owned_too)
                ):
                    heapq.heappop(heap)
                if heap and heap[0][2] != start and (best is None or heap[0] < best[0]):
                    best = (heap[0], topic)
            if best is None or -best[0][0] < self.count[start] + 2:
                return None
            return best[0][2], best[1]

        for member_id in self.order:
            note(member_id)
        free, sticky = self.free, self.sticky
        reached: set[str] = set()
        expanded: set[str] = set()
        queue = [(self.count[m], self.rank[m], m) for m in self.order]
        heapq.heapify(queue)
        pending = set(self.order)  # members with an entry in the queue that matches their count

        def requeue(member_id: str) -> None:
            heapq.heappush(queue, (self.count[member_id], self.rank[member_id], member_id))
            pending.add(member_id)

        while queue:
            count, rank, start = heapq.heappop(queue)
            if count != self.count[start]:
                continue  # the count changed, and a new entry went in then
            pending.discard(start)
            if start in reached:
                continue
            direct = most_loaded(start)
            if direct is not None:
                giver, topic = direct
                self._move(self._choose(giver, start, topic), giver, start)
                for member_id in (giver, start):
                    note(member_id)
                    requeue(member_id)
                continue
            reached.add(start)
            members, topics = [start], []
            parent: dict[str, tuple[str, str]] = {}
            layer, found = [start], None
            while layer and found is None:
                next_layer = []
                for member_id in layer:
                    for topic in self.topics[member_id]:
                        if topic in expanded:
                            continue
                        expanded.add(topic)
                        topics.append(topic)
                        for other in self.eligible[topic]:
                            if other not in reached and (
                                free[other].get(topic) or (owned_too and sticky[other].get(topic))
                            ):
                                reached.add(other)
                                parent[other] = (topic, member_id)
                                next_layer.append(other)
                                members.append(other)
                givers = [m for m in next_layer if self.count[m] >= count + 2]
                if givers:
                    found = min(givers, key=lambda m: (-self.count[m], self.rank[m]))
                layer = next_layer
            if found is None:
                continue
            giver = found
            while giver in parent:
                topic, taker = parent[giver]
                self._move(self._choose(giver, taker, topic), giver, taker)
                note(giver)
                giver = taker
            note(start)
            reached.difference_update(members)
            expanded.difference_update(topics)
            for member_id in members:
                if member_id in (found, start) or member_id not in pending:
                    requeue(member_id)

    def result(self) -> RawAssignment:
        return {
            m: [tp for held in (self.sticky[m], self.free[m]) for parts in held.values() for tp in parts]
            for m in self.order
        }


def general_assign(
    partitions: list[TopicPartition],
    members: Mapping[str, Member],
    owned: Mapping[str, list[TopicPartition]],
    racks: _Racks,
) -> RawAssignment:
    """Different subscriptions: keep owned, place the rest on the least loaded, then balance, moving
    partitions their holders did not own first and owned ones only where that is not enough."""
    general = _General(members, owned, racks)
    general.place(tp for tp in partitions if tp not in general.owner)
    general.balance(owned_too=False)
    general.balance(owned_too=True)
    return general.result()


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
