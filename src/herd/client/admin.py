"""Admin operations on groups and topics, as kafka-consumer-groups.sh and kafka-topics.sh perform them.

`Admin` wraps a KafkaClient. Group operations go to each group's coordinator (found and found again
through `KafkaClient.call_coordinator`); topic operations to any broker. Results are frozen dataclasses
with the fields the CLI prints (herd.cli.groups, herd.cli.topics); failures raise `AdminError`, a
KafkaError whose message is the one line Kafka's tools print for it (e.g. "Consumer group 'g' does not
exist.", "Assignments can only be reset if the group 'g' is inactive, but the current state is Stable.").

Describing a group decodes each member's assignment with the consumer protocol codec when the group's
protocol type is "consumer". Describing offsets joins three answers as Kafka's tool does: the members'
assignments (DescribeGroups), the committed offsets (OffsetFetch) and the log end offsets (ListOffsets);
LAG is LOG-END-OFFSET - CURRENT-OFFSET. Describing a group also reads its KIP-469 pre-registrations
(herd.client.admin_preregistration): `GroupDescription.expected_members` are the pre-registered static members
that have not joined yet, and a group that does not exist but has some is described (as Dead) rather than
refused. Resetting offsets computes the new offsets with the pure
`reset_target`, and commits them (OffsetCommit with generation -1 and no member id, an admin commit)
only when asked to execute and only while the group has no members.

Topics, configs and transactions (kafka-transactions.sh's list, describe, describe-producers, abort, find-hanging)
are mixed in from herd.client.admin_topics, admin_configs and admin_transactions; a group's rebalance history
(`rebalance_history`) from admin_history; SCRAM credentials of users (KIP-554) from admin_users and ACLs from
admin_acls. `security` (herd.client.security) secures every connection the Admin opens.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from herd.client.admin_acls import AclAdmin
from herd.client.admin_configs import ConfigAdmin
from herd.client.admin_history import HistoryAdmin
from herd.client.admin_preregistration import PreregistrationAdmin
from herd.client.admin_share import ShareAdmin
from herd.client.admin_topics import TopicAdmin
from herd.client.admin_transactions import TransactionAdmin
from herd.client.admin_users import UserAdmin
from herd.client.connection import KafkaClient, Node
from herd.client.consumer_protocol import (
    ConsumerProtocolError,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    group_by_topic,
)
from herd.client.errors import KafkaError, error_name
from herd.client.offsets import EARLIEST, LATEST, commit_offsets, fetch_committed, list_offsets
from herd.client.security import ClientSecurity
from herd.client.wire import RequestBuilder

__all__ = [
    "Admin",
    "AdminError",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "OffsetRow",
    "ResetSpec",
    "reset_target",
]

DESCRIBE_GROUPS: Final = 15
LIST_GROUPS: Final = 16
CONSUMER_GROUP_DESCRIBE: Final = 69
LEAVE_GROUP: Final = 13
DELETE_GROUPS: Final = 42
OFFSET_DELETE: Final = 47
INACTIVE_STATES: Final = frozenset({"Empty", "Dead"})
ADMIN_LEAVE_REASON: Final = "member was removed by an admin"


class AdminError(KafkaError):
    """An admin operation failed; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] | None  # decoded when the protocol type is "consumer"
    subscribed_topics: tuple[str, ...] | None = None
    member_epoch: int | None = None  # a KIP-848 consumer group's member (ConsumerGroupDescribe)
    target_assignment: tuple[TopicPartition, ...] | None = None  # a KIP-848 member's target


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator: Node
    expected_members: tuple[str, ...] = ()
    """KIP-469: pre-registered group.instance.ids that have not joined yet."""
    group_type: str = "classic"
    """"consumer" for a KIP-848 group (`protocol` is then its server-side assignor, as kafka-consumer-groups.sh shows
    it under ASSIGNMENT-STRATEGY)."""
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


@dataclass(frozen=True, slots=True)
class OffsetRow:
    """One line of kafka-consumer-groups.sh --describe (None prints as "-")."""

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None


@dataclass(frozen=True, slots=True)
class ResetSpec:
    """One of Kafka's reset specifications: earliest, latest, offset N, datetime (ms), shift N."""

    kind: str
    value: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("earliest", "latest", "offset", "datetime", "shift"):
            raise ValueError(f"unknown reset specification {self.kind!r}")


def reset_target(spec: ResetSpec, current: int | None, earliest: int, latest: int, by_time: int | None) -> int:
    """The new offset of one partition; raises AdminError when shifting without a committed offset.

    As Kafka's tool: a requested offset outside [earliest, latest] is moved to the nearest end, and a
    datetime after the last record resets to the log end.
    """
    if spec.kind == "earliest":
        return earliest
    if spec.kind == "latest":
        return latest
    if spec.kind == "datetime":
        return latest if by_time is None or by_time < 0 else by_time
    if spec.kind == "offset":
        wanted = spec.value
    else:
        if current is None:
            raise AdminError(
                ErrorCode.invalid_request, "Cannot shift offset for a partition without a current committed offset."
            )
        wanted = current + spec.value
    return min(max(wanted, earliest), latest)


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime format (YYYY-MM-DDTHH:mm:SS.sss, optional zone; UTC when none) -> ms."""
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"invalid datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _group_error(group_id: str, code: int, message: str | None = None) -> AdminError:
    if code == ErrorCode.group_id_not_found:
        return AdminError(code, f"Consumer group '{group_id}' does not exist.")
    return AdminError(code, f"group '{group_id}': {error_name(code)}" + (f" ({message})" if message else ""))


class Admin(
    TopicAdmin, ConfigAdmin, PreregistrationAdmin, HistoryAdmin, TransactionAdmin, UserAdmin, AclAdmin, ShareAdmin
):
    """Group, topic, config, transaction, SCRAM user and ACL administration against one cluster."""

    error_type = AdminError

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = "127.0.0.1:9092",
        *,
        client_id: str = "herd-admin",
        request_timeout_ms: int = 30_000,
        security: ClientSecurity | Mapping[str, str] | None = None,
    ) -> None:
        """`security`: a ClientSecurity or Kafka client properties (herd.client.security); raises
        SecurityConfigError when they are unusable."""
        self.client = KafkaClient(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms, security=security
        )

    async def __aenter__(self) -> Admin:
        await self.client.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    # -- listing and describing groups --------------------------------------------------------------------

    async def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[GroupListing]:
        """Every group of every broker, filtered by state and type (case-insensitive), sorted by id.

        A broker that cannot be reached, or that answers COORDINATOR_LOAD_IN_PROGRESS or COORDINATOR_NOT_AVAILABLE
        (a coordinator partition moving to it), makes the whole listing start again after a backoff, from the
        brokers the metadata names then, until the request timeout: Java's Admin retries such a broker's
        ListGroups the same way (KafkaAdminClient.listConsumerGroups in apache/kafka,
        clients/src/main/java/org/apache/kafka/clients/admin/KafkaAdminClient.java), and asking every broker
        again is what lists the groups of a broker that died at the node that took its partitions over."""
        states, types = tuple(states), tuple(types)

        async def every_broker() -> list[GroupListing]:
            listings: dict[str, GroupListing] = {}
            for node in (await self.client.metadata([])).brokers:
                for listing in await self._list_groups_at(node, states, types):
                    listings[listing.group_id] = listing
            return [listings[g] for g in sorted(listings)]

        return await self.client.retrying(every_broker)

    async def _list_groups_at(self, node: int, states: tuple[str, ...], types: tuple[str, ...]) -> list[GroupListing]:
        def build(b: RequestBuilder) -> Any:
            return b.request(states_filter=states, types_filter=types)

        version, body = await self.client.send(LIST_GROUPS, build, node=node)
        if body.error_code:
            raise AdminError(body.error_code, f"ListGroups failed: {error_name(body.error_code)}")
        out = [
            GroupListing(
                g.group_id, g.protocol_type, getattr(g, "group_state", ""), getattr(g, "group_type", "") or "classic"
            )
            for g in body.groups
        ]
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        return [
            g
            for g in out
            if (not wanted_states or g.state.lower() in wanted_states)
            and (not wanted_types or g.group_type.lower() in wanted_types)
        ]

    async def describe_group(self, group_id: str) -> GroupDescription:
        """State, protocol and members of one group ("Dead" when it does not exist)."""

        def build(b: RequestBuilder) -> Any:
            return b.request(groups=(group_id,), include_authorized_operations=False)

        def error_of(version: int, body: Any) -> int:
            return int(body.groups[0].error_code)

        _, body = await self.client.call_coordinator(group_id, DESCRIBE_GROUPS, build, error_of)
        node = await self.client.find_coordinator(group_id)
        g = body.groups[0]
        if g.error_code and g.error_code != ErrorCode.group_id_not_found:
            raise _group_error(group_id, g.error_code, getattr(g, "error_message", None))
        waiting = await self.expected_members(group_id, strict=False)
        if g.error_code or (g.group_state == "Dead" and not g.members):
            consumer_group = await self._describe_consumer_group(group_id, node)  # as Java's Admin falls back
            if consumer_group is not None:
                return consumer_group
        if g.error_code:
            return GroupDescription(group_id, "Dead", "", "", (), node, waiting)
        members = tuple(_member(g.protocol_type, m) for m in g.members)
        joined = {m.group_instance_id for m in members}
        return GroupDescription(
            group_id,
            g.group_state,
            g.protocol_type,
            g.protocol_data,
            members,
            node,
            tuple(i for i in waiting if i not in joined),
        )

    async def _describe_consumer_group(self, group_id: str, node: Node) -> GroupDescription | None:
        """A KIP-848 consumer group from ConsumerGroupDescribe, or None when the group is not one (or the broker
        does not serve the API)."""
        if CONSUMER_GROUP_DESCRIBE not in (await self.client.any_connection()).versions:
            return None

        def build(b: RequestBuilder) -> Any:
            return b.request(group_ids=(group_id,), include_authorized_operations=False)

        def error_of(version: int, body: Any) -> int:
            return int(body.groups[0].error_code)

        _, body = await self.client.call_coordinator(group_id, CONSUMER_GROUP_DESCRIBE, build, error_of)
        g = body.groups[0]
        if g.error_code in (ErrorCode.group_id_not_found, ErrorCode.unsupported_version):
            return None
        if g.error_code:
            raise _group_error(group_id, g.error_code, g.error_message)

        def partitions(assignment: Any) -> tuple[TopicPartition, ...]:
            return tuple(
                TopicPartition(tp.topic_name, p) for tp in assignment.topic_partitions for p in sorted(tp.partitions)
            )

        members = tuple(
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                partitions(m.assignment),
                tuple(m.subscribed_topic_names),
                member_epoch=int(m.member_epoch),
                target_assignment=partitions(m.target_assignment),
            )
            for m in g.members
        )
        return GroupDescription(
            group_id,
            g.group_state,
            "consumer",
            g.assignor_name,
            members,
            node,
            group_type="consumer",
            group_epoch=int(g.group_epoch),
            assignment_epoch=int(g.assignment_epoch),
        )

    async def require_group(self, group_id: str) -> GroupDescription:
        """describe_group, raising AdminError when the group does not exist (and expects nobody)."""
        group = await self.describe_group(group_id)
        if not group.exists and not group.expected_members:
            raise _group_error(group_id, ErrorCode.group_id_not_found)
        return group

    async def describe_offsets(self, group_id: str) -> tuple[GroupDescription, list[OffsetRow]]:
        """The group and its rows of CURRENT-OFFSET / LOG-END-OFFSET / LAG, sorted by topic and partition."""
        group = await self.require_group(group_id)
        committed = await fetch_committed(self.client, group_id)
        owners: dict[TopicPartition, MemberDescription] = {}
        for member in group.members:
            for tp in member.assignment or ():
                owners[tp] = member
        partitions = sorted(set(committed) | set(owners))
        ends = await self._log_end_offsets(partitions)
        rows = []
        for tp in partitions:
            current = committed[tp].offset if tp in committed else None
            end = ends.get(tp)
            lag = end - current if end is not None and current is not None else None
            owner = owners.get(tp)
            rows.append(
                OffsetRow(
                    group_id,
                    tp.topic,
                    tp.partition,
                    current,
                    end,
                    lag,
                    owner.member_id if owner else None,
                    owner.host if owner else None,
                    owner.client_id if owner else None,
                )
            )
        return group, rows

    async def _log_end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        existing = await self._existing(partitions)
        return await list_offsets(self.client, existing, LATEST) if existing else {}

    async def _existing(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        partitions = list(partitions)
        metadata = await self.client.metadata(sorted({tp.topic for tp in partitions}))
        return [
            tp
            for tp in partitions
            if tp.topic in metadata.topics
            and not metadata.topics[tp.topic].error_code
            and tp.partition in metadata.topics[tp.topic].partitions
        ]

    # -- changing groups ----------------------------------------------------------------------------------

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, int]:
        """Delete empty groups; the error code per group (0 when deleted)."""
        result = {}
        for group_id in group_ids:

            def build(b: RequestBuilder, group_id: str = group_id) -> Any:
                return b.request(groups_names=(group_id,))

            def error_of(version: int, body: Any) -> int:
                return int(body.results[0].error_code)

            _, body = await self.client.call_coordinator(group_id, DELETE_GROUPS, build, error_of)
            result[group_id] = int(body.results[0].error_code)
        return result

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetDelete (KIP-496): forget committed offsets of partitions the group no longer consumes.

        Raises AdminError for a group-level error, UnsupportedApi when the broker lacks OffsetDelete.
        """
        parts = sorted(set(partitions))

        def build(b: RequestBuilder) -> Any:
            topics = tuple(
                b(
                    "OffsetDeleteRequestTopic",
                    name=t,
                    partitions=tuple(b("OffsetDeleteRequestPartition", partition_index=p) for p in ps),
                )
                for t, ps in group_by_topic(parts).items()
            )
            return b.request(group_id=group_id, topics=topics)

        _, body = await self.client.call_coordinator(
            group_id, OFFSET_DELETE, build, lambda v, body: int(body.error_code)
        )
        if body.error_code:
            raise _group_error(group_id, body.error_code)
        return {
            TopicPartition(t.name, int(p.partition_index)): int(p.error_code) for t in body.topics for p in t.partitions
        }

    async def plan_reset(
        self, group_id: str, spec: ResetSpec, topics: Mapping[str, Sequence[int] | None] | None
    ) -> dict[TopicPartition, int]:
        """The new offset per partition. `topics`: topic -> partitions (None: all); None: every topic
        the group has committed offsets for. Raises AdminError while the group has members."""
        group = await self.describe_group(group_id)
        if group.state not in INACTIVE_STATES:
            raise AdminError(
                ErrorCode.non_empty_group,
                f"Assignments can only be reset if the group "
                f"'{group_id}' is inactive, but the current state "
                f"is {group.state}.",
            )
        committed = {tp: c.offset for tp, c in (await fetch_committed(self.client, group_id)).items()}
        partitions = await self._reset_scope(topics, committed)
        earliest = await list_offsets(self.client, partitions, EARLIEST)
        latest = await list_offsets(self.client, partitions, LATEST)
        by_time = await list_offsets(self.client, partitions, spec.value) if spec.kind == "datetime" else {}
        return {
            tp: reset_target(spec, committed.get(tp), earliest[tp], latest[tp], by_time.get(tp)) for tp in partitions
        }

    async def _reset_scope(
        self, topics: Mapping[str, Sequence[int] | None] | None, committed: Mapping[TopicPartition, int]
    ) -> list[TopicPartition]:
        if topics is None:
            return sorted(committed)
        metadata = await self.client.metadata(sorted(topics))
        out = []
        for topic, wanted in topics.items():
            info = metadata.topics.get(topic)
            if info is None or info.error_code:
                raise AdminError(ErrorCode.unknown_topic_or_partition, f"Topic '{topic}' does not exist.")
            for p in sorted(info.partitions) if wanted is None else wanted:
                if p not in info.partitions:
                    raise AdminError(
                        ErrorCode.unknown_topic_or_partition, f"Partition {p} of topic '{topic}' does not exist."
                    )
                out.append(TopicPartition(topic, p))
        return sorted(out)

    async def commit_reset(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit planned offsets as an admin (generation -1); raises AdminError on any error."""
        errors = await commit_offsets(self.client, group_id, offsets)
        failed = {tp: code for tp, code in errors.items() if code}
        if failed:
            tp, code = next(iter(sorted(failed.items())))
            raise AdminError(
                code, f"Error resetting offsets of group '{group_id}' for {tp.topic}-{tp.partition}: {error_name(code)}"
            )

    async def remove_members(self, group_id: str, instance_ids: Sequence[str]) -> dict[str, int]:
        """KIP-345: remove static members by group.instance.id in one LeaveGroup (v3+); error per id. The reason
        (LeaveGroup v5, KIP-800) is the one Kafka's admin client sends (KafkaAdminClient.DEFAULT_LEAVE_GROUP_REASON)."""

        def build(b: RequestBuilder) -> Any:
            if b.version < 3:
                raise AdminError(
                    ErrorCode.unsupported_version,
                    "the broker cannot remove members by group.instance.id (LeaveGroup v3+)",
                )
            members = tuple(
                b("MemberIdentity", member_id="", group_instance_id=i, reason=ADMIN_LEAVE_REASON) for i in instance_ids
            )
            return b.request(group_id=group_id, members=members)

        _, body = await self.client.call_coordinator(group_id, LEAVE_GROUP, build, lambda v, body: int(body.error_code))
        if body.error_code:
            raise _group_error(group_id, body.error_code)
        return {m.group_instance_id: int(m.error_code) for m in body.members}


def _member(protocol_type: str, m: Any) -> MemberDescription:
    assignment = topics = None
    if protocol_type == "consumer":
        try:
            assignment = tuple(sorted(decode_assignment(m.member_assignment).partitions))
        except ConsumerProtocolError:
            assignment = None
        try:
            topics = decode_subscription(m.member_metadata).topics if m.member_metadata else None
        except ConsumerProtocolError:
            topics = None
    return MemberDescription(
        m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host, assignment, topics
    )
