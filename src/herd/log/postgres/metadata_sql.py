"""The statements on the cluster's metadata, which every node shares in PostgreSQL: the nodes and their leases, the
topics, the partitions' leaders and leader epochs, the dynamic broker configs, the ACLs and the SCRAM credentials
(the tables of `herd.log.postgres.schema`; the partition log's own statements are in `herd.log.postgres.sql`).

herd.cluster runs them (`shared` and the modules beside it: the node registry and leases, the controller step, the
admin writes, the view each node reads, the purge of deleted topics), herd.security.acl_store the ACLs' own. Every
change runs in one transaction that first takes the metadata lock (`LOCK`, with `METADATA_LOCK`), so that no two
of them interleave, and ends with `NOTIFY` on `METADATA_CHANNEL`, which every node listens to.
"""

from __future__ import annotations

METADATA_CHANNEL = "herd_metadata"  # NOTIFY channel: nodes, topics, leaders, configs, ACLs or credentials changed
METADATA_LOCK = 0x6865726D  # 'herm': pg_advisory_xact_lock key serialising registrations, steps and admin changes
PURGE_LOCK = 0x68657270  # 'herp': pg_try_advisory_lock key of the node removing deleted topics' data

# -- locks, notifications, snapshots ---------------------------------------------------------------------------------

LOCK = "SELECT pg_advisory_xact_lock(%s)"  # held until the transaction ends
# before LOCK, for the rest of the transaction (in ms): PostgreSQL ends the session of a holder that sends nothing for
# the first (a node stalled mid-change), and a statement waiting for a lock gives up after the second
LOCK_BOUNDS = "SELECT set_config('idle_in_transaction_session_timeout', %s, true), set_config('lock_timeout', %s, true)"
TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"  # a session lock, or false when another session holds it
UNLOCK = "SELECT pg_advisory_unlock(%s)"
NOTIFY = "SELECT pg_notify(%s, %s)"  # the channel and "<kind> <sender node id>"; delivered at commit
LISTEN = f"LISTEN {METADATA_CHANNEL}"
SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"  # the view: one consistent read

# what every UPDATE that gives a partition a new leader epoch sets: the epoch, and its entry in the epoch history,
# which begins at the log end offset (schema.py, version 2)
NEW_EPOCH = (
    "leader_epoch = leader_epoch + 1, epochs = epochs || (leader_epoch + 1), "
    "epoch_starts = epoch_starts || log_end_offset"
)

# -- nodes and leases (lease times in the database's clock) ----------------------------------------------------------

# the non-stopped nodes, with the seconds their leases have left (<= 0: ran out)
NODES = (
    "SELECT node_id, host, port, rack, state, EXTRACT(EPOCH FROM lease_until - clock_timestamp())::float8, "
    "http_url, listeners FROM herd_nodes WHERE state <> 'stopped'"
)

# the live process holding node id %s, if any: its endpoint and the seconds its lease has left
LEASE_HOLDER = (
    "SELECT host, port, EXTRACT(EPOCH FROM lease_until - clock_timestamp())::float8 FROM herd_nodes "
    "WHERE node_id = %s AND state <> 'stopped' AND lease_until > clock_timestamp()"
)

# (node id, host, port, rack, incarnation, lease in ms, http url, listeners): the node's row as a new incarnation
REGISTER = (
    "INSERT INTO herd_nodes (node_id, host, port, rack, incarnation, lease_until, state, http_url, "
    "listeners) VALUES (%s, %s, %s, %s, %s, clock_timestamp() + %s * interval '1 millisecond', 'alive', "
    "%s, %s) "
    "ON CONFLICT (node_id) DO UPDATE SET host = excluded.host, port = excluded.port, rack = excluded.rack, "
    "incarnation = excluded.incarnation, lease_until = excluded.lease_until, state = 'alive', "
    "registered_at = clock_timestamp(), http_url = excluded.http_url, listeners = excluded.listeners"
)

# a new epoch for every partition node %s leads (fencing what an earlier incarnation of it has in flight)
NEW_EPOCHS_OF_NODE = "UPDATE herd_partitions SET " + NEW_EPOCH + " WHERE leader = %s"

# (lease in ms, node id, incarnation): one row updated while the lease holds, none once it was lost
RENEW = (
    "UPDATE herd_nodes SET lease_until = clock_timestamp() + %s * interval '1 millisecond' "
    "WHERE node_id = %s AND incarnation = %s AND state <> 'stopped' AND lease_until > clock_timestamp()"
)

SET_STATE = "UPDATE herd_nodes SET state = %s WHERE node_id = %s AND incarnation = %s"

# (node id, incarnation): stopped, its lease ended now
LEAVE = (
    "UPDATE herd_nodes SET state = 'stopped', lease_until = clock_timestamp() WHERE node_id = %s AND incarnation = %s"
)

# -- the controller step and leadership ------------------------------------------------------------------------------

EXPIRE = (
    "UPDATE herd_nodes SET state = 'stopped' WHERE state <> 'stopped' AND lease_until <= clock_timestamp() "
    "RETURNING node_id"
)

# every partition of a topic: pid, topic name, index, leader, leader epoch
PLACED = (
    "SELECT p.pid, t.name, p.partition, p.leader, p.leader_epoch FROM herd_partitions p "
    "JOIN herd_topics t ON t.topic_id = p.topic_id"
)

# (pids, leaders): each partition's new leader with the next epoch; returns (pid, new epoch)
SET_LEADERS = (
    "UPDATE herd_partitions AS p SET leader = m.leader, " + NEW_EPOCH + " "
    "FROM unnest(%s::bigint[], %s::integer[]) AS m(pid, leader) WHERE p.pid = m.pid "
    "RETURNING p.pid, p.leader_epoch"
)

# (index, topic name): the topic's partition count, and the partition's pid and leader (NULL: no such partition)
MOVE_FIND = (
    "SELECT t.partitions, p.pid, p.leader FROM herd_topics t LEFT JOIN herd_partitions p "
    "ON p.topic_id = t.topic_id AND p.partition = %s WHERE t.name = %s"
)

# (leader, pid): returns the new epoch
MOVE = "UPDATE herd_partitions SET leader = %s, " + NEW_EPOCH + " WHERE pid = %s RETURNING leader_epoch"

# -- topics and configs ----------------------------------------------------------------------------------------------

TOPIC_NAMES = "SELECT name FROM herd_topics"
COUNT_PARTITIONS = "SELECT count(*) FROM herd_partitions WHERE topic_id IS NOT NULL"
INSERT_TOPIC = "INSERT INTO herd_topics (topic_id, name, partitions, configs) VALUES (%s, %s, %s, %s)"
# (topic id, indexes, leaders)
INSERT_PARTITIONS = (
    "INSERT INTO herd_partitions (topic_id, partition, leader) "
    "SELECT %s, p, l FROM unnest(%s::integer[], %s::integer[]) AS m(p, l)"
)
TOPIC_SIZE = "SELECT topic_id, partitions FROM herd_topics WHERE name = %s"
GROW_TOPIC = "UPDATE herd_topics SET partitions = %s WHERE topic_id = %s"
TOPIC_TO_DELETE = "SELECT topic_id, partitions, configs FROM herd_topics WHERE name = %s"
# the topic's partitions lose their leaders, with new epochs: no write of theirs can be stored any more; the rows
# stay, without a topic (ON DELETE SET NULL), until the purge removes their batches
UNLEAD_TOPIC = "UPDATE herd_partitions SET leader = NULL, " + NEW_EPOCH + " WHERE topic_id = %s"
DELETE_TOPIC = "DELETE FROM herd_topics WHERE topic_id = %s"
TOPIC_CONFIGS = "SELECT topic_id, configs FROM herd_topics WHERE name = %s"
SET_TOPIC_CONFIGS = "UPDATE herd_topics SET configs = %s WHERE topic_id = %s"
BROKER_CONFIGS_OF = "SELECT configs FROM herd_broker_configs WHERE resource_name = %s"
SET_BROKER_CONFIGS = (
    "INSERT INTO herd_broker_configs (resource_name, configs) VALUES (%s, %s) "
    "ON CONFLICT (resource_name) DO UPDATE SET configs = EXCLUDED.configs"
)

# -- ACLs and SCRAM credentials --------------------------------------------------------------------------------------

ACL_COLUMNS = "resource_type, resource_name, pattern_type, principal, host, operation, permission_type"
ACLS = f"SELECT {ACL_COLUMNS} FROM herd_acls"
INSERT_ACL = f"INSERT INTO herd_acls ({ACL_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
DELETE_ACL = f"DELETE FROM herd_acls WHERE ({ACL_COLUMNS}) = (%s, %s, %s, %s, %s, %s, %s)"

SCRAM_CREDENTIALS = "SELECT user_name, mechanism, salt, stored_key, server_key, iterations FROM herd_scram_credentials"
DELETE_SCRAM_CREDENTIAL = "DELETE FROM herd_scram_credentials WHERE user_name = %s AND mechanism = %s"
SET_SCRAM_CREDENTIAL = (
    "INSERT INTO herd_scram_credentials (user_name, mechanism, salt, stored_key, server_key, "
    "iterations) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (user_name, mechanism) DO UPDATE "
    "SET salt = EXCLUDED.salt, stored_key = EXCLUDED.stored_key, server_key = EXCLUDED.server_key, "
    "iterations = EXCLUDED.iterations"
)

# -- the view --------------------------------------------------------------------------------------------------------

TOPICS = "SELECT topic_id, name, partitions, configs FROM herd_topics"
PARTITIONS = (
    "SELECT topic_id, partition, pid, leader, leader_epoch, log_start_offset, "
    "log_end_offset FROM herd_partitions WHERE topic_id IS NOT NULL"
)
BROKER_CONFIGS = "SELECT resource_name, configs FROM herd_broker_configs"

# -- what is stored --------------------------------------------------------------------------------------------------

# (node id): the bytes of the stored batches of each partition the node leads
STORED_SIZES = (
    "SELECT t.name, p.partition, coalesce(sum(b.size), 0) FROM herd_partitions p "
    "JOIN herd_topics t ON t.topic_id = p.topic_id LEFT JOIN herd_batches b ON b.pid = p.pid "
    "WHERE p.leader = %s GROUP BY t.name, p.partition"
)
PARTITION_STATS = (
    "SELECT t.name, p.partition, p.leader, p.log_start_offset, p.log_end_offset, "
    "coalesce((SELECT sum(b.size) FROM herd_batches b WHERE b.pid = p.pid), 0) "
    "FROM herd_partitions p JOIN herd_topics t ON t.topic_id = p.topic_id"
)
END_OFFSETS = (
    "SELECT t.name, p.partition, p.log_end_offset FROM herd_partitions p JOIN herd_topics t ON t.topic_id = p.topic_id"
)

# -- removing deleted topics' data -----------------------------------------------------------------------------------

DELETED_PIDS = "SELECT pid FROM herd_partitions WHERE topic_id IS NULL"
# (pid, pid, chunk): at most `chunk` of the partition's batches, from its first
PURGE_BATCHES = (
    "DELETE FROM herd_batches WHERE pid = %s AND base_offset IN (SELECT base_offset FROM "
    "herd_batches WHERE pid = %s ORDER BY base_offset LIMIT %s)"
)
PURGE_PARTITION = "DELETE FROM herd_partitions WHERE pid = %s AND topic_id IS NULL"
