"""The example of docs/testing.md, as written there: an application's consumer keeps consuming, and its
commits land, through a rebalance the broker forces on it. It needs nothing but herd and confluent-kafka
installed."""

import time

from confluent_kafka import Consumer, Producer


def produce(bootstrap, topic, values):
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    producer.flush()


def consume(consumer, received, until):
    """The application's loop: take a message, process it (here: keep it), commit it."""
    deadline = time.monotonic() + 30
    while not until():
        assert time.monotonic() < deadline, f"stuck after receiving {received}"
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            received.append(message.value())
            consumer.commit(message, asynchronous=False)


def test_consumer_survives_a_forced_rebalance(herd_broker, herd_topic, herd_group, herd_faults, herd_admin):
    produce(herd_broker.bootstrap, herd_topic, [b"a", b"b", b"c"])
    assignments, received = [], []
    consumer = Consumer(
        {
            "bootstrap.servers": herd_broker.bootstrap,
            "group.id": herd_group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 100,
        }
    )
    consumer.subscribe([herd_topic], on_assign=lambda c, partitions: assignments.append(partitions))
    try:
        consume(consumer, received, until=lambda: len(received) == 3)

        # The coordinator answers the next heartbeat REBALANCE_IN_PROGRESS, as Kafka does when another member
        # joins: the consumer must give its partitions up, join again and carry on where it committed.
        herd_faults.add(action="error", api="Heartbeat", group=herd_group, error="REBALANCE_IN_PROGRESS", count=1)
        consume(consumer, received, until=lambda: len(assignments) == 2)
        herd_admin.wait_for_members(herd_group, 1)

        produce(herd_broker.bootstrap, herd_topic, [b"d", b"e"])
        consume(consumer, received, until=lambda: len(received) == 5)
    finally:
        consumer.close()

    assert received == [b"a", b"b", b"c", b"d", b"e"]
    assert herd_admin.committed(herd_group) == {(herd_topic, 0): 5}
