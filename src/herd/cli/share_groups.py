"""`herd share-groups ...`: share-group administration (KIP-932), as kafka-share-groups.sh does it (Kafka 4.2's
ShareGroupCommand; docs/kip-932/share-admin-rules.md section 5).

    herd share-groups list [--state STATE]...
    herd share-groups describe --group G [--members [--verbose] | --state | --offsets [--verbose]]
    herd share-groups reset-offsets --group G (--topic T[:P,P]... | --all-topics)
                                    (--to-earliest | --to-latest | --to-datetime ISO) (--dry-run | --execute)
    herd share-groups delete-offsets --group G --topic T...
    herd share-groups delete --group G...

Kafka's column names in aligned tables, or the same fields as JSON with --output json. `describe --offsets`
(the default) shows GROUP TOPIC PARTITION START-OFFSET LAG (with --verbose LEADER-EPOCH too), "-" where the group
has no state yet; `--members` each member with its epoch and number of partitions (--verbose: the partitions);
`--state` the group's coordinator-side state. `reset-offsets` needs exactly one of --dry-run and --execute, as
Kafka's does, and an Empty group (or none: the reset makes it, as Kafka's does). Failures are one line on stderr
with exit code 1; bad arguments exit 2.
"""

from __future__ import annotations

from typing import Any

import click

from herd.cli.common import bootstrap_option, echo_json, echo_table, output_option, run_admin
from herd.cli.groups import parse_topic_partitions
from herd.client.admin import Admin, parse_datetime
from herd.client.admin_share import ShareGroupDescription, ShareOffsetRow
from herd.client.consumer_protocol import TopicPartition, group_by_topic
from herd.client.errors import error_name

__all__ = ["share_groups"]

OFFSET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG")
MEMBER_COLUMNS = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "#PARTITIONS")
STATE_COLUMNS = ("GROUP", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")


def _group_option(multiple: bool = False) -> Any:
    return click.option("--group", "group", required=True, multiple=multiple, metavar="GROUP", help="The group id.")


@click.group("share-groups")
def share_groups() -> None:
    """Share-group administration (as kafka-share-groups.sh)."""


@share_groups.command("list")
@bootstrap_option
@click.option("--state", "states", multiple=True, metavar="STATE", help="Only groups in this state: Stable, Empty.")
@output_option
def list_share_groups(bootstrap: str, states: tuple[str, ...], output: str) -> None:
    """List the share groups (names only, or GROUP and STATE when filtering by state)."""
    states = tuple(s.strip() for v in states for s in v.split(",") if s.strip())
    listings = run_admin(bootstrap, lambda admin: admin.list_groups(states, ("share",)))
    if output == "json":
        echo_json([{"group": g.group_id, "state": g.state} for g in listings])
    elif states:
        echo_table(("GROUP", "STATE"), [(g.group_id, g.state) for g in listings])
    else:
        for g in listings:
            click.echo(g.group_id)


@share_groups.command("describe")
@bootstrap_option
@_group_option()
@click.option("--members", "view", flag_value="members", help="Show the members instead of the offsets.")
@click.option("--state", "view", flag_value="state", help="Show the group's state instead of the offsets.")
@click.option("--offsets", "view", flag_value="offsets", default=True, help="Show start offsets and lag (default).")
@click.option("--verbose", is_flag=True, help="More columns: members' partitions, offsets' leader epochs.")
@output_option
def describe(bootstrap: str, group: str, view: str, verbose: bool, output: str) -> None:
    """Describe a share group: its start offsets and lag, its members, or its state."""

    async def call(admin: Admin) -> tuple[ShareGroupDescription, list[ShareOffsetRow]]:
        description = await admin.describe_share_group(group)
        rows = await admin.share_offsets(group) if view == "offsets" else []
        return description, rows

    description, rows = run_admin(bootstrap, call)
    if view == "offsets":
        _print_offsets(rows, verbose, output)
    elif view == "members":
        _print_members(description, verbose, output)
    else:
        _print_state(description, output)


def _dash(value: int | None) -> Any:
    return "-" if value is None else value


def _print_offsets(rows: list[ShareOffsetRow], verbose: bool, output: str) -> None:
    if output == "json":
        echo_json(
            [
                {
                    "group": r.group_id,
                    "topic": r.topic,
                    "partition": r.partition,
                    "start_offset": r.start_offset,
                    "leader_epoch": r.leader_epoch,
                    "lag": r.lag,
                }
                for r in rows
            ]
        )
        return
    headers = (*OFFSET_COLUMNS[:4], "LEADER-EPOCH", "LAG") if verbose else OFFSET_COLUMNS
    echo_table(
        headers,
        [
            (
                r.group_id,
                r.topic,
                r.partition,
                _dash(r.start_offset),
                *((r.leader_epoch,) if verbose else ()),
                _dash(r.lag),
            )
            for r in rows
        ],
    )


def _print_members(group: ShareGroupDescription, verbose: bool, output: str) -> None:
    if output == "json":
        echo_json(
            [
                {
                    "group": group.group_id,
                    "consumer_id": m.member_id,
                    "host": m.host,
                    "client_id": m.client_id,
                    "member_epoch": m.member_epoch,
                    "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
                }
                for m in group.members
            ]
        )
        return
    if not group.members:
        click.echo(f"Share group '{group.group_id}' has no active members.", err=True)
    headers = (*MEMBER_COLUMNS, "ASSIGNMENT") if verbose else MEMBER_COLUMNS
    rows = []
    for m in group.members:
        row: tuple[Any, ...] = (group.group_id, m.member_id, m.host, m.client_id, m.member_epoch, len(m.assignment))
        if verbose:
            row += (_assignment_text(m.assignment),)
        rows.append(row)
    echo_table(headers, rows)


def _assignment_text(partitions: tuple[TopicPartition, ...]) -> str:
    if not partitions:
        return "-"
    return ",".join(f"{topic}:{','.join(map(str, parts))}" for topic, parts in group_by_topic(partitions).items())


def _print_state(group: ShareGroupDescription, output: str) -> None:
    if output == "json":
        echo_json(
            {
                "group": group.group_id,
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignment_strategy": group.assignor,
                "state": group.state,
                "members": len(group.members),
            }
        )
        return
    echo_table(
        STATE_COLUMNS,
        [(group.group_id, group.group_epoch, group.assignment_epoch, group.assignor, group.state, len(group.members))],
    )


@share_groups.command("reset-offsets")
@bootstrap_option
@_group_option()
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P]", help="Topic scope (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has share state for.")
@click.option("--to-earliest", is_flag=True, help="Start at the earliest offset.")
@click.option("--to-latest", is_flag=True, help="Start at the log end offset.")
@click.option(
    "--to-datetime",
    metavar="YYYY-MM-DDTHH:mm:SS.sss",
    help="Start at the first offset at or after this time (UTC unless a zone is given).",
)
@click.option("--dry-run", is_flag=True, help="Only show the new start offsets.")
@click.option("--execute", is_flag=True, help="Set the new start offsets.")
@output_option
def reset_offsets(
    bootstrap: str,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: str | None,
    dry_run: bool,
    execute: bool,
    output: str,
) -> None:
    """Set where an Empty share group starts (AlterShareGroupOffsets)."""
    kinds = [k for k, on in (("earliest", to_earliest), ("latest", to_latest), ("datetime", to_datetime)) if on]
    if len(kinds) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-datetime")
    if dry_run == execute:
        raise click.UsageError("give exactly one of --dry-run and --execute")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    timestamp = None
    if kinds[0] == "datetime":
        try:
            timestamp = parse_datetime(to_datetime or "")
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--to-datetime'") from None
    scope = None if all_topics else parse_topic_partitions(topics)

    async def call(admin: Admin) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        plan = await admin.plan_share_reset(group, kinds[0], timestamp, scope)
        errors = await admin.alter_share_offsets(group, plan) if execute and plan else {}
        return plan, errors

    plan, errors = run_admin(bootstrap, call)
    if output == "json":
        echo_json(
            [
                {
                    "group": group,
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "new_offset": offset,
                    "error": error_name(errors[tp]) if errors.get(tp) else None,
                }
                for tp, offset in plan.items()
            ]
        )
    else:
        echo_table(RESET_COLUMNS, [(group, tp.topic, tp.partition, offset) for tp, offset in plan.items()])
    failed = sorted({error_name(code) for code in errors.values() if code})
    if failed:
        raise click.ClickException(f"Start offsets of share group '{group}' could not all be set: {', '.join(failed)}.")


@share_groups.command("delete-offsets")
@bootstrap_option
@_group_option()
@click.option("--topic", "topics", required=True, multiple=True, metavar="TOPIC", help="A topic (repeatable).")
@output_option
def delete_offsets(bootstrap: str, group: str, topics: tuple[str, ...], output: str) -> None:
    """Forget an Empty share group's share state of some topics (DeleteShareGroupOffsets)."""
    results = run_admin(bootstrap, lambda admin: admin.delete_share_offsets(group, topics))
    if output == "json":
        echo_json(
            [
                {"topic": topic, "error": error_name(code) if code else None, "message": message}
                for topic, (code, message) in sorted(results.items())
            ]
        )
    else:
        echo_table(
            ("TOPIC", "STATUS"),
            [
                (topic, f"Error: {message or error_name(code)}" if code else "Successful")
                for topic, (code, message) in sorted(results.items())
            ],
        )
    if any(code for code, _ in results.values()):
        raise click.ClickException(f"Share-group offsets of '{group}' could not all be deleted.")


@share_groups.command("delete")
@bootstrap_option
@_group_option(multiple=True)
def delete(bootstrap: str, group: tuple[str, ...]) -> None:
    """Delete share groups that have no members (and their share state)."""
    results = run_admin(bootstrap, lambda admin: admin.delete_groups(group))
    failed = {g: code for g, code in results.items() if code}
    if failed:
        g, code = next(iter(failed.items()))
        raise click.ClickException(f"Deletion of share group '{g}' failed: {error_name(code)}.")
    names = ", ".join(f"'{g}'" for g in group)
    click.echo(f"Deletion of requested share groups ({names}) was successful.")
