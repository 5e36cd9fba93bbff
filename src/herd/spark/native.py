"""The source's native fetcher: Fetch requests on a plain socket, answers decoded by columnar.py.

The default way a Spark task reads its offset range (option `fetcher`, see options.py). It speaks the
Kafka protocol through kio (herd.client.wire builds and parses the messages): Metadata v8 finds the
partition's leader among the bootstrap servers' brokers, then Fetch v11 requests (no fetch session,
read_uncommitted) are sent from the range's start until the range's end; both versions are served by
Kafka 2.3 through 4.x and by herd. One blocking connection per broker is kept per worker process and
reused by later tasks, as are the leaders it learnt.

Faults: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, storage errors and
broken connections forget the leader and retry after 100 ms until kafkaConsumer.pollTimeoutMs passes
without progress. OFFSET_OUT_OF_RANGE is data loss: raised with failOnDataLoss=true, else the read
resumes at the partition's log start offset (or ends, if the offsets are past its end).

Not handled here, so the librdkafka fetcher (fetch.py) is used instead: TLS or SASL
(kafka.security.protocol other than PLAINTEXT) and kafka.isolation.level=read_committed.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from herd.client.wire import decode_response, encode_request, request_builder
from herd.spark.columnar import Columns, complete_batches, decode
from herd.spark.errors import HerdBrokerError, HerdDataLossError
from herd.spark.offsets import OffsetRange

log = logging.getLogger(__name__)

FETCH, FETCH_VERSION = 1, 11
METADATA, METADATA_VERSION = 3, 8
_SIZE = struct.Struct(">i")
_US = pa.timestamp("us", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")
# Kafka error codes
NONE, OFFSET_OUT_OF_RANGE = 0, 1
RETRIABLE = {3, 5, 6, 56, 74, 75}  # unknown partition, no leader, not leader, storage, fenced/unknown epoch


class RetryableError(Exception):
    """The leader moved, is unknown for now, or the connection broke: look it up again and retry."""


@dataclass(frozen=True, slots=True)
class NativeSettings:
    bootstrap: tuple[tuple[str, int], ...]
    client_id: str
    partition_max_bytes: int
    max_wait_ms: int
    timeout_s: float

    @classmethod
    def of(cls, config: dict[str, Any]) -> NativeSettings:
        return cls(
            _addresses(str(config["bootstrap.servers"])),
            str(config.get("client.id", "herd-spark")),
            int(config.get("max.partition.fetch.bytes", 8 * 1024 * 1024)),
            int(config.get("fetch.wait.max.ms", 100)),
            int(config.get("socket.timeout.ms", 60_000)) / 1000,
        )


def _addresses(servers: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in servers.split(","):
        item = item.strip().rsplit("://", 1)[-1]
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]") or "localhost", int(port)))
    return tuple(out)


class Connection:
    """One blocking Kafka connection; requests go one at a time."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self._correlation = 0

    def request(self, api_key: int, version: int, request: Any) -> Any:
        self._correlation += 1
        self.sock.sendall(encode_request(request, api_key, version, self._correlation, self.client_id))
        return decode_response(self._frame(), api_key, version)

    def _frame(self) -> memoryview:
        (size,) = _SIZE.unpack(self._exactly(4))
        return memoryview(self._exactly(size)).toreadonly()  # kio reads read-only buffers; no copy

    def _exactly(self, size: int) -> bytearray:
        data = bytearray(size)
        view, got = memoryview(data), 0
        while got < size:
            n = self.sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("the broker closed the connection")
            got += n
        return data

    def close(self) -> None:
        self.sock.close()


class Cluster:
    """Brokers and partition leaders learnt from Metadata, with one connection per broker."""

    def __init__(self, settings: NativeSettings) -> None:
        self.settings = settings
        self._connections: dict[tuple[str, int], Connection] = {}
        self._leaders: dict[tuple[str, int], tuple[str, int]] = {}

    def leader(self, topic: str, partition: int) -> Connection:
        address = self._leaders.get((topic, partition))
        if address is None:
            address = self._leaders[(topic, partition)] = self._lookup(topic, partition)
        return self._connection(address)

    def forget(self, topic: str, partition: int) -> None:
        address = self._leaders.pop((topic, partition), None)
        connection = self._connections.pop(address, None) if address else None
        if connection is not None:
            connection.close()

    def close(self) -> None:
        while self._connections:
            self._connections.popitem()[1].close()
        self._leaders.clear()

    def _connection(self, address: tuple[str, int]) -> Connection:
        connection = self._connections.get(address)
        if connection is None:
            s = self.settings
            connection = self._connections[address] = Connection(*address, s.client_id, s.timeout_s)
        return connection

    def _lookup(self, topic: str, partition: int) -> tuple[str, int]:
        b = request_builder(METADATA, METADATA_VERSION)
        request = b.request(
            topics=(b("MetadataRequestTopic", name=topic),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        failures = []
        for address in self.settings.bootstrap:
            try:
                answer = self._connection(address).request(METADATA, METADATA_VERSION, request)
            except OSError as e:
                self._connections.pop(address, None)
                failures.append(f"{address[0]}:{address[1]}: {e}")
                continue
            return _leader_address(answer, topic, partition)
        raise RetryableError(f"no bootstrap server answered Metadata ({'; '.join(failures)})")


def _leader_address(answer: Any, topic: str, partition: int) -> tuple[str, int]:
    brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
    for t in answer.topics:
        if t.name != topic:
            continue
        for p in t.partitions:
            if p.partition_index == partition and p.error_code == NONE and p.leader_id in brokers:
                return brokers[p.leader_id]
    raise RetryableError(f"no leader known for {topic}-{partition}")


_CLUSTERS: dict[NativeSettings, Cluster] = {}


def close_clusters() -> None:
    while _CLUSTERS:
        _CLUSTERS.popitem()[1].close()


def _cluster(settings: NativeSettings) -> Cluster:
    cluster = _CLUSTERS.get(settings)
    if cluster is None:
        cluster = _CLUSTERS[settings] = Cluster(settings)
    return cluster


@dataclass(frozen=True, slots=True)
class Answer:
    error: int
    high_watermark: int
    log_start: int
    records: bytes


def fetch(cluster: Cluster, topic: str, partition: int, offset: int) -> Answer:
    """One Fetch of one partition from `offset`; raises RetryableError."""
    s = cluster.settings
    b = request_builder(FETCH, FETCH_VERSION)
    wanted = b(
        "FetchPartition",
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        log_start_offset=-1,
        partition_max_bytes=s.partition_max_bytes,
    )
    request = b.request(
        replica_id=-1,
        max_wait=s.max_wait_ms,
        min_bytes=1,
        max_bytes=s.partition_max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(b("FetchTopic", topic=topic, partitions=(wanted,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    try:
        response = cluster.leader(topic, partition).request(FETCH, FETCH_VERSION, request)
    except OSError as e:
        cluster.forget(topic, partition)
        raise RetryableError(f"connection to the leader of {topic}-{partition} failed: {e}") from e
    data = response.responses[0].partitions[0]
    error = int(data.error_code)
    if error in RETRIABLE:
        cluster.forget(topic, partition)
        raise RetryableError(f"{topic}-{partition}: {data.error_code.name}")
    return Answer(error, data.high_watermark, data.log_start_offset, data.records or b"")


def read_columns(
    settings: NativeSettings,
    rng: OffsetRange,
    *,
    fail_on_data_loss: bool,
    with_headers: bool,
    poll_timeout_ms: int,
) -> Iterator[Columns]:
    """The records of `rng`, answer by answer; raises HerdDataLossError, HerdBrokerError or TimeoutError."""
    cluster = _cluster(settings)
    position = rng.start
    deadline = time.monotonic() + poll_timeout_ms / 1000
    while position < rng.end:
        try:
            answer = fetch(cluster, rng.topic, rng.partition, position)
        except RetryableError as e:
            _wait_or_give_up(deadline, rng, position, str(e), poll_timeout_ms)
            continue
        if answer.error == OFFSET_OUT_OF_RANGE:
            position = _out_of_range(answer, rng, position, fail_on_data_loss)
            continue
        if answer.error != NONE:
            raise HerdBrokerError(f"herd source: fetching {_name(rng)} at {position} failed with error {answer.error}")
        headers, after = complete_batches(answer.records)
        if not headers:
            position = _nothing_fetched(answer, rng, position, deadline, fail_on_data_loss, poll_timeout_ms)
            continue
        deadline = time.monotonic() + poll_timeout_ms / 1000
        columns = decode(answer.records, headers, with_headers)
        position = after
        yield columns


def _wait_or_give_up(deadline: float, rng: OffsetRange, position: int, why: str, poll_timeout_ms: int) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(
            f"herd source: reading {_name(rng)} at {position} made no progress within "
            f"kafkaConsumer.pollTimeoutMs={poll_timeout_ms}: {why}"
        )
    log.info("herd source: %s; retrying", why)
    time.sleep(0.1)


def _out_of_range(answer: Answer, rng: OffsetRange, position: int, fail: bool) -> int:
    what = (
        f"offset {position} of {rng.topic}-{rng.partition} is out of range [{answer.log_start}, "
        f"{answer.high_watermark})"
    )
    if fail:
        raise HerdDataLossError(what)
    log.warning("herd source: %s; failOnDataLoss=false: carrying on", what)
    return answer.log_start if 0 <= answer.log_start and position < answer.log_start else rng.end


def _nothing_fetched(
    answer: Answer, rng: OffsetRange, position: int, deadline: float, fail: bool, poll_timeout_ms: int
) -> int:
    """No whole batch: the range ends in a hole at the end of the log, or the log ends before it."""
    if answer.high_watermark >= rng.end and position >= answer.high_watermark:
        return rng.end
    if answer.high_watermark <= position:
        if fail:
            raise HerdDataLossError(
                f"{_name(rng)} ends at offset {answer.high_watermark}, before the end "
                f"{rng.end} of the range this batch must read"
            )
        return rng.end
    _wait_or_give_up(deadline, rng, position, "an empty answer below the high watermark", poll_timeout_ms)
    return position


def _name(rng: OffsetRange) -> str:
    return f"{rng.topic}-{rng.partition} [{rng.start}, {rng.end})"


def to_record_batches(columns: Columns, rng: OffsetRange, schema: pa.Schema, max_rows: int) -> Iterator[pa.RecordBatch]:
    """Spark's Kafka source schema, keeping only offsets in [rng.start, rng.end)."""
    start, end = pa.scalar(rng.start, pa.int64()), pa.scalar(rng.end, pa.int64())  # typed: see columnar._i64
    keep = pc.and_(pc.greater_equal(columns.offsets, start), pc.less(columns.offsets, end))
    n = len(columns)
    arrays = [
        columns.keys,
        columns.values,
        pa.repeat(pa.scalar(rng.topic, pa.string()), n),
        pa.repeat(pa.scalar(rng.partition, pa.int32()), n),
        columns.offsets,
        columns.timestamps_ms.cast(_MS).cast(_US),
        columns.timestamp_types,
    ]
    if columns.headers is not None:
        arrays.append(pa.array(columns.headers, schema.field("headers").type))
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    if not pc.all(keep).as_py():
        batch = batch.filter(keep)
    for start in range(0, batch.num_rows, max_rows):
        yield batch.slice(start, max_rows)
