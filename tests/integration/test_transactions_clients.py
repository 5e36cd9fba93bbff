"""Transactions with real clients against `herd serve` (issue 17): confluent-kafka's consume-transform-produce
loop with `send_offsets_to_transaction`, killed with SIGKILL and restarted (exactly once among committed
records, nothing of an aborted transaction seen by read_committed); a producer killed mid-transaction, aborted
by the broker after its transaction.timeout.ms; a zombie fenced by a newer producer with the same
transactional.id; a broker killed right after commits and restarted; aiokafka's transactional producer.
One embedded broker for the module (the transaction coordinator's expiry checked every 500 ms)."""

from __future__ import annotations

import asyncio
import collections
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from brokers import BrokerProcess
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from groupmembers import committed_offsets
from processes import file_text, first_line, reaped, show_on_failure

from herd.testing.wait import wait_until, wait_until_async

WORKER = Path(__file__).with_name("eos_worker.py")
PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(
        tmp_path_factory.mktemp("txn") / "data",
        {
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
            "transaction.state.log.num.partitions": "4",
            "offsets.topic.num.partitions": "4",
        },
        die_with_parent=True,
    )
    process.start()
    yield process
    process.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topics(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answers are in
    futures = admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names])
    for future in futures.values():
        future.result(15)


def produce_plain(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"%06d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def read_to_end(
    bootstrap: str,
    topic: str,
    isolation: str,
    *,
    partitions: int = PARTITIONS,
    expected: int = 0,
    timeout: float = 30.0,
) -> list[bytes]:
    """Every value of the topic up to each partition's end (for read_committed: the last stable offset), read
    until at least `expected` arrived (an end reached before the last stable offset moved is passed again)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, ended = [], set()

    def done() -> bool:
        return len(values) >= expected and len(ended) >= partitions

    def at_the_end() -> bool:
        if done():
            return True
        message = consumer.poll(0.3)
        if message is None:
            return False
        if message.error():
            assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
            ended.add(message.partition())
        else:
            ended.discard(message.partition())
            values.append(message.value())
        return done()

    wait_until(
        at_the_end,
        timeout,
        lambda: f"{topic} read to its end ({isolation}): {len(values)} of {expected}, ended {ended}",
        interval=0,
    )
    consumer.close()
    return values


def stable_progress(bootstrap: str, group: str, topic: str) -> int:
    """The sum of the group's stable committed offsets on the topic (-1 counted as 0). read_uncommitted: librdkafka's
    default, read_committed, fetches with require_stable (KIP-447) and so waits, retrying UNSTABLE_OFFSET_COMMIT,
    until a killed worker's open transaction is aborted by its timeout (10 s after it began): as long as the
    wait the read allows, give or take the expiry's 500 ms period."""
    offsets = committed_offsets(bootstrap, group, topic, PARTITIONS, **{"isolation.level": "read_uncommitted"})
    return sum(max(offset, 0) for offset in offsets.values())


def test_consume_transform_produce_is_exactly_once_through_sigkills_of_the_worker(broker, tmp_path):
    source, sink, group, txn_id = unique("in"), unique("out"), unique("eos"), unique("worker")
    create_topics(broker.bootstrap, source, sink)
    count = 1000
    produce_plain(broker.bootstrap, source, count)
    command = [sys.executable, str(WORKER), broker.bootstrap, source, sink, group, txn_id, str(count)]
    rng = random.Random(17)
    progress = []
    for run in range(3):
        log = tmp_path / f"killed-worker-{run}.log"
        with (
            log.open("wb") as stderr,
            reaped(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)) as worker,
        ):
            show_on_failure(f"killed worker {run} (stderr)", worker, file_text(log))
            # killed after it committed 1-3 transactions of its own, as it goes on to the next (mid-transaction, or
            # between two): progress in every run, and at most 60 records each, whatever the machine's speed (a
            # fixed 0.9-1.6 s after its start found a loaded machine's workers still starting: [0, 0, 0])
            for _ in range(rng.randint(1, 3)):
                assert first_line(worker, 60, f"worker {run}'s next committed transaction") == b"committed"
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
        progress.append(stable_progress(broker.bootstrap, group, source))
    print("committed input offsets after each kill:", progress)
    assert 0 < progress[-1] < count, progress  # the kills came while there was work left
    with reaped(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)) as worker:
        _, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err.decode()[-2000:]

    committed = collections.Counter(read_to_end(broker.bootstrap, sink, "read_committed"))
    expected = {b"out:%06d" % i for i in range(count)}
    assert set(committed) == expected, sorted(expected - set(committed))[:5]
    assert max(committed.values()) == 1, [v for v, n in committed.items() if n > 1][:5]
    # what the killed workers wrote in transactions that never committed is in the log, but only there
    assert len(read_to_end(broker.bootstrap, sink, "read_uncommitted")) >= count


def test_a_producer_killed_mid_transaction_is_aborted_after_its_timeout(broker):
    topic = unique("timeout")
    create_topics(broker.bootstrap, topic)
    script = (
        "import sys, time\n"
        "from confluent_kafka import Producer\n"
        f"p = Producer({{'bootstrap.servers': '{broker.bootstrap}', 'transactional.id': '{unique('doomed')}',"
        " 'transaction.timeout.ms': 2000})\n"
        "p.init_transactions(30); p.begin_transaction()\n"
        f"[p.produce('{topic}', value=b'doomed', partition=i % {PARTITIONS}) for i in range(30)]\n"
        "assert p.flush(30) == 0\n"
        "print('sent', flush=True); time.sleep(60)\n"
    )
    with reaped(subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)) as doomed:
        assert first_line(doomed, 90, "the doomed producer's 'sent' (its records flushed)") == b"sent"
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    produce_plain(broker.bootstrap, topic, 30)  # after the open transaction: held back by the LSO until it ends

    start = time.monotonic()
    values = read_to_end(broker.bootstrap, topic, "read_committed", expected=30)  # and nothing after them
    waited = time.monotonic() - start
    assert sorted(values) == sorted(b"%06d" % i for i in range(30))  # the doomed records never show
    assert waited < 2 + 0.5 + 10  # the timeout, the expiry check's interval, and the abort's markers
    assert read_to_end(broker.bootstrap, topic, "read_uncommitted").count(b"doomed") == 30


def test_a_zombie_producer_is_fenced_by_a_newer_one_with_the_same_transactional_id(broker):
    topic, txn_id = unique("zombie"), unique("fenced")
    create_topics(broker.bootstrap, topic)
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    assert zombie.flush(30) == 0

    newer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    newer.init_transactions(30)  # bumps the epoch and aborts the zombie's open transaction
    newer.begin_transaction()
    newer.produce(topic, value=b"newer", partition=0)
    newer.commit_transaction(30)

    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic, value=b"zombie-2", partition=0)
        zombie.commit_transaction(30)
    error = raised.value.args[0]
    assert error.fatal() or error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), error
    assert read_to_end(broker.bootstrap, topic, "read_committed") == [b"newer"]


def test_a_broker_killed_after_commits_finishes_them_after_a_restart(broker):
    topic = unique("restart")
    create_topics(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("restart")})
    producer.init_transactions(30)
    for n in range(5):
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic, value=b"%d-%d" % (n, i), partition=i % PARTITIONS)
        producer.commit_transaction(30)  # acknowledged once PrepareCommit is durable; markers may follow
    broker.kill()
    broker.restart()
    values = read_to_end(broker.bootstrap, topic, "read_committed", timeout=30)
    assert sorted(values) == sorted(b"%d-%d" % (n, i) for n in range(5) for i in range(20))


def test_aiokafkas_transactional_producer_commits_and_aborts(broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioPartition

    topic = unique("aio")
    create_topics(broker.bootstrap, topic)

    async def main() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("aio"))
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(10):
                    await producer.send(topic, b"kept-%d" % i, partition=i % PARTITIONS)
            await producer.begin_transaction()
            for i in range(10):
                await producer.send(topic, b"dropped-%d" % i, partition=i % PARTITIONS)
            await producer.flush()
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            partitions = [AioPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(partitions)
            ends = await consumer.end_offsets(partitions)  # read_committed: the last stable offsets
            values: list[bytes] = []

            async def caught_up() -> bool:
                if all([await consumer.position(tp) >= ends[tp] for tp in partitions]):
                    return True
                batch = await consumer.getmany(timeout_ms=500)
                values.extend(m.value for messages in batch.values() for m in messages)
                return False

            await wait_until_async(
                caught_up, 60, lambda: f"read_committed positions at {ends}, read {values}", interval=0
            )
            return values
        finally:
            await consumer.stop()

    assert sorted(asyncio.run(main())) == sorted(b"kept-%d" % i for i in range(10))
    assert sum(v.startswith(b"dropped") for v in read_to_end(broker.bootstrap, topic, "read_uncommitted")) == 10
