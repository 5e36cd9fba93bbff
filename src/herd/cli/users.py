"""`herd users ...`: SCRAM credentials of users (KIP-554), what kafka-configs.sh --entity-type users does.

    herd users create --user alice (--password-file F | --password P) [--mechanism SCRAM-SHA-512] [--iterations N]
    herd users delete --user alice [--mechanism M]...
    herd users list [--user U]... [--output json]

`create` upserts one credential (kafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[iterations=8192,
password=...]' --entity-type users --entity-name alice): the client salts and hashes the password, the broker never
receives it (herd.client.admin_users). --password-file reads the password from the file's first line, so that it
shows neither on a command line nor in a shell's history; the password is never printed. `delete` removes the
named mechanisms' credentials, or every credential the user has when none is named. `list` prints one line per
credential: USER, MECHANISM, ITERATIONS. Every command takes --command-config, like the other admin commands.
"""

from __future__ import annotations

from pathlib import Path

import click

from herd.cli.common import bootstrap_option, echo_json, echo_table, output_option, run_admin
from herd.client.admin import Admin, AdminError
from herd.client.admin_users import SCRAM_MECHANISM_TYPES, UserScramCredentials
from herd.client.errors import ErrorCode

__all__ = ["users"]

MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's ScramMechanism bounds (the broker checks them too)
MECHANISMS = click.Choice(sorted(SCRAM_MECHANISM_TYPES), case_sensitive=False)


@click.group("users")
def users() -> None:
    """SCRAM users: create, delete, list credentials (kafka-configs.sh --entity-type users)."""


def _password(password: str | None, password_file: str | None) -> str:
    if (password is None) == (password_file is None):
        raise click.UsageError("give exactly one of --password and --password-file")
    if password_file is not None:
        try:
            lines = Path(password_file).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise click.BadParameter(f"cannot read {password_file}: {reason}", param_hint="'--password-file'") from None
        password = lines[0] if lines else ""
    assert password is not None
    if not password:
        raise click.UsageError("the password is empty")
    return password


@users.command("create")
@bootstrap_option
@click.option("--user", required=True, metavar="NAME", help="The user whose credential is created or replaced.")
@click.option(
    "--password", metavar="PASSWORD", help="The password (prefer --password-file: a command line is visible to others)."
)
@click.option("--password-file", metavar="FILE", help="A file whose first line is the password.")
@click.option("--mechanism", type=MECHANISMS, default="SCRAM-SHA-512", show_default=True)
@click.option(
    "--iterations",
    type=click.IntRange(MIN_ITERATIONS, MAX_ITERATIONS),
    default=8192,
    show_default=True,
    help="PBKDF2 iterations of the salted password.",
)
def create(
    bootstrap: str, user: str, password: str | None, password_file: str | None, mechanism: str, iterations: int
) -> None:
    """Create or replace a user's SCRAM credential."""
    secret = _password(password, password_file)
    mechanism = mechanism.upper()
    run_admin(bootstrap, lambda admin: admin.upsert_user_scram_credential(user, secret, mechanism, iterations))
    click.echo(f"Created {mechanism} credential of user '{user}' ({iterations} iterations).")


@users.command("delete")
@bootstrap_option
@click.option("--user", required=True, metavar="NAME")
@click.option(
    "--mechanism",
    "mechanisms",
    type=MECHANISMS,
    multiple=True,
    help="The mechanism whose credential goes (repeatable); default: every one the user has.",
)
def delete(bootstrap: str, user: str, mechanisms: tuple[str, ...]) -> None:
    """Delete a user's SCRAM credentials."""

    async def call(admin: Admin) -> list[str]:
        chosen = [m.upper() for m in mechanisms]
        if not chosen:
            found = await admin.describe_user_scram_credentials([user])
            chosen = [c.mechanism for u in found for c in u.credentials]
        if not chosen:
            raise AdminError(ErrorCode.resource_not_found, f"User '{user}' has no SCRAM credentials.")
        await admin.alter_user_scram_credentials(deletions=[(user, m) for m in chosen])
        return chosen

    for mechanism in run_admin(bootstrap, call):
        click.echo(f"Deleted {mechanism} credential of user '{user}'.")


@users.command("list")
@bootstrap_option
@click.option("--user", "names", multiple=True, metavar="NAME", help="Only this user (repeatable).")
@output_option
def list_users(bootstrap: str, names: tuple[str, ...], output: str) -> None:
    """List the users with SCRAM credentials (mechanisms and iterations; never secrets)."""
    found: list[UserScramCredentials] = run_admin(
        bootstrap, lambda admin: admin.describe_user_scram_credentials(list(names) or None)
    )
    rows = [(u.user, c.mechanism, c.iterations) for u in found for c in u.credentials]
    if output == "json":
        echo_json([{"user": user, "mechanism": m, "iterations": i} for user, m, i in rows])
    else:
        echo_table(["USER", "MECHANISM", "ITERATIONS"], rows)
