"""`HerdDataSource`: the `herd` format for spark.read, spark.readStream, df.write and df.writeStream.

Spark creates the data source with the query's options. `schema()` runs at `.load()`: it parses the
source options (HerdOptionError on a bad one) and, unless failOnDataLoss=false, asks the broker whether
the named topics or assigned partitions exist and whether explicit offsets name exactly the partitions
read, so those mistakes fail at `.load()` rather than in a task. `reader()` / `streamReader()` parse again
with the batch or streaming rules (endingOffsets only for batch, startingOffsets=latest only for
streams) when the query starts. `writer()` / `streamWriter()` check the sink options and the DataFrame's
columns. Classes are pickled by reference, so Spark's Python workers must be able to import `herd`.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from herd.spark.broker import BrokerView
from herd.spark.errors import HerdDataLossError, HerdOptionError
from herd.spark.options import SinkOptions, SourceOptions
from herd.spark.readers import HerdBatchReader, HerdStreamReader
from herd.spark.schema import CONSUMER_OFFSETS, source_schema
from herd.spark.writer import HerdBatchWriter, HerdStreamWriter, SinkPlan, check_client_config


class HerdDataSource(DataSource):
    """The `herd` data source: Spark's Kafka source and sink options and columns, over librdkafka."""

    @classmethod
    def name(cls) -> str:
        return "herd"

    def schema(self) -> StructType:
        opts = SourceOptions.parse(self.options, streaming=None)
        _check_against_broker(opts)
        return _schema_of(opts)

    def reader(self, schema: StructType) -> DataSourceReader:
        return HerdBatchReader(SourceOptions.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HerdStreamReader(SourceOptions.parse(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return HerdBatchWriter(_sink_plan(self.options, schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return HerdStreamWriter(_sink_plan(self.options, schema, overwrite))


def _schema_of(opts: SourceOptions) -> StructType:
    if opts.decode == "consumer_offsets":
        return CONSUMER_OFFSETS
    return source_schema(opts.include_headers)


def _check_against_broker(opts: SourceOptions) -> None:
    """Named topics must exist and explicit offsets must name every partition read (failOnDataLoss=true)."""
    if not opts.fail_on_data_loss:
        return
    view = BrokerView(opts.client, f"{opts.group_id_prefix}-driver")
    try:
        tps, missing = view.partitions(opts.subscription)
        if missing:
            raise HerdDataLossError(
                f"{', '.join(missing)} not found on {opts.bootstrap} ({opts.subscription.describe()})"
            )
        for spec, option in ((opts.starting, "startingOffsets"), (opts.ending, "endingOffsets")):
            if spec is not None and spec.kind in ("json", "timestamps") and set(spec.offsets) != set(tps):
                view.resolve(spec, tps, option)  # raises HerdOptionError naming both sets
    finally:
        view.close()


def _sink_plan(options: dict[str, str], schema: StructType, overwrite: bool) -> SinkPlan:
    if overwrite:
        raise HerdOptionError("herd sink: only append is supported (a topic cannot be overwritten)")
    plan = SinkPlan.of(SinkOptions.parse(options), schema)
    check_client_config(plan)
    return plan
