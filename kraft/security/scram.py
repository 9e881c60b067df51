"""SCRAM (RFC 5802, RFC 7677) without I/O: the credential math, a server and a client.

Theory of operation: a SCRAM exchange is two round trips of text messages::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 proof>
    server-final   v=<base64 server signature>

The server keeps per user only ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")`` with the salt and the iteration count
(Kafka's ``UserScramCredentialRecord``): enough to check a proof, never the password.
``ScramServer.step`` and ``ScramClient`` take and return bytes; the caller moves them
(SaslAuthenticate on the broker, ``kraft.client`` on the way out).  Nonces come from the
caller, so tests replay the RFCs' example exchanges exactly.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass


class ScramError(Exception):
    """The exchange failed: bad credentials, or a message that breaks the protocol."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str  # SASL mechanism name, e.g. SCRAM-SHA-512
    hash_name: str  # hashlib name
    type: int  # Kafka's ScramMechanism id (DescribeUserScramCredentials, metadata records)
    min_iterations: int = 4096
    max_iterations: int = 16384  # Kafka refuses more (UNACCEPTABLE_CREDENTIAL)

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: bytes, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC as the PRF."""
        return hashlib.pbkdf2_hmac(self.hash_name, password, salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
SCRAM_SHA_1 = ScramMechanism("SCRAM-SHA-1", "sha1", 0)  # RFC 5802's examples only; never served
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE = {m.type: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted(mechanism: ScramMechanism, salt: bytes, salted_password: bytes,
                           iterations: int) -> ScramCredential:
    client_key = mechanism.hmac(salted_password, b"Client Key")
    return ScramCredential(salt, mechanism.hash(client_key), mechanism.hmac(salted_password, b"Server Key"),
                           iterations)


def credential(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> ScramCredential:
    salted = mechanism.salted_password(password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salt, salted, iterations)


# -- message syntax ------------------------------------------------------------------------

def _attributes(text: str) -> list[tuple[str, str]]:
    out = []
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed SCRAM attribute {part[:20]!r}")
        out.append((part[0], part[2:]))
    return out


def _decode_name(value: str) -> str:
    """saslname: ',' and '=' travel as '=2C' and '=3D'; any other '=' is an error."""
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise ScramError("malformed user name")
    return value.replace("=2C", ",").replace("=3D", "=")


def _encode_name(value: str) -> str:
    return value.replace("=", "=3D").replace(",", "=2C")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ScramError("malformed base64 in a SCRAM message") from None


def _text(message: bytes) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("a SCRAM message that is not UTF-8") from None


# -- server ----------------------------------------------------------------------------------

class ScramServer:
    """One server side of an exchange: ``step(client-first)`` gives server-first,
    ``step(client-final)`` gives server-final; then ``done`` and ``username`` are set.
    ``lookup(username)`` returns the user's credential or None.  Any failure raises
    ScramError, after which the exchange is over."""

    def __init__(self, mechanism: ScramMechanism, lookup, server_nonce: str):
        self.mechanism = mechanism
        self.lookup = lookup
        self.server_nonce = server_nonce
        self.username: str | None = None
        self.done = False
        self._step = self._client_first
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def step(self, message: bytes) -> bytes:
        if self._step is None:
            raise ScramError("the SCRAM exchange is already over")
        step, self._step = self._step, None  # a failure ends the exchange
        return step(_text(message))

    def _client_first(self, text: str) -> bytes:
        # gs2-header: "n,," or "y,," (no channel binding), optionally with "a=<authzid>"
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise ScramError("malformed client-first message (channel binding is not supported)")
        authzid = parts[1]
        if authzid and not authzid.startswith("a="):
            raise ScramError("malformed authorization id in the client-first message")
        self._gs2_header = f"{parts[0]},{authzid},"
        self._client_first_bare = bare = parts[2]
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("malformed client-first message")
        # Further attributes are extensions (Kafka's tokenauth=...), ignored: kraft has no
        # delegation tokens.
        username = _decode_name(attrs[0][1])
        if authzid and _decode_name(authzid[2:]) != username:
            raise ScramError("the authorization id differs from the user name")
        if any(k == "m" for k, _ in attrs):
            raise ScramError("mandatory SCRAM extensions are not supported")
        self._credential = self.lookup(username)
        if self._credential is None:
            raise ScramError(f"no {self.mechanism.name} credential for the user")
        if not self.server_nonce or "," in self.server_nonce:
            raise ScramError("bad server nonce")
        self.username = username
        self._nonce = attrs[1][1] + self.server_nonce
        c = self._credential
        self._server_first = f"r={self._nonce},s={_b64(c.salt)},i={c.iterations}"
        self._step = self._client_final
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_text = text.rpartition(",p=")
        if not sep:
            raise ScramError("the client-final message has no proof")
        attrs = _attributes(without_proof)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise ScramError("malformed client-final message")
        if _unb64(attrs[0][1]) != self._gs2_header.encode():
            raise ScramError("channel binding does not match the client-first message")
        if attrs[1][1] != self._nonce:
            raise ScramError("the nonce does not match")
        proof = _unb64(proof_text)
        c = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = self.mechanism.hmac(c.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("the proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(self.mechanism.hash(client_key), c.stored_key):
            raise ScramError("invalid credentials")
        self.done = True
        return f"v={_b64(self.mechanism.hmac(c.server_key, auth_message))}".encode()


# -- client ----------------------------------------------------------------------------------

class ScramClient:
    """The client side: ``first_message()``, ``final_message(server_first)``,
    ``verify(server_final)`` (raises ScramError when the server cannot prove it knows the
    credential)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, client_nonce: str):
        self.mechanism = mechanism
        self.password = password
        self._client_first_bare = f"n={_encode_name(username)},r={client_nonce}"
        self._client_nonce = client_nonce
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        attrs = dict(_attributes(text))
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._client_nonce) or salt is None or not iterations.isdigit():
            raise ScramError("malformed server-first message")
        if int(iterations) < self.mechanism.min_iterations and self.mechanism is not SCRAM_SHA_1:
            raise ScramError(f"the server asks for {iterations} iterations, fewer than "
                             f"{self.mechanism.min_iterations}")
        salted = self.mechanism.salted_password(self.password.encode(), _unb64(salt), int(iterations))
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = self.mechanism.hmac(self.mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        text = _text(server_final)
        if text.startswith("e="):
            raise ScramError(f"the server refused: {text[2:]}")
        if not text.startswith("v=") or not hmac.compare_digest(_unb64(text[2:]), self._server_signature):
            raise ScramError("the server's signature does not match")
