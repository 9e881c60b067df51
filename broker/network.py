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

Produce requests that arrive pipelined (a producer sending one record per request keeps
hundreds in flight) are decoded as a burst of up to ``PRODUCE_BURST`` and handed to
``produce_burst`` together, which appends the batches of consecutive one-partition
requests as one log write; each request still gets its own answer, the one it would have
got alone, in arrival order, and the answers leave in one send.

Failures stay inside their request: whatever a handler raises, and a response that cannot
be encoded (a request's data echoed into a field that cannot hold it), is logged in one line
(API, version, client id) and answered with UNKNOWN_SERVER_ERROR where the response has a
top-level error code, or else costs the connection.  Nothing a client sends reaches the
listener, which is the node's: one bad request must never stop a node.  The limits Kafka
puts on connections (``broker.connection_limits``) bound what many clients can hold.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import logging
import math
import time
from typing import TYPE_CHECKING, Awaitable, Callable

import trio

from broker.connection_limits import ConnectionLimits, ConnectionQuotas
from broker.deferred import Deferred
from broker.file_records import can_sendfile, send_response
from kraft.protocol import rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.protocol.errors import ProtocolError, UnsupportedVersion
from kraft.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder
from kraft.protocol.produce_template import ProduceTemplates
from kraft.server_config import ListenError

if TYPE_CHECKING:
    from broker.client_quotas import ClientQuotaEnforcer
    from kraft.metrics.stats import RequestMetrics, RequestTimer

log = logging.getLogger(__name__)

RECEIVE_BYTES = 256 * 1024
PIPELINE_DEPTH = 64  # responses of one connection waiting to be sent, at most
PRODUCE_BURST = 64  # pipelined Produce requests handled together, at most (produce_burst)
# ... and their frames' bytes, at most: appending together saves per request, not per byte,
# and large requests would only hold more memory at once
PRODUCE_BURST_BYTES = 1 << 20


# A handler returns the response body, a Deferred body, or None for requests that get no
# response (Produce with acks=0).
Handler = Callable[[rpc.Request], Awaitable["dict | Deferred | None"]]
# A burst handler takes consecutive requests and returns what the handler would have
# returned (or raised) for each, in order, or None to have them handled one by one.
BurstHandler = Callable[[list[rpc.Request]], Awaitable["list | None"]]

_GONE = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)


class KafkaConnection:
    """One client connection: reads frames, dispatches, answers in order."""

    def __init__(self, stream: trio.abc.Stream, handler: Handler, *, supported=None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, idle_timeout_s: float = math.inf,
                 peer: str = "?", principal: str = "User:ANONYMOUS", authenticator=None,
                 metrics: RequestMetrics | None = None, client_quotas: ClientQuotaEnforcer | None = None,
                 on_close: Callable[[str], None] | None = None, produce_burst: BurstHandler | None = None):
        self.stream = stream
        self.handler = handler
        # Pipelined Produce requests handled together (_handle_produce_burst), or None.
        self.produce_burst = produce_burst
        self.supported = supported  # api key -> Versions this node serves
        self.decoder = FrameDecoder(max_frame_bytes)
        self.idle_timeout_s = idle_timeout_s
        self.peer = peer
        # Who the client is (for authorization, when there is some): from its TLS
        # certificate or SASL authentication (broker.network_security).
        self.principal = principal
        self._unsent = 0  # answers handed to the writer and not yet sent
        # Produce answers held back while more requests of the same burst are buffered, to
        # leave in one send: a producer sending one record per request (librdkafka with
        # batch.num.messages=1 pipelines hundreds) would otherwise cost one send each.
        self._held: list[tuple[bytes, RequestTimer | None]] = []
        # Frames go to the SASL authenticator until it completes, then to _handle_frame.
        self._on_frame = self._handle_frame if authenticator is None else functools.partial(
            authenticator.frame, self)
        # Request metrics (kraft.metrics): when the bytes being decoded arrived, and this
        # task's slot for the timer of the request being handled.
        self.metrics = metrics
        self._received_at = 0.0
        # Since when the connection waits for bytes (time.monotonic()), None while it reads
        # or handles: what connections.max.idle.ms is measured from (_expire_idle).
        self._waiting_since: float | None = None
        self._timer_slot: list | None = None
        self.client_quotas = client_quotas  # broker.client_quotas: throttles and mutes
        # Fetch record bytes leave by sendfile on a plain socket, copied on TLS
        # (broker.file_records).
        self._sendfile = can_sendfile(stream)
        self.connection_id = _connection_id(stream)
        self._on_close = on_close  # told this connection's id once it is closed
        # Alike Produce requests and answers decoded and encoded from templates
        # (kraft.protocol.produce_template): a producer's pipeline of one-record requests.
        self._templates = ProduceTemplates()

    def authenticated(self) -> None:
        """SASL is done: from now on every frame is an ordinary request."""
        self._on_frame = self._handle_frame

    async def serve(self) -> None:
        # The writer's queue holds (answer, RequestTimer or None) pairs, the answer encoded
        # (bytes, or a list of pieces holding record holes) or a (request, Deferred) pair.
        send, receive = trio.open_memory_channel(PIPELINE_DEPTH)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_answers, receive, nursery.cancel_scope)
                watch = trio.CancelScope()
                with trio.CancelScope() as reading:
                    if self.idle_timeout_s != math.inf:
                        nursery.start_soon(self._expire_idle, reading, watch)
                    async with send:  # closed: the writer sends what is queued, then ends
                        await self._read_requests(send)
                watch.cancel()
                if reading.cancelled_caught:  # connections.max.idle.ms passed without a byte
                    log.info("closing connection from %s: idle for connections.max.idle.ms "
                             "(%d bytes of a request unread)", self.peer, self.decoder.buffered)
        finally:
            await trio.aclose_forcefully(self.stream)
            if self._on_close is not None:
                self._on_close(self.connection_id)

    async def _read_requests(self, answers: trio.MemorySendChannel) -> None:
        if self.metrics is not None:
            self._timer_slot = self.metrics.connection_slot()
        try:
            while True:
                self._waiting_since = time.monotonic()
                data = await self.stream.receive_some(RECEIVE_BYTES)
                self._waiting_since = None
                if not data:
                    return
                self._received_at = time.monotonic()
                self.decoder.receive_data(data)
                while (payload := self.decoder.next_frame()) is not None:
                    if not await self._on_frame(payload, answers):
                        await self._send_held()  # the requests before the bad one are answered
                        return
                await self._send_held()  # the burst is over (its last request got no answer)
        except ProtocolError as exc:  # frame too large
            log.info("closing connection from %s: %s", self.peer, exc)
            with contextlib.suppress(*_GONE):
                await self._send_held()
        except _GONE:
            pass

    async def _expire_idle(self, reading: trio.CancelScope, watch: trio.CancelScope) -> None:
        """Cancel ``reading`` once the connection has waited connections.max.idle.ms for a
        byte with no answer unsent.  A task of its own that wakes about once per timeout,
        not a deadline around every read: a cancel scope costs about 9 us of the loop, and
        a one-record acks=all round trip waits for bytes several times on each node.  A
        connection busy when the watch wakes is looked at again a quarter of the timeout
        later, so it closes after one to one and a quarter timeouts of silence.  ``watch``
        ends the watch when reading ends otherwise."""
        with watch:
            while True:
                since = self._waiting_since
                left = self.idle_timeout_s / 4
                if since is not None and not self._unsent:
                    left = since + self.idle_timeout_s - time.monotonic()
                    if left <= 0:
                        reading.cancel()
                        return
                await trio.sleep(left)

    def _decode(self, payload: bytes) -> rpc.Request:
        """The request ``payload`` holds (decode_request's errors), from a template when it
        matches one."""
        templates = self._templates
        if templates.requests:
            request = templates.decode(payload, self.principal, self.peer, self.connection_id)
            if request is not None:
                return request
        request = rpc.decode_request(payload, self.supported, self.principal, self.peer, self.connection_id)
        if request.api == "Produce":
            templates.learn(request)
        return request

    async def _handle_frame(self, payload: bytes, answers: trio.MemorySendChannel) -> bool:
        """Handle one request; False closes the connection."""
        try:
            request = self._decode(payload)
        except UnsupportedVersion as exc:
            if exc.api_key == rpc.API_KEYS["ApiVersions"]:
                top = (self.supported or {}).get(exc.api_key) or rpc.codec.versions_of("ApiVersions")
                body = rpc.unsupported_api_versions_response(min(top.hi, 4))
                await self._answer(answers, rpc.encode_response("ApiVersions", 0, exc.correlation_id, body))
                return True
            log.info("closing connection from %s: %s", self.peer, exc)
            return False
        except ProtocolError as exc:
            log.info("closing connection from %s: malformed %s: %s", self.peer, _describe(payload), exc)
            return False
        if self._held and request.api != "Produce":
            await self._send_held()  # this one may wait (a long poll): answer the others now
        timer = self._begin(request, len(payload))
        quota = self.client_quotas.begin(request, self.principal) if self.client_quotas is not None else None
        if (request.api == "Produce" and quota is None and self.produce_burst is not None
                and self.decoder.next_request_is(request.header.api_key, request.version)):
            return await self._handle_produce_burst(request, len(payload), timer, answers)
        if timer is not None:
            self._timer_slot[0] = timer
        try:
            body = await self.handler(request)
            if quota is not None:
                body = await quota.finish(body, len(payload))
        except Exception as exc:  # a bug must cost this request, never the listener
            body = exc
        if timer is not None:
            self._timer_slot[0] = None
        if not await self._respond(answers, request, body, timer):
            return False
        if quota is not None:
            await self._mute(quota)
        return True

    def _begin(self, request: rpc.Request, size: int) -> RequestTimer | None:
        """The request's timer (None without metrics), started as it is handled."""
        if self.metrics is None:
            return None
        now = time.monotonic()
        return self.metrics.begin(request.api, request.version, request.body, size,
                                  min(self._received_at, now), now)

    async def _handle_produce_burst(self, first: rpc.Request, size: int, timer: RequestTimer | None,
                                    answers: trio.MemorySendChannel) -> bool:
        """``first`` (a frame of ``size`` bytes) and the Produce requests of its version
        buffered behind it (up to ``PRODUCE_BURST`` of them and ``PRODUCE_BURST_BYTES``)
        handled together (``produce_burst``: the batches of one-partition requests appended
        as one), then answered in order as if handled one by one; False closes the
        connection.  A frame that cannot be decoded ends the burst and is then
        handled as usual (answered or closing the connection, after the burst's answers)."""
        burst = [(first, timer)]
        undecoded = None
        while (len(burst) < PRODUCE_BURST and size < PRODUCE_BURST_BYTES
               and self.decoder.next_request_is(first.header.api_key, first.version)):
            payload = self.decoder.next_frame()
            size += len(payload)
            try:
                request = self._decode(payload)
            except ProtocolError:
                undecoded = payload
                break
            burst.append((request, self._begin(request, len(payload))))
        try:
            bodies = await self.produce_burst([request for request, _ in burst])
        except Exception as exc:  # a bug costs these requests, never the listener
            bodies = [exc] * len(burst)
        for n, (request, timer) in enumerate(burst):
            if bodies is None:  # not taken together: each as the only one
                try:
                    body = await self.handler(request)
                except Exception as exc:
                    body = exc
            else:
                body = bodies[n]
            if not await self._respond(answers, request, body, timer, more=n + 1 < len(burst)):
                return False
        return True if undecoded is None else await self._handle_frame(undecoded, answers)

    async def _respond(self, answers: trio.MemorySendChannel, request: rpc.Request, body,
                       timer: RequestTimer | None, more: bool = False) -> bool:
        """Answer ``request`` with what its handler returned (a body, a Deferred one, None
        for none) or raised; ``more``: answers of the same burst follow (one send may carry
        them all).  False closes the connection."""
        if isinstance(body, Exception):
            answer = self._failed(request, "handling", body)
            body = None
        else:
            if timer is not None:
                timer.handled = timer.ready = time.monotonic()
            if body is None:
                if timer is not None:  # acks=0: no answer to send
                    timer.done(timer.ready, timer.ready)
                return True
            if isinstance(body, Deferred):
                await self._answer(answers, (request, body), timer)
                return True
            answer = self._encode(request, body)
        if answer is None:
            return False
        if timer is not None:
            timer.api.count_errors(body)
        await self._answer(answers, answer, timer, hold=request.api == "Produce", more=more)
        return True

    async def _mute(self, quota) -> None:
        """A throttled client's connection reads nothing for its throttle time (KIP-219);
        what it was already answered leaves first."""
        if quota is not None and quota.throttle_ms:
            await self._send_held()
            await quota.mute()

    def _encode(self, request: rpc.Request, body: dict) -> bytes | list | None:
        """The framed answer (a list of pieces when it has records left in their files), or
        the error answer when ``body`` cannot be encoded, or None when neither can (the
        connection must close)."""
        try:
            if request.api == "Produce":
                answer = self._templates.encode(request.version, request.header.correlation_id, body)
                if answer is not None:
                    return answer
            return _encode(request, body)
        except Exception as exc:
            return self._failed(request, "encoding the answer to", exc)

    def _failed(self, request: rpc.Request, stage: str, exc: Exception) -> bytes | None:
        error = rpc.error_response(request.api, request.version, ErrorCode.UNKNOWN_SERVER_ERROR)
        log.warning("%s %s v%d from %s (client id %r, correlation id %d) failed: %s: %s; %s",
                    stage, request.api, request.version, self.peer, request.header.client_id,
                    request.header.correlation_id, type(exc).__name__, exc,
                    "answered UNKNOWN_SERVER_ERROR" if error is not None else "closing the connection")
        log.debug("the failure in full", exc_info=exc)
        if error is None:
            return None
        try:
            return _encode(request, error)
        except Exception:  # the error answer is built from the schema alone: cannot happen
            log.exception("the error answer to %s v%d cannot be encoded", request.api, request.version)
            return None

    async def _send(self, item: bytes | list) -> None:
        if isinstance(item, bytes):
            await self.stream.send_all(item)
        else:
            await send_response(self.stream, item, self._sendfile)

    async def _answer(self, answers: trio.MemorySendChannel, item: bytes | list | tuple,
                      timer: RequestTimer | None = None, hold: bool = False, more: bool = False) -> None:
        if self._unsent == 0 and not isinstance(item, tuple):
            # Nothing ahead of it and nothing to wait for: send it from here, as a
            # one-request-at-a-time server would (the writer is idle: no interleaving).
            if isinstance(item, bytes) and (hold or self._held):
                self._held.append((item, timer))
                if hold and (more or self.decoder.has_frame()) and len(self._held) < PIPELINE_DEPTH:
                    return  # the next request is already here: answer both at once
                await self._send_held()
                return
            sending = time.monotonic() if timer is not None else 0.0
            await self._send(item)
            if timer is not None:
                timer.done(sending, time.monotonic())
            return
        await self._send_held()
        self._unsent += 1
        await answers.send((item, timer))

    async def _send_held(self) -> None:
        if not self._held:
            return
        held, self._held = self._held, []
        sending = time.monotonic()
        await self.stream.send_all(held[0][0] if len(held) == 1 else b"".join(a for a, _ in held))
        sent = time.monotonic()
        for _, timer in held:
            if timer is not None:
                timer.done(sending, sent)

    async def _write_answers(self, answers: trio.MemoryReceiveChannel,
                             connection: trio.CancelScope) -> None:
        try:
            async with answers:
                async for item, timer in answers:
                    if isinstance(item, tuple):
                        request, deferred = item
                        try:
                            body = await deferred.finish()
                        except Exception as exc:
                            item = self._failed(request, "handling", exc)
                        else:
                            item = self._encode(request, body)
                            if timer is not None:
                                timer.ready = time.monotonic()
                                timer.api.count_errors(body)
                        if item is None:
                            connection.cancel()
                            return
                    sending = time.monotonic() if timer is not None else 0.0
                    await self._send(item)
                    if timer is not None:
                        timer.done(sending, time.monotonic())
                    self._unsent -= 1
        except _GONE:
            connection.cancel()  # the peer is gone: stop reading too


def _describe(payload: bytes) -> str:
    """What a request that could not be parsed says it is, for the log."""
    try:
        api_key, version, correlation_id = rpc.peek_header(payload)
    except ProtocolError:
        return f"request of {len(payload)} bytes"
    api = rpc.API_NAMES.get(api_key, f"api key {api_key}")
    return f"{api} v{version} request (correlation id {correlation_id})"


def _encode(request: rpc.Request, body: dict) -> bytes | list:
    if request.api != "Fetch":
        return rpc.encode_response(request.api, request.version, request.header.correlation_id, body)
    pieces = rpc.encode_response_spliced(request.api, request.version, request.header.correlation_id, body)
    return pieces[0] if len(pieces) == 1 else pieces


# Accept errors that mean "out of a resource for now" (trio's serve_listeners list): wait and
# accept again rather than let the listener die.
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
_ACCEPT_BACKOFF_S = 0.1


async def serve_kafka(handler: Handler, host: str, port: int, *, supported=None,
                      task_status=trio.TASK_STATUS_IGNORED,
                      max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                      limits: ConnectionLimits = ConnectionLimits(),
                      quotas: ConnectionQuotas | None = None, auth=None,
                      metrics: RequestMetrics | None = None,
                      client_quotas: ClientQuotaEnforcer | None = None,
                      on_close: Callable[[str], None] | None = None,
                      produce_burst: BurstHandler | None = None,
                      name: str = "listener") -> None:
    """Listen on host:port and serve Kafka connections until cancelled.

    ``task_status.started`` receives the bound port (useful with port 0).  ``quotas``: the
    connection counts this listener shares with others (default: its own).  ``auth``: the
    listener's TLS and SASL (``broker.network_security.ListenerAuth``); None is PLAINTEXT.
    ``client_quotas``: the broker's client quotas (``broker.client_quotas``), None for none.
    ``on_close``: called with a connection's id (``rpc.Request.connection_id``) once it closed.
    ``produce_burst``: handles a connection's pipelined Produce requests together (a
    ``BurstHandler``), None to handle each alone.
    ``name``: how a failure to listen (``ListenError``) names the listener.
    """
    try:
        listeners = await trio.open_tcp_listeners(port, host=host)
    except OSError as exc:
        raise ListenError(exc.errno, f"{name}: cannot listen on {host}:{port}: {exc.strerror}") from exc
    bound = listeners[0].socket.getsockname()[1]
    quotas = quotas if quotas is not None else ConnectionQuotas(limits)
    if auth is not None:
        supported = auth.supported(supported)
        handler = auth.handler(handler)

    async def serve_connection(stream: trio.SocketStream, peer: str) -> None:
        try:
            principal, authenticator = "User:ANONYMOUS", None
            if auth is not None:
                secured = await auth.secure(stream, peer)
                if secured is None:
                    return
                stream, principal = secured
                authenticator = auth.authenticator(principal)
            await KafkaConnection(stream, handler, supported=supported, max_frame_bytes=max_frame_bytes,
                                  idle_timeout_s=limits.idle_timeout_s, peer=peer, principal=principal,
                                  authenticator=authenticator, metrics=metrics,
                                  client_quotas=client_quotas, on_close=on_close,
                                  produce_burst=produce_burst).serve()
        except Exception:  # the last guard: a connection's failure is never the listener's
            log.exception("connection from %s failed", peer)
        finally:
            quotas.release(peer)

    async def accept_loop(listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        async with listener:
            while True:
                await quotas.wait_for_room()
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                        raise
                    log.error("cannot accept a connection on port %d: %s; retrying in %.1f s",
                              bound, errno.errorcode.get(exc.errno, exc.errno), _ACCEPT_BACKOFF_S)
                    await trio.sleep(_ACCEPT_BACKOFF_S)
                    continue
                peer = _peer_address(stream)
                if not quotas.admit(peer):
                    log.info("closing connection from %s: max.connections.per.ip (%d) reached",
                             peer, limits.limit_for(peer))
                    await trio.aclose_forcefully(stream)
                    continue
                nursery.start_soon(serve_connection, stream, peer)

    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(accept_loop, listener, nursery)
        task_status.started(bound)


_connections = itertools.count()


def _connection_id(stream: trio.abc.Stream) -> str:
    """Kafka's connection id: local address and port, peer address and port, a counter."""
    n = next(_connections)
    sock = getattr(stream, "socket", None) or getattr(
        getattr(stream, "transport_stream", None), "socket", None)  # under TLS
    try:
        local, peer = sock.getsockname(), sock.getpeername()
        return f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{n}"
    except (AttributeError, OSError, IndexError, TypeError):  # a test's stream
        return f"connection-{n}"


def _peer_address(stream: trio.SocketStream) -> str:
    try:
        return stream.socket.getpeername()[0]
    except (OSError, IndexError, TypeError):
        return "?"
