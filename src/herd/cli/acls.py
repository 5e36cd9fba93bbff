"""`herd acls ...`: ACLs, with kafka-acls.sh's options (apache/kafka tools/src/main/java/org/apache/kafka/tools/
AclCommand.java).

    herd acls add    --allow-principal User:alice [--allow-host H]... [--deny-principal P] [--deny-host H]...
                     [--operation Read]... (--topic T | --group G | --cluster | --transactional-id T)...
                     [--resource-pattern-type literal|prefixed]
    herd acls add    --allow-principal User:app --producer [--idempotent] --topic T... [--transactional-id T]...
    herd acls add    --allow-principal User:app --consumer --topic T... --group G...
    herd acls list   [resources] [--principal P]... [--resource-pattern-type literal|prefixed|match|any] [--output json]
    herd acls remove resources [--allow-principal P]... [--deny-principal P]... [hosts] [--operation O]... [--force]

As kafka-acls.sh: `add` creates, for every resource, one ACL per principal, host and operation (hosts default to
`*`, operations to All, and each operation must apply to the resource type); `list` shows every ACL without a
resource, else those of the resources with the pattern type given (literal by default; `match` shows every ACL that
applies to the names, wildcard and prefixes included); `remove` asks for confirmation unless --force. Unlike
kafka-acls.sh, `remove` and `list` match any host and any operation when none is given (kafka-acls.sh removes only
host `*` and operation All then), and `remove` without principals removes every ACL of the resources, as
kafka-acls.sh does. `add --producer` and `--consumer` grant what a producer (Write, Describe and Create on the
topics; Write and Describe on the transactional ids; IdempotentWrite on the cluster with --idempotent) or a consumer
(Read and Describe on the topics, Read on the groups) needs, as kafka-acls.sh's do. Operations are accepted as
Kafka writes them (Read, ClusterAction) or as constants (READ, CLUSTER_ACTION). Tables list PRINCIPAL, HOST,
OPERATION, PERMISSION, RESOURCE-TYPE, RESOURCE-NAME, PATTERN-TYPE.
"""

from __future__ import annotations

import itertools

import click

from herd.cli.common import bootstrap_option, echo_json, echo_table, output_option, run_admin
from herd.client.admin import Admin
from herd.client.admin_acls import (
    CLUSTER_NAME,
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["acls"]

HEADERS = ["PRINCIPAL", "HOST", "OPERATION", "PERMISSION", "RESOURCE-TYPE", "RESOURCE-NAME", "PATTERN-TYPE"]
_O = AclOperation
# The operations that apply to each resource type (AclCommand's ResourceToValidOperations / AclEntry).
VALID_OPERATIONS = {
    ResourceType.TOPIC: {
        _O.READ,
        _O.WRITE,
        _O.CREATE,
        _O.DESCRIBE,
        _O.DELETE,
        _O.ALTER,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
        _O.ALL,
    },
    ResourceType.GROUP: {_O.READ, _O.DESCRIBE, _O.DELETE, _O.ALL},
    ResourceType.CLUSTER: {
        _O.CREATE,
        _O.CLUSTER_ACTION,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
        _O.IDEMPOTENT_WRITE,
        _O.ALTER,
        _O.DESCRIBE,
        _O.ALL,
    },
    ResourceType.TRANSACTIONAL_ID: {_O.DESCRIBE, _O.WRITE, _O.ALL},
}
OPERATION_NAMES = {op.name.replace("_", ""): op for op in AclOperation if op not in (_O.ANY, _O.UNKNOWN)}
Resource = tuple[ResourceType, str]


def _operation(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[AclOperation, ...]:
    out = []
    for value in values:
        op = OPERATION_NAMES.get(value.replace("_", "").replace("-", "").upper())
        if op is None:
            names = ", ".join("".join(w.capitalize() for w in o.name.split("_")) for o in OPERATION_NAMES.values())
            raise click.BadParameter(f"{value!r} is not an operation: {names}", ctx=ctx, param=param)
        out.append(op)
    return tuple(out)


def _principals(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        kind, sep, name = value.partition(":")
        if not sep or not kind or not name:
            raise click.BadParameter(f"{value!r} is not a principal of the form User:NAME", ctx=ctx, param=param)
    return values


def _resource_options(fn):  # type: ignore[no-untyped-def]
    for decorator in reversed(
        [
            click.option("--topic", "topics", multiple=True, metavar="TOPIC", help="A topic (repeatable; '*': all)."),
            click.option("--group", "groups", multiple=True, metavar="GROUP", help="A consumer group (repeatable)."),
            click.option("--cluster", is_flag=True, help="The cluster."),
            click.option(
                "--transactional-id",
                "transactional_ids",
                multiple=True,
                metavar="ID",
                help="A transactional id (repeatable).",
            ),
            click.option(
                "--resource-pattern-type",
                type=click.Choice(["literal", "prefixed", "match", "any"], case_sensitive=False),
                default=None,
                help="How resource names match: literal (default), prefixed; match and any only to list or remove.",
            ),
        ]
    ):
        fn = decorator(fn)
    return fn


def _entry_options(fn):  # type: ignore[no-untyped-def]
    for decorator in reversed(
        [
            click.option(
                "--allow-principal",
                "allow_principals",
                multiple=True,
                metavar="User:NAME",
                callback=_principals,
                help="Principal the ACL allows (repeatable).",
            ),
            click.option(
                "--deny-principal",
                "deny_principals",
                multiple=True,
                metavar="User:NAME",
                callback=_principals,
                help="Principal the ACL denies (repeatable).",
            ),
            click.option(
                "--allow-host",
                "allow_hosts",
                multiple=True,
                metavar="HOST",
                help="Host the allowing ACLs apply to (repeatable; default '*').",
            ),
            click.option(
                "--deny-host",
                "deny_hosts",
                multiple=True,
                metavar="HOST",
                help="Host the denying ACLs apply to (repeatable; default '*').",
            ),
            click.option(
                "--operation",
                "operations",
                multiple=True,
                metavar="OPERATION",
                callback=_operation,
                help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                "AlterConfigs, IdempotentWrite, All (repeatable).",
            ),
        ]
    ):
        fn = decorator(fn)
    return fn


def _resources(
    topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool, transactional_ids: tuple[str, ...]
) -> list[Resource]:
    return (
        [(ResourceType.TOPIC, t) for t in topics]
        + [(ResourceType.GROUP, g) for g in groups]
        + ([(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else [])
        + [(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_ids]
    )


def _rows(bindings: list[AclBinding]) -> list[list[str]]:
    return [
        [
            a.principal,
            a.host,
            a.operation.name,
            a.permission.name,
            a.resource_type.name,
            a.resource_name,
            a.pattern_type.name,
        ]
        for a in bindings
    ]


def _echo(bindings: list[AclBinding], output: str = "table") -> None:
    if output == "json":
        echo_json([a.as_dict() for a in bindings])
    else:
        echo_table(HEADERS, _rows(bindings))


@click.group("acls")
def acls() -> None:
    """ACLs: add, list, remove (kafka-acls.sh); the broker enforces them with authorizer.class.name set."""


def _convenience(
    producer: bool,
    consumer: bool,
    idempotent: bool,
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    transactional_ids: tuple[str, ...],
) -> list[tuple[Resource, tuple[AclOperation, ...]]]:
    """kafka-acls.sh's --producer and --consumer (AclCommand.getProducerResourceFilterToAcls and
    getConsumerResourceFilterToAcls): what a producer or a consumer of the topics needs."""
    if not topics:
        raise click.UsageError("--producer and --consumer need --topic")
    if consumer and not groups:
        raise click.UsageError("--consumer needs --group")
    out: list[tuple[Resource, tuple[AclOperation, ...]]] = []
    if producer:
        out += [((ResourceType.TOPIC, t), (_O.WRITE, _O.DESCRIBE, _O.CREATE)) for t in topics]
        out += [((ResourceType.TRANSACTIONAL_ID, t), (_O.WRITE, _O.DESCRIBE)) for t in transactional_ids]
        if idempotent:
            out.append(((ResourceType.CLUSTER, CLUSTER_NAME), (_O.IDEMPOTENT_WRITE,)))
    if consumer:
        out += [((ResourceType.TOPIC, t), (_O.READ, _O.DESCRIBE)) for t in topics]
        out += [((ResourceType.GROUP, g), (_O.READ,)) for g in groups]
    return out


@acls.command("add")
@bootstrap_option
@_entry_options
@_resource_options
@click.option(
    "--producer",
    is_flag=True,
    help="What a producer needs: Write, Describe, Create on the topics (Write, Describe on the transactional ids).",
)
@click.option(
    "--consumer", is_flag=True, help="What a consumer needs: Read, Describe on the topics, Read on the groups."
)
@click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster.")
def add(
    bootstrap: str,
    allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    deny_hosts: tuple[str, ...],
    operations: tuple[AclOperation, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    transactional_ids: tuple[str, ...],
    resource_pattern_type: str | None,
    producer: bool,
    consumer: bool,
    idempotent: bool,
) -> None:
    """Add ACLs: every principal x host x operation, on every resource."""
    if not allow_principals and not deny_principals:
        raise click.UsageError("give --allow-principal or --deny-principal to add ACLs")
    pattern = PatternType[(resource_pattern_type or "literal").upper()]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise click.UsageError(
            f"--resource-pattern-type {pattern.name.lower()} is not valid when adding ACLs: use literal or prefixed"
        )
    if idempotent and not producer:
        raise click.UsageError("--idempotent goes with --producer")
    if producer or consumer:
        if operations or cluster or deny_principals or deny_hosts:  # as kafka-acls.sh's checkInvalidArgs
            raise click.UsageError(
                "--producer and --consumer allow what they name: leave out --operation, "
                "--cluster, --deny-principal and --deny-host"
            )
        plan = _convenience(producer, consumer, idempotent, topics, groups, transactional_ids)
    else:
        resources = _resources(topics, groups, cluster, transactional_ids)
        if not resources:
            raise click.UsageError("give --topic, --group, --cluster or --transactional-id to add ACLs")
        plan = [(resource, operations or (AclOperation.ALL,)) for resource in resources]
    for (kind, _), ops in plan:
        bad = [op for op in ops if op not in VALID_OPERATIONS[kind]]
        if bad:
            valid = ", ".join(sorted(o.name for o in VALID_OPERATIONS[kind]))
            raise click.UsageError(
                f"{kind.name} resources do not support {', '.join(o.name for o in bad)}; they support {valid}"
            )
    found = {
        AclBinding(kind, name, pattern, principal, host, op, permission): None
        for (kind, name), ops in plan
        for permission, principals, hosts in (
            (AclPermissionType.ALLOW, allow_principals, allow_hosts),
            (AclPermissionType.DENY, deny_principals, deny_hosts),
        )
        for principal, host, op in itertools.product(principals, hosts or ("*",), ops)
    }
    bindings = list(found)
    run_admin(bootstrap, lambda admin: admin.create_acls(bindings))
    click.echo(f"Added {len(bindings)} ACL{'s' if len(bindings) != 1 else ''}:")
    _echo(sorted(bindings, key=lambda a: (a.resource_type, a.resource_name, a.principal, a.host, a.operation)))


def _filters(
    resources: list[Resource],
    pattern: PatternType,
    principals: list[tuple[str | None, AclPermissionType, tuple[str, ...]]],
    operations: tuple[AclOperation, ...],
) -> list[AclFilter]:
    targets: list[tuple[ResourceType, str | None]] = list(resources) or [(ResourceType.ANY, None)]
    out = []
    for (kind, name), (principal, permission, hosts), op in itertools.product(
        targets, principals, operations or (AclOperation.ANY,)
    ):
        for host in hosts or (None,):
            out.append(AclFilter(kind, name, pattern, principal, host, op, permission))
    return out


@acls.command("list")
@bootstrap_option
@_resource_options
@click.option(
    "--principal",
    "principals",
    multiple=True,
    metavar="User:NAME",
    callback=_principals,
    help="Only the ACLs of this principal (repeatable).",
)
@output_option
def list_acls(
    bootstrap: str,
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    transactional_ids: tuple[str, ...],
    resource_pattern_type: str | None,
    principals: tuple[str, ...],
    output: str,
) -> None:
    """List ACLs: all of them, or those of the resources and principals given."""
    resources = _resources(topics, groups, cluster, transactional_ids)
    pattern = PatternType[(resource_pattern_type or ("literal" if resources else "any")).upper()]
    filters = _filters(resources, pattern, [(p, AclPermissionType.ANY, ()) for p in principals or (None,)], ())

    async def call(admin: Admin) -> list[AclBinding]:
        found: dict[AclBinding, None] = {}
        for f in filters:
            found.update(dict.fromkeys(await admin.describe_acls(f)))
        return sorted(found)

    _echo(run_admin(bootstrap, call), output)


@acls.command("remove")
@bootstrap_option
@_entry_options
@_resource_options
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
def remove(
    bootstrap: str,
    allow_principals: tuple[str, ...],
    deny_principals: tuple[str, ...],
    allow_hosts: tuple[str, ...],
    deny_hosts: tuple[str, ...],
    operations: tuple[AclOperation, ...],
    topics: tuple[str, ...],
    groups: tuple[str, ...],
    cluster: bool,
    transactional_ids: tuple[str, ...],
    resource_pattern_type: str | None,
    force: bool,
) -> None:
    """Remove the ACLs of the resources (only those of the principals, hosts and operations given)."""
    resources = _resources(topics, groups, cluster, transactional_ids)
    if not resources:
        raise click.UsageError("give --topic, --group, --cluster or --transactional-id to remove ACLs")
    pattern = PatternType[(resource_pattern_type or "literal").upper()]
    entries: list[tuple[str | None, AclPermissionType, tuple[str, ...]]] = [
        (p, AclPermissionType.ALLOW, allow_hosts) for p in allow_principals
    ] + [(p, AclPermissionType.DENY, deny_hosts) for p in deny_principals]
    if not entries:
        if allow_hosts or deny_hosts:
            raise click.UsageError("--allow-host and --deny-host need --allow-principal or --deny-principal")
        entries = [(None, AclPermissionType.ANY, ())]
    filters = _filters(resources, pattern, entries, operations)
    if not force:
        names = ", ".join(f"{kind.name} '{name}'" for kind, name in resources)
        click.confirm(f"Remove the matching ACLs of {names}?", abort=True)
    removed = run_admin(bootstrap, lambda admin: admin.delete_acls(filters))
    if not removed:
        click.echo("No ACL matched.")
        return
    click.echo(f"Removed {len(removed)} ACL{'s' if len(removed) != 1 else ''}:")
    _echo(removed)
