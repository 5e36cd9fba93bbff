"""A consume-transform-produce worker with confluent-kafka, exactly once (KIP-98, KIP-447), for
test_transactions_clients: run as a process, killed with SIGKILL and restarted by the test.

    python eos_worker.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID EXPECTED

It reads INPUT with read_committed in GROUP (a static member, so that a restarted worker takes its place at
once), and for each batch of records, in one transaction, writes "out:<value>" to OUTPUT (same partition) and
the consumed offsets with `send_offsets_to_transaction`. It exits 0 once the group's committed offsets cover
EXPECTED input records. Transactions are small (BATCH records). Its restarts share TRANSACTIONAL_ID, so a restart fences
the killed one's transaction. It prints "committed" on stdout after each transaction it commits.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

BATCH = 20  # records per transaction: small, so that a kill finds the worker mid-way


def main() -> int:
    bootstrap, source, sink, group, transactional_id, expected = sys.argv[1:7]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": "worker",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "transaction.timeout.ms": 10000,
        }
    )
    producer.init_transactions(30)
    consumer.subscribe([source])
    done = 0
    deadline = time.monotonic() + 120  # the worker's own loop: its exit status is what the test asserts on
    while time.monotonic() < deadline:
        messages = consumer.consume(BATCH, 0.5)
        records = [m for m in messages if m.error() is None]
        if not records:
            committed = consumer.committed(consumer.assignment(), 10) if consumer.assignment() else []
            done = sum(max(tp.offset, 0) for tp in committed)
            if done >= int(expected):
                break
            continue
        producer.begin_transaction()
        for m in records:
            producer.produce(sink, value=b"out:" + m.value(), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        try:
            producer.commit_transaction(30)
        except KafkaException as error:
            if error.args[0].txn_requires_abort():
                producer.abort_transaction(30)
                _rewind(consumer)
                continue
            raise
        print("committed", flush=True)  # the test kills it after some of these
    consumer.close()
    return 0 if done >= int(expected) else 1


def _rewind(consumer: Consumer) -> None:
    """After an abort, go back to the committed offsets (what the aborted transaction read is read again)."""
    for tp in consumer.committed(consumer.assignment(), 10):
        consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))


if __name__ == "__main__":
    sys.exit(main())
