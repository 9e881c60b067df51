"""Security settings per listener, from Kafka's keys.

A listener's protocol comes from ``listener.security.protocol.map``; every ``ssl.*`` and
``sasl.*`` key may be overridden for one listener as ``listener.name.<listener>.<key>``, and
SASL's JAAS configuration is per listener and mechanism:
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (e.g. ``listener.name.sasl_ssl.
plain.sasl.jaas.config``).  The PLAIN server takes its users from that entry's
``user_<name>`` options; the node's own client side (replication, controller and Raft
connections) takes ``username`` and ``password`` from the entry of the mechanism it uses
towards that listener: ``sasl.mechanism.inter.broker.protocol`` for the inter-broker
listener, ``sasl.mechanism.controller.protocol`` for the controller listener, as Kafka.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Callable, Mapping

from kraft.security import tls
from kraft.security.jaas import JaasEntry, JaasError, parse_jaas_config
from kraft.security.sasl import PLAIN, SUPPORTED_MECHANISMS

PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class SecurityConfigError(ValueError):
    """A security setting that cannot work; the message names the key."""


def listener_getter(props: Mapping[str, str], listener: str,
                    defaults: Mapping[str, str] | None = None) -> Callable[[str], str | None]:
    """``get(key)``: ``listener.name.<listener>.<key>``, else ``<key>``, else the default."""
    prefix = f"listener.name.{listener.lower()}."
    defaults = defaults or {}

    def get(key: str) -> str | None:
        value = props.get(prefix + key)
        if value is None:
            value = props.get(key, defaults.get(key))
        return value

    return get


def _jaas(get, mechanism: str, where: str) -> JaasEntry | None:
    text = get(f"{mechanism.lower()}.sasl.jaas.config")
    if text is None:
        return None
    try:
        return parse_jaas_config(text)[0]
    except JaasError as exc:
        raise SecurityConfigError(f"{where}.{mechanism.lower()}.sasl.jaas.config: {exc}") from None


def enabled_mechanisms(get, where: str) -> tuple[str, ...]:
    mechanisms = tuple(m.strip().upper() for m in (get("sasl.enabled.mechanisms") or "GSSAPI").split(",")
                       if m.strip())
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported or not mechanisms:
        raise SecurityConfigError(f"{where}sasl.enabled.mechanisms: {', '.join(unsupported) or 'empty'} not "
                                  f"supported (kraft has {', '.join(SUPPORTED_MECHANISMS)})")
    return mechanisms


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """What a server listener needs: its TLS context and its SASL mechanisms and users."""

    listener: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


def listener_security(props: Mapping[str, str], listener: str, protocol: str) -> ListenerSecurity:
    """The server side of ``listener`` (raises SecurityConfigError)."""
    get = listener_getter(props, listener)
    where = f"listener.name.{listener.lower()}."
    context = None
    if protocol in TLS_PROTOCOLS:
        try:
            context = tls.server_context(get)
        except tls.TlsConfigError as exc:
            raise SecurityConfigError(f"listener {listener}: {exc}") from None
    mechanisms: tuple[str, ...] = ()
    users: dict[str, str] = {}
    if protocol in SASL_PROTOCOLS:
        mechanisms = enabled_mechanisms(get, where)
        if PLAIN in mechanisms:
            entry = _jaas(get, PLAIN, where.rstrip("."))
            if entry is None:
                raise SecurityConfigError(f"{where}plain.sasl.jaas.config: required with PLAIN enabled "
                                          "(PlainLoginModule with user_<name>=\"<password>\" entries)")
            users = entry.users()
    return ListenerSecurity(listener, protocol, context, mechanisms, users)


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """What the client side of a connection needs (``kraft.client``)."""

    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS


PLAINTEXT_CLIENT = ClientSecurity()


def _client(get, protocol: str, mechanism: str | None, jaas_text: str | None, where: str) -> ClientSecurity:
    if protocol not in PROTOCOL_IDS:
        raise SecurityConfigError(f"{where}: unknown security protocol {protocol!r}")
    context = None
    if protocol in TLS_PROTOCOLS:
        try:
            context = tls.client_context(get)
        except tls.TlsConfigError as exc:
            raise SecurityConfigError(f"{where}: {exc}") from None
    if protocol not in SASL_PROTOCOLS:
        return ClientSecurity(protocol, context)
    mechanism = (mechanism or "GSSAPI").upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise SecurityConfigError(f"{where}: SASL mechanism {mechanism} not supported "
                                  f"(kraft has {', '.join(SUPPORTED_MECHANISMS)})")
    if jaas_text is None:
        raise SecurityConfigError(f"{where}: no sasl.jaas.config with username and password for {mechanism}")
    try:
        options = parse_jaas_config(jaas_text)[0].options
    except JaasError as exc:
        raise SecurityConfigError(f"{where}: sasl.jaas.config: {exc}") from None
    if "username" not in options or "password" not in options:
        raise SecurityConfigError(f"{where}: the {mechanism} sasl.jaas.config needs username and password")
    return ClientSecurity(protocol, context, mechanism, options["username"], options["password"])


def node_client_security(props: Mapping[str, str], listener: str, protocol: str,
                         mechanism: str | None) -> ClientSecurity:
    """A node's own client towards ``listener`` of its peers (replication towards the
    inter-broker listener, Raft and broker-to-controller towards the controller listener)."""
    get = listener_getter(props, listener)
    jaas = None
    if protocol in SASL_PROTOCOLS and mechanism:
        jaas = get(f"{mechanism.lower()}.sasl.jaas.config")
    return _client(get, protocol, mechanism, jaas, f"listener {listener}")


def client_security_from_properties(props: Mapping[str, str]) -> ClientSecurity:
    """A client's Kafka properties (``--command-config``): ``security.protocol``,
    ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.*``."""
    protocol = (props.get("security.protocol") or "PLAINTEXT").upper()
    return _client(props.get, protocol, props.get("sasl.mechanism"), props.get("sasl.jaas.config"),
                   "security.protocol")
