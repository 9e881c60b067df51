"""Size-prefixed framing: every Kafka request and response is ``int32 size`` + payload.

``FrameDecoder`` is sans-IO in the h11 style: feed it bytes with ``receive_data`` and take
whole frames with ``next_frame`` until it returns ``None`` (more data needed).
"""

from __future__ import annotations

import struct

from kraft.protocol.errors import FrameTooLarge

SIZE = struct.Struct(">i")
_API_KEY_VERSION = struct.Struct(">hh")  # a request header's first fields

# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


def frame(payload) -> bytes:
    """Prefix ``payload`` with its int32 size."""
    return SIZE.pack(len(payload)) + bytes(payload)


class FrameDecoder:
    """Splits a byte stream into frames; rejects sizes over ``max_frame_bytes``."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0

    def receive_data(self, data) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos

    def has_frame(self) -> bool:
        """A whole frame is buffered (``next_frame`` would return it, or raise)."""
        available = len(self._buf) - self._pos
        return available >= 4 and available - 4 >= SIZE.unpack_from(self._buf, self._pos)[0]

    def next_request_is(self, api_key: int, api_version: int) -> bool:
        """A whole frame is buffered, of a size ``next_frame`` takes, and it is a request of
        this API at this version (its header's first fields)."""
        buf, pos = self._buf, self._pos
        available = len(buf) - pos
        if available < 8:
            return False
        (size,) = SIZE.unpack_from(buf, pos)
        return (4 <= size <= self.max_frame_bytes and available - 4 >= size
                and _API_KEY_VERSION.unpack_from(buf, pos + 4) == (api_key, api_version))

    def next_frame(self) -> bytes | None:
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 4:
            self._compact()
            return None
        (size,) = SIZE.unpack_from(buf, pos)
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(
                f"frame size {size} is outside [0, {self.max_frame_bytes}] "
                "(socket.request.max.bytes)"
            )
        if len(buf) - pos - 4 < size:
            self._compact()
            return None
        self._pos = pos + 4 + size
        return bytes(buf[pos + 4 : pos + 4 + size])

    def _compact(self) -> None:
        # Drop consumed bytes only when waiting for more, so a burst of small frames is not
        # an O(n^2) series of buffer moves.
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
