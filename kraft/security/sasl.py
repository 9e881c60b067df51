"""The server side of SASL on a Kafka connection, without I/O (Kafka's
SaslServerAuthenticator).

Theory of operation: a connection on a SASL listener starts in HANDSHAKE.  Until it is
COMPLETE only three requests are read: ApiVersions (answered by the node as usual, the
shell passes it on), SaslHandshake v1 (choose a mechanism of ``sasl.enabled.mechanisms``)
and then SaslAuthenticate (the mechanism's tokens: one round for PLAIN, two for SCRAM).
Anything else, or a SASL request out of turn, closes the connection without an answer
(Kafka: IllegalSaslStateException).  A failed authentication is answered with
SASL_AUTHENTICATION_FAILED and a message, then the connection closes; an unknown mechanism
with UNSUPPORTED_SASL_MECHANISM, then close.  ``receive`` returns what to send and whether
to close; the shell (``broker.security_shell``) moves the bytes.

    HANDSHAKE --SaslHandshake(ok)--> AUTHENTICATE --SaslAuthenticate(last ok)--> COMPLETE
        \\--anything else / failure--> FAILED (close)
"""

from __future__ import annotations

import enum
import hmac
from dataclasses import dataclass
from typing import Callable, Mapping

from kraft.protocol.error_codes import ErrorCode
from kraft.security.scram import MECHANISMS as SCRAM_MECHANISMS
from kraft.security.scram import ScramCredential, ScramError, ScramServer

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
SASL_APIS = frozenset({"SaslHandshake", "SaslAuthenticate"})
# What the SASL listeners serve of the two APIs (SaslHandshake v0, followed by raw
# unframed tokens, is left out: every current client uses v1).
SASL_API_VERSIONS = {"SaslHandshake": (1, 1), "SaslAuthenticate": (0, 2)}


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SaslAnswer:
    body: dict | None  # the response to send, None for none
    close: bool  # close the connection (after sending ``body``)
    reason: str = ""  # for the log when closing


def principal_of(username: str) -> str:
    return f"User:{username}"


class SaslServerSession:
    """One connection's authentication.  ``scram_lookup(mechanism, user)`` returns a
    ScramCredential or None; ``plain_users`` maps user -> password (the listener's JAAS
    ``user_<name>`` options); ``nonce`` is the server's SCRAM nonce for this connection."""

    def __init__(self, mechanisms: tuple[str, ...], *, plain_users: Mapping[str, str] | None = None,
                 scram_lookup: Callable[[str, str], ScramCredential | None] | None = None, nonce: str = ""):
        self.mechanisms = tuple(mechanisms)
        self.plain_users = plain_users or {}
        self.scram_lookup = scram_lookup or (lambda mechanism, user: None)
        self.nonce = nonce
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self._scram: ScramServer | None = None

    def receive(self, api: str, version: int, body: dict) -> SaslAnswer:
        if api == "SaslHandshake" and self.state is SaslState.HANDSHAKE:
            return self._handshake(body)
        if api == "SaslAuthenticate" and self.state is SaslState.AUTHENTICATE:
            return self._authenticate(version, body)
        state, self.state = self.state, SaslState.FAILED
        return SaslAnswer(None, True, f"unexpected {api} request in SASL state {state.value}")

    def _handshake(self, body: dict) -> SaslAnswer:
        mechanism = body["mechanism"]
        answer = {"error_code": 0, "mechanisms": list(self.mechanisms)}
        if mechanism not in self.mechanisms:
            self.state = SaslState.FAILED
            answer["error_code"] = ErrorCode.UNSUPPORTED_SASL_MECHANISM
            return SaslAnswer(answer, True, f"unsupported SASL mechanism {mechanism!r}")
        self.mechanism = mechanism
        if mechanism != PLAIN:
            self._scram = ScramServer(SCRAM_MECHANISMS[mechanism],
                                      lambda user: self.scram_lookup(mechanism, user), self.nonce)
        self.state = SaslState.AUTHENTICATE
        return SaslAnswer(answer, False)

    def _authenticate(self, version: int, body: dict) -> SaslAnswer:
        token = body["auth_bytes"]
        try:
            if self._scram is None:
                reply, username = b"", self._plain(token)
            else:
                reply = self._scram.step(token)
                username = self._scram.username if self._scram.done else None
        except (ScramError, ValueError) as exc:
            self.state = SaslState.FAILED
            if self._scram is None:
                message = "Authentication failed: Invalid username or password"
            else:
                message = ("Authentication failed during authentication due to invalid credentials "
                           f"with SASL mechanism {self.mechanism}")
            return SaslAnswer(self._response(ErrorCode.SASL_AUTHENTICATION_FAILED, message, b""), True,
                              f"{self.mechanism} authentication failed: {exc}")
        if username is not None:
            self.state = SaslState.COMPLETE
            self.principal = principal_of(username)
        return SaslAnswer(self._response(0, None, reply), False)

    @staticmethod
    def _response(code: int, message: str | None, auth_bytes: bytes) -> dict:
        return {"error_code": int(code), "error_message": message, "auth_bytes": auth_bytes,
                "session_lifetime_ms": 0}

    def _plain(self, token: bytes) -> str:
        """RFC 4616: [authzid] NUL authcid NUL passwd; returns the user name."""
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise ValueError("malformed PLAIN message")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise ValueError("a PLAIN message that is not UTF-8") from None
        if not username:
            raise ValueError("no user name")
        if authzid and authzid != username:
            raise ValueError("the authorization id differs from the user name")
        expected = self.plain_users.get(username)
        # compare even for an unknown user, so the time taken does not tell which users exist
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0").encode())
        if expected is None or not ok:
            raise ValueError("invalid username or password")
        return username
