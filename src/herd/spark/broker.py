"""The driver's view of the broker: which partitions a subscription matches and where their offsets are.

One confluent-kafka (librdkafka) Consumer that never subscribes and never fetches serves every question:
`list_topics` (Metadata) for topics and partition counts, and `offsets_for_times` (ListOffsets) for
earliest (-2), latest (-1) and by-timestamp offsets of many partitions in one request per broker.
`resolve` turns an OffsetSpec into concrete offsets. The Consumer is created lazily and never pickled,
so objects holding a BrokerView can still be shipped to Spark workers.

`GroupCommitter` publishes a query's processed offsets to a consumer group (`kafka.group.id`) with a
"simple" OffsetCommit: generation -1 and no member id, which Kafka and herd accept for a group that has
no members. librdkafka sends exactly that when a Consumer with a group.id commits explicit offsets
without having subscribed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from herd.spark.errors import HerdBrokerError, HerdOptionError
from herd.spark.offsets import EARLIEST, LATEST, OffsetSpec, Position, TopicPartition
from herd.spark.options import Subscription

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
RETRY_PAUSE_S = 0.2
# Errors of a ListOffsets attempt that a new attempt, after a metadata refresh, can get past: the leader died,
# moved, or is being elected (besides what librdkafka itself marks retriable).
_RETRIABLE = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._DESTROY_BROKER,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.KAFKA_STORAGE_ERROR,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.OFFSET_NOT_AVAILABLE,
}


def consumer_config(client: Mapping[str, str], group_id: str) -> dict[str, Any]:
    """The user's client settings plus what the connector needs; the user may tune but not disable."""
    return {
        "socket.connection.setup.timeout.ms": 10_000,
        **client,
        "group.id": group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }


class BrokerView:
    """Metadata and ListOffsets for the driver; raises HerdBrokerError when the broker cannot answer."""

    def __init__(self, client: Mapping[str, str], group_id: str) -> None:
        self._config = consumer_config(client, group_id)
        self._consumer: Consumer | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_config": self._config, "_consumer": None}

    @property
    def consumer(self) -> Consumer:
        if self._consumer is None:
            try:
                self._consumer = Consumer(self._config)
            except (KafkaException, ValueError, TypeError) as e:
                raise HerdOptionError(f"herd: the Kafka client refused the kafka.* options: {e}") from e
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def topics(self) -> dict[str, int]:
        """Every topic the broker knows, with its partition count.

        Attempts are short and repeated until TIMEOUT_S, as in `offsets`: librdkafka sends the Metadata request
        to one broker and, when that broker dies, keeps the request queued for it until the call's timeout;
        the next attempt goes to a broker that is up."""
        deadline, attempt = time.monotonic() + TIMEOUT_S, 2.0
        while True:
            left = deadline - time.monotonic()
            try:
                metadata = self.consumer.list_topics(timeout=max(0.1, min(attempt, left)))
                return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}
            except KafkaException as e:
                error = e.args[0] if e.args else e
                if not _retriable(error) or time.monotonic() + RETRY_PAUSE_S >= deadline:
                    raise HerdBrokerError(
                        f"herd: cannot read metadata from {self._config['bootstrap.servers']}: {error}"
                    ) from e
            log.info("herd: Metadata from %s: %s; retrying", self._config["bootstrap.servers"], error)
            time.sleep(RETRY_PAUSE_S)
            attempt = min(attempt * 2, TIMEOUT_S)

    def partitions(self, subscription: Subscription) -> tuple[list[TopicPartition], list[str]]:
        """The partitions the subscription matches now, and the named topics (or assigned partitions)
        that do not exist."""
        topics = self.topics()
        if subscription.kind == "assign":
            present = [(t, p) for t, p in subscription.assigned if p < topics.get(t, 0)]
            missing = [f"{t}-{p}" for t, p in subscription.assigned if p >= topics.get(t, 0)]
            return present, missing
        matched = sorted((t, p) for t, n in topics.items() if subscription.matches(t) for p in range(n))
        missing = [t for t in subscription.topics if t not in topics]
        return matched, missing

    def offsets(self, tps: Iterable[TopicPartition], when: int) -> Position:
        """ListOffsets for `when` = EARLIEST, LATEST or a timestamp in ms (-1 where no record qualifies).

        A leader that died or moved fails an attempt (librdkafka keeps a request queued for the dead broker
        until its timeout, and answers NOT_LEADER_OR_FOLLOWER or _DESTROY_BROKER once it learns of the move), so
        attempts are short (2 s, doubling) and are repeated with fresh metadata until TIMEOUT_S has passed, as
        Kafka's admin client retries a ListOffsets until default.api.timeout.ms."""
        wanted = [KafkaTopicPartition(t, p, when) for t, p in sorted(set(tps))]
        if not wanted:
            return {}
        deadline, attempt = time.monotonic() + TIMEOUT_S, 2.0
        while True:
            left = deadline - time.monotonic()
            try:
                answered = self.consumer.offsets_for_times(wanted, timeout=max(0.1, min(attempt, left)))
                failed = next((tp for tp in answered if tp.error is not None), None)
                if failed is None:
                    return {(tp.topic, tp.partition): tp.offset for tp in answered}
                error, what = failed.error, f"{failed.topic}-{failed.partition}"
            except KafkaException as e:
                error, what = e.args[0], f"{len(wanted)} partitions"
            if not _retriable(error) or time.monotonic() + RETRY_PAUSE_S >= deadline:
                raise HerdBrokerError(f"herd: ListOffsets failed for {what}: {error}")
            log.info("herd: ListOffsets for %s: %s; retrying with fresh metadata", what, error)
            time.sleep(RETRY_PAUSE_S)
            self._refresh_metadata({tp.topic for tp in wanted})
            attempt = min(attempt * 2, TIMEOUT_S)

    def _refresh_metadata(self, topics: set[str]) -> None:
        """Ask for the topics' metadata, so that librdkafka learns their new leaders now."""
        for topic in sorted(topics):
            try:
                self.consumer.list_topics(topic, timeout=2.0)
            except KafkaException:
                pass  # the next attempt says whether it mattered

    def earliest(self, tps: Iterable[TopicPartition]) -> Position:
        return self.offsets(tps, EARLIEST)

    def latest(self, tps: Iterable[TopicPartition]) -> Position:
        return self.offsets(tps, LATEST)

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], option: str) -> Position:
        """Concrete offsets of `tps` for a starting or ending spec; raises HerdOptionError when a JSON spec
        does not name exactly the subscribed partitions or a timestamp matches no record (strategy error)."""
        if spec.kind in ("earliest", "latest"):
            return self.offsets(tps, EARLIEST if spec.kind == "earliest" else LATEST)
        if spec.kind == "json":
            _check_same_partitions(spec.offsets, tps, option)
            return self._markers(dict(spec.offsets))
        stamps = {tp: spec.timestamp for tp in tps} if spec.kind == "timestamp" else dict(spec.offsets)
        if spec.kind == "timestamps":
            _check_same_partitions(stamps, tps, option)
        return self._by_timestamps(stamps, spec.strategy, option)

    def _markers(self, offsets: Position) -> Position:
        """-2 and -1 in explicit offsets replaced by the partition's earliest and latest offsets."""
        earliest = self.earliest(tp for tp, o in offsets.items() if o == EARLIEST)
        latest = self.latest(tp for tp, o in offsets.items() if o == LATEST)
        return {tp: earliest.get(tp, latest.get(tp, o)) if o < 0 else o for tp, o in offsets.items()}

    def _by_timestamps(self, stamps: Mapping[TopicPartition, int | None], strategy: str, option: str) -> Position:
        out: Position = {}
        for ts in sorted({s for s in stamps.values() if s is not None}):
            out.update(self.offsets([tp for tp, s in stamps.items() if s == ts], ts))
        unmatched = sorted(tp for tp, o in out.items() if o < 0)
        if unmatched and strategy == "error":
            raise HerdOptionError(
                f"herd source: no record at or after the timestamp in {option!r} for "
                f"{_names(unmatched)}; set startingOffsetsByTimestampStrategy=latest to "
                "start those partitions at their latest offset"
            )
        out.update(self.latest(unmatched))
        return out


def _check_same_partitions(given: Mapping[TopicPartition, Any], tps: list[TopicPartition], option: str) -> None:
    if set(given) != set(tps):
        raise HerdOptionError(
            f"herd source: {option!r} names {_names(sorted(given))} but the query reads {_names(tps)}; "
            "when offsets are given explicitly, name every partition (-2 = earliest, -1 = latest)"
        )


def _names(tps: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(f"{t}-{p}" for t, p in tps) + "]"


class GroupCommitter:
    """Commits a query's processed offsets to `group_id` so `herd groups describe` shows its lag.

    Best effort: lag visibility must not stop a pipeline, so a refused commit (for example because live
    consumers are members of the same group) is logged and retried with the next batch.
    """

    def __init__(self, client: Mapping[str, str], group_id: str) -> None:
        self.group_id = group_id
        self._view = BrokerView(client, group_id)
        self._last: Position = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "_view": self._view, "_last": {}}

    def commit(self, position: Mapping[TopicPartition, int]) -> bool:
        """True when the group now holds `position` (already held, or committed now)."""
        if not position or dict(position) == self._last:
            return True
        offsets = [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(position.items()) if o >= 0]
        try:
            answered = self._view.consumer.commit(offsets=offsets, asynchronous=False) or []
        except KafkaException as e:
            log.warning("herd: committing offsets to group %r failed: %s", self.group_id, e)
            return False
        failed = [tp for tp in answered if tp.error is not None]
        if failed:
            log.warning("herd: group %r refused offsets of %s", self.group_id, failed)
            return False
        self._last = dict(position)
        return True

    def close(self) -> None:
        self._view.close()


def _retriable(error: object) -> bool:
    return isinstance(error, KafkaError) and (error.code() in _RETRIABLE or error.retriable())
