"""``kraftctl transactions`` (kafka-transactions.sh): list, describe, describe-producers,
find-hanging and abort, over kraft's admin client.

A *hanging* transaction is one a partition still has open (DescribeProducers shows a
current transaction start offset) for longer than the maximum transaction timeout while its
coordinator knows nothing of it: no transactional id has the producer id, or the id's
transaction is no longer ongoing on that partition or has moved to another epoch.  It holds
the partition's last stable offset back forever; ``abort`` writes the ABORT marker on the
partition directly, as Kafka's admin abortTransaction does.
"""

from __future__ import annotations

import json
import time

import click

from cli.admin_client import AdminClient, AdminError, error_name
from cli.topics import fail

TRANSACTION_KEY_TYPE = 1


def _brokers(admin: AdminClient) -> dict[int, tuple[str, int]]:
    return {b["node_id"]: (b["host"], b["port"]) for b in admin.metadata([])["brokers"]}


def _coordinator(admin: AdminClient, txn_id: str) -> tuple[int, tuple[str, int]]:
    resp = admin.call("FindCoordinator", {"key_type": TRANSACTION_KEY_TYPE, "coordinator_keys": [txn_id],
                                          "key": txn_id})
    c = resp["coordinators"][0] if resp.get("coordinators") else resp
    if c["error_code"]:
        raise AdminError(f"no coordinator for transactional id {txn_id}: {error_name(c['error_code'])}")
    return c["node_id"], (c["host"], c["port"])


def _list_all(admin, states=(), producer_ids=(), duration_ms=-1) -> list[dict]:
    rows = []
    for broker_id, address in sorted(_brokers(admin).items()):
        body = {"state_filters": list(states), "producer_id_filters": list(producer_ids),
                "duration_filter": duration_ms}
        resp = admin.call("ListTransactions", body, address=address)
        if resp["error_code"]:
            raise AdminError(f"broker {broker_id} cannot list transactions: {error_name(resp['error_code'])}")
        rows += [{**t, "coordinator": broker_id} for t in resp["transaction_states"]]
    return rows


def _describe(admin, txn_id: str) -> dict:
    coordinator, address = _coordinator(admin, txn_id)
    state = admin.call("DescribeTransactions", {"transactional_ids": [txn_id]},
                       address=address)["transaction_states"][0]
    if state["error_code"]:
        raise AdminError(f"cannot describe transactional id {txn_id}: {error_name(state['error_code'])}")
    return {**state, "coordinator": coordinator}


def _leaders(admin, topics: list[str] | None) -> dict[tuple[str, int], int]:
    md = admin.metadata(topics)
    out = {}
    for t in md["topics"]:
        if t["error_code"]:
            raise AdminError(f"topic '{t['name']}': {error_name(t['error_code'])}")
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = p["leader_id"]
    return out


def _producers(admin, tp: tuple[str, int], leader: int, brokers) -> list[dict]:
    address = brokers.get(leader)
    if address is None:
        raise AdminError(f"{tp[0]}-{tp[1]} has no leader")
    body = {"topics": [{"name": tp[0], "partition_indexes": [tp[1]]}]}
    p = admin.call("DescribeProducers", body, address=address)["topics"][0]["partitions"][0]
    if p["error_code"]:
        raise AdminError(f"cannot describe producers of {tp[0]}-{tp[1]}: {error_name(p['error_code'])}")
    return p["active_producers"]


def _emit(rows: list[dict], columns: list[tuple[str, str]], output: str) -> None:
    if output == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo("\t".join(title for title, _ in columns))
    for r in rows:
        click.echo("\t".join(str(r[key]) for _, key in columns))


@click.group("transactions")
@click.option("--bootstrap-server", required=True)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.pass_context
def transactions_group(ctx, bootstrap_server, output):
    """List, describe and abort transactions; find hanging ones (kafka-transactions.sh)."""
    ctx.obj = (AdminClient(bootstrap_server), output)


def _run(fn):
    try:
        fn()
    except AdminError as exc:
        fail(str(exc))


@transactions_group.command("list")
@click.option("--state", "states", multiple=True, help="Only transactions in this state (repeatable).")
@click.option("--producer-id", "producer_ids", type=int, multiple=True)
@click.option("--duration-filter", type=int, default=-1, help="Only transactions running longer (ms).")
@click.pass_obj
def list_command(obj, states, producer_ids, duration_filter):
    """Every transactional id the coordinators know."""
    admin, output = obj
    _run(lambda: _emit(_list_all(admin, states, producer_ids, duration_filter), [
        ("TransactionalId", "transactional_id"), ("Coordinator", "coordinator"), ("ProducerId", "producer_id"),
        ("TransactionState", "transaction_state")], output))


@transactions_group.command("describe")
@click.option("--transactional-id", required=True)
@click.pass_obj
def describe_command(obj, transactional_id):
    """The state of one transactional id, from its coordinator."""
    admin, output = obj

    def run():
        s = _describe(admin, transactional_id)
        now = int(time.time() * 1000)
        start = s["transaction_start_time_ms"]
        row = {"coordinator": s["coordinator"], "transactional_id": transactional_id,
               "producer_id": s["producer_id"], "producer_epoch": s["producer_epoch"],
               "transaction_state": s["transaction_state"], "transaction_timeout_ms": s["transaction_timeout_ms"],
               "current_transaction_start_time_ms": start if start >= 0 else "None",
               "transaction_duration_ms": now - start if start >= 0 else "None",
               "topic_partitions": ",".join(f"{t['topic']}-{p}" for t in s["topics"] for p in t["partitions"])}
        _emit([row], [("CoordinatorId", "coordinator"), ("TransactionalId", "transactional_id"),
                      ("ProducerId", "producer_id"), ("ProducerEpoch", "producer_epoch"),
                      ("TransactionState", "transaction_state"), ("TransactionTimeoutMs", "transaction_timeout_ms"),
                      ("CurrentTransactionStartTimeMs", "current_transaction_start_time_ms"),
                      ("TransactionDurationMs", "transaction_duration_ms"), ("TopicPartitions", "topic_partitions")],
              output)

    _run(run)


_PRODUCER_COLUMNS = [("ProducerId", "producer_id"), ("ProducerEpoch", "producer_epoch"),
                     ("LatestCoordinatorEpoch", "coordinator_epoch"), ("LastSequence", "last_sequence"),
                     ("LastTimestamp", "last_timestamp"), ("CurrentTransactionStartOffset", "current_txn_start_offset")]


@transactions_group.command("describe-producers")
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--broker-id", type=int, help="Ask this broker instead of the partition's leader.")
@click.pass_obj
def describe_producers_command(obj, topic, partition, broker_id):
    """The active producers of one partition (its producer state)."""
    admin, output = obj

    def run():
        leader = broker_id if broker_id is not None else _leaders(admin, [topic]).get((topic, partition), -1)
        _emit(_producers(admin, (topic, partition), leader, _brokers(admin)), _PRODUCER_COLUMNS, output)

    _run(run)


def find_hanging(admin, *, broker_id: int | None = None, topic: str | None = None, partition: int | None = None,
                 max_timeout_ms: int = 15 * 60_000, now_ms: int | None = None) -> list[dict]:
    """The hanging transactions of the partitions a broker leads, or of a topic (see the
    module doc)."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    leaders = _leaders(admin, [topic] if topic else None)
    brokers = _brokers(admin)
    candidates = []
    for tp, leader in sorted(leaders.items()):
        if (broker_id is not None and leader != broker_id) or (partition is not None and tp[1] != partition):
            continue
        if tp[0].startswith("__") and topic is None:
            continue
        for p in _producers(admin, tp, leader, brokers):
            if p["current_txn_start_offset"] >= 0 and now_ms - p["last_timestamp"] > max_timeout_ms:
                candidates.append((tp, p))
    if not candidates:
        return []
    known = {t["producer_id"]: t for t in _list_all(admin, producer_ids=sorted({p["producer_id"] for _, p in candidates}))}
    hanging = []
    for tp, p in candidates:
        txn = known.get(p["producer_id"])
        if txn is not None:
            s = _describe(admin, txn["transactional_id"])
            in_txn = any(t["topic"] == tp[0] and tp[1] in t["partitions"] for t in s["topics"])
            if (s["transaction_state"] in ("Ongoing", "PrepareCommit", "PrepareAbort") and in_txn
                    and s["producer_epoch"] == p["producer_epoch"]):
                continue  # its coordinator will complete it
        hanging.append({"topic": tp[0], "partition": tp[1], "producer_id": p["producer_id"],
                        "producer_epoch": p["producer_epoch"], "coordinator_epoch": p["coordinator_epoch"],
                        "start_offset": p["current_txn_start_offset"], "last_timestamp": p["last_timestamp"],
                        "duration_min": (now_ms - p["last_timestamp"]) // 60_000})
    return hanging


@transactions_group.command("find-hanging")
@click.option("--broker-id", type=int)
@click.option("--topic")
@click.option("--partition", type=int)
@click.option("--max-transaction-timeout", type=int, default=15, show_default=True,
              help="Minutes: a transaction open longer than this is a candidate.")
@click.pass_obj
def find_hanging_command(obj, broker_id, topic, partition, max_transaction_timeout):
    """Transactions a partition holds open that no coordinator will complete."""
    admin, output = obj
    if broker_id is None and topic is None:
        fail("one of --broker-id or --topic is required")

    def run():
        _emit(find_hanging(admin, broker_id=broker_id, topic=topic, partition=partition,
                           max_timeout_ms=max_transaction_timeout * 60_000), [
            ("Topic", "topic"), ("Partition", "partition"), ("ProducerId", "producer_id"),
            ("ProducerEpoch", "producer_epoch"), ("CoordinatorEpoch", "coordinator_epoch"),
            ("StartOffset", "start_offset"), ("LastTimestamp", "last_timestamp"), ("Duration(min)", "duration_min")],
            output)

    _run(run)


@transactions_group.command("abort")
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--start-offset", type=int, help="The open transaction's first offset (from find-hanging).")
@click.option("--producer-id", type=int)
@click.option("--producer-epoch", type=int)
@click.option("--coordinator-epoch", type=int)
@click.pass_obj
def abort_command(obj, topic, partition, start_offset, producer_id, producer_epoch, coordinator_epoch):
    """Write an ABORT marker for a hanging transaction on one partition."""
    admin, _ = obj

    def run():
        tp = (topic, partition)
        leader = _leaders(admin, [topic]).get(tp, -1)
        brokers = _brokers(admin)
        if start_offset is not None:
            found = [p for p in _producers(admin, tp, leader, brokers) if p["current_txn_start_offset"] == start_offset]
            if not found:
                raise AdminError(f"no open transaction starts at offset {start_offset} of {topic}-{partition}")
            pid, epoch, coord_epoch = found[0]["producer_id"], found[0]["producer_epoch"], found[0]["coordinator_epoch"]
        elif None not in (producer_id, producer_epoch, coordinator_epoch):
            pid, epoch, coord_epoch = producer_id, producer_epoch, coordinator_epoch
        else:
            raise AdminError("give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch")
        body = {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": False,
                             "coordinator_epoch": max(coord_epoch, 0),
                             "topics": [{"name": topic, "partition_indexes": [partition]}]}]}
        resp = admin.call("WriteTxnMarkers", body, address=brokers.get(leader))
        error = resp["markers"][0]["topics"][0]["partitions"][0]["error_code"]
        if error:
            raise AdminError(f"aborting the transaction of producer {pid} on {topic}-{partition} failed: "
                             f"{error_name(error)}")
        click.echo(f"Aborted the transaction of producer {pid} (epoch {epoch}) on {topic}-{partition}.")

    _run(run)
