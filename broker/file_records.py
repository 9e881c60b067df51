"""Fetch responses whose record bytes go from the segment file to the socket with
``os.sendfile`` (zero copy), as Kafka's ``FileRecords.writeTo``.

A fetch reads only where its batches are (``Log.read(load_bytes=False)``) and puts a
:class:`FileRecords` in the response; the codec leaves a hole for it
(``rpc.encode_response_spliced``) and :func:`send_response` writes the framing and the
other fields from Python and each hole with ``sendfile``.  On a stream that is not a plain
socket (TLS) the holes are read (``pread``) and the response sent as one copy, as before.

A ``FileRecords`` holds a descriptor of its own, opened when the fetch read the log, so a
segment deleted (retention, cleaning) or its cached descriptor closed before the response
leaves still sends the bytes that were read.  A segment truncated meanwhile (a follower
truncating to its leader) is shorter than the hole: the response cannot be completed, and
the connection closes (:class:`ShortFile`); the client reconnects and fetches again.
"""

from __future__ import annotations

import logging
import os

import trio

from kraft.protocol.primitives import SplicedRecords

log = logging.getLogger(__name__)

# Bytes per sendfile call at most: a large hole yields to other tasks between calls.
SENDFILE_CHUNK_BYTES = 1 << 20
# FileRecords open at once in this process, across every response not yet sent.  Past it
# a fetch reads its records into memory: one consumer fetch over 20,000 partitions held a
# descriptor for each, the node ran out of them, and its Raft log could not reopen a
# segment (EMFILE) and the node died.
MAX_OPEN = 256


class ZeroCopyStats:
    """Record bytes of fetch responses by how they left: ``sendfile`` (calls and bytes), or
    copied through Python's buffers (``copied_bytes``: read into memory, then sent)."""

    __slots__ = ("sendfile_calls", "sendfile_bytes", "copied_bytes")

    def __init__(self):
        self.sendfile_calls = self.sendfile_bytes = self.copied_bytes = 0


STATS = ZeroCopyStats()


class ShortFile(ConnectionError):
    """The segment file ended before the hole did: it was truncated after the read."""


class FileRecords(SplicedRecords):
    """``size`` bytes at ``position`` in a segment file, through a descriptor of its own
    (closed once sent, or when dropped)."""

    __slots__ = ("fd", "position")
    open_count = 0  # in this process (see MAX_OPEN)

    def __init__(self, path: os.PathLike, position: int, size: int, segment_fd: int = -1):
        """``segment_fd``: the segment's own descriptor, duplicated instead of opening
        ``path`` again (``ReadResult.fd``)."""
        super().__init__(size)
        self.position = position
        self.fd: int | None = None  # so __del__ has nothing to close if the open fails
        self.fd = os.dup(segment_fd) if segment_fd >= 0 else os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        FileRecords.open_count += 1

    @staticmethod
    def available() -> bool:
        """Whether a fetch may open another (``MAX_OPEN``)."""
        return FileRecords.open_count < MAX_OPEN

    def read(self) -> bytes:
        """The bytes, copied into memory (for a stream sendfile cannot write to)."""
        data = os.pread(self.fd, self.size, self.position)
        if len(data) != self.size:
            raise ShortFile(f"segment file truncated: {len(data)} of {self.size} bytes left")
        STATS.copied_bytes += self.size
        return data

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            FileRecords.open_count -= 1
            os.close(fd)

    def __del__(self):  # a response dropped unsent (its connection closed)
        self.close()


def can_sendfile(stream: trio.abc.Stream) -> bool:
    """Whether ``stream`` writes straight to a socket (not TLS)."""
    return isinstance(stream, trio.SocketStream)


async def send_response(stream: trio.abc.Stream, pieces: list, use_sendfile: bool) -> None:
    """Send the pieces of ``rpc.encode_response_spliced`` in order, closing every hole's
    descriptor whatever happens."""
    try:
        if not use_sendfile:
            await stream.send_all(b"".join(p if isinstance(p, bytes) else p.read() for p in pieces))
            return
        # Straight to the socket, piece after piece, without giving the loop back between
        # them (each await of send_all is a scheduling round: a one-record answer took
        # three, on the acks=all path twice over); only a full socket buffer waits.
        sock = stream.socket
        out_fd = sock.fileno()
        for piece in pieces:
            if isinstance(piece, bytes):
                await _write(sock, out_fd, piece)
            else:
                await _sendfile(sock, out_fd, piece)
        await trio.lowlevel.cancel_shielded_checkpoint()  # let other tasks run between responses
    except ShortFile as exc:
        log.warning("closing a connection: a fetch response cannot be completed: %s", exc)
        raise
    finally:
        for piece in pieces:
            if isinstance(piece, FileRecords):
                piece.close()


async def _write(sock, out_fd: int, data: bytes) -> None:
    """Write all of ``data`` to the (non-blocking) socket, waiting only when it is full."""
    view = memoryview(data)
    while view:
        try:
            sent = os.write(out_fd, view)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        except OSError as exc:
            raise trio.BrokenResourceError(f"socket write failed: {exc}") from exc
        view = view[sent:]


async def _sendfile(sock, out_fd: int, records: FileRecords) -> None:
    """Wait until the socket can take more, sendfile, repeat until the hole is filled."""
    position, left = records.position, records.size
    while left:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            sent = os.sendfile(out_fd, records.fd, position, min(left, SENDFILE_CHUNK_BYTES))
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        if sent == 0:
            raise ShortFile(f"segment file truncated: {left} of {records.size} bytes missing")
        STATS.sendfile_calls += 1
        STATS.sendfile_bytes += sent
        position += sent
        left -= sent
