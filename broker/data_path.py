"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch: the client data path.

Record batches travel as bytes: a produce payload is validated by its headers and CRCs,
offsets are assigned by patching the headers in place, and a fetch returns log bytes.
No record is decoded here, except that a compacted topic's records are checked for keys.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import trio

from broker import file_records
from broker.fetch_session import MAX_SESSIONS, FetchSessionCache
from broker.file_records import FileRecords
from broker.deferred import Deferred
from broker.partition import Partition, ProduceOutcome
from broker.replica_manager import ReplicaManager
from broker.replica_selector import RACK_AWARE, preferred_read_replica
from broker.txn.verification import produce_error
from kraft import clock
from kraft.log import OffsetOutOfRangeError, ReadResult
from kraft.metrics.stats import note_remote_wait
from kraft.protocol.error_codes import ErrorCode
from kraft.records import ZSTD, CorruptRecordError, PayloadSummary, validate_payload
from kraft.records.errors import UnsupportedCodecError
from kraft.records.header import iter_batches

READ_COMMITTED = 1

log = logging.getLogger(__name__)

# Produce errors Kafka does not count as FailedProduceRequestsPerSec (its ReplicaManager
# answers them without marking the meter); any other error on a partition counts.
NOT_FAILED_PRODUCE = frozenset({
    ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.KAFKA_STORAGE_ERROR})
# The same for FailedFetchRequestsPerSec.
NOT_FAILED_FETCH = frozenset({
    ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INCONSISTENT_TOPIC_ID})

EARLIEST_TIMESTAMP = -2
# Partitions a fetch handles between giving the event loop back: a restarted follower's
# first (full) fetch names every partition it follows from this leader, 33,000 at 100,000
# x RF 3, and reading them in one go held the leader's loop for 1.5-2 s, past the quorum's
# fetch timeout (issue 19).
FETCH_STEP = 1000
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


class DataPath:
    def __init__(self, replicas: ReplicaManager, *, sendfile: bool = False,
                 fetch_session_slots: int = MAX_SESSIONS, replica_selector: str | None = None,
                 txn_verifier=None):
        self.replicas = replicas
        # KIP-890's transaction verification (broker.txn.verification.TxnVerifier), while
        # transaction.partition.verification.enable holds
        self.txn_verifier = txn_verifier
        # replica.selector.class (KIP-392): the rack-aware one sends consumers to a replica
        # in their rack (broker.replica_selector)
        self.rack_aware = replica_selector is not None and replica_selector.strip() == RACK_AWARE
        # kraft.fetch.sendfile.enable: fetched records stay in their segment file, to be
        # sent with sendfile (broker.file_records); else they are read into memory.
        self.sendfile = sendfile
        # incremental fetch sessions (KIP-227), max.incremental.fetch.session.cache.slots
        self.sessions = FetchSessionCache(fetch_session_slots)
        replicas.change_sinks.append(self.sessions.changes)  # followers' sessions skip quiet partitions

    # ------------------------------------------------------------------- produce

    async def produce(self, body: dict, version: int) -> dict | Deferred | None:
        """Append every partition's batches now; the answer is ready at once unless an
        acks=all append has to wait for the ISR, then it is a :class:`Deferred` that the
        connection awaits in turn (so the next request is appended meanwhile)."""
        acks = body["acks"]
        timeout_ms = max(body["timeout_ms"], 0)
        # only acks=all waits (on a deadline of each clock's)
        deadline = clock.monotonic_ms() + timeout_ms if acks == -1 else 0
        results = {}  # (topic, index) -> response partition dict
        waits = []  # (key, partition, waiter slot, waiter id)
        # Each payload's batch headers are parsed (and CRCs checked) here, once: the append
        # and the producer state use these headers, not the bytes again.
        payloads = {}
        transactional = False
        for topic in body["topic_data"]:
            name = topic["name"]
            for pd in topic["partition_data"]:
                payload = payloads[(name, pd["index"])] = _validated(pd["records"], version)
                if not transactional and isinstance(payload, PayloadSummary):
                    transactional = any(h.is_transactional for h in payload.headers)
        if transactional and body.get("transactional_id") is None:
            # As Kafka: transactional records come with the transactional id they are
            # authorized by; without one every partition fails.
            return _produce_response({
                key: {"index": key[1], "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                      "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
                for key in payloads}) if acks != 0 else None
        refused = await self._verify_transactions(body["transactional_id"], payloads, version) if transactional else {}
        stats = self.replicas.topic_stats
        for topic in body["topic_data"]:
            name = topic["name"]
            for pd in topic["partition_data"]:
                key = (name, pd["index"])
                if key in refused:  # answered and counted as any partition refused before its append
                    result, wait = _partition_result(key[1], None, ProduceOutcome(refused[key])), None
                else:
                    result, wait = self._produce_partition(key, pd["records"], payloads[key], acks, deadline)
                results[key] = result
                # TotalProduceRequestsPerSec / FailedProduceRequestsPerSec: per partition, the
                # topic's only for a topic hosted here (no series for names clients invent).
                (stats.topics.get(name) or stats.all).produce_request(
                    result["error_code"] not in NOT_FAILED_PRODUCE)
                if wait is not None:
                    waits.append((key,) + wait)
        if acks == 0:
            return None
        return _answer_produce(results, waits, timeout_ms)

    async def _verify_transactions(self, txn_id: str, payloads: dict, version: int) -> dict:
        """KIP-890: the partitions whose transactional batches would start a transaction here
        are verified with the coordinator first; returns ``{key: Produce error}`` for those
        refused.  The guard set before the question must still be there after it (a marker
        written meanwhile drops it)."""
        if self.txn_verifier is None or not self.replicas.transaction_verification_enabled():
            return {}
        asks = {}  # (pid, epoch) -> [(key, partition)]
        for key, payload in payloads.items():
            if not isinstance(payload, PayloadSummary):
                continue
            first = next((h for h in payload.headers if h.is_transactional and not h.is_control), None)
            partition = self.replicas.get(*key)
            if first is None or partition is None or not partition.state.is_leader:
                continue  # not transactional, or the append refuses it anyway
            if partition.starts_transaction(first.producer_id, first.producer_epoch):
                asks.setdefault((first.producer_id, first.producer_epoch), []).append((key, partition))
        refused = {}
        for (pid, epoch), entries in asks.items():
            guards = {key: partition.verification_guards.setdefault(pid, object()) for key, partition in entries}
            codes = await self.txn_verifier.verify(txn_id, pid, epoch, [key for key, _ in entries])
            for key, partition in entries:
                code = codes.get(key, ErrorCode.NONE)
                if code != ErrorCode.NONE:
                    refused[key] = produce_error(code, version)
                elif partition.verification_guards.get(pid) is not guards[key]:  # the transaction ended meanwhile
                    refused[key] = produce_error(ErrorCode.INVALID_TXN_STATE, version)
        return refused

    async def produce_burst(self, bodies: list[dict], version: int) -> list:
        """The answers of consecutive Produce requests of one connection, in order, each
        what ``produce`` returns for it (or the exception it raised).  A run of requests
        that each carry batches for one partition, the same one with the same acks and no
        transactional id, is appended together (``Partition.produce_together``): a producer
        sending one record per request pipelines hundreds, and one append per request was
        most of what each cost.  Anything else, or a run that cannot go together, is
        produced request by request."""
        answers: list = []
        i = 0
        while i < len(bodies):
            key = _burst_key(bodies[i])
            j = i + 1
            if key is not None:
                while j < len(bodies) and _burst_key(bodies[j]) == key:
                    j += 1
            together = self._produce_together(key, bodies[i:j], version) if j - i > 1 else None
            if together is not None:
                answers += together
            else:
                for body in bodies[i:j]:
                    try:
                        answers.append(await self.produce(body, version))
                    except Exception as exc:  # the connection answers it as it would alone
                        answers.append(exc)
            i = j
        return answers

    def _produce_together(self, key: tuple[str, int, int], bodies: list[dict], version: int) -> list | None:
        """The answers of Produce requests for one partition (``_burst_key``'s key) appended
        together, or None, having done nothing, when they must go one by one."""
        name, index, acks = key
        partition = self.replicas.get(name, index)
        if partition is None:  # its error is for produce to tell
            return None
        payloads = []
        for body in bodies:
            records = body["topic_data"][0]["partition_data"][0]["records"]
            payload = _validated(records, version)
            if not isinstance(payload, PayloadSummary) or any(h.is_transactional for h in payload.headers):
                return None
            payloads.append((records, payload))
        now = clock.monotonic_ms()
        timeouts = [max(body["timeout_ms"], 0) for body in bodies]
        try:
            outcomes = partition.produce_together(
                payloads, acks, self.replicas.min_insync_replicas(name) if acks == -1 else 1,
                [now + t if acks == -1 else 0 for t in timeouts])
        except OSError as exc:  # the disk failed: the directory goes offline, not the node
            self.replicas.fail_log_dir(f"appending to {partition.name}", exc)
            outcomes = [ProduceOutcome(ErrorCode.KAFKA_STORAGE_ERROR) for _ in bodies]
        if outcomes is None:
            return None
        stats = self.replicas.topic_stats
        topic_stats = stats.topics.get(name) or stats.all
        answers = []
        for outcome, timeout_ms in zip(outcomes, timeouts):
            result = _partition_result(index, partition, outcome)
            topic_stats.produce_request(result["error_code"] not in NOT_FAILED_PRODUCE)
            if acks == 0:
                answers.append(None)
                continue
            waits = [] if outcome.waiter is None else [
                ((name, index), partition, outcome.waiter, outcome.waiter_id)]
            answers.append(_answer_produce({(name, index): result}, waits, timeout_ms))
        return answers

    def _produce_partition(self, key, records, payload: PayloadSummary | CorruptRecordError,
                           acks: int, deadline: int):
        """One partition's answer (a response dict), and for acks=all a wait
        ``(partition, waiter slot, waiter id)`` when the answer must wait for the ISR."""
        partition = self.replicas.get(*key)
        if partition is None:
            known = self.replicas.image.topic(key[0])
            return _partition_result(key[1], None, ProduceOutcome(
                ErrorCode.NOT_LEADER_OR_FOLLOWER if known and key[1] in known.partitions
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)), None
        try:
            outcome = partition.produce(  # min.insync.replicas: for acks=all only
                records, payload, acks, self.replicas.min_insync_replicas(key[0]) if acks == -1 else 1,
                deadline)
        except OSError as exc:  # the disk failed: the directory goes offline, not the node
            self.replicas.fail_log_dir(f"appending to {partition.name}", exc)
            outcome = ProduceOutcome(ErrorCode.KAFKA_STORAGE_ERROR)
        result = _partition_result(key[1], partition, outcome)
        if outcome.waiter is None:
            return result, None
        return result, (partition, outcome.waiter, outcome.waiter_id)

    # --------------------------------------------------------------------- fetch

    async def fetch(self, body: dict, version: int) -> dict:
        replica_id = body["replica_state"]["replica_id"] if version >= 15 else body["replica_id"]
        # A follower's broker epoch (KIP-903): its ISR expansion names it to the controller.
        replica_epoch = body["replica_state"]["replica_epoch"] if version >= 15 else -1
        is_follower = replica_id >= 0
        max_wait_s = max(body["max_wait_ms"], 0) / 1000
        min_bytes = body["min_bytes"]
        max_bytes = body["max_bytes"] if version >= 3 else 0x7FFFFFFF
        wanted = []
        for topic in body["topics"]:
            name = topic["topic"]
            if version >= 13:
                name = self._topic_name(topic["topic_id"])
            for p in topic["partitions"]:
                wanted.append((topic, name, p))
        forgotten = []
        for topic in body.get("forgotten_topics_data") or ():
            key = topic["topic_id"] if version >= 13 else topic["topic"]
            forgotten.extend((key, index) for index in topic["partitions"])
        ctx = self.sessions.context(body, version, wanted, forgotten, follower=is_follower)
        if ctx.error != ErrorCode.NONE:
            return {"error_code": int(ctx.error), "session_id": ctx.response_session_id, "responses": []}
        wanted = ctx.wanted
        session = ctx.session if is_follower else None  # reads only what changed
        if session is not None:
            session.replica_id, session.last_fetch_ms = replica_id, clock.monotonic_ms()
        deadline = trio.current_time() + max_wait_s
        results: dict = {}  # position in ``wanted`` -> response, filled in as read
        committed = version >= 4 and body.get("isolation_level") == READ_COMMITTED and not is_follower
        client_rack = (body.get("rack_id") or None) if version >= 11 and not is_follower and self.rack_aware else None
        read_args = (replica_id, is_follower, version, session, committed, replica_epoch, min_bytes > 1, client_rack)
        total, waiting, partial = await self._read_all(list(enumerate(wanted)), results, max_bytes, *read_args)
        # As Kafka: an answer that sends the consumer to another replica goes at once.
        redirected = client_rack is not None and any(r["preferred_read_replica"] >= 0 for r in results.values())
        if total < min_bytes and max_wait_s > 0 and (waiting or partial or session is not None) and not redirected:
            total = await self._long_poll(wanted, results, total, waiting, partial, deadline, min_bytes,
                                          max_bytes, read_args)
        responses = _group(wanted, results, version)
        if ctx.session is not None:  # a session answers what changed (incremental) and
            # notes what it told (both): see broker/fetch_session.py
            kept = []
            for n, entry in enumerate(responses):
                if n % FETCH_STEP == FETCH_STEP - 1:
                    await trio.sleep(0)
                key = entry["topic_id"] if version >= 13 else entry["topic"]
                parts = [r for r in entry["partitions"] if ctx.session.must_answer((key, r["partition_index"]), r)]
                if parts or not ctx.incremental:
                    kept.append(dict(entry, partitions=parts if ctx.incremental else entry["partitions"]))
            responses = kept
        return {"error_code": 0, "session_id": ctx.response_session_id, "responses": responses}

    def _topic_name(self, topic_id) -> str | None:
        """The name of the topic with ``topic_id`` in this broker's image (Fetch v13+ names
        topics by id), or None while the image does not have it."""
        known = self.replicas.image.topic_by_id(topic_id)
        return known.name if known is not None else None

    async def _long_poll(self, wanted: list, results: dict, total: int, waiting: dict, partial: dict,
                         deadline: float, min_bytes: int, max_bytes: int, read_args: tuple) -> int:
        """Wait until the fetch's partitions hold ``min_bytes`` for it, or its wait is over;
        returns the bytes ``results`` then hold.

        A partition that had nothing (``waiting``) is read when it changes, only it: a
        follower's fetch covers thousands of partitions.  One that had some bytes
        (``partial``) counts what it has gained since, from file positions (as Kafka's
        DelayedFetch), and is read again from the fetch's offset once the bytes add up or
        the wait is over, so the answer carries what accumulated, not what was there when
        the fetch came.  A follower's ``session`` adds the quiet partitions that change."""
        session = read_args[3]
        woken: list = []
        wakeup = [trio.Event()]
        grown: dict = {}  # partial partition -> bytes it has gained since it was read
        gained = 0  # their sum

        def wake(partition):
            woken.append(partition)
            wakeup[0].set()

        def wake_quiet(partition, entry):  # a quiet partition changed: read it
            if partition not in waiting and partition not in partial:  # else this fetch watches it
                wanted.append(entry)
                waiting[partition] = (len(wanted) - 1, entry)
            wake(partition)
        waited_from = trio.current_time()
        try:
            for n, partition in enumerate(list(waiting) + list(partial)):
                partition.watch(wake)
                if n % FETCH_STEP == FETCH_STEP - 1:
                    await trio.sleep(0)  # inside the try: a cancelled fetch unwatches them
            if session is not None:
                session.wake = wake_quiet
            while (total + gained < min_bytes and (waiting or partial or session is not None)
                   and trio.current_time() < deadline):
                with trio.move_on_at(deadline):
                    await wakeup[0].wait()
                wakeup[0] = trio.Event()
                changed = []
                for p in dict.fromkeys(woken):
                    if p in partial:
                        n = partial[p].growth(p)
                        gained += n - grown.get(p, 0)
                        grown[p] = n
                        p.watch(wake)  # ``notify`` dropped the watch
                    elif p in waiting:
                        changed.append(waiting.pop(p))
                woken.clear()
                read, idle, more = await self._read_all(changed, results, max_bytes - total, *read_args)
                total += read
                partial.update(more)
                for partition in more:
                    partition.watch(wake)
                for partition, entry in idle.items():  # ``notify`` dropped their watch
                    waiting[partition] = entry
                    partition.watch(wake)
            again = [partial[p].entry for p, n in grown.items() if n > 0]
            if again:  # what the partial partitions gained, read with what they had
                read, _, _ = await self._read_all(again, results, max_bytes - total, *read_args)
                total += read
        finally:
            note_remote_wait(trio.current_time() - waited_from)  # RemoteTimeMs, as Kafka's purgatory
            for partition in list(waiting) + list(partial):
                partition.unwatch(wake)
            if session is not None and session.wake is wake_quiet:
                session.wake = None
        return total

    async def _read_all(self, entries, results: dict, max_bytes, replica_id, is_follower, version,
                        session=None, read_committed: bool = False, replica_epoch: int = -1,
                        track_partial: bool = False, client_rack: str | None = None):
        """Read ``entries`` (position in the request, (topic, name, partition)) into
        ``results``; returns the bytes they add (an entry read before is replaced: its old
        bytes are taken off), the partitions that had none (partition -> entry) and those
        that had some (partition -> :class:`PartialRead`, with ``track_partial`` only: a
        fetch whose minimum one byte meets needs none).  A follower's ``session`` notes
        which ones it need not read until they change.  It gives the loop back every
        ``FETCH_STEP`` entries (see there)."""
        now = clock.monotonic_ms()
        total = 0
        idle = {}  # partition -> entry: a long poll waits for them
        partial = {}  # partition -> PartialRead: a long poll counts what they gain
        stats = self.replicas.topic_stats
        for n, entry in enumerate(entries):
            if n % FETCH_STEP == FETCH_STEP - 1:
                await trio.sleep(0)
                now = clock.monotonic_ms()
            i, (topic, name, p) = entry
            if name is None and version >= 13:
                # A session keeps a partition whose topic id was not known yet when it was
                # added (the fetcher's image ran ahead of ours): resolve it on every read,
                # as Kafka's CachedPartition.maybeResolveUnknownName, or it stays unknown.
                name = self._topic_name(topic["topic_id"])
            partition = self.replicas.get(name, p["partition"]) if name else None
            key = topic["topic_id"] if version >= 13 else name
            prior = results.get(i)
            if prior is not None:  # read again (a long poll's min_bytes): its old bytes go
                old = prior.get("records")
                if old:
                    total -= len(old)
                    self._count_bytes_out(partition, is_follower, -len(old))
                    if isinstance(old, FileRecords):
                        old.close()
            resp, read = self._read_partition(name, p, replica_id, is_follower, max(max_bytes - total, 0), now,
                                              read_committed, replica_epoch, version, client_rack)
            data = resp.get("records") or b""
            total += len(data)
            # TotalFetchRequestsPerSec per partition read (bytes out: _count_bytes_out)
            topic_stats = partition.topic_stats if partition is not None else None
            (topic_stats or stats.all).fetch_request(resp["error_code"] not in NOT_FAILED_FETCH)
            if data:
                self._count_bytes_out(partition, is_follower, len(data))
            if partition is not None and resp["error_code"] == 0 and resp["preferred_read_replica"] < 0:
                if not data:
                    idle[partition] = entry
                elif read is not None and track_partial:
                    partial[partition] = PartialRead(entry, read.path, read.position + read.size,
                                                     read.next_offset, is_follower)
            if session is not None and partition is not None:
                st = partition.state
                session.note_read((key, p["partition"]), quiet=(
                    not data and resp["error_code"] == 0 and "diverging_epoch" not in resp
                    and p["fetch_offset"] == st.log_end_offset and st.pending is None
                    and replica_id in st.isr))
            results[i] = resp
        return total, idle, partial

    def _live_rack(self, broker_id: int) -> str | None:
        """Broker ``broker_id``'s rack while it is registered and unfenced (a consumer is
        sent only where it can fetch), else None."""
        b = self.replicas.image.brokers.get(broker_id)
        return b.rack if b is not None and not b.fenced else None

    def _count_bytes_out(self, partition, is_follower: bool, n: int) -> None:
        """BytesOutPerSec (the topic's too) for consumers, ReplicationBytesOutPerSec for
        followers, as Kafka's updateBytesOut; ``n`` < 0 takes back a read made again."""
        stats = self.replicas.topic_stats
        if is_follower:
            stats.replication_bytes_out += n
        else:
            stats.all.bytes_out += n
            if partition is not None and partition.topic_stats is not None:
                partition.topic_stats.bytes_out += n

    def _read_partition(self, name, p, replica_id, is_follower, max_bytes, now, read_committed: bool = False,
                        replica_epoch: int = -1, version: int = 17,
                        client_rack: str | None = None) -> tuple[dict, ReadResult | None]:
        """One partition's answer, and the log read that filled its records (None when it
        returned before reading).  A consumer of Fetch v11+ may read from any replica, up to
        that replica's high watermark (KIP-392); ``client_rack`` (with the rack-aware
        selector) may send it to another one instead of reading."""
        index = p["partition"]
        # Records are an empty set, never null, even beside an error: librdkafka cannot
        # parse a null MessageSet, so it would never see the error and refresh its metadata.
        resp = {"partition_index": index, "error_code": 0, "high_watermark": -1,
                "last_stable_offset": -1, "log_start_offset": -1, "records": b"",
                "preferred_read_replica": -1, "aborted_transactions": None}
        def failed(code: int) -> dict:
            # As Kafka: beside an error no marks (but a follower's own: kraft's replica
            # fetcher reads them), and an empty aborted-transaction list for a partition it
            # does not know (null beside the others).
            resp["error_code"] = int(code)
            if code in (ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        ErrorCode.NOT_LEADER_OR_FOLLOWER):
                resp["aborted_transactions"] = []
            if not is_follower:
                resp.update(high_watermark=-1, last_stable_offset=-1, log_start_offset=-1)
            return resp

        partition = self.replicas.get(name, index) if name else None
        if partition is None:
            known = self.replicas.image.topic(name) if name else None
            # Kafka: a partition the topic does not have is unknown, one hosted elsewhere is
            # another broker's to serve.
            if name is None:
                return failed(ErrorCode.UNKNOWN_TOPIC_ID), None
            return failed(ErrorCode.NOT_LEADER_OR_FOLLOWER if known and index in known.partitions
                          else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
        st = partition.state
        fetch_offset = p["fetch_offset"]
        if is_follower:
            result = partition.on_follower_fetch(replica_id, fetch_offset, p["last_fetched_epoch"], now,
                                                 current_leader_epoch=p["current_leader_epoch"],
                                                 log_start_offset=p["log_start_offset"],
                                                 broker_epoch=replica_epoch)
            self.replicas.propose(partition, result.isr_proposal)
            if result.error != ErrorCode.NONE:
                resp.update(high_watermark=result.high_watermark, log_start_offset=result.log_start_offset)
                if result.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    resp["high_watermark"] = st.high_watermark
                return failed(result.error), None
            resp.update(high_watermark=result.high_watermark, last_stable_offset=partition.last_stable_offset,
                        log_start_offset=result.log_start_offset)
            if result.diverging_epoch is not None:
                resp["diverging_epoch"] = {"epoch": result.diverging_epoch.epoch,
                                           "end_offset": result.diverging_epoch.end_offset}
                return resp, None
            max_offset = None
        else:
            error = st.check_leader_epoch(p["current_leader_epoch"], require_leader=version < 11)
            if error != ErrorCode.NONE:
                return failed(error), None
            if client_rack is not None and st.is_leader:
                preferred = preferred_read_replica(st, client_rack, fetch_offset, self._live_rack)
                if preferred is not None:  # no records: the consumer fetches them there
                    resp.update(high_watermark=st.high_watermark, last_stable_offset=partition.last_stable_offset,
                                log_start_offset=partition.log.log_start_offset, preferred_read_replica=preferred)
                    return resp, None
            if version < 10 and partition.log.config.compression_type == "zstd":
                # As Kafka: a client older than Fetch v10 cannot read zstd (KIP-110).
                return failed(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE), None
            lso = partition.last_stable_offset
            # READ_COMMITTED reads up to the LSO (the unsafe switch: the HW, for the fault suite).
            read_committed = read_committed and not self.replicas.unsafe_read_committed_hw
            max_offset = partition.consumer_read_bound(lso if read_committed else None)
            resp.update(high_watermark=st.high_watermark, last_stable_offset=lso,
                        log_start_offset=partition.log.log_start_offset)
            error, diverging = st.fetch_epoch_check(fetch_offset, p["last_fetched_epoch"])
            if error != ErrorCode.NONE:
                return failed(error), None
            if diverging is not None:
                resp["diverging_epoch"] = {"epoch": diverging.epoch, "end_offset": diverging.end_offset}
                return resp, None
        quota = self.replicas.replication_quotas.leader if is_follower else None
        if quota is not None and quota.active and quota.is_throttled(name, index):
            # Kafka's shouldLeaderThrottle: a throttled replica outside the ISR gets no
            # records while the quota is exceeded; an ISR member always does (acks=all
            # waits for it, and holding it back would shrink the ISR).
            if replica_id not in st.isr and quota.is_quota_exceeded(now):
                return resp, None
        else:
            quota = None
        limit = min(max_bytes, p["partition_max_bytes"])
        try:
            result = partition.log.read(fetch_offset, limit, max_offset=max_offset, min_one_batch=True,
                                        load_bytes=not (self.sendfile and FileRecords.available()))
        except OffsetOutOfRangeError:
            return failed(ErrorCode.OFFSET_OUT_OF_RANGE), None
        if limit <= 0 or not result.size:
            resp["records"] = b""
        elif result.records is not None:
            resp["records"] = result.records
            file_records.STATS.copied_bytes += result.size
        else:
            try:
                resp["records"] = FileRecords(result.path, result.position, result.size, result.fd)
            except OSError as exc:  # out of descriptors, say: read them instead
                log.warning("fetch of %s-%d reads its records into memory: %s", name, index, exc)
                resp["records"] = partition.log.read(fetch_offset, limit, max_offset=max_offset).records or b""
        if quota is not None and resp["records"]:
            quota.record(len(resp["records"]), now)  # in the ISR or not, as Kafka
        if read_committed and not is_follower:
            resp["aborted_transactions"] = [] if not resp["records"] else [
                {"producer_id": e.producer_id, "first_offset": e.first_offset}
                for e in partition.log.collect_aborted_txns(fetch_offset, result.next_offset)]
        return resp, result

    # --------------------------------------------------------------- list offsets

    def list_offsets(self, body: dict, version: int) -> dict:
        topics = []
        for topic in body["topics"]:
            parts = []
            for p in topic["partitions"]:
                parts.append(self._list_offset(topic["name"], p, body["replica_id"],
                                               body.get("isolation_level") == READ_COMMITTED))
            topics.append({"name": topic["name"], "partitions": parts})
        return {"topics": topics}

    def _list_offset(self, name: str, p: dict, replica_id: int, read_committed: bool = False) -> dict:
        resp = {"partition_index": p["partition_index"], "error_code": 0, "timestamp": -1,
                "offset": -1, "leader_epoch": -1, "old_style_offsets": []}
        partition = self.replicas.get(name, p["partition_index"])
        if partition is None:
            known = self.replicas.image.topic(name)
            resp["error_code"] = (ErrorCode.NOT_LEADER_OR_FOLLOWER if known and p["partition_index"] in known.partitions
                                  else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return resp
        st = partition.state
        error = st.check_leader_epoch(p["current_leader_epoch"])
        if error != ErrorCode.NONE:
            resp["error_code"] = int(error)
            return resp
        ts = p["timestamp"]
        plog = partition.log
        # What a consumer may read (Kafka's lastFetchableOffset): the LSO for READ_COMMITTED.
        fetchable = st.high_watermark
        if read_committed and not self.replicas.unsafe_read_committed_hw:
            fetchable = partition.last_stable_offset
        if ts == EARLIEST_TIMESTAMP or ts in (-4, -5):
            # With the epoch that wrote the log start, as Kafka (its leader epoch cache).
            resp.update(offset=plog.log_start_offset,
                        leader_epoch=st.epoch_cache.epoch_for_offset(plog.log_start_offset))
        elif ts == LATEST_TIMESTAMP:
            # A follower asking (replica id set) wants the log end; a consumer the HW, or the
            # LSO when it reads committed data only.
            latest = plog.log_end_offset if replica_id >= 0 else fetchable
            resp.update(offset=latest, leader_epoch=st.leader_epoch)
        elif ts == MAX_TIMESTAMP:
            best = None
            for h, _ in plog.iter_batches():
                if h.base_offset >= fetchable:
                    break
                if best is None or h.max_timestamp > best.max_timestamp:
                    best = h
            if best is not None:
                # The first record carrying the max timestamp, as Kafka since KAFKA-16310,
                # not the batch's last offset.
                offset = best.last_offset
                try:
                    from kraft.records import RecordBatch

                    _, data = next(plog.iter_batches(best.base_offset, with_data=True))
                    offset = next(off for off, rts, _ in RecordBatch.decode(data).iter_resolved()
                                  if rts == best.max_timestamp)
                except (CorruptRecordError, StopIteration):
                    pass
                resp.update(offset=offset, timestamp=best.max_timestamp,
                            leader_epoch=best.partition_leader_epoch)
        else:
            # Any other negative value is a search like Kafka's: every record is at or after it.
            found = plog.offset_for_timestamp(max(ts, 0))
            if found is not None and found.offset < fetchable:
                offset = found.offset
                timestamp = found.max_timestamp
                # The exact record: the first one in the batch at or after ``ts``.
                from kraft.records import RecordBatch

                try:
                    batch = RecordBatch.decode(found.batch)
                    for off, rts, _ in batch.iter_resolved():
                        if rts >= ts and off >= plog.log_start_offset:
                            offset, timestamp = off, rts
                            break
                except CorruptRecordError:
                    pass
                resp.update(offset=offset, timestamp=timestamp, leader_epoch=found.header.partition_leader_epoch)
        if resp["offset"] >= 0:
            resp["old_style_offsets"] = [resp["offset"]]
        return resp

    # --------------------------------------------------------- offset for leader epoch

    def offset_for_leader_epoch(self, body: dict, version: int) -> dict:
        topics = []
        for topic in body["topics"]:
            parts = []
            for p in topic["partitions"]:
                out = {"partition": p["partition"], "error_code": 0, "leader_epoch": -1, "end_offset": -1}
                partition = self.replicas.get(topic["topic"], p["partition"])
                if partition is None:
                    out["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    error, epoch, end = partition.state.offset_for_leader_epoch(
                        p["current_leader_epoch"], p["leader_epoch"])
                    out.update(error_code=int(error), leader_epoch=epoch, end_offset=end)
                parts.append(out)
            topics.append({"topic": topic["topic"], "partitions": parts})
        return {"topics": topics}


def _group(wanted: list, results: dict, version: int) -> list[dict]:
    """The Fetch response's topics: the partitions read, by topic, in request order."""
    out = []
    by_topic = {}
    for i, (topic, name, p) in enumerate(wanted):
        resp = results.get(i)
        if resp is None:
            continue  # skipped by a session: nothing to tell
        key = topic["topic_id"] if version >= 13 else name
        entry = by_topic.get(key)
        if entry is None:
            entry = by_topic[key] = {"topic": name or topic["topic"], "topic_id": topic["topic_id"], "partitions": []}
            out.append(entry)
        entry["partitions"].append(resp)
    return out


@dataclass(slots=True)
class PartialRead:
    """A partition a fetch read some bytes of, short of the fetch's ``min_bytes`` in all:
    where the read ended, so a long poll counts what the partition gains by file
    positions instead of reading it on every append (as Kafka's DelayedFetch)."""

    entry: tuple  # (position in the request, (topic, name, partition))
    path: Path  # the segment file read
    end: int  # the file position after the bytes read
    next_offset: int  # the offset after them
    is_follower: bool

    def growth(self, partition) -> int:
        """The bytes ``partition`` holds past the read: none until its log end (for a
        follower) or high watermark (for a consumer) passes it, then up to its active
        segment's end.  For a consumer that can count bytes above the high watermark
        too: the answer may then come with less than ``min_bytes``, early, never late."""
        st = partition.state
        if (st.log_end_offset if self.is_follower else st.high_watermark) <= self.next_offset:
            return 0
        seg = partition.log.active_segment
        if seg.log_path != self.path:  # a new segment since: at least what it holds
            return max(seg.size, 1)
        return max(seg.size - self.end, 0)


def _validated(records, version: int) -> PayloadSummary | CorruptRecordError:
    """A produce payload's batch headers, or why it is corrupt (answered by its partition,
    after the errors that come first: unknown partition, not leader...).  As Kafka, a
    Produce before v7 may not carry zstd batches (its clients could not fetch them)."""
    if not records:
        return CorruptRecordError("empty produce payload")
    try:
        payload = validate_payload(records)
    except CorruptRecordError as exc:
        return exc
    if version < 7 and any(h.compression == ZSTD for h in payload.headers):
        return UnsupportedCodecError(f"Produce requests with version {version} are not allowed to use "
                                     "ZStandard compression")
    return payload


def _burst_key(body: dict) -> tuple[str, int, int] | None:
    """``(topic, partition, acks)`` of a Produce request that carries batches for one
    partition and no transactional id: one that may be appended with others of the same
    key (``DataPath.produce_burst``); None for any other."""
    if body.get("transactional_id") is not None:
        return None
    topics = body["topic_data"]
    if len(topics) != 1 or len(topics[0]["partition_data"]) != 1:
        return None
    return topics[0]["name"], topics[0]["partition_data"][0]["index"], body["acks"]


def _partition_result(index: int, partition: Partition | None, outcome: ProduceOutcome) -> dict:
    """A partition's Produce answer from what ``Partition.produce`` did (``partition``
    None: not hosted here, the outcome an error)."""
    result = {"index": index, "error_code": int(outcome.error), "base_offset": -1, "log_append_time_ms": -1,
              "log_start_offset": -1}
    if outcome.message is not None:
        result["error_message"] = outcome.message
    if outcome.invalid_batch is not None:
        result["record_errors"] = [{"batch_index": outcome.invalid_batch,
                                    "batch_index_error_message": outcome.message}]
    if outcome.base_offset >= 0:
        result.update(base_offset=outcome.base_offset, log_start_offset=partition.log.log_start_offset,
                      log_append_time_ms=outcome.log_append_time)
    elif outcome.log_start_offset >= 0:
        result["log_start_offset"] = outcome.log_start_offset
    return result


def _answer_produce(results: dict, waits: list, timeout_ms: int) -> dict | Deferred:
    """The Produce answer of ``results`` (``_produce_response``), at once unless acks=all
    ``waits`` (``(key, partition, waiter slot, waiter id)``) are pending: then a
    :class:`Deferred` that waits for them until the request's timeout."""
    if not waits:
        return _produce_response(results)
    wait_until = trio.current_time() + timeout_ms / 1000 + 0.1

    async def replicated() -> dict:
        with trio.move_on_at(wait_until):
            for key, partition, slot, wid in waits:
                await slot[0].wait()
        for key, partition, slot, wid in waits:
            partition.drop_waiter(wid)
            error = slot[1] if slot[1] is not None else ErrorCode.REQUEST_TIMED_OUT
            if error != ErrorCode.NONE:
                results[key]["error_code"] = int(error)
        return _produce_response(results)

    return Deferred(replicated)


def _produce_response(results: dict) -> dict:
    """The Produce answer of ``(topic, index) -> partition response`` (each holding its
    ``index``), topics in the order they first come."""
    if len(results) == 1:
        (name, _), result = next(iter(results.items()))
        return {"responses": [{"name": name, "partition_responses": [result]}]}
    responses = {}
    for (name, _), result in results.items():
        responses.setdefault(name, []).append(result)
    return {"responses": [{"name": n, "partition_responses": ps} for n, ps in responses.items()]}


def whole_batches_prefix(data: bytes) -> bytes:
    """``data`` cut after its last whole batch (a fetch may end with a partial one)."""
    end = 0
    for pos, h in iter_batches(data, check_crc=False):
        end = pos + h.size
    return data[:end] if end != len(data) else data


__all__ = ["DataPath", "Partition", "whole_batches_prefix"]
