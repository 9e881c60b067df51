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
@click.option("--add-scram", "-S", "scram", multiple=True, metavar="MECH=[name=U,password=P]",
              help="A SCRAM credential the new cluster starts with (KIP-900; repeatable), e.g. "
                   "'SCRAM-SHA-512=[name=alice,password=alice-secret]' (iterations= defaults to 4096).")
@click.option("--release-version", "-r", default=None, metavar="VERSION",
              help="The metadata.version the cluster starts at, by Kafka's name for it (3.9, 3.7-IV4); "
                   "default: the latest kraft supports (3.9-IV0).")
@click.option("--feature", "-f", "features", multiple=True, metavar="NAME=LEVEL",
              help="A feature's starting level (repeatable), e.g. transaction.version=0.")
@click.option("--standalone", "-s", is_flag=True,
              help="A dynamic quorum (controller.quorum.bootstrap.servers) of this controller alone (KIP-853).")
@click.option("--initial-controllers", "-I", default=None, metavar="ID@HOST:PORT:DIRECTORY_ID,...",
              help="A dynamic quorum's first voters, each with its metadata directory's id (KIP-853).")
@click.option("--no-initial-controllers", "-N", is_flag=True,
              help="A controller that joins an existing dynamic quorum: it learns the voters from "
                   "controller.quorum.bootstrap.servers and follows the log until metadata-quorum add-controller.")
def format_command(config_path, cluster_id, ignore_formatted, overrides, scram, release_version, features,
                   standalone, initial_controllers, no_initial_controllers) -> None:
    """Format the node's log.dirs and metadata.log.dir for a cluster."""
    from kraft.quorum_bootstrap import QuorumBootstrapError, initial_voters
    from kraft.security.credentials import CredentialSpecError, bootstrap_records
    from metadata.features import FeatureError, bootstrap_levels
    from metadata.features import bootstrap_records as feature_records

    try:
        config = ServerConfig.load(config_path, parse_overrides(overrides))
        levels = bootstrap_levels(release_version, features)
        voters = initial_voters(config, standalone=standalone, initial_controllers=initial_controllers,
                                no_initial_controllers=no_initial_controllers)
        written = format_storage(config, cluster_id, ignore_formatted=ignore_formatted,
                                 bootstrap_records=feature_records(levels) + bootstrap_records(scram),
                                 initial_voters=voters)
    except (ConfigError, PropertiesError, StorageError, CredentialSpecError, FeatureError,
            QuorumBootstrapError) as exc:
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
@click.option("--profile", "profile_path", default=None, type=click.Path(dir_okay=False),
              help="Run under cProfile and write its stats to this file at exit (benchmarks).")
def start_command(config_path, overrides, log_level, profile_path) -> None:
    """Run a node (controller, broker or both) until SIGTERM or Ctrl-C."""
    from kraft.storage import check_storage

    from kraft.quorum_bootstrap import QuorumBootstrapError, check_engine

    try:
        config = ServerConfig.load(config_path, parse_overrides(overrides))
        cluster_id = check_storage(config)
        check_engine(config)
    except (ConfigError, PropertiesError, StorageError, QuorumBootstrapError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    from cli import node

    node.setup_logging(config.node_id, log_level)
    if config.not_used:
        # Kafka's "These configurations were supplied but are not used": once, at start-up.
        node.log.warning("configuration keys kraft has no use for (Kafka's, or a plugin's), ignored: %s",
                         ", ".join(config.not_used))
    node.raise_open_files_limit()
    from kraft.malloc_tuning import keep_freed_memory

    node.log.info("%s", keep_freed_memory())
    profiler = None
    if profile_path:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    from kraft.security.config import SecurityConfigError
    from kraft.server_config import ListenError

    try:
        node.run(config, cluster_id)
    except KeyboardInterrupt:
        pass
    except (SecurityConfigError, ListenError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile_path)


@main.command("cluster")
@click.option("--controllers", default=3, show_default=True, help="Controller quorum size.")
@click.option("--brokers", default=0, show_default=True,
              help="Broker-only nodes; 0 runs every node as controller and broker (combined mode).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Where nodes keep their data and logs (default: a new temporary directory).")
@click.option("--port", "first_port", default=9092, show_default=True,
              help="First broker port; brokers take consecutive ports (0: any free ports).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A server.properties key for every node (repeatable).")
@click.option("--security", type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
                                              case_sensitive=False), default="PLAINTEXT", show_default=True,
              help="Every listener's protocol, node-to-node included, with throwaway certificates and the "
                   "SASL user admin (password admin-secret; SCRAM-SHA-512 between brokers, PLAIN to the "
                   "controllers); writes client.properties for Kafka's tools and kraftctl --command-config.")
@click.option("--authorizer", is_flag=True,
              help="With --security: ACLs on (Kafka's StandardAuthorizer); the nodes and the admin user are "
                   "super.users, every other user needs ACLs (kraftctl acls).")
def cluster_command(controllers, brokers, data_dir, first_port, host, overrides, security, authorizer) -> None:
    """Format and run a local development cluster until Ctrl-C."""
    import signal
    import tempfile
    import time

    from kraft.local_cluster import LocalCluster

    try:
        extra = parse_overrides(overrides)
    except ConfigError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    base = data_dir or tempfile.mkdtemp(prefix="kraft-cluster-")
    cluster_security = None
    if security.upper() != "PLAINTEXT":
        from kraft.security.dev_cluster import ClusterSecurity

        cluster_security = ClusterSecurity(security, authorizer=authorizer)
    elif authorizer:
        click.echo("Error: --authorizer needs --security (ACLs are per authenticated user)", err=True)
        sys.exit(1)
    cluster = LocalCluster(base, controllers=controllers, brokers=brokers, host=host,
                           first_broker_port=first_port or None, overrides=extra, security=cluster_security)
    stop = []
    # SIGINT too, explicitly: a shell that starts us in the background ignores it for us.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(1))
    try:
        cluster.format()
        cluster.start_all()
        click.echo(f"kraft cluster {cluster.cluster_id}: {len(cluster.nodes)} nodes, data in {base}")
        for node in cluster.nodes.values():
            click.echo(f"  node {node.node_id} ({','.join(node.roles)}): log {node.log_path}, "
                       f"metrics {node.metrics_url}")
        click.echo(f"bootstrap.servers={cluster.bootstrap_servers}")
        if cluster_security is not None:
            from pathlib import Path

            from kraft.properties import format_properties

            client_props = Path(base) / "client.properties"
            client_props.write_text(format_properties(cluster_security.client_properties()))
            click.echo(f"client properties (Java keys): {client_props}")
            for key, value in cluster_security.librdkafka_config().items():
                click.echo(f"  librdkafka: {key}={value}")
        where = f"--bootstrap-server {cluster.bootstrap_servers.split(',')[0]}" + (
            f" --bootstrap-controller {cluster.controllers[0].host}:{cluster.controllers[0].controller_port}"
            if brokers else "")
        click.echo(f"kraftctl top {where}  (live per-node metrics)")
        click.echo(f"kraftctl console {where}  (web console, with the 'console' extra)")
        click.echo("Ctrl-C stops the cluster.")
        while not stop:
            for node in cluster.nodes.values():
                if node.process is not None and node.process.poll() is not None:
                    click.echo(f"node {node.node_id} exited with {node.process.returncode}; see {node.log_path}",
                               err=True)
                    stop.append(1)
                    break
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:
        click.echo(f"Error: {exc}", err=True)
        cluster.stop_all()
        sys.exit(1)
    click.echo("stopping the cluster...")
    cluster.stop_all()
    click.echo("stopped.")


def _register_admin_commands() -> None:
    from cli.acls import acls_command
    from cli.configs import configs_command, quorum_group
    from cli.console import console_consumer, console_producer
    from cli.dump_log import dump_log_command
    from cli.groups import groups_command
    from cli.operations import (cluster_tool_group, delete_records_command, leader_election_command,
                                log_dirs_command, reassign_partitions_command)
    from cli.perf import perf_group
    from cli.top import top_command
    from cli.topics import topics_command
    from cli.transactions import transactions_group
    from cli.web_console import console_command

    main.add_command(topics_command)
    main.add_command(perf_group)
    main.add_command(configs_command)
    main.add_command(acls_command)
    main.add_command(quorum_group)
    main.add_command(groups_command)
    main.add_command(transactions_group)
    main.add_command(console_producer)
    main.add_command(console_consumer)
    main.add_command(dump_log_command)
    main.add_command(top_command)
    main.add_command(delete_records_command)
    main.add_command(leader_election_command)
    main.add_command(log_dirs_command)
    main.add_command(cluster_tool_group)
    main.add_command(reassign_partitions_command)
    main.add_command(console_command)


_register_admin_commands()

if __name__ == "__main__":
    main()
