"""What the admin commands share: the --bootstrap-server, --command-config and --output options, running an Admin
call, and printing aligned tables or JSON.

`bootstrap_option` gives a command both --bootstrap-server and --command-config FILE, a Java .properties file of
Kafka client properties (security.protocol, ssl.*, sasl.*) as Kafka's tools read it
(kafka-consumer-groups.sh --command-config client.properties): the file is read while the arguments are parsed
(an unreadable file or an unusable setting is a one-line argument error, exit code 2, that never shows a
password) and the ClientSecurity is kept in the click context, where `run_admin` finds it, so that every admin
command takes it without passing it along. `run_admin(bootstrap, fn)` opens an Admin, awaits `fn(admin)` and
closes it; every failure becomes a click.ClickException carrying one line (exit code 1): a broker error with
the message Kafka's tools print, an unreachable broker as "cannot connect to HOST:PORT: ...", refused
credentials with the broker's message. Tables are plain aligned text, columns
left-aligned and separated by two spaces, missing values printed "-" (as kafka-consumer-groups.sh does),
so a line splits back into its fields.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import click

from herd.client.admin import Admin
from herd.client.connection import parse_bootstrap
from herd.client.errors import ConnectionLost, KafkaError
from herd.client.security import ClientSecurity, SecurityConfigError

__all__ = ["bootstrap_option", "command_security", "echo_json", "echo_table", "output_option", "run_admin", "table"]

T = TypeVar("T")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
SECURITY_KEY = "herd.client_security"  # where --command-config leaves its ClientSecurity in ctx.meta


def _check_bootstrap(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        parse_bootstrap(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def _read_command_config(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    try:
        security = ClientSecurity.from_file(value)
        security.ssl_context()  # its files are read now: a bad one is an argument error
        ctx.meta[SECURITY_KEY] = security
    except SecurityConfigError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def bootstrap_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--bootstrap-server (the command's `bootstrap` argument) and --command-config (read into the context)."""
    fn = click.option(
        "--command-config",
        metavar="FILE",
        expose_value=False,
        callback=_read_command_config,
        help="A properties file of Kafka client settings: security.protocol, ssl.*, sasl.*.",
    )(fn)
    return click.option(
        "--bootstrap-server",
        "bootstrap",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        metavar="HOST:PORT",
        callback=_check_bootstrap,
        help="The broker to connect to (several: comma-separated).",
    )(fn)


def command_security() -> ClientSecurity | None:
    """The ClientSecurity of the running command's --command-config (None without one)."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(SECURITY_KEY)


def output_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--output",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Aligned table for people, JSON for scripts.",
    )(fn)


def run_admin(bootstrap: str, fn: Callable[[Admin], Awaitable[T]]) -> T:
    """Run `fn` against a connected Admin; raises click.ClickException (one line) on any failure."""

    async def main() -> T:
        async with Admin(bootstrap, request_timeout_ms=15_000, security=command_security()) as admin:
            return await fn(admin)

    try:
        return asyncio.run(main())
    except SecurityConfigError as exc:  # a TLS file that cannot be loaded
        raise click.UsageError(str(exc)) from None
    except ConnectionLost as exc:
        raise click.ClickException(_one_line(exc.message)) from None
    except KafkaError as exc:
        raise click.ClickException(_one_line(exc.message)) from None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns separated by two spaces; None and "" print as "-"."""
    cells = [list(headers)] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    click.echo(table(headers, rows))


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))
