"""The trio shell of a listener's security (``kraft.security``): the TLS handshake of an
accepted connection, and SASL authentication before its first ordinary request.

Nothing here runs per request once a connection is authenticated: ``KafkaConnection``
reads frames through ``SaslAuthenticator.frame`` until the SASL session completes and then
switches to its ordinary frame handler, so a PLAINTEXT or SSL connection, and an
authenticated SASL one, costs what it did before.  Where to authorize (ACLs, quotas): each
connection's principal is ``KafkaConnection.principal`` (``User:<name>`` from SASL,
``User:<DN>`` from a client certificate, ``User:ANONYMOUS`` otherwise); a handler that
needs it must be handed it there.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Callable

import trio

from kraft.protocol import rpc
from kraft.protocol.error_codes import ErrorCode
from kraft.protocol.errors import ProtocolError
from kraft.protocol.schema import Versions
from kraft.security import tls
from kraft.security.config import ListenerSecurity
from kraft.security.sasl import PLAIN, SASL_API_VERSIONS, SASL_APIS, SaslServerSession
from kraft.security.scram import MECHANISMS as SCRAM_MECHANISMS

if TYPE_CHECKING:
    from broker.network import Handler, KafkaConnection

log = logging.getLogger(__name__)

TLS_HANDSHAKE_TIMEOUT_S = 30.0
READY_WAIT_S = 30.0  # how long a SCRAM exchange waits for a starting broker's credentials


class ListenerAuth:
    """A listener's security, for ``serve_kafka``: its settings, where SCRAM credentials
    are looked up (the node's metadata image), and an event that is set once the image is
    current (a starting broker knows no credentials yet)."""

    def __init__(self, security: ListenerSecurity, scram_credentials: Callable[[], object] | None = None,
                 ready: trio.Event | None = None):
        self.security = security
        self.scram_credentials = scram_credentials or (lambda: {})
        self.ready = ready

    def supported(self, supported: dict[int, Versions] | None) -> dict[int, Versions] | None:
        """The API versions served on this listener: SaslHandshake/SaslAuthenticate on SASL
        listeners only."""
        if not self.security.uses_sasl or supported is None:
            return supported
        return {**supported, **{rpc.API_KEYS[a]: Versions(lo, hi) for a, (lo, hi) in SASL_API_VERSIONS.items()}}

    def handler(self, handler: "Handler") -> "Handler":
        """``handler`` as this listener serves it: on a SASL listener ApiVersions also lists
        the SASL APIs, and a SASL request after authentication is ILLEGAL_SASL_STATE (no
        re-authentication, as Kafka with ``connections.max.reauth.ms`` 0)."""
        if not self.security.uses_sasl:
            return handler
        extra = [{"api_key": rpc.API_KEYS[a], "min_version": lo, "max_version": hi}
                 for a, (lo, hi) in SASL_API_VERSIONS.items()]

        async def handle(request: rpc.Request):
            if request.api == "ApiVersions":
                body = await handler(request)
                if body is not None and not body.get("error_code"):
                    keys = {k["api_key"] for k in body["api_keys"]}
                    body["api_keys"] = sorted(body["api_keys"] + [e for e in extra if e["api_key"] not in keys],
                                              key=lambda k: k["api_key"])
                return body
            if request.api in SASL_APIS:
                return rpc.error_response(request.api, request.version, ErrorCode.ILLEGAL_SASL_STATE)
            return await handler(request)

        return handle

    async def secure(self, stream: trio.abc.Stream, peer: str) -> tuple[trio.abc.Stream, str] | None:
        """The connection's stream after the TLS handshake (when the listener has TLS) and
        its principal; None when the handshake fails (the stream is closed)."""
        context = self.security.ssl_context
        if context is None:
            return stream, tls.ANONYMOUS
        ssl_stream = trio.SSLStream(stream, context, server_side=True)
        failure = "timed out"
        with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT_S):
            try:
                await ssl_stream.do_handshake()
                principal = tls.principal_of_certificate(ssl_stream.getpeercert(binary_form=True))
                return ssl_stream, principal
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ValueError) as exc:
                failure = str(exc.__cause__ or exc) or type(exc).__name__
        log.info("closing connection from %s on listener %s: TLS handshake failed: %s", peer,
                 self.security.listener, failure)
        await trio.aclose_forcefully(stream)
        return None

    def authenticator(self, principal: str) -> "SaslAuthenticator | None":
        if not self.security.uses_sasl:
            return None
        credentials = self.scram_credentials

        def lookup(mechanism: str, user: str):
            return credentials().get((user, SCRAM_MECHANISMS[mechanism].type))

        session = SaslServerSession(self.security.mechanisms, plain_users=self.security.plain_users,
                                    scram_lookup=lookup, nonce=secrets.token_urlsafe(24))
        return SaslAuthenticator(session, self.ready, self.security.listener)


class SaslAuthenticator:
    """Reads a connection's frames until its SASL session completes (``KafkaConnection``
    calls ``frame`` for each)."""

    def __init__(self, session: SaslServerSession, ready: trio.Event | None, listener: str):
        self.session = session
        self.ready = ready
        self.listener = listener

    async def frame(self, conn: "KafkaConnection", payload: bytes, answers) -> bool:
        """Handle one frame before authentication; False closes the connection."""
        try:
            api_key, version, correlation_id = rpc.peek_header(payload)
        except ProtocolError:
            log.info("closing connection from %s: a malformed frame before SASL authentication", conn.peer)
            return False
        api = rpc.API_NAMES.get(api_key)
        if api == "ApiVersions":
            return await conn._handle_frame(payload, answers)
        if api not in SASL_APIS:
            log.info("closing connection from %s on listener %s: %s before SASL authentication",
                     conn.peer, self.listener, api or f"api key {api_key}")
            return False
        try:
            request = rpc.decode_request(payload, conn.supported)
        except ProtocolError as exc:
            log.info("closing connection from %s: malformed %s v%d: %s", conn.peer, api, version, exc)
            return False
        if (api == "SaslAuthenticate" and self.session.mechanism not in (None, PLAIN)
                and self.ready is not None and not self.ready.is_set()):
            with trio.move_on_after(READY_WAIT_S):
                await self.ready.wait()
        answer = self.session.receive(api, version, request.body)
        if answer.body is not None:
            try:
                data = rpc.encode_response(api, version, correlation_id, answer.body)
            except Exception as exc:  # an answer that cannot be encoded: close
                log.warning("encoding the %s answer failed: %s", api, exc)
                return False
            await conn._answer(answers, data)
        if answer.close:
            log.info("closing connection from %s on listener %s: %s", conn.peer, self.listener, answer.reason)
            return False
        if self.session.principal is not None:
            conn.principal = self.session.principal
            conn.authenticated()
        return True
