"""Two herd nodes over one PostgreSQL with a PLAINTEXT and an SSL listener each: every node registers both
listeners (herd_nodes.listeners), a client on either listener of any node is told every node's port on that
listener (Metadata, FindCoordinator, DescribeCluster), and a group consumed over SSL reaches its coordinator on
whichever node over SSL; the nodes talk to each other over PLAINTEXT or, with inter.broker.listener.name naming it,
over SSL."""

from __future__ import annotations

import uuid

import pytest
from certs import Pki, make_pki
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest as DESCRIBE
from kio.schema.describe_configs.v4.request import DescribeConfigsResource as DESCRIBE_RESOURCE
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig as ALTER_OP
from kio.schema.incremental_alter_configs.v1.request import AlterConfigsResource as ALTER_RESOURCE
from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest as ALTER
from pgcluster import wait_offsets_spread
from rawkafka import RawClient, req
from test_tls import (
    DESCRIBE_CLUSTER,
    FIND_COORDINATOR,
    METADATA,
    client_context,
    confluent_roundtrip,
    confluent_ssl,
    listener_ports,
    tls_props,
    tls_socket,
)

from herd.testing import HerdCluster

pytestmark = pytest.mark.timeout(240)
CONFIG = "herd.expected.instance.ids"  # a group config (KIP-469), kept by the group's coordinator


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def test_each_listener_of_each_node_names_that_listener_of_every_node(new_cluster: HerdCluster, pki: Pki) -> None:
    new_cluster.overrides.update(
        {
            **tls_props(pki),
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "offsets.topic.num.partitions": "6",
        }
    )
    new_cluster.start(nodes=2, balanced=False)
    ports = [listener_ports(node) for node in new_cluster.nodes]
    assert all(set(p) == {"PLAINTEXT", "SECURE"} for p in ports)
    expected = {name: sorted(("127.0.0.1", p[name]) for p in ports) for name in ("PLAINTEXT", "SECURE")}
    context = client_context(pki, pki.client_cert, pki.client_key)
    for node in ports:
        for name, client in (
            ("PLAINTEXT", RawClient(node["PLAINTEXT"])),
            ("SECURE", RawClient(0, sock=tls_socket(node["SECURE"], context))),
        ):
            with client:
                # until this node has read the other's registration; bounded by tries (each a request), not by a
                # time: kept, so the bound stays the same
                for _ in range(100):
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
                    if len(metadata.brokers) == 2:
                        break
                    __import__("time").sleep(0.1)
                assert sorted((b.host, b.port) for b in metadata.brokers) == expected[name]
                cluster = client.request(
                    DESCRIBE_CLUSTER, 1, req(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False)
                )
                assert sorted((b.host, b.port) for b in cluster.brokers) == expected[name]
                found = client.request(
                    FIND_COORDINATOR,
                    4,
                    req(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=tuple(f"g{i}" for i in range(8))),
                )
                answered = [(c.host, c.port) for c in found.coordinators if c.error_code == 0]
                assert answered and set(answered) <= set(expected[name])
    # a group over SSL, its coordinator wherever it is: librdkafka connects to the SSL ports it is given
    confluent_roundtrip(confluent_ssl(pki, ports[0]["SECURE"]), f"tls-cluster-{uuid.uuid4().hex[:8]}", count=10)


def test_nodes_talk_to_each_other_over_an_ssl_inter_broker_listener(new_cluster: HerdCluster, pki: Pki) -> None:
    """inter.broker.listener.name=SECURE (SSL, client certificates required): a group config asked of a node that does
    not coordinate the group is forwarded to the one that does (herd.server.peers) over TLS, the node's own
    certificate as its client certificate."""
    new_cluster.overrides.update(
        {
            **tls_props(pki),
            "inter.broker.listener.name": "SECURE",
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            "offsets.topic.num.partitions": "6",
        }
    )
    new_cluster.start(nodes=2, balanced=False)
    wait_offsets_spread(new_cluster, 6)
    plain = [listener_ports(node)["PLAINTEXT"] for node in new_cluster.nodes]
    groups = [f"tls-fwd-{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]  # coordinated by both nodes, surely
    with RawClient(plain[0]) as client:
        for group in groups:
            op = ALTER_OP(name=CONFIG, config_operation=0, value="member-1")
            answer = client.request(
                44,
                1,
                ALTER(
                    resources=(ALTER_RESOURCE(resource_type=32, resource_name=group, configs=(op,)),),
                    validate_only=False,
                ),
            )
            assert [r.error_code for r in answer.responses] == [0], answer
    for port in plain:
        with RawClient(port) as client:
            for group in groups:
                (result,) = client.request(
                    32,
                    4,
                    DESCRIBE(
                        resources=(
                            DESCRIBE_RESOURCE(resource_type=32, resource_name=group, configuration_keys=(CONFIG,)),
                        ),
                        include_synonyms=False,
                        include_documentation=False,
                    ),
                ).results
                assert result.error_code == 0 and [(c.name, c.value) for c in result.configs] == [
                    (CONFIG, "member-1")
                ], (port, group, result)
    for i in range(2):
        assert "Traceback" not in new_cluster.log(i)
        assert "TLS handshake failed" not in new_cluster.log(i)
