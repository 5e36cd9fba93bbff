"""SASL on a SASL_PLAINTEXT listener, with real `herd serve` processes and the three real clients.

Users: PLAIN users come from the listener's JAAS setting (in a properties file, never on a command line); SCRAM
users are made with confluent-kafka's AdminClient (AlterUserScramCredentials), authenticated as the PLAIN admin, or
over a PLAINTEXT listener of the same broker. Exact protocol behaviour (what is served before authentication, an
expired session, re-authentication as another user) is checked with the raw client of tests/rawkafka.py.

Until Metadata answers per listener, the SASL listener is the first one (the one herd advertises) and a PLAINTEXT
listener, when there is one, second, on a port picked here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import BrokerProcess
from clients import aiokafka_group_round_trip, confluent_group_round_trip, kafka_python_group_round_trip
from groupmembers import kafka_python_subscriber
from rawkafka import RawClient, part, req

from herd.testing.wait import wait_until

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_plainuser="plain-secret-77";'
)
ADMIN = {"sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"}
USERS = {  # user -> (mechanism, password)
    "alice": ("SCRAM-SHA-512", "alice-secret-512"),
    "bob": ("SCRAM-SHA-256", "bob-secret-256"),
    "plainuser": ("PLAIN", "plain-secret-77"),
}
WRONG = "wrong-password-31337"
PASSWORDS = ["admin-secret", WRONG] + [password for _, password in USERS.values()]
FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


def sasl_broker(
    directory: Path,
    overrides: dict[str, str] | None = None,
    *,
    listeners: str = "SASL_PLAINTEXT://127.0.0.1:0",
    log_level: str = "INFO",
) -> BrokerProcess:
    directory.mkdir(parents=True, exist_ok=True)
    props = directory / "sasl.properties"
    props.write_text(f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n")
    props.chmod(0o600)
    broker = BrokerProcess(
        directory / "data", {"listeners": listeners, **(overrides or {})}, config=props, log_level=log_level
    )
    return broker.start()


def confluent_config(broker: BrokerProcess, user: str, password: str | None = None) -> dict[str, Any]:
    mechanism, known = USERS.get(user, ("SCRAM-SHA-512", None))
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password or known,
    }


def create_scram_users(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT", **ADMIN})
    mechanisms = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
    upsertions = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanisms[mechanism], 8192), password.encode())
        for user, (mechanism, password) in USERS.items()
        if mechanism in mechanisms
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        assert future.result(30) is None
    described = {u: f.result(30) for u, f in admin.describe_user_scram_credentials(["alice", "bob"]).items()}
    assert described["alice"].scram_credential_infos[0].iterations == 8192
    assert described["bob"].scram_credential_infos[0].mechanism == ScramMechanism.SCRAM_SHA_256


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = sasl_broker(tmp_path_factory.mktemp("sasl"), log_level="DEBUG")  # the passwords checked against every line
    try:
        create_scram_users(b)
        yield b
        log = b.log()
        for password in PASSWORDS:
            assert password not in log, "a password is in the broker's log"
        assert "Traceback" not in log
    finally:
        if b.running:
            b.kill()


# -- the three clients -------------------------------------------------------------------------------------------


def kafka_python_config(broker: BrokerProcess, user: str) -> dict[str, Any]:
    mechanism, password = USERS[user]
    return {
        "bootstrap_servers": broker.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def confluent_round_trip(broker: BrokerProcess, user: str, topic: str, n: int = 20) -> None:
    values, committed = confluent_group_round_trip(confluent_config(broker, user), topic, n, f"g-{topic}")
    assert committed == n
    assert sorted(values) == sorted(b"v%d" % i for i in range(n))


def kafka_python_round_trip(broker: BrokerProcess, user: str, topic: str, n: int = 20) -> None:
    values, committed = kafka_python_group_round_trip(kafka_python_config(broker, user), topic, n, f"g-{topic}")
    assert committed == n
    assert sorted(values) == sorted(b"v%d" % i for i in range(n))


def aiokafka_round_trip(broker: BrokerProcess, user: str, topic: str, n: int = 20) -> None:
    # aiokafka takes kafka-python's setting names
    values, committed = aiokafka_group_round_trip(kafka_python_config(broker, user), topic, n, f"g-{topic}")
    assert committed == n
    assert sorted(values) == sorted(b"v%d" % i for i in range(n))


@pytest.mark.parametrize("user", ["alice", "bob", "plainuser"])
def test_confluent_kafka_produces_consumes_and_commits(broker: BrokerProcess, user: str) -> None:
    confluent_round_trip(broker, user, f"confluent-{user}")


@pytest.mark.parametrize("user", ["alice", "bob", "plainuser"])
def test_kafka_python_produces_consumes_and_commits(broker: BrokerProcess, user: str) -> None:
    kafka_python_round_trip(broker, user, f"kafka-python-{user}")


@pytest.mark.parametrize("user", ["alice", "bob", "plainuser"])
def test_aiokafka_produces_consumes_and_commits(broker: BrokerProcess, user: str) -> None:
    aiokafka_round_trip(broker, user, f"aiokafka-{user}")


# -- failures ----------------------------------------------------------------------------------------------------


def confluent_failure(broker: BrokerProcess, user: str, password: str, mechanism: str) -> str:
    from confluent_kafka import Producer

    errors: list[str] = []
    config = {
        **confluent_config(broker, user, password),
        "sasl.mechanism": mechanism,
        "error_cb": lambda e: errors.append(e.str()),
    }
    p = Producer(config)

    def failed() -> list[str]:
        p.poll(0.2)
        return errors

    wait_until(failed, 20, "an authentication error from the client's error_cb", interval=0)
    return errors[0]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_a_wrong_password_and_an_unknown_user_get_the_same_answer(
    broker: BrokerProcess, mechanism: str, rng: random.Random
) -> None:
    user = "alice" if mechanism == "SCRAM-SHA-512" else "bob"
    wrong = confluent_failure(broker, user, WRONG, mechanism)
    unknown = confluent_failure(broker, "nobody-" + rng.randbytes(3).hex(), WRONG, mechanism)
    assert FAILED.format(mechanism) in wrong and FAILED.format(mechanism) in unknown
    # the same but for librdkafka's own prefix and timings
    strip = lambda text: text[text.index("SASL authentication error") : text.index(" (after")]  # noqa: E731
    assert strip(wrong) == strip(unknown)


def test_plain_with_a_wrong_password_is_refused(broker: BrokerProcess) -> None:
    assert "Invalid username or password" in confluent_failure(broker, "plainuser", WRONG, "PLAIN")


def test_an_unknown_mechanism_is_answered_with_the_enabled_ones(broker: BrokerProcess) -> None:
    with RawClient(broker.port) as client:
        answer = client.request(17, 1, req(17, 1, mechanism="GSSAPI"))
        assert answer.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert client.is_closed_by_peer()


def test_only_api_versions_and_sasl_are_served_before_authentication(broker: BrokerProcess) -> None:
    with RawClient(broker.port) as client:
        versions = client.request(18, 3, req(18, 3, client_software_name="raw", client_software_version="1"))
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[17] == (1, 1) and keys[36] == (0, 2) and keys[50] == (0, 0) and keys[51] == (0, 0)
        client.send_raw(client.encode(3, 1, req(3, 1, topics=None)))
        assert client.is_closed_by_peer()
    with RawClient(broker.port) as client:  # SaslAuthenticate before SaslHandshake
        client.send_raw(client.encode(36, 1, req(36, 1, auth_bytes=b"\0admin\0admin-secret")))
        assert client.is_closed_by_peer()
    with RawClient(broker.port) as client:  # SaslHandshake v0 (raw tokens) is not served
        client.send_raw(client.encode(17, 0, req(17, 0, mechanism="PLAIN")))
        assert client.is_closed_by_peer()
    assert "during SASL handshake" in broker.log()


def plain_login(client: RawClient, user: str, password: str, version: int = 2) -> Any:
    assert client.request(17, 1, req(17, 1, mechanism="PLAIN")).error_code == 0
    return client.request(36, version, req(36, version, auth_bytes=f"\0{user}\0{password}".encode()))


def test_a_failed_login_is_answered_then_the_connection_closed(broker: BrokerProcess) -> None:
    with RawClient(broker.port) as client:
        answer = plain_login(client, "admin", WRONG)
        assert answer.error_code == 58 and answer.error_message == "Authentication failed: Invalid username or password"
        assert client.is_closed_by_peer()


def test_authenticate_again_without_a_handshake_is_an_illegal_state(broker: BrokerProcess) -> None:
    with RawClient(broker.port) as client:
        answer = plain_login(client, "admin", "admin-secret")
        assert answer.error_code == 0 and answer.session_lifetime.total_seconds() == 0
        again = client.request(36, 2, req(36, 2, auth_bytes=b"\0admin\0admin-secret"))
        assert again.error_code == 34  # ILLEGAL_SASL_STATE, and the connection stays
        assert client.request(3, 1, req(3, 1, topics=None)).brokers


# -- re-authentication (KIP-368) ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = sasl_broker(tmp_path_factory.mktemp("reauth"), {"connections.max.reauth.ms": "2000"})
    try:
        create_scram_users(b)
        yield b
    finally:
        b.kill()


def test_an_expired_session_is_closed_unless_it_reauthenticates(reauth_broker: BrokerProcess) -> None:
    with RawClient(reauth_broker.port) as stale, RawClient(reauth_broker.port) as fresh:
        for client in (stale, fresh):
            answer = plain_login(client, "admin", "admin-secret", version=1)
            assert answer.error_code == 0 and answer.session_lifetime.total_seconds() == 2
        time.sleep(1.5)
        assert plain_login(fresh, "admin", "admin-secret").error_code == 0  # re-authenticated: 2 s more
        time.sleep(0.7)
        assert fresh.request(3, 1, req(3, 1, topics=None)).brokers
        stale.send_raw(stale.encode(3, 1, req(3, 1, topics=None)))
        assert stale.is_closed_by_peer()
    assert "its SASL session expired" in reauth_broker.log()


def test_reauthentication_as_another_user_fails(reauth_broker: BrokerProcess) -> None:
    with RawClient(reauth_broker.port) as client:
        assert plain_login(client, "admin", "admin-secret").error_code == 0
        answer = plain_login(client, "plainuser", "plain-secret-77")
        assert answer.error_code == 58
        assert answer.error_message == (
            "Cannot change principals during re-authentication from User.admin: User.plainuser"
        )
        assert client.is_closed_by_peer()


def test_reauthentication_with_another_mechanism_is_closed_unanswered(reauth_broker: BrokerProcess) -> None:
    with RawClient(reauth_broker.port) as client:
        assert plain_login(client, "admin", "admin-secret").error_code == 0
        assert client.request(17, 1, req(17, 1, mechanism="SCRAM-SHA-512")).error_code == 0  # as Kafka
        client.send_raw(client.encode(36, 2, req(36, 2, auth_bytes=b"n,,n=admin,r=abc")))
        assert client.is_closed_by_peer()  # before any answer
    assert "not supported for re-authentication of mechanism 'PLAIN'" in reauth_broker.log()


def test_long_running_consumers_reauthenticate(reauth_broker: BrokerProcess) -> None:
    """confluent-kafka and kafka-python consume for four session lifetimes while a producer writes; each
    re-authenticates in time, so the broker never closes an expired session."""
    from confluent_kafka import Consumer, Producer

    topic = "reauth"
    before = reauth_broker.log().count("its SASL session expired")
    producer = Producer(confluent_config(reauth_broker, "alice"))
    producer.produce(topic, value=b"m0")  # the topic is created before the consumers join
    assert producer.flush(20) == 0
    sent = 1
    consumer = Consumer(
        {**confluent_config(reauth_broker, "bob"), "group.id": "reauth-c", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    other = kafka_python_subscriber(
        topic, group_id="reauth-k", auto_offset_reset="earliest", **kafka_python_config(reauth_broker, "alice")
    )
    got_c: list[bytes] = []
    got_k: list[bytes] = []
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:  # not a wait: 8 s of traffic, four session lifetimes
            producer.produce(topic, value=b"m%d" % sent)
            sent += 1
            producer.poll(0)
            got_c += [m.value() for m in consumer.consume(100, timeout=0.2) if m.error() is None]
            for records in other.poll(200).values():
                got_k += [r.value for r in records]
        assert producer.flush(20) == 0
        end = time.monotonic() + 30  # not a wait_until: gathers both clients' reads, asserted on below
        while (len(got_c) < sent or len(got_k) < sent) and time.monotonic() < end:
            got_c += [m.value() for m in consumer.consume(100, timeout=0.2) if m.error() is None]
            for records in other.poll(200).values():
                got_k += [r.value for r in records]
    finally:
        consumer.close()
        other.close()
    assert len(set(got_c)) == sent and len(set(got_k)) == sent
    assert reauth_broker.log().count("its SASL session expired") == before


# -- the credentials: bootstrap over PLAINTEXT, durable ------------------------------------------------------------


def salted(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha512" if mechanism.endswith("512") else "sha256", password.encode(), salt, iterations)


def test_users_made_over_plaintext_log_in_and_survive_a_restart(tmp_path: Path, rng: random.Random) -> None:
    b = sasl_broker(tmp_path / "b", listeners="SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0")
    bound = b.listener_ports()  # the ports it chose, kept for the restart
    port, sasl_port = bound["PLAINTEXT"], bound["SASL_PLAINTEXT"]
    listeners = f"SASL_PLAINTEXT://127.0.0.1:{sasl_port},PLAINTEXT://127.0.0.1:{port}"
    try:
        salt = rng.randbytes(24)
        upsertion = part(
            51,
            0,
            "ScramCredentialUpsertion",
            name="carol",
            mechanism=2,
            iterations=4096,
            salt=salt,
            salted_password=salted("SCRAM-SHA-512", "carol-pw", salt, 4096),
        )
        too_few = part(
            51,
            0,
            "ScramCredentialUpsertion",
            name="dave",
            mechanism=2,
            iterations=1000,
            salt=salt,
            salted_password=b"x",
        )
        with RawClient(port) as client:  # PLAINTEXT: no authentication, and the request is served
            answer = client.request(51, 0, req(51, 0, deletions=(), upsertions=(upsertion, too_few)))
            # SASL requests on a listener without SASL: Kafka's KafkaApis answers ILLEGAL_SASL_STATE
            assert client.request(17, 1, req(17, 1, mechanism="PLAIN")).error_code == 34
            assert client.request(36, 2, req(36, 2, auth_bytes=b"\0admin\0admin-secret")).error_code == 34
        results = {r.user: (r.error_code, r.error_message) for r in answer.results}
        assert results == {"carol": (0, None), "dave": (93, "Too few iterations")}
        assert (tmp_path / "b" / "data" / "scram-credentials.json").exists()
        USERS["carol"] = ("SCRAM-SHA-512", "carol-pw")
        confluent_round_trip(b, "carol", "carol-before")
        b.stop()
        b = sasl_broker(tmp_path / "b", listeners=listeners)
        confluent_round_trip(b, "carol", "carol-after")
        with RawClient(port) as client:
            described = client.request(
                50, 0, req(50, 0, users=(part(50, 0, "UserName", name="carol"), part(50, 0, "UserName", name="nobody")))
            )
        by_user = {r.user: r for r in described.results}
        assert [(i.mechanism, i.iterations) for i in by_user["carol"].credential_infos] == [(2, 4096)]
        assert by_user["nobody"].error_code == 91
        assert "carol-pw" not in b.log()
    finally:
        USERS.pop("carol", None)
        if b.running:
            b.kill()


def test_a_malformed_jaas_value_stops_the_broker_with_one_line(tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text(
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain."
        'PlainLoginModule required user_admin="s3cret-value"\n'
    )
    b = BrokerProcess(tmp_path / "data", {"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, config=props)
    with pytest.raises(RuntimeError) as failed:
        b.start()
    assert "not terminated by semi-colon" in str(failed.value)
    assert "s3cret-value" not in str(failed.value)


# -- cluster mode: herd_scram_credentials, seen by every node ------------------------------------------------------


def scram_login(client: RawClient, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> Any:
    """A SCRAM exchange over `client` (RFC 5802, written here); the last SaslAuthenticate answer."""
    hash_name = "sha512" if mechanism.endswith("512") else "sha256"
    assert client.request(17, 1, req(17, 1, mechanism=mechanism)).error_code == 0
    bare = f"n={user},r={uuid.uuid4().hex}"
    first = client.request(36, 2, req(36, 2, auth_bytes=f"n,,{bare}".encode()))
    assert first.error_code == 0
    server_first = first.auth_bytes.decode()
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted_password = hashlib.pbkdf2_hmac(hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted_password, b"Client Key", hash_name).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.new(hash_name, client_key).digest(), auth, hash_name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    return client.request(36, 2, req(36, 2, auth_bytes=f"{without_proof},p={proof}".encode()))


def test_cluster_nodes_share_the_credentials(new_cluster, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    new_cluster.overrides.update(
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
    )
    cluster = new_cluster.start(nodes=2, balanced=False)
    first, second = cluster.nodes
    salt = rng.randbytes(16)
    upsertion = part(
        51,
        0,
        "ScramCredentialUpsertion",
        name="erin",
        mechanism=2,
        iterations=4096,
        salt=salt,
        salted_password=salted("SCRAM-SHA-512", "erin-pw", salt, 4096),
    )
    with RawClient(first.port) as client:
        assert plain_login(client, "admin", "admin-secret").error_code == 0
        answer = client.request(51, 0, req(51, 0, deletions=(), upsertions=(upsertion,)))
        assert [(r.user, r.error_code) for r in answer.results] == [("erin", 0)]

    def erin_logs_in() -> bool:
        with RawClient(second.port) as client:
            return scram_login(client, "erin", "erin-pw").error_code == 0

    # the other node follows on the NOTIFY
    wait_until(erin_logs_in, 20, "erin's SCRAM login to succeed on the other node", interval=0.2)
    with RawClient(second.port) as client:
        assert scram_login(client, "erin", "wrong").error_code == 58
    # a node forwards a group's configs request to the group's coordinator, logging in there with the JAAS
    # entry's username and password (herd.server.peers)
    groups = [f"group-{i}" for i in range(12)]
    with RawClient(first.port) as client:
        assert plain_login(client, "admin", "admin-secret").error_code == 0
        resources = tuple(
            part(32, 4, "DescribeConfigsResource", resource_type=32, resource_name=g, configuration_keys=None)
            for g in groups
        )
        described = client.request(
            32, 4, req(32, 4, resources=resources, include_synonyms=False, include_documentation=False)
        )
    assert [(r.resource_name, r.error_code) for r in described.results] == [(g, 0) for g in groups]
    with RawClient(second.port) as client:  # delete through the other node
        assert plain_login(client, "admin", "admin-secret").error_code == 0
        answer = client.request(
            51,
            0,
            req(51, 0, deletions=(part(51, 0, "ScramCredentialDeletion", name="erin", mechanism=2),), upsertions=()),
        )
        assert answer.results[0].error_code == 0

    def no_users() -> bool:
        with RawClient(first.port) as client:
            assert plain_login(client, "admin", "admin-secret").error_code == 0
            described = client.request(50, 0, req(50, 0, users=None))
        return list(described.results) == []

    wait_until(no_users, 20, "DescribeUserScramCredentials to list no user", interval=0.2)
