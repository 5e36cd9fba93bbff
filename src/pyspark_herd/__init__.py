"""Spark registers the `DefaultSource` of every importable top-level `pyspark_*` module at session start,
so with herd installed `format("herd")` works without calling `herd.spark.register(spark)`."""

from herd.spark.source import HerdDataSource as DefaultSource

__all__ = ["DefaultSource"]
