"""The contract between the log layer and everything above it.

A partition is a log of Kafka record batches (magic v2). The broker hands `append` the `records` bytes of a
Produce request exactly as the client sent them (possibly compressed, possibly several batches); the log checks
each batch, gives it broker-assigned offsets by rewriting the batch's base offset (the CRC does not cover the
base offset, so the client's CRC stays valid), and stores the bytes. `read` returns whole batches as stored, so a
fetching client receives the producer's bytes unchanged.

Backends implement `PartitionLog` and `LogStore`: `herd.log.segments` and `herd.log.store` (local segment files
in partition directories, the embedded default; files are reached only through `herd.log.fs.FileSystem`, so the
crash tests can run the real code on an in-memory, fault-injecting filesystem), and `herd.log.postgres` (cluster
mode: the leader of a partition keeps its tail in memory and commits batches to PostgreSQL, fenced by its leader
epoch). A log that `commits_itself` is a `RemotePartitionLog`: its appends are acknowledged only once
`wait_durable` returns, and reads that may need the database have `*_async` forms, which the server awaits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

# Kafka's defaults for the topic-level settings (broker property in brackets).
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024  # segment.bytes [log.segment.bytes]
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000  # retention.ms [log.retention.ms]
DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes [log.index.interval.bytes]
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024  # segment.index.bytes [log.index.size.max.bytes]
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # max.message.bytes [message.max.bytes]
LONG_MAX = 2**63 - 1
HIGH_WATERMARK = -1  # DeleteRecords' offset for "up to the high watermark" (DeleteRecordsRequest.HIGH_WATERMARK)
DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024  # herd.message.max.decompressed.bytes
RETAINED_PRODUCER_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-partition settings, named after Kafka's topic configs."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    retention_ms: int = DEFAULT_RETENTION_MS  # -1: keep forever
    retention_bytes: int = -1  # -1: no size limit
    flush_interval_messages: int = LONG_MAX  # fsync after this many appended records
    flush_interval_ms: int = LONG_MAX  # fsync when the oldest unflushed append is this old
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    cleanup_policy: str = "delete"  # "delete" or "compact" (only __consumer_offsets is compacted)
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    # how far a produced record's CreateTime may be before / after the broker's clock (INVALID_TIMESTAMP beyond;
    # Kafka 4.x's defaults)
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # largest batch accepted (RecordTooLargeError)
    # herd's broker setting herd.message.max.decompressed.bytes: the largest records section of a client's
    # compressed batch once decompressed (RecordTooLargeError beyond it; herd.log.records.check_records)
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int  # offset given to the first record appended
    last_offset: int  # offset of the last record appended
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    # When the append is durable, as the log says, so that its caller never asks which log it has: None once
    # `append` returns (a segment log: in the page cache, flushed as log.flush.* say); else the end offset to await
    # with `RemotePartitionLog.wait_durable` (PostgreSQL: once the batches' transaction has committed).
    durable_end: int | None = None


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """One stored batch of an idempotent producer, as the producer state remembers a batch it appended: what a
    new leader of a remote partition rebuilds that state from (`RemotePartitionLog.producer_state`)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int  # the batch's max timestamp (Kafka expires producers by it)
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int  # the partition's log start offset when the state was read


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """What DescribeProducers tells of one producer of a partition (Kafka's ProducerStateEntry)."""

    producer_id: int
    epoch: int
    last_sequence: int  # -1 if it has no batch remembered (only markers, or transactional state)
    last_timestamp: int  # the max timestamp of its last batch (-1 likewise)
    coordinator_epoch: int = -1  # of its last transaction marker in the partition
    current_txn_start_offset: int = -1  # the first offset of its ongoing transaction in the partition


@dataclass(frozen=True, slots=True)
class CompactionStats:
    """What one compaction pass of a remote partition did."""

    records_read: int
    records_kept: int
    batches_deleted: int
    batches_rewritten: int
    bytes_before: int
    bytes_after: int


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    offset: int
    timestamp: int


class LogError(Exception):
    """Base of the errors the log raises; each maps to one Kafka error code (see `error_code`)."""

    error_code: int = -1  # UNKNOWN_SERVER_ERROR


class CorruptRecordError(LogError):
    """A batch failed its CRC32C check or its framing is broken (CORRUPT_MESSAGE)."""

    error_code = 2


class InvalidRecordError(LogError):
    """A batch is well framed but not acceptable, e.g. magic < 2 or an empty batch (INVALID_RECORD)."""

    error_code = 87


class UnsupportedMagicError(LogError):
    """Record batches before magic 2 (UNSUPPORTED_FOR_MESSAGE_FORMAT)."""

    error_code = 43


class RecordTooLargeError(LogError):
    """A batch larger than max.message.bytes (MESSAGE_TOO_LARGE)."""

    error_code = 10


class InvalidTimestampError(LogError):
    """Records whose CreateTime is outside message.timestamp.before.max.ms / after.max.ms of the broker's clock
    (INVALID_TIMESTAMP); `record_errors` are Kafka's (index of the record in its batch, message) for each."""

    error_code = 32

    def __init__(self, record_errors: list[tuple[int, str]]) -> None:
        super().__init__("One or more records have been rejected due to invalid timestamp")
        self.record_errors = record_errors


class OffsetOutOfRangeError(LogError):
    """A read below the log start offset or above the log end offset (OFFSET_OUT_OF_RANGE)."""

    error_code = 1


class KafkaStorageError(LogError):
    """The disk failed under the log (a write or fsync raised); the partition refuses further work until it is
    reopened (KAFKA_STORAGE_ERROR)."""

    error_code = 56


class PolicyViolationError(LogError):
    """What the topic's configuration forbids: DeleteRecords on a topic whose cleanup.policy lacks "delete"
    (POLICY_VIOLATION)."""

    error_code = 44


class NotLeaderError(LogError):
    """This node no longer leads the partition: a newer leader epoch was found where the write was to be stored
    (NOT_LEADER_OR_FOLLOWER; the client refreshes its metadata and goes to the new leader)."""

    error_code = 6


class NotInMemoryError(LogError):
    """A synchronous read (`read`, `aborted_transactions`, `offset_for_timestamp`, `max_timestamp`) of what a
    remote log does not hold in memory, or a change it makes in its database (`delete_records`,
    `apply_retention`): the caller awaits the `_async` form instead (RemotePartitionLog). The server does so
    whenever a log raises it, so no client ever sees this (UNKNOWN_SERVER_ERROR if one did)."""


class InvalidProducerEpochError(LogError):
    """A batch or marker from an older producer epoch than the partition last saw (INVALID_PRODUCER_EPOCH; Kafka's
    ProducerAppendInfo.checkProducerEpoch answers a client so since 2.7, so that it can abort and retry)."""

    error_code = 47


class OutOfOrderSequenceError(LogError):
    """A batch of an idempotent producer whose sequence does not follow the last one the partition appended from
    it, or a new epoch not starting at 0 (OUT_OF_ORDER_SEQUENCE_NUMBER; herd.log.producer_state)."""

    error_code = 45


class InvalidTxnStateError(LogError):
    """A non-transactional batch from a producer whose transaction is ongoing in the partition (INVALID_TXN_STATE,
    ProducerAppendInfo.appendDataBatch)."""

    error_code = 48


class TransactionCoordinatorFencedError(LogError):
    """A marker written by a coordinator with an older coordinator epoch than the partition last saw for that
    producer (TRANSACTION_COORDINATOR_FENCED, ProducerAppendInfo.checkCoordinatorEpoch)."""

    error_code = 52


class PartitionLog(Protocol):
    topic: str
    partition: int
    report_errors: bool  # False when the owner logs the partition's disk errors itself
    # How an append becomes durable, which decides how a coordinator's writes are made durable (herd.runtime): False,
    # once the caller's `flush` (an fsync, which blocks: the runtime runs it in a thread) returns, and every method
    # answers from this process (segment files); True, the log commits its appends itself, in the background, and
    # `RemotePartitionLog.wait_durable` says when: it is a RemotePartitionLog (`as_remote`), kept in a database.
    commits_itself: bool
    leader_epoch: int  # the epoch this node leads the partition at (0 on a single node)

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (also the high watermark on a single node)."""
        ...

    @property
    def flushed_offset(self) -> int:
        """Every offset below this is durable (fsynced); acknowledge a write that must survive a crash only once
        this has passed its last offset."""
        ...

    def append(self, records: bytes, now_ms: int, *, client: bool = False) -> AppendResult:
        """Check and store one or more record batches; raises a LogError subclass and stores nothing if any
        batch is bad. Without `client` (a coordinator's writes) only the log's own checks apply. With `client` (a
        Produce request's batches, Kafka's AppendOrigin.CLIENT; herd.log.producer_state `client_append`): their
        records are first checked as Kafka's LogValidator checks them (herd.log.records.check_records, bounded by
        the config's `max_decompressed_bytes`); then the partition's producer state refuses a client's control
        batch (InvalidRecordError), checks an idempotent producer's sequence and epoch (OutOfOrderSequenceError,
        InvalidProducerEpochError; NotLeaderError while a new leader rebuilds the state) and answers a retried
        batch with the offsets it got the first time, without storing it again; after the append the log is
        flushed if `flush.messages` or `flush.ms` say so."""
        ...

    def append_control(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        now_ms: int,
        *,
        transaction_version: int = 0,
    ) -> AppendResult:
        """Append one control batch holding one EndTransactionMarker (COMMIT or ABORT, version 0) for the producer,
        which ends its ongoing transaction in this partition (an abort is recorded in the aborted-transaction index).
        A marker for a producer with no ongoing transaction here is appended all the same and changes only the
        producer's epochs, as Kafka's. Raises InvalidProducerEpochError (an older producer epoch; with
        `transaction_version` 2, KIP-890's rule: not newer, unless it repeats a marker already written),
        TransactionCoordinatorFencedError (an older coordinator epoch) or the errors of `append`. A remote log
        needs `wait_durable(result.last_offset + 1)` as for any append (herd.log.transactions)."""
        ...

    def active_producers(self, now_ms: int) -> list[ActiveProducer]:
        """The producers whose state the partition keeps (DescribeProducers; herd.log.producer_state
        `ProducerStates.active` with the log's transaction state), by producer id; raises NotLeaderError while a
        new leader rebuilds the state."""
        ...

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided (Kafka's UnifiedLog.lastStableOffset): the first
        offset of the earliest ongoing transaction (or, remote, of one whose marker is not yet committed) when
        that is below the high watermark, else the high watermark."""
        ...

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of every aborted transaction that overlaps offsets [start, end): its marker
        is at or after `start` and its first offset below `end` (Kafka's TransactionIndex.collectAbortedTxns),
        in the order they were aborted. What a read_committed Fetch returns with the batches it read."""
        ...

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        """Whole batches starting with the one that holds `offset`, up to `max_bytes`; with `min_one` the first
        batch is returned even when it is larger (KIP-74). Raises OffsetOutOfRangeError outside
        [log_start_offset, log_end_offset]; returns b"" at log_end_offset."""
        ...

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The offset and timestamp of the first record, in offset order, whose timestamp is >= `timestamp`
        (ListOffsets by time; Kafka's `searchForTimestamp` over the batches whose max timestamp is >= it)."""
        ...

    def max_timestamp(self) -> TimestampOffset | None:
        """The offset of the first record holding the largest timestamp in the log, and that timestamp
        (ListOffsets MAX_TIMESTAMP, -3). In a LogAppendTime batch every record has the batch's max timestamp."""
        ...

    def flush(self) -> None:
        """Make everything appended so far durable (fsync)."""
        ...

    def maybe_flush(self, now_ms: int) -> None:
        """Flush if flush_interval_messages or flush_interval_ms say so."""
        ...

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments beyond retention.ms / retention.bytes (never the active one) when the
        cleanup.policy includes "delete" (`deletes`; a compact-only topic keeps them); returns how many were
        deleted."""
        ...

    def delete_records(self, offset: int) -> int:
        """DeleteRecords (KIP-107): move the log start offset up to `offset` (HIGH_WATERMARK: the high watermark)
        and return the new log start offset, the partition's low watermark. The new start is durable before this
        returns; segments wholly below it are deleted at once (Kafka deletes them at its next retention check).
        An offset at or below the log start changes nothing. Raises PolicyViolationError, OffsetOutOfRangeError
        or KafkaStorageError (see `deletion_start`)."""
        ...

    @property
    def failure(self) -> str | None:
        """Why the partition is offline after a disk error (None while it works; "closed" once closed)."""
        ...

    def recover(self) -> None:
        """Reopen an offline partition from disk, with the recovery of a start; raises KafkaStorageError if the
        disk still fails. A no-op unless the partition is offline."""
        ...

    async def resume(self) -> None:
        """After a failure (`failure`, but "closed"): go on from what the log's store holds, with the partition's
        producer state, which only the store knows after a failed write (the server's and the coordinator runtime's
        recovery call this, whichever the backend). A segment log reopens its files (`recover`, which restores
        the state from its snapshot and the batches after it); a remote log reads its partition's row again
        (`RemotePartitionLog.reload`) and rebuilds the state from the stored batches (herd.log.producer_state
        `ProducerStates.rebuild`, during which the partition takes no client append). Raises KafkaStorageError
        while the store still fails (the log stays failed), NotLeaderError if the partition is not led here any
        more (taken over, or let go while this waited: nothing is restored from it). A no-op unless the log
        failed."""
        ...

    async def load_transactions(self) -> None:
        """Bring the log's transaction state (ongoing transactions, producers' epochs) up to what its store holds,
        as a coordinator loading the partition must before it appends (herd.runtime.shard). A segment log's is
        read with its files: nothing to do. A remote log rebuilds it from the stored batches (a new leader, or one
        that reloaded); raises KafkaStorageError, or NotLeaderError (also when the log was let go while it read:
        its state is then left as it was)."""
        ...

    async def epoch_history(self) -> EpochHistory:
        """Every leader epoch of the partition up to this leader's, with the offset it began at, ascending (for
        `end_offset_for_epoch`, OffsetForLeaderEpoch). A segment log: SINGLE_NODE_EPOCHS, a single node leading
        every partition at epoch 0 from its start. A remote log reads it from its database once; raises
        KafkaStorageError or NotLeaderError."""
        ...

    def set_config(self, config: LogConfig) -> None:
        """Apply a changed topic config (AlterConfigs, or a dynamic broker default) to the running partition:
        max.message.bytes and message.timestamp.type from the next append, segment.bytes at the next roll,
        retention.* at the next retention check, flush.* at the next flush check, index.interval.bytes for what
        is appended from now on. Nothing already stored is rewritten, as in Kafka."""
        ...

    def close(self) -> None: ...


class RemotePartitionLog(PartitionLog, Protocol):
    """A partition whose data lives in a shared database (cluster mode). `append` is synchronous and in memory
    (offsets are assigned by this node, which leads the partition at `leader_epoch`); the batches are stored by
    a commit that checks the epoch in the same transaction. `flushed_offset` is what has been committed."""

    async def wait_durable(self, end_offset: int) -> None:
        """Return once every offset below `end_offset` is committed; raises NotLeaderError if the partition was
        taken over (the write is not stored and never will be), KafkaStorageError if the database failed (the
        write may or may not be stored: the client retries, and an idempotent producer's retry is recognised)."""
        ...

    async def read_async(self, offset: int, max_bytes: int, *, min_one: bool = True) -> bytes:
        """`read`, from memory when the range is there, else from the database."""
        ...

    async def offset_for_timestamp_async(self, timestamp: int) -> TimestampOffset | None: ...

    async def max_timestamp_async(self) -> TimestampOffset | None: ...

    async def apply_retention_async(self, now_ms: int) -> int:
        """`apply_retention`, in the database (the sync form raises NotInMemoryError); returns how many batches were
        deleted. Raises NotLeaderError or KafkaStorageError."""
        ...

    async def delete_records_async(self, offset: int) -> int:
        """`delete_records`, in the database (the sync form raises): the new log start is stored, fenced, and the
        batches wholly below it deleted before this returns. Raises PolicyViolationError, OffsetOutOfRangeError,
        NotLeaderError or KafkaStorageError."""
        ...

    async def compact(self, delete_retention_ms: int, now_ms: int, *, force: bool = False) -> CompactionStats | None:
        """One compaction pass (cleanup.policy=compact) when enough was written since the last (or `force`);
        None when there was nothing to do. Raises NotLeaderError or KafkaStorageError; the log stays valid."""
        ...

    async def reload(self) -> None:
        """After a database error (`failure`): go on from what the database holds (`resume` does this, then
        rebuilds the producer state from `producer_state()`). Raises KafkaStorageError while the database still fails,
        NotLeaderError if the partition was taken over meanwhile."""
        ...

    async def producer_state(self) -> list[ProducerBatch]:
        """The last batches of every idempotent producer, in offset order, from which a new leader (or one that
        reloaded) rebuilds its duplicate detection before it appends. Raises KafkaStorageError or
        NotLeaderError."""
        ...

    async def aborted_transactions_async(self, start: int, end: int) -> list[tuple[int, int]]:
        """`aborted_transactions`, from the database when the range is older than what this leader keeps in
        memory. Raises KafkaStorageError or NotLeaderError."""
        ...


EpochHistory = tuple[tuple[int, int], ...]  # (leader epoch, the offset its first write got), ascending
SINGLE_NODE_EPOCHS: EpochHistory = ((0, 0),)  # a single node leads every partition at epoch 0, from its start
UNDEFINED_EPOCH_OFFSET = (-1, -1)  # (epoch, end offset) when the requested epoch cannot be placed


def end_offset_for_epoch(history: EpochHistory, requested: int, end_offset: int) -> tuple[int, int]:
    """OffsetForLeaderEpoch's answer: the largest epoch at most `requested` and the offset where the epoch after
    it began (the end of `requested`'s writes), as Kafka's LeaderEpochFileCache.endOffsetFor computes it
    (apache/kafka storage/src/main/java/org/apache/kafka/storage/internals/epoch/LeaderEpochFileCache.java):
    the current epoch ends at the log end offset `end_offset`; an epoch older than any known gets the start of
    the first known one; -1 or an epoch newer than the current one gets (-1, -1)."""
    if requested < 0 or not history:
        return UNDEFINED_EPOCH_OFFSET
    current = history[-1][0]
    if requested == current:
        return current, end_offset
    higher = next(((epoch, start) for epoch, start in history if epoch > requested), None)
    if higher is None:
        return UNDEFINED_EPOCH_OFFSET
    floor = max((epoch for epoch, _ in history if epoch <= requested), default=requested)
    return floor, higher[1]


def deletes(cleanup_policy: str) -> bool:
    """Whether a topic's cleanup.policy includes "delete": only then do retention.ms and retention.bytes delete
    its old data (apache/kafka storage/.../internals/log/UnifiedLog.java deleteOldSegments: a compact-only log
    loses only what lies below its log start) and may DeleteRecords move its start. An empty cleanup.policy
    (Kafka 4.2, KAFKA-19112) is neither: the log is kept for ever."""
    return any(policy.strip() == "delete" for policy in cleanup_policy.split(","))  # "compact, delete" too


def deletion_start(name: str, offset: int, log_start: int, high_watermark: int, cleanup_policy: str) -> int:
    """The log start offset DeleteRecords to `offset` leaves a partition with, as Kafka decides it
    (apache/kafka core/src/main/scala/kafka/cluster/Partition.scala deleteRecordsOnLeader and
    core/src/main/scala/kafka/log/UnifiedLog.scala maybeIncrementLogStartOffset): a topic whose cleanup.policy
    does not include "delete" refuses (PolicyViolationError, since KIP-107, so compacted topics keep their
    records); HIGH_WATERMARK stands for the high watermark; another negative offset, or one beyond the high
    watermark, is out of range (OffsetOutOfRangeError); an offset at or below the log start leaves it."""
    if not deletes(cleanup_policy):
        raise PolicyViolationError(f"Records of partition {name} can not be deleted due to the configured policy")
    target = high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        raise OffsetOutOfRangeError(f"The offset {target} for partition {name} is not valid")
    if target > high_watermark:
        raise OffsetOutOfRangeError(
            f"Cannot increment the log start offset to {target} of partition {name} since "
            f"it is larger than the high watermark {high_watermark}"
        )
    return max(target, log_start)


def as_remote(log: PartitionLog) -> RemotePartitionLog:
    """`log`, which `commits_itself`, as the RemotePartitionLog it is (for the type checker)."""
    assert log.commits_itself, f"{log.topic}-{log.partition} is not a remote log"
    return cast(RemotePartitionLog, log)


class LogStore(Protocol):
    """All partition logs of one broker."""

    def open_partition(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """Open a partition, recovering it if it exists (torn tail truncated), creating it otherwise."""
        ...

    def delete_partition(self, topic: str, partition: int) -> None: ...

    def existing_partitions(self) -> list[tuple[str, int]]: ...

    def close(self) -> None: ...
