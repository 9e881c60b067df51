"""Metadata-log records as Kafka writes them (its ``MetadataRecordSerde``).

A record of ``__cluster_metadata`` has a null key; its value is::

    uvarint frame version (always 1)
    uvarint record type   (the api key of the record's schema, e.g. 2 for TopicRecord)
    uvarint record version
    the record body, encoded by the schema table's codec (every metadata record is flexible)

A decoded record is a ``MetadataRecord``: the schema name, the version, and the body as a
dict keyed by snake_case field names (every field present, as the codec decodes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kraft.protocol import codec
from kraft.protocol import primitives as p
from kraft.protocol.errors import MalformedMessage
from kraft.protocol.tables import TABLE

FRAME_VERSION = 1

# record type id -> schema name, for every metadata record the schema table knows
RECORD_NAMES: Mapping[int, str] = {
    spec.api_key: spec.name for (name, kind), spec in TABLE.messages.items() if kind == "metadata"
}
RECORD_TYPES: Mapping[str, int] = {name: key for key, name in RECORD_NAMES.items()}

# The version kraft writes for each record type.  PartitionRecord and PartitionChangeRecord
# stay at 0 (version 1 adds per-replica log directories, which kraft does not track);
# RegisterBrokerRecord and BrokerRegistrationChangeRecord need 1 for controlled shutdown.
WRITE_VERSIONS: Mapping[str, int] = {
    "RegisterBrokerRecord": 1,
    "BrokerRegistrationChangeRecord": 1,
}


class MetadataSerdeError(MalformedMessage):
    """A metadata-log record value that cannot be decoded (or a record that cannot be encoded)."""


class UnknownRecordType(MetadataSerdeError):
    def __init__(self, record_type):
        super().__init__(f"unknown metadata record type {record_type!r}")
        self.record_type = record_type


class UnsupportedRecordVersion(MetadataSerdeError):
    def __init__(self, name: str, version: int):
        spec = TABLE.get(name, "metadata")
        super().__init__(f"{name} has no version {version} (valid: {spec.versions})")
        self.name = name
        self.version = version


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """One metadata-log record: schema ``name``, ``version`` and ``data`` (a field dict).

    Treat ``data`` as read-only: records are shared between the controller's pending state,
    the Raft log and the image they build.
    """

    name: str
    version: int
    data: dict = field(compare=True)

    @property
    def record_type(self) -> int:
        return RECORD_TYPES[self.name]

    def __post_init__(self):
        if self.name not in RECORD_TYPES:
            raise UnknownRecordType(self.name)
        if self.version not in TABLE.get(self.name, "metadata").versions:
            raise UnsupportedRecordVersion(self.name, self.version)


def make(name: str, /, _version: int | None = None, **fields: Any) -> MetadataRecord:
    """A record ``name`` with ``fields`` (others at their defaults), at kraft's write version."""
    version = _version
    if name not in RECORD_TYPES:
        raise UnknownRecordType(name)
    data = codec.default_message(name, "metadata")
    unknown = set(fields) - set(data)
    if unknown:
        raise ValueError(f"{name} has no fields {sorted(unknown)}")
    data.update(fields)
    return MetadataRecord(name, WRITE_VERSIONS.get(name, 0) if version is None else version, data)


def encode(record: MetadataRecord) -> bytes:
    """The value bytes of ``record`` in the metadata log."""
    out = bytearray()
    p.write_uvarint(out, FRAME_VERSION)
    p.write_uvarint(out, record.record_type)
    p.write_uvarint(out, record.version)
    try:
        codec.encode_into(out, record.name, "metadata", record.version, record.data)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise MetadataSerdeError(f"cannot encode {record.name} v{record.version}: {e}") from e
    return bytes(out)


def decode(value) -> MetadataRecord:
    """Decode one metadata-log record value; raises MetadataSerdeError (or a subclass)."""
    if value is None:
        raise MetadataSerdeError("a metadata record must have a value")
    r = p.Reader(value)
    try:
        frame = r.uvarint()
        record_type = r.uvarint()
        version = r.uvarint()
    except MalformedMessage as e:
        raise MetadataSerdeError(f"bad metadata record header: {e}") from e
    if frame != FRAME_VERSION:
        raise MetadataSerdeError(f"unsupported metadata record frame version {frame}")
    name = RECORD_NAMES.get(record_type)
    if name is None:
        raise UnknownRecordType(record_type)
    if version not in TABLE.get(name, "metadata").versions:
        raise UnsupportedRecordVersion(name, version)
    try:
        data = codec.decode(name, "metadata", version, memoryview(value)[r.pos:])
    except MetadataSerdeError:
        raise
    except MalformedMessage as e:
        raise MetadataSerdeError(f"{name} v{version}: {e}") from e
    return MetadataRecord(name, version, data)


def encode_all(records: Iterable[MetadataRecord]) -> list[bytes]:
    return [encode(r) for r in records]


def decode_all(values: Iterable) -> list[MetadataRecord]:
    return [decode(v) for v in values]
