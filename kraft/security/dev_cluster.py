"""The security of a development cluster (``LocalCluster(security=...)``, ``kraftctl cluster
--security``): every listener, the controllers' included, on ``protocol`` with throwaway
certificates (``dev_certs``); SASL users ``admin`` (the nodes' own) and ``users``, each with
SCRAM-SHA-256/512 credentials bootstrapped at format time (KIP-900) and a PLAIN password.

Node-to-node traffic uses the cluster's protocol: brokers authenticate with
``mechanism`` (SCRAM-SHA-512 by default) on the inter-broker listener; the controller
listener uses PLAIN (as in Kafka, SCRAM cannot authenticate the controller quorum: its
credentials live in the metadata log that the quorum itself replicates).  On SSL, every
listener requires client certificates (mutual TLS) and nodes present theirs.

The nodes' own principals (``User:admin``, and on TLS the server certificate's; on SSL the
first client certificate's too, the admin's there) are ``super.users``, so with ``authorizer=True`` (``authorizer.class.name``: ACLs, Kafka's
StandardAuthorizer) replication, the quorum and the admin user keep working while every
other user needs ACLs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kraft.security.authorizer import STANDARD_AUTHORIZER
from kraft.security.config import SASL_PROTOCOLS, TLS_PROTOCOLS
from kraft.security.dev_certs import DevCertificates, write_dev_certificates

CONTROLLER = "CONTROLLER"
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class ClusterSecurity:
    protocol: str = "SASL_SSL"  # SSL, SASL_PLAINTEXT or SASL_SSL
    mechanism: str = "SCRAM-SHA-512"  # the brokers' own, on the inter-broker listener
    users: dict[str, str] = field(default_factory=dict)  # more SASL users: name -> password
    extra_listeners: dict[str, str] = field(default_factory=dict)  # more client listeners: name -> protocol
    client_certificates: tuple[str, ...] = ("client",)
    admin_user: str = "admin"
    admin_password: str = "admin-secret"
    authorizer: bool = False  # ACLs on (authorizer.class.name), the nodes' principals super users
    certificates: DevCertificates | None = None  # written by prepare()

    def __post_init__(self):
        self.protocol = self.protocol.upper()
        if self.protocol not in TLS_PROTOCOLS | SASL_PROTOCOLS:
            raise ValueError(f"security protocol {self.protocol}: SSL, SASL_PLAINTEXT or SASL_SSL")

    @property
    def all_users(self) -> dict[str, str]:
        return {self.admin_user: self.admin_password, **self.users}

    @property
    def listener_protocols(self) -> dict[str, str]:
        """Broker listener name -> protocol: the main one (the inter-broker listener) first."""
        return {self.protocol: self.protocol, **{k.upper(): v.upper() for k, v in self.extra_listeners.items()}}

    def prepare(self, directory: Path, hosts) -> None:
        if self.certificates is None and (TLS_PROTOCOLS & ({self.protocol} | set(self.listener_protocols.values()))):
            self.certificates = write_dev_certificates(directory, hosts, self.client_certificates)

    def format_args(self) -> list[str]:
        return [arg for user, password in self.all_users.items() for mech in SCRAM
                for arg in ("--add-scram", f"{mech}=[name={user},password={password}]")]

    def properties(self) -> dict[str, str]:
        listeners = {CONTROLLER: self.protocol, **self.listener_protocols}
        props = {
            "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in listeners.items()),
            "inter.broker.listener.name": self.protocol,
        }
        if any(p in TLS_PROTOCOLS for p in listeners.values()):
            certs = self.certificates
            props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
                          "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)})
            if self.protocol == "SSL":
                props["ssl.client.auth"] = "required"
        admin = f"username={_quote(self.admin_user)} password={_quote(self.admin_password)}"
        plain_users = " ".join(f"user_{u}={_quote(p)}" for u, p in self.all_users.items())
        for name, protocol in listeners.items():
            if protocol not in SASL_PROTOCOLS:
                continue
            prefix = f"listener.name.{name.lower()}."
            props[prefix + "plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {admin} {plain_users};")
            if name == CONTROLLER:
                props[prefix + "sasl.enabled.mechanisms"] = "PLAIN"
                continue
            props[prefix + "sasl.enabled.mechanisms"] = ",".join(("PLAIN",) + SCRAM)
            for mech in SCRAM:
                props[prefix + f"{mech.lower()}.sasl.jaas.config"] = (
                    f"org.apache.kafka.common.security.scram.ScramLoginModule required {admin};")
        if self.protocol in SASL_PROTOCOLS:
            props["sasl.mechanism.inter.broker.protocol"] = self.mechanism
            props["sasl.mechanism.controller.protocol"] = "PLAIN"
        props["super.users"] = ";".join(self.node_principals())
        if self.authorizer:
            props["authorizer.class.name"] = STANDARD_AUTHORIZER
        return props

    def node_principals(self) -> list[str]:
        """Who the nodes are to each other: the SASL admin user, and the subject of the
        certificate they present on TLS listeners."""
        out = [f"User:{self.admin_user}"]
        if self.certificates is not None:
            from cryptography import x509

            server = x509.load_pem_x509_certificates(self.certificates.server.read_bytes())[0]
            out.append("User:" + server.subject.rfc4514_string())
            if self.protocol == "SSL" and self.client_certificates:  # no SASL admin: the first client's
                out.append(self.certificates.clients[self.client_certificates[0]].principal)
        return out

    def client_properties(self, listener: str | None = None, user: str | None = None,
                          mechanism: str | None = None) -> dict[str, str]:
        """Java client properties (``--command-config``, Kafka's tools) for ``listener``."""
        protocol = {CONTROLLER: self.protocol, **self.listener_protocols}[(listener or self.protocol).upper()]
        props = {"security.protocol": protocol}
        user = user or self.admin_user
        if protocol in SASL_PROTOCOLS:
            mechanism = mechanism or self.mechanism
            module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
            props["sasl.mechanism"] = mechanism
            props["sasl.jaas.config"] = (f"org.apache.kafka.common.security.{module} required "
                                         f"username={_quote(user)} password={_quote(self.all_users[user])};")
        if protocol in TLS_PROTOCOLS:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.certificates.ca)})
            if listener and listener.upper() == CONTROLLER and protocol == "SSL":
                props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.certificates.server)})
            elif protocol == "SSL" and self.client_certificates:
                client = self.certificates.clients[self.client_certificates[0]]
                props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(client.keystore)})
        return props

    def librdkafka_config(self, listener: str | None = None, user: str | None = None,
                          mechanism: str | None = None) -> dict[str, str]:
        """The same for confluent-kafka (librdkafka's keys)."""
        java = self.client_properties(listener, user, mechanism)
        out = {"security.protocol": java["security.protocol"]}
        if "sasl.mechanism" in java:
            user = user or self.admin_user
            out.update({"sasl.mechanism": java["sasl.mechanism"], "sasl.username": user,
                        "sasl.password": self.all_users[user]})
        if "ssl.truststore.location" in java:
            out["ssl.ca.location"] = java["ssl.truststore.location"]
        if "ssl.keystore.location" in java:
            client = self.certificates.clients[self.client_certificates[0]]
            out.update({"ssl.certificate.location": str(client.certificate), "ssl.key.location": str(client.key)})
        return out

    def client_security(self, listener: str | None = None, user: str | None = None, mechanism: str | None = None):
        """A ``kraft.client`` ClientSecurity for ``listener`` (CONTROLLER: PLAIN as admin)."""
        from kraft.security.config import client_security_from_properties

        if listener and listener.upper() == CONTROLLER:
            mechanism = "PLAIN"
        return client_security_from_properties(self.client_properties(listener, user, mechanism))
