"""``kraftctl console``: a read-only web console of a running cluster.

It shows the brokers and the metadata quorum (leader, epoch, each voter's and observer's
lag: DescribeQuorum), the topics with their partitions' leaders, replicas and ISR
(under-replicated ones marked: Metadata), the consumer groups with their members and lag
(ListGroups, DescribeGroups, OffsetFetch, ListOffsets), all over the Kafka protocol with
kraftctl's admin client, and live throughput charts from each node's metrics endpoint,
found as ``kraftctl top`` finds them.  ``snapshot`` asks, ``throughput`` turns scrapes into
rates, ``page`` renders (on the server: tables and SVG), ``server`` polls and serves
(Starlette on Hypercorn's trio worker).  Needs the ``console`` extra.
"""

from __future__ import annotations

import click

from cli.topics import fail


@click.command("console")
@click.option("--bootstrap-server", required=True, help="host:port[,host:port...] of brokers.")
@click.option("--bootstrap-controller", default=None,
              help="A controller listener: also chart the separate controller nodes' metrics.")
@click.option("--metrics", "metrics", multiple=True, metavar="HOST:PORT|URL",
              help="A node's metrics endpoint, besides those the cluster names (repeatable).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the console listens on.")
@click.option("--port", default=8080, show_default=True, help="Port the console listens on (0: any free port).")
@click.option("--interval", default=2.0, show_default=True, help="Seconds between polls of the cluster.")
@click.option("--command-config", type=click.Path(dir_okay=False), default=None,
              help="Client properties: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*")
def console_command(bootstrap_server, bootstrap_controller, metrics, host, port, interval, command_config):
    """Serve a read-only web console of the cluster: brokers, quorum, topics, groups and
    live throughput."""
    try:
        from cli.web_console.server import Console, serve
    except ImportError as exc:
        fail(f"the web console needs the 'console' extra (pip install 'kraft[console]'): {exc}")
    from cli.admin_client import AdminClient, AdminError
    from cli.top import endpoint_from_option
    from kraft.trio_run import run_trio

    try:
        admin = AdminClient(bootstrap_server, timeout_s=5, command_config=command_config)
        console = Console(admin, bootstrap_server, bootstrap_controller, command_config, interval_s=interval)
        for m in metrics:
            endpoint = endpoint_from_option(m)
            console.endpoints[endpoint.url] = endpoint
    except AdminError as exc:
        fail(str(exc))

    def announce(urls):
        for url in urls:
            click.echo(f"kraft console for {bootstrap_server} at {url}/")

    try:
        run_trio(serve, console, host, port, announce)
    except KeyboardInterrupt:
        pass
