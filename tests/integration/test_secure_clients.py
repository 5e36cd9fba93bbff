"""The three real clients on SASL_SSL with SCRAM-SHA-512 against a broker that enforces ACLs (Kafka's
StandardAuthorizer semantics): alice, who holds READ on the `sec-` groups and WRITE/READ/CREATE on the `sec-`
topics, produces, consumes in a group and commits with confluent-kafka, kafka-python and aiokafka; mallory, who
authenticates just as well but may only read topic `sec-open`, gets TOPIC_AUTHORIZATION_FAILED when producing and
GROUP_AUTHORIZATION_FAILED when consuming `sec-open` in a group, each through the error type of its client. The users
and ACLs
are made over the broker's PLAINTEXT listener, whose User:ANONYMOUS is the super user (as a loopback-only admin
listener would be)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clients import aiokafka_group_round_trip, confluent_group_round_trip, kafka_python_group_round_trip
from groupmembers import KAFKA_PYTHON_METADATA_MS
from securebrokers import SecureBroker, start_secure_broker

from herd.testing.wait import wait_until, wait_until_async

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = {"alice": "alice-secret-512", "mallory": "mallory-secret-512"}
CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka"]


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    broker = start_secure_broker(
        Path(tmp_path_factory.mktemp("secure-clients")),
        {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS", "group.initial.rebalance.delay.ms": "0"},
    )
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
        upserts = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
            )
            for user, password in USERS.items()
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)
        acls = [
            AclBinding(
                ResourceType.TOPIC,
                "sec-",
                ResourcePatternType.PREFIXED,
                "User:alice",
                "*",
                operation,
                AclPermissionType.ALLOW,
            )
            for operation in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE)
        ]
        acls.append(
            AclBinding(
                ResourceType.GROUP,
                "sec-",
                ResourcePatternType.PREFIXED,
                "User:alice",
                "*",
                AclOperation.READ,
                AclPermissionType.ALLOW,
            )
        )
        # mallory may read one topic, so that her consumers get as far as the group
        acls.append(
            AclBinding(
                ResourceType.TOPIC,
                "sec-open",
                ResourcePatternType.LITERAL,
                "User:mallory",
                "*",
                AclOperation.READ,
                AclPermissionType.ALLOW,
            )
        )
        for future in admin.create_acls(acls).values():
            future.result(30)
        for future in admin.create_topics([NewTopic("sec-open", 1, 1)]).values():
            future.result(30)
        yield broker
        log = broker.broker.log()
        assert not [p for p in USERS.values() if p in log], "a password is in the broker's log"
        assert "Traceback" not in log
    finally:
        broker.broker.stop()


def _confluent(secure: SecureBroker, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": secure.bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secure.pki.ca_pem),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def _kafka_python(secure: SecureBroker, user: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": secure.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(secure.pki.ca_pem),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


def _aiokafka(secure: SecureBroker, user: str) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    return {
        "bootstrap_servers": secure.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_context": create_ssl_context(cafile=str(secure.pki.ca_pem)),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


# -- allowed: produce, consume in a group, commit ------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_an_authorized_user_produces_consumes_in_a_group_and_commits(secure: SecureBroker, client: str) -> None:
    round_trip, config = {
        "confluent-kafka": (confluent_group_round_trip, _confluent),
        "kafka-python": (kafka_python_group_round_trip, _kafka_python),
        "aiokafka": (aiokafka_group_round_trip, _aiokafka),
    }[client]
    topic = f"sec-{client}"
    values, committed = round_trip(config(secure, "alice"), topic, 20, f"sec-{topic}")
    assert sorted(values) == sorted(b"v%d" % i for i in range(20)) and committed == 20


# -- denied: the right error through each client -------------------------------------------------------------------


def _confluent_denied(secure: SecureBroker) -> tuple[str, str]:
    from confluent_kafka import Consumer, KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({**_confluent(secure, "mallory"), "message.timeout.ms": 20000})
    producer.produce("sec-denied", value=b"x", on_delivery=lambda error, _: errors.append(error))
    producer.flush(30)
    consumer = Consumer({**_confluent(secure, "mallory"), "group.id": "sec-mallory", "auto.offset.reset": "earliest"})
    consumer.subscribe(["sec-open"])

    def group_error() -> list[Any] | None:
        message = consumer.poll(0.5)
        return [message.error()] if message is not None and message.error() is not None else None

    try:
        (error,) = wait_until(group_error, 30, "an error polled by mallory's consumer", interval=0)
    finally:
        consumer.close()
    names = {
        KafkaError.TOPIC_AUTHORIZATION_FAILED: "TOPIC_AUTHORIZATION_FAILED",
        KafkaError.GROUP_AUTHORIZATION_FAILED: "GROUP_AUTHORIZATION_FAILED",
    }
    assert errors and errors[0] is not None, (errors, error)
    return names.get(errors[0].code(), str(errors[0])), names.get(error.code(), str(error))


def _kafka_python_denied(secure: SecureBroker) -> tuple[str, str]:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    producer = KafkaProducer(**_kafka_python(secure, "mallory"), max_block_ms=20000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("sec-denied", value=b"x").get(30)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(
        "sec-open",
        group_id="sec-mallory",
        metadata_max_age_ms=KAFKA_PYTHON_METADATA_MS,
        **_kafka_python(secure, "mallory"),
    )
    try:
        with pytest.raises(GroupAuthorizationFailedError):

            def poll() -> bool:
                consumer.poll(500)
                return False  # only the error ends the wait: polled for 30 s without it, the wait fails

            wait_until(poll, 30, "GroupAuthorizationFailedError from poll", interval=0)
    finally:
        consumer.close()
    return "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"


def _aiokafka_denied(secure: SecureBroker) -> tuple[str, str]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    async def run() -> None:
        producer = AIOKafkaProducer(**_aiokafka(secure, "mallory"), request_timeout_ms=20000)
        await producer.start()
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                await asyncio.wait_for(producer.send_and_wait("sec-denied", value=b"x"), 30)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("sec-open", group_id="sec-mallory", **_aiokafka(secure, "mallory"))
        try:
            with pytest.raises(GroupAuthorizationFailedError):
                await consumer.start()

                async def fetch() -> bool:
                    await consumer.getmany(timeout_ms=500)
                    return False  # only the error ends the wait: fetched for 30 s without it, the wait fails

                await wait_until_async(fetch, 30, "GroupAuthorizationFailedError from getmany", interval=0)
        finally:
            await consumer.stop()

    asyncio.run(run())
    return "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"


@pytest.mark.parametrize("client", CLIENTS)
def test_an_authenticated_user_without_acls_gets_kafkas_authorization_errors(secure: SecureBroker, client: str) -> None:
    denied = {"confluent-kafka": _confluent_denied, "kafka-python": _kafka_python_denied, "aiokafka": _aiokafka_denied}[
        client
    ]
    assert denied(secure) == ("TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED")
