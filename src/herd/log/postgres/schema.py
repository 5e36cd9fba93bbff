"""The versioned schema every node of a cluster shares, created and migrated by herd itself. The statements that
read and change the metadata in it are `herd.log.postgres.metadata_sql`'s, the partition log's `sql`'s.

`migrate` runs at every node's start, in one transaction under an advisory lock (so two nodes starting together
do not both create it): it reads `herd_meta.schema_version`, applies the migrations after it in order, and
records the new version. A database at a newer version than this node knows is refused (`SchemaError`): an
older node must not write rows whose meaning it does not know.

Version 1, what lives where:
- `herd_meta`: key/value; `schema_version`, `cluster_id` (the cluster id every node answers in Metadata).
- `herd_nodes`: one row per node id: its advertised endpoint, the incarnation (a random id per process, so a
  second process with the same node.id is told apart), its lease (`lease_until`, in the database's clock, so
  the nodes' clocks do not matter) and its state (alive, shutting_down while a controlled shutdown hands its
  partitions over, stopped).
- `herd_topics`: id, name, partition count and the configs the user set (Kafka names, string values).
- `herd_partitions`: one row per partition, with a surrogate `pid` the batches are keyed by: its leader and
  leader epoch, the log start offset, the log end offset (the end of what is committed) and, for compacted
  partitions, the cleaner offset (everything below it was compacted by the last pass). Every write to a
  partition checks, in the same transaction, that this row still names the writer's epoch (the fence).
  Deleting a topic leaves its partition rows without a topic (and without a leader) until their batches are
  removed in the background, so that a node that stops in between leaves the work findable.
- `herd_batches`: the record batches, as the producer sent them (base offset and partition leader epoch set),
  keyed by (pid, base_offset), with what reads need without opening the bytes: last offset, max timestamp, the
  producer's id, epoch and sequences (to rebuild idempotent producer state when leadership moves). `data` is
  stored EXTERNAL: out of line, never compressed again by PostgreSQL (the client compressed it or chose not
  to).

Version 2 adds to `herd_partitions` the partition's leader epochs with the offset each began at (`epochs`,
`epoch_starts`, in ascending order, the current epoch last): Kafka's leader-epoch cache, which OffsetForLeaderEpoch
answers from. Every leadership change appends the new epoch with the log end offset at that moment, in the same
UPDATE that bumps the epoch; the commits are fenced on the same row, so that offset is exactly where the new
leader's writes begin. Partitions of a version 1 database get the epochs their stored batches carry, and their
current epoch.

Version 3 adds `herd_broker_configs`: the dynamic broker configs (AlterConfigs and IncrementalAlterConfigs on
BROKER resources), one row per resource name: "" for the cluster-wide default, a node id for that node's own,
each a jsonb object of Kafka names to string values. Every node reads it with the topics and applies what
concerns it.

Version 4 (transactions, herd.log.transactions): `herd_batches.attributes`, the batch's attributes (bit 4
transactional, bit 5 control), from which a new leader finds the transactions ongoing in the partition; rows
stored before it hold 0, which is right: no transactional batch was accepted before. `herd_aborted_txns`: the
aborted-transaction index, one row per aborted transaction keyed by (pid, the offset of its ABORT marker), with
the producer id, its first offset and the last stable offset once it was complete (Kafka's AbortedTxn, the
entries of its `.txnindex` files), inserted in the same statement that commits the marker; retention deletes the
rows whose marker falls below the new log start, and a partition row's deletion takes its rows with it.

Version 5 adds `herd_nodes.http_url`: the URL of the node's HTTP listener (herd.http.listener), NULL for a node
without one, written at registration. The nodes' HTTP APIs ask each other through it (every group, whichever
node coordinates it).

Version 6 (security): `herd_nodes.listeners`, the node's advertised listeners as a jsonb object of listener name
(upper case) to [host, port], so that a client is given the endpoints of the listener it connected on (NULL for a
node that predates it: its host and port serve every listener). `herd_scram_credentials`: one row per user and
SCRAM mechanism with the salt, StoredKey, ServerKey and iteration count (RFC 5802; never the password).
`herd_acls`: one row per ACL binding (Kafka's codes for the resource type, pattern type, operation and
permission type), unique as a whole, as Kafka's authorizer stores them.
"""

from __future__ import annotations

import logging
import uuid

import psycopg

from herd.log.postgres.errors import DatabaseError

log = logging.getLogger(__name__)

SCHEMA_VERSION = 6
MIGRATION_LOCK = 0x68657264  # 'herd': pg_advisory_xact_lock key serialising migrations

_V1 = """
CREATE TABLE herd_meta (
    key text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE herd_nodes (
    node_id integer PRIMARY KEY,
    host text NOT NULL,
    port integer NOT NULL,
    rack text,
    incarnation uuid NOT NULL,
    lease_until timestamptz NOT NULL,
    state text NOT NULL DEFAULT 'alive' CHECK (state IN ('alive', 'shutting_down', 'stopped')),
    registered_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE herd_topics (
    topic_id uuid PRIMARY KEY,
    name text NOT NULL UNIQUE,
    partitions integer NOT NULL CHECK (partitions > 0),
    configs jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE TABLE herd_partitions (
    pid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic_id uuid REFERENCES herd_topics (topic_id) ON DELETE SET NULL,  -- NULL: its topic was deleted
    partition integer NOT NULL,
    leader integer,
    leader_epoch integer NOT NULL DEFAULT 0,
    log_start_offset bigint NOT NULL DEFAULT 0,
    log_end_offset bigint NOT NULL DEFAULT 0,
    cleaner_offset bigint NOT NULL DEFAULT 0,
    UNIQUE (topic_id, partition)
);
CREATE TABLE herd_batches (
    pid bigint NOT NULL,
    base_offset bigint NOT NULL,
    last_offset bigint NOT NULL,
    max_timestamp bigint NOT NULL,
    leader_epoch integer NOT NULL,
    producer_id bigint NOT NULL DEFAULT -1,
    producer_epoch smallint NOT NULL DEFAULT -1,
    base_sequence integer NOT NULL DEFAULT -1,
    record_count integer NOT NULL,
    size integer NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (pid, base_offset)
);
ALTER TABLE herd_batches ALTER COLUMN data SET STORAGE EXTERNAL;
"""

_V2 = """
ALTER TABLE herd_partitions ADD COLUMN epochs integer[] NOT NULL DEFAULT '{}',
                            ADD COLUMN epoch_starts bigint[] NOT NULL DEFAULT '{}';
UPDATE herd_partitions AS p SET epochs = h.epochs, epoch_starts = h.starts
  FROM (SELECT pid, array_agg(leader_epoch ORDER BY leader_epoch) AS epochs,
               array_agg(start ORDER BY leader_epoch) AS starts
          FROM (SELECT pid, leader_epoch, min(base_offset) AS start FROM herd_batches
                 GROUP BY pid, leader_epoch) AS e
         GROUP BY pid) AS h
 WHERE h.pid = p.pid;
UPDATE herd_partitions SET epochs = epochs || leader_epoch, epoch_starts = epoch_starts || log_end_offset
 WHERE NOT (leader_epoch = ANY (epochs));
ALTER TABLE herd_partitions ALTER COLUMN epochs SET DEFAULT '{0}',
                            ALTER COLUMN epoch_starts SET DEFAULT '{0}';
"""

# IF NOT EXISTS: other migrations of the same version may be merged beside it; each stays safe to run again.
_V3 = """
CREATE TABLE IF NOT EXISTS herd_broker_configs (
    resource_name text PRIMARY KEY,
    configs jsonb NOT NULL DEFAULT '{}'::jsonb
);
"""

_V4 = """
ALTER TABLE herd_batches ADD COLUMN IF NOT EXISTS attributes smallint NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS herd_aborted_txns (
    pid bigint NOT NULL REFERENCES herd_partitions (pid) ON DELETE CASCADE,
    last_offset bigint NOT NULL,
    producer_id bigint NOT NULL,
    first_offset bigint NOT NULL,
    last_stable_offset bigint NOT NULL,
    PRIMARY KEY (pid, last_offset)
);
"""

_V5 = """
ALTER TABLE herd_nodes ADD COLUMN IF NOT EXISTS http_url text;
"""

_V6 = """
ALTER TABLE herd_nodes ADD COLUMN IF NOT EXISTS listeners jsonb;
CREATE TABLE IF NOT EXISTS herd_scram_credentials (
    user_name text NOT NULL,
    mechanism text NOT NULL,
    salt bytea NOT NULL,
    stored_key bytea NOT NULL,
    server_key bytea NOT NULL,
    iterations integer NOT NULL,
    PRIMARY KEY (user_name, mechanism)
);
CREATE TABLE IF NOT EXISTS herd_acls (
    resource_type smallint NOT NULL,
    resource_name text NOT NULL,
    pattern_type smallint NOT NULL,
    principal text NOT NULL,
    host text NOT NULL,
    operation smallint NOT NULL,
    permission_type smallint NOT NULL,
    PRIMARY KEY (resource_type, resource_name, pattern_type, principal, host, operation, permission_type)
);
"""

# version -> the SQL that takes the schema from version - 1 to it
MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6}

# what `migrate` runs besides the migrations (the statements on the metadata itself: herd.log.postgres.metadata_sql)
LOCK_MIGRATIONS = "SELECT pg_advisory_xact_lock(%s)"  # with MIGRATION_LOCK, until the transaction ends
HAS_META = "SELECT to_regclass('herd_meta') IS NOT NULL"  # false: an empty database (version 0)
READ_VERSION = "SELECT value FROM herd_meta WHERE key = 'schema_version'"
SET_VERSION = (
    "INSERT INTO herd_meta (key, value) VALUES ('schema_version', %s) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
SET_CLUSTER_ID = "INSERT INTO herd_meta (key, value) VALUES ('cluster_id', %s) ON CONFLICT DO NOTHING"  # the first
READ_CLUSTER_ID = "SELECT value FROM herd_meta WHERE key = 'cluster_id'"


class SchemaError(DatabaseError):
    """The database's schema cannot be used by this node; one line for the operator."""


async def migrate(conn: psycopg.AsyncConnection, where: str) -> str:
    """Bring the schema to SCHEMA_VERSION and return the cluster id; raises SchemaError for a newer schema.
    `where` names the database in messages (a redacted URL)."""
    async with conn.transaction():
        await conn.execute(LOCK_MIGRATIONS, (MIGRATION_LOCK,))
        version = await _version(conn)
        if version > SCHEMA_VERSION:
            raise SchemaError(
                f"the database at {where} has herd schema version {version}, newer than the "
                f"{SCHEMA_VERSION} this herd knows: upgrade herd on this node"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            await conn.execute(MIGRATIONS[target])
            log.info("herd schema in %s migrated to version %d", where, target)
        if version < SCHEMA_VERSION:
            await conn.execute(SET_VERSION, (str(SCHEMA_VERSION),))
        await conn.execute(SET_CLUSTER_ID, (_new_cluster_id(),))
        cursor = await conn.execute(READ_CLUSTER_ID)
        row = await cursor.fetchone()
        assert row is not None
        return str(row[0])


async def _version(conn: psycopg.AsyncConnection) -> int:
    cursor = await conn.execute(HAS_META)
    row = await cursor.fetchone()
    if not row or not row[0]:
        return 0
    cursor = await conn.execute(READ_VERSION)
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


def _new_cluster_id() -> str:
    from herd.log.store import kafka_uuid  # the same base64 form as an embedded node's cluster id

    return kafka_uuid(uuid.uuid4())
