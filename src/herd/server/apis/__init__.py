"""The API table: every Kafka API herd serves, its version range, and the module that answers it.

Each module in this package opens with its version notes and defines API_KEY, MIN_VERSION, MAX_VERSION and
`handle(ctx, request)`, which returns the response (or None when no response is sent, as for acks=0) or a
coroutine for answers that wait. ApiVersions is generated from this table, never written by hand.

The modules name error codes with kio's `ErrorCode`, the wire library's complete list, which is what responses
carry; the core answers with the same enum (herd.coordinator re-exports it).
"""

from __future__ import annotations

from functools import cache
from types import ModuleType

from herd.protocol.messages import ApiSpec
from herd.server.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_configs,
    alter_partition_reassignments,
    alter_replica_log_dirs,
    alter_share_group_offsets,
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_share_group_offsets,
    delete_share_group_state,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    describe_producers,
    describe_share_group_offsets,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    elect_leaders,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    initialize_share_group_state,
    join_group,
    leave_group,
    list_config_resources,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    list_transactions,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    read_share_group_state,
    read_share_group_state_summary,
    sasl_authenticate,
    sasl_handshake,
    share_acknowledge,
    share_fetch,
    share_group_describe,
    share_group_heartbeat,
    sync_group,
    txn_offset_commit,
    write_share_group_state,
    write_txn_markers,
)

MODULES: tuple[ModuleType, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    find_coordinator,
    api_versions,
    create_topics,
    delete_topics,
    delete_records,
    init_producer_id,
    describe_configs,
    create_partitions,
    offset_commit,
    offset_fetch,
    offset_delete,
    offset_for_leader_epoch,
    add_partitions_to_txn,
    add_offsets_to_txn,
    end_txn,
    write_txn_markers,
    txn_offset_commit,
    join_group,
    heartbeat,
    leave_group,
    sync_group,
    consumer_group_heartbeat,
    consumer_group_describe,
    share_group_heartbeat,
    share_group_describe,
    share_fetch,
    share_acknowledge,
    describe_share_group_offsets,
    alter_share_group_offsets,
    delete_share_group_offsets,
    initialize_share_group_state,
    read_share_group_state,
    write_share_group_state,
    delete_share_group_state,
    read_share_group_state_summary,
    describe_groups,
    list_groups,
    delete_groups,
    incremental_alter_configs,
    alter_configs,
    describe_cluster,
    alter_replica_log_dirs,
    describe_log_dirs,
    elect_leaders,
    alter_partition_reassignments,
    list_partition_reassignments,
    list_config_resources,
    describe_topic_partitions,
    describe_producers,
    describe_transactions,
    list_transactions,
    describe_acls,
    create_acls,
    delete_acls,
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
)


@cache
def table() -> dict[int, ApiSpec]:
    """Key -> spec, built once; callers must not change it."""
    specs = {}
    for module in MODULES:
        spec = ApiSpec(
            module.API_KEY, module.__name__.rsplit(".", 1)[1], module.MIN_VERSION, module.MAX_VERSION, module.handle
        )
        assert spec.key not in specs, f"API key {spec.key} registered twice"
        specs[spec.key] = spec
    return dict(sorted(specs.items()))
