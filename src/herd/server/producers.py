"""Idempotent producers: per-partition sequence checks and duplicate detection, as Kafka's ProducerStateManager.

A producer with an id (from InitProducerId) numbers its batches per partition. For each (partition, producer id)
herd remembers the epoch and the last five batches appended (first/last sequence and offsets): a retried batch
that matches one of them is not appended again, and the answer carries the offsets it got the first time
(Kafka answers a duplicate with NONE and the original base offset). A batch from an older epoch gets
INVALID_PRODUCER_EPOCH; a gap in the sequence gets OUT_OF_ORDER_SEQUENCE_NUMBER.

What Kafka does and herd does not yet: the state is not snapshotted to disk, so after a restart a producer's
first batch is accepted with whatever sequence it has (where Kafka would still detect a duplicate of a batch
written before the restart). docs/compatibility.md says so.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from herd.log.api import AppendResult, InvalidRecordError, LogError, PartitionLog
from herd.log.batch import CONTROL_BIT, BatchHeader, iter_headers

INT32_MAX = 2**31 - 1
CACHED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN


class OutOfOrderSequenceError(LogError):
    error_code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    error_code = 47  # INVALID_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class _BatchMeta:
    first_seq: int
    last_seq: int
    result: AppendResult


@dataclass(slots=True)
class _ProducerEntry:
    epoch: int
    batches: deque[_BatchMeta] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None


def _last_seq(header: BatchHeader) -> int:
    return (header.base_sequence + header.record_count - 1) % (INT32_MAX + 1)


class ProducerStates:
    """The producer state of every partition this broker leads."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, int, int], _ProducerEntry] = {}  # (topic, partition, producer id)

    def append(self, log: PartitionLog, records: bytes, now_ms: int) -> AppendResult:
        """Append `records` to `log` unless it is a retried duplicate; raises LogError subclasses (the log checks
        framing, CRC and max.message.bytes)."""
        headers = list(iter_headers(records))
        if any(h.attributes & CONTROL_BIT for h in headers):
            raise InvalidRecordError("control batches are written by the broker, not by producers")
        idempotent = [h for h in headers if h.producer_id >= 0]
        if not idempotent:
            return log.append(records, now_ms)
        if len(headers) == 1:
            duplicate = self._check(log, headers[0])
            if duplicate is not None:
                return duplicate
        else:
            for header in idempotent:
                self._check(log, header)
        result = log.append(records, now_ms)
        self._record(log, headers, result)
        return result

    def _check(self, log: PartitionLog, header: BatchHeader) -> AppendResult | None:
        entry = self._entries.get((log.topic, log.partition, header.producer_id))
        if entry is None:
            return None  # unknown producer (new, or state lost in a restart): accept any sequence
        if header.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than {entry.epoch}")
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"new epoch {header.producer_epoch} must start at sequence 0, not {header.base_sequence}")
            return None
        last = _last_seq(header)
        for meta in entry.batches:
            if meta.first_seq == header.base_sequence and meta.last_seq == last:
                return meta.result
        expected = 0 if entry.last_seq in (None, INT32_MAX) else entry.last_seq + 1  # type: ignore[operator]
        if header.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id}: sequence {header.base_sequence}, expected {expected}")
        return None

    def _record(self, log: PartitionLog, headers: list[BatchHeader], result: AppendResult) -> None:
        offset = result.base_offset
        for header in headers:
            count = header.last_offset_delta + 1
            if header.producer_id >= 0:
                key = (log.topic, log.partition, header.producer_id)
                entry = self._entries.get(key)
                if entry is None or entry.epoch != header.producer_epoch:
                    entry = self._entries[key] = _ProducerEntry(header.producer_epoch)
                meta_result = AppendResult(offset, offset + count - 1, result.log_append_time,
                                           result.log_start_offset, header.record_count)
                entry.batches.append(_BatchMeta(header.base_sequence, _last_seq(header), meta_result))
            offset += count

    def forget(self, topic: str) -> None:
        """Drop the state of a topic that is deleted."""
        for key in [k for k in self._entries if k[0] == topic]:
            del self._entries[key]
