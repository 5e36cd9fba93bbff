"""Transaction administration (kafka-transactions.sh's list, describe, describe-producers, abort, find-hanging).

`TransactionAdmin` is mixed into herd.client.admin.Admin; it needs only `self.client`. Each call is the request
Kafka's Admin sends for it, to the node Kafka's Admin sends it to (apache/kafka clients/src/main/java/org/apache/
kafka/clients/admin/internals/ ListTransactionsHandler, DescribeTransactionsHandler, DescribeProducersHandler,
AbortTransactionHandler), with the same errors retried:

- `list_transactions`: ListTransactions to every broker (AllBrokersStrategy), the listings by broker id; a broker
  answering COORDINATOR_LOAD_IN_PROGRESS is asked again after a backoff, any other error fails the call. State
  filters are Kafka's TransactionState names; the duration filter needs v1 (KIP-994).
- `describe_transaction`: DescribeTransactions to the transactional id's coordinator (FindCoordinator key type 1),
  found again on NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE and retried on COORDINATOR_LOAD_IN_PROGRESS;
  TRANSACTIONAL_ID_NOT_FOUND fails.
- `describe_producers`: DescribeProducers to each partition's leader (or to the broker asked for), its active
  producers with their coordinator epoch and current transaction start offset (None when the broker answers -1);
  NOT_LEADER_OR_FOLLOWER and UNKNOWN_TOPIC_OR_PARTITION are retried with fresh metadata, except against a broker
  named by the caller, where NOT_LEADER_OR_FOLLOWER fails as in Kafka.
- `abort_transaction`: one WriteTxnMarkers with an ABORT marker (transaction_result false) for one partition to
  its leader, as the coordinator would write it; NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE,
  BROKER_NOT_AVAILABLE and UNKNOWN_TOPIC_OR_PARTITION retried after finding the leader again, INVALID_PRODUCER_EPOCH
  and TRANSACTION_COORDINATOR_FENCED fail with Kafka's messages. `abort_spec` finds the producer of the transaction
  that starts at an offset through DescribeProducers (TransactionsCommand.AbortTransactionCommand.buildAbortSpec).
- `find_hanging`: TransactionsCommand.FindHangingTransactionsCommand (apache/kafka tools/src/main/java/org/apache/
  kafka/tools/TransactionsCommand.java): the open transactions (a current transaction start offset) of the
  partitions searched whose producer's last write is older than the largest transaction timeout, then those whose
  producer id no coordinator lists, whose transactional id cannot be described, or whose coordinator's
  description does not name the partition.

A topic that does not exist fails at once ("Topic 'T' does not exist."), as do a partition it lacks and a
broker id the cluster does not know, instead of being retried until the timeout. Failures raise the admin's error
type with one line that starts as kafka-transactions.sh's ("Failed to describe transaction state of
transactional-id `T`: ...").
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from kio.schema.errors import ErrorCode

from herd.client.connection import KafkaClient, Node
from herd.client.consumer_protocol import TopicPartition, group_by_topic
from herd.client.errors import COORDINATOR_ERRORS, ConnectionLost, KafkaError, error_name
from herd.client.wire import RequestBuilder

__all__ = [
    "AbortSpec",
    "OpenTransaction",
    "ProducerState",
    "TRANSACTION_STATES",
    "TransactionAdmin",
    "TransactionDescription",
    "TransactionListing",
    "partition_name",
]

T = TypeVar("T")

WRITE_TXN_MARKERS: Final = 27
DESCRIBE_PRODUCERS: Final = 61
DESCRIBE_TRANSACTIONS: Final = 65
LIST_TRANSACTIONS: Final = 66
TRANSACTION_KEY_TYPE: Final = 1
# Kafka's org.apache.kafka.clients.admin.TransactionState names, which ListTransactions filters by.
TRANSACTION_STATES: Final = (
    "Ongoing",
    "PrepareAbort",
    "PrepareCommit",
    "CompleteAbort",
    "CompleteCommit",
    "Empty",
    "PrepareEpochFence",
)
LEADER_ERRORS: Final = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition})
ABORT_RETRIED: Final = LEADER_ERRORS | {ErrorCode.replica_not_available, ErrorCode.broker_not_available}
MINUTE_MS: Final = 60_000


def partition_name(tp: TopicPartition) -> str:
    """Kafka's TopicPartition.toString: `topic-partition`."""
    return f"{tp.topic}-{tp.partition}"


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int | None  # None: no transaction open
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None  # None when the broker answers -1
    txn_start_offset: int | None  # the first offset of its ongoing transaction; None when it has none


@dataclass(frozen=True, slots=True)
class AbortSpec:
    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:  # as Kafka's AbortTransactionSpec.toString
        return (
            f"AbortTransactionSpec(topicPartition={partition_name(self.partition)}, producerId={self.producer_id}, "
            f"producerEpoch={self.producer_epoch}, coordinatorEpoch={self.coordinator_epoch})"
        )


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    partition: TopicPartition
    producer: ProducerState


class _Retry(KafkaError):
    """A retriable answer, asked again after a backoff (and fresh metadata) until the request timeout."""


class TransactionAdmin:
    """Transaction operations (see the module docstring)."""

    client: KafkaClient
    error_type: type[KafkaError] = KafkaError

    # -- ListTransactions ----------------------------------------------------------------------------------

    async def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int | None = None
    ) -> dict[int, list[TransactionListing]]:
        """Every broker's transactions matching the filters (states: TRANSACTION_STATES names; duration: only
        those running longer than that), by broker id, each sorted by transactional id."""
        states, producer_ids = tuple(states), tuple(producer_ids)
        unknown = [s for s in states if s not in TRANSACTION_STATES]
        if unknown:
            raise self.error_type(
                ErrorCode.invalid_request,
                f"Unknown transaction state '{unknown[0]}' (one of {', '.join(TRANSACTION_STATES)}).",
            )

        def build(b: RequestBuilder) -> Any:
            if duration_ms is not None and duration_ms >= 0 and b.version < 1:
                raise self.error_type(
                    ErrorCode.unsupported_version, "Duration filter can be set only when using API version 1 or higher"
                )
            return b.request(
                state_filters=states,
                producer_id_filters=producer_ids,
                duration_filter=-1 if duration_ms is None else duration_ms,
            )

        async def at(node: int) -> list[TransactionListing]:
            _, body = await self.client.send(LIST_TRANSACTIONS, build, node=node)
            if body.error_code == ErrorCode.coordinator_load_in_progress:
                raise _Retry(body.error_code)
            if body.error_code:
                raise self.error_type(
                    body.error_code,
                    f"Failed to list transactions: ListTransactions request "
                    f"sent to broker {node} failed: {error_name(body.error_code)}",
                )
            return sorted(
                (
                    TransactionListing(t.transactional_id, int(t.producer_id), t.transaction_state)
                    for t in body.transaction_states
                ),
                key=lambda t: t.transactional_id,
            )

        brokers = sorted((await self.client.metadata([])).brokers)
        answers = await asyncio.gather(*(self._retrying(lambda node=node: at(node)) for node in brokers))
        return dict(zip(brokers, answers))

    # -- DescribeTransactions ------------------------------------------------------------------------------

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """The coordinator's view of one transactional id; raises when it does not know it."""
        failed = f"Failed to describe transaction state of transactional-id `{transactional_id}`"

        def build(b: RequestBuilder) -> Any:
            return b.request(transactional_ids=(transactional_id,))

        async def attempt() -> TransactionDescription:
            node = await self._transaction_coordinator(transactional_id)
            _, states = await self.client.send(
                DESCRIBE_TRANSACTIONS, build, node=node.node_id, decode=_decode_describe_transactions
            )
            state = states[0]
            if state.error_code in COORDINATOR_ERRORS:
                raise _Retry(state.error_code)
            if state.error_code == ErrorCode.transactional_id_not_found:
                raise self.error_type(
                    state.error_code,
                    f"{failed}: DescribeTransactions request for transactionalId "
                    f"`{transactional_id}` failed because the ID could not be "
                    f"found.",
                )
            if state.error_code:
                raise self.error_type(state.error_code, f"{failed}: {error_name(state.error_code)}.")
            return TransactionDescription(
                node.node_id,
                transactional_id,
                state.producer_id,
                state.producer_epoch,
                state.state,
                state.timeout_ms,
                None if state.start_ms < 0 else state.start_ms,
                state.partitions,
            )

        return await self._retrying(attempt, failed)

    async def _transaction_coordinator(self, transactional_id: str) -> Node:
        """FindCoordinator with key type 1 (TRANSACTION); coordinator errors raise _Retry."""
        try:
            return await self.client.lookup_coordinator(transactional_id, TRANSACTION_KEY_TYPE)
        except ConnectionLost:
            raise  # retried by _retrying
        except KafkaError as error:
            if error.code in COORDINATOR_ERRORS:
                raise _Retry(error.code) from None
            raise self.error_type(error.code, error.message) from None

    # -- DescribeProducers ---------------------------------------------------------------------------------

    async def describe_producers(
        self, partitions: Sequence[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition, from its leader (or from `broker_id`), by producer id."""
        wanted = sorted(set(partitions))
        where = "leader" if broker_id is None else f"broker {broker_id}"

        def failed(tp: TopicPartition) -> str:  # kafka-transactions.sh describe-producers' wording
            return f"Failed to describe producers for partition {partition_name(tp)} on {where}"

        if broker_id is not None and broker_id not in (await self.client.metadata([])).brokers:
            raise self.error_type(
                ErrorCode.broker_not_available, f"{failed(wanted[0])}: broker {broker_id} is not in the cluster."
            )
        result: dict[TopicPartition, list[ProducerState]] = {}

        def build_for(parts: list[TopicPartition]) -> Callable[[RequestBuilder], Any]:
            def build(b: RequestBuilder) -> Any:
                return b.request(
                    topics=tuple(
                        b("TopicRequest", name=t, partition_indexes=tuple(ps))
                        for t, ps in group_by_topic(parts).items()
                    )
                )

            return build

        async def attempt() -> dict[TopicPartition, list[ProducerState]]:
            missing = [tp for tp in wanted if tp not in result]
            leaders = await self._leaders(missing)  # also: a topic or partition that does not exist fails here
            if broker_id is not None:
                leaders = {tp: broker_id for tp in missing}
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in missing:
                by_node.setdefault(leaders[tp], []).append(tp)
            retry: _Retry | None = None
            for node, parts in sorted(by_node.items()):
                _, body = await self.client.send(DESCRIBE_PRODUCERS, build_for(parts), node=node)
                for topic in body.topics:
                    for p in topic.partitions:
                        tp = TopicPartition(topic.name, int(p.partition_index))
                        code = p.error_code
                        if not code:
                            result[tp] = sorted((_producer(s) for s in p.active_producers), key=lambda s: s.producer_id)
                        elif code in LEADER_ERRORS and not (
                            broker_id is not None and code == ErrorCode.not_leader_or_follower
                        ):
                            retry = _Retry(code, f"{failed(tp)}: {error_name(code)}.")
                        else:
                            reason = p.error_message or error_name(code)
                            raise self.error_type(code, f"{failed(tp)}: {reason}.")
            if retry is not None:
                raise retry
            return result

        await self._retrying(attempt)
        return {tp: result[tp] for tp in wanted}

    async def _leaders(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's leader from fresh metadata; a topic or partition that does not exist raises, one
        without a leader raises _Retry."""
        metadata = await self.client.metadata(sorted({tp.topic for tp in partitions}))
        leaders = {}
        for tp in partitions:
            topic = metadata.topics.get(tp.topic)
            if topic is None or topic.error_code == ErrorCode.unknown_topic_or_partition:
                raise self.error_type(ErrorCode.unknown_topic_or_partition, f"Topic '{tp.topic}' does not exist.")
            if topic.error_code:
                raise _Retry(topic.error_code, f"topic '{tp.topic}': {error_name(topic.error_code)}")
            if tp.partition not in topic.partitions:
                raise self.error_type(
                    ErrorCode.unknown_topic_or_partition,
                    f"Partition {tp.partition} of topic '{tp.topic}' does not exist.",
                )
            leader = topic.partitions[tp.partition]
            if leader < 0:
                raise _Retry(ErrorCode.leader_not_available, f"{partition_name(tp)} has no leader")
            leaders[tp] = leader
        return leaders

    # -- abort -------------------------------------------------------------------------------------------------

    async def abort_spec(self, partition: TopicPartition, start_offset: int) -> AbortSpec:
        """The producer whose open transaction on `partition` starts at `start_offset` (its coordinator epoch, or
        0 when the broker knows none), as kafka-transactions.sh abort --start-offset finds it."""
        producers = (await self.describe_producers([partition]))[partition]
        for p in producers:
            if p.txn_start_offset == start_offset:
                return AbortSpec(partition, p.producer_id, p.producer_epoch, p.coordinator_epoch or 0)
        raise self.error_type(
            ErrorCode.invalid_txn_state,
            f"Could not find any open transactions starting at offset "
            f"{start_offset} on partition {partition_name(partition)}",
        )

    async def abort_transaction(self, spec: AbortSpec) -> None:
        """Write an ABORT marker for the spec's producer into its partition, through the partition's leader."""
        tp = spec.partition
        failed = f"Failed to abort transaction {spec}"

        def build(b: RequestBuilder) -> Any:
            topic = b("WritableTxnMarkerTopic", name=tp.topic, partition_indexes=(tp.partition,))
            marker = b(
                "WritableTxnMarker",
                producer_id=spec.producer_id,
                producer_epoch=spec.producer_epoch,
                transaction_result=False,
                topics=(topic,),
                coordinator_epoch=spec.coordinator_epoch,
            )
            return b.request(markers=(marker,))

        async def attempt() -> None:
            leader = (await self._leaders([tp]))[tp]
            _, body = await self.client.send(WRITE_TXN_MARKERS, build, node=leader)
            try:
                (result,) = body.markers
                (topic,) = result.topics
                (partition,) = topic.partitions
            except ValueError:
                raise self.error_type(
                    ErrorCode.unknown_server_error, f"{failed}: WriteTxnMarkers response included unexpected entries"
                ) from None
            code = partition.error_code
            if code in ABORT_RETRIED:
                raise _Retry(code, f"{failed}: {error_name(code)}")
            if code == ErrorCode.invalid_producer_epoch:
                raise self.error_type(
                    code, f"{failed}: WriteTxnMarkers request with {spec} failed due an invalid producer epoch."
                )
            if code == ErrorCode.transaction_coordinator_fenced:
                raise self.error_type(
                    code,
                    f"{failed}: WriteTxnMarkers request with {spec} failed since the provided "
                    f"coordinator epoch {spec.coordinator_epoch} has been fenced by the active "
                    f"coordinator.",
                )
            if code:
                raise self.error_type(
                    code,
                    f"{failed}: WriteTxnMarkers request with {spec} failed due to unexpected "
                    f"error: {error_name(code)}.",
                )

        await self._retrying(attempt)

    # -- find-hanging ------------------------------------------------------------------------------------------

    async def find_hanging(
        self,
        now_ms: int,
        *,
        broker_id: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        max_timeout_ms: int = 15 * MINUTE_MS,
    ) -> list[OpenTransaction]:
        """Open transactions no coordinator will complete (see the module docstring), by partition and producer.
        The search covers `topic` (one partition of it with `partition`), else every topic with a replica on
        `broker_id`; one of the two must be given."""
        if topic is None and broker_id is None:
            raise self.error_type(
                ErrorCode.invalid_request,
                "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search",
            )
        if partition is not None and topic is None:
            raise self.error_type(ErrorCode.invalid_request, "The --partition argument requires --topic to be provided")
        partitions = await self._search_scope(broker_id, topic, partition)
        if not partitions:
            return []
        open_txns = [
            OpenTransaction(tp, p)
            for tp, producers in (await self.describe_producers(partitions, broker_id)).items()
            for p in producers
            if p.txn_start_offset is not None and now_ms - p.last_timestamp > max_timeout_ms
        ]
        if not open_txns:
            return []
        by_producer: dict[int, list[OpenTransaction]] = {}
        for txn in open_txns:
            by_producer.setdefault(txn.producer.producer_id, []).append(txn)
        listed = {
            t.producer_id: t.transactional_id
            for listings in (await self.list_transactions(producer_ids=sorted(by_producer))).values()
            for t in listings
            if t.producer_id in by_producer
        }
        hanging = []
        for producer_id, txns in sorted(by_producer.items()):
            transactional_id = listed.get(producer_id)
            described = None
            if transactional_id is not None:
                try:
                    described = await self.describe_transaction(transactional_id)
                except KafkaError as exc:
                    if exc.code != ErrorCode.transactional_id_not_found:
                        raise
            hanging += [t for t in txns if described is None or t.partition not in described.partitions]
        return sorted(hanging, key=lambda t: (t.partition, t.producer.producer_id))

    async def _search_scope(
        self, broker_id: int | None, topic: str | None, partition: int | None
    ) -> list[TopicPartition]:
        if topic is not None and partition is not None:
            return [TopicPartition(topic, partition)]
        metadata = await self.client.metadata(None if topic is None else [topic])
        if broker_id is not None and broker_id not in metadata.brokers:
            raise self.error_type(ErrorCode.broker_not_available, f"Broker {broker_id} is not in the cluster.")
        names = sorted(metadata.topics) if topic is None else [topic]
        out = []
        for name in names:
            info = metadata.topics.get(name)
            if info is None or info.error_code:
                raise self.error_type(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")
            out += [
                TopicPartition(name, p)
                for p in sorted(info.partitions)
                if broker_id is None or broker_id in info.replicas.get(p, (info.partitions[p],))
            ]
        return out

    # -- retries -----------------------------------------------------------------------------------------------

    async def _retrying(self, attempt: Callable[[], Awaitable[T]], failed: str | None = None) -> T:
        """`attempt()`, tried again after a backoff while it raises _Retry or ConnectionLost, until the request
        timeout; then the last error is raised as the admin's error type."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.client.request_timeout_ms / 1000
        tries = 0
        while True:
            try:
                return await attempt()
            except (_Retry, ConnectionLost) as exc:
                delay = self.client.backoff.delay_ms(tries) / 1000
                if loop.time() + delay > deadline:
                    if isinstance(exc, ConnectionLost):
                        raise
                    message = exc.message if failed is None else f"{failed}: {exc.message}."
                    raise self.error_type(exc.code, message) from None
            tries += 1
            await asyncio.sleep(delay)


def _producer(s: Any) -> ProducerState:
    return ProducerState(
        int(s.producer_id),
        int(s.producer_epoch),
        int(s.last_sequence),
        int(s.last_timestamp),
        None if s.coordinator_epoch < 0 else int(s.coordinator_epoch),
        None if s.current_txn_start_offset < 0 else int(s.current_txn_start_offset),
    )


@dataclass(frozen=True, slots=True)
class _DescribedState:
    error_code: int
    transactional_id: str
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


class _Reader:
    """Reads a flexible (compact) message: kio cannot read a DescribeTransactions answer whose
    transaction_start_time is -1 (no transaction open, as Kafka sends it), since its type is a timestamp that
    must not be negative."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def fixed(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self) -> str:
        size = self.varint() - 1
        text = self.data[self.at : self.at + size].decode()
        self.at += size
        return text

    def array(self, item: Callable[[], T]) -> list[T]:
        return [item() for _ in range(self.varint() - 1)]

    def skip_tags(self) -> None:
        for _ in range(self.varint()):
            self.varint()
            self.at += self.varint()


def _decode_describe_transactions(frame: bytes, version: int) -> list[_DescribedState]:
    """A DescribeTransactions v0 response frame (header v1: correlation id, tags), by Kafka's schema
    (clients/src/main/resources/common/message/DescribeTransactionsResponse.json)."""
    r = _Reader(frame)
    r.fixed(">i")  # correlation id, checked by the connection
    r.skip_tags()
    r.fixed(">i")  # throttle time

    def topic() -> list[TopicPartition]:
        name = r.string()
        partitions = r.array(lambda: r.fixed(">i"))
        r.skip_tags()
        return [TopicPartition(name, p) for p in partitions]

    def state() -> _DescribedState:
        error, tid, name = r.fixed(">h"), r.string(), r.string()
        timeout, start, producer_id, epoch = r.fixed(">i"), r.fixed(">q"), r.fixed(">q"), r.fixed(">h")
        partitions = tuple(tp for t in r.array(topic) for tp in t)
        r.skip_tags()
        return _DescribedState(error, tid, name, timeout, start, producer_id, epoch, partitions)

    return r.array(state)
