"""``kraftctl console-producer`` / ``console-consumer`` (kafka-console-*.sh), on librdkafka
through confluent-kafka: lines from stdin become records; records become lines on stdout."""

from __future__ import annotations

import signal
import sys

import click

from cli.topics import fail


def _props(items) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"{item!r}: expected key=value")
        out[key.strip()] = value
    return out


@click.command("console-producer")
@click.option("--bootstrap-server", required=True)
@click.option("--topic", required=True)
@click.option("--property", "properties", multiple=True, metavar="K=V",
              help="parse.key=true, key.separator=<sep> (default a tab).")
@click.option("--producer-property", "producer_props", multiple=True, metavar="K=V",
              help="A librdkafka producer setting (acks=all, compression.type=zstd, ...).")
def console_producer(bootstrap_server, topic, properties, producer_props):
    """Send each line of standard input as one record."""
    from confluent_kafka import KafkaException, Producer

    props = _props(properties)
    parse_key = props.get("parse.key", "false").lower() == "true"
    separator = props.get("key.separator", "\t")
    conf = {"bootstrap.servers": bootstrap_server, "enable.idempotence": True}
    conf.update(_props(producer_props))
    errors = []
    try:
        producer = Producer(conf)
    except KafkaException as exc:
        fail(str(exc))

    def delivered(err, _msg):
        if err is not None:
            errors.append(err)

    for line in sys.stdin:
        line = line.rstrip("\n")
        key = None
        if parse_key:
            if separator not in line:
                fail(f"no key separator {separator!r} in line {line!r}")
            key, line = line.split(separator, 1)
        while True:
            try:
                producer.produce(topic, value=line.encode(), key=key.encode() if key is not None else None,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(30)
    if remaining or errors:
        fail(f"{remaining + len(errors)} record(s) not delivered" + (f": {errors[0]}" if errors else ""))


@click.command("console-consumer")
@click.option("--bootstrap-server", required=True)
@click.option("--topic", required=True)
@click.option("--group", help="Consumer group (default: a throwaway group, nothing committed).")
@click.option("--from-beginning", is_flag=True)
@click.option("--max-messages", type=int, default=None)
@click.option("--timeout-ms", type=int, default=None, help="Exit after this long without a record.")
@click.option("--property", "properties", multiple=True, metavar="K=V",
              help="print.key=true, key.separator=<sep>, print.partition=true, print.offset=true")
@click.option("--consumer-property", "consumer_props", multiple=True, metavar="K=V",
              help="A consumer setting (librdkafka's names, e.g. group.protocol=consumer).")
def console_consumer(bootstrap_server, topic, group, from_beginning, max_messages, timeout_ms, properties,
                     consumer_props):
    """Print records of a topic, one per line."""
    import time
    import uuid

    from confluent_kafka import Consumer, KafkaException

    props = _props(properties)
    print_key = props.get("print.key", "false").lower() == "true"
    print_partition = props.get("print.partition", "false").lower() == "true"
    print_offset = props.get("print.offset", "false").lower() == "true"
    separator = props.get("key.separator", "\t")
    try:
        consumer = Consumer({
            "bootstrap.servers": bootstrap_server,
            "group.id": group or f"console-consumer-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": group is not None,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            **_props(consumer_props),
        })
    except KafkaException as exc:  # a setting librdkafka refuses
        fail(f"cannot create the consumer: {exc.args[0].str()}")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer.subscribe([topic])
    count = 0
    last = time.monotonic()
    try:
        while not stop and (max_messages is None or count < max_messages):
            msg = consumer.poll(0.2)
            if msg is None:
                if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
                    break
                continue
            if msg.error():
                if msg.error().fatal():
                    raise KafkaException(msg.error())
                continue
            last = time.monotonic()
            parts = []
            if print_partition:
                parts.append(f"Partition:{msg.partition()}")
            if print_offset:
                parts.append(f"Offset:{msg.offset()}")
            if print_key:
                parts.append((msg.key() or b"null").decode(errors="replace"))
            parts.append((msg.value() or b"null").decode(errors="replace"))
            click.echo(separator.join(parts))
            count += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    click.echo(f"Processed a total of {count} messages", err=True)
