"""Durable state of a quorum member, in Kafka's layout under ``metadata.log.dir``::

    __cluster_metadata-0/
        quorum-state                            epoch, voted id, leader id (JSON, fsynced)
        00000000000000000000.log / .index ...   the metadata log (kraft.log, record batches)
        %020d-%010d.checkpoint                  snapshots (end offset, epoch); .part while written

Everything here is written before the Raft core's outputs that depend on it leave: the
driver calls ``persist`` with a Ready and only then sends its messages.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from kraft import durability
from kraft.log import Log, LogConfig
from kraft.raft.messages import Batch, HardState, OffsetAndEpoch, Snapshot
from kraft.raft.record_codec import decode_raft_batches, encode_batch

PARTITION_DIR = "__cluster_metadata-0"
QUORUM_STATE = "quorum-state"
_SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


def snapshot_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}.checkpoint"


def latest_snapshot_path(directory: Path) -> Path | None:
    """The newest (end offset, epoch) ``.checkpoint`` in ``directory``, if any."""
    best = None
    if not directory.is_dir():
        return None
    for p in directory.iterdir():
        match = _SNAPSHOT_RE.match(p.name)
        if match:
            sid = OffsetAndEpoch(int(match.group(1)), int(match.group(2)))
            if best is None or sid > best:
                best = sid
    return None if best is None else directory / snapshot_name(best)


class RaftStorage:
    """The quorum-state file, the metadata log and its snapshots for one node."""

    def __init__(self, metadata_log_dir: str | os.PathLike, *, segment_bytes: int = 1 << 30,
                 clock=None):
        self.directory = Path(metadata_log_dir) / PARTITION_DIR
        self.directory.mkdir(parents=True, exist_ok=True)
        config = LogConfig(segment_bytes=segment_bytes)
        self.log = Log.open(self.directory, config, **({"clock": clock} if clock else {}))

    # ------------------------------------------------------------------------- loading

    def load_hard_state(self) -> HardState | None:
        path = self.directory / QUORUM_STATE
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
            return HardState(int(data["leaderEpoch"]), int(data["votedId"]), int(data["leaderId"]))
        except (ValueError, KeyError) as exc:
            raise RuntimeError(f"{path}: unreadable quorum state ({exc})") from None

    def latest_snapshot(self) -> Snapshot | None:
        for p in self.directory.glob("*.checkpoint.part"):
            p.unlink()  # an interrupted write: never adopted
        path = latest_snapshot_path(self.directory)
        if path is None:
            return None
        match = _SNAPSHOT_RE.match(path.name)
        return Snapshot(OffsetAndEpoch(int(match.group(1)), int(match.group(2))), path.read_bytes())

    def load_batches(self, from_offset: int) -> list[Batch]:
        """Every batch in the log at or after ``from_offset`` (recovery already ran)."""
        out = []
        if self.log.log_end_offset <= from_offset:
            return out
        start = max(from_offset, self.log.log_start_offset)
        pos = start
        while pos < self.log.log_end_offset:
            result = self.log.read(pos, 1 << 22)
            batches = decode_raft_batches(result.records or b"")
            if not batches:
                break
            for b in batches:
                if b.end_offset > start:
                    out.append(b)
            pos = batches[-1].end_offset
        return out

    # ------------------------------------------------------------------------- persisting

    def save_hard_state(self, hs: HardState, voters) -> None:
        data = {"clusterId": "", "leaderId": hs.leader_id, "leaderEpoch": hs.epoch,
                "votedId": hs.voted_id, "appliedOffset": 0,
                "currentVoters": [{"voterId": v} for v in sorted(voters)], "data_version": 0}
        durability.atomic_write(self.directory / QUORUM_STATE, json.dumps(data).encode())

    def save_snapshot(self, snapshot: Snapshot) -> None:
        final = self.directory / snapshot_name(snapshot.snapshot_id)
        part = final.with_name(final.name + ".part")
        with open(part, "wb") as f:
            f.write(snapshot.data)
            f.flush()
            os.fsync(f.fileno())
            durability.note_fsync(part, f.fileno())
        os.replace(part, final)
        durability.note_rename(part, final)
        durability.fsync_dir(self.directory)
        # The log before the snapshot is no longer needed; a follower that installed a
        # snapshot beyond its log end starts its log afresh at the snapshot's end.
        if snapshot.end_offset >= self.log.log_end_offset:
            self.log.truncate_fully_and_start_at(snapshot.end_offset)
        else:
            self.log.delete_records_before(snapshot.end_offset)
        for p in self.directory.iterdir():
            match = _SNAPSHOT_RE.match(p.name)
            if match and int(match.group(1)) < snapshot.end_offset:
                p.unlink()
                durability.note_unlink(p)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def append(self, batches) -> None:
        for b in batches:
            self.log.append(encode_batch(b), assign_offsets=False)

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()
