"""``python -m jepsen``: the fault-injection suite's command line."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import NoReturn

import click

from jepsen.checkers import linear
from jepsen.history import JSONL_FILE, PARQUET_FILE

HISTORY_FILES = (PARQUET_FILE, JSONL_FILE)

# pyproject.toml's `jepsen` extra, module -> distribution: Parquet histories (pyarrow), the
# Spark checkers (pyspark), the plots of index.html (matplotlib), `--client kafka-python`.
# Each is imported only where it is used, deep in a run: without this check a run would
# start a cluster, lose its Parquet history, plots and index.html, and still print the path.
JEPSEN_EXTRA = {"pyarrow": "pyarrow", "pyspark": "pyspark", "matplotlib": "matplotlib",
                "kafka": "kafka-python"}


def missing_jepsen_extra() -> list[str]:
    """The distributions of the `jepsen` extra that cannot be imported here."""
    return [dist for module, dist in JEPSEN_EXTRA.items()
            if importlib.util.find_spec(module) is None]


@click.group()
def main() -> None:
    """Jepsen-style fault injection for kraft."""
    missing = missing_jepsen_extra()
    if missing:
        click.echo(f"python -m jepsen needs kraft's `jepsen` extra ({', '.join(missing)} "
                   "not installed): pip install -e '.[jepsen]'", err=True)
        sys.exit(2)


@main.command()
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--history-topic", metavar="TOPIC", default=None,
              help="Check the history in this topic of a running cluster (as `test "
                   "--history-topic` writes it), read by Spark's Kafka source; STORE "
                   "(created if missing) receives it as history.parquet.")
@click.option("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT...]", default=None,
              help="Brokers of the --history-topic cluster.")
@click.option("--spark-master", default="local[*]", show_default=True,
              help="Spark master URL to check on.")
@click.option("--no-spark", is_flag=True, help="Check in this process, without Spark.")
@click.option("--workload", type=click.Choice(["auto", "queue", "txn", "linearizable"]),
              default="auto", show_default=True)
@click.option("--model", type=click.Choice(sorted(linear.MODELS)), default="cas-register",
              show_default=True, help="Model for the linearizability checker.")
@click.option("--unkeyed", is_flag=True,
              help="Register values are bare payloads of one object, not [key, payload].")
@click.option("--sub-via", type=click.Choice(["assign", "subscribe"]), default=None,
              help="How consumers got partitions (inferred from the history by default).")
@click.option("--budget", type=int, default=linear.DEFAULT_BUDGET, show_default=True,
              help="Per-key linearizability search budget before 'unknown'.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def check(store, history_topic, bootstrap_server, spark_master, no_spark, workload, model,
          unkeyed, sub_via, budget, quiet) -> None:
    """Re-check the history stored in STORE and write STORE/results.json; with
    --history-topic, check the history in that topic instead.

    Exit status: 0 valid, 1 invalid, 2 unknown (or an error).
    """
    from jepsen.checkers import check_store

    if history_topic is not None:
        if no_spark:
            raise click.UsageError("--history-topic is read by Spark's Kafka source; "
                                   "it cannot be checked with --no-spark")
        if not bootstrap_server:
            raise click.UsageError("--history-topic needs --bootstrap-server")
        if any(os.path.isfile(os.path.join(store, f)) for f in HISTORY_FILES):
            raise click.BadParameter(f"{store!r} already holds a history; give a new or "
                                     "empty directory", param_hint="STORE")
        jars = _topic_jars(bootstrap_server, history_topic)
    else:
        if bootstrap_server:
            raise click.UsageError("--bootstrap-server is for --history-topic")
        if not os.path.isdir(store):
            raise click.BadParameter(f"no directory {store!r}", param_hint="STORE")
        jars = None
    spark, owned = None, False
    if not no_spark:
        from pyspark.sql import SparkSession

        from jepsen.checkers.spark import spark_session

        owned = SparkSession.getActiveSession() is None  # else: embedded, leave it running
        from jepsen.history import history_size

        spark = spark_session(spark_master, jars=jars,
                              records=history_size(store) if history_topic is None else None)
    try:
        if history_topic is not None:
            _save_topic(spark, bootstrap_server, history_topic, store, quiet)
        results = check_store(store, spark=spark, workload=workload, model=model,
                              keyed=not unkeyed, sub_via=sub_via, budget=budget,
                              progress=not quiet)
    finally:
        if owned:
            spark.stop()
    v = results["valid"]
    for name, r in results["checkers"].items():
        bad = r.get("bad-anomaly-types") or (
            [f"{r['failures']['count']} non-linearizable keys"]
            if r.get("failures", {}).get("count") else [])
        click.echo(f"{name}: {r['valid']}" + (f" ({', '.join(bad)})" if bad else ""))
    click.echo(f"valid: {v}  ->  {store}/results.json")
    sys.exit(0 if v is True else (1 if v is False else 2))


def _topic_jars(bootstrap: str, topic: str) -> list[str]:
    """Spark's Kafka source, once the topic is known to exist (before any download)."""
    from jepsen.checkers.spark_kafka import (
        ConnectorUnavailable,
        TopicUnavailable,
        connector_jars,
        require_topic,
    )

    try:
        require_topic(bootstrap, topic)
        return connector_jars()
    except TopicUnavailable as e:
        _fail(str(e))
    except ConnectorUnavailable as e:
        _fail(f"Spark's Kafka source (spark-sql-kafka-0-10) is not available: {e}")


def _save_topic(spark, bootstrap: str, topic: str, store: str, quiet: bool) -> None:
    from jepsen.checkers.spark_kafka import ConnectorUnavailable, TopicUnavailable, save_topic

    started = time.monotonic()
    try:
        path = save_topic(spark, bootstrap, topic, store)
    except (TopicUnavailable, ConnectorUnavailable) as e:
        _fail(str(e))
    except Exception as e:  # noqa: BLE001 -- a JVM error: its first line says what
        _fail(f"reading topic {topic} from {bootstrap} failed: "
              f"{(str(e).strip().splitlines() or [type(e).__name__])[0]}")
    if not quiet:
        click.echo(f"[check] topic {topic} -> {path} "
                   f"({time.monotonic() - started:.1f}s)", err=True)


def _fail(message: str) -> NoReturn:
    click.echo(f"[jepsen] {message}", err=True)
    sys.exit(2)


def _csv(ctx, param, value):
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]


def _test_options(f):
    """The options shared by ``test`` and ``campaign``."""
    from jepsen.nemesis import DEFAULT_INTERVAL_S, FAULTS
    from jepsen.workloads import CLIENTS, WORKLOADS

    opts = [
        click.option("--workload", type=click.Choice(WORKLOADS), default="queue",
                     show_default=True),
        click.option("--nemesis", default="kill", show_default=True, callback=_csv,
                     help=f"Comma-separated faults ({', '.join(FAULTS)}), or 'none'."),
        click.option("--nodes", type=int, default=5, show_default=True),
        click.option("--time-limit", type=float, default=60.0, show_default=True,
                     help="Seconds of workload (the heal, recovery and drain follow)."),
        click.option("--rate", type=float, default=500.0, show_default=True,
                     help="Target client operations per second, in total."),
        click.option("--concurrency", type=int, default=10, show_default=True),
        click.option("--hosts", type=click.Choice(["local", "netns"]), default="local",
                     show_default=True),
        click.option("--unsafe", is_flag=True,
                     help="A deliberately unsafe broker that the run must catch: "
                          "kraft.unsafe.ack.before.replication=true, or for --workload txn "
                          "kraft.unsafe.read.committed.high.watermark=true."),
        click.option("--client", type=click.Choice(CLIENTS), default="confluent",
                     show_default=True),
        click.option("--keys", type=int, default=None,
                     help="Queue partitions / register keys (default: 4 / by rate)."),
        click.option("--sub-via", "sub_via", type=click.Choice(["assign", "subscribe"]),
                     default="assign", show_default=True),
        click.option("--group-protocol", "group_protocol", type=click.Choice(["classic", "consumer", "mixed"]),
                     default="classic", show_default=True,
                     help="With --sub-via subscribe: the consumers' group.protocol (consumer: "
                          "KIP-848, confluent client only; mixed: every consumer in one group, "
                          "half of them KIP-848)."),
        click.option("--client-rack", "client_rack", is_flag=True,
                     help="Each node in a rack of its own, consumers fetching from the replica in "
                          "theirs (KIP-392); with --unsafe, followers serve past their high watermark."),
        click.option("--store", default="store", show_default=True,
                     type=click.Path(file_okay=False)),
        click.option("--no-spark", is_flag=True, help="Check in-process, without Spark."),
        click.option("--spark-master", default="local[*]", show_default=True),
        click.option("--history-topic", default=None, metavar="TOPIC",
                     help="Also produce every history record to this topic of the cluster "
                     "(Spark's Kafka source can check it there)."),
        click.option("--interval", type=float, default=DEFAULT_INTERVAL_S, show_default=True,
                     help="Mean seconds between nemesis ops (as Jepsen's default)."),
        click.option("--recovery", type=float, default=5.0, show_default=True,
                     help="Seconds after the final heal before the drain."),
        click.option("--kill-targets", callback=_csv, default=None,
                     help="Comma-separated kill target specs (default: all kinds)."),
        click.option("--partition-specs", callback=_csv, default=None,
                     help="Comma-separated partition specs (default: all kinds)."),
        click.option("--startup-timeout", type=float, default=60.0, show_default=True),
        click.option("--metrics-interval", type=float, default=1.0, show_default=True,
                     help="Seconds between scrapes of every node's metrics (metrics.jsonl, "
                          "plotted in the report); 0: none."),
        click.option("--security",
                     type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
                                       case_sensitive=False), default="PLAINTEXT",
                     show_default=True,
                     help="Every listener (clients, inter-broker, controller) and every client of "
                          "the run over TLS and/or SASL (SCRAM-SHA-512; local hosts only)."),
        click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="Extra server.properties for every node."),
        click.option("-q", "--quiet", is_flag=True),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _make_options(kw, engine, seed, name=None):
    from jepsen.runner import TestOptions

    nem = [x for x in (kw["nemesis"] or []) if x != "none"]
    overrides = {}
    for item in kw["overrides"]:
        k, sep, v = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--override")
        overrides[k.strip()] = v.strip()
    return TestOptions(
        workload=kw["workload"], nemesis=nem, nodes=kw["nodes"],
        time_limit_s=kw["time_limit"], rate=kw["rate"], concurrency=kw["concurrency"],
        hosts=kw["hosts"], unsafe=kw["unsafe"], seed=seed, engine=engine,
        client=kw["client"], keys=kw["keys"], sub_via=kw["sub_via"], group_protocol=kw["group_protocol"],
        client_rack=kw["client_rack"],
        store=kw["store"],
        name=name, spark=not kw["no_spark"], spark_master=kw["spark_master"],
        history_topic=kw["history_topic"],
        nemesis_interval_s=kw["interval"], recovery_s=kw["recovery"],
        startup_timeout_s=kw["startup_timeout"], metrics_interval_s=kw["metrics_interval"],
        overrides=overrides, security=kw["security"].upper(),
        schedule={k: v for k, v in (("kill_targets", kw["kill_targets"]),
                                    ("partition_specs", kw["partition_specs"])) if v},
        progress=not kw["quiet"])


@main.command("spark-archive")
@click.option("--path", type=click.Path(dir_okay=False), default=None,
              help="Where to write it (default: the user's cache directory, or "
                   "$JEPSEN_SPARK_CLASS_ARCHIVE).")
def spark_archive(path) -> None:
    """Build the class archive local Spark sessions start from (about half the JVM's
    start-up and first-check time); once per PySpark and JDK, 40-60 s here.

    Local sessions use it whenever it exists; a JVM that cannot (another JDK build) says
    so in its log and starts without it.
    """
    from pathlib import Path

    from jepsen.checkers import spark_cds

    click.echo("[jepsen] building the Spark class archive (small checks in a child "
               "session) ...", err=True)
    try:
        got = spark_cds.build(Path(path) if path else None)
    except (ValueError, RuntimeError) as exc:
        click.echo(f"[jepsen] {exc}", err=True)
        sys.exit(1)
    click.echo(f"{got['path']}: {got['mb']:.0f} MB in {got['seconds']:.1f} s")


@main.command()
@_test_options
@click.option("--engine", type=click.Choice(["kraft", "pysyncobj"]), default="kraft",
              show_default=True, help="controller.quorum.engine of every node.")
@click.option("--seed", type=int, default=None, help="Seeds the generator and the nemesis.")
@click.option("--name", default=None, help="Test name in the store (default: from options).")
def test(engine, seed, name, **kw) -> None:
    """Run one test against a fresh kraft cluster and check it.

    Exit status: 0 valid, 1 invalid, 2 unknown (or the run could not be carried out, or
    was refused because the host backend cannot enforce a requested fault).
    """
    from jepsen.runner import Refused, run_test

    try:
        result = run_test(_make_options(kw, engine, seed, name))
    except Refused as exc:
        click.echo(f"[jepsen] {exc}", err=True)
        sys.exit(2)
    click.echo(f"valid: {result.valid}  ->  {result.directory}/index.html")
    sys.exit(result.exit_code)


@main.command()
@_test_options
@click.option("--runs", type=int, default=20, show_default=True,
              help="Runs per engine.")
@click.option("--engines", default="kraft", show_default=True, callback=_csv,
              help="Comma-separated: kraft, pysyncobj or both (side by side).")
@click.option("--per-nemesis", is_flag=True,
              help="Cycle the runs through the --nemesis faults one at a time.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Run i uses seed + i.")
def campaign(runs, engines, per_nemesis, seed, **kw) -> None:
    """Run many tests and summarise them in one table and report.

    Exit status: 0 when every run is valid, 1 if any is invalid, 2 otherwise.
    """
    from jepsen.campaign import run_campaign
    from jepsen.runner import Refused

    base = _make_options(kw, "kraft", seed)
    try:
        summary = run_campaign(base, runs=runs, engines=engines, per_nemesis=per_nemesis,
                               echo=click.echo)
    except Refused as exc:
        click.echo(f"[jepsen] {exc}", err=True)
        sys.exit(2)
    click.echo(f"campaign: {summary['counts']}  ->  {summary['directory']}/index.html")
    sys.exit(summary["exit-code"])


if __name__ == "__main__":
    main()
