"""herd's client library over secure listeners of a real `herd serve`: SASL (SCRAM-SHA-512/256, PLAIN) on
SASL_PLAINTEXT, TLS with a client certificate on SSL, both on SASL_SSL; SCRAM users (KIP-554) and ACLs through the
Admin, and a GroupConsumer that joins, fetches and commits through them.

One broker serves four listeners (PLAINTEXT, SASL_PLAINTEXT, SSL requiring a client certificate, SASL_SSL) without
an authorizer; the SCRAM users are created through the PLAINTEXT listener. A second broker has Kafka's
StandardAuthorizer, with User:ANONYMOUS (its PLAINTEXT listener) and User:admin as super users, for the ACLs.
Records are produced with confluent-kafka over PLAINTEXT; everything else is herd's client."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from securebrokers import ADMIN_PASSWORD, ALICE_PASSWORD, CAROL_PASSWORD, SecureBroker, start_secure_broker

from herd.client.admin import Admin
from herd.client.admin_acls import AclBinding, AclFilter, AclOperation, AclPermissionType, PatternType, ResourceType
from herd.client.consumer import GroupConsumer
from herd.client.consumer_protocol import TopicPartition
from herd.client.errors import AuthenticationError, ErrorCode, KafkaError
from herd.client.membership import MemberState
from herd.testing.wait import collect_until_async


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    b = start_secure_broker(tmp_path_factory.mktemp("client-security"))
    assert len(b.ports) == 4, b.broker.log()

    async def users() -> None:
        async with Admin(b.bootstrap()) as admin:
            await admin.upsert_user_scram_credential("alice", ALICE_PASSWORD, "SCRAM-SHA-512", 8192)
            await admin.upsert_user_scram_credential("alice", ALICE_PASSWORD, "SCRAM-SHA-256", 4096)

    asyncio.run(users())
    yield b
    b.broker.stop()


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(30) == 0


def new_topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


# -- SCRAM users ------------------------------------------------------------------------------------------------


def test_scram_users_are_described_created_and_deleted(secure: SecureBroker) -> None:
    async def main() -> None:
        async with Admin(secure.bootstrap()) as admin:
            described = await admin.describe_user_scram_credentials(["alice"])
            assert [u.user for u in described] == ["alice"]
            assert sorted((c.mechanism, c.iterations) for c in described[0].credentials) == [
                ("SCRAM-SHA-256", 4096),
                ("SCRAM-SHA-512", 8192),
            ]
            await admin.upsert_user_scram_credential("dave", "dave-secret", "SCRAM-SHA-512", 4096)
            assert "dave" in [u.user for u in await admin.describe_user_scram_credentials()]
            await admin.delete_user_scram_credential("dave", "SCRAM-SHA-512")
            assert "dave" not in [u.user for u in await admin.describe_user_scram_credentials()]
            with pytest.raises(KafkaError) as caught:
                await admin.describe_user_scram_credentials(["dave"])
            assert caught.value.code == ErrorCode.resource_not_found
            with pytest.raises(KafkaError) as caught:
                await admin.upsert_user_scram_credential("dave", "dave-secret", "SCRAM-SHA-512", 100)
            assert caught.value.code == ErrorCode.unacceptable_credential

    run(main())


# -- SASL -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_admin_over_sasl_scram(secure: SecureBroker, mechanism: str) -> None:
    topic = new_topic()

    async def main() -> None:
        async with Admin(
            secure.bootstrap("SASL_PLAINTEXT"), security=secure.scram("alice", ALICE_PASSWORD, mechanism)
        ) as admin:
            await admin.create_topic(topic, 2, 1)
            assert topic in await admin.list_topics()
            # every connection the client opened (bootstrap, the node's data connection) is on this listener
            assert {port for _, _, port in admin.client._connections} == {secure.ports["SASL_PLAINTEXT"]}

    run(main())


def test_admin_over_sasl_plain(secure: SecureBroker) -> None:
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "carol",
        "sasl.password": CAROL_PASSWORD,
    }

    async def main() -> None:
        async with Admin(secure.bootstrap("SASL_PLAINTEXT"), security=props) as admin:
            assert "__consumer_offsets" in await admin.list_topics()

    run(main())


@pytest.mark.parametrize(
    "props, code",
    [
        ({"sasl.mechanism": "SCRAM-SHA-512", "password": "not-alice-secret"}, ErrorCode.sasl_authentication_failed),
        ({"sasl.mechanism": "SCRAM-SHA-512", "user": "nobody"}, ErrorCode.sasl_authentication_failed),
        (
            {"sasl.mechanism": "PLAIN", "password": "not-carol-secret", "user": "carol"},
            ErrorCode.sasl_authentication_failed,
        ),
    ],
)
def test_refused_credentials_fail_at_once_with_the_brokers_error(
    secure: SecureBroker, props: dict[str, str], code: ErrorCode
) -> None:
    user, password = props.get("user", "alice"), props.get("password", ALICE_PASSWORD)
    security = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": props["sasl.mechanism"],
        "sasl.username": user,
        "sasl.password": password,
    }

    async def main() -> None:
        started = time.monotonic()
        with pytest.raises(AuthenticationError) as caught:
            async with Admin(secure.bootstrap("SASL_PLAINTEXT"), security=security):
                pass
        assert caught.value.code == code and not caught.value.retriable
        assert password not in str(caught.value)
        assert time.monotonic() - started < 5  # not retried until the request timeout

    run(main())


def test_a_mechanism_the_listener_does_not_enable(tmp_path: Path) -> None:
    b = start_secure_broker(tmp_path, {"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    try:
        props = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "carol",
            "sasl.password": CAROL_PASSWORD,
        }

        async def main() -> None:
            with pytest.raises(AuthenticationError) as caught:
                async with Admin(b.bootstrap("SASL_PLAINTEXT"), security=props):
                    pass
            assert caught.value.code == ErrorCode.unsupported_sasl_mechanism
            assert "SCRAM-SHA-512" in str(caught.value)

        run(main())
    finally:
        b.broker.stop()


def test_a_sasl_session_with_a_lifetime_is_renewed_on_a_new_connection(tmp_path: Path) -> None:
    """KIP-368: the broker's connections.max.reauth.ms gives the session a lifetime; the client does not
    re-authenticate, it moves to a new connection once 85% of it has passed."""
    b = start_secure_broker(tmp_path, {"connections.max.reauth.ms": "1500"})
    try:

        async def main() -> None:
            async with Admin(b.bootstrap()) as admin:
                await admin.upsert_user_scram_credential("alice", ALICE_PASSWORD)
            async with Admin(b.bootstrap("SASL_PLAINTEXT"), security=b.scram("alice", ALICE_PASSWORD)) as admin:
                first = await admin.client.any_connection()
                await admin.list_topics()
                await asyncio.sleep(1.4)
                assert "__consumer_offsets" in await admin.list_topics()
                assert first.closed and await admin.client.any_connection() is not first

        run(main())
    finally:
        b.broker.stop()


def test_a_member_whose_credentials_are_deleted_stops_at_its_next_login(tmp_path: Path) -> None:
    """The member's connections log in again when their session ends (connections.max.reauth.ms); the credential is
    gone by then, so the login is refused: a fatal error for the member (FAILED, AuthenticationError), not a
    retry loop."""
    b = start_secure_broker(tmp_path, {"connections.max.reauth.ms": "1500", "group.min.session.timeout.ms": "500"})
    try:

        async def main() -> None:
            async with Admin(b.bootstrap()) as admin:
                await admin.upsert_user_scram_credential("alice", ALICE_PASSWORD)
                await admin.create_topic("events", 1, 1)
            async with GroupConsumer(
                b.bootstrap("SASL_PLAINTEXT"),
                "doomed",
                ["events"],
                heartbeat_interval_ms=200,
                session_timeout_ms=3000,
                security=b.scram("alice", ALICE_PASSWORD),
            ) as consumer:
                await consumer.wait_for_assignment(20)
                async with Admin(b.bootstrap()) as admin:
                    await admin.delete_user_scram_credential("alice", "SCRAM-SHA-512")
                await consumer.member.wait_for(lambda m: m.state is MemberState.FAILED, 20)
                assert isinstance(consumer.member.machine.error, AuthenticationError)
                assert consumer.member.machine.error.code == ErrorCode.sasl_authentication_failed

        run(main())
    finally:
        b.broker.stop()


def test_group_consumer_over_sasl_ssl_joins_fetches_and_commits(secure: SecureBroker) -> None:
    topic, group = new_topic(), f"g-{uuid.uuid4().hex[:6]}"
    security = secure.scram("alice", ALICE_PASSWORD, protocol="SASL_SSL")

    async def main() -> None:
        async with Admin(secure.bootstrap("SASL_SSL"), security=security) as admin:
            await admin.create_topic(topic, 2, 1)
        produce(secure.bootstrap(), topic, 10)
        async with GroupConsumer(
            secure.bootstrap("SASL_SSL"), group, [topic], auto_offset_reset="earliest", security=security
        ) as consumer:
            assert await consumer.wait_for_assignment(20) == {TopicPartition(topic, 0), TopicPartition(topic, 1)}

            async def poll() -> list[Any]:
                return [r for records in (await consumer.getmany(timeout_ms=200)).values() for r in records]

            got = await collect_until_async(poll, lambda got: len(got) >= 10, 20)
            await consumer.commit()
        assert len(got) == 10
        async with Admin(secure.bootstrap("SASL_SSL"), security=security) as admin:
            _, rows = await admin.describe_offsets(group)
            assert sorted((r.partition, r.current_offset) for r in rows) == [(0, 5), (1, 5)]

    run(main())


# -- TLS --------------------------------------------------------------------------------------------------------


def test_admin_over_tls_with_a_client_certificate(secure: SecureBroker) -> None:
    async def main() -> None:
        for host in ("127.0.0.1", "localhost"):  # the broker's certificate names both: the host name check passes
            async with Admin(f"{host}:{secure.ports['SSL']}", security=secure.mtls()) as admin:
                assert "__consumer_offsets" in await admin.list_topics()
                assert await admin.list_groups() is not None
        librdkafka = {
            "security.protocol": "SSL",
            "ssl.ca.location": str(secure.pki.ca_pem),
            "ssl.certificate.location": str(secure.pki.client_cert),
            "ssl.key.location": str(secure.pki.client_key),
        }
        async with Admin(secure.bootstrap("SSL"), security=librdkafka) as admin:
            assert "__consumer_offsets" in await admin.list_topics()

    run(main())


def test_tls_failures(secure: SecureBroker) -> None:
    pki = secure.pki

    async def main() -> None:
        untrusted = {**secure.mtls(), "ssl.truststore.location": str(pki.untrusted_ca_pem)}
        with pytest.raises(AuthenticationError, match="TLS handshake .* failed: .*certificate"):
            async with Admin(secure.bootstrap("SSL"), security=untrusted):
                pass
        stranger = {
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca_pem),
            "ssl.certificate.location": str(pki.untrusted_client_cert),
            "ssl.key.location": str(pki.untrusted_client_key),
        }
        for refused in (stranger, {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_pem)}):
            started = time.monotonic()
            with pytest.raises(KafkaError, match="client's certificate"):
                async with Admin(secure.bootstrap("SSL"), security=refused, request_timeout_ms=5000):
                    pass
            assert time.monotonic() - started < 5

    run(main())


# -- ACLs -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authorizing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    b = start_secure_broker(
        tmp_path_factory.mktemp("client-acls"),
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS;User:admin",
        },
    )

    async def users() -> None:
        async with Admin(b.bootstrap()) as admin:
            await admin.upsert_user_scram_credential("admin", ADMIN_PASSWORD)
            await admin.upsert_user_scram_credential("alice", ALICE_PASSWORD)

    asyncio.run(users())
    yield b
    b.broker.stop()


def binding(
    topic: str,
    op: AclOperation,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = "User:alice",
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, pattern, principal, "*", op, permission)


def test_acls_are_created_described_by_every_filter_and_deleted(authorizing: SecureBroker) -> None:
    prefix = f"acl-{uuid.uuid4().hex[:6]}"
    bindings = [
        binding(f"{prefix}-a", AclOperation.READ),
        binding(f"{prefix}-a", AclOperation.WRITE),
        binding(prefix, AclOperation.DESCRIBE, PatternType.PREFIXED),
        binding(f"{prefix}-a", AclOperation.READ, principal="User:bob", permission=AclPermissionType.DENY),
        AclBinding(
            ResourceType.GROUP,
            f"{prefix}-g",
            PatternType.LITERAL,
            "User:alice",
            "10.0.0.1",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
    ]

    async def main() -> None:
        async with Admin(
            authorizing.bootstrap("SASL_PLAINTEXT"), security=authorizing.scram("admin", ADMIN_PASSWORD)
        ) as admin:
            await admin.create_acls(bindings)
            mine = [a for a in await admin.describe_acls() if a.resource_name.startswith(prefix)]
            assert sorted(mine, key=repr) == sorted(bindings, key=repr)
            literal_a = AclFilter(ResourceType.TOPIC, f"{prefix}-a", PatternType.LITERAL)
            assert len(await admin.describe_acls(literal_a)) == 3
            match_a = AclFilter(ResourceType.TOPIC, f"{prefix}-a", PatternType.MATCH)
            assert len(await admin.describe_acls(match_a)) == 4  # the prefixed ACL applies too
            assert await admin.describe_acls(AclFilter(principal="User:bob", resource_name=f"{prefix}-a")) == [
                bindings[3]
            ]
            assert await admin.describe_acls(AclFilter(host="10.0.0.1")) == [bindings[4]]
            assert await admin.describe_acls(AclFilter(resource_name=f"{prefix}-a", operation=AclOperation.WRITE)) == [
                bindings[1]
            ]
            assert (
                len(
                    await admin.describe_acls(AclFilter(resource_name=f"{prefix}-a", permission=AclPermissionType.DENY))
                )
                == 1
            )
            deleted = await admin.delete_acls(
                [
                    AclFilter(ResourceType.TOPIC, prefix, PatternType.PREFIXED),
                    AclFilter(ResourceType.GROUP, f"{prefix}-g", PatternType.ANY),
                ]
            )
            assert sorted(deleted, key=repr) == sorted([bindings[2], bindings[4]], key=repr)
            deleted = await admin.delete_acls(
                [AclFilter(ResourceType.TOPIC, f"{prefix}-a", PatternType.LITERAL, principal="User:alice")]
            )
            assert sorted(deleted, key=repr) == sorted(bindings[:2], key=repr)
            assert [a for a in await admin.describe_acls() if a.resource_name.startswith(prefix)] == [bindings[3]]
            await admin.delete_acls([AclFilter(resource_name=f"{prefix}-a")])

    run(main())


def test_acls_decide_what_a_sasl_user_may_do(authorizing: SecureBroker) -> None:
    topic = new_topic()
    alice = authorizing.scram("alice", ALICE_PASSWORD)

    async def main() -> None:
        async with Admin(authorizing.bootstrap()) as admin:  # User:ANONYMOUS, a super user here
            await admin.create_topic(topic, 1, 1)
        async with Admin(authorizing.bootstrap("SASL_PLAINTEXT"), security=alice) as admin:
            assert topic not in await admin.list_topics()  # no DESCRIBE: Metadata leaves it out
        async with Admin(
            authorizing.bootstrap("SASL_PLAINTEXT"), security=authorizing.scram("admin", ADMIN_PASSWORD)
        ) as admin:
            await admin.create_acls([binding(topic, AclOperation.DESCRIBE)])
        async with Admin(authorizing.bootstrap("SASL_PLAINTEXT"), security=alice) as admin:
            assert topic in await admin.list_topics()

    run(main())


def test_scram_credentials_need_the_clusters_describe_and_alter(authorizing: SecureBroker) -> None:
    """Kafka answers DescribeUserScramCredentials without DESCRIBE on the cluster, and AlterUserScramCredentials
    without ALTER, with CLUSTER_AUTHORIZATION_FAILED."""

    async def main() -> None:
        async with Admin(
            authorizing.bootstrap("SASL_PLAINTEXT"), security=authorizing.scram("alice", ALICE_PASSWORD)
        ) as admin:
            with pytest.raises(KafkaError) as caught:
                await admin.describe_user_scram_credentials()
            assert caught.value.code == ErrorCode.cluster_authorization_failed
            with pytest.raises(KafkaError) as caught:
                await admin.upsert_user_scram_credential("alice", "a-new-password")
            assert caught.value.code == ErrorCode.cluster_authorization_failed

    run(main())
