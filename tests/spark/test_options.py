"""Bad options fail at `.load()` or at query start with a message that says what to fix."""

from __future__ import annotations

import pytest
from sparkkit import create_topic, source

from herd.spark.errors import HerdOptionError
from herd.spark.options import SinkOptions, SourceOptions

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be specified (none"),
        ({"subscribe": "a", "assign": '{"a":[0]}'}, "exactly one of the options"),
        ({"subscribe": " , "}, "no topics to subscribe to"),
        ({"subscribePattern": "(unclosed"}, "is not a regular expression"),
        ({"assign": "{not json"}, "'assign' is not valid JSON"),
        ({"assign": '{"a":"0"}'}, "needs a list of partitions"),
        (
            {"subscribe": "a", "startingOffsets": '{"a":{"0":12'},
            "'startingOffsets' is neither 'earliest', 'latest' nor valid JSON",
        ),
        ({"subscribe": "a", "startingOffsets": '{"a":{"x":1}}'}, "partition 'x' is not a partition number"),
        (
            {"subscribe": "a", "startingOffsets": '{"a":{"0":-7}}'},
            "-7 is not an offset, -2 (earliest) or -1 (latest)",
        ),
        ({"subscribe": "a", "failOnDataLoss": "maybe"}, "'failondataloss' must be true or false"),
        ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "'maxoffsetspertrigger' must be positive"),
        ({"subscribe": "a", "maxTriggerDelay": "soon"}, "is not a duration"),
        (
            {"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
            "set the source option 'startingOffsets'",
        ),
        (
            {"subscribe": "a", "kafka.enable.auto.commit": "true"},
            "'kafka.enable.auto.commit' is not supported",
        ),
        ({"subscribe": "a", "decode": "avro"}, "'decode'='avro' is unknown"),
    ],
)
def test_source_options_are_checked(options: dict[str, str], message: str) -> None:
    with pytest.raises(HerdOptionError) as caught:
        SourceOptions.parse({**BOOTSTRAP, **options}, streaming=None)
    assert message in str(caught.value)


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(HerdOptionError, match="'kafka.bootstrap.servers' must be specified"):
        SourceOptions.parse({"subscribe": "a"}, streaming=True)
    with pytest.raises(HerdOptionError, match="'kafka.bootstrap.servers' must be specified"):
        SinkOptions.parse({"topic": "a"})


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"endingOffsets": "latest"}, True, "'endingOffsets' is only valid for batch queries"),
        ({"startingOffsets": "latest"}, False, "'startingOffsets' cannot be latest (-1) for batch queries"),
        ({"startingOffsets": '{"a":{"0":-1}}'}, False, "cannot be latest (-1)"),
        ({"endingOffsets": "earliest"}, False, "'endingOffsets' cannot be earliest (-2)"),
    ],
)
def test_batch_and_stream_rules(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(HerdOptionError) as caught:
        SourceOptions.parse({**BOOTSTRAP, "subscribe": "a", **options}, streaming=streaming)
    assert message in str(caught.value)


def test_defaults_follow_spark() -> None:
    stream = SourceOptions.parse({**BOOTSTRAP, "subscribe": "b,a", "kafka.client.id": "x"}, streaming=True)
    batch = SourceOptions.parse({**BOOTSTRAP, "subscribe": "a"}, streaming=False)
    assert (stream.starting.kind, stream.ending, batch.starting.kind, batch.ending.kind) == (
        "latest",
        None,
        "earliest",
        "latest",
    )
    assert stream.subscription.topics == ("a", "b") and stream.fail_on_data_loss and not stream.include_headers
    assert stream.client == {"bootstrap.servers": "127.0.0.1:9092", "client.id": "x"}
    assert stream.max_trigger_delay_ms == 15 * 60_000


# -- through Spark: the error reaches the user at .load() or when the query starts ------------------------


def _error_text(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value)


def test_load_without_subscription_fails_clearly(spark, broker) -> None:
    with pytest.raises(Exception) as caught:
        source(spark, broker.bootstrap)
    assert "exactly one of the options 'subscribe', 'subscribePattern', 'assign' must be specified" in _error_text(
        caught
    )


def test_load_of_unknown_topic_fails_with_fail_on_data_loss(spark, broker, topic_name) -> None:
    missing = topic_name("missing")
    with pytest.raises(Exception) as caught:
        source(spark, broker.bootstrap, stream=True, subscribe=missing)
    assert f"{missing} not found on {broker.bootstrap}" in _error_text(caught)
    assert "failOnDataLoss" in _error_text(caught)
    source(spark, broker.bootstrap, stream=True, subscribe=missing, failOnDataLoss="false")  # tolerated


def test_load_with_malformed_offsets_fails_clearly(spark, broker, topic_name) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 2)
    with pytest.raises(Exception) as caught:
        source(spark, broker.bootstrap, subscribe=topic, startingOffsets='{"%s":{"0":1,}}' % topic)
    assert "'startingOffsets' is neither 'earliest', 'latest' nor valid JSON" in _error_text(caught)
    with pytest.raises(Exception) as caught:
        source(spark, broker.bootstrap, subscribe=topic, startingOffsets='{"%s":{"0":1}}' % topic)
    assert f"names [{topic}-0] but the query reads [{topic}-0, {topic}-1]" in _error_text(caught)


def test_stream_with_ending_offsets_fails_at_start(spark, broker, topic_name, checkpoint) -> None:
    topic = create_topic(broker.bootstrap, topic_name(), 1)
    df = source(spark, broker.bootstrap, stream=True, subscribe=topic, endingOffsets="latest")
    with pytest.raises(Exception) as caught:
        df.writeStream.format("noop").option("checkpointLocation", checkpoint()).start().awaitTermination(60)
    assert "'endingOffsets' is only valid for batch queries" in _error_text(caught)


def test_sink_without_topic_fails_at_start(spark, broker) -> None:
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception) as caught:
        df.write.format("herd").mode("append").option("kafka.bootstrap.servers", broker.bootstrap).save()
    assert "topic option required when no 'topic' attribute is present" in _error_text(caught)
    with pytest.raises(Exception) as caught:
        (
            spark.createDataFrame([(1,)], "value int")
            .write.format("herd")
            .mode("append")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "t")
            .save()
        )
    assert "value attribute type must be string or binary, not int" in _error_text(caught)
