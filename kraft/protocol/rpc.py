"""Requests and responses as they cross the wire: header + body inside one frame.

Header versions follow Kafka: a request uses header v2 when its API version is flexible and
v1 otherwise (v0 only for ControlledShutdown v0); a response uses header v1 when flexible and
v0 otherwise — except ApiVersions, whose response header is always v0 so that a client that
does not yet know the broker's versions can read it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from kraft.protocol import codec
from kraft.protocol.error_codes import ErrorCode
from kraft.protocol.errors import MalformedMessage, UnknownApiKey, UnsupportedVersion
from kraft.protocol.framing import SIZE as _SIZE, frame
from kraft.protocol.primitives import Reader, SplicingBuffer
from kraft.protocol.tables import TABLE

_HEADER_START = struct.Struct(">hhi")  # api key, api version, correlation id
API_NAMES: dict[int, str] = {key: name for name, key in TABLE.apis.items()}
API_KEYS: dict[str, int] = dict(TABLE.apis)


# Not frozen: a frozen dataclass's construction costs three times a plain one's, and
# these are built for every request.  Treat them as read-only all the same (a Request's
# body makes it unhashable either way).
@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(slots=True)
class Request:
    header: RequestHeader
    api: str  # "Produce", "Fetch", ...
    body: dict
    # Who sent it (Kafka's RequestContext): the connection's authenticated principal and
    # the client's address, which authorization decides by.
    principal: str = "User:ANONYMOUS"
    client_host: str = ""
    # Which connection it came on (Kafka's RequestContext.connectionId): the controller
    # ties a broker's heartbeats to it, to learn early when that broker's process is gone.
    connection_id: str = ""

    @property
    def version(self) -> int:
        return self.header.api_version


@lru_cache(maxsize=None)
def request_header_version(api: str, version: int) -> int:
    if api == "ControlledShutdown" and version == 0:
        return 0
    return 2 if codec.is_flexible(api, "request", version) else 1


@lru_cache(maxsize=None)
def response_header_version(api: str, version: int) -> int:
    if api == "ApiVersions":
        return 0
    return 1 if codec.is_flexible(api, "response", version) else 0


def peek_header(payload) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): the part of every request header that no
    version changes, readable even when the rest cannot be parsed."""
    if len(payload) < _HEADER_START.size:
        Reader(payload).skip(_HEADER_START.size)  # raises MalformedMessage, saying what is missing
    return _HEADER_START.unpack_from(payload)


_PLANS: dict[tuple[int, int], tuple] = {}


def _request_plan(api_key: int, api_version: int):
    """``(api, header reader, body reader)`` of a request the table has; None when it does
    not have that version.  Worked out once per version the table has (it was a tenth of a
    small Produce's decoding); other keys are not kept, so a client cannot grow the map."""
    plan = _PLANS.get((api_key, api_version))
    if plan is not None:
        return plan
    api = API_NAMES.get(api_key)
    if api is None or api_version not in codec.versions_of(api):
        return None
    header_version = request_header_version(api, api_version)
    plan = _PLANS[(api_key, api_version)] = (
        api, codec.reader("RequestHeader", "header", header_version),
        codec.reader(api, "request", api_version))
    return plan


def decode_request(payload, supported=None, principal: str = "User:ANONYMOUS", client_host: str = "",
                   connection_id: str = "") -> Request:
    """Parse a request frame's payload.

    ``supported`` optionally maps api key -> Versions the node serves (narrower than the
    table); a version outside it raises UnsupportedVersion carrying the correlation id.
    Raises UnknownApiKey, UnsupportedVersion or MalformedMessage.
    """
    api_key, api_version, correlation_id = peek_header(payload)
    plan = _request_plan(api_key, api_version)
    if supported is not None:
        versions = supported.get(api_key)
        if versions is None or api_version not in versions:
            plan = None
    if plan is None:
        api = API_NAMES.get(api_key)
        if api is None:
            raise UnknownApiKey(f"unknown api key {api_key}")
        versions = codec.versions_of(api) if supported is None else supported.get(api_key)
        raise UnsupportedVersion(
            f"{api} v{api_version} is not supported (supported: {versions})",
            api_key=api_key, api_version=api_version, correlation_id=correlation_id,
        )
    api, read_header, read_body = plan
    header, pos = read_header(payload, 0, len(payload))
    # Trailing bytes after a request body are ignored, as Kafka's broker ignores them: real
    # clients send them (librdkafka's all-topics Metadata v9+ request leaves three bytes of
    # its 4-byte array-count placeholder behind the body).
    body = read_body(memoryview(payload)[pos:], 0, len(payload) - pos)[0]
    return Request(
        RequestHeader(api_key, api_version, correlation_id, header["client_id"]), api, body, principal, client_host,
        connection_id,
    )


def encode_request(api: str, version: int, correlation_id: int, body: dict,
                   client_id: str | None = "kraft") -> bytes:
    """A whole framed request."""
    out = bytearray()
    header = {
        "request_api_key": API_KEYS[api],
        "request_api_version": version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    codec.encode_into(out, "RequestHeader", "header", request_header_version(api, version), header)
    codec.encode_into(out, api, "request", version, body)
    return frame(out)


# The response header's two versions, packed directly (every response has one): v0 is the
# correlation id, v1 adds an empty tagged-field section.  A test holds them to the table.
_RESPONSE_HEADER_V0 = struct.Struct(">i")
_RESPONSE_HEADER_V1 = struct.Struct(">iB")


def response_header(version: int, correlation_id: int) -> bytes:
    """The encoded ResponseHeader of ``version`` (0 or 1)."""
    if version:
        return _RESPONSE_HEADER_V1.pack(correlation_id, 0)
    return _RESPONSE_HEADER_V0.pack(correlation_id)


def _encode_framed(out: bytearray, api: str, version: int, correlation_id: int, body: dict) -> None:
    """Room for the frame's size (filled in by the caller once it is known), the header, the
    body: the bytes are then copied once, into what is sent."""
    out += bytes(4)
    out += response_header(response_header_version(api, version), correlation_id)
    codec.encode_into(out, api, "response", version, body)


def encode_response(api: str, version: int, correlation_id: int, body: dict) -> bytes:
    """A whole framed response."""
    out = bytearray()
    _encode_framed(out, api, version, correlation_id, body)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_response_spliced(api: str, version: int, correlation_id: int, body: dict) -> list:
    """A whole framed response as pieces to send in order: ``bytes``, and the body's
    ``SplicedRecords`` where they go (the size prefix counts them).  A body without any is
    one piece, the same bytes as ``encode_response``."""
    out = SplicingBuffer()
    _encode_framed(out, api, version, correlation_id, body)
    _SIZE.pack_into(out, 0, len(out) - 4 + sum(records.size for _, records in out.holes))
    if not out.holes:
        return [bytes(out)]
    pieces: list = []
    start = 0
    for at, records in out.holes:
        pieces.append(bytes(memoryview(out)[start:at]))
        pieces.append(records)
        start = at
    pieces.append(bytes(memoryview(out)[start:]))
    return [p for p in pieces if not isinstance(p, bytes) or p]


def decode_response(api: str, version: int, payload) -> tuple[int, dict]:
    """(correlation_id, body) of a response frame's payload."""
    header, pos = codec.decode_prefix("ResponseHeader", "header",
                                      response_header_version(api, version), payload)
    body = codec.decode(api, "response", version, memoryview(payload)[pos:])
    return header["correlation_id"], body


def error_response(api: str, version: int, error_code: int) -> dict | None:
    """A response to ``api`` at ``version`` that carries ``error_code`` in its top-level
    error field and defaults elsewhere (Kafka's ``getErrorResponse`` for a failed request);
    None when the response has no top-level error code at that version, so no answer can
    say "this request failed" (the connection must close instead)."""
    spec = codec.spec_for(api, "response")
    fields = [f for f in spec.fields if f.key == "error_code" and f.tag is None and version in f.versions]
    if not fields:
        return None
    body = codec.default_message(api, "response")
    body["error_code"] = error_code
    return body


def unsupported_api_versions_response(api_versions_max: int) -> dict:
    """The v0 ApiVersions answer to a version this node does not speak (KIP-511): error 35
    and the ApiVersions range, so the client can retry at a version both sides know."""
    return {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": API_KEYS["ApiVersions"], "min_version": 0,
                      "max_version": api_versions_max}],
    }


__all__ = [
    "API_KEYS", "API_NAMES", "MalformedMessage", "error_response", "Request", "RequestHeader",
    "decode_request", "decode_response", "encode_request", "encode_response", "peek_header",
    "request_header_version", "response_header_version", "unsupported_api_versions_response",
]
