"""An async Kafka-protocol client for node-to-node requests (Raft, broker lifecycle,
replica fetching, forwarding), on trio.

One ``Connection`` per peer address pipelines requests: each gets a correlation id, and a
reader task routes responses back to their waiters (Kafka answers in order, but routing by
id keeps us honest).  A connection that fails fails every request in flight on it with
``NodeUnavailable``; the next request opens a new one.  Timeouts are per request.
"""

from __future__ import annotations

import errno
import itertools
import logging
import math
import secrets

import trio

from kraft.protocol import rpc
from kraft.protocol.errors import ProtocolError
from kraft.protocol.framing import FrameDecoder
from kraft.security.config import PLAINTEXT_CLIENT, ClientSecurity
from kraft.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kraft.security.scram import ScramClient, ScramError

log = logging.getLogger(__name__)


def _refused(exc: BaseException) -> bool:
    """Whether connecting failed because nothing listens there.  trio's ``open_tcp_stream``
    raises an OSError from an ExceptionGroup of every address's attempt, whose errno is
    None: reading only the cause's errno took every refusal for an outage, and the Raft
    driver then waited out timeouts for a peer that was gone (a killed controller's
    followers elected after the whole fetch timeout)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_refused(e) for e in exc.exceptions)
    return getattr(exc, "errno", None) == errno.ECONNREFUSED


class NodeUnavailable(Exception):
    """The peer could not be reached, the connection broke, or the request timed out."""


class RequestTimedOut(NodeUnavailable):
    """No answer within the request's timeout; the connection is still open (and the
    request may still be queued at the peer)."""


class PeerGone(NodeUnavailable):
    """Nothing listens at the peer's address any more: it refused the connection, or closed
    (or reset) it with requests outstanding.  Unlike a timeout (a slow peer, a network
    partition), this is what a process that died leaves behind (the Raft driver starts
    looking for a new leader at once)."""


class AuthenticationFailed(NodeUnavailable):
    """The peer refused this client's SASL credentials (or could not prove its own)."""


class Connection:
    def __init__(self, host: str, port: int, client_id: str, local_address: str | None = None,
                 security: ClientSecurity = PLAINTEXT_CLIENT):
        self.local_address = local_address
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        self.stream: trio.abc.Stream | None = None
        self._ids = itertools.count(1)
        self._waiters: dict[int, tuple[str, int, trio.MemorySendChannel]] = {}
        self._send_lock = trio.Lock()
        self.closed = False

    async def connect(self, nursery: trio.Nursery, timeout_s: float) -> None:
        stream = None
        with trio.move_on_after(timeout_s) as scope:
            try:
                # Bound to the node's own address, so that a network partition between
                # node addresses (jepsen's local backend) also cuts this connection.
                stream = await trio.open_tcp_stream(self.host, self.port, local_address=self.local_address)
                if self.security.ssl_context is not None:
                    stream = trio.SSLStream(stream, self.security.ssl_context, server_hostname=self.host)
                    await stream.do_handshake()
            except (OSError, trio.BrokenResourceError) as exc:
                if stream is not None:
                    await trio.aclose_forcefully(stream)
                cause = exc.__cause__ or exc
                kind = PeerGone if _refused(cause) else NodeUnavailable
                raise kind(f"cannot connect to {self.host}:{self.port}: {cause}") from None
        if scope.cancelled_caught:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            raise NodeUnavailable(f"connecting to {self.host}:{self.port} timed out")
        self.stream = stream
        nursery.start_soon(self._read_loop)
        if self.security.uses_sasl:
            try:
                await self._authenticate(timeout_s)
            except BaseException:
                await self.aclose()
                raise

    async def _authenticate(self, timeout_s: float) -> None:
        """SaslHandshake, then the mechanism's SaslAuthenticate rounds (kraft.security)."""
        sec = self.security
        where = f"{self.host}:{self.port}"
        resp = await self.request("SaslHandshake", 1, {"mechanism": sec.sasl_mechanism}, timeout_s)
        if resp["error_code"]:
            raise AuthenticationFailed(f"{where} does not offer SASL {sec.sasl_mechanism} "
                                       f"(it has {resp['mechanisms']})")

        async def step(token: bytes) -> bytes:
            answer = await self.request("SaslAuthenticate", 1, {"auth_bytes": token}, timeout_s)
            if answer["error_code"]:
                raise AuthenticationFailed(f"{where} refused {sec.sasl_mechanism} authentication as "
                                           f"{sec.username}: {answer['error_message']}")
            return answer["auth_bytes"]

        if sec.sasl_mechanism == "PLAIN":
            await step(b"\0" + sec.username.encode() + b"\0" + sec.password.encode())
            return
        client = ScramClient(SCRAM_MECHANISMS[sec.sasl_mechanism], sec.username, sec.password,
                             secrets.token_urlsafe(24))
        server_first = await step(client.first_message())
        try:
            client.verify(await step(client.final_message(server_first)))
        except ScramError as exc:
            raise AuthenticationFailed(f"{where}: {exc}") from None

    async def _read_loop(self) -> None:
        decoder = FrameDecoder()
        gone = False  # the peer closed or reset it (not we, not a bad frame)
        try:
            while True:
                data = await self.stream.receive_some(1 << 20)
                if not data:
                    gone = not self.closed
                    break
                decoder.receive_data(data)
                while (payload := decoder.next_frame()) is not None:
                    self._dispatch(payload)
        except (trio.BrokenResourceError, OSError) as exc:
            gone = not self.closed
            log.debug("connection to %s:%s ended: %s", self.host, self.port, exc)
        except (trio.ClosedResourceError, ProtocolError) as exc:
            log.debug("connection to %s:%s ended: %s", self.host, self.port, exc)
        finally:
            self._fail_all(gone)

    def _dispatch(self, payload: bytes) -> None:
        corr = int.from_bytes(payload[:4], "big", signed=True)
        waiter = self._waiters.pop(corr, None)
        if waiter is None:
            return  # a request that already timed out
        api, version, channel = waiter
        try:
            _, body = rpc.decode_response(api, version, payload)
        except ProtocolError as exc:
            body = exc
        channel.send_nowait(body)

    def _fail_all(self, gone: bool = False) -> None:
        self.closed = True
        kind = PeerGone if gone else NodeUnavailable
        for _, _, channel in self._waiters.values():
            channel.send_nowait(kind(f"connection to {self.host}:{self.port} closed"))
        self._waiters.clear()

    async def request(self, api: str, version: int, body: dict, timeout_s: float, *,
                      expect_response: bool = True) -> dict | None:
        if self.closed or self.stream is None:
            raise NodeUnavailable(f"connection to {self.host}:{self.port} is closed")
        corr = next(self._ids)
        send, recv = trio.open_memory_channel(1)
        if expect_response:
            self._waiters[corr] = (api, version, send)
        data = rpc.encode_request(api, version, corr, body, client_id=self.client_id)
        try:
            with trio.fail_after(timeout_s):
                async with self._send_lock:
                    await self.stream.send_all(data)
                if not expect_response:
                    return None
                result = await recv.receive()
        except trio.TooSlowError:
            self._waiters.pop(corr, None)
            raise RequestTimedOut(f"{api} to {self.host}:{self.port} timed out after {timeout_s}s") from None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._waiters.pop(corr, None)
            self.closed = True
            raise NodeUnavailable(f"{api} to {self.host}:{self.port} failed: {exc}") from None
        if isinstance(result, Exception):
            raise result
        return result

    async def aclose(self) -> None:
        self.closed = True
        if self.stream is not None:
            await trio.aclose_forcefully(self.stream)


class KafkaClient:
    """Connections to many peers, owned by one nursery (the node's lifetime)."""

    def __init__(self, nursery: trio.Nursery, client_id: str = "kraft", connect_timeout_s: float = 2.0,
                 local_address: str | None = None, security: ClientSecurity = PLAINTEXT_CLIENT):
        self.nursery = nursery
        self.local_address = local_address
        self.security = security  # TLS and SASL towards every peer of this client
        self.client_id = client_id
        self.connect_timeout_s = connect_timeout_s
        self._connections: dict[tuple[str, int], Connection] = {}
        self._connecting: dict[tuple[str, int], trio.Event] = {}
        self._auth_warned: dict[tuple[str, int], float] = {}

    async def _connection(self, host: str, port: int) -> Connection:
        key = (host, port)
        while True:
            conn = self._connections.get(key)
            if conn is not None and not conn.closed:
                return conn
            pending = self._connecting.get(key)
            if pending is None:
                break
            await pending.wait()
        event = self._connecting[key] = trio.Event()
        try:
            conn = Connection(host, port, self.client_id, self.local_address, self.security)
            try:
                await conn.connect(self.nursery, self.connect_timeout_s)
            except AuthenticationFailed as exc:
                # a configuration error, not an outage: say so, once a minute per peer
                now = trio.current_time()
                if now - self._auth_warned.get(key, -math.inf) >= 60:
                    self._auth_warned[key] = now
                    log.warning("%s: %s", self.client_id, exc)
                raise
            self._connections[key] = conn
            return conn
        finally:
            del self._connecting[key]
            event.set()

    async def request(self, host: str, port: int, api: str, version: int, body: dict,
                      timeout_s: float = 30.0, *, expect_response: bool = True,
                      close_on_timeout: bool = False) -> dict | None:
        """Send one request and wait for its response body (a dict).

        Raises NodeUnavailable on connect failure, broken connection or timeout
        (RequestTimedOut).  ``close_on_timeout``: a request that timed out closes its
        connection, as Kafka's NetworkClient does: a peer answers a connection's requests in
        order, so whatever is sent after it on that connection would wait behind it.
        """
        conn = await self._connection(host, port)
        try:
            return await conn.request(api, version, body, timeout_s, expect_response=expect_response)
        except RequestTimedOut:
            if close_on_timeout:
                self._close(conn)
            raise

    def disconnect(self, host: str, port: int) -> None:
        conn = self._connections.get((host, port))
        if conn is not None:
            self._close(conn)

    def _close(self, conn: Connection) -> None:
        """Forget ``conn`` (unless a newer connection to its peer replaced it) and close it;
        nothing more is sent on it from now on."""
        key = (conn.host, conn.port)
        if self._connections.get(key) is conn:
            del self._connections[key]
        conn.closed = True
        self.nursery.start_soon(conn.aclose)

    async def aclose(self) -> None:
        for conn in list(self._connections.values()):
            await conn.aclose()
        self._connections.clear()
