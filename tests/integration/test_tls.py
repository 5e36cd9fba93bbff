"""SSL listeners with real clients (confluent-kafka, kafka-python, aiokafka) and certificates made by tests/certs.py:
produce, consume in a group and commit over TLS with client authentication required; several listeners, each
answering Metadata, FindCoordinator and DescribeCluster with its own ports; connections that fail their handshake
(garbage, an untrusted client certificate, a client that stops half-way) closed alone while a good client carries
on; the principal of a client certificate through ssl.principal.mapping.rules; a TLS setup that cannot work
refused at start in one line; ssl.key.password never described."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from brokers import BrokerProcess
from certs import Pki, make_pki
from groupmembers import kafka_python_subscriber
from inprocess import InProcessBroker
from rawkafka import RawClient, req

from herd.config import BrokerConfig, ConfigError
from herd.security.tls import ANONYMOUS, server_context
from herd.testing.wait import collect_until

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER, API_VERSIONS = 3, 10, 60, 18
_LISTENER_LINE = re.compile(r"herd listener (\w+) \((\w+)\) on [^\s]+:(\d+), advertised as ([^\s]+):(\d+)")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_props(pki: Pki, client_auth: str = "required", **more: str) -> dict[str, str]:
    """PLAINTEXT and SSL listeners, the SSL one with the broker's keystore and the CA as its truststore."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.location": str(pki.ca_pem),
        "ssl.client.auth": client_auth,
        **more,
    }


def listener_ports(broker: BrokerProcess) -> dict[str, int]:
    """Listener name -> advertised port, from the broker's log."""
    return {m.group(1): int(m.group(5)) for m in _LISTENER_LINE.finditer(broker.log())}


@pytest.fixture
def tls_broker(broker_factory, pki: Pki) -> BrokerProcess:
    return broker_factory(tls_props(pki))


def client_context(pki: Pki, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_pem))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def tls_socket(port: int, context: ssl.SSLContext) -> ssl.SSLSocket:
    return context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")


def confluent_ssl(pki: Pki, port: int, **more: object) -> dict[str, object]:
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca_pem),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
        **more,
    }


def confluent_roundtrip(config: dict[str, object], topic: str, count: int = 20) -> None:
    """Produce `count` records, consume them in a group and commit synchronously; asserts they all came back."""
    import confluent_kafka as ck

    producer = ck.Producer(config)
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), key=f"k{i}".encode())
    assert producer.flush(20) == 0
    consumer = ck.Consumer(
        {**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])

    def poll() -> list[bytes]:
        message = consumer.poll(0.5)
        return [] if message is None or message.error() else [message.value()]

    try:
        got = collect_until(poll, lambda got: len(got) >= count, 30)
        committed = consumer.commit(asynchronous=False)
        assert committed and all(tp.error is None for tp in committed)
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(count))
        offsets = consumer.committed([ck.TopicPartition(topic, 0)], timeout=10)
        assert offsets[0].offset == count
    finally:
        consumer.close()


def test_confluent_kafka_over_ssl_with_client_auth_required(tls_broker: BrokerProcess, pki: Pki) -> None:
    port = listener_ports(tls_broker)["SECURE"]
    confluent_roundtrip(confluent_ssl(pki, port), f"tls-{uuid.uuid4().hex[:8]}")


def test_kafka_python_over_ssl_with_client_auth_required(tls_broker: BrokerProcess, pki: Pki) -> None:
    from kafka import KafkaProducer, TopicPartition

    port = listener_ports(tls_broker)["SECURE"]
    ssl_args = {
        "bootstrap_servers": f"127.0.0.1:{port}",
        "security_protocol": "SSL",
        "ssl_cafile": str(pki.ca_pem),
        "ssl_certfile": str(pki.client_cert),
        "ssl_keyfile": str(pki.client_key),
    }
    topic = f"tls-kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**ssl_args)
    for i in range(10):
        producer.send(topic, f"v{i}".encode()).get(timeout=20)
    producer.close()
    consumer = kafka_python_subscriber(
        topic,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
        **ssl_args,
    )
    got = []
    for message in consumer:
        got.append(message.value)
        if len(got) == 10:
            break
    consumer.commit()
    assert consumer.committed(TopicPartition(topic, 0)) == 10
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))


def test_aiokafka_over_ssl_with_client_auth_required(tls_broker: BrokerProcess, pki: Pki) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    port = listener_ports(tls_broker)["SECURE"]
    topic = f"tls-aio-{uuid.uuid4().hex[:8]}"

    async def run() -> list[bytes]:
        context = client_context(pki, pki.client_cert, pki.client_key)
        common = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SSL", "ssl_context": context}
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic, group_id=f"g-{topic}", auto_offset_reset="earliest", enable_auto_commit=False, **common
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    got.append(message.value)
                    if len(got) == 10:
                        break
            await consumer.commit()
            assert await consumer.committed(TopicPartition(topic, 0)) == 10
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == sorted(f"v{i}".encode() for i in range(10))


def test_each_listener_answers_with_its_own_ports(tls_broker: BrokerProcess, pki: Pki) -> None:
    ports = listener_ports(tls_broker)
    assert set(ports) == {"PLAINTEXT", "SECURE"} and ports["PLAINTEXT"] == tls_broker.port
    context = client_context(pki, pki.client_cert, pki.client_key)
    for name, client in (
        ("PLAINTEXT", RawClient(ports["PLAINTEXT"])),
        ("SECURE", RawClient(0, sock=tls_socket(ports["SECURE"], context))),
    ):
        with client:
            metadata = client.request(
                METADATA,
                12,
                req(
                    METADATA,
                    12,
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                ),
            )
            assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", ports[name])]
            found = client.request(
                FIND_COORDINATOR, 4, req(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("some-group",))
            )
            assert [(c.host, c.port) for c in found.coordinators] == [("127.0.0.1", ports[name])]
            cluster = client.request(
                DESCRIBE_CLUSTER, 1, req(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False)
            )
            assert [(b.host, b.port) for b in cluster.brokers] == [("127.0.0.1", ports[name])]
    # and librdkafka, which connects to what Metadata names: each listener's clients stay on its port
    from confluent_kafka.admin import AdminClient

    plain = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"}).list_topics(timeout=10)
    secure = AdminClient(confluent_ssl(pki, ports["SECURE"])).list_topics(timeout=10)
    assert [b.port for b in plain.brokers.values()] == [ports["PLAINTEXT"]]
    assert [b.port for b in secure.brokers.values()] == [ports["SECURE"]]


def test_advertised_listeners_by_name(broker_factory, pki: Pki) -> None:
    broker = broker_factory(
        tls_props(pki, **{"advertised.listeners": "PLAINTEXT://localhost:0,SECURE://broker.example:19093"})
    )
    ports = listener_ports(broker)
    assert re.search(
        r"herd listener SECURE \(SSL\) on 127\.0\.0\.1:\d+, advertised as broker\.example:19093", broker.log()
    )
    assert re.search(
        rf"herd listener PLAINTEXT \(PLAINTEXT\) on 127\.0\.0\.1:{broker.port}, advertised as "
        rf"localhost:{broker.port}",
        broker.log(),
    )
    with RawClient(broker.port) as client:
        metadata = client.request(
            METADATA,
            12,
            req(METADATA, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        )
    assert [(b.host, b.port) for b in metadata.brokers] == [("localhost", ports["PLAINTEXT"])]


def test_failed_handshakes_close_only_their_own_connection(tls_broker: BrokerProcess, pki: Pki) -> None:
    import confluent_kafka as ck

    port = listener_ports(tls_broker)["SECURE"]
    topic = f"tls-bad-{uuid.uuid4().hex[:8]}"
    producer = ck.Producer(confluent_ssl(pki, port))
    producer.produce(topic, b"before")
    assert producer.flush(20) == 0

    stalled = socket.create_connection(("127.0.0.1", port))  # sends nothing: the broker drops it after 10 s
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello, then nothing
    with socket.create_connection(("127.0.0.1", port), timeout=10) as garbage:
        garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 10)
        assert closed_by_peer(garbage)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)) as refused_untrusted:
        with tls_socket(port, client_context(pki, pki.untrusted_client_cert, pki.untrusted_client_key)) as untrusted:
            RawClient(0, sock=untrusted).request(
                API_VERSIONS, 3, req(API_VERSIONS, 3, client_software_name="x", client_software_version="1")
            )
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)) as refused_anonymous:
        with tls_socket(port, client_context(pki)) as no_certificate:  # ssl.client.auth=required
            RawClient(0, sock=no_certificate).request(
                API_VERSIONS, 3, req(API_VERSIONS, 3, client_software_name="x", client_software_version="1")
            )
    for refused in (refused_untrusted, refused_anonymous):  # refused, not a broker that took it and went quiet
        assert not isinstance(refused.value, TimeoutError), refused.value

    producer.produce(topic, b"after")  # the good client's connection is unharmed, and new ones are taken
    assert producer.flush(20) == 0
    confluent_roundtrip(confluent_ssl(pki, port), f"{topic}-2", count=5)

    for sock in (stalled, half):  # dropped once the handshake timeout (10 s) passes
        sock.settimeout(20)
        assert closed_by_peer(sock)
        sock.close()
    log = tls_broker.log()
    assert "Traceback" not in log
    assert re.search(
        r"INFO herd.server.server: 1 TLS handshake failed on listener SECURE \(not TLS, a client "
        r"certificate the truststore does not vouch for or none where ssl.client.auth=required, or not "
        r"done within 10 s\); each closed that connection only",
        log,
    ), log
    assert tls_broker.proc is not None and tls_broker.proc.poll() is None


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the peer closes `sock` (whatever it sends first, e.g. a TLS alert) within its timeout."""
    try:
        while sock.recv(4096):
            pass
    except (ConnectionResetError, ssl.SSLEOFError):
        pass
    return True


def test_principal_from_the_client_certificate(tmp_path: Path) -> None:
    pki = make_pki(Path(__import__("tempfile").mkdtemp(prefix="herd-pki-")))
    rules = "RULE:^CN=([^,]+),OU=clients,.*$/$1@clients/U,DEFAULT"
    broker = InProcessBroker(
        {
            **tls_props(pki, "requested"),
            "log.dirs": str(tmp_path),
            "ssl.principal.mapping.rules": rules,
            # a second SSL listener with the default rules, and the keystore and CA inline
            "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0,OTHER://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL,OTHER:SSL",
            "listener.name.other.ssl.principal.mapping.rules": "DEFAULT",
            "listener.name.other.ssl.keystore.key": pki.broker_key.read_text(),
            "listener.name.other.ssl.keystore.certificate.chain": pki.broker_cert.read_text(),
            "listener.name.other.ssl.truststore.certificates": pki.ca_pem.read_text(),
        }
    )
    try:
        ports = {name: bound[1] for name, bound in broker.server.bound.items()}
        principals = {}
        for case, port, context in (
            ("mapped", ports["SECURE"], client_context(pki, pki.client_cert, pki.client_key)),
            ("anonymous", ports["SECURE"], client_context(pki)),
            ("default", ports["OTHER"], client_context(pki, pki.client_cert, pki.client_key)),
        ):
            with RawClient(0, sock=tls_socket(port, context)) as client:
                client.request(
                    API_VERSIONS, 3, req(API_VERSIONS, 3, client_software_name=case, client_software_version="1")
                )
                principals[case] = broker.run(sessions(broker, client.sock))
        assert principals["mapped"] == [("SECURE", "User:ALICE@CLIENTS")]
        assert principals["anonymous"] == [("SECURE", ANONYMOUS)]
        assert principals["default"] == [("OTHER", f"User:{pki.client_subject}")]
        with RawClient(ports["PLAINTEXT"]) as client:  # PLAINTEXT: no principal from anywhere
            client.request(API_VERSIONS, 3, req(API_VERSIONS, 3, client_software_name="p", client_software_version="1"))
            assert broker.run(sessions(broker, client.sock)) == [("PLAINTEXT", ANONYMOUS)]
    finally:
        broker.stop()


async def sessions(broker: InProcessBroker, sock: socket.socket) -> list[tuple[str, str]]:
    """(listener, principal) of the broker's connection from `sock`."""
    here = "127.0.0.1:%d" % sock.getsockname()[1]
    return [(c.session.listener, c.session.principal) for c in broker.server.connections if c._peer == here]


def serve_error(tmp_path: Path, **props: str) -> tuple[int, str]:
    """Run `herd serve` with these settings; its exit code and what it wrote."""
    args = [sys.executable, "-m", "herd.cli", "serve", "--override", f"log.dirs={tmp_path / 'data'}"]
    for key, value in props.items():
        args += ["--override", f"{key}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    "case, expected",
    [
        ("missing file", r"ssl\.keystore\.location: cannot read '.*nowhere\.pem': no such file"),
        ("wrong password", r"ssl\.keystore\.location: the private key cannot be decrypted with ssl\.key\.password"),
        (
            "no password",
            r"listener\.name\.secure\.ssl\.keystore\.location: the private key is encrypted; set "
            r"ssl\.key\.password",
        ),
        ("no keystore", r"ssl\.keystore\.location: listener SECURE speaks TLS and needs a PEM keystore"),
        ("key of another certificate", r"ssl\.keystore\.location: the private key does not match the certificate"),
        ("bad truststore", r"ssl\.truststore\.location: no PEM certificates could be read"),
        ("bad rules", r"ssl\.principal\.mapping\.rules: invalid rule `RULE:x/y`"),
        ("advertised unknown", r"advertised\.listeners: OTHER is not one of the listeners \(PLAINTEXT, SECURE\)"),
    ],
)
def test_unusable_tls_setup_is_one_line_at_start(tmp_path: Path, pki: Pki, case: str, expected: str) -> None:
    props = tls_props(pki, "required")
    if case == "missing file":
        props["ssl.keystore.location"] = str(tmp_path / "nowhere.pem")
    elif case == "wrong password":
        props |= {"ssl.keystore.location": str(pki.broker_keystore_encrypted), "ssl.key.password": "not-it-at-all"}
    elif case == "no password":
        del props["ssl.keystore.location"]
        props["listener.name.secure.ssl.keystore.location"] = str(pki.broker_keystore_encrypted)
    elif case == "no keystore":
        del props["ssl.keystore.location"]
    elif case == "key of another certificate":
        mixed = tmp_path / "mixed.pem"
        mixed.write_bytes(pki.client_key.read_bytes() + pki.broker_cert.read_bytes())
        props["ssl.keystore.location"] = str(mixed)
    elif case == "bad truststore":
        props["ssl.truststore.location"] = str(pki.broker_key)
    elif case == "bad rules":
        props["ssl.principal.mapping.rules"] = "RULE:x/y"
    elif case == "advertised unknown":
        props["advertised.listeners"] = "PLAINTEXT://localhost:9092,OTHER://localhost:9093"
    code, output = serve_error(tmp_path, **props)
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, output
    assert re.fullmatch(r"herd: error: " + expected + r".*", lines[0]), lines[0]
    assert "not-it-at-all" not in output and "Traceback" not in output


def test_encrypted_keystore_and_inline_pem_are_read(pki: Pki) -> None:
    config = BrokerConfig.from_properties(
        tls_props(pki)
        | {"ssl.keystore.location": str(pki.broker_keystore_encrypted), "ssl.key.password": pki.key_password}
    )
    assert server_context(config, "SECURE").verify_mode == ssl.CERT_REQUIRED
    inline = BrokerConfig.from_properties(
        {
            **tls_props(pki, "none"),
            "ssl.keystore.location": "",
            "ssl.keystore.key": pki.broker_key.read_text(),
            "ssl.keystore.certificate.chain": pki.broker_cert.read_text(),
            "ssl.enabled.protocols": "TLSv1.3",
        }
    )
    context = server_context(inline, "SECURE")
    assert context.verify_mode == ssl.CERT_NONE
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(ConfigError, match="^ssl.keystore.certificate.chain: listener SECURE has an inline keystore"):
        server_context(
            BrokerConfig.from_properties(
                {**tls_props(pki), "ssl.keystore.location": "", "ssl.keystore.key": pki.broker_key.read_text()}
            ),
            "SECURE",
        )


def test_describe_configs_never_returns_the_key_password(broker_factory, pki: Pki) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    broker = broker_factory(
        tls_props(pki)
        | {
            "ssl.keystore.location": str(pki.broker_keystore_encrypted),
            "ssl.key.password": pki.key_password,
            "listener.name.secure.ssl.key.password": pki.key_password,
        }
    )
    for bootstrap, config in (
        (broker.bootstrap, {}),
        (f"127.0.0.1:{listener_ports(broker)['SECURE']}", confluent_ssl(pki, listener_ports(broker)["SECURE"])),
    ):
        admin = AdminClient({**config, "bootstrap.servers": bootstrap})
        (future,) = admin.describe_configs([ConfigResource("broker", "0")]).values()
        entries = future.result(timeout=20)
        assert pki.key_password not in repr({n: e.value for n, e in entries.items()})
        assert entries["ssl.key.password"].value is None and entries["ssl.key.password"].is_sensitive
        prefixed = entries.get("listener.name.secure.ssl.key.password")
        assert prefixed is None or prefixed.value is None
        assert entries["ssl.keystore.location"].value == str(pki.broker_keystore_encrypted)


def test_client_auth_on_sasl_ssl_listeners_only_with_the_listener_prefix(pki: Pki) -> None:
    """KIP-684: a SASL_SSL listener ignores the broker-wide ssl.client.auth (SASL authenticates its clients) and takes
    listener.name.<listener>.ssl.client.auth."""
    base = {**tls_props(pki, "required"), "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL"}
    assert server_context(BrokerConfig.from_properties(base), "SECURE").verify_mode == ssl.CERT_NONE
    prefixed = {**base, "listener.name.secure.ssl.client.auth": "requested"}
    assert server_context(BrokerConfig.from_properties(prefixed), "SECURE").verify_mode == ssl.CERT_OPTIONAL


def test_a_certificate_no_rule_maps_is_refused(pki: Pki, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """Kafka fails the authentication of a certificate no ssl.principal.mapping.rules rule applies to: that connection
    is closed (and logged), others carry on."""
    broker = InProcessBroker(
        {
            **tls_props(pki, "requested"),
            "ssl.principal.mapping.rules": "RULE:^CN=bob,.*$/bob/",
            "log.dirs": str(tmp_path),
        }
    )
    try:
        port = broker.server.bound["SECURE"][1]
        with caplog.at_level("WARNING", logger="herd.server.connection"):
            with tls_socket(port, client_context(pki, pki.client_cert, pki.client_key)) as refused:
                refused.settimeout(10)
                assert closed_by_peer(refused)
        assert any(
            "no rule of ssl.principal.mapping.rules applies to CN=alice,OU=clients,O=herd,C=US" in r.message
            for r in caplog.records
        ), caplog.text
        with RawClient(0, sock=tls_socket(port, client_context(pki))) as anonymous:  # no certificate: ANONYMOUS
            anonymous.request(
                API_VERSIONS, 3, req(API_VERSIONS, 3, client_software_name="a", client_software_version="1")
            )
            assert broker.run(sessions(broker, anonymous.sock)) == [("SECURE", ANONYMOUS)]
    finally:
        broker.stop()
