"""``kraftctl dump-log`` (cli/dump_log.py) on segment files a partition wrote: batches with
their producer and transaction fields, records, markers and ``.txnindex`` entries, in the
line format of Kafka's kafka-dump-log.sh."""

from __future__ import annotations

import subprocess
import sys
import uuid

from broker.group.records import OffsetValue, offset_record
from broker.partition import Partition
from kraft.log import Log, LogConfig
from kraft.records import build_batch, make_end_txn_batch

T0 = 1_700_000_000_000


def kraftctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True, text=True, timeout=60)


def write_segment(path) -> Partition:
    p = Partition("t", 0, uuid.UUID(int=1), Log.open(path, LogConfig(), clock=lambda: T0), broker_id=1)
    p.append_as_leader(bytearray(build_batch([(None, b"c0"), (b"k", b"c1")], timestamp=T0, producer_id=7,
                                             producer_epoch=2, base_sequence=0, transactional=True)))
    p.append_as_leader(bytearray(build_batch([(None, b"a0")], timestamp=T0, producer_id=8, producer_epoch=0,
                                             base_sequence=0, transactional=True)))
    for pid, epoch, commit in ((7, 2, True), (8, 0, False)):
        p.append_as_leader(bytearray(make_end_txn_batch(commit, producer_id=pid, producer_epoch=epoch,
                                                        coordinator_epoch=5, timestamp=T0).encode()))
    p.log.close()
    return p


def test_dump_log_prints_batches_markers_and_aborted_transactions(tmp_path):
    write_segment(tmp_path / "t-0")
    log_file = tmp_path / "t-0" / "00000000000000000000.log"
    txn_file = tmp_path / "t-0" / "00000000000000000000.txnindex"
    shallow = kraftctl("dump-log", "--files", str(log_file))
    assert shallow.returncode == 0, shallow.stderr
    lines = shallow.stdout.splitlines()
    assert lines[:2] == [f"Dumping {log_file}", "Log starting offset: 0"]
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 "
                               "producerId: 7 producerEpoch: 2 partitionLeaderEpoch: -1 isTransactional: true "
                               "isControl: false deleteHorizonMs: OptionalLong.empty position: 0 "
                               f"CreateTime: {T0} size: ")
    assert lines[2].endswith("isvalid: true") and "compresscodec: none crc: " in lines[2]
    assert "baseOffset: 3 lastOffset: 3 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7" in lines[4]
    assert "isTransactional: true isControl: true" in lines[4]
    assert not [line for line in lines if line.startswith("|")]

    deep = kraftctl("dump-log", "--files", f"{log_file},{txn_file}", "--print-data-log")
    assert deep.returncode == 0, deep.stderr
    records = [line for line in deep.stdout.splitlines() if line.startswith("|")]
    assert records[0] == (f"| offset: 0 CreateTime: {T0} keySize: -1 valueSize: 2 sequence: 0 headerKeys: [] "
                          "payload: c0")
    assert records[1].endswith("sequence: 1 headerKeys: [] key: k payload: c1")
    assert records[3].endswith("endTxnMarker: COMMIT coordinatorEpoch: 5")
    assert records[4].endswith("endTxnMarker: ABORT coordinatorEpoch: 5")
    out = deep.stdout.splitlines()
    assert out[out.index(f"Dumping {txn_file}") + 1:] == [
        "version: 0 producerId: 8 firstOffset: 2 lastOffset: 4 lastStableOffset: 5"]


def test_a_damaged_batch_is_reported_and_ends_the_dump(tmp_path):
    write_segment(tmp_path / "t-0")
    log_file = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log_file.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    log_file.write_bytes(bytes(data[:-10]))  # and the last batch is torn
    out = kraftctl("dump-log", "--files", str(log_file)).stdout.splitlines()
    assert out[2].endswith("isvalid: false")
    assert out[-1].startswith("Found an incomplete or invalid batch")


def test_the_offsets_decoder_reads_consumer_offsets_records(tmp_path):
    plog = Log.open(tmp_path / "__consumer_offsets-0", LogConfig(), clock=lambda: T0)
    key, value = offset_record("g", "t", 3, OffsetValue(42, "meta", T0))
    plog.append(build_batch([(key, value)], timestamp=T0), assign_offsets=True)
    plog.close()
    out = kraftctl("dump-log", "--offsets-decoder", "--files",
                   str(tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"))
    assert out.returncode == 0, out.stderr
    assert "key: offset_commit::group=g,partition=t-3 payload: offset:42,metadata:meta" in out.stdout
