"""Options of the `herd` source and sink, parsed and checked the way Spark's Kafka connector checks them.

Spark hands a data source its options with lower-cased keys and string values. `SourceOptions.parse` and
`SinkOptions.parse` turn them into frozen dataclasses, or raise `HerdOptionError` with a message naming the
option and what is wrong with it, so a bad option fails at `.load()` or when the query starts instead of
inside a task. Names and defaults follow Spark's Kafka source (`kafka.bootstrap.servers`, `subscribe`,
`subscribePattern`, `assign`, `startingOffsets`, `endingOffsets`, `failOnDataLoss`, `includeHeaders`,
`minPartitions`, `maxRecordsPerPartition`, `maxOffsetsPerTrigger`, `minOffsetsPerTrigger`, `maxTriggerDelay`,
`kafka.group.id`, `groupIdPrefix`, `kafkaConsumer.pollTimeoutMs`, timestamps); every other `kafka.*` option
is handed to the librdkafka client with the prefix stripped. Options herd adds: `decode` (only
`consumer_offsets`, see consumer_offsets.py) and `kafka.group.id` meaning "commit processed offsets to this
group" (Spark's Kafka source never commits).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from herd.spark.errors import HerdOptionError
from herd.spark.offsets import OffsetSpec, TopicPartition, parse_offsets_json

KAFKA_PREFIX = "kafka."

# Client settings Spark's Kafka connector refuses because the connector owns them; herd refuses the same.
_SOURCE_FORBIDDEN = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; cast or decode the 'key' column",
    "value.deserializer": "values are always read as bytes; cast or decode the 'value' column",
    "enable.auto.commit": "the source tracks offsets in its checkpoint (use kafka.group.id to publish them)",
    "interceptor.classes": "interceptors are not supported",
}
_SINK_FORBIDDEN = {
    "key.serializer": "write the 'key' column as string or binary",
    "value.serializer": "write the 'value' column as string or binary",
}
_DURATION = re.compile(r"^\s*(\d+)\s*(us|ms|s|m|min|h|d)?\s*$")
_DURATION_MS = {
    "us": 0.001,
    "ms": 1,
    None: 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
DECODERS = ("consumer_offsets",)
# A pattern never matches these (Kafka's exclude.internal.topics); name them in 'subscribe' to read them.
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which partitions a query reads: a topic list, a regular expression, or explicit partitions."""

    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return topic not in KAFKA_INTERNAL_TOPICS and re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={sorted(self.assigned)}"


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    group_id: str | None = None
    group_id_prefix: str = "spark-kafka-source"
    poll_timeout_ms: int = 120_000
    decode: str | None = None
    batch_rows: int = 32_768
    fetcher: str = "native"

    @property
    def bootstrap(self) -> str:
        return self.client["bootstrap.servers"]

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
        """Raises HerdOptionError for a missing, malformed or contradictory option; streaming=None
        (the query kind is not known yet) skips the rules that depend on it."""
        opts = {k.lower(): str(v) for k, v in options.items()}
        client = client_config(opts, _SOURCE_FORBIDDEN, "source")
        group_id = client.pop("group.id", None)
        starting, ending = _offset_specs(opts, streaming)
        return cls(
            client=client,
            subscription=_subscription(opts),
            starting=starting,
            ending=ending,
            fail_on_data_loss=_bool(opts, "failondataloss", True),
            include_headers=_bool(opts, "includeheaders", False),
            min_partitions=_positive(opts, "minpartitions"),
            max_records_per_partition=_positive(opts, "maxrecordsperpartition"),
            max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger"),
            min_offsets_per_trigger=_positive(opts, "minoffsetspertrigger"),
            max_trigger_delay_ms=_duration_ms(opts, "maxtriggerdelay", "15m"),
            group_id=group_id,
            group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
            poll_timeout_ms=_positive(opts, "kafkaconsumer.polltimeoutms") or 120_000,
            decode=_decode(opts),
            batch_rows=_positive(opts, "arrowbatchrows") or 32_768,
            fetcher=_fetcher(opts, client),
        )


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client: dict[str, str]
    topic: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Raises HerdOptionError for a missing or refused option."""
        opts = {k.lower(): str(v) for k, v in options.items()}
        client = client_config(opts, _SINK_FORBIDDEN, "sink")
        topic = opts.get("topic")
        if topic is not None and not topic.strip():
            raise HerdOptionError("herd sink: option 'topic' is empty")
        return cls(client=client, topic=topic)


def client_config(opts: Mapping[str, str], forbidden: Mapping[str, str], role: str) -> dict[str, str]:
    """`kafka.*` options without the prefix; raises HerdOptionError without kafka.bootstrap.servers."""
    client = {k[len(KAFKA_PREFIX) :]: v for k, v in opts.items() if k.startswith(KAFKA_PREFIX)}
    if not client.get("bootstrap.servers", "").strip():
        raise HerdOptionError(
            f"herd {role}: option 'kafka.bootstrap.servers' must be specified "
            "(host:port of the herd broker, as for format('kafka'))"
        )
    for key, why in forbidden.items():
        if key in client:
            raise HerdOptionError(f"herd {role}: Kafka option 'kafka.{key}' is not supported: {why}")
    return client


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(given) != 1:
        what = "none was given" if not given else f"got {', '.join(given)}"
        raise HerdOptionError(
            "herd source: exactly one of the options 'subscribe', 'subscribePattern', "
            f"'assign' must be specified ({what})"
        )
    kind, value = given[0], opts[given[0]]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise HerdOptionError(f"herd source: no topics to subscribe to in 'subscribe'={value!r}")
        return Subscription("subscribe", topics=tuple(sorted(set(topics))))
    if kind == "subscribepattern":
        return Subscription("subscribePattern", pattern=_pattern(value))
    return Subscription("assign", assigned=_assigned(value))


def _pattern(value: str) -> str:
    if not value.strip():
        raise HerdOptionError("herd source: 'subscribePattern' is empty")
    try:
        re.compile(value)
    except re.error as e:
        raise HerdOptionError(f"herd source: 'subscribePattern'={value!r} is not a regular expression: {e}") from e
    return value


def _assigned(value: str) -> tuple[TopicPartition, ...]:
    example = 'expected JSON like {"topicA":[0,1],"topicB":[0]}'
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as e:
        raise HerdOptionError(f"herd source: 'assign' is not valid JSON ({e.msg}); {example}") from e
    if not isinstance(parsed, dict) or not parsed:
        raise HerdOptionError(f"herd source: 'assign'={value!r}: {example}")
    tps = set()
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and p >= 0 for p in parts):
            raise HerdOptionError(f"herd source: 'assign' topic {topic!r} needs a list of partitions; {example}")
        tps.update((topic, p) for p in parts)
    return tuple(sorted(tps))


def _offset_specs(opts: Mapping[str, str], streaming: bool | None) -> tuple[OffsetSpec, OffsetSpec | None]:
    """streaming=None (at `.load()`, before Spark says which kind of query it is) checks only the syntax."""
    starting = _spec(opts, "starting", "latest" if streaming else "earliest")
    ending_given = any(k in opts for k in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp"))
    if streaming and ending_given:
        raise HerdOptionError(
            "herd source: 'endingOffsets' is only valid for batch queries (spark.read), not for streams"
        )
    if streaming is None:
        return starting, _spec(opts, "ending", "latest") if ending_given else None
    if streaming:
        return starting, None
    ending = _spec(opts, "ending", "latest")
    if starting.kind == "latest" or -1 in starting.offsets.values():
        raise HerdOptionError("herd source: 'startingOffsets' cannot be latest (-1) for batch queries")
    if ending.kind == "earliest" or -2 in ending.offsets.values():
        raise HerdOptionError("herd source: 'endingOffsets' cannot be earliest (-2) for batch queries")
    return starting, ending


def _spec(opts: Mapping[str, str], which: str, default: str) -> OffsetSpec:
    """startingTimestamp > startingOffsetsByTimestamp > startingOffsets, as Spark ranks them."""
    name = f"{which}Offsets"
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise HerdOptionError("herd source: 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'")
    if f"{which}timestamp" in opts:
        ts = _int(opts, f"{which}timestamp")
        return OffsetSpec("timestamp", timestamp=ts, strategy=strategy)
    if f"{which}offsetsbytimestamp" in opts:
        stamps = parse_offsets_json(opts[f"{which}offsetsbytimestamp"], f"{name}ByTimestamp", allow_negative=False)
        return OffsetSpec("timestamps", offsets=stamps, strategy=strategy)
    value = opts.get(f"{which}offsets", default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())
    return OffsetSpec("json", offsets=parse_offsets_json(value, name, allow_negative=True))


def _decode(opts: Mapping[str, str]) -> str | None:
    value = opts.get("decode")
    if value is None:
        return None
    if value.lower() not in DECODERS:
        raise HerdOptionError(f"herd source: 'decode'={value!r} is unknown (known: {', '.join(DECODERS)})")
    return value.lower()


def _fetcher(opts: Mapping[str, str], client: Mapping[str, str]) -> str:
    """`native` (Fetch on a plain socket, columnar decoding) unless the connection needs what only
    librdkafka does here: TLS or SASL, or read_committed."""
    value = opts.get("fetcher", "auto").lower()
    if value not in ("auto", "native", "librdkafka"):
        raise HerdOptionError(f"herd source: 'fetcher'={value!r} must be auto, native or librdkafka")
    needs = []
    if client.get("security.protocol", "plaintext").lower() != "plaintext":
        needs.append(f"kafka.security.protocol={client['security.protocol']}")
    if client.get("isolation.level", "read_uncommitted").lower() == "read_committed":
        needs.append("kafka.isolation.level=read_committed")
    if value == "native" and needs:
        raise HerdOptionError(f"herd source: fetcher=native cannot do {', '.join(needs)}; use fetcher=librdkafka")
    return "librdkafka" if value == "librdkafka" or needs else "native"


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    value = opts.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise HerdOptionError(f"herd source: option '{key}' must be true or false, got {value!r}")
    return value.strip().lower() == "true"


def _int(opts: Mapping[str, str], key: str) -> int:
    try:
        return int(opts[key])
    except ValueError as e:
        raise HerdOptionError(f"herd source: option '{key}' must be an integer, got {opts[key]!r}") from e


def _positive(opts: Mapping[str, str], key: str) -> int | None:
    if key not in opts:
        return None
    value = _int(opts, key)
    if value <= 0:
        raise HerdOptionError(f"herd source: option '{key}' must be positive, got {value}")
    return value


def _duration_ms(opts: Mapping[str, str], key: str, default: str) -> int:
    """Spark's time strings: a number with an optional unit us, ms, s, m, min, h or d (ms without one)."""
    value = opts.get(key, default)
    match = _DURATION.match(value.lower())
    if match is None:
        raise HerdOptionError(f"herd source: option '{key}'={value!r} is not a duration such as '30s' or '15m'")
    return int(int(match.group(1)) * _DURATION_MS[match.group(2)])
