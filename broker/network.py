"""The trio shell around the sans-IO protocol codec: accept connections, split frames, decode
requests, hand them to a handler, write the responses back in order.

Kafka's connection contract: responses leave in the order requests arrived; a request the
broker cannot parse closes the connection (the client reconnects and retries); an
ApiVersions request at a version the broker does not speak gets a v0 answer carrying
UNSUPPORTED_VERSION and the ApiVersions range (KIP-511), so the client can retry lower.

Theory of operation: a connection is two tasks.  The reader decodes each request and runs
its handler to completion before it reads the next, so requests take effect in arrival
order (an idempotent producer's batches are appended in sequence order).  A handler may
return a :class:`Deferred` instead of a body: the part of the request that has taken effect
is done, and what is left is waiting (an acks=all produce waiting for its followers).  The
writer sends responses in arrival order, awaiting each ``Deferred`` when its turn comes.
So while one produce waits for replication the next one is already appended, and a
follower's fetch carries both: one replication round trip serves many requests instead of
one (Kafka mutes the connection instead, and pays a round trip per request).  At most
``PIPELINE_DEPTH`` responses wait; beyond that the reader stops reading, so a client
cannot make the broker hold unbounded work.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

import trio

from kraft.protocol import rpc
from kraft.protocol.errors import ProtocolError, UnsupportedVersion
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder

log = logging.getLogger(__name__)

RECEIVE_BYTES = 256 * 1024
PIPELINE_DEPTH = 64  # responses of one connection waiting to be sent, at most


class Deferred:
    """A response still being made: ``finish()`` returns its body once the wait is over."""

    __slots__ = ("finish",)

    def __init__(self, finish: Callable[[], Awaitable[dict]]):
        self.finish = finish


# A handler returns the response body, a Deferred body, or None for requests that get no
# response (Produce with acks=0).
Handler = Callable[[rpc.Request], Awaitable["dict | Deferred | None"]]

_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)


class KafkaConnection:
    """One client connection: reads frames, dispatches, answers in order."""

    def __init__(self, stream: trio.abc.Stream, handler: Handler, *, supported=None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.stream = stream
        self.handler = handler
        self.supported = supported  # api key -> Versions this node serves
        self.decoder = FrameDecoder(max_frame_bytes)
        self._unsent = 0  # answers handed to the writer and not yet sent

    async def serve(self) -> None:
        # The writer's queue holds encoded answers (bytes) and (request, Deferred) pairs.
        send, receive = trio.open_memory_channel(PIPELINE_DEPTH)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_answers, receive, nursery.cancel_scope)
                async with send:
                    await self._read_requests(send)
        finally:
            await trio.aclose_forcefully(self.stream)

    async def _read_requests(self, answers: trio.MemorySendChannel) -> None:
        try:
            while True:
                data = await self.stream.receive_some(RECEIVE_BYTES)
                if not data:
                    return
                self.decoder.receive_data(data)
                while (payload := self.decoder.next_frame()) is not None:
                    if not await self._handle_frame(payload, answers):
                        return
        except ProtocolError as exc:  # frame too large
            log.info("closing connection: %s", exc)
        except _GONE:
            pass

    async def _handle_frame(self, payload: bytes, answers: trio.MemorySendChannel) -> bool:
        """Handle one request; False closes the connection."""
        try:
            request = rpc.decode_request(payload, self.supported)
        except UnsupportedVersion as exc:
            if exc.api_key == rpc.API_KEYS["ApiVersions"]:
                top = (self.supported or {}).get(exc.api_key) or rpc.codec.versions_of("ApiVersions")
                body = rpc.unsupported_api_versions_response(min(top.hi, 4))
                await self._answer(answers, rpc.encode_response("ApiVersions", 0, exc.correlation_id, body))
                return True
            log.info("closing connection: %s", exc)
            return False
        except ProtocolError as exc:
            log.info("closing connection: malformed request: %s", exc)
            return False
        try:
            body = await self.handler(request)
        except Exception:  # a bug must cost this connection, never the listener
            _log_failure(request)
            return False
        if body is None:
            return True
        if isinstance(body, Deferred):
            await self._answer(answers, (request, body))
        else:
            await self._answer(answers, _encode(request, body))
        return True

    async def _answer(self, answers: trio.MemorySendChannel, item: bytes | tuple) -> None:
        if self._unsent == 0 and isinstance(item, bytes):
            # Nothing ahead of it and nothing to wait for: send it from here, as a
            # one-request-at-a-time server would (the writer is idle: no interleaving).
            await self.stream.send_all(item)
            return
        self._unsent += 1
        await answers.send(item)

    async def _write_answers(self, answers: trio.MemoryReceiveChannel,
                             connection: trio.CancelScope) -> None:
        try:
            async with answers:
                async for item in answers:
                    if not isinstance(item, bytes):
                        request, deferred = item
                        try:
                            item = _encode(request, await deferred.finish())
                        except Exception:
                            _log_failure(request)
                            connection.cancel()
                            return
                    await self.stream.send_all(item)
                    self._unsent -= 1
        except _GONE:
            connection.cancel()  # the peer is gone: stop reading too


def _encode(request: rpc.Request, body: dict) -> bytes:
    return rpc.encode_response(request.api, request.version, request.header.correlation_id, body)


def _log_failure(request: rpc.Request) -> None:
    log.exception("closing connection: %s v%d (correlation id %d) failed", request.api,
                  request.version, request.header.correlation_id)


async def serve_kafka(handler: Handler, host: str, port: int, *, supported=None,
                      task_status=trio.TASK_STATUS_IGNORED,
                      max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
    """Listen on host:port and serve Kafka connections until cancelled.

    ``task_status.started`` receives the bound port (useful with port 0).
    """
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]

    async def on_connection(stream):
        await KafkaConnection(stream, handler, supported=supported,
                              max_frame_bytes=max_frame_bytes).serve()

    async with trio.open_nursery() as nursery:
        task_status.started(bound)
        await nursery.start(trio.serve_listeners, on_connection, listeners)
