"""ACLs end to end on real `herd serve` processes with authorizer.class.name set: CreateAcls, DescribeAcls and
DeleteAcls through confluent-kafka's and kafka-python's admin clients (every filter form) and raw requests (Kafka's
validations and refusals), and their effect on real clients (aiokafka, confluent-kafka): a consumer denied READ
on its group or topic, a producer denied WRITE, Metadata hiding the topics a principal may not describe. ACLs
survive a restart (acls.json) and are shared by the nodes of a cluster (herd_acls).

Clients on a PLAINTEXT listener are all User:ANONYMOUS (authentication is another part of issue 19), so the
broker runs with allow.everyone.if.no.acl.found=true: ANONYMOUS may do whatever no ACL speaks of (creating ACLs
among it), and DENY ACLs for User:ANONYMOUS (or User:*) on chosen topics and groups make the denials. Decisions
for other principals are tested through the handlers (tests/unit/server/test_acl_apis.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from brokers import BrokerProcess
from groupmembers import create_topic, wait_for
from kio.schema.errors import ErrorCode
from rawkafka import RawClient, part, req

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"
OPEN = {"authorizer.class.name": AUTHORIZER, "allow.everyone.if.no.acl.found": "true", "num.partitions": "1"}

# Kafka's codes
TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY_TYPE, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ANY_OP, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
ANY_PERM, DENY, ALLOW = 1, 2, 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("acls") / "data", OPEN).start()
    yield b
    b.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_acls(port: int, *acls: tuple[Any, ...], version: int = 3) -> list[tuple[int, str | None]]:
    """Raw CreateAcls of (type, name, pattern, principal, host, operation, permission) tuples."""
    creations = tuple(
        part(
            30,
            version,
            "AclCreation",
            resource_type=a[0],
            resource_name=a[1],
            resource_pattern_type=a[2],
            principal=a[3],
            host=a[4],
            operation=a[5],
            permission_type=a[6],
        )
        for a in acls
    )
    with RawClient(port) as c:
        r = c.request(30, version, req(30, version, creations=creations))
    return [(int(x.error_code), x.error_message) for x in r.results]


def describe_acls(
    port: int,
    rtype: int = ANY_TYPE,
    name: str | None = None,
    pattern: int = ANY_TYPE,
    principal: str | None = None,
    host: str | None = None,
    op: int = ANY_OP,
    perm: int = ANY_PERM,
    version: int = 3,
) -> Any:
    with RawClient(port) as c:
        return c.request(
            29,
            version,
            req(
                29,
                version,
                resource_type_filter=rtype,
                resource_name_filter=name,
                pattern_type_filter=pattern,
                principal_filter=principal,
                host_filter=host,
                operation=op,
                permission_type=perm,
            ),
        )


def delete_acls(port: int, *filters: tuple[Any, ...], version: int = 3) -> Any:
    entries = tuple(
        part(
            31,
            version,
            "DeleteAclsFilter",
            resource_type_filter=f[0],
            resource_name_filter=f[1],
            pattern_type_filter=f[2],
            principal_filter=f[3],
            host_filter=f[4],
            operation=f[5],
            permission_type=f[6],
        )
        for f in filters
    )
    with RawClient(port) as c:
        return c.request(31, version, req(31, version, filters=entries))


def described(response: Any) -> set[tuple[Any, ...]]:
    return {
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
        for r in response.resources
        for a in r.acls
    }


# -- the ACL APIs ------------------------------------------------------------------------------------------------


def test_confluent_admin_creates_describes_and_deletes_with_every_filter_form(broker) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    t, p = unique("cf-topic"), unique("cf-pre")
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            t,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        ),
        AclBinding(
            ResourceType.TOPIC,
            p,
            ResourcePatternType.PREFIXED,
            "User:bob",
            "10.0.0.1",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        ),
        AclBinding(
            ResourceType.GROUP,
            p,
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        ),
        # an ACL on the cluster ends allow.everyone.if.no.acl.found there: ANONYMOUS keeps ALTER (and so
        # DESCRIBE) to go on managing ACLs
        AclBinding(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            ANON,
            "*",
            AclOperation.ALTER,
            AclPermissionType.ALLOW,
        ),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(10) is None

    def find(flt: AclBindingFilter) -> set[AclBinding]:
        return set(admin.describe_acls(flt).result(10))

    def flt(
        rtype: Any = ResourceType.ANY,
        name: str | None = None,
        pattern: Any = ResourcePatternType.ANY,
        principal: str | None = None,
        host: str | None = None,
        op: Any = AclOperation.ANY,
        perm: Any = AclPermissionType.ANY,
    ) -> AclBindingFilter:
        return AclBindingFilter(rtype, name, pattern, principal, host, op, perm)

    assert set(bindings) <= find(flt())
    assert find(flt(ResourceType.TOPIC, t, ResourcePatternType.LITERAL)) == {bindings[0]}
    assert find(flt(ResourceType.TOPIC, p + "-x", ResourcePatternType.MATCH)) == {bindings[1]}
    assert find(flt(ResourceType.TOPIC, p, ResourcePatternType.PREFIXED)) == {bindings[1]}
    assert find(flt(ResourceType.TOPIC, p, ResourcePatternType.LITERAL)) == set()
    assert find(flt(name=p)) == {bindings[1], bindings[2]}  # ANY pattern: the exact name, any type
    assert find(flt(principal="User:bob")) == {bindings[1]}
    assert find(flt(host="10.0.0.1")) == {bindings[1]}
    assert find(flt(op=AclOperation.ALL)) == {bindings[2]}
    assert find(flt(ResourceType.BROKER)) == {bindings[3]}
    assert bindings[1] in find(flt(perm=AclPermissionType.DENY))

    deleted = admin.delete_acls([flt(principal="User:alice"), flt(ResourceType.TOPIC, p, ResourcePatternType.ANY)])
    results = [f.result(10) for f in deleted.values()]
    assert set(results[0]) == {bindings[0], bindings[2]} and results[1] == [bindings[1]]
    assert find(flt(name=t)) == set() and find(flt(name=p)) == set()
    assert find(flt(ResourceType.BROKER)) == {bindings[3]}
    for future in admin.delete_acls([flt(ResourceType.BROKER)]).values():
        assert future.result(10) == [bindings[3]]


def test_kafka_python_admin_creates_describes_and_deletes(broker) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        name = unique("kp")
        acl = ACL(
            "User:carol",
            "*",
            ACLOperation.DESCRIBE,
            ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, name, ACLResourcePatternType.PREFIXED),
        )
        created = admin.create_acls([acl])
        assert created["succeeded"] == [acl] and not created["failed"]
        match = ACLFilter(
            "User:carol",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, name + "-x", ACLResourcePatternType.MATCH),
        )
        found, error = admin.describe_acls(match)
        assert found == [acl] and error.errno == 0
        (results,) = admin.delete_acls([match])
        assert list(results[1]) == [acl]
        assert admin.describe_acls(match)[0] == []
    finally:
        admin.close()


def test_validations_and_versions(broker) -> None:
    name = unique("v")
    results = create_acls(
        broker.port,
        (TOPIC, name, LITERAL, ANON, "*", READ, ALLOW),
        (TOPIC, "", LITERAL, ANON, "*", READ, ALLOW),
        (TOPIC, "*", PREFIXED, ANON, "*", READ, ALLOW),
        (CLUSTER, "my-cluster", LITERAL, ANON, "*", ALTER, ALLOW),
        (TOPIC, name, MATCH, ANON, "*", READ, ALLOW),
        (TOPIC, name, LITERAL, "ANONYMOUS", "*", READ, ALLOW),
        (TOPIC, name, LITERAL, ANON, "*", ANY_OP, ALLOW),
        (TOPIC, name, LITERAL, ANON, "*", READ, ANY_PERM),
        (ANY_TYPE, name, LITERAL, ANON, "*", READ, ALLOW),
    )
    assert results[0] == (0, None)
    assert [code for code, _ in results[1:]] == [ErrorCode.invalid_request] * 8
    assert results[1][1] == "Invalid empty resource name"
    assert "kafka-cluster" in results[3][1]
    # creating an ACL twice changes nothing; v1 and v2 work too
    assert create_acls(broker.port, (TOPIC, name, LITERAL, ANON, "*", READ, ALLOW), version=1) == [(0, None)]
    for version in (1, 2, 3):
        r = describe_acls(broker.port, TOPIC, name, LITERAL, version=version)
        assert r.error_code == 0 and described(r) == {(TOPIC, name, LITERAL, ANON, "*", READ, ALLOW)}
    bad = describe_acls(broker.port, TOPIC, name, 0)
    assert bad.error_code == ErrorCode.invalid_request and not bad.resources
    r = delete_acls(
        broker.port,
        (TOPIC, name, 0, None, None, ANY_OP, ANY_PERM),
        (TOPIC, name, LITERAL, None, None, ANY_OP, ANY_PERM),
        (TOPIC, name, LITERAL, None, None, ANY_OP, ANY_PERM),
        version=2,
    )
    assert r.filter_results[0].error_code == ErrorCode.invalid_request
    assert [len(f.matching_acls) for f in r.filter_results[1:]] == [1, 1]  # both filters answer the deleted ACL
    assert not describe_acls(broker.port, TOPIC, name).resources


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(broker_factory) -> None:
    b = broker_factory()
    assert create_acls(b.port, (TOPIC, "t", LITERAL, ANON, "*", READ, ALLOW))[0][0] == ErrorCode.security_disabled
    assert describe_acls(b.port).error_code == ErrorCode.security_disabled
    r = delete_acls(b.port, (ANY_TYPE, None, ANY_TYPE, None, None, ANY_OP, ANY_PERM))
    assert r.filter_results[0].error_code == ErrorCode.security_disabled


# -- what the ACLs allow -----------------------------------------------------------------------------------------


def _deny(broker: BrokerProcess, rtype: int, name: str, op: int, pattern: int = LITERAL) -> None:
    assert create_acls(broker.port, (rtype, name, pattern, ANON, "*", op, DENY)) == [(0, None)]


def test_consumer_denied_read_on_its_group_or_topic(broker) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    topic, other, group, free_group = unique("c-t"), unique("c-o"), unique("c-g"), unique("c-f")
    create_topic(broker.bootstrap, topic, 1)
    create_topic(broker.bootstrap, other, 1)
    _deny(broker, GROUP, group, READ)
    _deny(broker, TOPIC, other, READ)

    async def consume(group_id: str, name: str) -> Any:
        consumer = AIOKafkaConsumer(
            name, bootstrap_servers=broker.bootstrap, group_id=group_id, auto_offset_reset="earliest"
        )
        try:
            await consumer.start()
            return await asyncio.wait_for(consumer.getmany(timeout_ms=3000), 20)
        finally:
            await consumer.stop()

    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(consume(group, topic))
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(consume(free_group, other))
    assert asyncio.run(consume(free_group, topic)) == {}  # allowed: nothing to read yet


def test_producer_denied_write_gets_topic_authorization_failed(broker) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TopicAuthorizationFailedError

    denied, allowed = unique("p-denied"), unique("p-ok")
    create_topic(broker.bootstrap, denied, 1)
    create_topic(broker.bootstrap, allowed, 1)
    _deny(broker, TOPIC, denied, WRITE)

    async def produce(name: str) -> Any:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
        try:
            await producer.start()
            return await asyncio.wait_for(producer.send_and_wait(name, b"v"), 20)
        finally:
            await producer.stop()

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(produce(denied))
    assert asyncio.run(produce(allowed)).offset == 0


def test_metadata_hides_undescribable_topics(broker) -> None:
    from confluent_kafka.admin import AdminClient

    hidden, seen = unique("m-hidden"), unique("m-seen")
    create_topic(broker.bootstrap, hidden, 1)
    create_topic(broker.bootstrap, seen, 1)
    _deny(broker, TOPIC, hidden, DESCRIBE)
    listed = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    assert seen in listed and hidden not in listed
    with RawClient(broker.port) as c:
        r = c.request(
            3,
            12,
            req(
                3,
                12,
                topics=(
                    part(3, 12, "MetadataRequestTopic", name=hidden, topic_id=None),
                    part(3, 12, "MetadataRequestTopic", name=seen, topic_id=None),
                ),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=True,
            ),
        )
    by_name = {t.name: t for t in r.topics}
    assert by_name[hidden].error_code == ErrorCode.topic_authorization_failed and not by_name[hidden].partitions
    assert by_name[seen].error_code == 0
    # everything is allowed on `seen` (no ACL names it): every topic operation
    assert by_name[seen].topic_authorized_operations == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def test_super_users_bypass_deny_and_the_default_is_deny(broker_factory) -> None:
    b = broker_factory({"authorizer.class.name": AUTHORIZER, "super.users": f"User:admin;{ANON}"}, name="super")
    topic = unique("s")
    create_topic(b.bootstrap, topic, 1)  # no ACL at all and allow.everyone false: only the super user may
    assert create_acls(b.port, (TOPIC, topic, LITERAL, "User:*", "*", ALL, DENY)) == [(0, None)]
    from confluent_kafka.admin import AdminClient

    assert topic in AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics
    closed = broker_factory({"authorizer.class.name": AUTHORIZER}, name="closed")
    assert (
        create_acls(closed.port, (TOPIC, "t", LITERAL, ANON, "*", READ, ALLOW))[0][0]
        == ErrorCode.cluster_authorization_failed
    )
    assert describe_acls(closed.port).error_code == ErrorCode.cluster_authorization_failed
    with RawClient(closed.port) as c:
        r = c.request(
            3, 12, req(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        )
    assert r.topics == ()  # not even __consumer_offsets may be described


def test_acls_survive_a_restart(broker_factory) -> None:
    b = broker_factory(OPEN, name="restart")
    acl = (TOPIC, "kept", PREFIXED, "User:dora", "*", WRITE, ALLOW)
    assert create_acls(b.port, acl) == [(0, None)]
    b.stop()
    b.start()
    assert described(describe_acls(b.port)) == {acl}
    assert (b.data_dir / "acls.json").exists()


# -- a cluster ---------------------------------------------------------------------------------------------------


def test_acls_are_shared_by_the_nodes_of_a_cluster(pg_test_url: str, tmp_path) -> None:
    from herd.testing import HerdCluster

    cluster = HerdCluster(tmp_path / "cluster", overrides=OPEN, database_url=pg_test_url, faults=False)
    try:
        cluster.start(nodes=2, balanced=False)
        first, second = (node.port for node in cluster.nodes)
        topic = unique("shared")
        acl = (TOPIC, topic, LITERAL, ANON, "*", DESCRIBE, DENY)
        assert create_acls(first, acl) == [(0, None)]
        wait_for(
            lambda: described(describe_acls(second, TOPIC)) >= {acl},
            10,
            "the second node seeing the ACL",
            interval=0.05,
        )
        create_topic(cluster.bootstrap, topic, 1)
        with RawClient(second) as c:
            r = c.request(
                3,
                12,
                req(
                    3,
                    12,
                    topics=(part(3, 12, "MetadataRequestTopic", name=topic, topic_id=None),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                ),
            )
        assert r.topics[0].error_code == ErrorCode.topic_authorization_failed
        r = delete_acls(second, (TOPIC, topic, LITERAL, None, None, ANY_OP, ANY_PERM))
        assert len(r.filter_results[0].matching_acls) == 1
        wait_for(
            lambda: not describe_acls(first, TOPIC, topic).resources, 10, "the first node forgetting it", interval=0.05
        )
        kept = (GROUP, unique("kept"), LITERAL, ANON, "*", READ, DENY)
        assert create_acls(second, kept) == [(0, None)]
        for i in range(2):  # every node stops: the ACLs are in PostgreSQL, not in any node
            cluster.terminate(i)
        third = cluster.nodes[cluster.add_node()].port
        assert described(describe_acls(third, GROUP)) >= {kept}
    finally:
        cluster.close()


def test_transactional_producers_need_write_on_their_transactional_id(broker) -> None:
    from confluent_kafka import KafkaException, Producer

    topic, allowed, denied = unique("tx-t"), unique("tx-ok"), unique("tx-denied")
    create_topic(broker.bootstrap, topic, 1)
    _deny(broker, 5, denied, WRITE)  # TRANSACTIONAL_ID
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": allowed})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"v")
    producer.commit_transaction(15)  # markers written (WriteTxnMarkers needs no ACL on one node)
    refused = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": denied})
    with pytest.raises(KafkaException) as error:
        refused.init_transactions(15)
    assert error.value.args[0].code() == ErrorCode.transactional_id_authorization_failed
