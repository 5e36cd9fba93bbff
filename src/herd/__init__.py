"""herd: a Kafka-compatible broker built around a faithful consumer-group coordinator."""

__version__ = "0.1.0"
