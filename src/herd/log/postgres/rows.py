"""What the PostgreSQL log hands the layers above it, without their needing psycopg: the producer batches from
which a new leader rebuilds its idempotent-producer state (`PgPartitionLog.producer_state`,
`herd.server.producers.ProducerStates.restore`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProducerBatch:
    """One stored batch of an idempotent producer, as the producer state remembers a batch it appended."""

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
