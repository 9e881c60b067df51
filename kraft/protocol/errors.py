"""Typed failures of the wire protocol layer.

Every way a peer's bytes can be wrong ends in one of these, never in a bare IndexError or
struct.error: the server maps ``error_code`` into a response where Kafka would answer, and
closes the connection where Kafka would (``disconnect`` is True).
"""

from __future__ import annotations

from kraft.protocol.error_codes import ErrorCode


class ProtocolError(Exception):
    """Base class: bytes from a peer that cannot be understood."""

    error_code: ErrorCode = ErrorCode.INVALID_REQUEST
    disconnect: bool = True


class MalformedMessage(ProtocolError):
    """Truncated data, impossible lengths, bad UTF-8, trailing bytes, a varint too long."""


class FrameTooLarge(ProtocolError):
    """A size prefix above ``socket.request.max.bytes`` (or negative)."""


class UnknownApiKey(ProtocolError):
    """An api key this node has no schema for; Kafka closes the connection."""

    error_code = ErrorCode.UNSUPPORTED_VERSION


class UnsupportedVersion(ProtocolError):
    """A known api at a version outside its supported range (error 35)."""

    error_code = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, message: str, *, api_key: int, api_version: int, correlation_id: int = -1):
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
