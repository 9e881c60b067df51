"""File faults: the fsync-journal contract really loses unsynced data; corruption helpers."""

import os
import random
import signal
import subprocess
import sys

import pytest

from jepsen.faults import (JOURNAL_ENV, JournalError, JournalWriter, corrupt, flip_bits,
                           lose_unsynced_writes, read_journal, record_baseline, segment_files,
                           truncate_tail)

# A writer that follows the contract: writes, fsyncs part, writes more, then hangs until
# killed (as a crashed node would).  Its files stay in the page cache, not lost by a
# process crash: only the fault makes them go away.
WRITER = """
import os, sys, time
from jepsen.faults import JournalWriter
root = sys.argv[1]
j = JournalWriter()                      # reads KRAFT_FSYNC_JOURNAL
seg = os.path.join(root, "topic-0", "00000000000000000000.log")
os.makedirs(os.path.dirname(seg))
fd = os.open(seg, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.write(fd, b"A" * 1000)
os.fsync(fd); j.fsynced(seg, os.fstat(fd).st_size)
os.write(fd, b"B" * 500)                 # never synced
# write-tmp, fsync, rename: the checkpoint pattern
tmp = os.path.join(root, "checkpoint.tmp")
with open(tmp, "wb") as f:
    f.write(b"checkpoint-1"); f.flush(); os.fsync(f.fileno()); j.fsynced(tmp, 12)
os.replace(tmp, os.path.join(root, "checkpoint")); j.renamed(tmp, os.path.join(root, "checkpoint"))
with open(os.path.join(root, "never-synced.log"), "wb") as f:
    f.write(b"C" * 300)
# a synced file deleted later and written again without sync
old = os.path.join(root, "old.index")
with open(old, "wb") as f:
    f.write(b"D" * 10); f.flush(); os.fsync(f.fileno()); j.fsynced(old, 10)
os.unlink(old); j.unlinked(old)
with open(old, "wb") as f:
    f.write(b"E" * 10)
print("ready", flush=True)
time.sleep(60)
"""


def test_lose_unsynced_writes_loses_exactly_the_unsynced_bytes(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    journal = tmp_path / "fsync.journal"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE,
                            env=dict(os.environ, **{JOURNAL_ENV: str(journal)}), text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    seg = root / "topic-0" / "00000000000000000000.log"
    assert seg.read_bytes() == b"A" * 1000 + b"B" * 500  # all there after the crash itself

    report = lose_unsynced_writes(root, journal)

    assert seg.read_bytes() == b"A" * 1000
    assert (root / "checkpoint").read_bytes() == b"checkpoint-1"
    assert not (root / "never-synced.log").exists()
    assert not (root / "old.index").exists()
    assert report.truncated == {str(seg): (1500, 1000)}
    assert sorted(report.deleted) == [str(root / "never-synced.log"), str(root / "old.index")]
    assert report.to_dict()["bytes_lost"] == 500
    # Idempotent: applying it again loses nothing more.
    again = lose_unsynced_writes(root, journal)
    assert again.truncated == {} and again.deleted == [] and again.kept == 2


def test_no_journal_refuses_to_wipe_and_a_baseline_keeps_what_exists(tmp_path):
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "meta.properties").write_text("node.id=1\n")
    (root / "sub" / "x.log").write_bytes(b"x" * 9)
    journal = tmp_path / "journal"
    with pytest.raises(JournalError, match="no fsync journal"):
        lose_unsynced_writes(root, journal)
    assert record_baseline(root, journal) == 2
    with open(root / "sub" / "x.log", "ab") as f:
        f.write(b"unsynced")
    report = lose_unsynced_writes(root, journal)
    assert (root / "meta.properties").read_text() == "node.id=1\n"
    assert (root / "sub" / "x.log").read_bytes() == b"x" * 9
    assert report.kept == 1 and report.deleted == []


def test_journal_ignores_a_torn_last_line_and_rejects_garbage(tmp_path):
    journal = tmp_path / "j"
    journal.write_text("fsync\t10\t/a\nfsync\t20\t/b\nfsync\t3")
    assert read_journal(journal) == {"/a": 10, "/b": 20}
    journal.write_text("fsync\t10\t/a\nwhatever\n")
    with pytest.raises(JournalError, match="j:2"):
        read_journal(journal)
    assert read_journal(tmp_path / "missing") == {}


def test_rename_of_an_unsynced_file_over_a_synced_one_is_not_durable(tmp_path):
    journal = tmp_path / "j"
    w = JournalWriter(journal)
    w.fsynced("/x/dst", 5)
    w.renamed("/x/src", "/x/dst")  # src was never synced
    w.close()
    assert read_journal(journal) == {}


def test_renaming_a_directory_moves_what_was_synced_inside_it(tmp_path):
    journal = tmp_path / "j"
    w = JournalWriter(journal)
    w.fsynced("/d/t-0/0.log", 100)
    w.fsynced("/d/t-0x/0.log", 7)
    w.renamed("/d/t-0", "/d/t-0.abc-delete")
    w.close()
    assert read_journal(journal) == {"/d/t-0.abc-delete/0.log": 100, "/d/t-0x/0.log": 7}


def test_writer_without_journal_is_a_no_op(monkeypatch):
    monkeypatch.delenv(JOURNAL_ENV, raising=False)
    w = JournalWriter()
    w.fsynced("/a", 1)
    w.close()


def test_truncate_and_bitflip(tmp_path):
    f = tmp_path / "seg.log"
    f.write_bytes(bytes(100))
    assert truncate_tail(f, 30) == (100, 70)
    assert f.stat().st_size == 70
    assert truncate_tail(f, 1000) == (70, 0)
    f.write_bytes(bytes(100))
    bits = flip_bits(f, 3, random.Random(1))
    data = f.read_bytes()
    assert sum(bin(b).count("1") for b in data) == len(set(bits))
    for bit in bits:
        assert data[bit // 8] & (1 << (bit % 8))


def test_corrupt_is_seeded_and_picks_segments_only(tmp_path):
    def layout(root):
        for name in ("a-0/0.log", "a-0/0.index", "b-1/0.log", "b-1/5.log"):
            p = root / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(bytes(range(256)) * 8)
        (root / "b-1/empty.log").write_bytes(b"")
        return root
    r1, r2 = layout(tmp_path / "r1"), layout(tmp_path / "r2")
    assert [p.name for p in segment_files(r1)] == ["0.log", "0.log", "5.log"]
    out1 = corrupt(r1, "bitflip", random.Random(7), bits=4)
    out2 = corrupt(r2, "bitflip", random.Random(7), bits=4)
    assert out1["file"].endswith(".log")
    assert out1["bitflip"] == out2["bitflip"]
    assert os.path.relpath(out1["file"], r1) == os.path.relpath(out2["file"], r2)
    t = corrupt(r1, "truncate", random.Random(2), max_drop_bytes=100)
    assert t["truncate"]["from"] - t["truncate"]["to"] in range(1, 101)
    assert corrupt(tmp_path / "nothing", "truncate", random.Random(0)) == {"file": None}
    with pytest.raises(ValueError):
        corrupt(r1, "melt", random.Random(0))
