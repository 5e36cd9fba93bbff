"""Prometheus metrics of a node, served as `GET /metrics` on its HTTP listener (herd.http.listener).

Scrape it with any Prometheus (text format 0.0.4, or OpenMetrics when the scraper asks for it in Accept):

    herd serve --override herd.http.listener=0.0.0.0:8090      # then http://HOST:8090/metrics

The group coordinator's metrics follow Kafka's `group-coordinator-metrics` (apache/kafka group-coordinator/src/
main/java/org/apache/kafka/coordinator/group/metrics/GroupCoordinatorMetrics.java and
GroupCoordinatorRuntimeMetrics.java): Kafka's `group-count`, `classic-group-count`, `offset-count`,
`offset-commit-count`, `group-completed-rebalance-count`, `num-partitions` and `partition-load-time-*` become
herd_group_coordinator_group_count and so on (dashes as underscores, Prometheus's `_total` on counters, times in
seconds and as histograms rather than max/avg over a window). What Kafka has no metric for, herd adds: rebalances
by cause and the durations of their phases, heartbeats by answer, commit and fsync latency, and consumer lag per
group and partition, which Kafka leaves to an exporter (kafka-lag-exporter, Burrow).

The families, with their labels (a counter's samples end in _total, a histogram's in _bucket/_sum/_count):

    group coordinator (Kafka's group-coordinator-metrics, and herd's additions)
    herd_group_coordinator_group_count{protocol}              gauge      groups coordinated here: classic, consumer,
                                                                         share
    herd_group_coordinator_consumer_group_count{state}        gauge      KIP-848 consumer groups by state (Empty,
                                                                         Assigning, Reconciling, Stable, Dead)
    herd_group_coordinator_share_group_count{state}           gauge      KIP-932 share groups by state (Empty, Stable)
    herd_group_coordinator_classic_group_count{state, protocol_type}  gauge   groups by state (Empty,
                                                                         PreparingRebalance, CompletingRebalance,
                                                                         Stable, Dead) and protocol type
    herd_group_coordinator_offset_count                       gauge      committed offsets held
    herd_group_coordinator_num_partitions{state}              gauge      __consumer_offsets partitions hosted here:
                                                                         loading, active, failed, unloading
    herd_group_coordinator_partition_load_time_seconds        histogram  loading one partition (start-up, a move)
    herd_group_coordinator_rebalances{cause}                  counter    rebalances started
    herd_group_coordinator_completed_rebalances{cause, outcome}  counter rebalances ended: stable, empty, superseded
    herd_group_coordinator_rebalance_join_seconds             histogram join phases (first JoinGroup to its end)
    herd_group_coordinator_rebalance_sync_seconds             histogram sync phases (join end to Stable)
                                                                         (these four: classic groups)
    herd_group_coordinator_consumer_group_rebalances{cause}   counter    consumer group epoch bumps (history.py's
                                                                         causes; Kafka's consumer-group-rebalance-count)
    herd_group_coordinator_consumer_group_completed_rebalances{cause, outcome}  counter  their ends
    herd_group_coordinator_consumer_group_reconcile_seconds   histogram new target assignment to every member
                                                                         reconciled
    herd_group_coordinator_heartbeats                         counter    Heartbeat requests
    herd_group_coordinator_heartbeat_errors{error}            counter    heartbeats answered with an error
                                                                         (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID..)
    herd_group_coordinator_offset_commits                     counter    offsets committed (partitions; OffsetCommit and
                                                                         TxnOffsetCommit, as Kafka's OffsetCommits)
    herd_group_coordinator_offset_commit_latency_seconds      histogram OffsetCommit: request read to durable answer
    herd_group_coordinator_fsync_latency_seconds              histogram one write round of the coordinator: appends
                                                                         and fsync (cluster mode: the PostgreSQL
                                                                         commit)
    share groups (KIP-932: the share partitions led here; Kafka's share-group metrics, herd's names)
    herd_share_partitions                                     gauge      share partitions led here
    herd_share_sessions                                       gauge      share sessions open here
    herd_share_partition_records{state}                       gauge      records in flight: available, acquired,
                                                                         acknowledged, archived
    herd_share_acknowledgements{type}                         counter    records acknowledged: accept, release,
                                                                         reject, gap, renew
    herd_share_records_acquired                               counter    records handed to share consumers
    herd_share_lock_expirations                               counter    acquired records whose lock ran out
    herd_share_records_released_on_leave                      counter    records given back when a session ended
    herd_share_coordinator_writes                             counter    share-state batches written here (Kafka's
                                                                         share-coordinator write-total)
    herd_share_coordinator_fsyncs                             counter    durable writes of __share_group_state
                                                                         partitions hosted here (fsyncs)
    herd_share_coordinator_write_latency_seconds              histogram  one write round of the share coordinator
                                                                         (Kafka's write-latency)
    consumer lag (of the groups coordinated here; kafka-lag-exporter's kafka_consumergroup_group_* in Kafka)
    herd_consumer_group_lag{group, topic, partition}          gauge      high watermark - committed offset
    herd_consumer_group_offset{group, topic, partition}       gauge      committed offset
    herd_consumer_group_sum_lag{group}                        gauge      the group's lag over its partitions
    requests, topics, connections (Kafka's RequestMetrics, BrokerTopicMetrics, socket-server-metrics)
    herd_requests{api}                                        counter    requests by Kafka API name (JoinGroup, ...)
    herd_request_latency_seconds{api}                         histogram request read to answer queued
    herd_topic_bytes_in{topic}                                counter    record bytes produced
    herd_topic_messages_in{topic}                             counter    offsets appended by Produce
    herd_topic_bytes_out{topic}                               counter    record bytes fetched
    herd_connections                                          gauge      open Kafka connections
    herd_connections_accepted / _closed / _refused            counter    accepted (within the quotas), closed,
                                                                         refused (max.connections[.per.ip])
    herd_connections_expired                                  counter    closed at the end of their SASL session
                                                                         (connections.max.reauth.ms; Kafka's
                                                                         expired-connections-killed-count)
    herd_sasl_authentications{result, reauthentication}       counter    SASL exchanges that succeeded or failed,
                                                                         first ones and re-authentications (Kafka's
                                                                         [failed|successful]-[re]authentication-total)
    the cap, and the process
    herd_metrics_series_dropped{family}                       gauge      series left out of this scrape by the cap
    herd_metrics_dropped_updates{family}                      counter    per-topic updates dropped by the cap
    process_*                                                            CPU seconds, memory, file descriptors
                                                                         (prometheus_client's ProcessCollector)

Latency histograms have buckets at powers of four of 1.024 us (1.02 us, 4.10 us, 16.4 us, ..., 17.2 s, +Inf):
the hot paths count by `int.bit_length()` of a nanosecond duration, the cheapest bucketing there is
(herd.runtime.stats). A request's latency runs from the moment its connection started handling the socket read
that held it to the moment its answer was queued: a request answered at once counts until the end of that pass
over the read's frames (their answers leave together after it, so one pipelined behind others includes their
handling), a parked one (a JoinGroup waiting for the rebalance, a Fetch long-polling for data, a commit for
its fsync) until its answer is known.
Rebalance metrics come from the coordinator's rebalance history (the observer of herd.coordinator.history, set on
every shard as the runtime creates it): causes are its stable names (member-join, member-leave, session-timeout,
coordinator-moved, ...), outcomes "stable", "empty" or "superseded", the phase durations its join_ms and sync_ms
(measured by the core's clock). Counters start at 0 when the node starts and count what this node coordinated.

Cardinality is bounded by `herd.metrics.max.series` (default 10,000), per metric family:
- per topic: at most that many topics are counted; an update for another topic is dropped and counted in
  herd_metrics_dropped_updates_total{family="topic"}; the series of a deleted topic go at the next scrape, which
  makes room;
- consumer lag: whole groups in group-id order while their partitions add up to at most that many (group, topic,
  partition) series; the groups and partitions left out are not even read, and are counted in
  herd_metrics_series_dropped{family="consumer_group_lag" (partitions) and "consumer_group_sum_lag" (groups)};
- herd_group_coordinator_classic_group_count: at most that many (state, protocol type) sets (the protocol type is
  the client's string), the rest counted in herd_metrics_series_dropped{family="classic_group_count"}.
`api`, `cause`, `outcome`, `state` and `error` take their values from fixed lists. A lag scrape costs one query in
cluster mode (herd.server.lag, cached 1 s) and is otherwise computed from memory.

Cost: the hot paths only bump Python ints in lists (per pass over a socket read: one clock reading, and one bucket
and one sum per API answered in it; per heartbeat error, commit, produced or fetched partition: one counter);
everything else (groups by state, lag) is computed when scraped, by a custom collector in a registry of this
server's own (tests run many brokers in one process; prometheus_client's global registry is not used). docs/
benchmarks.md ("Metrics overhead") has the measured cost on the heartbeat and commit paths.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from herd.runtime.shares import records_by_state
from herd.runtime.stats import BUCKETS, CoordinatorStats, Histogram, cumulative
from herd.server.lag import PartitionLag, all_lags, totals

API_BITS = 6  # a request's bucket is latency[(api_key << API_BITS) + bit length]
assert 1 << API_BITS == BUCKETS
HEARTBEAT, OFFSET_COMMIT = 12, 8
PER_TOPIC = 3  # bytes in, messages in, bytes out
# Label values a client chooses (group ids, protocol types) longer than this are left out and counted as dropped:
# the series cap bounds how many series there are, this how long each line is
MAX_LABEL_CHARS = 256
BYTES_IN, MESSAGES_IN, BYTES_OUT = range(PER_TOPIC)


class ServerCounters:
    """What the hot paths of one broker bump (`Broker.metrics`); read at scrape time."""

    __slots__ = (
        "latency",
        "latency_ns",
        "accepted",
        "closed",
        "heartbeat_errors",
        "offset_commits",
        "topics",
        "max_series",
        "dropped_updates",
        "sasl",
        "expired",
    )

    def __init__(self, max_series: int, api_keys: int = 128) -> None:
        self.latency = [0] * (api_keys << API_BITS)  # request counts by API key and latency bit length
        self.latency_ns = [0] * api_keys  # the sum of the latencies by API key
        self.accepted = 0  # connections
        self.closed = 0
        self.heartbeat_errors: dict[int, int] = {}  # by error code
        self.offset_commits = 0  # partitions committed
        self.topics: dict[str, list[int]] = {}  # topic -> [bytes in, messages in, bytes out]
        self.max_series = max_series
        self.dropped_updates = 0
        # SASL exchanges: [succeeded, failed, re-authentications succeeded, re-authentications failed]
        self.sasl = [0, 0, 0, 0]
        self.expired = 0  # connections closed when their SASL session ended

    def topic(self, name: str) -> list[int] | None:
        """The counters of `name`, or None when herd.metrics.max.series topics are counted already."""
        counts = self.topics.get(name)
        if counts is None:
            if len(self.topics) >= self.max_series:
                self.dropped_updates += 1
                return None
            counts = self.topics[name] = [0] * PER_TOPIC
        return counts


class Node(Protocol):
    """What the exporter uses of herd.server.server.Server (which imports it through the HTTP listener)."""

    broker: Any
    connections: Any
    quotas: Any


class Snapshot:
    """What a scrape reads of the live state, copied on the event loop (lists of ints, counts, the lag just
    computed): the families are then built and encoded in a worker thread from this alone, so the loop is held
    only for the copy, not for prometheus_client's text encoding (about 25 us a series)."""

    def __init__(self, node: Node, lags: dict[str, list[PartitionLag]], lag_totals: tuple[int, int]) -> None:
        broker = node.broker
        counters: ServerCounters = broker.metrics
        cluster = broker.cluster
        if cluster is not None:  # the series of deleted topics go, making room under the cap
            for name in [name for name in counters.topics if cluster.get(name) is None]:
                del counters.topics[name]
        self.latency = list(counters.latency)
        self.latency_ns = list(counters.latency_ns)
        self.api_names = {key: _kafka_name(spec.name) for key, spec in broker.apis.items()}
        self.heartbeat_errors = dict(counters.heartbeat_errors)
        self.offset_commits = counters.offset_commits
        self.topics = {name: list(counts) for name, counts in counters.topics.items()}
        self.dropped_updates = counters.dropped_updates
        self.max_series = counters.max_series
        self.connections = (len(node.connections), counters.accepted, counters.closed, node.quotas.refused)
        self.sasl = (list(counters.sasl), counters.expired)
        runtime = broker.coordinator
        shards = list(runtime.shards.values()) if runtime is not None else []
        self.partitions: dict[str, int] = {}
        for shard in shards:
            self.partitions[shard.state.value] = self.partitions.get(shard.state.value, 0) + 1
        self.groups: dict[tuple[str, str], int] = {}  # (state, protocol type) -> groups
        self.consumer_groups: dict[str, int] = {}  # KIP-848 consumer groups by state
        self.share_groups: dict[str, int] = {}  # KIP-932 share groups by state
        self.offsets = 0
        for shard in shards:
            if shard.state.value == "active":
                for group in shard.shard.groups():
                    key = (group.state.value, group.protocol_type or "")
                    self.groups[key] = self.groups.get(key, 0) + 1
                for consumer_group in shard.shard.consumer_groups():
                    state = consumer_group.state.value
                    self.consumer_groups[state] = self.consumer_groups.get(state, 0) + 1
                for share_group in shard.shard.share_groups():
                    state = share_group.state.value
                    self.share_groups[state] = self.share_groups.get(state, 0) + 1
                self.offsets += shard.shard.size()[1]
        self.stats: CoordinatorStats | None = copy.deepcopy(runtime.stats) if runtime is not None else None
        shares = broker.shares
        self.share_counts = dict(shares.counts)
        self.share_partitions = 0
        self.share_records: dict[str, int] = {}  # records in flight by state, over the share partitions led here
        for _, share in shares.partitions():
            self.share_partitions += 1
            for name, n in records_by_state(share).items():
                self.share_records[name] = self.share_records.get(name, 0) + n
        self.share_sessions = len(broker.share_sessions)
        share_state = broker.share_state
        state_shards = list(share_state.shards.values()) if share_state is not None else []
        # (batches written, durable writes) of the __share_group_state partitions hosted here
        self.share_state_writes = (sum(s.writes for s in state_shards), sum(s.fsyncs for s in state_shards))
        self.share_state_rounds: Histogram | None = (
            copy.deepcopy(share_state.stats.flush_round) if share_state is not None else None
        )
        self.lags = lags
        self.lag_totals = lag_totals


class HerdCollector(Collector):
    """Builds every herd_* family from a `Snapshot` (set by `Exporter` for the time of one encoding; without one,
    it takes one itself, without the lag, which needs the loop)."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterator[Metric]:
        snapshot = self.snapshot or Snapshot(self._node, {}, (0, 0))
        dropped: dict[str, int] = {}  # series left out of this scrape by family
        yield from _requests(snapshot)
        yield from _coordinator(snapshot, dropped)
        yield from _shares(snapshot)
        yield from _topics(snapshot)
        yield from _connections(snapshot)
        yield from _lag(snapshot.lags, snapshot.lag_totals, dropped)
        family = GaugeMetricFamily(
            "herd_metrics_series_dropped",
            "Series left out of this scrape by herd.metrics.max.series, by metric family.",
            labels=["family"],
        )
        for name, count in sorted(dropped.items()):
            family.add_metric([name], count)
        yield family
        updates = CounterMetricFamily(
            "herd_metrics_dropped_updates",
            "Updates of per-topic counters dropped: their topic came when herd.metrics.max.series topics were counted.",
            labels=["family"],
        )
        updates.add_metric(["topic"], snapshot.dropped_updates)
        yield updates


class Exporter:
    """One node's registry (its own, not prometheus_client's global one) and its text."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = HerdCollector(node)
        self.registry.register(self.collector)
        ProcessCollector(registry=self.registry)
        self._encoding = threading.Lock()  # one encoding of the registry at a time (scrapes may overlap)
        # one scrape at a time: a burst of scrapers waits here (on the loop) instead of each computing the lag and
        # holding a thread of the default executor, which compaction and log moves need too
        self._scraping = asyncio.Lock()

    async def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition (body, content type) for a scraper that sent `accept`: the lag (a query in cluster mode)
        and the snapshot on the loop, the families and their text in a worker thread."""
        broker = self.node.broker
        encoder, content_type = choose_encoder(accept)
        async with self._scraping:
            lags = await all_lags(broker, broker.metrics.max_series)
            snapshot = Snapshot(self.node, lags, totals(broker))
            return await asyncio.to_thread(self._encode, encoder, snapshot), content_type

    def _encode(self, encoder: Callable[[CollectorRegistry], bytes], snapshot: Snapshot) -> bytes:
        with self._encoding:
            self.collector.snapshot = snapshot
            try:
                return encoder(self.registry)
            finally:
                self.collector.snapshot = None


def add_route(app: Any, node: Node) -> None:
    """GET /metrics on the node's aiohttp application (herd.server.http.make_app)."""
    from aiohttp import web  # imported by herd.server.http only, when the listener is set

    exporter = Exporter(node)

    async def metrics(request: web.Request) -> web.Response:
        body, content_type = await exporter.render(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    app.router.add_get("/metrics", metrics)


# -- families ------------------------------------------------------------------------------------------------------


def _histogram(name: str, doc: str, histogram: Histogram) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc)
    family.add_metric([], cumulative(histogram.buckets), histogram.sum_ns / 1e9)
    return family


def _requests(snapshot: Snapshot) -> Iterator[Metric]:
    total = CounterMetricFamily("herd_requests", "Requests handled, by Kafka API.", labels=["api"])
    latency = HistogramMetricFamily(
        "herd_request_latency_seconds", "From reading a request to queueing its answer.", labels=["api"]
    )
    heartbeats = commits = None
    for key, name in sorted(snapshot.api_names.items()):
        if key >= len(snapshot.latency_ns):
            continue
        buckets = cumulative(snapshot.latency, key << API_BITS)
        count = buckets[-1][1]
        if key == HEARTBEAT:
            heartbeats = count
        if key == OFFSET_COMMIT:
            commits = (buckets, snapshot.latency_ns[key])
        if count == 0:
            continue
        total.add_metric([name], count)
        latency.add_metric([name], buckets, snapshot.latency_ns[key] / 1e9)
    yield total
    yield latency
    yield CounterMetricFamily("herd_group_coordinator_heartbeats", "Heartbeat requests.", value=heartbeats or 0)
    errors = CounterMetricFamily(
        "herd_group_coordinator_heartbeat_errors", "Heartbeats answered with an error.", labels=["error"]
    )
    for code, count in sorted(snapshot.heartbeat_errors.items()):
        errors.add_metric([_error_name(code)], count)
    yield errors
    yield CounterMetricFamily(
        "herd_group_coordinator_offset_commits",
        "Offsets committed (partitions, OffsetCommit and TxnOffsetCommit).",
        value=snapshot.offset_commits,
    )
    if commits is not None:
        family = HistogramMetricFamily(
            "herd_group_coordinator_offset_commit_latency_seconds",
            "OffsetCommit: from reading the request to queueing its durable answer.",
        )
        family.add_metric([], commits[0], commits[1] / 1e9)
        yield family


def _shares(snapshot: Snapshot) -> Iterator[Metric]:
    yield GaugeMetricFamily("herd_share_partitions", "Share partitions led here.", value=snapshot.share_partitions)
    yield GaugeMetricFamily("herd_share_sessions", "Share sessions open here.", value=snapshot.share_sessions)
    records = GaugeMetricFamily(
        "herd_share_partition_records",
        "Records in flight in the share partitions led here, by state.",
        labels=["state"],
    )
    for state in ("available", "acquired", "acknowledged", "archived"):
        records.add_metric([state], snapshot.share_records.get(state, 0))
    yield records
    acknowledged = CounterMetricFamily(
        "herd_share_acknowledgements", "Records acknowledged by share consumers, by type.", labels=["type"]
    )
    for kind in ("accept", "release", "reject", "gap", "renew"):
        acknowledged.add_metric([kind], snapshot.share_counts[kind])
    yield acknowledged
    counts = snapshot.share_counts
    yield CounterMetricFamily(
        "herd_share_records_acquired", "Records handed to share consumers.", value=counts["acquired"]
    )
    yield CounterMetricFamily(
        "herd_share_lock_expirations", "Acquired records whose lock ran out.", value=counts["expired"]
    )
    yield CounterMetricFamily(
        "herd_share_records_released_on_leave",
        "Acquired records given back when their consumer's share session ended.",
        value=counts["released"],
    )
    writes, durable = snapshot.share_state_writes
    yield CounterMetricFamily(
        "herd_share_coordinator_writes",
        "Batches of share state (ShareUpdate and ShareSnapshot records) written to the __share_group_state "
        "partitions hosted here.",
        value=writes,
    )
    yield CounterMetricFamily(
        "herd_share_coordinator_fsyncs",
        "Durable writes of the __share_group_state partitions hosted here: an fsync of one partition's log each "
        "(cluster mode: its part of a PostgreSQL commit).",
        value=durable,
    )
    if snapshot.share_state_rounds is not None:
        yield _histogram(
            "herd_share_coordinator_write_latency_seconds",
            "Write rounds of the share coordinator: appends and fsyncs (cluster mode: the commit to PostgreSQL).",
            snapshot.share_state_rounds,
        )


def _kafka_name(name: str) -> str:
    """An API's name as Kafka's ApiKeys spells it (JoinGroup) from herd's module name (join_group)."""
    return "".join(word.capitalize() for word in name.split("_"))


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def _coordinator(snapshot: Snapshot, dropped: dict[str, int]) -> Iterator[Metric]:
    partitions = GaugeMetricFamily(
        "herd_group_coordinator_num_partitions",
        "__consumer_offsets partitions hosted here, by state.",
        labels=["state"],
    )
    for state in ("loading", "active", "failed", "unloading"):
        partitions.add_metric([state], snapshot.partitions.get(state, 0))
    yield partitions
    groups, max_series = snapshot.groups, snapshot.max_series
    count = GaugeMetricFamily(
        "herd_group_coordinator_group_count", "Groups coordinated here, by rebalance protocol.", labels=["protocol"]
    )
    count.add_metric(["classic"], sum(groups.values()))
    count.add_metric(["consumer"], sum(snapshot.consumer_groups.values()))
    count.add_metric(["share"], sum(snapshot.share_groups.values()))
    yield count
    share = GaugeMetricFamily(
        "herd_group_coordinator_share_group_count", "KIP-932 share groups coordinated here, by state.", labels=["state"]
    )
    for state in ("Empty", "Stable"):
        share.add_metric([state], snapshot.share_groups.get(state, 0))
    yield share
    consumer = GaugeMetricFamily(
        "herd_group_coordinator_consumer_group_count",
        "KIP-848 consumer groups coordinated here, by state.",
        labels=["state"],
    )
    for state in ("Empty", "Assigning", "Reconciling", "Stable", "Dead"):
        consumer.add_metric([state], snapshot.consumer_groups.get(state, 0))
    yield consumer
    classic = GaugeMetricFamily(
        "herd_group_coordinator_classic_group_count",
        "Groups coordinated here, by state and protocol type.",
        labels=["state", "protocol_type"],
    )
    kept = [(key, n) for key, n in sorted(groups.items()) if len(key[1]) <= MAX_LABEL_CHARS][:max_series]
    for (state, protocol_type), n in kept:
        classic.add_metric([state, protocol_type], n)
    dropped["classic_group_count"] = len(groups) - len(kept)
    yield classic
    yield GaugeMetricFamily("herd_group_coordinator_offset_count", "Committed offsets held.", value=snapshot.offsets)
    stats = snapshot.stats
    if stats is None:
        return
    yield _histogram(
        "herd_group_coordinator_partition_load_time_seconds",
        "Loading a __consumer_offsets partition.",
        stats.partition_load,
    )
    started = CounterMetricFamily(
        "herd_group_coordinator_rebalances", "Rebalances started, by cause.", labels=["cause"]
    )
    for cause, count in sorted(stats.rebalances_started.items()):
        started.add_metric([cause], count)
    yield started
    completed = CounterMetricFamily(
        "herd_group_coordinator_completed_rebalances",
        "Rebalances ended, by cause and outcome.",
        labels=["cause", "outcome"],
    )
    for (cause, outcome), count in sorted(stats.rebalances_completed.items()):
        completed.add_metric([cause, outcome], count)
    yield completed
    yield _histogram("herd_group_coordinator_rebalance_join_seconds", "Join phases of rebalances.", stats.join_phase)
    yield _histogram("herd_group_coordinator_rebalance_sync_seconds", "Sync phases of rebalances.", stats.sync_phase)
    started = CounterMetricFamily(
        "herd_group_coordinator_consumer_group_rebalances",
        "Consumer group epoch bumps (Kafka's consumer-group-rebalance-count), by cause.",
        labels=["cause"],
    )
    for cause, count in sorted(stats.consumer_rebalances_started.items()):
        started.add_metric([cause], count)
    yield started
    completed = CounterMetricFamily(
        "herd_group_coordinator_consumer_group_completed_rebalances",
        "Consumer group rebalances ended (stable: every member reconciled; empty; superseded), by cause and outcome.",
        labels=["cause", "outcome"],
    )
    for (cause, outcome), count in sorted(stats.consumer_rebalances_completed.items()):
        completed.add_metric([cause, outcome], count)
    yield completed
    yield _histogram(
        "herd_group_coordinator_consumer_group_reconcile_seconds",
        "Consumer group rebalances: from the new target assignment until every member reconciled to it.",
        stats.reconciliation,
    )
    yield _histogram(
        "herd_group_coordinator_fsync_latency_seconds",
        "Write rounds of the coordinator: appends and fsync (cluster mode: the commit to PostgreSQL).",
        stats.flush_round,
    )


def _topics(snapshot: Snapshot) -> Iterator[Metric]:
    families = [
        CounterMetricFamily("herd_topic_bytes_in", "Record bytes produced, by topic.", labels=["topic"]),
        CounterMetricFamily("herd_topic_messages_in", "Offsets appended by Produce, by topic.", labels=["topic"]),
        CounterMetricFamily("herd_topic_bytes_out", "Record bytes fetched, by topic.", labels=["topic"]),
    ]
    for name, counts in sorted(snapshot.topics.items()):
        for family, value in zip(families, counts, strict=True):
            family.add_metric([name], value)
    yield from families


def _connections(snapshot: Snapshot) -> Iterator[Metric]:
    open_, accepted, closed, refused = snapshot.connections
    yield GaugeMetricFamily("herd_connections", "Open Kafka connections.", value=open_)
    yield CounterMetricFamily(
        "herd_connections_accepted", "Kafka connections accepted (within the quotas).", value=accepted
    )
    yield CounterMetricFamily("herd_connections_closed", "Kafka connections closed.", value=closed)
    yield CounterMetricFamily(
        "herd_connections_refused",
        "Kafka connections refused by max.connections or max.connections.per.ip.",
        value=refused,
    )
    sasl, expired = snapshot.sasl
    yield CounterMetricFamily(
        "herd_connections_expired",
        "Kafka connections closed at the end of their SASL session (connections.max.reauth.ms).",
        value=expired,
    )
    family = CounterMetricFamily(
        "herd_sasl_authentications",
        "SASL exchanges, by result, first ones and re-authentications.",
        labels=["result", "reauthentication"],
    )
    for (result, reauthentication), count in zip(
        [("succeeded", "false"), ("failed", "false"), ("succeeded", "true"), ("failed", "true")], sasl, strict=True
    ):
        family.add_metric([result, reauthentication], count)
    yield family


def _lag(lags: dict[str, list[PartitionLag]], everything: tuple[int, int], dropped: dict[str, int]) -> Iterator[Metric]:
    """`lags` holds whole groups up to the cap (lag.all_lags); `everything` counts what there is."""
    labels = ["group", "topic", "partition"]
    lag = GaugeMetricFamily(
        "herd_consumer_group_lag",
        "High watermark less the committed offset, for the groups coordinated here.",
        labels=labels,
    )
    offset = GaugeMetricFamily(
        "herd_consumer_group_offset", "Committed offset, for the groups coordinated here.", labels=labels
    )
    total = GaugeMetricFamily(
        "herd_consumer_group_sum_lag",
        "The group's lag summed over its partitions (those whose end offset is known).",
        labels=["group"],
    )
    series = emitted = 0
    for group_id, partitions in lags.items():
        if len(group_id) > MAX_LABEL_CHARS:
            continue  # counted as dropped: a 32 KB group id must not make every scrape megabytes long
        emitted += 1
        total.add_metric([group_id], sum(p.lag for p in partitions if p.lag is not None))
        for p in partitions:
            series += 1
            values = [group_id, p.topic, str(p.partition)]
            offset.add_metric(values, p.committed)
            if p.lag is not None:
                lag.add_metric(values, p.lag)
    groups, offsets = everything
    dropped["consumer_group_lag"] = max(0, offsets - series)
    dropped["consumer_group_sum_lag"] = max(0, groups - emitted)
    yield lag
    yield offset
    yield total
