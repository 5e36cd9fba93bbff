"""Coordinator configuration, named after Kafka's broker properties, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorConfig:
    group_initial_rebalance_delay_ms: int = 3000
    """group.initial.rebalance.delay.ms (KIP-134)."""
    group_min_session_timeout_ms: int = 6000
    """group.min.session.timeout.ms."""
    group_max_session_timeout_ms: int = 1_800_000
    """group.max.session.timeout.ms."""
    group_max_size: int = 2_147_483_647
    """group.max.size."""
    offset_metadata_max_bytes: int = 4096
    """offset.metadata.max.bytes."""
    offsets_retention_minutes: int = 10080
    """offsets.retention.minutes (KIP-211; retention.py)."""
    offsets_retention_check_interval_ms: int = 600_000
    """offsets.retention.check.interval.ms: how often expired offsets and empty groups are cleaned up."""
    new_member_join_timeout_ms: int = 300_000
    """Kafka's internal classicGroupNewMemberJoinTimeoutMs (KAFKA-7610), not a public property."""
    rebalance_history_size: int = 16
    """herd.group.rebalance.history.size: how many rebalances each group remembers (history.py; herd's own)."""
    history_batch_bytes: int = 786_432
    """The most bytes of records a batch that carries a group's history record may hold: the history rides in
    the batch of the group's GroupMetadata, which must stay under message.max.bytes (3/4 of it; history.py)."""
    group_consumer_session_timeout_ms: int = 45_000
    """group.consumer.session.timeout.ms (KIP-848): a consumer-protocol member's session."""
    group_consumer_heartbeat_interval_ms: int = 5_000
    """group.consumer.heartbeat.interval.ms (KIP-848): how often members are told to heartbeat."""
    group_consumer_min_session_timeout_ms: int = 45_000
    """group.consumer.min.session.timeout.ms: the least a group may set consumer.session.timeout.ms to."""
    group_consumer_max_session_timeout_ms: int = 60_000
    """group.consumer.max.session.timeout.ms."""
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    """group.consumer.min.heartbeat.interval.ms: the least a group may set consumer.heartbeat.interval.ms to."""
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    """group.consumer.max.heartbeat.interval.ms."""
    # Share groups' broker settings (KIP-932; herd.config), with Kafka's defaults; they also bound the share.* group
    # configs (kafka_group_configs.py).
    group_share_max_size: int = 200
    """group.share.max.size: GROUP_MAX_SIZE_REACHED for a new member beyond it."""
    group_share_initialize_retry_interval_ms: int = 30_000
    """group.share.initialize.retry.interval.ms: how long a share partition's initialization may be pending before
    a heartbeat asks for it again."""
    group_share_session_timeout_ms: int = 45_000
    group_share_min_session_timeout_ms: int = 45_000
    group_share_max_session_timeout_ms: int = 60_000
    group_share_heartbeat_interval_ms: int = 5_000
    group_share_min_heartbeat_interval_ms: int = 5_000
    group_share_max_heartbeat_interval_ms: int = 15_000
    group_share_record_lock_duration_ms: int = 30_000
    group_share_min_record_lock_duration_ms: int = 15_000
    group_share_max_record_lock_duration_ms: int = 60_000
    # Streams groups' broker settings, with Kafka's defaults: they bound the streams.* group configs; herd does not
    # serve streams groups, so they are not broker settings.
    group_streams_min_session_timeout_ms: int = 45_000
    group_streams_max_session_timeout_ms: int = 60_000
    group_streams_min_heartbeat_interval_ms: int = 5_000
    group_streams_max_heartbeat_interval_ms: int = 15_000
    group_streams_max_standby_replicas: int = 2
    group_consumer_max_size: int = 2_147_483_647
    """group.consumer.max.size (KIP-848)."""
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    """group.consumer.assignors (KIP-848): the server-side assignors; the first is the default."""
    group_consumer_migration_policy: str = "bidirectional"
    """group.consumer.migration.policy (KIP-848): which way a group with members may convert between the classic
    and the consumer protocol: bidirectional, upgrade, downgrade or disabled (migration.py)."""
    group_consumer_regex_refresh_interval_ms: int = 600_000
    """group.consumer.regex.refresh.interval.ms (KIP-848): how often a group's regexes are resolved again."""
