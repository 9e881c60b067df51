"""``kraftctl``: the operator's command line (click)."""

from __future__ import annotations

import sys

import click

from kraft.properties import PropertiesError
from kraft.server_config import ConfigError, ServerConfig, parse_overrides
from kraft.storage import StorageError, format_storage, new_uuid_string


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kraft")
def main() -> None:
    """Run and administer kraft, a Kafka-compatible replicated commit log."""


@main.command("random-uuid")
def random_uuid() -> None:
    """Print a new cluster id (a random UUID in Kafka's base64url form)."""
    click.echo(new_uuid_string())


@main.command("format")
@click.option("--config", "-c", "config_path", required=True, type=click.Path(dir_okay=False),
              help="The node's server.properties.")
@click.option("--cluster-id", "-t", required=True, help="From 'kraftctl random-uuid'.")
@click.option("--ignore-formatted", "-g", is_flag=True,
              help="Leave already formatted directories as they are instead of failing.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a configuration key (repeatable).")
def format_command(config_path, cluster_id, ignore_formatted, overrides) -> None:
    """Format the node's log.dirs and metadata.log.dir for a cluster."""
    try:
        config = ServerConfig.load(config_path, parse_overrides(overrides))
        written = format_storage(config, cluster_id, ignore_formatted=ignore_formatted)
    except (ConfigError, PropertiesError, StorageError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    for d in written:
        click.echo(f"Formatting {d} with cluster.id {cluster_id} and node.id {config.node_id}")
    if not written:
        click.echo("All of the log directories are already formatted.")


@main.command("start")
@click.argument("config_path", type=click.Path(dir_okay=False))
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a configuration key (repeatable).")
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))
def start_command(config_path, overrides, log_level) -> None:
    """Run a node (controller, broker or both) until SIGTERM or Ctrl-C."""
    from kraft.storage import check_storage

    try:
        config = ServerConfig.load(config_path, parse_overrides(overrides))
        cluster_id = check_storage(config)
    except (ConfigError, PropertiesError, StorageError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    from cli import node

    node.setup_logging(config.node_id, log_level)
    try:
        node.run(config, cluster_id)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
