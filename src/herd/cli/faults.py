"""`herd faults ...`: fault injection on a running node, through its HTTP listener (herd.http.listener, with
herd.faults.enable=true; see docs/faults.md).

    herd faults add [--action A] [--api API] [--group G] [--topic T] [--member M] [--client-id C] [--error E]
                    [--delay-ms N] [--when before|after] [--count N] [--probability P] [--seed S]
    herd faults list
    herd faults remove ID
    herd faults clear
    herd faults drop-connections [--client-id C] [--host H]
    herd faults move (--group G | --topic T --partition P) [--to NODE] [--unavailable-ms N]

Every command takes `--http HOST:PORT` (or the HERD_HTTP environment variable) and `--output json`. `add`
without --action injects an error when --error is given. A refused rule, a node that refuses (faults disabled)
or cannot be reached: one line on stderr, exit code 1; bad arguments exit 2. The calls are herd.client.node_http's,
as those of herd.testing.Faults, the same API for Python.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from herd.cli.common import echo_json, echo_table, output_option
from herd.client.node_http import NodeHttpError, call_node

__all__ = ["faults"]

COLUMNS = (
    "ID",
    "ACTION",
    "API",
    "GROUP",
    "TOPIC",
    "MEMBER",
    "CLIENT-ID",
    "ERROR",
    "DELAY-MS",
    "WHEN",
    "COUNT",
    "PROBABILITY",
    "SEED",
    "HITS",
)


def _check_http(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    if not value:
        raise click.BadParameter("name the node's HTTP listener (herd.http.listener), or set HERD_HTTP")
    address = value.removeprefix("http://").rstrip("/")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise click.BadParameter(f"{value!r} is not HOST:PORT")
    return address


def http_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--http",
        "http",
        envvar="HERD_HTTP",
        metavar="HOST:PORT",
        callback=_check_http,
        help="The node's HTTP listener (herd.http.listener); env HERD_HTTP.",
    )(fn)


def call(address: str, method: str, path: str, body: Any = None) -> Any:
    """The node's JSON answer; raises click.ClickException (one line, exit 1) on any failure."""
    try:
        return call_node(f"http://{address}", method, path, body, timeout=15)
    except NodeHttpError as e:
        raise click.ClickException(str(e)) from None


def show(output: str, answer: Any, line: Callable[[], str]) -> None:
    """`answer` as JSON with --output json, else the one `line` for people."""
    if output == "json":
        echo_json(answer)
    else:
        click.echo(line())


@click.group("faults")
def faults() -> None:
    """Inject faults on a running node: errors, delays, dropped or stalled connections, coordinator moves."""


@faults.command("add")
@http_option
@click.option(
    "--action",
    type=click.Choice(["error", "delay", "drop", "stall"]),
    help="What to do with matching requests (default: error when --error is given).",
)
@click.option("--api", metavar="API", help="Kafka API name (e.g. Heartbeat) or key.")
@click.option("--group", metavar="GROUP", help="Only requests about this group.")
@click.option("--topic", metavar="TOPIC", help="Only requests naming this topic.")
@click.option("--member", metavar="ID", help="Only requests of this member id or group instance id.")
@click.option("--client-id", metavar="ID", help="Only requests with this client id.")
@click.option("--error", metavar="ERROR", help="The error to answer (e.g. NOT_COORDINATOR), for --action error.")
@click.option("--delay-ms", type=click.IntRange(min=0), help="delay: handle after this long; stall: stall this long.")
@click.option("--when", type=click.Choice(["before", "after"]), help="drop: before handling (default) or after.")
@click.option("--count", type=click.IntRange(min=1), help="Apply this many times, then remove the rule.")
@click.option("--probability", type=click.FloatRange(0, 1, min_open=True), help="Apply with this probability.")
@click.option("--seed", type=int, help="Seed of the probability's random stream (reproducible runs).")
@output_option
def add(http: str, action: str | None, output: str, **fields: Any) -> None:
    """Add a fault rule."""
    if action is None:
        if fields["error"] is None:
            raise click.UsageError("add needs --action (error, delay, drop or stall), or --error")
        action = "error"
    api = fields["api"]
    if api is not None and api.isdigit():
        fields["api"] = int(api)
    rule = call(http, "POST", "/v1/faults", {"action": action, **{k: v for k, v in fields.items() if v is not None}})
    show(output, rule, lambda: f"added fault rule {rule['id']}")


@faults.command("list")
@http_option
@output_option
def list_rules(http: str, output: str) -> None:
    """List the node's fault rules, with how often each applied (HITS)."""
    rules = call(http, "GET", "/v1/faults")["faults"]
    if output == "json":
        echo_json(rules)
        return
    keys = [c.lower().replace("-", "_") for c in COLUMNS]
    echo_table(COLUMNS, [[rule.get(k) for k in keys] for rule in rules])


@faults.command("remove")
@http_option
@click.argument("rule_id", metavar="ID", type=int)
@output_option
def remove(http: str, rule_id: int, output: str) -> None:
    """Remove one rule (ending the stalls it caused)."""
    rule = call(http, "DELETE", f"/v1/faults/{rule_id}")
    show(output, rule, lambda: f"removed fault rule {rule_id}")


@faults.command("clear")
@http_option
@output_option
def clear(http: str, output: str) -> None:
    """Remove every rule."""
    answer = call(http, "DELETE", "/v1/faults")
    show(output, answer, lambda: f"removed {answer['removed']} fault rules")


@faults.command("drop-connections")
@http_option
@click.option("--client-id", metavar="ID", help="Only connections whose latest request had this client id.")
@click.option("--host", metavar="HOST", help="Only connections from this address.")
@output_option
def drop_connections(http: str, client_id: str | None, host: str | None, output: str) -> None:
    """Abort open Kafka connections now (every one without filters)."""
    body = {k: v for k, v in (("client_id", client_id), ("host", host)) if v is not None}
    answer = call(http, "POST", "/v1/connections/drop", body)
    show(output, answer, lambda: f"dropped {answer['dropped']} connections")


@faults.command("move")
@http_option
@click.option("--group", metavar="GROUP", help="Move this group's coordinator.")
@click.option("--topic", metavar="TOPIC", help="Move the leadership of a partition of this topic (cluster mode).")
@click.option("--partition", type=click.IntRange(min=0), help="The partition, with --topic.")
@click.option("--to", "to", type=click.IntRange(min=0), metavar="NODE", help="The node to move to (cluster mode).")
@click.option(
    "--unavailable-ms",
    type=click.IntRange(min=0),
    help="Embedded mode, --group: answer NOT_COORDINATOR this long before reloading.",
)
@output_option
def move(
    http: str,
    group: str | None,
    topic: str | None,
    partition: int | None,
    to: int | None,
    unavailable_ms: int | None,
    output: str,
) -> None:
    """Move a group's coordinator or a partition's leadership, as a failover would."""
    if (group is None) == (topic is None):
        raise click.UsageError("move takes --group, or --topic with --partition")
    if topic is not None and partition is None:
        raise click.UsageError("--topic needs --partition")
    body: dict[str, Any] = {"group": group} if group is not None else {"topic": topic, "partition": partition}
    body.update({k: v for k, v in (("to", to), ("unavailable_ms", unavailable_ms)) if v is not None})
    answer = call(http, "POST", "/v1/moves", body)
    where = answer.get("partition")
    show(
        output,
        answer,
        lambda: (
            f"moved {where[0]}-{where[1]} from node {answer.get('from')} to node "
            f"{answer.get('to')} (leader epoch {answer.get('leader_epoch')})"
            if where
            else json.dumps(answer)
        ),
    )
