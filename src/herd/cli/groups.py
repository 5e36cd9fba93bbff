"""`herd groups ...`: consumer-group administration, as kafka-consumer-groups.sh does it.

    herd groups list [--state STATE]... [--type TYPE]...
    herd groups describe --group G [--members [--verbose] | --state]
    herd groups delete --group G...
    herd groups delete-offsets --group G --topic T[:P,P]...
    herd groups reset-offsets --group G (--topic T[:P,P]... | --all-topics)
                              (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO | --shift-by N)
                              [--dry-run | --execute]
    herd groups remove-members --group G --instance-id ID...
    herd groups add-members --group G --instance-ids ID[,ID...]           (KIP-469 pre-registration)
    herd groups remove-expected-members --group G (--instance-ids ID[,ID...] | --all)
    herd groups history --group G

Each command parses, calls herd.client.admin and prints: Kafka's column names in aligned tables, or the
same fields as JSON with --output json. Notices Kafka's tool writes to stderr ("has no active members",
"is rebalancing") go to stderr here too, so JSON on stdout stays parseable. Failures are one line on
stderr with exit code 1; bad arguments exit 2.

`add-members` pre-registers static members (the group config herd.expected.instance.ids): the next rebalance
waits for all of them, up to the rebalance timeout, so a scale-up by K costs one rebalance;
`remove-expected-members` withdraws registrations. `describe` lists pre-registered members that have not joined
yet as members without a CONSUMER-ID (JSON: "joined": false) and says so on stderr.

`history` shows the group's last rebalances, oldest first (herd's own: the group config herd.rebalance.history),
one row each: the generation it produced, its cause and (short) reason, the member that started it, when it
started (UTC), how long the join and sync phases took, how many members the generation has, who joined late and
by how long after the first member, who was dropped for missing a phase, and how it ended; --output json gives
every field (herd.client.admin_history). Durations print as 120ms or 3.2s, so that no cell holds two spaces.
"""

from __future__ import annotations

import datetime
from typing import Any

import click
from kio.schema.errors import ErrorCode

from herd.cli.common import bootstrap_option, echo_json, echo_table, output_option, run_admin
from herd.client.admin import Admin, GroupDescription, OffsetRow, ResetSpec, parse_datetime
from herd.client.admin_history import RebalanceHistory
from herd.client.consumer_protocol import TopicPartition, group_by_topic
from herd.client.errors import error_name

__all__ = ["groups"]

OFFSET_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
MEMBER_COLUMNS = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
STATE_COLUMNS = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
MODERN_STATE_COLUMNS = ("GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH")  # KIP-848 groups (kafka-consumer-groups.sh 4.x)
MODERN_MEMBER_COLUMNS = ("CURRENT-EPOCH", "TARGET-ASSIGNMENT")
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
HISTORY_COLUMNS = (
    "GENERATION",
    "CAUSE",
    "REASON",
    "MEMBER",
    "STARTED",
    "JOIN",
    "SYNC",
    "MEMBERS",
    "LATE",
    "DROPPED",
    "OUTCOME",
)
REASON_WIDTH = 48
LISTED = 3  # late or dropped members shown per row (then "+N")
DELETE_REASONS = {
    ErrorCode.group_id_not_found: "The group does not exist",
    ErrorCode.non_empty_group: "The group is not empty",
}


def group_option(multiple: bool = False) -> Any:
    return click.option(
        "--group",
        "group",
        required=True,
        multiple=multiple,
        metavar="GROUP",
        help="The group id" + (" (repeatable)." if multiple else "."),
    )


def parse_topic_partitions(values: tuple[str, ...]) -> dict[str, list[int] | None]:
    """`T` (every partition) or `T:0,1` -> {topic: partitions or None}; raises click.BadParameter."""
    out: dict[str, list[int] | None] = {}
    for value in values:
        topic, sep, parts = value.partition(":")
        if not topic:
            raise click.BadParameter(f"{value!r} names no topic", param_hint="'--topic'")
        if not sep:
            out[topic] = None
            continue
        try:
            numbers = [int(p) for p in parts.split(",")]
        except ValueError:
            raise click.BadParameter(f"{value!r} is not TOPIC:PARTITION,PARTITION", param_hint="'--topic'") from None
        out[topic] = sorted(set((out.get(topic) or []) + numbers))
    return out


@click.group("groups")
def groups() -> None:
    """Consumer groups: list, describe, delete, reset offsets (kafka-consumer-groups.sh)."""


# -- list -------------------------------------------------------------------------------------------------


@groups.command("list")
@bootstrap_option
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Only groups in this state (repeatable or comma-separated): Stable, Empty, ...",
)
@click.option("--type", "types", multiple=True, metavar="TYPE", help="Only groups of this type (classic).")
@output_option
def list_groups(bootstrap: str, states: tuple[str, ...], types: tuple[str, ...], output: str) -> None:
    """List the groups (names only, or GROUP and STATE when filtering by state or type)."""
    states = tuple(s.strip() for v in states for s in v.split(",") if s.strip())
    types = tuple(t.strip() for v in types for t in v.split(",") if t.strip())
    listings = run_admin(bootstrap, lambda admin: admin.list_groups(states, types))
    if output == "json":
        echo_json(
            [
                {"group": g.group_id, "protocol_type": g.protocol_type, "state": g.state, "type": g.group_type}
                for g in listings
            ]
        )
    elif states or types:
        echo_table(("GROUP", "TYPE", "STATE"), [(g.group_id, g.group_type, g.state) for g in listings])
    else:
        for g in listings:
            click.echo(g.group_id)


# -- describe ---------------------------------------------------------------------------------------------


@groups.command("describe")
@bootstrap_option
@click.option("--group", "group", multiple=True, metavar="GROUP", help="The group id (repeatable).")
@click.option("--all-groups", is_flag=True, help="Describe every group.")
@click.option("--members", "view", flag_value="members", help="Show the members instead of the offsets.")
@click.option("--state", "view", flag_value="state", help="Show the group's state instead of the offsets.")
@click.option("--offsets", "view", flag_value="offsets", default=True, help="Show offsets and lag (default).")
@click.option("--verbose", is_flag=True, help="With --members: each member's assigned partitions.")
@output_option
def describe(bootstrap: str, group: tuple[str, ...], all_groups: bool, view: str, verbose: bool, output: str) -> None:
    """Describe groups: offsets with lag (default), --members, or --state."""
    if bool(group) == all_groups:
        raise click.UsageError("describe takes --group (one or more) or --all-groups.")
    if view == "offsets":
        results = run_admin(bootstrap, lambda admin: _each(admin, admin.describe_offsets, group, all_groups))
        _print_offsets(results, output)
        return
    descriptions = run_admin(bootstrap, lambda admin: _each(admin, admin.require_group, group, all_groups))
    if view == "members":
        _print_members(descriptions, verbose, output)
    else:
        _print_states(descriptions, output)


async def _each(admin: Admin, fn: Any, group_ids: tuple[str, ...], all_groups: bool) -> list[Any]:
    """`fn(group)` for each group (every listed group with --all-groups)."""
    ids = [g.group_id for g in await admin.list_groups()] if all_groups else list(group_ids)
    return [await fn(g) for g in ids]


def _notices(group: GroupDescription) -> None:
    if group.expected_members:
        click.echo(
            f"Consumer group '{group.group_id}' expects {len(group.expected_members)} pre-registered "
            f"members that have not joined yet: {', '.join(group.expected_members)}.",
            err=True,
        )
    if group.state == "Empty":
        click.echo(f"Consumer group '{group.group_id}' has no active members.", err=True)
    elif group.state in ("PreparingRebalance", "CompletingRebalance"):
        click.echo(f"Warning: Consumer group '{group.group_id}' is rebalancing.", err=True)


def _print_offsets(results: list[tuple[GroupDescription, list[OffsetRow]]], output: str) -> None:
    rows = [row for _, group_rows in results for row in group_rows]
    for group, _ in results:
        _notices(group)
    if output == "json":
        echo_json(
            [
                {
                    "group": r.group,
                    "topic": r.topic,
                    "partition": r.partition,
                    "current_offset": r.current_offset,
                    "log_end_offset": r.log_end_offset,
                    "lag": r.lag,
                    "consumer_id": r.consumer_id,
                    "host": r.host,
                    "client_id": r.client_id,
                }
                for r in rows
            ]
        )
        return
    echo_table(
        OFFSET_COLUMNS,
        [
            (
                r.group,
                r.topic,
                r.partition,
                r.current_offset,
                r.log_end_offset,
                r.lag,
                r.consumer_id,
                r.host,
                r.client_id,
            )
            for r in rows
        ],
    )


def _assignment_text(partitions: tuple[TopicPartition, ...] | None) -> str:
    if not partitions:
        return "-"
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in group_by_topic(partitions).items())


def _print_members(groups_: list[GroupDescription], verbose: bool, output: str) -> None:
    if output == "json":
        echo_json(
            [
                {
                    "group": g.group_id,
                    "consumer_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "host": m.host,
                    "client_id": m.client_id,
                    "partitions": None if m.assignment is None else len(m.assignment),
                    "assignment": None
                    if m.assignment is None
                    else [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment],
                    "joined": True,
                    "member_epoch": m.member_epoch,
                    "target_assignment": None
                    if m.target_assignment is None
                    else [{"topic": tp.topic, "partition": tp.partition} for tp in m.target_assignment],
                }
                for g in groups_
                for m in g.members
            ]
            + [
                {
                    "group": g.group_id,
                    "consumer_id": None,
                    "group_instance_id": i,
                    "host": None,
                    "client_id": None,
                    "partitions": None,
                    "assignment": None,
                    "joined": False,
                }
                for g in groups_
                for i in g.expected_members
            ]
        )
        return
    for g in groups_:
        _notices(g)
    # a KIP-848 group's members also show their epoch and target, as kafka-consumer-groups.sh --verbose does
    modern = verbose and any(g.group_type == "consumer" for g in groups_)
    headers = MEMBER_COLUMNS + (("ASSIGNMENT",) if verbose else ()) + (MODERN_MEMBER_COLUMNS if modern else ())
    rows: list[tuple[object, ...]] = []
    for g in groups_:
        for m in g.members:
            count = None if m.assignment is None else len(m.assignment)
            row: tuple[object, ...] = (g.group_id, m.member_id, m.group_instance_id, m.host, m.client_id, count)
            row += (_assignment_text(m.assignment),) if verbose else ()
            if modern:
                target = None if m.target_assignment is None else _assignment_text(m.target_assignment)
                row += (m.member_epoch, target)
            rows.append(row)
        for instance_id in g.expected_members:  # pre-registered, not joined yet: no consumer id
            extra = (None,) * ((1 if verbose else 0) + (len(MODERN_MEMBER_COLUMNS) if modern else 0))
            rows.append((g.group_id, None, instance_id, None, None, None) + extra)
    echo_table(headers, rows)


def _print_states(groups_: list[GroupDescription], output: str) -> None:
    if output == "json":
        echo_json(
            [
                {
                    "group": g.group_id,
                    "coordinator": {
                        "id": g.coordinator.node_id,
                        "host": g.coordinator.host,
                        "port": g.coordinator.port,
                    },
                    "assignment_strategy": g.protocol,
                    "state": g.state,
                    "members": len(g.members),
                    "expected_members": list(g.expected_members),
                    "type": g.group_type,
                    "group_epoch": g.group_epoch,
                    "target_assignment_epoch": g.assignment_epoch,
                }
                for g in groups_
            ]
        )
        return
    modern = any(g.group_type == "consumer" for g in groups_)  # GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH
    echo_table(
        STATE_COLUMNS + (MODERN_STATE_COLUMNS if modern else ()),
        [
            (
                g.group_id,
                f"{g.coordinator.host}:{g.coordinator.port} ({g.coordinator.node_id})",
                g.protocol,
                g.state,
                len(g.members),
            )
            + ((g.group_epoch, g.assignment_epoch) if modern else ())
            for g in groups_
        ],
    )


# -- delete, delete-offsets, remove-members -------------------------------------------------------------------


@groups.command("delete")
@bootstrap_option
@group_option(multiple=True)
def delete(bootstrap: str, group: tuple[str, ...]) -> None:
    """Delete groups that have no members (and their committed offsets)."""
    results = run_admin(bootstrap, lambda admin: admin.delete_groups(group))
    failed = {g: code for g, code in results.items() if code}
    if failed:
        g, code = next(iter(failed.items()))
        reason = DELETE_REASONS.get(code, error_name(code))
        raise click.ClickException(f"Deletion of consumer group '{g}' failed: {reason}.")
    names = ", ".join(f"'{g}'" for g in group)
    click.echo(f"Deletion of requested consumer groups ({names}) was successful.")


@groups.command("delete-offsets")
@bootstrap_option
@group_option()
@click.option(
    "--topic",
    "topics",
    required=True,
    multiple=True,
    metavar="TOPIC[:P,P]",
    help="A topic, or some of its partitions (repeatable).",
)
@output_option
def delete_offsets(bootstrap: str, group: str, topics: tuple[str, ...], output: str) -> None:
    """Delete the committed offsets of topics the group no longer consumes (OffsetDelete)."""
    scope = parse_topic_partitions(topics)

    async def call(admin: Admin) -> dict[TopicPartition, int]:
        partitions = await _expand(admin, scope)
        return await admin.delete_offsets(group, partitions)

    results = run_admin(bootstrap, call)
    if output == "json":
        echo_json(
            [
                {"topic": tp.topic, "partition": tp.partition, "error": error_name(code) if code else None}
                for tp, code in sorted(results.items())
            ]
        )
    else:
        echo_table(
            ("TOPIC", "PARTITION", "STATUS"),
            [
                (tp.topic, tp.partition, error_name(code) if code else "Successful")
                for tp, code in sorted(results.items())
            ],
        )
    failed = sorted({error_name(code) for code in results.values() if code})
    if failed:
        raise click.ClickException(f"Offsets of group '{group}' could not all be deleted: {', '.join(failed)}.")


async def _expand(admin: Admin, scope: dict[str, list[int] | None]) -> list[TopicPartition]:
    topics = await admin.describe_topics(sorted(scope))
    counts = {t.name: [p.partition for p in t.partitions] for t in topics}
    return [TopicPartition(t, p) for t, ps in scope.items() for p in (counts[t] if ps is None else ps)]


@groups.command("remove-members")
@bootstrap_option
@group_option()
@click.option(
    "--instance-id",
    "--group-instance-id",
    "instance_ids",
    required=True,
    multiple=True,
    metavar="ID",
    help="The group.instance.id of a static member to remove (repeatable).",
)
def remove_members(bootstrap: str, group: str, instance_ids: tuple[str, ...]) -> None:
    """Remove static members by group.instance.id (KIP-345), in one rebalance."""
    results = run_admin(bootstrap, lambda admin: admin.remove_members(group, instance_ids))
    failed = {i: code for i, code in results.items() if code}
    if failed:
        i, code = next(iter(failed.items()))
        raise click.ClickException(
            f"Removing member with group.instance.id '{i}' from group '{group}' failed: {error_name(code)}."
        )
    ids = ", ".join(instance_ids)
    click.echo(f"Removed members with group.instance.id {ids} from group '{group}'.")


# -- add-members, remove-expected-members (KIP-469 pre-registration) ----------------------------------------


def instance_ids_option(required: bool) -> Any:
    return click.option(
        "--instance-ids",
        "--instance-id",
        "--group-instance-id",
        "instance_ids",
        required=required,
        multiple=True,
        metavar="ID[,ID...]",
        help="group.instance.ids, comma-separated or repeated.",
    )


def _instance_ids(values: tuple[str, ...]) -> list[str]:
    ids = [i.strip() for value in values for i in value.split(",")]
    if any(not i for i in ids):
        raise click.BadParameter("an instance id cannot be empty", param_hint="'--instance-ids'")
    return list(dict.fromkeys(ids))


def _print_expected(group: str, waiting: tuple[str, ...], output: str, done: str, already: list[str]) -> None:
    if output == "json":
        echo_json({"group": group, "expected_members": list(waiting)})
        return
    click.echo(done)
    if already:
        click.echo(f"Already members of group '{group}' (nothing to wait for): {', '.join(already)}.")
    if waiting:
        click.echo(f"Group '{group}' waits for {len(waiting)} pre-registered members: {', '.join(waiting)}.")
    else:
        click.echo(f"Group '{group}' waits for no pre-registered member.")


@groups.command("add-members")
@bootstrap_option
@group_option()
@instance_ids_option(required=True)
@output_option
def add_members(bootstrap: str, group: str, instance_ids: tuple[str, ...], output: str) -> None:
    """Pre-register static members (KIP-469): the next rebalance waits for all of them (up to the rebalance
    timeout), so a scale-up by K instances costs one rebalance. The group need not exist yet."""
    ids = _instance_ids(instance_ids)
    waiting = run_admin(bootstrap, lambda admin: admin.add_expected_members(group, ids))
    done = f"Pre-registered group.instance.id {', '.join(ids)} in group '{group}'."
    _print_expected(group, waiting, output, done, [i for i in ids if i not in waiting])


@groups.command("remove-expected-members")
@bootstrap_option
@group_option()
@instance_ids_option(required=False)
@click.option("--all", "all_ids", is_flag=True, help="Withdraw every pre-registration of the group.")
@output_option
def remove_expected_members(
    bootstrap: str, group: str, instance_ids: tuple[str, ...], all_ids: bool, output: str
) -> None:
    """Withdraw pre-registrations made with add-members (members that joined stay members)."""
    if bool(instance_ids) == all_ids:
        raise click.UsageError("remove-expected-members takes --instance-ids or --all.")
    ids = None if all_ids else _instance_ids(instance_ids)
    waiting = run_admin(bootstrap, lambda admin: admin.remove_expected_members(group, ids))
    done = (
        f"Withdrew every pre-registration of group '{group}'."
        if ids is None
        else f"Withdrew the pre-registration of group.instance.id {', '.join(ids)} in group '{group}'."
    )
    _print_expected(group, waiting, output, done, [])


# -- history ----------------------------------------------------------------------------------------------


@groups.command("history")
@bootstrap_option
@group_option()
@output_option
def history(bootstrap: str, group: str, output: str) -> None:
    """The group's last rebalances: cause, phases, late and dropped members (herd's own)."""
    found: RebalanceHistory = run_admin(bootstrap, lambda admin: admin.rebalance_history(group))
    if not found.exists:
        raise click.ClickException(f"Consumer group '{group}' does not exist.")
    if output == "json":
        echo_json(
            {
                "group": found.group_id,
                "state": found.state,
                "rebalances": list(found.rebalances),
                "omitted": found.omitted,
            }
        )
        return
    if not found.rebalances:
        click.echo(f"Consumer group '{group}' has no rebalance history.", err=True)
    if found.omitted:
        click.echo(f"The {found.omitted} oldest rebalances of group '{group}' are left out (too long).", err=True)
    echo_table(HISTORY_COLUMNS, [_history_row(e) for e in found.rebalances])


def _history_row(e: dict[str, Any]) -> tuple[Any, ...]:
    return (
        e.get("generation"),
        e.get("cause"),
        _short_reason(e.get("reason") or ""),
        e.get("group_instance_id") or e.get("member_id"),
        _utc(e.get("started_ms")),
        _duration(e.get("join_ms")),
        _duration(e.get("sync_ms")),
        e.get("members_total"),
        _listed([f"{_who(m)}+{_duration(m.get('after_ms'))}" for m in e.get("late") or ()]),
        _listed([f"{_who(m)}({m.get('phase')})" for m in e.get("dropped") or ()]),
        e.get("outcome") or "running",
    )


def _who(member: dict[str, Any]) -> str:
    return str(member.get("group_instance_id") or member.get("member_id"))


def _short_reason(reason: str) -> str:
    """The client's KIP-800 reason when it gave one, else herd's words; one line, cut to REASON_WIDTH."""
    _, sep, client = reason.rpartition("client reason: ")
    text = client.split(")")[0] if sep and not client.startswith("not provided") else reason
    text = " ".join(text.split())
    return text if len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 3] + "..."


def _duration(ms: int | None) -> str | None:
    if ms is None:
        return None
    return f"{ms}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


def _utc(ms: int | None) -> str | None:
    if ms is None:
        return None
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _listed(items: list[str]) -> str | None:
    if not items:
        return None
    shown = ",".join(items[:LISTED])
    return shown + (f",+{len(items) - LISTED}" if len(items) > LISTED else "")


# -- reset-offsets ----------------------------------------------------------------------------------------


def _reset_spec(
    to_earliest: bool, to_latest: bool, to_offset: int | None, to_datetime: str | None, shift_by: int | None
) -> ResetSpec:
    chosen = [
        k
        for k, v in (
            ("earliest", to_earliest),
            ("latest", to_latest),
            ("offset", to_offset is not None),
            ("datetime", to_datetime is not None),
            ("shift", shift_by is not None),
        )
        if v
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "reset-offsets takes exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by."
        )
    kind = chosen[0]
    if kind == "datetime":
        try:
            return ResetSpec(kind, parse_datetime(to_datetime or ""))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--to-datetime'") from None
    value = to_offset if kind == "offset" else shift_by if kind == "shift" else 0
    return ResetSpec(kind, value or 0)


@groups.command("reset-offsets")
@bootstrap_option
@group_option()
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P]", help="Topic scope (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="Reset to the earliest offset.")
@click.option("--to-latest", is_flag=True, help="Reset to the log end offset.")
@click.option("--to-offset", type=int, metavar="N", help="Reset to offset N (kept within the log).")
@click.option(
    "--to-datetime",
    metavar="YYYY-MM-DDTHH:mm:SS.sss",
    help="Reset to the first offset at or after this time (UTC unless a zone is given).",
)
@click.option("--shift-by", type=int, metavar="N", help="Move the committed offset by N (may be negative).")
@click.option("--dry-run", is_flag=True, help="Only show the new offsets (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@output_option
def reset_offsets(
    bootstrap: str,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    dry_run: bool,
    execute: bool,
    output: str,
) -> None:
    """Reset a group's committed offsets (refused while the group has members)."""
    if bool(topics) == all_topics:
        raise click.UsageError("reset-offsets takes exactly one of --topic, --all-topics.")
    if dry_run and execute:
        raise click.UsageError("--dry-run and --execute are mutually exclusive.")
    spec = _reset_spec(to_earliest, to_latest, to_offset, to_datetime, shift_by)
    scope = None if all_topics else parse_topic_partitions(topics)

    async def call(admin: Admin) -> dict[TopicPartition, int]:
        planned = await admin.plan_reset(group, spec, scope)
        if execute:
            await admin.commit_reset(group, planned)
        return planned

    planned = run_admin(bootstrap, call)
    if not dry_run and not execute:
        click.echo("WARN: No action will be performed as the --execute option is missing.", err=True)
    if output == "json":
        echo_json(
            [
                {"group": group, "topic": tp.topic, "partition": tp.partition, "new_offset": offset}
                for tp, offset in sorted(planned.items())
            ]
        )
    else:
        echo_table(RESET_COLUMNS, [(group, tp.topic, tp.partition, o) for tp, o in sorted(planned.items())])
