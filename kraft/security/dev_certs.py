"""Throwaway TLS key material for development clusters and tests (``kraftctl cluster
--security``, ``LocalCluster``): a CA, one server certificate for the given hosts (usable as
a client certificate too, for node-to-node mutual TLS) and client certificates, all PEM.

Never for production: the keys are written unencrypted and the CA key sits beside them.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

ORGANIZATION = "kraft-dev"


@dataclass(frozen=True)
class DevCertificates:
    directory: Path
    ca: Path  # the CA certificate: every truststore
    server: Path  # server key + certificate chain in one PEM (ssl.keystore.location)
    clients: dict[str, "ClientCertificate"] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientCertificate:
    name: str
    certificate: Path  # the certificate alone (librdkafka's ssl.certificate.location)
    key: Path  # the key alone (ssl.key.location)
    keystore: Path  # key + certificate (a PEM keystore, ssl.keystore.location)
    principal: str  # what the broker's default principal builder makes of it


def _name(common_name: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _certificate(subject, key, issuer, issuer_key, *, ca: bool, sans=()):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=365))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False),
            critical=True)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    if sans:
        names = []
        for host in sans:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def write_dev_certificates(directory, hosts=("127.0.0.1", "localhost"), clients=("client",)) -> DevCertificates:
    """Write ``ca.pem``, ``server.pem`` and ``<client>.{crt,key,pem}`` into ``directory``."""
    from cryptography.hazmat.primitives import serialization

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name(f"{ORGANIZATION} CA")
    ca_cert = _certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (directory / "ca.pem").write_bytes(ca_pem)
    server_key = _key()
    hosts = tuple(dict.fromkeys((*hosts, "127.0.0.1", "localhost")))
    server_cert = _certificate(_name(hosts[0]), server_key, ca_name, ca_key, ca=False, sans=hosts)
    server = directory / "server.pem"
    server.write_bytes(_pem_key(server_key) + server_cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
    server.chmod(0o600)
    out = {}
    for name in clients:
        key = _key()
        cert = _certificate(_name(name), key, ca_name, ca_key, ca=False)
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        paths = [directory / f"{name}.crt", directory / f"{name}.key", directory / f"{name}.pem"]
        paths[0].write_bytes(cert_pem)
        paths[1].write_bytes(_pem_key(key))
        paths[2].write_bytes(_pem_key(key) + cert_pem)
        for p in paths[1:]:
            p.chmod(0o600)
        out[name] = ClientCertificate(name, *paths, principal=f"User:CN={name},O={ORGANIZATION}")
    return DevCertificates(directory, directory / "ca.pem", server, out)
