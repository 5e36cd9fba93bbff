"""What the admin commands share: the --bootstrap-server and --output options, running an Admin call, and
printing aligned tables or JSON.

`run_admin(bootstrap, fn)` opens an Admin, awaits `fn(admin)` and closes it; every failure becomes a
click.ClickException carrying one line (exit code 1): a broker error with the message Kafka's tools print,
an unreachable broker as "cannot connect to HOST:PORT: ...". Tables are plain aligned text, columns
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

__all__ = ["bootstrap_option", "echo_json", "echo_table", "output_option", "run_admin", "table"]

T = TypeVar("T")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _check_bootstrap(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        parse_bootstrap(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def bootstrap_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--bootstrap-server", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
                        metavar="HOST:PORT", callback=_check_bootstrap,
                        help="The broker to connect to (several: comma-separated).")(fn)


def output_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--output", type=click.Choice(["table", "json"]), default="table", show_default=True,
                        help="Aligned table for people, JSON for scripts.")(fn)


def run_admin(bootstrap: str, fn: Callable[[Admin], Awaitable[T]]) -> T:
    """Run `fn` against a connected Admin; raises click.ClickException (one line) on any failure."""
    async def main() -> T:
        async with Admin(bootstrap, request_timeout_ms=15_000) as admin:
            return await fn(admin)

    try:
        return asyncio.run(main())
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
