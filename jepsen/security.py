"""A run over TLS and SASL (``--security SSL|SASL_PLAINTEXT|SASL_SSL``): the cluster's
listeners, the inter-broker and the controller traffic all use it, and every client the
harness opens (the workload's, the admin clients of setup, the oracle and the membership
nemesis, the final reads) asks here for its settings, so a run measures what security
costs under faults and checks that nothing is lost through it.

The run sets the cluster's ``ClusterSecurity`` once (``use``), before any client exists;
clients run in the harness's one process, so one module-level setting serves them all.
"""

from __future__ import annotations

PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")

_cluster_security = None  # kraft.security.dev_cluster.ClusterSecurity, or None (PLAINTEXT)


def use(security) -> None:
    global _cluster_security
    _cluster_security = security


def protocol() -> str:
    return _cluster_security.protocol if _cluster_security is not None else "PLAINTEXT"


def cluster_security(protocol_name: str | None):
    """The ``ClusterSecurity`` for ``--security`` (None for PLAINTEXT)."""
    if protocol_name is None or protocol_name.upper() == "PLAINTEXT":
        return None
    from kraft.security.dev_cluster import ClusterSecurity

    if protocol_name.upper() not in PROTOCOLS:
        raise ValueError(f"--security {protocol_name}: one of PLAINTEXT, {', '.join(PROTOCOLS)}")
    return ClusterSecurity(protocol_name.upper())


def librdkafka(conf: dict) -> dict:
    """``conf`` with the run's security settings (confluent-kafka)."""
    if _cluster_security is None:
        return conf
    return {**conf, **_cluster_security.librdkafka_config()}


def kafka_python(kwargs: dict) -> dict:
    """``kwargs`` with the run's security settings (kafka-python)."""
    if _cluster_security is None:
        return kwargs
    conf = _cluster_security.librdkafka_config()
    out = dict(kwargs, security_protocol=conf["security.protocol"])
    if "sasl.mechanism" in conf:
        out.update(sasl_mechanism=conf["sasl.mechanism"], sasl_plain_username=conf["sasl.username"],
                   sasl_plain_password=conf["sasl.password"])
    if "ssl.ca.location" in conf:
        out.update(ssl_cafile=conf["ssl.ca.location"])
    if "ssl.certificate.location" in conf:
        out.update(ssl_certfile=conf["ssl.certificate.location"], ssl_keyfile=conf["ssl.key.location"])
    return out


def kraft_client():
    """The run's ``kraft.client`` security (for ``cli.admin_client.AdminClient``); None: PLAINTEXT."""
    return _cluster_security.client_security() if _cluster_security is not None else None
