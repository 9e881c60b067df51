"""``kraftctl perf produce`` / ``kraftctl perf consume``: load generators with a librdkafka client.

They play the part of Kafka's kafka-producer-perf-test and kafka-consumer-perf-test, with
the same options where it makes sense, on confluent-kafka so that the client (C, many
requests in flight, batching in its own threads) is not what limits the measurement.

Every run is bounded twice: by its record count and by ``--timeout`` seconds.  The last
line of output is the summary; ``--json`` prints the summary as one JSON object instead.

Latency.  ``produce``: from ``produce()`` to the delivery report (acks as configured), for
every record.  ``consume``: from the record's CreateTime timestamp to its arrival in the
consumer, which is end-to-end latency when the records were produced just before (and
meaningless when draining old records; it is printed anyway, labelled).
"""

from __future__ import annotations

import json
import random
import string
import sys
import time

import click


DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"  # the Kafka tool's


def percentile(sorted_values, q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, round(q / 100.0 * (len(sorted_values) - 1))))
    return sorted_values[i]


def latency_summary(latencies_ms: list[float]) -> dict:
    values = sorted(latencies_ms)
    n = len(values)
    return {
        "avg_latency_ms": (sum(values) / n) if n else 0.0,
        "p50_ms": percentile(values, 50), "p95_ms": percentile(values, 95),
        "p99_ms": percentile(values, 99), "p999_ms": percentile(values, 99.9),
        "max_latency_ms": values[-1] if n else 0.0,
    }


def parse_props(props, *, what: str) -> dict:
    out = {}
    for item in props:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint=what)
        out[key.strip()] = value.strip()
    return out


def make_payload(size: int, seed: int = 0) -> bytes:
    """Random upper-case letters, as kafka-producer-perf-test uses (compressible somewhat)."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(size)).encode()


def run_produce(bootstrap: str, topic: str, num_records: int, record_size: int, throughput: float,
                props: dict, timeout_s: float, payload_seed: int = 0, *,
                transactional_id: str | None = None, transaction_duration_ms: int = 0) -> dict:
    """``transaction_duration_ms`` > 0: in transactions (``transactional_id``), each
    committed once it is that old, as kafka-producer-perf-test's options of those names."""
    from confluent_kafka import KafkaException, Producer

    config = {"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 1_000_000,
              "queue.buffering.max.kbytes": 1_048_576}
    in_txn = transaction_duration_ms > 0
    if in_txn:
        config["transactional.id"] = transactional_id or DEFAULT_TRANSACTIONAL_ID
    config.update(props)
    producer = Producer(config)
    commits = 0
    if in_txn:
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        txn_started = time.perf_counter()
    payload = make_payload(record_size, payload_seed)
    latencies: list[float] = []
    errors: list[str] = []
    clock = time.perf_counter

    def report(sent_at, err, _msg):
        if err is not None:
            errors.append(str(err))
        else:
            latencies.append((clock() - sent_at) * 1000.0)

    cpu0 = time.process_time()  # every thread of this process: librdkafka's too
    start = clock()
    deadline = start + timeout_s
    sent = 0
    produce = producer.produce
    poll = producer.poll
    # a few records at a time between clock reads keeps the loop cheap at high rates
    while sent < num_records:
        now = clock()
        if now > deadline:
            break
        if throughput > 0:
            allowed = int((now - start) * throughput) + 1
            if sent >= allowed:
                time.sleep(min(0.01, (sent - allowed + 1) / throughput))
                continue
        try:
            produce(topic, payload, on_delivery=lambda e, m, t=now: report(t, e, m))
        except BufferError:
            poll(0.005)
            continue
        except KafkaException as exc:
            errors.append(str(exc))
            break
        sent += 1
        if sent & 0x3FF == 0:
            poll(0)
        if in_txn and (now - txn_started) * 1000 >= transaction_duration_ms:
            try:
                producer.commit_transaction(max(0.1, deadline - clock()))
            except KafkaException as exc:  # fenced, timed out: the summary says so
                errors.append(str(exc))
                in_txn = False
                break
            commits += 1
            producer.begin_transaction()
            txn_started = clock()
    remaining = max(0.0, deadline - clock())
    if in_txn:
        try:
            producer.commit_transaction(max(0.1, remaining))
            commits += 1
        except KafkaException as exc:
            errors.append(str(exc))
        remaining = max(0.0, deadline - clock())
    left = producer.flush(remaining)
    elapsed = clock() - start
    acked = len(latencies)
    result = {
        "test": "produce", "topic": topic, "records_sent": sent, "records_acked": acked,
        "errors": len(errors), "first_error": errors[0] if errors else None,
        "unacknowledged": left, "timed_out": sent < num_records or left > 0,
        "elapsed_s": elapsed, "record_size": record_size,
        "client_cpu_cores": (time.process_time() - cpu0) / elapsed if elapsed > 0 else 0.0,
        "records_per_s": acked / elapsed if elapsed > 0 else 0.0,
        "mb_per_s": acked * record_size / elapsed / 1e6 if elapsed > 0 else 0.0,
        "props": props,
    }
    if transaction_duration_ms > 0:
        result.update(transactions_committed=commits, transaction_duration_ms=transaction_duration_ms)
    result.update(latency_summary(latencies))
    return result


def run_consume(bootstrap: str, topic: str, num_records: int, props: dict, timeout_s: float,
                group: str | None = None) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    config = {"bootstrap.servers": bootstrap, "group.id": group or f"kraft-perf-{time.time_ns()}",
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "fetch.wait.max.ms": 100, "enable.partition.eof": False}
    config.update(props)
    consumer = Consumer(config)
    clock = time.perf_counter
    cpu0 = time.process_time()
    start = clock()
    deadline = start + timeout_s
    try:
        if group:
            consumer.subscribe([topic])
        else:  # no rebalance: assign every partition from the beginning
            md = None
            while clock() < deadline:
                md = consumer.list_topics(topic, timeout=5)
                t = md.topics.get(topic)
                if t is not None and t.error is None and t.partitions:
                    break
                time.sleep(0.2)
            parts = sorted(md.topics[topic].partitions) if md else []
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        count = 0
        nbytes = 0
        errors = 0
        first_at = None
        latencies: list[float] = []
        while count < num_records:
            now = clock()
            if now > deadline:
                break
            msgs = consumer.consume(num_messages=min(10_000, num_records - count),
                                    timeout=min(1.0, deadline - now))
            if not msgs:
                continue
            wall_ms = time.time() * 1000.0
            if first_at is None:
                first_at = clock()
            # The loop is the tool's own cost per record (the broker's is a third of a
            # microsecond): len(m) is the value's length without copying it, and latency is
            # sampled on every 16th record.
            for i, m in enumerate(msgs):
                if m.error() is not None:
                    errors += 1
                    continue
                count += 1
                nbytes += len(m)
                if not i & 15:
                    ts_type, ts = m.timestamp()
                    if ts_type and ts > 0:
                        latencies.append(max(0.0, wall_ms - ts))
        end = clock()
    finally:
        consumer.close()
    elapsed = end - start
    fetch_elapsed = end - first_at if first_at else 0.0
    result = {
        "test": "consume", "topic": topic, "records": count, "bytes": nbytes, "errors": errors,
        "timed_out": count < num_records, "elapsed_s": elapsed, "fetch_elapsed_s": fetch_elapsed,
        "client_cpu_cores": (time.process_time() - cpu0) / elapsed if elapsed > 0 else 0.0,
        "records_per_s": count / elapsed if elapsed > 0 else 0.0,
        "mb_per_s": nbytes / elapsed / 1e6 if elapsed > 0 else 0.0,
        "fetch_records_per_s": count / fetch_elapsed if fetch_elapsed > 0 else 0.0,
        "fetch_mb_per_s": nbytes / fetch_elapsed / 1e6 if fetch_elapsed > 0 else 0.0,
        "props": props,
    }
    result.update(latency_summary(latencies))
    return result


def _summary_line(r: dict) -> str:
    if r["test"] == "produce":
        head = (f"{r['records_acked']} records sent, {r['records_per_s']:.1f} records/sec "
                f"({r['mb_per_s']:.2f} MB/sec)")
    else:
        head = (f"{r['records']} records consumed, {r['records_per_s']:.1f} records/sec "
                f"({r['mb_per_s']:.2f} MB/sec), fetch {r['fetch_records_per_s']:.1f} records/sec "
                f"({r['fetch_mb_per_s']:.2f} MB/sec); latency since CreateTime:")
    return (f"{head}, {r['avg_latency_ms']:.2f} ms avg latency, {r['max_latency_ms']:.2f} ms max latency, "
            f"{r['p50_ms']:.2f} ms 50th, {r['p95_ms']:.2f} ms 95th, {r['p99_ms']:.2f} ms 99th, "
            f"{r['p999_ms']:.2f} ms 99.9th.")


def _emit(result: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
    else:
        click.echo(_summary_line(result))
    if result.get("timed_out") or result.get("errors"):
        click.echo(f"warning: incomplete run ({result.get('errors')} errors, first: "
                   f"{result.get('first_error')}; timed out: {result.get('timed_out')})", err=True)


@click.group("perf")
def perf_group() -> None:
    """Load generators (as kafka-producer-perf-test / kafka-consumer-perf-test), on librdkafka."""


_EXTRA = {"allow_extra_args": True}


def _collect(ctx: click.Context, given, what: str) -> dict:
    """``--x-props a=1 b=2``: Kafka's tools take several values after the option; click gives the
    first to the option and leaves the rest as extra arguments, which are taken here."""
    extra = list(ctx.args)
    if extra and not given:
        raise click.UsageError(f"unexpected arguments: {' '.join(extra)}")
    return parse_props([p for item in (*given, *extra) for p in item.split()], what=what)


@perf_group.command("produce", context_settings=_EXTRA)
@click.option("--bootstrap-server", default="127.0.0.1:9092", show_default=True)
@click.option("--topic", required=True)
@click.option("--num-records", type=int, required=True)
@click.option("--record-size", type=int, default=100, show_default=True)
@click.option("--throughput", type=float, default=-1, show_default=True,
              help="Records per second at most; -1: as fast as possible.")
@click.option("--producer-props", multiple=True, metavar="KEY=VALUE",
              help="librdkafka/Kafka producer settings, e.g. acks=all batch.size=16384 linger.ms=5 "
                   "compression.type=lz4 (repeatable; several per option allowed).")
@click.option("--timeout", "timeout_s", type=float, default=300, show_default=True,
              help="Stop after this many seconds whatever was sent.")
@click.option("--transactional-id", default=None,
              help=f"With --transaction-duration-ms (default: {DEFAULT_TRANSACTIONAL_ID}).")
@click.option("--transaction-duration-ms", type=int, default=0, show_default=True,
              help="Produce in transactions, each committed once it is this old; 0: none.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.pass_context
def produce_command(ctx, bootstrap_server, topic, num_records, record_size, throughput, producer_props,
                    timeout_s, transactional_id, transaction_duration_ms, as_json) -> None:
    """Produce NUM_RECORDS records of RECORD_SIZE bytes and print throughput and latency."""
    props = _collect(ctx, producer_props, "--producer-props")
    if transactional_id is not None and transaction_duration_ms <= 0:
        transaction_duration_ms = 3000  # as kafka-producer-perf-test given a transactional id
    result = run_produce(bootstrap_server, topic, num_records, record_size, throughput, props, timeout_s,
                         transactional_id=transactional_id, transaction_duration_ms=transaction_duration_ms)
    _emit(result, as_json)
    if result["records_acked"] == 0:
        sys.exit(1)


@perf_group.command("consume", context_settings=_EXTRA)
@click.option("--bootstrap-server", default="127.0.0.1:9092", show_default=True)
@click.option("--topic", required=True)
@click.option("--num-records", "--messages", "num_records", type=int, required=True,
              help="Stop after this many records.")
@click.option("--group", default=None, help="Subscribe with this group (default: assign all partitions, "
                                             "no group rebalance).")
@click.option("--consumer-props", multiple=True, metavar="KEY=VALUE", help="librdkafka consumer settings.")
@click.option("--timeout", "timeout_s", type=float, default=300, show_default=True,
              help="Stop after this many seconds whatever was consumed.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.pass_context
def consume_command(ctx, bootstrap_server, topic, num_records, group, consumer_props, timeout_s, as_json) -> None:
    """Consume NUM_RECORDS records from the beginning of TOPIC and print throughput and latency."""
    props = _collect(ctx, consumer_props, "--consumer-props")
    result = run_consume(bootstrap_server, topic, num_records, props, timeout_s, group)
    _emit(result, as_json)
    if result["records"] == 0:
        sys.exit(1)
