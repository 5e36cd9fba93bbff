"""Transaction coordinator configuration, named after Kafka's broker properties, with Kafka's defaults
(apache/kafka transaction-coordinator/.../TransactionStateManagerConfig.java and TransactionLogConfig.java)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnConfig:
    transaction_max_timeout_ms: int = 900_000
    """transaction.max.timeout.ms: the largest transaction.timeout.ms a producer may ask for."""
    abort_timed_out_interval_ms: int = 10_000
    """transaction.abort.timed.out.transaction.cleanup.interval.ms: how often expired transactions are aborted."""
    transactional_id_expiration_ms: int = 604_800_000
    """transactional.id.expiration.ms: an id idle this long with no transaction open is forgotten."""
    remove_expired_interval_ms: int = 3_600_000
    """transaction.remove.expired.transaction.cleanup.interval.ms: how often idle ids are looked for."""
