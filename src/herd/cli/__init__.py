"""herd's command line: thin, it parses, calls the library and prints.

`herd serve` runs the broker; `herd groups ...`, `herd topics ...`, `herd configs ...`, `herd transactions ...`,
`herd users ...` and `herd acls ...` (herd.cli.groups, herd.cli.topics, herd.cli.configs, herd.cli.transactions,
herd.cli.users, herd.cli.acls) are the admin tools, named as kafka-consumer-groups.sh, kafka-topics.sh,
kafka-configs.sh, kafka-transactions.sh and kafka-acls.sh name things, and all take --command-config FILE (Kafka
client properties: security.protocol, ssl.*, sasl.*); `herd cluster up`
(herd.cli.cluster) runs PostgreSQL and several nodes on this machine; `herd faults ...` (herd.cli.faults) injects
faults on a running node over its HTTP listener. Bad arguments and bad settings
end with one line on stderr and exit code 2, failed operations with one line and exit code 1, never a traceback:
`main` runs click outside its standalone mode and prints every click error as `herd: error: <message>`.
herd.cli.common holds what the admin commands share. `herd`, `python -m herd` and `python -m herd.cli` all run
`main`.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from herd import __version__
from herd.config import BrokerConfig, ConfigError


class HerdCli(click.Group):
    """The top-level group; the admin command groups are imported only when used, so `herd serve` starts
    without loading the client library."""

    LAZY = {
        "acls": ("herd.cli.acls", "acls"),
        "cluster": ("herd.cli.cluster", "cluster"),
        "configs": ("herd.cli.configs", "configs"),
        "faults": ("herd.cli.faults", "faults"),
        "groups": ("herd.cli.groups", "groups"),
        "share-groups": ("herd.cli.share_groups", "share_groups"),
        "topics": ("herd.cli.topics", "topics"),
        "transactions": ("herd.cli.transactions", "transactions"),
        "users": ("herd.cli.users", "users"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY:
            module, attribute = self.LAZY[cmd_name]
            return getattr(importlib.import_module(module), attribute)
        return super().get_command(ctx, cmd_name)


@click.group(cls=HerdCli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="herd")
def cli() -> None:
    """herd: a Kafka-compatible broker built around a faithful consumer-group coordinator."""


@cli.command()
@click.option("--config", "config_path", metavar="FILE", help="A Kafka server.properties file.")
@click.option(
    "--override",
    "overrides",
    metavar="KEY=VALUE",
    multiple=True,
    help="Set one broker property (repeatable), e.g. --override listeners=PLAINTEXT://127.0.0.1:9093",
)
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def serve(config_path: str | None, overrides: tuple[str, ...], log_level: str) -> None:
    """Run the broker (Ctrl-C or SIGTERM stops it gracefully)."""
    try:
        config = BrokerConfig.load(config_path, list(overrides))
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from herd.cluster.topics import OFFSETS_TOPIC, MetadataError, TopicError
    from herd.log.fs import DirectoryLockedError
    from herd.log.postgres.errors import DatabaseError
    from herd.log.store import LogDirsError
    from herd.server.server import run_server

    try:
        run_server(config)
    except ConfigError as e:  # a setting that only fails once used: a TLS keystore, a listener's sasl.jaas.config
        raise click.UsageError(str(e)) from None
    except (DirectoryLockedError, LogDirsError, MetadataError) as e:  # log.dirs in use, or its data unusable
        raise click.ClickException(str(e)) from None
    except DatabaseError as e:  # cluster mode: the database cannot be used (or this node.id is taken)
        raise click.ClickException(str(e)) from None
    except TopicError as e:  # at start only the group coordinator creates a topic
        raise click.ClickException(f"cannot create {OFFSETS_TOPIC}: {e}") from None
    except OSError as e:  # e.g. the port is taken
        raise click.ClickException(e.strerror or str(e)) from None


def main() -> None:
    try:
        code = cli.main(prog_name="herd", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as e:  # `herd` or `herd groups` alone: the help, as click shows it
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("herd: aborted", err=True)
        sys.exit(1)
    except click.ClickException as e:
        click.echo(f"herd: error: {' '.join(e.format_message().split())}", err=True)
        sys.exit(e.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
