"""The JSON documents of the HTTP API (herd.server.http) and the web console: groups, members, assignments, lag,
rebalance history and topics, built from this node's state. Every builder only reads.

A group is described by the node that coordinates it (its shard holds the members, the committed offsets and the
history); `local_groups` lists the groups of this node's active shards, and the HTTP layer merges those of the
other nodes in cluster mode. Topics are the cluster's (every node knows them all); their offsets and sizes come
from this node's logs on a single node and from PostgreSQL in cluster mode.

Shapes (every offset an int, every time epoch ms):

    group summary: {"group", "type", "state", "protocol_type", "protocol", "generation", "members", "coordinator",
                    "lag", "last_rebalance"}     type: "classic", or "consumer" for a KIP-848 consumer group (its
                   "protocol" is its server-side assignor, its "generation" its group epoch; it also has
                   "assignment_epoch"); lag: the sum of the known partition lags, or null;
                   last_rebalance: {"generation", "cause", "started_ms", "completed_ms", "outcome"} of the
                   newest history entry, or null
    group detail:  the summary's keys and "leader", "members": [member], "partitions": [partition lag],
                   "rebalances": [entry] (oldest first, herd.coordinator.history's Rebalance.to_json)
    member:        {"member_id", "group_instance_id", "client_id", "client_host", "session_timeout_ms",
                    "rebalance_timeout_ms", "assignment": [{"topic", "partitions": [int]}] or null}
                   (null: not the consumer protocol, or bytes that do not decode); a consumer group's member
                   also has "member_epoch", "member_state" (STABLE, UNREVOKED_PARTITIONS,
                   UNRELEASED_PARTITIONS), "target_assignment" (as "assignment") and "protocol" ("consumer",
                   or "classic" for a member that joined with JoinGroup)
    share group:   type "share" (KIP-932): "protocol" its assignor (simple), "generation" its group epoch,
                   "assignment_epoch"; lag the sum over its share partitions of end offset - start offset - records
                   delivered for good; in detail, members with "member_epoch" and "assignment", and "partitions" as
                   share partition: {"topic", "partition", "start_offset", "end_offset", "lag", "available",
                    "acquired", "acknowledged", "archived"} (the records in flight by state, null where this
                    node does not lead the partition)
    partition lag: {"topic", "partition", "committed", "end_offset", "lag", "member_id"}
                   (end_offset and lag null when unknown; member_id the member assigned it, or null)
    topic:         {"topic", "internal", "partitions": [{"partition", "leader", "start_offset", "end_offset",
                    "size_bytes"}]}             (null where unknown)
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from herd.coordinator.consumer.group import ConsumerGroup
from herd.coordinator.consumer.member import ConsumerMember
from herd.coordinator.group import ClassicGroup
from herd.coordinator.history import Rebalance
from herd.coordinator.member import Member
from herd.coordinator.share.group import ShareGroup
from herd.runtime.shares import records_by_state
from herd.server.broker import Broker
from herd.server.lag import group_lags

CONSUMER = "consumer"
_read_assignment = entity_reader(ConsumerProtocolAssignment)


_LAST_REBALANCE = ("generation", "cause", "started_ms", "completed_ms", "outcome")


class NotHere(Exception):
    """The group is not coordinated by an active shard of this node (another node's, or its partition loads)."""


# -- groups ----------------------------------------------------------------------------------------------------


def coordinator_node(broker: Broker, group_id: str) -> int | None:
    """The node that coordinates `group_id` as this node sees it (FindCoordinator's answer), or None."""
    runtime = broker.coordinator
    if runtime is None or not runtime.num_partitions:
        return None
    # mode test kept (tests/unit/server/test_one_seam.py): a single node's `leader` is itself for every
    # partition, but its coordinator may have unloaded one (a move on demand, fault injection): what it hosts is
    # its runtime's to say; a cluster node reads the partition's leader, which may be another node
    if not broker.cluster.shared:
        return broker.node_id if runtime.hosts(group_id) else None
    leader, _ = broker.cluster.leader(runtime.topic, runtime.partition_for(group_id))
    return leader if leader >= 0 else None


def _shard(broker: Broker, group_id: str) -> Any:
    """The core shard holding `group_id` on this node; raises NotHere."""
    runtime = broker.coordinator
    if runtime is None or not runtime.num_partitions:
        raise NotHere(group_id)
    shard = runtime.shards.get(runtime.partition_for(group_id))
    if shard is None or shard.state.value != "active":
        raise NotHere(group_id)
    return shard.shard


def _active_shards(broker: Broker) -> list[Any]:
    runtime = broker.coordinator
    if runtime is None:
        return []
    return [s.shard for s in list(runtime.shards.values()) if s.state.value == "active"]


def _summary(
    broker: Broker,
    group_id: str,
    group: ClassicGroup | ConsumerGroup | None,
    lags: list[Any],
    history: tuple[Any, ...],
    assignor: str = "",
) -> dict[str, Any]:
    known = [p.lag for p in lags if p.lag is not None]
    last = rebalance_json(history[-1]) if history else None
    if isinstance(group, ConsumerGroup):
        return {
            "group": group_id,
            "type": CONSUMER,
            "state": group.state.value,
            "protocol_type": CONSUMER,
            "protocol": group.preferred_assignor(assignor) if group.members else None,
            "generation": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "members": len(group.members),
            "coordinator": broker.node_id,
            "lag": sum(known) if known else None,
            "last_rebalance": None if last is None else {key: last.get(key) for key in _LAST_REBALANCE},
        }
    return {
        "group": group_id,
        "type": "classic",
        "state": group.state.value if group is not None else "Empty",
        "protocol_type": group.protocol_type if group is not None else None,
        "protocol": group.protocol_name if group is not None else None,
        "generation": group.generation_id if group is not None else 0,
        "members": len(group.members) if group is not None else 0,
        "coordinator": broker.node_id,
        "lag": sum(known) if known else None,
        "last_rebalance": None if last is None else {key: last.get(key) for key in _LAST_REBALANCE},
    }


async def local_groups(broker: Broker) -> list[dict[str, Any]]:
    """The summary of every group of this node's active shards (with members, or committed offsets only), by id."""
    out = []
    assignor = _default_assignor(broker)
    for shard in _active_shards(broker):
        for share_group in shard.share_groups():
            partitions = await _share_partitions(broker, shard, share_group)
            out.append(_share_summary(broker, share_group, partitions))
        groups: dict[str, ClassicGroup | ConsumerGroup] = {g.group_id: g for g in shard.groups()}
        groups.update((g.group_id, g) for g in shard.consumer_groups())
        for group_id in sorted(set(groups) | set(shard.offset_group_ids())):
            if len(out) % 200 == 199:
                await asyncio.sleep(0)  # thousands of groups: let the Kafka connections be served in between
            out.append(
                _summary(
                    broker,
                    group_id,
                    groups.get(group_id),
                    await group_lags(broker, group_id),
                    shard.rebalance_history(group_id),
                    assignor,
                )
            )
    return sorted(out, key=lambda g: g["group"])


def _default_assignor(broker: Broker) -> str:
    runtime = broker.coordinator
    return runtime.config.group_consumer_assignors[0] if runtime is not None else ""


async def group_detail(broker: Broker, group_id: str) -> dict[str, Any] | None:
    """The group's members, assignments, lag and history; None if this node's shard does not know it.
    Raises NotHere if this node does not coordinate it (now)."""
    shard = _shard(broker, group_id)
    share_group: ShareGroup | None = shard.share_group(group_id)
    if share_group is not None:
        partitions = await _share_partitions(broker, shard, share_group)
        names = shard.topics.with_names
        return {
            **_share_summary(broker, share_group, partitions),
            "leader": None,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": None,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_epoch": m.member_epoch,
                    "assignment": _listed(m.assigned, names),
                }
                for m in share_group.members.values()
            ],
            "partitions": partitions,
            "rebalances": [],
        }
    consumer_group: ConsumerGroup | None = shard.consumer_group(group_id)
    if consumer_group is not None:
        return await _consumer_group_detail(broker, shard, consumer_group)
    group: ClassicGroup | None = shard.group(group_id)
    history = shard.rebalance_history(group_id)
    lags = await group_lags(broker, group_id)
    if group is None and not lags and not history and not shard.committed_offsets(group_id):
        return None
    members = [_member(m, group) for m in group.members.values()] if group is not None else []
    owners = {(a["topic"], p): m["member_id"] for m in members for a in m["assignment"] or () for p in a["partitions"]}
    return {
        **_summary(broker, group_id, group, lags, history),
        "leader": group.leader_id if group is not None else None,
        "members": members,
        "partitions": [_lag(p, owners.get((p.topic, p.partition))) for p in lags],
        "rebalances": [rebalance_json(entry) for entry in history],
    }


async def _consumer_group_detail(broker: Broker, shard: Any, group: ConsumerGroup) -> dict[str, Any]:
    """A KIP-848 consumer group: members with their epochs, states, current and target assignments."""
    group_id = group.group_id
    history = shard.rebalance_history(group_id)
    lags = await group_lags(broker, group_id)
    names = shard.topics.with_names
    session_ms = shard.consumer_session_timeout_ms(group_id)
    members = [_consumer_member(m, group, names, session_ms) for m in group.members.values()]
    owners = {(a["topic"], p): m["member_id"] for m in members for a in m["assignment"] for p in a["partitions"]}
    return {
        **_summary(broker, group_id, group, lags, history, _default_assignor(broker)),
        "leader": None,
        "members": members,
        "partitions": [_lag(p, owners.get((p.topic, p.partition))) for p in lags],
        "rebalances": [rebalance_json(entry) for entry in history],
    }


def _share_summary(broker: Broker, group: ShareGroup, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    known = [p["lag"] for p in partitions if p["lag"] is not None]
    return {
        "group": group.group_id,
        "type": "share",
        "state": group.state.value,
        "protocol_type": ShareGroup.PROTOCOL_TYPE,
        "protocol": "simple",
        "generation": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": len(group.members),
        "coordinator": broker.node_id,
        "lag": sum(known) if known else None,
        "last_rebalance": None,
    }


async def _share_partitions(broker: Broker, shard: Any, group: ShareGroup) -> list[dict[str, Any]]:
    """Each initialized share partition of the group: start offset and lag (SharePartitions.summary), and the
    records in flight by state where this node leads it."""
    metadata = group.state_metadata
    if metadata is None:
        return []
    out = []
    for topic_id, state in sorted(metadata.initialized.items(), key=lambda t: t[1].name):
        topic = broker.cluster.by_id(topic_id)
        if topic is None:
            continue
        for index in sorted(state.partitions):
            start, done, _ = await broker.shares.summary(group.group_id, topic.name, index)
            log = topic.partitions[index] if index < len(topic.partitions) else None
            end = log.log_end_offset if log is not None else None
            share = broker.shares.get(group.group_id, topic.name, index)
            counts: dict[str, int | None] = (
                dict(records_by_state(share))
                if share is not None
                else dict.fromkeys(("available", "acquired", "acknowledged", "archived"))
            )
            out.append(
                {
                    "topic": topic.name,
                    "partition": index,
                    "start_offset": None if start < 0 else start,
                    "end_offset": end,
                    "lag": end - start - done if end is not None and start >= 0 and done >= 0 else None,
                    **counts,
                }
            )
    return out


def _listed(assignment: Any, names: Any) -> list[dict[str, Any]]:
    """An assignment by topic id as [{"topic", "partitions"}] (`names`: TopicsImage.with_names)."""
    return [{"topic": topic, "partitions": sorted(parts)} for topic, parts in sorted(names(assignment).items())]


def _consumer_member(member: ConsumerMember, group: ConsumerGroup, names: Any, session_ms: int) -> dict[str, Any]:
    def listed(of: Any) -> list[dict[str, Any]]:
        return [{"topic": topic, "partitions": sorted(parts)} for topic, parts in sorted(names(of).items())]

    return {
        "member_id": member.member_id,
        "group_instance_id": member.instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.classic.session_timeout_ms if member.classic is not None else session_ms,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "assignment": listed(member.assigned),
        "member_epoch": member.member_epoch,
        "member_state": member.state.name,
        "target_assignment": listed(group.target(member.member_id)),
        "protocol": "classic" if member.classic is not None else CONSUMER,
    }


def _member(member: Member, group: ClassicGroup) -> dict[str, Any]:
    consumer = group.protocol_type == CONSUMER
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.session_timeout_ms,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "assignment": decode_assignment(member.assignment) if consumer else None,
    }


def _lag(p: Any, member_id: str | None) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "committed": p.committed,
        "end_offset": p.end_offset,
        "lag": p.lag,
        "member_id": member_id,
    }


def decode_assignment(data: bytes) -> list[dict[str, Any]] | None:
    """A consumer-protocol assignment (any version, read as the v0 prefix every version shares) as
    [{"topic", "partitions"}], [] for no bytes (not synced yet), or None if the bytes do not decode."""
    if not data:
        return []
    if len(data) < 2 or struct.unpack_from(">h", data)[0] < 0:
        return None
    try:
        assignment, _ = _read_assignment(data, 2)
    except (SerialError, ValueError, IndexError, struct.error):
        return None
    return [
        {"topic": str(tp.topic), "partitions": sorted(int(p) for p in tp.partitions)}
        for tp in assignment.assigned_partitions
    ]


def rebalance_json(entry: Rebalance) -> dict[str, Any]:
    """One history entry as JSON (coordinator/history.py: `Rebalance.to_json`)."""
    return dict(entry.to_json())


# -- topics ----------------------------------------------------------------------------------------------------


async def topics(broker: Broker) -> list[dict[str, Any]]:
    """Every topic with its partitions' leaders, offsets and sizes, by name."""
    cluster = broker.cluster
    stats = await broker.admin.partition_stats()
    out = []
    for topic in sorted(cluster.topics(), key=lambda t: t.name):
        partitions = []
        for index in range(len(topic.partitions)):
            leader, start, end, size = stats.get((topic.name, index), (None, None, None, None))
            partitions.append(
                {"partition": index, "leader": leader, "start_offset": start, "end_offset": end, "size_bytes": size}
            )
        out.append({"topic": topic.name, "internal": topic.internal, "partitions": partitions})
    return out
