"""The share partitions this node leads (KIP-932, the leader's side of Kafka's SharePartitionManager): for each share
group and partition a ShareFetch reached, the records handed to the group's members, their locks and delivery
counts (herd.coordinator.share.partition.SharePartition), read from the partition's log.

- A share partition is made on the first fetch of the group that reaches it. Its start offset (SPSO) comes from the
  group's `share.auto.offset.reset` (latest, the default: the log end offset; earliest: the log start offset;
  by_duration:<d>: the first offset whose timestamp is at least now - d, else the log end offset), as Kafka's
  SharePartition resolves a persisted start offset of -1 (ShareFetchUtils.offsetForEarliestTimestamp and friends).
- `acquire` reads the log from the partition's next fetch offset, hands the records it may to the member (at most
  `max_records`, whole batches, within group.share.partition.max.record.locks in flight) under a lock of the group's
  `share.record.lock.duration.ms`, and returns the batches holding them with their acquired ranges.
- `acknowledge` and `release` change a member's acquired records; locks that ran out are given back before any of
  them (`expire_locks`: lazily, where Kafka runs a timer per acquisition; no one can tell the difference, as records
  are only seen through a fetch or an acknowledgement, except that a fetch waiting for data is not woken by an
  expiry: it sees the records at its next pass, within its max wait).
- With a persister (the share coordinator, runtime/share_state.py) the state is durable, as Kafka's leader keeps it
  through its Persister: a share partition's state is read when it is first used (a new one is initialized at the
  start offset share.auto.offset.reset gives), and every change an acknowledgement, a release or a lock running out
  makes is written before it counts (`SharePartition.complete` with whether the write succeeded; a failed write
  undoes an acknowledgement, which is answered with the write's error). Acquisitions are not written, as in Kafka:
  after a restart the records that were acquired and not acknowledged are delivered again. In cluster mode the
  persister may be another node's share coordinator: a share partition is read with the leader epoch this node
  leads the data partition at, and its writes carry that epoch, so that once a new leader has read the state a
  former one can no longer write it (FENCED_LEADER_EPOCH, as Kafka's share coordinator fences it); a node that
  loses or gains a partition's leadership forgets its share partitions (`forget_partition`), read again on their
  next use. Without a persister the state is kept in memory only.
- The group's `share.isolation.level`: read_uncommitted (the default) reads up to the log end; read_committed up to
  the last stable offset, and the records of aborted transactions it acquired are archived at once and left out
  of the ranges returned (control batches stay, as in Kafka: the client skips them), found as a consumer finds
  them (aborted producers by first offset, each until its ABORT marker).
- A log start offset that moved past the records a fetch would read (DeleteRecords, retention) moves the SPSO to
  it, the AVAILABLE records before it archived (`SharePartition.move_start`, Kafka's updateCacheAndOffsets on an
  OFFSET_OUT_OF_RANGE fetch, which herd does not need to answer: it reads on from the log start in the same fetch).
- Records near their delivery limit are handed out in ever smaller pieces, and one on its last attempt alone, as
  Kafka throttles them (`SharePartition.acquire`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from herd.config import BrokerConfig
from herd.coordinator import kafka_group_configs as group_configs
from herd.coordinator.errors import CoordinatorError, ErrorCode
from herd.coordinator.share.partition import (
    ACKNOWLEDGED,
    ARCHIVED,
    AcquiredRecords,
    Pending,
    RecordState,
    SharePartition,
    StateBatch,
)
from herd.coordinator.share_state.records import StateBatch as PersistedBatch
from herd.coordinator.share_state.shard import ShareState
from herd.log.api import NotInMemoryError, PartitionLog, as_remote
from herd.log.batch import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader, iter_headers
from herd.log.records import control_marker
from herd.runtime.share_state import ShareStateError

_logger = logging.getLogger(__name__)

GroupConfig = Callable[[str, str], str | None]
"""(group id, group config name) -> the group's value, None when it does not set it."""

Key = tuple[str, str, int]  # (group id, topic, partition)
# acknowledgements applied, not yet written and completed, with the batches acknowledged
Staged = tuple[Key, SharePartition, Pending, Sequence[tuple[int, int, Sequence[int]]]]


@dataclass(frozen=True, slots=True)
class Acquired:
    """What one partition's fetch got: the log batches holding the acquired records, and the ranges acquired."""

    records: bytes = b""
    ranges: tuple[AcquiredRecords, ...] = ()


NOTHING = Acquired()


class Persister(Protocol):
    """Where share partitions' state is kept (runtime/share_state.py's ShareStateRuntime): each call returns once
    the change is durable, or raises ShareStateError."""

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> ShareState | None: ...

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, int, int] | None: ...

    async def initialize(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start_offset: int
    ) -> None: ...

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[PersistedBatch],
    ) -> None: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None: ...


_DONE = frozenset({ACKNOWLEDGED, ARCHIVED})


class SharePartitions:
    def __init__(
        self,
        config: BrokerConfig,
        group_config: GroupConfig,
        persister: Persister | None = None,
        topic_id: Callable[[str], uuid.UUID | None] = lambda topic: None,
    ) -> None:
        self._config = config
        self._group_config = group_config
        self.persister = persister
        self._topic_id = topic_id
        self._partitions: dict[Key, SharePartition] = {}
        self._creating: dict[Key, asyncio.Future[SharePartition]] = {}
        # records acknowledged (by type: accept, release, reject, gap), acquired, whose lock ran out, and given back
        # by a member that left: what /metrics counts (herd.server.metrics)
        self.counts: dict[str, int] = dict.fromkeys(("accept", "release", "reject", "gap", "renew", "acquired",
                                                     "expired", "released"), 0)  # fmt: skip

    def partitions(self) -> list[tuple[Key, SharePartition]]:
        """Every share partition this node holds (for inspection: read them, never change them)."""
        return list(self._partitions.items())

    def __len__(self) -> int:
        return len(self._partitions)

    def get(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        """The share partition, if a fetch made it (for inspection: read it, never change it)."""
        return self._partitions.get((group_id, topic, partition))

    def lock_duration_ms(self, group_id: str) -> int:
        """The group's share.record.lock.duration.ms, else the broker's group.share.record.lock.duration.ms."""
        value = self._group_config(group_id, group_configs.SHARE_RECORD_LOCK_DURATION_MS)
        return int(value) if value is not None else self._config.get("group.share.record.lock.duration.ms")

    async def _partition(self, group_id: str, log: PartitionLog, now_ms: int) -> SharePartition:
        """The share partition, read from the persister (or made) on first use; one read at a time per partition.
        ShareStateError if the persister cannot say what it holds."""
        key = (group_id, log.topic, log.partition)
        found = self._partitions.get(key)
        if found is not None:
            return found
        creating = self._creating.get(key)
        if creating is not None:
            return await asyncio.shield(creating)
        future: asyncio.Future[SharePartition] = asyncio.get_running_loop().create_future()
        self._creating[key] = future
        try:
            share = await self._load(group_id, log, now_ms)
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: the callers waiting get it, no one else needs to
            raise
        finally:
            del self._creating[key]
        self._partitions[key] = share
        future.set_result(share)
        return share

    async def _load(self, group_id: str, log: PartitionLog, now_ms: int) -> SharePartition:
        limit = self._config.get("group.share.delivery.count.limit")
        in_flight = self._config.get("group.share.partition.max.record.locks")
        topic_id = self._topic_id(log.topic)
        if self.persister is None or topic_id is None:
            return SharePartition(self._start_offset(group_id, log, now_ms), limit, in_flight)
        state = await self.persister.read(group_id, topic_id, log.partition, log.leader_epoch)
        if state is None or state.start_offset < 0:
            start = self._start_offset(group_id, log, now_ms)
            state_epoch = state.state_epoch if state is not None else 0
            await self.persister.initialize(group_id, topic_id, log.partition, state_epoch, start)
            share = SharePartition(start, limit, in_flight)
            share.state_epoch, share.leader_epoch = state_epoch, log.leader_epoch
            return share
        batches = [StateBatch(b.first, b.last, RecordState(b.state), b.delivery_count) for b in state.batches]
        start = max(state.start_offset, log.log_start_offset)
        share = SharePartition.load(start, [b for b in batches if b.last >= start], state.state_epoch, limit, in_flight)
        share.leader_epoch = log.leader_epoch
        return share

    async def _write(self, key: Key, share: SharePartition, batches: Sequence[StateBatch]) -> ErrorCode:
        """Write a change of the share partition (nothing to do without a persister): NONE once durable, else the
        error."""
        group_id, topic, partition = key
        topic_id = self._topic_id(topic)
        if self.persister is None or topic_id is None:
            return ErrorCode.none
        persisted = [PersistedBatch(b.first, b.last, int(b.state), b.delivery_count) for b in batches]
        try:
            await self.persister.write(
                group_id, topic_id, partition, share.state_epoch, share.leader_epoch, share.start_offset, persisted
            )
        except ShareStateError as error:
            _logger.warning("cannot write the share state of %s %s-%d: %s", group_id, topic, partition, error)
            return ErrorCode(error.code)
        return ErrorCode.none

    async def _expire(self, key: Key, share: SharePartition, now_ms: int) -> None:
        """Locks that ran out are given back at once; the change is written (a failed write changes nothing: the
        records are available again either way, and a reload finds them so too)."""
        expired = share.expire_locks(now_ms)
        if expired:
            self.counts["expired"] += sum(b.last - b.first + 1 for b in expired)
            await self._write(key, share, expired)

    def _start_offset(self, group_id: str, log: PartitionLog, now_ms: int) -> int:
        reset = self._group_config(group_id, group_configs.SHARE_AUTO_OFFSET_RESET) or "latest"
        if reset == "earliest":
            return log.log_start_offset
        duration = group_configs.by_duration_ms(reset)
        if duration is not None:
            found = log.offset_for_timestamp(now_ms - duration)
            if found is not None:
                return max(found.offset, log.log_start_offset)
        return log.log_end_offset

    async def acquire(
        self,
        group_id: str,
        member_id: str,
        log: PartitionLog,
        max_records: int,
        max_bytes: int,
        now_ms: int,
        record_limit: bool = False,
    ) -> Acquired:
        """Hand `member_id` the records it may have of this partition (see the module docstring). ShareStateError if
        the partition's state cannot be read."""
        share = await self._partition(group_id, log, now_ms)
        await self._expire((group_id, log.topic, log.partition), share, now_ms)
        if max_records <= 0 or not share.can_acquire():
            return NOTHING
        committed = self._read_committed(group_id)
        end = log.last_stable_offset if committed else log.log_end_offset
        if share.next_fetch_offset() < log.log_start_offset:  # the records there are gone (DeleteRecords, retention)
            share.move_start(log.log_start_offset)
        offset = max(share.next_fetch_offset(), log.log_start_offset)
        if offset >= end:
            return NOTHING
        remote = as_remote(log) if log.commits_itself else None
        # the records in flight from `offset` on, and `max_records` new ones after them, are all this can acquire
        data, read = await _read_until(log, offset, max(offset - 1, share.end_offset) + max_records, end, max_bytes)
        headers = [h for h in read if h.base_offset < end]  # read_committed: below the LSO
        if not headers:
            return NOTHING
        fetched = [(h.base_offset, h.last_offset) for h in headers]
        lock_ms = self.lock_duration_ms(group_id)
        ranges = share.acquire(
            member_id, fetched, max_records, now_ms, lock_ms, fetch_offset=offset, record_limit=record_limit
        )
        if ranges and committed:
            stop = headers[-1].last_offset + 1
            if remote is not None:
                aborted = await remote.aborted_transactions_async(offset, stop)
            else:
                aborted = log.aborted_transactions(offset, stop)
            for first, last in _aborted_batches(data, headers, aborted):
                share.archive_acquired(member_id, first, last)
                ranges = _without(ranges, first, last)
        if not ranges:
            return NOTHING
        self.counts["acquired"] += sum(r.last - r.first + 1 for r in ranges)
        first, last = ranges[0].first, max(r.last for r in ranges)
        kept = [h for h in headers if h.last_offset >= first and h.base_offset <= last]
        return Acquired(bytes(data[kept[0].position : kept[-1].end]), tuple(ranges))

    def _read_committed(self, group_id: str) -> bool:
        return self._group_config(group_id, group_configs.SHARE_ISOLATION_LEVEL) == "read_committed"

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        partition: int,
        batches: Sequence[tuple[int, int, Sequence[int]]],
        now_ms: int,
        staged: list[Staged] | None = None,
    ) -> tuple[ErrorCode, str | None]:
        """Apply `member_id`'s acknowledgements of one partition, all or nothing: NONE, or the error (and message)
        of the first batch refused (INVALID_RECORD_STATE for records that are not its acquired ones,
        INVALID_REQUEST for a malformed batch), or of the write of the change; UNKNOWN_TOPIC_OR_PARTITION when no
        fetch made the share partition here (SharePartitionManager.acknowledge). With `staged`, the changes stay in
        transition (as while Kafka writes them) until `complete(staged)`: a ShareFetch applies its
        acknowledgements before it acquires and writes them while it fetches; records it released are not handed
        out again until that write is done."""
        key = (group_id, topic, partition)
        share = self._partitions.get(key)
        if share is None:
            return ErrorCode.unknown_topic_or_partition, None
        await self._expire(key, share, now_ms)
        try:
            pending = share.acknowledge(member_id, batches, renew_until=now_ms + self.lock_duration_ms(group_id))
        except CoordinatorError as error:
            return ErrorCode(error.code), error.message or None
        if staged is not None:
            staged.append((key, share, pending, batches))
            return ErrorCode.none, None
        written = await self._write(key, share, pending.batches)
        share.complete(pending, written == ErrorCode.none, now_ms)
        if written == ErrorCode.none:
            self._count(batches)
        return written, None

    def _count(self, batches: Sequence[tuple[int, int, Sequence[int]]]) -> None:
        names = ("gap", "accept", "release", "reject", "renew")
        for first, last, types in batches:
            if len(types) == 1:
                self.counts[names[types[0]]] += last - first + 1
            else:
                for t in types:
                    self.counts[names[t]] += 1

    async def complete(self, staged: list[Staged], now_ms: int) -> dict[tuple[str, int], ErrorCode]:
        """Write the staged acknowledgements and complete them: the (topic, partition)s whose write failed, with
        the error (their acknowledgements are undone)."""
        failed: dict[tuple[str, int], ErrorCode] = {}
        for key, share, pending, acknowledged in staged:
            written = await self._write(key, share, pending.batches)
            share.complete(pending, written == ErrorCode.none, now_ms)
            if written != ErrorCode.none:
                failed[(key[1], key[2])] = written
            else:
                self._count(acknowledged)
        staged.clear()
        return failed

    async def release(self, group_id: str, member_id: str, keys: Iterable[tuple[str, int]], now_ms: int) -> None:
        """Give back what `member_id` holds of these (topic, partition)s: its share session ended, or it left. If the
        write fails they stay acquired until their locks run out."""
        for topic, partition in keys:
            key = (group_id, topic, partition)
            share = self._partitions.get(key)
            if share is not None:
                await self._expire(key, share, now_ms)
                pending = share.release_member(member_id)
                if pending.changed:
                    written = await self._write(key, share, pending.batches)
                    share.complete(pending, written == ErrorCode.none, now_ms)
                    if written == ErrorCode.none:
                        self.counts["released"] += sum(b.last - b.first + 1 for b in pending.batches)

    async def summary(self, group_id: str, topic: str, partition: int) -> tuple[int, int, int]:
        """(start offset, delivery-complete count, leader epoch) of the share partition, as
        ReadShareGroupStateSummary answers it: the live partition when this node has it, else its durable state;
        (-1, -1, 0) when it has none (or it cannot be read: Kafka's describe swallows that too). The
        delivery-complete count is the number of offsets from the start offset on that are ACKNOWLEDGED or
        ARCHIVED (KIP-1226)."""
        share = self._partitions.get((group_id, topic, partition))
        if share is not None:
            start = share.start_offset
            done = sum(
                last - max(first, start) + 1
                for first, last, state in share.records()
                if state.state in _DONE and last >= start and not state.in_transition
            )
            return start, done, max(share.leader_epoch, 0)
        topic_id = self._topic_id(topic)
        if self.persister is None or topic_id is None:
            return -1, -1, 0
        try:
            summary = await self.persister.summary(group_id, topic_id, partition)
        except ShareStateError:
            return -1, -1, 0
        if summary is None or summary[0] < 0:
            return -1, -1, 0
        start, done, leader_epoch = summary
        return start, done, max(leader_epoch, 0)

    async def reset(self, group_id: str, topic: str, partition: int, start_offset: int, state_epoch: int) -> None:
        """AlterShareGroupOffsets: the share partition starts afresh at `start_offset` (its records in flight,
        acknowledged and archived forgotten), durable first when there is a persister. ShareStateError if not."""
        topic_id = self._topic_id(topic)
        if self.persister is not None and topic_id is not None:
            await self.persister.initialize(group_id, topic_id, partition, state_epoch, start_offset)
        share = SharePartition(
            start_offset,
            self._config.get("group.share.delivery.count.limit"),
            self._config.get("group.share.partition.max.record.locks"),
        )
        share.state_epoch = state_epoch
        self._partitions[(group_id, topic, partition)] = share

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, topic: str | None, partition: int) -> None:
        """DeleteShareGroupOffsets: the share partition's state goes (durably first). ShareStateError if not."""
        if self.persister is not None:
            await self.persister.delete(group_id, topic_id, partition)
        if topic is not None:
            self._partitions.pop((group_id, topic, partition), None)

    def forget_group(self, group_id: str) -> None:
        """The share group was deleted: its share partitions go from memory (their state was deleted first)."""
        for key in [k for k in self._partitions if k[0] == group_id]:
            del self._partitions[key]

    def forget_partition(self, topic: str, partition: int) -> None:
        """This node lost or gained the partition's leadership (or it was deleted): its share partitions go from
        memory; with a persister they are read again on their next use (after a move, the state the former leader
        wrote)."""
        for key in [k for k in self._partitions if k[1] == topic and k[2] == partition]:
            del self._partitions[key]


def records_by_state(share: SharePartition) -> dict[str, int]:
    """The records of a share partition from its start offset on, by state (available, acquired, acknowledged,
    archived): what /metrics and the HTTP API show."""
    counts = dict.fromkeys(("available", "acquired", "acknowledged", "archived"), 0)
    for first, last, state in share.records():
        if last >= share.start_offset:
            counts[state.state.name.lower()] += last - max(first, share.start_offset) + 1
    return counts


FIRST_READ_BYTES = 64 * 1024  # what an acquisition reads first, doubled for each further read it needs


async def _read_until(
    log: PartitionLog, offset: int, last: int, end: int, max_bytes: int
) -> tuple[bytes, list[BatchHeader]]:
    """Whole batches from the one holding `offset`, up to the one holding `last` (or `end`, or `max_bytes`; at least
    one batch), and their headers (positions in the bytes returned). A share consumer asks for a few hundred
    records and as many bytes as its fetch.max.bytes (50 MiB): reading `max_bytes` at once would read and copy the
    rest of the partition for every fetch to hand out a batch or two of it. Reading in chunks, the first
    FIRST_READ_BYTES and each next one twice the last, reads at most about twice what the acquisition can use and
    no more round trips than a doubling takes."""
    parts: list[bytes] = []
    headers: list[BatchHeader] = []
    chunk, read = FIRST_READ_BYTES, 0
    while read < max_bytes:
        size = min(chunk, max_bytes - read)
        try:
            data = log.read(offset, size, min_one=not parts)
        except NotInMemoryError:  # cluster mode: older data is in PostgreSQL
            data = await as_remote(log).read_async(offset, size, min_one=not parts)
        if not data:
            break
        found = list(iter_headers(data))
        if parts:  # their positions in the bytes joined
            found = [replace(h, position=h.position + read) for h in found]
        headers += found
        parts.append(data)
        read += len(data)
        reached = headers[-1].last_offset if headers else None
        if reached is None or reached >= last or reached + 1 >= end:
            break
        offset, chunk = reached + 1, chunk * 2
    return (parts[0] if len(parts) == 1 else b"".join(parts)), headers


def _aborted_batches(data: bytes, headers: list[BatchHeader], aborted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (first, last) offsets of the batches of aborted transactions in `data`, as a read_committed consumer
    finds them (Kafka's CompletedFetch and SharePartition.fetchAbortedTransactionRecordBatches): a producer's
    transactional batches are aborted from the aborted transaction's first offset until its ABORT marker."""
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    out = []
    i = 0
    for header in headers:
        while i < len(pending) and pending[i][1] <= header.last_offset:
            active.add(pending[i][0])
            i += 1
        if header.attributes & CONTROL_BIT:
            marker = control_marker(data, header)
            if marker is not None and not marker[0]:
                active.discard(header.producer_id)
        elif header.attributes & TRANSACTIONAL_BIT and header.producer_id in active:
            out.append((header.base_offset, header.last_offset))
    return out


def _without(ranges: list[AcquiredRecords], first: int, last: int) -> list[AcquiredRecords]:
    """`ranges` with the offsets first..last cut out."""
    out = []
    for r in ranges:
        if r.last < first or r.first > last:
            out.append(r)
            continue
        if r.first < first:
            out.append(AcquiredRecords(r.first, first - 1, r.delivery_count))
        if r.last > last:
            out.append(AcquiredRecords(last + 1, r.last, r.delivery_count))
    return out
