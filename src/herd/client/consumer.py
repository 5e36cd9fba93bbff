"""Kafka consumer groups with herd's client: the "consumer" protocol type and a small `GroupConsumer`.

`ConsumerGroupProtocol` is the GroupProtocol of Kafka consumers. It joins with one protocol per assignor,
named as Kafka names them ("range", "roundrobin", "sticky", "cooperative-sticky"), whose metadata is a
ConsumerProtocolSubscription (v3, herd.client.consumer_protocol) listing the topics, the assignor's user
data, and, under the cooperative protocol, the partitions still owned and their generation. Because the
names and bytes are Kafka's, herd's members share a group with Java, librdkafka and kafka-python
consumers using the same assignor, whichever of them leads. The protocol is cooperative (KIP-429) when
every configured assignor supports it, as in Java's ConsumerCoordinator; then `revoked` is the set
difference old - new, and the membership machine carries out the two phases.

`GroupConsumer` puts a consumer on top, on the classic protocol or, with `group_protocol="consumer"`, on KIP-848's
(herd.client.consumer_group_member: the coordinator assigns, `server_assignor` names its assignor, commits carry
the member epoch). It subscribes, keeps each assigned partition's position (from the
group's committed offset, else `auto_offset_reset`), fetches records from the partition leaders, commits
positions (with the member's generation, so a zombie cannot commit) and, by default, commits what it
revoked before giving it up. Its callbacks receive sets of TopicPartitions: `on_assigned` the partitions
added, `on_revoked` those given up, `on_lost` those lost without a chance to commit.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from herd.client.assignors import Cluster, PartitionAssignor, RebalanceProtocol, assignor_for
from herd.client.connection import KafkaClient
from herd.client.consumer_group_member import ConsumerProtocolMember
from herd.client.consumer_protocol import (
    Assignment,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    group_by_topic,
)
from herd.client.errors import ConnectionLost, KafkaError
from herd.client.group import GroupMember
from herd.client.group_protocol import GroupAssignment, GroupProtocol, JoinedMember
from herd.client.offsets import EARLIEST, LATEST, commit_offsets, fetch_committed, list_offsets
from herd.client.records import Record, decode_batches
from herd.client.security import ClientSecurity
from herd.client.wire import RequestBuilder

__all__ = ["ConsumerGroupProtocol", "GroupConsumer", "PartitionsCallback", "partitions_of"]

log = logging.getLogger(__name__)

FETCH = 1
PartitionsCallback = Callable[[frozenset[TopicPartition]], Any]
ClusterSource = Callable[[Sequence[str]], Any]  # topics -> Cluster (or an awaitable of it)


def partitions_of(data: bytes) -> frozenset[TopicPartition]:
    """The partitions in consumer-protocol assignment bytes."""
    return frozenset(decode_assignment(data).partitions)


class ConsumerGroupProtocol(GroupProtocol):
    """The "consumer" protocol type, with assignors by Kafka name."""

    protocol_type = "consumer"

    def __init__(
        self,
        topics: Iterable[str],
        assignors: Sequence[str | PartitionAssignor] = ("range",),
        cluster: ClusterSource | None = None,
        rack_id: str | None = None,
    ) -> None:
        self.topics = tuple(sorted(set(topics)))
        self.assignors = {a.name: a for a in (assignor_for(x, rack_id) if isinstance(x, str) else x for x in assignors)}
        if not self.assignors:
            raise ValueError("at least one assignor is needed")
        self.cluster = cluster
        self.cooperative = all(RebalanceProtocol.COOPERATIVE in a.supported_protocols for a in self.assignors.values())

    def metadata(self, held: GroupAssignment | None) -> Sequence[tuple[str, bytes]]:
        owned = tuple(sorted(partitions_of(held.data))) if held is not None else ()
        generation = held.generation_id if held is not None else -1
        out = []
        for name, assignor in self.assignors.items():
            subscription = assignor.metadata(self.topics)
            if self.cooperative:
                subscription = replace(subscription, owned_partitions=owned, generation_id=generation)
            out.append((name, encode_subscription(subscription)))
        return out

    async def assign(self, protocol_name: str, members: Sequence[JoinedMember]) -> dict[str, bytes]:
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        instance_ids = {m.member_id: m.group_instance_id for m in members if m.group_instance_id}
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        cluster = self.cluster(topics) if self.cluster is not None else Cluster({})
        if inspect.isawaitable(cluster):
            cluster = await cluster
        result = self.assignors[protocol_name].assign(cluster, subscriptions, instance_ids)
        return {member_id: encode_assignment(a) for member_id, a in result.items()}

    def on_assignment(self, assignment: GroupAssignment) -> None:
        assignor = self.assignors.get(assignment.protocol_name)
        if assignor is not None:
            assignor.on_assignment(decode_assignment(assignment.data), assignment.generation_id)

    def is_cooperative(self, protocol_name: str) -> bool:
        return self.cooperative

    def revoked(self, protocol_name: str, old: bytes, new: bytes) -> bytes | None:
        gone = partitions_of(old) - partitions_of(new)
        return encode_assignment(Assignment(tuple(sorted(gone)))) if gone else None

    def handover_pending(
        self, protocol_name: str, members: Sequence[JoinedMember], assignments: Mapping[str, bytes]
    ) -> bool:
        """Whether some member claimed to own a partition that its new assignment lacks: it will revoke
        it and rejoin (Java: ConsumerCoordinator.onJoinComplete, "need to revoke partitions and re-join"),
        and the rebalance that follows hands it over (CooperativeStickyAssignor.adjustAssignment withholds
        partitionsTransferringOwnership "to be assigned in the followup rebalance")."""
        if not self.is_cooperative(protocol_name):
            return False
        for member in members:
            owned = decode_subscription(member.metadata).owned_partitions
            if owned and not set(owned) <= partitions_of(assignments.get(member.member_id, b"")):
                return True
        return False


async def cluster_of(client: KafkaClient, topics: Sequence[str]) -> Cluster:
    """Partition counts of the topics that exist (what assignors read)."""
    metadata = await client.metadata(list(topics))
    return Cluster({name: len(t.partitions) for name, t in metadata.topics.items() if not t.error_code})


class GroupConsumer:
    """A consumer in a Kafka consumer group (subscribe, fetch, commit), built on GroupMember."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        topics: Iterable[str],
        *,
        assignors: Sequence[str | PartitionAssignor] = ("range",),
        group_instance_id: str | None = None,
        client_id: str = "herd-consumer",
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        rebalance_timeout_ms: int = 30_000,
        auto_offset_reset: str = "latest",
        commit_on_revoke: bool = True,
        rack_id: str | None = None,
        on_assigned: PartitionsCallback | None = None,
        on_revoked: PartitionsCallback | None = None,
        on_lost: PartitionsCallback | None = None,
        security: ClientSecurity | Mapping[str, str] | None = None,
        group_protocol: str = "classic",
        server_assignor: str | None = None,
        topic_regex: str | None = None,
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest"):
            raise ValueError("auto_offset_reset must be 'earliest' or 'latest'")
        if group_protocol not in ("classic", "consumer"):
            raise ValueError("group_protocol must be 'classic' or 'consumer'")
        if topic_regex is not None and group_protocol != "consumer":
            raise ValueError("topic_regex needs group_protocol='consumer': the coordinator resolves it (KIP-848)")
        self.client = KafkaClient(bootstrap_servers, client_id=client_id, security=security)
        self.group_id = group_id
        self.protocol = ConsumerGroupProtocol(topics, assignors, lambda t: cluster_of(self.client, t), rack_id)
        self.member: GroupMember | ConsumerProtocolMember
        if group_protocol == "consumer":  # KIP-848: the coordinator assigns (`server_assignor`), no session here
            self.member = ConsumerProtocolMember(
                self.client,
                group_id,
                self.protocol.topics,
                group_instance_id=group_instance_id,
                rack_id=rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms,
                server_assignor=server_assignor,
                topic_regex=topic_regex,
                on_assigned=self._assigned,
                on_revoked=self._revoked,
                on_lost=self._lost,
            )
        else:
            self.member = GroupMember(
                bootstrap_servers,
                group_id,
                self.protocol,
                client=self.client,
                group_instance_id=group_instance_id,
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                on_assigned=self._assigned,
                on_revoked=self._revoked,
                on_lost=self._lost,
            )
        self.auto_offset_reset = auto_offset_reset
        self.commit_on_revoke = commit_on_revoke
        self.user_callbacks = {"assigned": on_assigned, "revoked": on_revoked, "lost": on_lost}
        self.positions: dict[TopicPartition, int] = {}
        self._has_partitions = asyncio.Event()  # set while the member holds partitions (getmany waits for it)
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        return frozenset(self.positions)

    async def __aenter__(self) -> GroupConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        await self.client.start()
        await self.member.start()

    async def close(self, timeout: float = 10.0) -> None:
        await self.member.close(timeout)
        await self.client.close()

    async def wait_for_assignment(self, timeout: float | None = None) -> frozenset[TopicPartition]:
        await self.member.wait_for_assignment(timeout)
        return self.assignment

    # -- callbacks from the membership machine --------------------------------------------------------------

    async def _assigned(self, assignment: GroupAssignment) -> None:
        added = partitions_of(assignment.data) - self.assignment
        await self._init_positions(added)
        await self._notify("assigned", added)

    async def _revoked(self, assignment: GroupAssignment) -> None:
        gone = partitions_of(assignment.data) & self.assignment
        if self.commit_on_revoke and gone:
            try:
                await self.commit({tp: self.positions[tp] for tp in gone}, assignment)
            except KafkaError:
                pass  # the generation is already over; the next owner starts from the last commit
        for tp in gone:
            self.positions.pop(tp, None)
        if not self.positions:
            self._has_partitions.clear()
        await self._notify("revoked", gone)

    async def _lost(self, assignment: GroupAssignment) -> None:
        gone = partitions_of(assignment.data) & self.assignment
        for tp in gone:
            self.positions.pop(tp, None)
        if not self.positions:
            self._has_partitions.clear()
        await self._notify("lost", gone)

    async def _notify(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        self.events.append((kind, partitions))
        callback = self.user_callbacks[kind]
        if callback is not None:
            result = callback(partitions)
            if inspect.isawaitable(result):
                await result

    async def _init_positions(self, partitions: frozenset[TopicPartition]) -> None:
        if not partitions:
            return
        committed = await fetch_committed(self.client, self.group_id, partitions)
        for tp, c in committed.items():
            self.positions[tp] = c.offset
        missing = [tp for tp in partitions if tp not in committed]
        reset = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        self.positions.update(await list_offsets(self.client, missing, reset))
        self._has_partitions.set()

    # -- consuming ----------------------------------------------------------------------------------------

    async def commit(
        self, offsets: Mapping[TopicPartition, int] | None = None, assignment: GroupAssignment | None = None
    ) -> None:
        """Commit `offsets` (the current positions by default) in the member's generation.

        Raises KafkaError (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, ...) when the commit is refused.
        """
        held = assignment or self.member.assignment
        if held is None:
            raise KafkaError(ErrorCode.rebalance_in_progress, "not a member of a stable generation")
        offsets = dict(self.positions if offsets is None else offsets)
        errors = await commit_offsets(
            self.client,
            self.group_id,
            offsets,
            generation_id=held.generation_id,
            member_id=held.member_id,
            group_instance_id=self.member.config.group_instance_id,
        )
        failed = {tp: code for tp, code in errors.items() if code}
        if failed:
            code = next(iter(failed.values()))
            raise KafkaError(code, f"commit failed: {ErrorCode(code).name.upper()} for {sorted(failed)}")

    async def getmany(self, timeout_ms: int = 500, max_bytes: int = 1 << 20) -> dict[TopicPartition, list[Record]]:
        """Records from the assigned partitions' positions on (waits up to `timeout_ms` for some).

        A partition whose leader cannot be reached (it died, or its leadership is moving) yields nothing this
        time and is fetched again on the next call, from the leader the metadata names then, as Java's Fetcher
        does after a failed fetch; the others are fetched as usual. The call waits a retry backoff (at most
        `timeout_ms`) when nothing could be fetched for that reason, so a loop around it does not spin. With no
        partition assigned it waits for an assignment, up to `timeout_ms`, and returns nothing (Java's poll blocks
        for its timeout then too)."""
        positions = dict(self.positions)
        if not positions:
            try:
                async with asyncio.timeout(timeout_ms / 1000):
                    await self._has_partitions.wait()
            except TimeoutError:
                pass
            return {}
        try:
            metadata = await self.client.metadata(sorted({tp.topic for tp in positions}))
        except ConnectionLost:  # no broker answered
            await self._back_off(timeout_ms)
            return {}
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, offset in positions.items():
            leader = metadata.topics[tp.topic].partitions.get(tp.partition, -1)
            by_leader.setdefault(leader, {})[tp] = offset
        out: dict[TopicPartition, list[Record]] = {}
        unreachable = 0
        for leader, wanted in by_leader.items():
            try:
                if leader < 0:
                    raise ConnectionLost(f"no leader for {sorted(wanted)}")
                out.update(await self._fetch(leader, wanted, timeout_ms, max_bytes))
            except ConnectionLost as exc:
                log.debug(
                    "group %s: fetching %s failed (%s); fetched again on the next call",
                    self.group_id,
                    sorted(wanted),
                    exc,
                )
                unreachable += 1
        if unreachable == len(by_leader):
            await self._back_off(timeout_ms)
        return {tp: records for tp, records in out.items() if records}

    async def _back_off(self, timeout_ms: int) -> None:
        await asyncio.sleep(min(timeout_ms, self.client.backoff.initial_ms) / 1000)

    async def _fetch(
        self, leader: int, wanted: dict[TopicPartition, int], timeout_ms: int, max_bytes: int
    ) -> dict[TopicPartition, list[Record]]:
        def build(b: RequestBuilder) -> Any:
            topics = tuple(
                b(
                    "FetchTopic",
                    topic=t,
                    partitions=tuple(
                        b(
                            "FetchPartition",
                            partition=p,
                            current_leader_epoch=-1,
                            fetch_offset=wanted[TopicPartition(t, p)],
                            last_fetched_epoch=-1,
                            log_start_offset=-1,
                            partition_max_bytes=max_bytes,
                        )
                        for p in ps
                    ),
                )
                for t, ps in group_by_topic(sorted(wanted)).items()
            )
            return b.request(
                replica_id=-1,
                max_wait=timeout_ms,
                min_bytes=1,
                max_bytes=max_bytes,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=topics,
                forgotten_topics_data=(),
                rack_id="",
            )

        _, body = await self.client.send(FETCH, build, node=leader, timeout_ms=timeout_ms + 30_000)
        out: dict[TopicPartition, list[Record]] = {}
        for topic in body.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, int(p.partition_index))
                out[tp] = await self._partition_records(tp, wanted[tp], p)
        return out

    async def _partition_records(self, tp: TopicPartition, offset: int, p: Any) -> list[Record]:
        if p.error_code == ErrorCode.offset_out_of_range and tp in self.positions:
            reset = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
            self.positions.update(await list_offsets(self.client, [tp], reset))
            return []
        if p.error_code or not p.records or self.positions.get(tp) != offset:
            return []  # errors are retried on the next call; a moved position means a rebalance happened
        records = [r for r in decode_batches(tp.topic, tp.partition, bytes(p.records)) if r.offset >= offset]
        if records:
            self.positions[tp] = records[-1].offset + 1
        return records
