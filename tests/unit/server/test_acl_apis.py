"""Authorization in the handlers, for several principals: a real broker (segment store on the in-memory filesystem,
real group and transaction coordinators) with authorizer.class.name set and its ACLs in acls.json, asked through
each handler with a RequestContext whose Session names the principal and host, as a SASL or TLS connection will.
No sockets; every response is encoded as the connection would send it.

The ACLs (besides the super user User:admin):
- alice: READ on topics prefixed "orders", WRITE on "payments", READ on group "g1", WRITE on transactional id
  "tx-a"; and from host 10.0.0.9 only, READ on "audit";
- everyone (User:*): DENY DESCRIBE on "secret", ALLOW READ on "secret" (which implies DESCRIBE: deny wins).
allow.everyone.if.no.acl.found is false: bob, who no ACL names, may do nothing but what User:* may."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from types import ModuleType
from typing import Any

from batches import make_batch
from handlers import answered
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from herd.config import BrokerConfig
from herd.log.fs import MemoryFileSystem
from herd.log.postgres.errors import MetadataWriteError
from herd.log.store import SegmentStore
from herd.protocol.messages import EncodedBody, RequestHeader, encode_response, request_class
from herd.protocol.values import MessageBuilder, make
from herd.runtime import CoordinatorRuntime
from herd.security.acl_store import SharedAclStore, open_file_store
from herd.security.acls import Acl, Authorizer, Operation, PatternType, Permission, ResourceType
from herd.security.credentials import FileCredentialStore, SharedCredentialStore
from herd.server.apis import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    alter_user_scram_credentials,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_groups,
    delete_records,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_groups,
    describe_producers,
    describe_topic_partitions,
    describe_transactions,
    describe_user_scram_credentials,
    end_txn,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_transactions,
    metadata,
    offset_commit,
    offset_fetch,
    produce,
    sync_group,
    write_txn_markers,
)
from herd.server.broker import Broker, RequestContext, Session
from herd.server.transactions import transaction_runtime

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T, G, X, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
Op = Operation
ALLOW, DENY = Permission.ALLOW, Permission.DENY
ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"

ACLS = [
    Acl(T, "orders", PRE, ALICE, "*", Op.READ, ALLOW),
    Acl(T, "payments", LIT, ALICE, "*", Op.WRITE, ALLOW),
    Acl(G, "g1", LIT, ALICE, "*", Op.READ, ALLOW),
    Acl(X, "tx-a", LIT, ALICE, "*", Op.WRITE, ALLOW),
    Acl(T, "audit", LIT, ALICE, "10.0.0.9", Op.READ, ALLOW),
    Acl(T, "secret", LIT, "User:*", "*", Op.DESCRIBE, DENY),
    Acl(T, "secret", LIT, "User:*", "*", Op.READ, ALLOW),
]


class Node:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def ask(self, principal: str, api: ModuleType, version: int, host: str = "127.0.0.1", **values: Any) -> Any:
        request = make(request_class(api.API_KEY, version), values)
        session = Session(principal=principal, host=host)
        ctx = RequestContext(self.broker, RequestHeader(api.API_KEY, version, 1, "test"), host, session)
        response = await answered(api.handle(ctx, request))
        assert encode_response(1, response)
        if isinstance(response, EncodedBody):  # packed by the handler (OffsetFetch): read it as a client does
            return entity_reader(response.schema)(response.body, 0)[0]
        return response

    @staticmethod
    def build(api: ModuleType, version: int) -> MessageBuilder:
        return MessageBuilder(request_class(api.API_KEY, version))


def run(body: Callable[[Node], Awaitable[None]]) -> None:
    async def main() -> None:
        config = BrokerConfig.from_properties(
            {
                "offsets.topic.num.partitions": "1",
                "transaction.state.log.num.partitions": "1",
                "authorizer.class.name": AUTHORIZER,
                "super.users": ADMIN,
                "group.initial.rebalance.delay.ms": "0",
            }
        )
        store = SegmentStore("/data", MemoryFileSystem())
        broker = Broker(config, store)
        broker.start()
        for name in ("orders-1", "payments", "secret", "audit"):
            broker.cluster.create_topic(name, 1, {})
        broker.use_acls(open_file_store(config, store.fs, store.root_dir))
        await broker.acl_store.create(ACLS)
        broker.credentials = FileCredentialStore(store.fs, store.root_dir)
        broker.credentials.load()
        broker.coordinator = CoordinatorRuntime(broker.cluster, config)
        broker.coordinator.start()
        broker.transactions = transaction_runtime(broker)
        broker.transactions.start()
        broker.transactions.ensure_created()
        await broker.coordinator.wait_loaded()
        await broker.transactions.wait_loaded()
        try:
            await body(Node(broker))
        finally:
            await broker.transactions.close()
            await broker.coordinator.close()
            broker.close()

    asyncio.run(main())


def test_the_acl_apis_need_the_cluster_operations() -> None:
    async def body(node: Node) -> None:
        b = node.build(create_acls, 3)
        creation = b(
            "AclCreation",
            resource_type=T,
            resource_name="x",
            resource_pattern_type=LIT,
            principal=BOB,
            host="*",
            operation=Op.READ,
            permission_type=ALLOW,
        )
        refused = await node.ask(ALICE, create_acls, 3, creations=(creation,))
        assert refused.results[0].error_code == ErrorCode.cluster_authorization_failed
        assert (await node.ask(ADMIN, create_acls, 3, creations=(creation,))).results[0].error_code == 0
        filters = dict(
            resource_type_filter=T,
            resource_name_filter="x",
            pattern_type_filter=LIT,
            principal_filter=None,
            host_filter=None,
            operation=Op.ANY,
            permission_type=Permission.ANY,
        )
        assert (await node.ask(BOB, describe_acls, 3, **filters)).error_code == ErrorCode.cluster_authorization_failed
        found = await node.ask(ADMIN, describe_acls, 3, **filters)
        assert [(r.resource_name, a.principal) for r in found.resources for a in r.acls] == [("x", BOB)]

    run(body)


def test_scram_users_need_alter_and_describe_on_the_cluster() -> None:
    """KIP-554's APIs: AlterUserScramCredentials needs ALTER on the cluster (else every user is refused and nothing
    changes), DescribeUserScramCredentials DESCRIBE (else refused at the top level)."""

    async def body(node: Node) -> None:
        b = node.build(alter_user_scram_credentials, 0)
        upsert = b(
            "ScramCredentialUpsertion",
            name="carol",
            mechanism=2,
            iterations=4096,
            salt=b"s" * 16,
            salted_password=b"p" * 64,
        )
        refused = await node.ask(ALICE, alter_user_scram_credentials, 0, deletions=(), upsertions=(upsert,))
        assert [(r.user, r.error_code) for r in refused.results] == [("carol", ErrorCode.cluster_authorization_failed)]
        assert not (await node.ask(ADMIN, describe_user_scram_credentials, 0, users=None)).results
        stored = await node.ask(ADMIN, alter_user_scram_credentials, 0, deletions=(), upsertions=(upsert,))
        assert [(r.user, r.error_code) for r in stored.results] == [("carol", 0)]
        denied = await node.ask(BOB, describe_user_scram_credentials, 0, users=None)
        assert denied.error_code == ErrorCode.cluster_authorization_failed and not denied.results
        described = await node.ask(ADMIN, describe_user_scram_credentials, 0, users=None)
        assert [(r.user, [(c.mechanism, c.iterations) for c in r.credential_infos]) for r in described.results] == [
            ("carol", [(2, 4096)])
        ]

    run(body)


def test_metadata_shows_each_principal_what_it_may_describe() -> None:
    async def body(node: Node) -> None:
        everything = await node.ask(
            ALICE, metadata, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=True
        )
        assert sorted(t.name for t in everything.topics) == ["orders-1", "payments"]  # READ/WRITE imply DESCRIBE
        ops = {t.name: t.topic_authorized_operations for t in everything.topics}
        assert ops["payments"] == (1 << Op.WRITE) | (1 << Op.DESCRIBE)
        assert ops["orders-1"] == (1 << Op.READ) | (1 << Op.DESCRIBE)
        assert [
            t.name
            for t in (
                await node.ask(
                    BOB,
                    metadata,
                    12,
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            ).topics
        ] == []
        b = node.build(metadata, 12)
        named = await node.ask(
            ALICE,
            metadata,
            12,
            topics=(
                b("MetadataRequestTopic", name="secret", topic_id=None),
                b("MetadataRequestTopic", name="nope", topic_id=None),
            ),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        assert [t.error_code for t in named.topics] == [ErrorCode.topic_authorization_failed] * 2
        admin = await node.ask(
            ADMIN, metadata, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        assert {"secret", "audit", "__consumer_offsets"} <= {t.name for t in admin.topics}
        cluster = await node.ask(
            ALICE, describe_cluster, 1, include_cluster_authorized_operations=True, endpoint_type=1
        )
        assert cluster.error_code == 0 and cluster.cluster_authorized_operations == 0

    run(body)


def test_hosts_are_matched() -> None:
    async def body(node: Node) -> None:
        for host, expected in (("10.0.0.9", 1), ("127.0.0.1", 0)):
            r = await node.ask(
                ALICE,
                metadata,
                12,
                host=host,
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            assert sum(t.name == "audit" for t in r.topics) == expected

    run(body)


def test_group_apis() -> None:
    async def body(node: Node) -> None:
        join = dict(
            group_id="g1",
            session_timeout=timedelta(seconds=10),
            rebalance_timeout=timedelta(seconds=10),
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            reason=None,
            protocols=(node.build(join_group, 9)("JoinGroupRequestProtocol", name="range", metadata=b""),),
        )
        assert (await node.ask(BOB, join_group, 9, **join)).error_code == ErrorCode.group_authorization_failed
        hb = await node.ask(BOB, heartbeat, 4, group_id="g1", generation_id=1, member_id="m", group_instance_id=None)
        assert hb.error_code == ErrorCode.group_authorization_failed
        first = await node.ask(ALICE, join_group, 9, **join)
        assert first.error_code == ErrorCode.member_id_required
        found = await node.ask(BOB, find_coordinator, 4, key_type=0, coordinator_keys=("g1",))
        assert found.coordinators[0].error_code == ErrorCode.group_authorization_failed
        found = await node.ask(ALICE, find_coordinator, 4, key_type=1, coordinator_keys=("tx-a", "tx-b"))
        assert [c.error_code for c in found.coordinators] == [0, ErrorCode.transactional_id_authorization_failed]

        b = node.build(offset_commit, 9)
        topics = tuple(
            b(
                "OffsetCommitRequestTopic",
                name=name,
                partitions=(
                    b(
                        "OffsetCommitRequestPartition",
                        partition_index=0,
                        committed_offset=1,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            )
            for name in ("orders-1", "payments", "orders-missing")
        )
        commit = dict(
            group_id="g1", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=topics
        )
        r = await node.ask(ALICE, offset_commit, 9, **commit)
        assert [p.error_code for t in r.topics for p in t.partitions] == [
            0,
            ErrorCode.topic_authorization_failed,
            ErrorCode.unknown_topic_or_partition,
        ]
        r = await node.ask(BOB, offset_commit, 9, **commit)
        assert {p.error_code for t in r.topics for p in t.partitions} == {ErrorCode.group_authorization_failed}

        b = node.build(offset_fetch, 7)
        fetched = await node.ask(
            ALICE,
            offset_fetch,
            7,
            group_id="g1",
            require_stable=False,
            topics=tuple(
                b("OffsetFetchRequestTopic", name=name, partition_indexes=(0,)) for name in ("orders-1", "secret")
            ),
        )
        assert [(t.name, t.partitions[0].error_code, t.partitions[0].committed_offset) for t in fetched.topics] == [
            ("orders-1", 0, 1),
            ("secret", ErrorCode.topic_authorization_failed, -1),
        ]
        every = await node.ask(ALICE, offset_fetch, 7, group_id="g1", require_stable=False, topics=None)
        assert [t.name for t in every.topics] == ["orders-1"]
        assert (
            await node.ask(BOB, offset_fetch, 7, group_id="g1", require_stable=False, topics=None)
        ).error_code == ErrorCode.group_authorization_failed

        listed = await node.ask(ALICE, list_groups, 4, states_filter=())
        assert [g.group_id for g in listed.groups] == ["g1"]
        assert (await node.ask(BOB, list_groups, 4, states_filter=())).groups == ()
        described = await node.ask(ALICE, describe_groups, 5, groups=("g1", "g2"), include_authorized_operations=True)
        assert [g.error_code for g in described.groups] == [0, ErrorCode.group_authorization_failed]
        assert described.groups[0].authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)

    run(body)


def test_the_data_path_and_the_other_group_and_topic_apis() -> None:
    """Fetch READ, ListOffsets DESCRIBE, DeleteRecords DELETE, DescribeProducers READ and CreatePartitions ALTER on
    the topic (TOPIC_AUTHORIZATION_FAILED per partition), SyncGroup and LeaveGroup READ and DeleteGroups DELETE on
    the group (GROUP_AUTHORIZATION_FAILED), as KafkaApis checks them."""

    async def body(node: Node) -> None:
        b = node.build(fetch, 12)

        async def fetched(principal: str, *topics: str) -> list[int]:
            r = await node.ask(
                principal,
                fetch,
                12,
                cluster_id=None,
                replica_id=-1,
                max_wait=timedelta(0),
                min_bytes=0,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=tuple(
                    b(
                        "FetchTopic",
                        topic=t,
                        partitions=(
                            b(
                                "FetchPartition",
                                partition=0,
                                current_leader_epoch=-1,
                                fetch_offset=0,
                                last_fetched_epoch=-1,
                                log_start_offset=-1,
                                partition_max_bytes=1 << 20,
                            ),
                        ),
                    )
                    for t in topics
                ),
                forgotten_topics_data=(),
                rack_id="",
            )
            return [p.error_code for t in r.responses for p in t.partitions]

        assert await fetched(ALICE, "orders-1", "payments") == [0, ErrorCode.topic_authorization_failed]
        assert await fetched(BOB, "orders-1") == [ErrorCode.topic_authorization_failed]

        b = node.build(list_offsets, 7)

        async def listed(principal: str, *topics: str) -> list[int]:
            r = await node.ask(
                principal,
                list_offsets,
                7,
                replica_id=-1,
                isolation_level=0,
                topics=tuple(
                    b(
                        "ListOffsetsTopic",
                        name=t,
                        partitions=(
                            b("ListOffsetsPartition", partition_index=0, current_leader_epoch=-1, timestamp=-1),
                        ),
                    )
                    for t in topics
                ),
            )
            return [p.error_code for t in r.topics for p in t.partitions]

        # READ and WRITE imply DESCRIBE; User:*'s DENY DESCRIBE on "secret" wins over its ALLOW READ
        assert await listed(ALICE, "orders-1", "payments", "secret") == [0, 0, ErrorCode.topic_authorization_failed]
        assert await listed(BOB, "orders-1") == [ErrorCode.topic_authorization_failed]

        b = node.build(delete_records, 2)

        async def deleted(principal: str) -> int:
            r = await node.ask(
                principal,
                delete_records,
                2,
                timeout=timedelta(seconds=5),
                topics=(
                    b(
                        "DeleteRecordsTopic",
                        name="orders-1",
                        partitions=(b("DeleteRecordsPartition", partition_index=0, offset=0),),
                    ),
                ),
            )
            return r.topics[0].partitions[0].error_code

        assert await deleted(ALICE) == ErrorCode.topic_authorization_failed  # READ only, no DELETE
        assert await deleted(ADMIN) == 0

        b = node.build(describe_producers, 0)
        r = await node.ask(
            ALICE,
            describe_producers,
            0,
            topics=tuple(b("TopicRequest", name=t, partition_indexes=(0,)) for t in ("orders-1", "payments")),
        )
        assert [p.error_code for t in r.topics for p in t.partitions] == [0, ErrorCode.topic_authorization_failed]

        b = node.build(create_partitions, 3)
        grow = dict(
            timeout=timedelta(seconds=5),
            validate_only=True,
            topics=(b("CreatePartitionsTopic", name="orders-1", count=2, assignments=None),),
        )
        assert (await node.ask(ALICE, create_partitions, 3, **grow)).results[
            0
        ].error_code == ErrorCode.topic_authorization_failed
        assert (await node.ask(ADMIN, create_partitions, 3, **grow)).results[0].error_code == 0

        sync = dict(
            group_id="g1",
            generation_id=1,
            member_id="m",
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(),
        )
        assert (await node.ask(BOB, sync_group, 5, **sync)).error_code == ErrorCode.group_authorization_failed
        assert (await node.ask(ALICE, sync_group, 5, **sync)).error_code != ErrorCode.group_authorization_failed
        b = node.build(leave_group, 5)
        leave = dict(group_id="g1", members=(b("MemberIdentity", member_id="m", group_instance_id=None, reason=None),))
        assert (await node.ask(BOB, leave_group, 5, **leave)).error_code == ErrorCode.group_authorization_failed
        assert (await node.ask(ALICE, leave_group, 5, **leave)).error_code != ErrorCode.group_authorization_failed
        gone = await node.ask(ALICE, delete_groups, 2, groups_names=("g1",))  # READ only, no DELETE
        assert gone.results[0].error_code == ErrorCode.group_authorization_failed
        gone = await node.ask(ADMIN, delete_groups, 2, groups_names=("nobody",))
        assert gone.results[0].error_code == ErrorCode.group_id_not_found

    run(body)


def test_produce_and_producer_ids() -> None:
    async def body(node: Node) -> None:
        b = node.build(produce, 11)

        async def send(principal: str, topic: str) -> int:
            r = await node.ask(
                principal,
                produce,
                11,
                transactional_id=None,
                acks=-1,
                timeout=timedelta(0),
                topic_data=(
                    b(
                        "TopicProduceData",
                        name=topic,
                        partition_data=(b("PartitionProduceData", index=0, records=make_batch([b"v"])),),
                    ),
                ),
            )
            return r.responses[0].partition_responses[0].error_code

        assert await send(ALICE, "payments") == 0
        assert await send(ALICE, "orders-1") == ErrorCode.topic_authorization_failed
        assert await send(ALICE, "nonexistent") == ErrorCode.topic_authorization_failed  # before existence
        assert await send(ADMIN, "orders-1") == 0

        async def init(principal: str, tid: str | None) -> int:
            r = await node.ask(
                principal,
                init_producer_id,
                5,
                transactional_id=tid,
                transaction_timeout=timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            )
            return r.error_code

        assert await init(ALICE, None) == 0  # WRITE on some topic
        assert await init(BOB, None) == ErrorCode.cluster_authorization_failed
        assert await init(ALICE, "tx-a") == 0
        assert await init(ALICE, "tx-b") == ErrorCode.transactional_id_authorization_failed

    run(body)


def test_admin_apis() -> None:
    async def body(node: Node) -> None:
        b = node.build(create_topics, 7)
        topic = b("CreatableTopic", name="orders-2", num_partitions=1, replication_factor=1, assignments=(), configs=())
        r = await node.ask(ALICE, create_topics, 7, topics=(topic,), timeout=timedelta(seconds=5), validate_only=False)
        assert r.topics[0].error_code == ErrorCode.topic_authorization_failed
        r = await node.ask(ADMIN, create_topics, 7, topics=(topic,), timeout=timedelta(seconds=5), validate_only=False)
        assert r.topics[0].error_code == 0
        r = await node.ask(
            ALICE,
            delete_topics,
            6,
            topics=(node.build(delete_topics, 6)("DeleteTopicState", name="orders-2", topic_id=None),),
            timeout=timedelta(seconds=5),
        )
        assert r.responses[0].error_code == ErrorCode.topic_authorization_failed
        d = node.build(describe_configs, 4)
        r = await node.ask(
            ALICE,
            describe_configs,
            4,
            include_synonyms=False,
            include_documentation=False,
            resources=(
                d("DescribeConfigsResource", resource_type=4, resource_name="", configuration_keys=None),
                d("DescribeConfigsResource", resource_type=2, resource_name="orders-1", configuration_keys=None),
            ),
        )
        assert [x.error_code for x in r.results] == [
            ErrorCode.cluster_authorization_failed,
            ErrorCode.topic_authorization_failed,
        ]
        i = node.build(incremental_alter_configs, 1)
        resources = tuple(
            i(
                "AlterConfigsResource",
                resource_type=t,
                resource_name=n,
                configs=(i("AlterableConfig", name=k, config_operation=0, value=v),),
            )
            for t, n, k, v in (
                (2, "payments", "retention.ms", "1000"),
                (32, "g1", "herd.expected.instance.ids", "a"),
                (4, "", "log.retention.ms", "1000"),
            )
        )
        for principal, expected in (
            (
                ALICE,
                [
                    ErrorCode.topic_authorization_failed,
                    ErrorCode.group_authorization_failed,
                    ErrorCode.cluster_authorization_failed,
                ],
            ),
            (ADMIN, [0, 0, 0]),
        ):
            r = await node.ask(principal, incremental_alter_configs, 1, resources=resources, validate_only=True)
            assert [x.error_code for x in r.responses] == expected

    run(body)


def test_denials_are_logged_at_debug(caplog) -> None:  # type: ignore[no-untyped-def]
    import logging

    async def body(node: Node) -> None:
        with caplog.at_level(logging.DEBUG, logger="herd.security.authorizer"):
            await node.ask(BOB, heartbeat, 4, group_id="g1", generation_id=1, member_id="m", group_instance_id=None)
            await node.ask(ALICE, heartbeat, 4, group_id="g1", generation_id=1, member_id="m", group_instance_id=None)

    run(body)
    denied = [r.getMessage() for r in caplog.records if r.name == "herd.security.authorizer"]
    assert denied == [
        f"Principal = {BOB} is Denied operation = 3 from host = 127.0.0.1 on resource = 3:g1 for request = 12"
    ]


def test_transaction_apis() -> None:
    async def body(node: Node) -> None:
        init = await node.ask(
            ALICE,
            init_producer_id,
            5,
            transactional_id="tx-a",
            transaction_timeout=timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
        pid = init.producer_id
        b = node.build(add_partitions_to_txn, 3)

        async def add(principal: str, tid: str, topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
            r = await node.ask(
                principal,
                add_partitions_to_txn,
                3,
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=0,
                v3_and_below_topics=tuple(
                    b("AddPartitionsToTxnTopic", name=n, partitions=tuple(ps)) for n, ps in topics.items()
                ),
            )
            return {
                (t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below
                for p in t.results_by_partition
            }

        assert await add(BOB, "tx-a", {"payments": [0]}) == {
            ("payments", 0): ErrorCode.transactional_id_authorization_failed
        }
        assert await add(ALICE, "tx-a", {"payments": [0], "orders-1": [0]}) == {
            ("payments", 0): ErrorCode.operation_not_attempted,
            ("orders-1", 0): ErrorCode.topic_authorization_failed,
        }
        assert await add(ALICE, "tx-a", {"payments": [0]}) == {("payments", 0): 0}
        offsets = dict(transactional_id="tx-a", producer_id=pid, producer_epoch=0)
        r = await node.ask(ALICE, add_offsets_to_txn, 3, group_id="g2", **offsets)
        assert r.error_code == ErrorCode.group_authorization_failed
        assert (
            await node.ask(BOB, add_offsets_to_txn, 3, group_id="g1", **offsets)
        ).error_code == ErrorCode.transactional_id_authorization_failed
        assert (await node.ask(ALICE, add_offsets_to_txn, 3, group_id="g1", **offsets)).error_code == 0

        described = await node.ask(ALICE, describe_transactions, 0, transactional_ids=("tx-a", "tx-b"))
        assert [s.error_code for s in described.transaction_states] == [
            0,
            ErrorCode.transactional_id_authorization_failed,
        ]
        # the offsets partition of g1 is in the transaction; alice may not DESCRIBE __consumer_offsets
        assert [t.topic for t in described.transaction_states[0].topics] == ["payments"]
        assert (await node.ask(ADMIN, describe_transactions, 0, transactional_ids=("tx-a",))).transaction_states[
            0
        ].topics[0].topic == "__consumer_offsets"
        listing = dict(state_filters=(), producer_id_filters=(), duration_filter=-1)
        assert [
            t.transactional_id for t in (await node.ask(ALICE, list_transactions, 1, **listing)).transaction_states
        ] == ["tx-a"]
        assert (await node.ask(BOB, list_transactions, 1, **listing)).transaction_states == ()
        ended = await node.ask(
            BOB, end_txn, 3, transactional_id="tx-a", producer_id=pid, producer_epoch=0, committed=False
        )
        assert ended.error_code == ErrorCode.transactional_id_authorization_failed
        m = node.build(write_txn_markers, 1)
        markers = await node.ask(
            ALICE,
            write_txn_markers,
            1,
            markers=(
                m(
                    "WritableTxnMarker",
                    producer_id=pid,
                    producer_epoch=0,
                    transaction_result=False,
                    coordinator_epoch=0,
                    topics=(m("WritableTxnMarkerTopic", name="payments", partition_indexes=(0,)),),
                ),
            ),
        )
        assert markers.markers[0].topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
        assert (
            await node.ask(
                ALICE, end_txn, 3, transactional_id="tx-a", producer_id=pid, producer_epoch=0, committed=False
            )
        ).error_code == 0

    run(body)


def test_describe_topic_partitions() -> None:
    async def body(node: Node) -> None:
        b = node.build(describe_topic_partitions, 0)
        named = await node.ask(
            ALICE,
            describe_topic_partitions,
            0,
            response_partition_limit=100,
            cursor=None,
            topics=tuple(b("TopicRequest", name=n) for n in ("secret", "orders-1", "nope")),
        )
        got = {t.name: (t.error_code, t.topic_authorized_operations) for t in named.topics}
        assert got["secret"][0] == ErrorCode.topic_authorization_failed
        assert got["orders-1"] == (0, (1 << Op.READ) | (1 << Op.DESCRIBE))
        assert got["nope"][0] == ErrorCode.topic_authorization_failed  # existence not disclosed
        listed = await node.ask(
            ALICE, describe_topic_partitions, 0, response_partition_limit=100, cursor=None, topics=()
        )
        assert [t.name for t in listed.topics] == ["orders-1", "payments"]

    run(body)


class FailingCluster:
    """A SharedCluster whose database fails every metadata write (SharedCluster._write raises MetadataWriteError)."""

    acls: frozenset[tuple[int, str, int, str, str, int, int]] = frozenset()
    on_acls = None
    scram_credentials: dict[tuple[str, str], tuple[bytes, bytes, bytes, int]] = {}
    on_scram_credentials = None

    async def change_acls(self, change: object) -> None:
        raise MetadataWriteError("Could not store the ACLs: the database failed")

    async def alter_scram_credentials(self, plan: object) -> None:
        raise MetadataWriteError("Could not store the SCRAM credentials: the database failed")


def test_a_failed_store_answers_kafka_storage_error() -> None:
    """CreateAcls and DeleteAcls answer a store that failed (acls.json not written; in cluster mode the database,
    whose failure the store raises as AclStoreError) with KAFKA_STORAGE_ERROR on each valid entry, changing nothing;
    AlterUserScramCredentials answers a cluster's failed write (CredentialStoreError) with UNKNOWN_SERVER_ERROR."""

    async def body(node: Node) -> None:
        cb, db = node.build(create_acls, 3), node.build(delete_acls, 3)
        creation = cb(
            "AclCreation",
            resource_type=T,
            resource_name="t",
            resource_pattern_type=LIT,
            principal=BOB,
            host="*",
            operation=Op.READ,
            permission_type=ALLOW,
        )
        deletion = db(  # matches alice's READ on topics prefixed "orders"
            "DeleteAclsFilter",
            resource_type_filter=T,
            resource_name_filter="orders",
            pattern_type_filter=PRE,
            principal_filter=ALICE,
            host_filter="*",
            operation=Op.READ,
            permission_type=ALLOW,
        )
        file_store = node.broker.acl_store
        shared_store = SharedAclStore(FailingCluster(), Authorizer())  # type: ignore[arg-type]
        for store in (file_store, shared_store):
            node.broker.acl_store = store
            if store is file_store:
                file_store.fs.fail("fsync", path_endswith="acls.json.tmp")
            created = await node.ask(ADMIN, create_acls, 3, creations=(creation,))
            assert [r.error_code for r in created.results] == [ErrorCode.kafka_storage_error]
            assert created.results[0].error_message.startswith("Could not store the ACLs")
            if store is file_store:
                file_store.fs.fail("fsync", path_endswith="acls.json.tmp")
            deleted = await node.ask(ADMIN, delete_acls, 3, filters=(deletion,))
            assert [r.error_code for r in deleted.filter_results] == [ErrorCode.kafka_storage_error]
        assert file_store.authorizer.acls() == sorted(ACLS) and shared_store.authorizer.acls() == []
        node.broker.credentials = SharedCredentialStore(FailingCluster())
        b = node.build(alter_user_scram_credentials, 0)
        upsert = b(
            "ScramCredentialUpsertion",
            name="carol",
            mechanism=2,
            iterations=4096,
            salt=b"s" * 16,
            salted_password=b"p" * 64,
        )
        altered = await node.ask(ADMIN, alter_user_scram_credentials, 0, deletions=(), upsertions=(upsert,))
        assert [(r.user, r.error_code) for r in altered.results] == [("carol", ErrorCode.unknown_server_error)]

    run(body)
