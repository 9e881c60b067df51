"""Formatting and checking a node's storage directories (``kraftctl format``).

Every directory in ``log.dirs`` and the ``metadata.log.dir`` holds a ``meta.properties``
naming the cluster and node it belongs to, as Kafka's KRaft mode writes it (version=1).
A node refuses to start on a directory that is unformatted or belongs to another cluster
or node: pointing a node at the wrong disk must stop it, not merge two clusters' data.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass
from pathlib import Path

from kraft.properties import PropertiesError, read_properties, write_properties
from kraft.server_config import ServerConfig

META_PROPERTIES = "meta.properties"
# Records an active controller writes first into an empty metadata log (Kafka's name and
# format: a checkpoint file of record batches between snapshot header and footer).
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"


class StorageError(RuntimeError):
    pass


def new_uuid_string() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def parse_uuid_string(text: str) -> uuid.UUID:
    """Kafka's base64url (unpadded, 22 characters) UUID form."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(text) != 22 or len(raw) != 16:
        raise ValueError(f"{text!r} is not a base64url-encoded UUID (22 characters, e.g. from "
                         "'kraftctl random-uuid')")
    return uuid.UUID(bytes=raw)


def uuid_to_string(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str

    def to_properties(self) -> dict[str, str]:
        return {"cluster.id": self.cluster_id, "directory.id": self.directory_id,
                "node.id": str(self.node_id), "version": "1"}


def storage_dirs(config: ServerConfig) -> list[Path]:
    dirs = [Path(d) for d in config.log_dirs]
    meta = Path(config.metadata_log_dir)
    if meta not in dirs:
        dirs.append(meta)
    return dirs


def read_meta(directory: Path) -> MetaProperties | None:
    path = directory / META_PROPERTIES
    if not path.exists():
        return None
    try:
        props = read_properties(path)
        if props.get("version") != "1":
            raise StorageError(f"{path}: unsupported meta.properties version {props.get('version')!r}")
        return MetaProperties(props["cluster.id"], int(props["node.id"]), props.get("directory.id", ""))
    except (KeyError, ValueError, PropertiesError) as exc:
        raise StorageError(f"{path}: unreadable meta.properties ({exc})") from None


def format_storage(config: ServerConfig, cluster_id: str, *, ignore_formatted: bool = False,
                   bootstrap_records=(), initial_voters=None) -> list[Path]:
    """Write meta.properties into every storage directory, and ``bootstrap_records``
    (``--add-scram``'s credentials) into the metadata log directory's bootstrap.checkpoint;
    returns the directories written.  ``initial_voters`` (``kraft.quorum_bootstrap``) go into
    the metadata log as its first snapshot, this node's with the directory's id.

    Refuses (StorageError) when any directory is already formatted, unless
    ``ignore_formatted``, in which case formatted directories are left untouched.
    """
    try:
        parse_uuid_string(cluster_id)
    except ValueError as exc:
        raise StorageError(f"--cluster-id: {exc}") from None
    dirs = storage_dirs(config)
    formatted = [d for d in dirs if read_meta(d) is not None]
    if formatted and not ignore_formatted:
        raise StorageError(
            "already formatted: " + ", ".join(str(d) for d in formatted)
            + " (use --ignore-formatted to leave formatted directories as they are)"
        )
    written = []
    for d in dirs:
        if d in formatted:
            continue
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {d}: {exc.strerror}") from None
        directory_id = new_uuid_string()
        if initial_voters and d == Path(config.metadata_log_dir):
            directory_id = _write_initial_voters(d, config.node_id, initial_voters, directory_id)
        meta = MetaProperties(cluster_id, config.node_id, directory_id)
        write_properties(d / META_PROPERTIES, meta.to_properties(), header=None)
        if bootstrap_records and d == Path(config.metadata_log_dir):
            from kraft.raft.record_codec import encode_snapshot
            from metadata import serde

            (d / BOOTSTRAP_CHECKPOINT).write_bytes(encode_snapshot(serde.encode_all(bootstrap_records)))
        written.append(d)
    return written


def _write_initial_voters(metadata_dir: Path, node_id: int, voters, directory_id: str) -> str:
    """The first snapshot naming ``voters``; returns the metadata directory's id: the one
    ``--initial-controllers`` gave this node, else ``directory_id`` (``--standalone``)."""
    from dataclasses import replace

    from kraft.raft.disk import PARTITION_DIR, snapshot_name
    from kraft.raft.messages import OffsetAndEpoch
    from kraft.raft.record_codec import encode_snapshot, encode_voters_record

    mine = next((v for v in voters if v.node_id == node_id and v.directory_id is not None), None)
    if mine is not None:
        directory_id = uuid_to_string(mine.directory_id)
    own = parse_uuid_string(directory_id)
    voters = [replace(v, directory_id=own) if v.node_id == node_id else v for v in voters]
    # header, VotersRecord, footer: no state-machine records (Kafka's 0-0 bootstrap snapshot)
    directory = metadata_dir / PARTITION_DIR
    directory.mkdir(parents=True, exist_ok=True)
    (directory / snapshot_name(OffsetAndEpoch(0, 0))).write_bytes(
        encode_snapshot([], voters_record=encode_voters_record(voters)))
    return directory_id


def read_bootstrap_records(config: ServerConfig) -> list:
    """The records of the metadata log directory's bootstrap.checkpoint (none without one)."""
    path = Path(config.metadata_log_dir) / BOOTSTRAP_CHECKPOINT
    if not path.exists():
        return []
    from kraft.raft.record_codec import decode_snapshot
    from metadata import serde

    return serde.decode_all(decode_snapshot(path.read_bytes()))


def check_storage(config: ServerConfig) -> str:
    """Verify every storage directory is formatted for this node; returns the cluster id."""
    cluster_ids = set()
    for d in storage_dirs(config):
        meta = read_meta(d)
        if meta is None:
            raise StorageError(f"{d} is not formatted: run 'kraftctl format --config <file> "
                               "--cluster-id <id>' first")
        if meta.node_id != config.node_id:
            raise StorageError(f"{d} belongs to node.id {meta.node_id}, but this node is "
                               f"node.id {config.node_id}")
        cluster_ids.add(meta.cluster_id)
    if len(cluster_ids) > 1:
        raise StorageError(f"storage directories belong to different clusters: {sorted(cluster_ids)}")
    return cluster_ids.pop()
