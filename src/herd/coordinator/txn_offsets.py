"""Pending transactional offsets: what TxnOffsetCommit staged and no transaction marker has completed yet.

Modelled on apache/kafka group-coordinator/src/main/java/org/apache/kafka/coordinator/group/
OffsetMetadataManager.java (`pendingTransactionalOffsets`, `OpenTransactions`, `replay`,
`replayEndTransactionMarker`, `hasPendingTransactionalOffsets`). Like the committed offsets, this state only
changes by replay, live or on load, in log order:

- an OffsetCommit record of a transactional batch (producer id >= 0) is staged under its producer id, and the
  (group, topic, partition) is *open* for that producer; the committed offset is left alone;
- an OffsetCommit record of a plain batch updates the committed offset (offsets.py) as before;
- a tombstone deletes the committed offset and every pending offset of that partition of the group, and the
  partition is no longer open for anyone (Kafka's `openTransactions.clear`);
- an end-transaction marker (a control batch, or `complete_transaction` live) for a producer removes all its
  pending offsets; on COMMIT each becomes the committed offset, unless a commit written *later in the log*
  already set that partition: Kafka compares the record offsets ("we always keep the most recent committed
  offset when we have a mix of transactional and regular offset commits"). herd replays a record before it
  knows its offset, so the order is kept as a replay sequence number instead (`seq`: replay order is log
  order, live and on load, and compaction keeps the order of what it keeps). Only commits that could win
  that comparison need one: a plain commit (or a materialised one) of a partition that is open at that moment
  (`committed_seq`); any other committed offset is older than every pending offset of its partition.

Fencing of zombie producers: the highest epoch of each producer's transactional batches and markers replayed
here is kept (`epochs`; markers are never compacted away, so a load rebuilds it), and a TxnOffsetCommit with an
older epoch is refused with INVALID_PRODUCER_EPOCH before anything is written, which is what Kafka's log answers
when the batch reaches ProducerStateManager (apache/kafka storage/src/main/java/org/apache/kafka/storage/
internals/log/ProducerAppendInfo.java, checkProducerEpoch). The entries are not expired (Kafka drops a
producer's state after producer.id.expiration.ms): one small entry per transactional producer that ever
committed offsets of a group of this partition.

A group or partition is open while it has a pending offset; OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT for an open partition, retention never expires an open partition's committed offset nor
deletes a group that is open (retention.py), and the pending offsets themselves never expire: only a marker
or a tombstone removes them, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator

from herd.coordinator.records import OffsetValue

Key = tuple[str, int]
"""(topic, partition)"""


class TxnOffsets:
    __slots__ = ("by_producer", "open", "committed_seq", "seq", "epochs")

    def __init__(self) -> None:
        self.by_producer: dict[int, dict[str, dict[Key, tuple[OffsetValue, int]]]] = {}
        """producer id -> group -> (topic, partition) -> (pending value, replay sequence)"""
        self.open: dict[str, dict[Key, set[int]]] = {}
        """group -> (topic, partition) -> producer ids with a pending offset there; no level is ever empty"""
        self.committed_seq: dict[str, dict[Key, int]] = {}
        """group -> (topic, partition) -> replay sequence of the committed offset, for open partitions only"""
        self.seq = 0
        self.epochs: dict[int, int] = {}
        """producer id -> the highest producer epoch of its transactional batches and markers in this partition"""

    def __bool__(self) -> bool:
        return bool(self.by_producer)

    # --- questions --------------------------------------------------------------------------------------

    def holds(self, group: str, topic: str, partition: int) -> bool:
        """Kafka's hasPendingTransactionalOffsets."""
        keys = self.open.get(group)
        return keys is not None and (topic, partition) in keys

    def holds_group(self, group: str) -> bool:
        return group in self.open

    def open_keys(self, group: str) -> Iterator[Key]:
        return iter(tuple(self.open.get(group, ())))

    def pending(self, producer_id: int, group: str) -> dict[Key, OffsetValue]:
        """The producer's pending offsets in `group`."""
        return {key: value for key, (value, _) in self.by_producer.get(producer_id, {}).get(group, {}).items()}

    def producers(self) -> tuple[int, ...]:
        return tuple(self.by_producer)

    # --- replay -----------------------------------------------------------------------------------------

    def stale_epoch(self, producer_id: int, producer_epoch: int) -> bool:
        """True if a later epoch of the producer wrote here already (a zombie: Kafka's ProducerStateManager
        refuses its batch with INVALID_PRODUCER_EPOCH)."""
        return producer_epoch < self.epochs.get(producer_id, -1)

    def saw_epoch(self, producer_id: int, producer_epoch: int) -> None:
        if producer_epoch > self.epochs.get(producer_id, -1):
            self.epochs[producer_id] = producer_epoch

    def stage(self, producer_id: int, group: str, key: Key, value: OffsetValue) -> None:
        """An OffsetCommit record of a transactional batch."""
        self.seq += 1
        self.by_producer.setdefault(producer_id, {}).setdefault(group, {})[key] = (value, self.seq)
        self.open.setdefault(group, {}).setdefault(key, set()).add(producer_id)

    def committed(self, group: str, key: Key) -> None:
        """A plain OffsetCommit record set the committed offset of `key`: remember when, if it is open."""
        keys = self.open.get(group)
        if keys is not None and key in keys:
            self.seq += 1
            self.committed_seq.setdefault(group, {})[key] = self.seq

    def deleted(self, group: str, key: Key) -> None:
        """A tombstone: every pending offset of `key` in `group` goes, and `key` is no longer open."""
        keys = self.open.get(group)
        if keys is None:
            return
        producers = keys.pop(key, None)
        if producers is None:
            return
        for producer_id in producers:
            groups = self.by_producer[producer_id]
            offsets = groups[group]
            del offsets[key]
            if not offsets:
                del groups[group]
                if not groups:
                    del self.by_producer[producer_id]
        self._closed(group, key)

    def complete(self, producer_id: int, commit: bool) -> list[tuple[str, Key, OffsetValue]]:
        """An end-transaction marker of `producer_id`: its pending offsets leave; returns the (group, key, value)
        that become committed offsets (none on abort, and none that a later commit already superseded)."""
        groups = self.by_producer.pop(producer_id, None)
        if groups is None:
            return []
        out = []
        for group, offsets in groups.items():
            keys = self.open[group]
            for key, (value, seq) in offsets.items():
                producers = keys[key]
                producers.discard(producer_id)
                if commit and seq > self.committed_seq.get(group, {}).get(key, 0):
                    out.append((group, key, value))
                    if producers:
                        self.committed_seq.setdefault(group, {})[key] = seq
                if not producers:
                    del keys[key]
                    self._closed(group, key)
        return out

    def _closed(self, group: str, key: Key) -> None:
        """`key` has no pending offset left in `group`."""
        seqs = self.committed_seq.get(group)
        if seqs is not None:
            seqs.pop(key, None)
            if not seqs:
                del self.committed_seq[group]
        if not self.open.get(group, True):
            del self.open[group]

    def clear(self) -> None:
        self.epochs.clear()
        self.by_producer.clear()
        self.open.clear()
        self.committed_seq.clear()
