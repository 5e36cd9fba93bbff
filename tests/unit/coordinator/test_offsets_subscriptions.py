"""Subscribed topics of a consumer group, read from members' metadata as Kafka reads them (v0 prefix)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from herd.client.consumer_protocol import Subscription, TopicPartition, encode_subscription
from herd.coordinator.subscriptions import subscription_topics

topic_names = st.lists(st.text(alphabet="abcdefghij._-", min_size=1, max_size=12), max_size=5)


@given(topic_names, st.integers(0, 3), st.none() | st.binary(max_size=20))
def test_every_consumer_protocol_version_is_read_through_its_v0_prefix(
    topics: list[str], version: int, user_data: bytes | None
) -> None:
    subscription = Subscription(topics=tuple(topics), user_data=user_data, owned_partitions=(TopicPartition("x", 1),))
    assert subscription_topics(encode_subscription(subscription, version)) == tuple(topics)


@pytest.mark.parametrize(
    "metadata", [b"", b"\x00", b"\xff\xff\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05\x00\x01a", b"sub-range"]
)
def test_bytes_that_are_not_a_subscription_give_unknown_topics(metadata: bytes) -> None:
    assert subscription_topics(metadata) is None


def test_a_future_version_is_read_as_v0_with_its_tail_ignored() -> None:
    v3 = encode_subscription(Subscription(topics=("a", "b")), 3)
    assert subscription_topics(b"\x00\x07" + v3[2:] + b"future fields") == ("a", "b")
