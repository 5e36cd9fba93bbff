"""The security CLI's argument errors (herd users, herd acls, --command-config): one line, exit code 2, never a
password and never a traceback. No broker is needed: each is refused before anything connects (a broker at
127.0.0.1:1 refuses connections when an argument gets that far)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from herd.cli import cli

SECRET = "s3cret-Pa55"
NOWHERE = ["--bootstrap-server", "127.0.0.1:1"]


def run(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), input=input)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def props(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "command",
    [
        ["groups", "list"],
        ["topics", "list"],
        ["users", "list"],
        ["acls", "list"],
        ["transactions", "list"],
        ["configs", "describe", "--entity-type", "topics", "--entity-name", "t"],
    ],
)
def test_every_admin_command_reads_command_config(command: list[str], tmp_path: Path) -> None:
    text = (
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common."
        f'security.scram.ScramLoginModule required username="alice" password="{SECRET}"\n'
    )
    code, output = run(*command, *NOWHERE, "--command-config", props(tmp_path, text))
    assert code == 2 and "--command-config" in output and "must end with ';'" in output
    assert SECRET not in output


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("security.protocol=SASL_TLS\n", "security.protocol must be one of"),
        ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n", "GSSAPI is not supported"),
        (f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.password={SECRET}\n", "needs credentials"),
        ("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x.jks\n", "PEM files only"),
        ("security.protocol=SSL\nssl.truststore.location=/no/such/ca.pem\n", "cannot load the trusted certificates"),
        (
            f"security.protocol=SSL\nssl.keystore.location=/no/such/client.pem\nssl.key.password={SECRET}\n",
            "cannot read /no/such/client.pem",
        ),
    ],
)
def test_bad_command_config(text: str, complaint: str, tmp_path: Path) -> None:
    code, output = run("groups", "list", *NOWHERE, "--command-config", props(tmp_path, text))
    assert code == 2 and complaint in output, output
    assert SECRET not in output and "Traceback" not in output


def test_missing_command_config_file() -> None:
    code, output = run("topics", "list", *NOWHERE, "--command-config", "/no/such.properties")
    assert code == 2 and "cannot read /no/such.properties" in output


def test_a_plaintext_command_config_still_reaches_the_broker(tmp_path: Path) -> None:
    code, output = run("topics", "list", *NOWHERE, "--command-config", props(tmp_path, "client.id=x\n"))
    assert code == 1 and "cannot connect to 127.0.0.1:1" in output


@pytest.mark.parametrize(
    "args, complaint",
    [
        (["users", "create", "--user", "alice"], "exactly one of --password and --password-file"),
        (["users", "create", "--user", "alice", "--password", SECRET, "--password-file", "f"], "exactly one"),
        (["users", "create", "--user", "alice", "--password", ""], "the password is empty"),
        (["users", "create", "--user", "alice", "--password-file", "/no/such/file"], "cannot read /no/such/file"),
        (["users", "create", "--user", "alice", "--password", SECRET, "--iterations", "100"], "4096<=x<=16384"),
        (["users", "create", "--user", "alice", "--password", SECRET, "--mechanism", "SCRAM-SHA-1"], "SCRAM-SHA-1"),
        (["users", "create", "--password", SECRET], "Missing option '--user'"),
        (["users", "delete", "--user", "alice", "--mechanism", "PLAIN"], "PLAIN"),
        (["acls", "add", "--topic", "t", "--operation", "Read"], "--allow-principal or --deny-principal"),
        (["acls", "add", "--allow-principal", "User:alice"], "--topic, --group, --cluster or --transactional-id"),
        (["acls", "add", "--allow-principal", "alice", "--topic", "t"], "not a principal of the form User:NAME"),
        (
            ["acls", "add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"],
            "'Fly' is not an operation",
        ),
        (
            ["acls", "add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
            "not valid when adding ACLs",
        ),
        (
            ["acls", "add", "--allow-principal", "User:a", "--cluster", "--operation", "Read"],
            "CLUSTER resources do not support READ",
        ),
        (
            ["acls", "add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
            "GROUP resources do not support WRITE",
        ),
        (["acls", "add", "--allow-principal", "User:a", "--producer"], "need --topic"),
        (["acls", "add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--consumer needs --group"),
        (["acls", "add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"], "goes with --producer"),
        (
            ["acls", "add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--operation", "Read"],
            "leave out --operation",
        ),
        (
            [
                "acls",
                "add",
                "--allow-principal",
                "User:a",
                "--deny-principal",
                "User:b",
                "--consumer",
                "--topic",
                "t",
                "--group",
                "g",
            ],
            "--deny-principal",
        ),
        (["acls", "remove", "--allow-principal", "User:a"], "to remove ACLs"),
        (["acls", "remove", "--topic", "t", "--allow-host", "1.2.3.4", "--force"], "need --allow-principal"),
        (["acls", "list", "--resource-pattern-type", "glob"], "'glob' is not one of"),
    ],
)
def test_argument_errors(args: list[str], complaint: str) -> None:
    code, output = run(*args, *NOWHERE)
    assert code == 2 and complaint in output, output
    assert SECRET not in output and "Traceback" not in output


def test_password_file_is_read_and_never_echoed(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(SECRET + "\n")
    code, output = run("users", "create", "--user", "alice", "--password-file", str(secret), *NOWHERE)
    assert code == 1 and "cannot connect to 127.0.0.1:1" in output and SECRET not in output


def test_remove_asks_first() -> None:
    code, output = run("acls", "remove", "--topic", "t", *NOWHERE, input="n\n")
    assert code == 1 and "Remove the matching ACLs of TOPIC 't'?" in output and "Aborted" in output
