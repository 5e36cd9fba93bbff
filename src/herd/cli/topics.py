"""`herd topics ...`: topic administration, as kafka-topics.sh does it.

    herd topics create --topic T [--partitions N] [--replication-factor R] [--config K=V]... [--if-not-exists]
    herd topics list [--exclude-internal]
    herd topics describe [--topic T]... [--exclude-internal]
    herd topics alter --topic T [--partitions N] [--config K=V]... [--delete-config K]...
    herd topics delete --topic T...

Describe prints kafka-topics.sh's layout: one line per topic (Topic, TopicId, PartitionCount,
ReplicationFactor, Configs) and one indented line per partition (Partition, Leader, Replicas, Isr);
--output json gives the same fields. Failures are one line on stderr with exit code 1 ("Topic 'x' already
exists."); bad arguments exit 2.
"""

from __future__ import annotations

import click

from herd.cli.common import bootstrap_option, echo_json, output_option, run_admin
from herd.client.admin import Admin
from herd.client.admin_topics import TopicDescription

__all__ = ["topics"]


def _configs(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{value!r} is not KEY=VALUE", param_hint="'--config'")
        out[key.strip()] = setting.strip()
    return out


@click.group("topics")
def topics() -> None:
    """Topics: create, list, describe, alter partitions, delete (kafka-topics.sh)."""


@topics.command("create")
@bootstrap_option
@click.option("--topic", required=True, metavar="TOPIC", help="The topic to create.")
@click.option("--partitions", type=click.IntRange(min=1), help="Partition count (broker default if omitted).")
@click.option("--replication-factor", type=click.IntRange(min=1), help="Replication factor (broker default).")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="A topic config (repeatable).")
@click.option("--if-not-exists", is_flag=True, help="Succeed quietly when the topic already exists.")
def create(
    bootstrap: str,
    topic: str,
    partitions: int | None,
    replication_factor: int | None,
    configs: tuple[str, ...],
    if_not_exists: bool,
) -> None:
    """Create a topic."""
    settings = _configs(configs)

    async def call(admin: Admin) -> bool:
        if if_not_exists and topic in await admin.list_topics():
            return False
        await admin.create_topic(topic, partitions, replication_factor, settings)
        return True

    if run_admin(bootstrap, call):
        click.echo(f"Created topic {topic}.")


@topics.command("list")
@bootstrap_option
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (__consumer_offsets).")
@output_option
def list_topics(bootstrap: str, exclude_internal: bool, output: str) -> None:
    """List topic names."""
    names = run_admin(bootstrap, lambda admin: admin.list_topics(include_internal=not exclude_internal))
    if output == "json":
        echo_json(names)
    else:
        for name in names:
            click.echo(name)


def _describe_lines(t: TopicDescription) -> list[str]:
    configs = ",".join(f"{k}={v}" for k, v in sorted(t.configs.items()))
    lines = [
        f"Topic: {t.name}\tTopicId: {t.topic_id or '-'}\tPartitionCount: {len(t.partitions)}\t"
        f"ReplicationFactor: {t.replication_factor}\tConfigs: {configs}"
    ]
    for p in t.partitions:
        lines.append(
            f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        )
    return lines


def _describe_json(t: TopicDescription) -> dict[str, object]:
    return {
        "topic": t.name,
        "topic_id": t.topic_id,
        "partition_count": len(t.partitions),
        "replication_factor": t.replication_factor,
        "configs": dict(t.configs),
        "internal": t.internal,
        "partitions": [
            {"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr)}
            for p in t.partitions
        ],
    }


@topics.command("describe")
@bootstrap_option
@click.option("--topic", "names", multiple=True, metavar="TOPIC", help="Topic to describe (default: all).")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics.")
@output_option
def describe(bootstrap: str, names: tuple[str, ...], exclude_internal: bool, output: str) -> None:
    """Describe topics: partitions, leaders, replicas, ISR and the configs set on them."""
    described = run_admin(bootstrap, lambda admin: admin.describe_topics(list(names) or None))
    described = [t for t in described if not (exclude_internal and t.internal)]
    if output == "json":
        echo_json([_describe_json(t) for t in described])
        return
    for t in described:
        click.echo("\n".join(_describe_lines(t)))


@topics.command("alter")
@bootstrap_option
@click.option("--topic", required=True, metavar="TOPIC", help="The topic to change.")
@click.option("--partitions", type=click.IntRange(min=1), help="The new partition count.")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="A topic config to set (repeatable).")
@click.option("--delete-config", "deleted", multiple=True, metavar="KEY", help="A topic config to remove (repeatable).")
def alter(
    bootstrap: str, topic: str, partitions: int | None, configs: tuple[str, ...], deleted: tuple[str, ...]
) -> None:
    """Add partitions to a topic, or set or remove its configs (herd configs alter does the same)."""
    settings = _configs(configs)
    if partitions is None and not settings and not deleted:
        raise click.UsageError("Missing option '--partitions' (or '--config', '--delete-config').")

    async def call(admin: Admin) -> None:
        if partitions is not None:
            await admin.alter_partitions(topic, partitions)
        if settings or deleted:
            await admin.alter_configs("topics", topic, settings, [k.strip() for k in deleted])

    run_admin(bootstrap, call)
    if partitions is not None:
        click.echo("Adding partitions succeeded!")
    if settings or deleted:
        click.echo(f"Completed updating config for topic {topic}.")


@topics.command("delete")
@bootstrap_option
@click.option("--topic", "names", required=True, multiple=True, metavar="TOPIC", help="Topic to delete (repeatable).")
def delete(bootstrap: str, names: tuple[str, ...]) -> None:
    """Delete topics."""
    run_admin(bootstrap, lambda admin: admin.delete_topics(list(names)))
    for name in names:
        click.echo(f"Deleted topic {name}.")
