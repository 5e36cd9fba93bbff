"""Real clients (kafka-python, confluent-kafka, aiokafka) produce and read back through herd, with every codec,
and across a SIGKILL of the broker."""

from __future__ import annotations

import pytest

from clients import N_PARTITIONS, PRODUCERS, READERS, check_exact

CLIENTS = ["confluent", "kafka-python", "aiokafka"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 10_000


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    from conftest import BrokerProcess

    b = BrokerProcess(tmp_path_factory.mktemp("shared") / "data", {"num.partitions": str(N_PARTITIONS)})
    b.start()
    yield b
    assert b.stop() == 0


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_roundtrip_every_codec(shared_broker, client, codec):
    topic = f"rt-{client}-{codec}"
    PRODUCERS[client](shared_broker.bootstrap, topic, N, codec)
    check_exact(READERS[client](shared_broker.bootstrap, topic, N), N)


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
    PRODUCERS["kafka-python"](shared_broker.bootstrap, "mixed", 3000, "gzip")
    for reader in READERS.values():
        check_exact(reader(shared_broker.bootstrap, "mixed", 3000), 3000)
