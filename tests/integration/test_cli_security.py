"""The security CLI against a real `herd serve` with Kafka's StandardAuthorizer: `herd users create/list/delete`,
`herd acls add/list/remove` and `herd groups list`, each with --command-config over SASL_PLAINTEXT (SCRAM-SHA-512)
or SSL with a client certificate, as kafka-configs.sh, kafka-acls.sh and kafka-consumer-groups.sh take
--command-config client.properties. Super users: User:ANONYMOUS (the PLAINTEXT listener, which sets the test up),
User:admin (SCRAM) and the client certificate's principal."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from securebrokers import ADMIN_PASSWORD, SecureBroker, start_secure_broker

from herd.cli import cli
from herd.client.admin import Admin
from herd.client.consumer import GroupConsumer

BOB_PASSWORD = "bob-secret-3"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    b = start_secure_broker(
        tmp_path_factory.mktemp("cli-security"),
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS;User:admin;User:{client}",
        },
    )

    async def setup() -> None:
        async with Admin(b.bootstrap()) as admin:
            await admin.upsert_user_scram_credential("admin", ADMIN_PASSWORD)
            await admin.create_topic("orders", 1, 1)
        async with GroupConsumer(b.bootstrap(), "billing", ["orders"]) as consumer:
            await consumer.wait_for_assignment(20)
            await consumer.commit()

    asyncio.run(setup())
    yield b
    b.broker.stop()


def write_properties(path: Path, props: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return str(path)


@pytest.fixture(scope="module")
def sasl_config(broker: SecureBroker, tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_properties(
        tmp_path_factory.mktemp("props") / "admin.properties", broker.scram("admin", ADMIN_PASSWORD)
    )


@pytest.fixture(scope="module")
def ssl_config(broker: SecureBroker, tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_properties(tmp_path_factory.mktemp("props") / "mtls.properties", broker.mtls())


def ok(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0 and result.exception is None, f"{args}: {result.output} {result.exception!r}"
    return result.stdout


def herd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "herd.cli", *args], capture_output=True, text=True, timeout=60)


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()]


def test_users_create_list_delete(broker: SecureBroker, sasl_config: str, tmp_path: Path) -> None:
    where = ["--bootstrap-server", broker.bootstrap("SASL_PLAINTEXT"), "--command-config", sasl_config]
    secret = tmp_path / "bob.password"
    secret.write_text(BOB_PASSWORD + "\n")
    out = ok("users", "create", "--user", "bob", "--password-file", str(secret), "--iterations", "8192", *where)
    assert out.strip() == "Created SCRAM-SHA-512 credential of user 'bob' (8192 iterations)."
    ok("users", "create", "--user", "bob", "--password", BOB_PASSWORD, "--mechanism", "SCRAM-SHA-256", *where)
    listed = rows(ok("users", "list", *where))
    assert listed[0] == ["USER", "MECHANISM", "ITERATIONS"]
    assert ["bob", "SCRAM-SHA-256", "4096"] not in listed  # --iterations defaults to 8192
    assert ["bob", "SCRAM-SHA-256", "8192"] in listed and ["bob", "SCRAM-SHA-512", "8192"] in listed
    assert ["admin", "SCRAM-SHA-512", "8192"] in listed or ["admin", "SCRAM-SHA-512", "4096"] in listed
    as_json = json.loads(ok("users", "list", "--user", "bob", "--output", "json", *where))
    assert sorted(as_json, key=lambda r: r["mechanism"]) == [
        {"user": "bob", "mechanism": "SCRAM-SHA-256", "iterations": 8192},
        {"user": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 8192},
    ]

    # bob can now authenticate with his password, and the CLI never printed it
    bob = write_properties(tmp_path / "bob.properties", broker.scram("bob", BOB_PASSWORD))
    ok("topics", "list", "--bootstrap-server", broker.bootstrap("SASL_PLAINTEXT"), "--command-config", bob)

    assert (
        ok("users", "delete", "--user", "bob", "--mechanism", "SCRAM-SHA-256", *where).strip()
        == "Deleted SCRAM-SHA-256 credential of user 'bob'."
    )
    assert ok("users", "delete", "--user", "bob", *where).strip() == "Deleted SCRAM-SHA-512 credential of user 'bob'."
    assert "bob" not in ok("users", "list", *where)
    result = herd("users", "delete", "--user", "bob", *where)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("herd: error: ") and "bob" in result.stderr
    assert "does not exist" in result.stderr or "no SCRAM credentials" in result.stderr  # the broker's words, or herd's


def test_refused_credentials_are_one_line_without_the_password(broker: SecureBroker, tmp_path: Path) -> None:
    wrong = write_properties(tmp_path / "wrong.properties", broker.scram("admin", "not-the-admin-password"))
    result = herd("groups", "list", "--bootstrap-server", broker.bootstrap("SASL_PLAINTEXT"), "--command-config", wrong)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("herd: error: ") and "uthentication failed" in lines[0], lines
    assert "not-the-admin-password" not in result.stderr + result.stdout


@pytest.mark.parametrize("config", ["sasl_config", "ssl_config"])
def test_groups_list_with_command_config(broker: SecureBroker, config: str, request: pytest.FixtureRequest) -> None:
    listener = "SASL_PLAINTEXT" if config == "sasl_config" else "SSL"
    out = ok(
        "groups",
        "list",
        "--bootstrap-server",
        broker.bootstrap(listener),
        "--command-config",
        request.getfixturevalue(config),
    )
    assert "billing" in out.split()
    described = ok(
        "groups",
        "describe",
        "--group",
        "billing",
        "--bootstrap-server",
        broker.bootstrap(listener),
        "--command-config",
        request.getfixturevalue(config),
    )
    assert "orders" in described


def test_acls_add_list_remove(broker: SecureBroker, sasl_config: str) -> None:
    where = ["--bootstrap-server", broker.bootstrap("SASL_PLAINTEXT"), "--command-config", sasl_config]
    topic, group = f"acl-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    added = rows(
        ok(
            "acls",
            "add",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--operation",
            "Describe",
            "--topic",
            topic,
            "--group",
            group,
            *where,
        )
    )
    assert added[0] == ["Added", "4", "ACLs:"]
    assert added[1] == [
        "PRINCIPAL",
        "HOST",
        "OPERATION",
        "PERMISSION",
        "RESOURCE-TYPE",
        "RESOURCE-NAME",
        "PATTERN-TYPE",
    ]
    assert sorted(added[2:]) == sorted(
        [
            ["User:bob", "*", op, "ALLOW", kind, name, "LITERAL"]
            for op in ("READ", "DESCRIBE")
            for kind, name in (("TOPIC", topic), ("GROUP", group))
        ]
    )
    ok(
        "acls",
        "add",
        "--deny-principal",
        "User:mallory",
        "--deny-host",
        "10.1.2.3",
        "--topic",
        topic[:6],
        "--resource-pattern-type",
        "prefixed",
        "--operation",
        "Write",
        *where,
    )

    literal = json.loads(ok("acls", "list", "--topic", topic, "--output", "json", *where))
    assert sorted((a["principal"], a["operation"]) for a in literal) == [("User:bob", "DESCRIBE"), ("User:bob", "READ")]
    matching = json.loads(
        ok("acls", "list", "--topic", topic, "--resource-pattern-type", "match", "--output", "json", *where)
    )
    assert {
        "principal": "User:mallory",
        "host": "10.1.2.3",
        "operation": "WRITE",
        "permission": "DENY",
        "resource_type": "TOPIC",
        "resource_name": topic[:6],
        "pattern_type": "PREFIXED",
    } in matching
    assert len(matching) == 3
    by_principal = rows(ok("acls", "list", "--principal", "User:bob", *where))
    assert len([r for r in by_principal if r[0] == "User:bob" and r[5] in (topic, group)]) == 4

    removed = rows(
        ok(
            "acls",
            "remove",
            "--allow-principal",
            "User:bob",
            "--operation",
            "Read",
            "--topic",
            topic,
            "--force",
            *where,
        )
    )
    assert removed[0] == ["Removed", "1", "ACL:"] and removed[2][:3] == ["User:bob", "*", "READ"]
    assert rows(ok("acls", "remove", "--topic", topic, "--group", group, "--force", *where))[0] == [
        "Removed",
        "3",
        "ACLs:",
    ]  # the topic's DESCRIBE, the group's READ and DESCRIBE
    assert ok("acls", "remove", "--topic", topic, "--force", *where).strip() == "No ACL matched."
    ok("acls", "remove", "--topic", topic[:6], "--resource-pattern-type", "prefixed", "--force", *where)
    assert rows(ok("acls", "list", "--topic", topic, "--resource-pattern-type", "match", *where)) == [
        ["PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN-TYPE"]
    ]


def test_acls_add_producer_and_consumer(broker: SecureBroker, sasl_config: str) -> None:
    """kafka-acls.sh's convenience options: what a producer and a consumer need."""
    where = ["--bootstrap-server", broker.bootstrap("SASL_PLAINTEXT"), "--command-config", sasl_config]
    topic, group, tx = (f"{kind}-{uuid.uuid4().hex[:6]}" for kind in ("t", "g", "tx"))
    ok(
        "acls",
        "add",
        "--allow-principal",
        "User:app",
        "--producer",
        "--idempotent",
        "--topic",
        topic,
        "--transactional-id",
        tx,
        *where,
    )
    ok("acls", "add", "--allow-principal", "User:app", "--consumer", "--topic", topic, "--group", group, *where)
    listed = json.loads(ok("acls", "list", "--principal", "User:app", "--output", "json", *where))
    mine = sorted(
        (a["resource_type"], a["operation"])
        for a in listed
        if a["resource_name"] in (topic, group, tx) or a["resource_type"] == "CLUSTER"
    )
    assert mine == sorted(
        [
            ("TOPIC", "WRITE"),
            ("TOPIC", "DESCRIBE"),
            ("TOPIC", "CREATE"),
            ("TOPIC", "READ"),
            ("TRANSACTIONAL_ID", "WRITE"),
            ("TRANSACTIONAL_ID", "DESCRIBE"),
            ("CLUSTER", "IDEMPOTENT_WRITE"),
            ("GROUP", "READ"),
        ]
    )
    ok(
        "acls",
        "remove",
        "--topic",
        topic,
        "--group",
        group,
        "--transactional-id",
        tx,
        "--cluster",
        "--allow-principal",
        "User:app",
        "--force",
        *where,
    )
    assert json.loads(ok("acls", "list", "--principal", "User:app", "--output", "json", *where)) == []
