"""`herd configs ...`: topic and broker configs, as kafka-configs.sh does it.

    herd configs describe --entity-type topics|brokers|groups [--entity-name N | --entity-default] [--all]
    herd configs alter --entity-type topics|brokers|groups (--entity-name N | --entity-default)
                       [--add-config K=V,K=[A,B],...] [--delete-config K,...]

Describe prints kafka-configs.sh's layout (apache/kafka tools/src/main/java/org/apache/kafka/tools/
ConfigCommand.java): "Dynamic configs for topic T are:" and one indented line per config,
`name=value sensitive=false synonyms={SOURCE:name=value, ...}`; without --all only the configs set on the entity
(a topic's own, a broker's dynamic ones) are shown, with --all every config ("All configs for ..."). Brokers
without --entity-name describe the cluster-wide defaults ("Default configs for brokers in the cluster are:"),
as --entity-default does. --output json gives the entries. Alter sends one IncrementalAlterConfigs: SET for
--add-config, DELETE for --delete-config (a list value in square brackets, as kafka-configs.sh takes it:
cleanup.policy=[compact,delete]). Failures are one line on stderr with exit code 1; bad arguments exit 2.
"""

from __future__ import annotations

import click

from herd.cli.common import bootstrap_option, echo_json, output_option, run_admin
from herd.client.admin_configs import RESOURCE_TYPES, ConfigEntryDescription

__all__ = ["configs", "parse_add_config"]


def own_source(entity_type: str, name: str) -> str:
    """The source of the configs set on the entity itself, which `describe` shows without --all, as
    kafka-configs.sh filters them (ConfigCommand.describeResourceConfig): a topic's, one broker's dynamic configs,
    or the brokers' cluster-wide defaults."""
    if entity_type == "topics":
        return "DYNAMIC_TOPIC_CONFIG"
    if entity_type == "groups":
        return "DYNAMIC_GROUP_CONFIG"
    return "DYNAMIC_BROKER_CONFIG" if name else "DYNAMIC_DEFAULT_BROKER_CONFIG"


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config: K=V pairs separated by commas, a value holding commas in brackets."""
    pairs: dict[str, str] = {}
    depth, item, items = 0, "", []
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(item)
            item = ""
        else:
            item += char
    items.append(item)
    for entry in (i.strip() for i in items if i.strip()):
        key, sep, value = entry.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{entry!r} is not KEY=VALUE", param_hint="'--add-config'")
        value = value.strip()
        pairs[key.strip()] = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    return pairs


def _entity(entity_type: str, name: str | None, default: bool) -> str:
    """The resource name: a topic's (required), a broker's id, or "" for the brokers' cluster default."""
    if name is not None and default:
        raise click.UsageError("--entity-name and --entity-default cannot be given together")
    if entity_type in ("topics", "groups"):
        if default:
            raise click.UsageError("--entity-default applies to brokers only")
        if name is None:
            raise click.UsageError(f"--entity-name must name the {entity_type[:-1]}")
    return name or ""


def _title(entity_type: str, name: str, everything: bool) -> str:
    kind = {"topics": "topic", "groups": "group"}.get(entity_type, "broker")
    if entity_type == "brokers" and not name:
        return "Default configs for brokers in the cluster are:"
    return f"{'All' if everything else 'Dynamic'} configs for {kind} {name} are:"


def _line(entry: ConfigEntryDescription) -> str:
    synonyms = ", ".join(f"{source}:{n}={'null' if v is None else v}" for n, v, source in entry.synonyms)
    value = "null" if entry.value is None else entry.value
    return f"  {entry.name}={value} sensitive={str(entry.sensitive).lower()} synonyms={{{synonyms}}}"


entity_type_option = click.option(
    "--entity-type", required=True, type=click.Choice(sorted(RESOURCE_TYPES)), help="What to configure."
)
entity_name_option = click.option(
    "--entity-name", metavar="NAME", help="The topic name, the broker id or the group id."
)
entity_default_option = click.option(
    "--entity-default", is_flag=True, help="The cluster-wide default of broker configs."
)


@click.group("configs")
def configs() -> None:
    """Topic, broker and group configs: describe, alter (kafka-configs.sh)."""


@configs.command("describe")
@bootstrap_option
@entity_type_option
@entity_name_option
@entity_default_option
@click.option("--all", "everything", is_flag=True, help="Every config, not only those set on the entity.")
@output_option
def describe(
    bootstrap: str, entity_type: str, entity_name: str | None, entity_default: bool, everything: bool, output: str
) -> None:
    """Describe the configs of a topic or a broker."""
    name = _entity(entity_type, entity_name, entity_default)
    entries = run_admin(bootstrap, lambda admin: admin.describe_configs(entity_type, name))
    if not everything:
        entries = [e for e in entries if e.source == own_source(entity_type, name)]
    if output == "json":
        echo_json(
            [
                {
                    "name": e.name,
                    "value": e.value,
                    "source": e.source,
                    "sensitive": e.sensitive,
                    "read_only": e.read_only,
                    "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in e.synonyms],
                }
                for e in entries
            ]
        )
        return
    click.echo(_title(entity_type, name, everything))
    for entry in entries:
        click.echo(_line(entry))


@configs.command("alter")
@bootstrap_option
@entity_type_option
@entity_name_option
@entity_default_option
@click.option("--add-config", "add", metavar="K=V,...", help="Configs to set (a list value in [a,b]).")
@click.option("--delete-config", "delete", metavar="K,...", help="Configs to remove.")
def alter(
    bootstrap: str, entity_type: str, entity_name: str | None, entity_default: bool, add: str | None, delete: str | None
) -> None:
    """Set or remove configs of a topic or a broker."""
    if entity_type == "brokers" and entity_name is None and not entity_default:
        raise click.UsageError("--entity-name or --entity-default must be given to alter brokers")
    name = _entity(entity_type, entity_name, entity_default)
    settings = parse_add_config(add or "")
    removed = [k.strip() for k in (delete or "").split(",") if k.strip()]
    if not settings and not removed:
        raise click.UsageError("--add-config or --delete-config must be given")
    run_admin(bootstrap, lambda admin: admin.alter_configs(entity_type, name, settings, removed))
    if entity_type == "brokers" and not name:
        click.echo("Completed updating default config for brokers in the cluster.")
    else:
        kind = {"topics": "topic", "groups": "group"}.get(entity_type, "broker")
        click.echo(f"Completed updating config for {kind} {name}.")
