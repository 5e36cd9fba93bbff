"""The statements of the PostgreSQL partition log (`herd.log.postgres.store`), each one round trip.

Every write carries its fence: a condition on the partition's herd_partitions row (this node leads it at this
epoch) in the same statement, which takes the row's lock, so a write and a leadership change of the partition
are ordered by PostgreSQL and a fenced write changes nothing. Reads are bounded by the committed end the
caller passes (`%(end)s`), so rows of a commit whose outcome this node does not know are never returned.
"""


def _fence(assignment: str, condition: str = "") -> str:
    """The CTE `fence`: the UPDATE of the partition's row that makes `assignment` only while this node leads the
    partition at this epoch (and `condition` holds); it returns the row's pid, or nothing when fenced, so every
    other part of the statement joins it to write nothing then."""
    return f"""WITH fence AS (
    UPDATE herd_partitions SET {assignment}
    WHERE pid = %(pid)s AND leader = %(node)s AND leader_epoch = %(epoch)s{condition} RETURNING pid)"""


def _gone(condition: str, returning: str = "") -> str:
    """The CTE `gone`: the fenced DELETE of the partition's batches where `condition` holds."""
    return f"""gone AS (
    DELETE FROM herd_batches b USING fence
    WHERE b.pid = fence.pid AND {condition}{returning})"""


# %(rows)s: one row per batch (base, last, max timestamp, producer id, producer epoch, base sequence, record
# count, size, position in %(blob)s, attributes), a two-dimensional int8[]; %(blob)s: the batches end to end
_INSERT_BATCHES = """
INSERT INTO herd_batches (pid, base_offset, last_offset, max_timestamp, leader_epoch, producer_id, producer_epoch,
                          base_sequence, record_count, size, data, attributes)
SELECT fence.pid, r[i][1], r[i][2], r[i][3], %(epoch)s, r[i][4], r[i][5], r[i][6], r[i][7], r[i][8],
       substring(%(blob)b::bytea FROM r[i][9]::int4 + 1 FOR r[i][8]::int4), r[i][10]
FROM fence, (SELECT %(rows)b::int8[] AS r) AS p, generate_subscripts(p.r, 1) AS i
"""
COMMIT = _fence("log_end_offset = %(new_end)s", " AND log_end_offset = %(end)s") + _INSERT_BATCHES

# COMMIT of batches holding ABORT markers that ended transactions: %(aborted)s, one row per transaction (marker
# offset, producer id, first offset, last stable offset), goes into the aborted-transaction index in the same
# statement (a data-modifying CTE runs exactly once)
COMMIT_ABORTS = (
    _fence("log_end_offset = %(new_end)s", " AND log_end_offset = %(end)s")
    + """,
aborts AS (
    INSERT INTO herd_aborted_txns (pid, last_offset, producer_id, first_offset, last_stable_offset)
    SELECT fence.pid, a[j][1], a[j][2], a[j][3], a[j][4]
    FROM fence, (SELECT %(aborted)b::int8[] AS a) AS q, generate_subscripts(q.a, 1) AS j)"""
    + _INSERT_BATCHES
)

# the aborted transactions whose markers lie in [%(start)s, %(below)s) and that began before %(end)s, in marker
# order (TransactionIndex.collectAbortedTxns over the partition's whole index)
ABORTED = """
SELECT producer_id, first_offset FROM herd_aborted_txns
WHERE pid = %(pid)s AND last_offset >= %(start)s AND last_offset < %(below)s AND first_offset < %(end)s
ORDER BY last_offset
"""

# where the stored aborts end (the last marker's offset), so that reads above it need not ask (`load_transactions`)
LAST_ABORT = "SELECT max(last_offset) FROM herd_aborted_txns WHERE pid = %(pid)s"

# what a new leader rebuilds the transaction state from, among the most recent %(scan)s batches: per producer of
# transactional batches, its latest epoch, the first data batch after its last marker (its ongoing transaction,
# if any) and that marker's bytes (for the coordinator epoch)
TRANSACTIONS = """
WITH recent AS (
    SELECT producer_id, producer_epoch, base_offset, attributes FROM herd_batches
    WHERE pid = %(pid)s AND base_offset < %(end)s AND last_offset >= %(start)s
    ORDER BY base_offset DESC LIMIT %(scan)s),
t AS (SELECT * FROM recent WHERE producer_id >= 0 AND attributes & 16 <> 0),
m AS (SELECT producer_id, max(base_offset) AS marker FROM t WHERE attributes & 32 <> 0 GROUP BY producer_id)
SELECT t.producer_id, max(t.producer_epoch),
       coalesce(min(t.base_offset) FILTER (WHERE t.attributes & 32 = 0 AND t.base_offset > coalesce(m.marker, -1)),
                -1),
       (SELECT data FROM herd_batches WHERE pid = %(pid)s AND base_offset = m.marker)
FROM t LEFT JOIN m USING (producer_id) GROUP BY t.producer_id, m.marker
"""

# whole batches from the one holding %(offset)s (or the first after it, past a compaction gap), cut where their
# running size passes %(max_bytes)s, except the first with %(min_one)s (KIP-74)
READ = """
WITH w AS (
    SELECT base_offset, sum(size) OVER (ORDER BY base_offset) AS upto FROM herd_batches
    WHERE pid = %(pid)s AND base_offset < %(end)s AND last_offset >= %(offset)s
      -- the base offset of the batch holding %(offset)s: a lower bound for the primary key's index, without
      -- which the condition on last_offset would have it scanned from the partition's first batch
      AND base_offset >= coalesce((SELECT max(base_offset) FROM herd_batches
                                   WHERE pid = %(pid)s AND base_offset <= %(offset)s), -1)
    ORDER BY base_offset LIMIT %(rows)s)
SELECT b.data FROM w JOIN herd_batches b ON b.pid = %(pid)s AND b.base_offset = w.base_offset
WHERE w.upto <= %(max_bytes)s OR (%(min_one)s AND w.base_offset = (SELECT min(base_offset) FROM w))
ORDER BY w.base_offset
"""

BY_TIMESTAMP = """
SELECT data FROM herd_batches
WHERE pid = %(pid)s AND base_offset > %(after)s AND base_offset < %(end)s AND last_offset >= %(start)s
  AND max_timestamp >= %(timestamp)s
ORDER BY base_offset LIMIT 1
"""

MAX_TIMESTAMP = """
SELECT data FROM herd_batches
WHERE pid = %(pid)s AND base_offset < %(end)s AND last_offset >= %(start)s AND max_timestamp >= 0
ORDER BY max_timestamp DESC, base_offset LIMIT 1
"""

PARTITION = "SELECT leader, leader_epoch, log_start_offset, log_end_offset FROM herd_partitions WHERE pid = %s"

EPOCHS = "SELECT leader, leader_epoch, epochs, epoch_starts FROM herd_partitions WHERE pid = %s"

SIZES = """
SELECT p.cleaner_offset, coalesce(sum(b.size), 0),
       coalesce(sum(b.size) FILTER (WHERE b.last_offset >= p.cleaner_offset), 0)
FROM herd_partitions p LEFT JOIN herd_batches b
     ON b.pid = p.pid AND b.base_offset < %(end)s AND b.last_offset >= %(start)s
WHERE p.pid = %(pid)s GROUP BY p.cleaner_offset
"""

RETAIN_BY_TIME = """
SELECT min(base_offset) FROM herd_batches
WHERE pid = %(pid)s AND base_offset < %(end)s AND last_offset >= %(start)s AND max_timestamp >= %(oldest)s
"""

RETAIN_BY_BYTES = """
SELECT max(last_offset) + 1 FROM (
    SELECT last_offset, sum(size) OVER (ORDER BY base_offset) AS upto FROM herd_batches
    WHERE pid = %(pid)s AND base_offset < %(end)s AND last_offset >= %(start)s ORDER BY base_offset) w
WHERE upto <= %(excess)s
"""

MOVE_START = (
    _fence("log_start_offset = greatest(log_start_offset, %(start)s)")
    + ",\n"
    + _gone("b.base_offset < %(start)s AND b.last_offset < %(start)s", " RETURNING b.size")
    + """,
gone_txns AS (DELETE FROM herd_aborted_txns a USING fence WHERE a.pid = fence.pid AND a.last_offset < %(start)s)
SELECT (SELECT count(*) FROM fence), (SELECT count(*) FROM gone), (SELECT coalesce(sum(size), 0) FROM gone)
"""
)

LAST_BASE = "SELECT max(base_offset) FROM herd_batches WHERE pid = %(pid)s AND base_offset < %(end)s"

# the DELETE and the UPDATE run although the SELECT does not read them (PostgreSQL runs every data-modifying
# statement in WITH exactly once); the caller knows the bytes they free from the batches it sent
COMPACT = (
    _fence("cleaner_offset = greatest(cleaner_offset, %(cleaned)s)")
    + ",\n"
    + _gone("b.base_offset = ANY(%(deleted)b::int8[])")
    + """,
changed AS (
    UPDATE herd_batches b SET data = v.data, size = length(v.data), record_count = v.count, max_timestamp = v.ts
    FROM fence, unnest(%(bases)b::int8[], %(datas)b::bytea[], %(counts)b::int4[], %(tss)b::int8[])
         AS v(base, data, count, ts)
    WHERE b.pid = fence.pid AND b.base_offset = v.base)
SELECT count(*) FROM fence
"""
)

PRODUCERS = """
SELECT producer_id, producer_epoch, base_sequence, record_count, base_offset, last_offset, max_timestamp FROM (
    SELECT *, row_number() OVER (PARTITION BY producer_id ORDER BY base_offset DESC) AS n FROM (
        SELECT producer_id, producer_epoch, base_sequence, record_count, base_offset, last_offset, max_timestamp
        FROM herd_batches WHERE pid = %(pid)s AND base_offset < %(end)s AND last_offset >= %(start)s
          AND attributes & 32 = 0
        ORDER BY base_offset DESC LIMIT %(scan)s) recent
    WHERE producer_id >= 0) numbered
WHERE n <= %(keep)s ORDER BY base_offset
"""
