"""`GroupCoordinatorShard`: the pure classic group coordinator of one `__consumer_offsets` partition.

How the runtime drives it:
- Requests: `join_group(req, reply)`, `sync_group`, `heartbeat`, `leave_group`, `describe_groups`,
  `list_groups`, `delete_groups`, `offset_commit`, `txn_offset_commit`, `offset_fetch`, `offset_delete`,
  `alter_group_configs`,
  `describe_group_configs` (GROUP resources: KIP-469 pre-registration). `reply` is the runtime's opaque
  handle; every call returns a `Result` whose `replies` pair handles with responses. A parked
  JoinGroup/SyncGroup has no reply in its own Result; its reply shows up in a later Result (another
  member's request or a timer).
- Results: append `result.records`, call `replay(record)` for each one (`replay(record, producer_id,
  producer_epoch)` when the Result has a `transaction`: TxnOffsetCommit, appended as one transactional batch of
  that producer), and release `result.replies` once everything appended up to this Result is durable. If the
  append fails, drop those replies and handle `on_append_failed(result, error_code)` instead.
- Transactions: `complete_transaction(req, reply)` returns a Result with a `marker` and no records: append it
  as a control batch, call `replay_end_transaction_marker(producer_id, commit, producer_epoch)` (Kafka's
  GroupCoordinatorShard.replayEndTransactionMarker), release the reply once durable.
- Timers: the shard schedules keyed operations on the injected `Timer`; when one comes due the
  runtime calls it and treats its `Result` exactly like a handler's.
- Load: `replay_loaded_batch([(key, value), ...])` for every batch of the partition (the same as
  `replay(Record(key, value))` for each record, faster, skipping undecodable records with a warning; with the
  batch's producer id and epoch if it is transactional), `replay_end_transaction_marker` for every control
  batch, then `on_loaded()`, which also starts the periodic offset-retention cleanup (retention.py).
  Unload: `on_unloaded()`.

Replay and live state. Offsets and group deletion are event-sourced: handlers only emit records and
`replay` applies them. Classic membership is not, exactly as in Kafka (CoordinatorResult with
replayRecords=false): join/sync/leave/heartbeat/timers mutate the group in memory (pending members,
parked joins, awaiting syncs exist only there) and persist GroupMetadata at Kafka's points (creation,
generation completion, becoming Empty, static replacement in Stable). Those records are emitted with
`Record.applied=True` and `replay` skips them, so replaying our own records onto live state is a no-op;
records read back from the log (applied=False) rebuild the group: Stable at the recorded generation
with its members (Empty without), every member's session timer re-armed by `on_loaded`, as Kafka's
GroupMetadataManager does when it loads a classic group. A coordinator move during a rebalance therefore
loses the in-flight join state, as in Kafka.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from herd.coordinator import (
    admin,
    consumer_heartbeat,
    group_configs,
    membership,
    offsets,
    preregistration,
    retention,
    share_groups,
    static,
)
from herd.coordinator import rebalance as rb
from herd.coordinator.config import CoordinatorConfig
from herd.coordinator.consumer import group as consumer_group
from herd.coordinator.consumer import records as consumer_records
from herd.coordinator.consumer.group import ConsumerGroup
from herd.coordinator.consumer.topics import TopicsImage
from herd.coordinator.context import ShardContext
from herd.coordinator.errors import ErrorCode, append_error_to_response_error
from herd.coordinator.group import ClassicGroup
from herd.coordinator.history import Rebalance, RebalanceHistory
from herd.coordinator.member import Member, MemberProtocol
from herd.coordinator.records import (
    EXPECTED_MEMBERS_KEY_TYPE,
    GROUP_CONFIG_KEY_TYPE,
    GROUP_METADATA_KEY_TYPE,
    OFFSET_COMMIT_KEY_TYPES,
    REBALANCE_HISTORY_KEY_TYPE,
    OffsetCommitRecord,
    Record,
    decode_group_metadata_key,
    decode_group_metadata_value,
    decode_rebalance_history_key,
    record_type,
)
from herd.coordinator.requests import (
    AlterGroupConfigs,
    CompleteTransaction,
    DeleteGroups,
    DescribeGroupConfigs,
    DescribeGroups,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ListConfiguredGroups,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
    TxnOffsetCommit,
)
from herd.coordinator.responses import JoinGroupResponse, SyncGroupResponse, error_response
from herd.coordinator.result import Effects, Reply, Result
from herd.coordinator.share import group as share_group
from herd.coordinator.share import records as share_records
from herd.coordinator.share.group import ShareGroup
from herd.coordinator.share.heartbeat import ShareGroupHeartbeat
from herd.coordinator.state import GroupState
from herd.coordinator.subscriptions import compute_subscribed_topics
from herd.coordinator.timer import Clock, Timer

log = logging.getLogger(__name__)


def _random_uuid() -> str:
    return str(uuid.uuid4())


class GroupCoordinatorShard:
    def __init__(
        self,
        *,
        clock: Clock,
        timer: Timer,
        config: CoordinatorConfig | None = None,
        uuid_factory: Callable[[], str] = _random_uuid,
    ) -> None:
        config = config or CoordinatorConfig()
        self._ctx = ShardContext(
            config=config,
            clock=clock,
            timer=timer,
            new_uuid=uuid_factory,
            history=RebalanceHistory(config.rebalance_history_size),
        )

    # --- requests ------------------------------------------------------------------------------

    def join_group(self, req: JoinGroup, reply: object) -> Result:
        return membership.join(self._ctx, req, reply)

    def sync_group(self, req: SyncGroup, reply: object) -> Result:
        return membership.sync(self._ctx, req, reply)

    def heartbeat(self, req: Heartbeat, reply: object) -> Result:
        return membership.heartbeat(self._ctx, req, reply)

    def heartbeat_error(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
        """`heartbeat` without the request and Result objects, for the runtime's fast path: the same effect,
        and the error code of the answer."""
        return membership.heartbeat_error(self._ctx, group_id, generation_id, member_id, instance_id)

    def consumer_group_heartbeat(self, req: consumer_heartbeat.ConsumerGroupHeartbeat, reply: object) -> Result:
        """ConsumerGroupHeartbeat (KIP-848): its records (replayed into the group) and its answer."""
        return consumer_heartbeat.handle(self._ctx, req, reply)

    def consumer_group_keep_alive(
        self, group_id: str, member_id: str, member_epoch: int, client_id: str, client_host: str
    ) -> tuple[str, int, int] | None:
        """The fast path of a ConsumerGroupHeartbeat that only keeps a reconciled member alive (no instance, rack,
        rebalance timeout, subscription or assignor in it): its answer (member id, epoch, interval) without request
        and Result objects, or None when it must go through `consumer_group_heartbeat`."""
        return consumer_heartbeat.keep_alive(self._ctx, group_id, member_id, member_epoch, client_id, client_host)

    def consumer_group_describe(self, req: consumer_heartbeat.ConsumerGroupDescribe, reply: object) -> Result:
        """ConsumerGroupDescribe (KIP-848): the consumer groups asked for, or GROUP_ID_NOT_FOUND."""
        return consumer_heartbeat.describe(self._ctx, req, reply)

    def share_group_heartbeat(self, req: ShareGroupHeartbeat, reply: object) -> Result:
        """ShareGroupHeartbeat (KIP-932): its records (replayed into the share group) and its answer."""
        return share_groups.handle(self._ctx, req, reply)

    def share_group_describe(self, req: share_groups.ShareGroupDescribe, reply: object) -> Result:
        """ShareGroupDescribe (KIP-932): the share groups asked for, or GROUP_ID_NOT_FOUND."""
        return share_groups.describe(self._ctx, req, reply)

    def share_initialized_partitions(self, req: share_groups.InitializedPartitions, reply: object) -> Result:
        """The share group's partitions with initialized share state (DescribeShareGroupOffsets of all topics)."""
        return share_groups.initialized_partitions(self._ctx, req, reply)

    def share_alter_offsets(self, req: share_groups.AlterShareOffsets, reply: object) -> Result:
        """AlterShareGroupOffsets: the group's side, before the share coordinator initializes the partitions."""
        return share_groups.alter_offsets(self._ctx, req, reply)

    def share_offsets_initialized(self, req: share_groups.ShareOffsetsInitialized, reply: object) -> Result:
        return share_groups.offsets_initialized(self._ctx, req, reply)

    def share_delete_offsets(self, req: share_groups.DeleteShareOffsets, reply: object) -> Result:
        """DeleteShareGroupOffsets: the group's side, before the share coordinator deletes the partitions' state."""
        return share_groups.delete_offsets(self._ctx, req, reply)

    def share_offsets_deleted(self, req: share_groups.ShareOffsetsDeleted, reply: object) -> Result:
        return share_groups.offsets_deleted(self._ctx, req, reply)

    def set_topics(self, topics: TopicsImage) -> None:
        """The cluster's topics changed (or this is the first look at them): consumer groups see `topics` from now
        on, and check their subscribed topics' metadata hash on their next heartbeat; topics created since make
        regex subscriptions resolve again."""
        if topics.by_name.keys() - self._ctx.topics.by_name.keys():
            self._ctx.topics_created_version = topics.version
        self._ctx.topics = topics

    def leave_group(self, req: LeaveGroup, reply: object) -> Result:
        return membership.leave(self._ctx, req, reply)

    def describe_groups(self, req: DescribeGroups, reply: object) -> Result:
        return admin.describe(self._ctx, req, reply)

    def list_groups(self, req: ListGroups, reply: object) -> Result:
        return admin.list_groups(self._ctx, req, reply)

    def delete_groups(self, req: DeleteGroups, reply: object) -> Result:
        return admin.delete(self._ctx, req, reply)

    def offset_commit(self, req: OffsetCommit, reply: object) -> Result:
        return offsets.commit(self._ctx, req, reply)

    def txn_offset_commit(self, req: TxnOffsetCommit, reply: object) -> Result:
        return offsets.txn_commit(self._ctx, req, reply)

    def complete_transaction(self, req: CompleteTransaction, reply: object) -> Result:
        """A transaction is complete: its marker to write here (`Result.marker`), answered once durable."""
        return offsets.complete_transaction(self._ctx, req, reply)

    def offset_fetch(self, req: OffsetFetch, reply: object) -> Result:
        return offsets.fetch(self._ctx, req, reply)

    def offset_delete(self, req: OffsetDelete, reply: object) -> Result:
        return offsets.delete(self._ctx, req, reply)

    def on_topics_deleted(self, topics: frozenset[str]) -> Result:
        """Topics were deleted: tombstones for the offsets committed on them (no reply; the runtime appends)."""
        return offsets.on_topics_deleted(self._ctx, topics)

    def alter_group_configs(self, req: AlterGroupConfigs, reply: object) -> Result:
        return group_configs.alter(self._ctx, req, reply)

    def describe_group_configs(self, req: DescribeGroupConfigs, reply: object) -> Result:
        return group_configs.describe(self._ctx, req, reply)

    def list_configured_groups(self, req: ListConfiguredGroups, reply: object) -> Result:
        return group_configs.configured(self._ctx, req, reply)

    # --- append failures -----------------------------------------------------------------------

    def on_append_failed(self, result: Result, error: ErrorCode) -> Result:
        """The records of `result` could not be appended (`error` is the log's error code).

        Runs the result's rollback (Kafka's append-future failure paths: undo a static replacement,
        fail and rebalance a generation whose assignment was lost, forget a group whose creation was
        lost) and answers every reply of `result` with the mapped error instead of its response.
        """
        out = result.rollback(error) if result.rollback is not None else Result()
        covered = {id(r.handle) for r in out.replies}
        mapped = append_error_to_response_error(error)
        extra = tuple(
            Reply(r.handle, error_response(r.response, mapped)) for r in result.replies if id(r.handle) not in covered
        )
        return Result(out.records, out.replies + extra, out.rollback)

    # --- replay and load -----------------------------------------------------------------------

    def replay(self, record: Record, producer_id: int = -1, producer_epoch: int = -1) -> None:
        """Apply one record (`producer_id`, `producer_epoch`: of its batch if transactional, else -1). Records
        live state already reflects (`applied`) are skipped."""
        if isinstance(record, OffsetCommitRecord):  # what its bytes hold, without decoding them again
            offsets.replay_decoded_offset(self._ctx, record.decoded, producer_id, producer_epoch)
        elif not record.applied:
            self.replay_loaded(record.key, record.value, producer_id, producer_epoch)

    def replay_loaded(self, key: bytes, value: bytes | None, producer_id: int = -1, producer_epoch: int = -1) -> None:
        """Apply one record read back from the log (what `replay` does for a record that is not `applied`).
        Raises ValueError for a record that cannot be decoded."""
        if len(key) < 2:
            raise ValueError(f"a {len(key)}-byte key has no record type")
        kind = record_type(key)
        if kind in OFFSET_COMMIT_KEY_TYPES:
            offsets.replay_offset(self._ctx, key, value, producer_id, producer_epoch)
        elif kind == GROUP_METADATA_KEY_TYPE:
            self._replay_group(Record(key, value))
        elif kind == EXPECTED_MEMBERS_KEY_TYPE:
            preregistration.replay(self._ctx, Record(key, value))
        elif kind == REBALANCE_HISTORY_KEY_TYPE:
            self._ctx.history.load(decode_rebalance_history_key(key).group, value)
        elif kind == GROUP_CONFIG_KEY_TYPE:
            group_configs.replay(self._ctx, Record(key, value))
        elif kind in consumer_records.CONSUMER_GROUP_KEY_TYPES:
            self._replay_consumer_group(consumer_records.decode(kind, key, value))
        elif kind in share_records.SHARE_GROUP_KEY_TYPES:
            self._replay_share_group(share_records.decode(kind, key, value))
        else:
            log.warning("skipping __consumer_offsets record of unknown type %d", kind)

    def replay_loaded_batch(
        self, records: list[tuple[bytes, bytes | None]], producer_id: int = -1, producer_epoch: int = -1
    ) -> int:
        """`replay_loaded` for each (key, value) of one batch read back from the log (`producer_id` >= 0 for a
        transactional batch), faster; a record that cannot be decoded is skipped with a warning. Returns how many
        were skipped. While transactions hold offsets, and for a transactional batch, records are replayed one
        by one (the fast path stores committed offsets without telling txn_offsets.py)."""
        if producer_id < 0 and not self._ctx.txn.by_producer:
            return offsets.replay_loaded_batch(self._ctx, records, self.replay_loaded)
        skipped = 0
        for key, value in records:
            try:
                self.replay_loaded(key, value, producer_id, producer_epoch)
            except (ValueError, IndexError, KeyError) as error:
                skipped += 1
                log.warning("skipping an unreadable __consumer_offsets record: %s", error)
        return skipped

    def replay_end_transaction_marker(self, producer_id: int, commit: bool, producer_epoch: int = -1) -> None:
        """A COMMIT or ABORT marker of `producer_id` (written at `producer_epoch`) is in the log: its pending
        offsets become committed or vanish (txn_offsets.py); older epochs of the producer are fenced from now on."""
        offsets.replay_end_transaction_marker(self._ctx, producer_id, commit, producer_epoch)

    def _replay_consumer_group(self, record: consumer_records.Decoded) -> None:
        """A consumer-group record (consumer/group.py's replay). An empty classic group of the same id (one that
        only held offsets) gives way, as Kafka's getOrMaybeCreatePersistedConsumerGroup lets a simple group."""
        ctx = self._ctx
        classic = ctx.groups.get(record.group_id)
        if record.value is not None and classic is not None and not classic.members and classic.protocol_type is None:
            del ctx.groups[record.group_id]  # a record that makes the consumer group: the simple group gives way
        removed = consumer_group.replay(
            ctx.consumer_groups, record, lambda group_id: group_id in ctx.groups or group_id in ctx.share_groups
        )
        if removed is not None:
            ctx.consumer_hash_checked.pop(removed, None)

    def _replay_share_group(self, record: consumer_records.Decoded) -> None:
        """A share-group record (share/group.py's replay). ValueError if a group of another type has the id (Kafka's
        IllegalStateException in getOrMaybeCreatePersistedShareGroup): the record is skipped."""
        ctx = self._ctx
        if record.group_id not in ctx.share_groups and share_groups.is_other_type(ctx, record.group_id):
            if record.value is None:
                return
            raise ValueError(f"group {record.group_id} is not a share group")
        share_group.replay(ctx.share_groups, record, ctx.now())
        if record.group_id not in ctx.share_groups:
            share_groups.forget(ctx, record.group_id)

    def _replay_group(self, record: Record) -> None:
        group_id = decode_group_metadata_key(record.key).group
        previous = self._ctx.groups.pop(group_id, None)
        if previous is not None:
            self._forget_timers(previous)
            previous.transition_to(GroupState.DEAD, self._ctx.now())
        if record.value is None:  # its history goes with herd's own tombstone, not this one: an upgrade keeps it
            return
        self._ctx.groups[group_id] = self._group_from_record(group_id, record.value)

    def _group_from_record(self, group_id: str, value_bytes: bytes) -> ClassicGroup:
        value = decode_group_metadata_value(value_bytes)
        group = ClassicGroup(
            group_id,
            GroupState.STABLE if value.members else GroupState.EMPTY,
            self._ctx.now(),
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
            current_state_timestamp_ms=None if value.current_state_timestamp == -1 else value.current_state_timestamp,
        )
        for m in value.members:
            group.add(
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=(MemberProtocol(value.protocol or "", m.subscription),),
                    assignment=m.assignment,
                )
            )
        group.subscribed_topics = compute_subscribed_topics(group)
        return group

    def _forget_timers(self, group: ClassicGroup) -> None:
        for member in group.members.values():
            rb.cancel_session(self._ctx, group.group_id, member)
        for pending in group.pending_members:
            self._ctx.timer.cancel(rb.heartbeat_key(group.group_id, pending))
        self._ctx.timer.cancel(rb.join_key(group.group_id))
        self._ctx.timer.cancel(rb.sync_key(group.group_id))
        preregistration.end_hold(self._ctx, group.group_id)

    def on_loaded(self) -> Result:
        """After replaying the partition: arm every member's session; rebalance over-capacity groups; start
        the periodic offset-retention cleanup; resume the hold of groups holding pre-registered members while
        others are missing (KIP-469)."""
        ctx = self._ctx
        fx = Effects()
        retention.schedule(ctx)
        consumer_heartbeat.on_loaded(ctx)
        share_groups.on_loaded(ctx)
        for group in ctx.groups.values():
            ctx.history.loaded(group.group_id, ctx.now() + group.rebalance_timeout_ms())
            for member in group.members.values():
                rb.arm_session(ctx, group, member)
            if preregistration.arrived(ctx, group) and preregistration.missing(ctx, group):
                static.start_hold(ctx, group)
            if len(group.members) > ctx.config.group_max_size:
                reason = (
                    f"Freshly-loaded group {group.group_id} (size {len(group.members)}) is over capacity "
                    f"{ctx.config.group_max_size}. Rebalancing in order to give a chance for consumers "
                    "to commit offsets"
                )
                rb.prepare_rebalance(ctx, group, "over-capacity", reason, fx)
        return fx.result()

    def on_unloaded(self) -> Result:
        """The partition moved away: groups go Dead, parked requests get NOT_COORDINATOR."""
        fx = Effects()
        error = ErrorCode.not_coordinator
        for group in self._ctx.groups.values():
            for member in group.members.values():
                group.complete_join(member, JoinGroupResponse(error_code=error, member_id=member.member_id), fx)
                group.complete_sync(member, SyncGroupResponse(error_code=error), fx)
            self._forget_timers(group)
            group.transition_to(GroupState.DEAD, self._ctx.now())
        self._ctx.timer.cancel(retention.RETENTION_KEY)
        consumer_heartbeat.on_unloaded(self._ctx)
        share_groups.on_unloaded(self._ctx)
        self._ctx.groups.clear()
        self._ctx.offsets.clear()
        self._ctx.txn.clear()
        self._ctx.expected.clear()
        self._ctx.expected_holds.clear()
        self._ctx.history.clear()
        return fx.result()

    # --- inspection ----------------------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        return self._ctx.groups.get(group_id)

    def consumer_groups(self) -> tuple[ConsumerGroup, ...]:
        return tuple(self._ctx.consumer_groups.values())

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """A KIP-848 consumer group; read it, never change it."""
        return self._ctx.consumer_groups.get(group_id)

    def share_groups(self) -> tuple[ShareGroup, ...]:
        """The KIP-932 share groups; read them, never change them."""
        return tuple(self._ctx.share_groups.values())

    def share_group(self, group_id: str) -> ShareGroup | None:
        return self._ctx.share_groups.get(group_id)

    @property
    def topics(self) -> TopicsImage:
        """The topics the consumer groups see (topic ids to names for their assignments)."""
        return self._ctx.topics

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        """A consumer group's session timeout: its consumer.session.timeout.ms, else the broker's."""
        return consumer_heartbeat.session_timeout_ms(self._ctx, group_id)

    def groups(self) -> tuple[ClassicGroup, ...]:
        """Every group this shard holds (observability: the HTTP API, metrics); read them, never change them."""
        return tuple(self._ctx.groups.values())

    def offset_group_ids(self) -> tuple[str, ...]:
        """The ids of the groups holding committed offsets (a group may hold offsets and no members)."""
        return tuple(self._ctx.offsets)

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], object]:
        return dict(self._ctx.offsets.get(group_id, {}))

    def pending_offsets(self, producer_id: int, group_id: str) -> dict[tuple[str, int], object]:
        """The producer's pending transactional offsets in the group."""
        return dict(self._ctx.txn.pending(producer_id, group_id))

    def has_pending_offsets(self, group_id: str, topic: str, partition: int) -> bool:
        return self._ctx.txn.holds(group_id, topic, partition)

    def open_transactions(self) -> tuple[int, ...]:
        """Producer ids holding pending offsets in this shard."""
        return self._ctx.txn.producers()

    def size(self) -> tuple[int, int]:
        """(groups, committed offsets) the shard holds; a group known only by its committed offsets counts."""
        ctx = self._ctx
        return len(ctx.groups.keys() | ctx.offsets.keys()), sum(len(o) for o in ctx.offsets.values())

    def rebalance_history(self, group_id: str) -> tuple[Rebalance, ...]:
        """The group's last rebalances, oldest first (history.py); read them, never change them."""
        return self._ctx.history.of(group_id)

    def rebalance_history_json(self, group_id: str) -> str:
        """The group's history as the read-only group config herd.rebalance.history answers it (JSON text:
        group, state, rebalances oldest first, omitted; group_configs.history_json)."""
        return group_configs.history_json(self._ctx, group_id)

    @property
    def history(self) -> RebalanceHistory:
        """The shard's rebalance history, for setting its `observer` (metrics)."""
        return self._ctx.history

    def group_config(self, group_id: str, name: str) -> str | None:
        """The group's value of one of Kafka's group configs (kafka_group_configs.py), None when it sets none."""
        return self._ctx.group_configs.get(group_id, {}).get(name)

    def expected_members(self, group_id: str) -> tuple[str, ...]:
        """The group's pre-registered instance ids (KIP-469), fulfilled or not."""
        return preregistration.expected(self._ctx, group_id)
