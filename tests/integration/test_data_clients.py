"""Real clients (kafka-python, confluent-kafka, aiokafka) produce and read back through herd, with every codec,
on both backends (tests/backends.py), and across a SIGKILL of the embedded broker."""

from __future__ import annotations

import pytest
from backends import BACKENDS, embedded_only, start_broker
from clients import N_PARTITIONS, PRODUCERS, READERS, check_exact

CLIENTS = ["confluent", "kafka-python", "aiokafka"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 10_000


@pytest.fixture(scope="module", params=BACKENDS)
def shared_broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "shared", {"num.partitions": str(N_PARTITIONS)}) as b:
        yield b
        assert b.stop() == 0


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_roundtrip_every_codec(shared_broker, client, codec):
    topic = f"rt-{client}-{codec}"
    shared_broker.create_topic(topic, N_PARTITIONS)  # and known to every node: see ClusterBroker.create_topic
    PRODUCERS[client](shared_broker.bootstrap, topic, N, codec)
    check_exact(READERS[client](shared_broker.bootstrap, topic, N), N)


@embedded_only("a kill -9 and restart of the one broker on its data directory (test_cluster kills a node)")
@pytest.mark.parametrize("client,codec", [("confluent", "zstd"), ("kafka-python", "lz4"), ("aiokafka", "snappy")])
def test_everything_acknowledged_survives_sigkill(broker_factory, client, codec):
    broker = broker_factory({"num.partitions": str(N_PARTITIONS)})
    topic = f"crash-{client}"
    PRODUCERS[client](broker.bootstrap, topic, N, codec)
    broker.kill()
    broker.restart()
    check_exact(READERS[client](broker.bootstrap, topic, N), N)
    # And the restarted broker keeps appending after what it recovered.
    PRODUCERS[client](broker.bootstrap, topic + "-after", 100, codec)
    check_exact(READERS[client](broker.bootstrap, topic + "-after", 100), 100)


def test_one_client_reads_what_another_wrote(shared_broker):
    shared_broker.create_topic("mixed", N_PARTITIONS)
    PRODUCERS["kafka-python"](shared_broker.bootstrap, "mixed", 3000, "gzip")
    for reader in READERS.values():
        check_exact(reader(shared_broker.bootstrap, "mixed", 3000), 3000)


def test_idempotent_producers(shared_broker):
    from clients import confluent_produce

    confluent_produce(shared_broker.bootstrap, "idem-confluent", 5000, "lz4", **{"enable.idempotence": True})
    check_exact(READERS["confluent"](shared_broker.bootstrap, "idem-confluent", 5000), 5000)

    from clients import headers_for, payload
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=shared_broker.bootstrap, enable_idempotence=True, acks="all")
    futures = [p.send("idem-kp", key=b"k%d" % i, value=payload(i), headers=headers_for(i)) for i in range(2000)]
    p.flush(30)
    assert all(f.get(10) is not None for f in futures)
    p.close()
    check_exact(READERS["kafka-python"](shared_broker.bootstrap, "idem-kp", 2000), 2000)
