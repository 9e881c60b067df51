"""TLS contexts from Kafka's PEM key material keys, and the principal of a peer certificate.

``get(key)`` returns a key's effective value (after ``listener.name.<l>.`` overrides) or
None.  Keys: ``ssl.keystore.type`` / ``ssl.truststore.type`` (PEM only),
``ssl.keystore.location`` (a PEM file with the private key and the certificate chain) or
``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (PEM text in the value),
``ssl.key.password``, ``ssl.truststore.location`` / ``ssl.truststore.certificates``,
``ssl.client.auth`` (none, requested, required; servers), ``ssl.endpoint.identification.algorithm``
(``https`` checks the server's host name; empty does not; clients), ``ssl.enabled.protocols``.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from typing import Callable

ANONYMOUS = "User:ANONYMOUS"
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ValueError):
    pass


def _pem(text: str) -> str:
    """PEM blocks re-wrapped: a value continued over lines in a properties file loses its
    line breaks, which Kafka's PEM reader tolerates and OpenSSL does not."""
    blocks = re.findall(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", text, re.S)
    if not blocks:
        raise TlsConfigError("no PEM block in the value")
    out = []
    for label, body in blocks:
        lines = [ln.strip() for ln in body.strip().splitlines()]
        headers = [ln for ln in lines if ":" in ln]  # Proc-Type / DEK-Info of encrypted keys
        data = "".join(ln for ln in lines if ln and ":" not in ln).replace(" ", "")
        wrapped = "\n".join(data[i:i + 64] for i in range(0, len(data), 64))
        head = "\n".join(headers) + "\n\n" if headers else ""
        out.append(f"-----BEGIN {label}-----\n{head}{wrapped}\n-----END {label}-----\n")
    return "".join(out)


def _check_types(get: Callable[[str], str | None]) -> None:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        value = get(key)
        if value is not None and value.upper() != "PEM":
            raise TlsConfigError(f"{key}={value}: kraft reads PEM key material only (set {key}=PEM)")


def _load_keystore(ctx: ssl.SSLContext, get, *, required: bool) -> None:
    password = get("ssl.key.password") or None
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        elif chain and key:
            # ssl loads key material from files only: a private temporary file, removed at once
            fd, path = tempfile.mkstemp(prefix="kraft-keystore-", suffix=".pem")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(_pem(key) + _pem(chain))
                ctx.load_cert_chain(path, password=password)
            finally:
                os.unlink(path)
        elif required:
            raise TlsConfigError("a TLS listener needs ssl.keystore.location, or ssl.keystore.certificate.chain "
                                 "and ssl.keystore.key")
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"cannot load the keystore: {exc}") from None


def _load_truststore(ctx: ssl.SSLContext, get) -> bool:
    location, certificates = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        elif certificates:
            ctx.load_verify_locations(cadata=_pem(certificates))
        else:
            return False
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"cannot load the truststore: {exc}") from None
    return True


def _protocols(ctx: ssl.SSLContext, get) -> None:
    enabled = [p.strip() for p in (get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    versions = [_PROTOCOLS[p] for p in enabled if p in _PROTOCOLS]
    if not versions:
        raise TlsConfigError(f"ssl.enabled.protocols: none of {enabled} is TLSv1.2 or TLSv1.3")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)


def server_context(get: Callable[[str], str | None]) -> ssl.SSLContext:
    _check_types(get)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, get)
    _load_keystore(ctx, get, required=True)
    client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth={client_auth}: must be none, requested or required")
    if client_auth != "none" and not _load_truststore(ctx, get):
        raise TlsConfigError(f"ssl.client.auth={client_auth} needs ssl.truststore.location or "
                             "ssl.truststore.certificates")
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    return ctx


def client_context(get: Callable[[str], str | None]) -> ssl.SSLContext:
    _check_types(get)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, get)
    if not _load_truststore(ctx, get):
        ctx.load_default_certs()
    _load_keystore(ctx, get, required=False)  # a client certificate, for ssl.client.auth
    algorithm = get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = (algorithm if algorithm is not None else "https").lower() == "https"
    return ctx


def principal_of_certificate(der: bytes | None) -> str:
    """Kafka's default principal builder: ``User:`` and the subject's distinguished name in
    RFC 2253 form (most specific first, e.g. ``User:CN=alice,O=kraft``), or ANONYMOUS without
    a certificate.  (``ssl.principal.mapping.rules`` is DEFAULT only.)"""
    if not der:
        return ANONYMOUS
    from cryptography import x509

    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
