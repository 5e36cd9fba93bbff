"""KIP-469 pre-registration with real clients over real sockets: a stable group of static confluent-kafka
consumers scaled up by four pre-registered members in one rebalance (the first three held without partitions
while the old members keep theirs); a member that never comes; the group config through Kafka's admin
API (confluent-kafka's incremental_alter_configs / describe_configs on a GROUP resource) with its errors; and
`herd groups add-members / describe / remove-expected-members` across a broker restart.

The generation is read on the wire: DescribeGroups names the members, and a Heartbeat carrying a member's id
answers NONE only for the group's current generation (ILLEGAL_GENERATION for any other; it changes nothing).

The module's broker runs on both backends (tests/backends.py). Those raw requests go to one node: on a cluster
that is the coordinator of every group (the cluster runs a single `__consumer_offsets` partition); the clients
and admin calls bootstrap with every node. The CLI test restarts the embedded node.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
import uuid

import pytest
from backends import BACKENDS, embedded_only, start_broker
from groupmembers import BROKER_OVERRIDES, CLIENTS, create_topic, settled, start_members, wait_for
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest as DESCRIBE
from kio.schema.describe_configs.v4.request import DescribeConfigsResource as DESCRIBE_RESOURCE
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig as ALTER_OP
from kio.schema.incremental_alter_configs.v1.request import AlterConfigsResource as ALTER_RESOURCE
from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest as ALTER
from rawkafka import RawClient

from herd.server.peers import FORWARDED_CLIENT_ID

CONFIG = "herd.expected.instance.ids"
PARTITIONS = 8
_names = itertools.count()


# Kafka takes group configs on any broker (forwarded to the controller); a herd node that does not coordinate the
# group forwards them to the one that does (herd.server.peers), so confluent-kafka's admin client may ask any node.
@pytest.fixture(scope="module", params=BACKENDS)
def kip469_broker(request, tmp_path_factory):
    with start_broker(request, tmp_path_factory, "kip469", BROKER_OVERRIDES, single_coordinator=True) as broker:
        yield broker


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:6]}"


# -- the wire: generation, and the group config through confluent-kafka's admin API ---------------------------


def generation(port: int, group: str) -> int:
    """The group's current generation (see the module docstring); the group must be Stable."""
    with RawClient(port) as client:
        described = client.request(15, 5, DescribeGroupsRequest(groups=(group,), include_authorized_operations=False))
        (g,) = described.groups
        assert g.group_state == "Stable" and g.members, g
        member = g.members[0]
        for candidate in range(1, 100):
            answer = client.request(
                12,
                4,
                HeartbeatRequest(
                    group_id=group,
                    generation_id=candidate,
                    member_id=member.member_id,
                    group_instance_id=member.group_instance_id,
                ),
            )
            if answer.error_code == 0:
                return candidate
    raise AssertionError(f"no generation of {group} below 100 answered")


def admin(bootstrap: str):  # noqa: ANN201 - confluent_kafka.admin.AdminClient
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def alter(
    bootstrap: str, group: str, value: str | None, op: str = "SET", name: str = CONFIG, resource_type: str = "GROUP"
) -> None:
    """IncrementalAlterConfigs through confluent-kafka; raises its KafkaException on an error."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entry = ConfigEntry(name, value, incremental_operation=getattr(AlterConfigOpType, op))
    resource = ConfigResource(getattr(ResourceType, resource_type), group, incremental_configs=[entry])
    client = admin(bootstrap)  # kept alive until the answer is in
    (future,) = client.incremental_alter_configs([resource]).values()
    future.result(15)


def described(bootstrap: str, group: str, name: str = CONFIG) -> tuple[str, int]:
    """(value, source) of a group config through confluent-kafka's describe_configs."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    client = admin(bootstrap)
    (future,) = client.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    entry = future.result(15)[name]
    return entry.value, entry.source


def assignments(bootstrap: str, group: str) -> dict[str, list[int]]:
    """group.instance.id -> partitions, from DescribeGroups through confluent-kafka."""
    client = admin(bootstrap)
    (future,) = client.describe_consumer_groups([group]).values()
    d = future.result(15)
    return {m.group_instance_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in d.members}


def error_of(call) -> str:  # noqa: ANN001
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as raised:
        call()
    return raised.value.args[0].name()


def test_every_node_takes_the_group_config_and_a_forwarded_request_is_not_forwarded_again(kip469_broker):
    """Kafka takes group configs on any broker; a cluster node that does not coordinate the group forwards them
    to the one that does (herd.server.peers). A request that is itself forwarded stays where it lands."""
    group = unique("anynode")
    ports = getattr(kip469_broker, "ports", None) or [kip469_broker.port]
    for i, port in enumerate(ports):
        with RawClient(port) as client:
            value = f"member-{i}"
            op = ALTER_OP(name=CONFIG, config_operation=0, value=value)
            answer = client.request(
                44,
                1,
                ALTER(
                    resources=(ALTER_RESOURCE(resource_type=32, resource_name=group, configs=(op,)),),
                    validate_only=False,
                ),
            )
            assert [(r.error_code, r.error_message) for r in answer.responses] == [(0, None)], port
            for asked in ports:
                with RawClient(asked) as other:
                    (result,) = other.request(
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
                        (CONFIG, value)
                    ], (port, asked)
    if len(ports) > 1:
        elsewhere = next(p for p in ports if p != kip469_broker.port)
        with RawClient(elsewhere) as client:
            request = DESCRIBE(
                resources=(DESCRIBE_RESOURCE(resource_type=32, resource_name=group, configuration_keys=None),),
                include_synonyms=False,
                include_documentation=False,
            )
            client.send_raw(client.encode(32, 4, request, client_id=f"{FORWARDED_CLIENT_ID}9"))
            (result,) = client.read_response(32, 4).results
            assert result.error_code == 16  # NOT_COORDINATOR: not sent on a second time


# -- a scale-up by four in one rebalance -----------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_a_stable_static_group_scaled_up_by_four_pre_registered_members_rebalances_once(kip469_broker, members, client):
    b, topic, group = kip469_broker.bootstrap, unique("fleet"), unique("fleet")
    create_topic(b, topic, PARTITIONS)
    old = [
        m
        for i in range(4)
        for m in start_members(client, b, topic, group, n=1, prefix=f"old{i}-", instance_id=f"old-{i}")
    ]
    members += old
    settled(members, PARTITIONS)
    before = generation(kip469_broker.port, group)
    seen = [m.event_count() for m in old]

    new_ids = [f"new-{i}" for i in range(4)]
    alter(b, group, ",".join(new_ids))
    assert described(b, group) == (",".join(new_ids), 8)  # source GROUP_CONFIG
    for instance_id in new_ids[:3]:  # the new instances come up one by one
        members += start_members(client, b, topic, group, n=1, prefix=f"{instance_id}-", instance_id=instance_id)
        time.sleep(0.5)
    wait_for(lambda: len(assignments(b, group)) == 7, what="three new members held in the group")
    time.sleep(1.0)  # several heartbeat intervals: the old members keep consuming while the new ones are held
    assert [m.event_count() for m in old] == seen, "an old member saw a rebalance before the last arrival"
    assert generation(kip469_broker.port, group) == before
    held = assignments(b, group)
    assert all(held[i] == [] for i in new_ids[:3]) and sorted(p for i in held for p in held[i]) == list(
        range(PARTITIONS)
    )
    members += start_members(client, b, topic, group, n=1, prefix="new-3-", instance_id=new_ids[3])
    settled(members, PARTITIONS)

    assert generation(kip469_broker.port, group) == before + 1
    owned = assignments(b, group)
    assert sorted(owned) == sorted([f"old-{i}" for i in range(4)] + new_ids)
    partitions = [p for ps in owned.values() for p in ps]
    assert sorted(partitions) == list(range(PARTITIONS)), owned  # every partition owned by exactly one member
    for m, count in zip(old, seen):  # each old member went through one rebalance: one new assignment
        assert [kind for kind, _ in m.events[count:]].count("assigned") == 1, (m.name, m.events[count:])
    assert described(b, group)[0] == ""  # fulfilled: nothing left to wait for
    for m in members:
        m.check()


# -- the group config through Kafka's admin API ----------------------------------------------------------------


def test_group_config_operations_and_errors_through_confluent_kafka(kip469_broker):
    b, group = kip469_broker.bootstrap, unique("cfg")
    assert described(b, group) == ("", 5)  # a group that does not exist: the default (DEFAULT_CONFIG)
    alter(b, group, "a,b", op="APPEND")
    alter(b, group, "b,c", op="APPEND")
    alter(b, group, "a", op="SUBTRACT")
    assert described(b, group) == ("b,c", 8)
    alter(b, group, "b,c", op="APPEND")  # idempotent
    assert described(b, group)[0] == "b,c"

    assert error_of(lambda: alter(b, group, "bad id", op="APPEND")) == "INVALID_CONFIG"
    assert error_of(lambda: alter(b, group, "x" * 250)) == "INVALID_CONFIG"
    assert error_of(lambda: alter(b, group, ",".join(f"i{n}" for n in range(1001)))) == "INVALID_CONFIG"
    assert error_of(lambda: alter(b, group, "1", name="herd.unknown.config")) == "INVALID_CONFIG"
    # Kafka's own group configs sit beside it, with Kafka's validation (test_kafka_group_configs.py)
    assert error_of(lambda: alter(b, group, "1000", name="consumer.session.timeout.ms")) == "INVALID_CONFIG"
    alter(b, group, "50000", name="consumer.session.timeout.ms")
    assert described(b, group, "consumer.session.timeout.ms") == ("50000", 8)  # GROUP_CONFIG
    assert described(b, group) == ("b,c", 8)
    # topic configs are altered too now (test_configs_api.py): a topic that does not exist, as Kafka answers it
    assert (
        error_of(lambda: alter(b, "some-topic", "1", name="retention.ms", resource_type="TOPIC"))
        == "UNKNOWN_TOPIC_OR_PART"
    )
    assert described(b, group)[0] == "b,c"  # nothing changed by the refused requests

    alter(b, group, None, op="DELETE")
    assert described(b, group) == ("", 5)


# -- the CLI, across a restart ---------------------------------------------------------------------------------


def herd(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "herd.cli", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )


def ok(*args: str, bootstrap: str) -> str:
    result = herd(*args, bootstrap=bootstrap)
    assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stdout, result.stderr)
    return result.stdout


@embedded_only("stops and restarts the one broker on its data directory")
def test_cli_pre_registration_is_described_survives_a_restart_and_is_withdrawn(broker_factory):
    broker = broker_factory(BROKER_OVERRIDES)
    b, group = broker.bootstrap, "scale-me"
    assert ok("groups", "add-members", "--group", group, "--instance-ids", "a,b,c", bootstrap=b) == (
        f"Pre-registered group.instance.id a, b, c in group '{group}'.\n"
        f"Group '{group}' waits for 3 pre-registered members: a, b, c.\n"
    )
    result = herd("groups", "describe", "--group", group, "--members", bootstrap=b)
    assert result.returncode == 0
    lines = [line.split() for line in result.stdout.strip().splitlines()]
    assert lines[1:] == [[group, "-", i, "-", "-", "-"] for i in ("a", "b", "c")]
    assert "expects 3 pre-registered members that have not joined yet: a, b, c." in result.stderr

    broker.stop()
    broker.restart()
    listed = json.loads(ok("groups", "describe", "--group", group, "--members", "--output", "json", bootstrap=b))
    assert [(m["group_instance_id"], m["joined"]) for m in listed] == [("a", False), ("b", False), ("c", False)]

    ok("groups", "remove-expected-members", "--group", group, "--instance-ids", "b", bootstrap=b)
    assert json.loads(
        ok("groups", "add-members", "--group", group, "--instance-ids", "c,d", "--output", "json", bootstrap=b)
    ) == {"group": group, "expected_members": ["a", "c", "d"]}
    ok("groups", "remove-expected-members", "--group", group, "--all", bootstrap=b)
    failed = herd("groups", "describe", "--group", group, "--members", bootstrap=b)
    assert failed.returncode == 1 and f"Consumer group '{group}' does not exist." in failed.stderr
    bad = herd("groups", "add-members", "--group", group, "--instance-ids", "pod/1", bootstrap=b)
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_a_pre_registered_member_that_never_comes_delays_the_rebalance_by_the_rebalance_timeout_only(
    kip469_broker, members
):
    b, topic, group = kip469_broker.bootstrap, unique("late"), unique("late")
    create_topic(b, topic, 2)
    members += start_members("confluent", b, topic, group, n=1, prefix="s0-", instance_id="s0")
    settled(members, 2)
    alter(b, group, "s1,ghost")
    started = time.monotonic()
    members += start_members("confluent", b, topic, group, n=1, prefix="s1-", instance_id="s1")
    wait_for(
        lambda: len(assignments(b, group)) == 2 and all(assignments(b, group).values()),
        timeout=30,
        what="both members assigned once the join phase is released",
    )
    waited = time.monotonic() - started
    assert 8 <= waited <= 20, waited  # the rebalance timeout (max.poll.interval.ms) is 10 s
    assert described(b, group)[0] == ""  # "ghost" was released, "s1" fulfilled
