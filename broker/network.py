"""The trio shell around the sans-IO protocol codec: accept connections, split frames, decode
requests, hand them to a handler, write the responses back in order.

Kafka's connection contract: responses leave in the order requests arrived; a request the
broker cannot parse closes the connection (the client reconnects and retries); an
ApiVersions request at a version the broker does not speak gets a v0 answer carrying
UNSUPPORTED_VERSION and the ApiVersions range (KIP-511), so the client can retry lower.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

import trio

from kraft.protocol import rpc
from kraft.protocol.errors import ProtocolError, UnsupportedVersion
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder

log = logging.getLogger(__name__)

# A handler returns the response body, or None for requests that get no response
# (Produce with acks=0).
Handler = Callable[[rpc.Request], Awaitable[dict | None]]

RECEIVE_BYTES = 256 * 1024


class KafkaConnection:
    """One client connection: reads frames, dispatches, answers."""

    def __init__(self, stream: trio.abc.Stream, handler: Handler, *, supported=None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.stream = stream
        self.handler = handler
        self.supported = supported  # api key -> Versions this node serves
        self.decoder = FrameDecoder(max_frame_bytes)

    async def serve(self) -> None:
        try:
            while True:
                data = await self.stream.receive_some(RECEIVE_BYTES)
                if not data:
                    return
                self.decoder.receive_data(data)
                while (payload := self.decoder.next_frame()) is not None:
                    if not await self._handle_frame(payload):
                        return
        except ProtocolError as exc:  # frame too large
            log.info("closing connection: %s", exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        finally:
            await trio.aclose_forcefully(self.stream)

    async def _handle_frame(self, payload: bytes) -> bool:
        """Handle one request; False closes the connection."""
        try:
            request = rpc.decode_request(payload, self.supported)
        except UnsupportedVersion as exc:
            if exc.api_key == rpc.API_KEYS["ApiVersions"]:
                top = (self.supported or {}).get(exc.api_key) or rpc.codec.versions_of("ApiVersions")
                body = rpc.unsupported_api_versions_response(min(top.hi, 4))
                await self.stream.send_all(rpc.encode_response("ApiVersions", 0, exc.correlation_id, body))
                return True
            log.info("closing connection: %s", exc)
            return False
        except ProtocolError as exc:
            log.info("closing connection: malformed request: %s", exc)
            return False
        body = await self.handler(request)
        if body is None:
            return True
        out = rpc.encode_response(request.api, request.version, request.header.correlation_id, body)
        await self.stream.send_all(out)
        return True


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
