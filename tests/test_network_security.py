"""The trio shell of listener security: a real TLS handshake over an in-memory stream pair
gives the connection the principal of the client's certificate (Kafka's default principal
builder), or ANONYMOUS without one; a failed handshake closes the stream."""

from __future__ import annotations

import ssl

import pytest
import trio
import trio.testing

from broker.network_security import ListenerAuth
from kraft.security.config import listener_security
from kraft.security.dev_certs import write_dev_certificates


@pytest.fixture
def certs(tmp_path):
    return write_dev_certificates(tmp_path, clients=("alice",))


def _auth(certs, client_auth):
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
             "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca),
             "listener.name.mtls.ssl.client.auth": client_auth}
    return ListenerAuth(listener_security(props, "MTLS", "SSL"))


async def _handshake(auth, client_context):
    client_raw, server_raw = trio.testing.memory_stream_pair()
    client = trio.SSLStream(client_raw, client_context, server_hostname="127.0.0.1")
    result = {}

    async def server():
        result["secured"] = await auth.secure(server_raw, "test")

    async def run_client():
        try:
            await client.do_handshake()
            await client.send_all(b"x")  # TLS 1.3: the server checks the certificate after the client's flight
        except trio.BrokenResourceError:
            result["client_failed"] = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        nursery.start_soon(run_client)
    return result


def _client_context(certs, with_certificate):
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if with_certificate:
        client = certs.clients["alice"]
        ctx.load_cert_chain(str(client.certificate), str(client.key))
    return ctx


async def test_the_principal_comes_from_the_client_certificate(certs):
    result = await _handshake(_auth(certs, "required"), _client_context(certs, True))
    assert result["secured"][1] == "User:CN=alice,O=kraft-dev"


async def test_requested_client_auth_without_a_certificate_is_anonymous(certs):
    result = await _handshake(_auth(certs, "requested"), _client_context(certs, False))
    assert result["secured"][1] == "User:ANONYMOUS"


async def test_required_client_auth_without_a_certificate_fails_the_handshake(certs):
    result = await _handshake(_auth(certs, "required"), _client_context(certs, False))
    assert result["secured"] is None
