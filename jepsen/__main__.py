"""``python -m jepsen``: the fault-injection suite's command line."""

from __future__ import annotations

import sys

import click

from jepsen.checkers import linear


@click.group()
def main() -> None:
    """Jepsen-style fault injection for kraft."""


@main.command()
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--spark-master", default="local[*]", show_default=True,
              help="Spark master URL to check on.")
@click.option("--no-spark", is_flag=True, help="Check in this process, without Spark.")
@click.option("--workload", type=click.Choice(["auto", "queue", "linearizable"]),
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
def check(store, spark_master, no_spark, workload, model, unkeyed, sub_via, budget,
          quiet) -> None:
    """Re-check the history stored in STORE and write STORE/results.json.

    Exit status: 0 valid, 1 invalid, 2 unknown (or an error).
    """
    from jepsen.checkers import check_store

    spark, owned = None, False
    if not no_spark:
        from pyspark.sql import SparkSession

        from jepsen.checkers.spark import spark_session

        owned = SparkSession.getActiveSession() is None  # else: embedded, leave it running
        spark = spark_session(spark_master)
    try:
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


if __name__ == "__main__":
    main()
