"""The sans-IO security cores: SCRAM against the RFCs' example exchanges, the SASL server
state machine, and JAAS config parsing."""

import base64

import pytest

from kraft.protocol.error_codes import ErrorCode
from kraft.security.jaas import JaasError, parse_jaas_config
from kraft.security.sasl import SaslServerSession, SaslState
from kraft.security.scram import (SCRAM_SHA_1, SCRAM_SHA_256, SCRAM_SHA_512, ScramClient, ScramError,
                                  ScramServer, credential)

# RFC 5802 section 5 (SCRAM-SHA-1) and RFC 7677 section 3 (SCRAM-SHA-256): user "user",
# password "pencil", the messages exactly as the RFCs print them.
RFC_EXCHANGES = [
    (SCRAM_SHA_1, "fyko+d2lbbFgONRv9qkxdawL", "3rfcNHYJY1ZVvWVs7j", "QSXCR+Q6sek8bf92",
     b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
     b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
     b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
     b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ="),
    (SCRAM_SHA_256, "rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", "W22ZaJ0SNY7soEsUEjb6gQ==",
     b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
     b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
     b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
     b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
]


@pytest.mark.parametrize("exchange", RFC_EXCHANGES, ids=["rfc5802-sha1", "rfc7677-sha256"])
def test_scram_client_and_server_reproduce_the_rfc_examples(exchange):
    mechanism, cnonce, snonce, salt, c1, s1, c2, s2 = exchange
    cred = credential(mechanism, "pencil", base64.b64decode(salt), 4096)
    server = ScramServer(mechanism, lambda user: cred if user == "user" else None, snonce)
    client = ScramClient(mechanism, "user", "pencil", cnonce)
    assert client.first_message() == c1
    assert server.step(c1) == s1
    assert client.final_message(s1) == c2
    assert server.step(c2) == s2
    assert server.done and server.username == "user"
    client.verify(s2)


def _exchange(mechanism, password, stored_password="secret", user="alice"):
    cred = credential(mechanism, stored_password, b"salt" * 8, 4096)
    server = ScramServer(mechanism, lambda u: cred if u == "alice" else None, "servernonce")
    client = ScramClient(mechanism, user, password, "clientnonce")
    server_first = server.step(client.first_message())
    return server, client, server.step(client.final_message(server_first))


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_scram_refuses_a_wrong_password_and_an_unknown_user(mechanism):
    server, client, final = _exchange(mechanism, "secret")
    client.verify(final)
    with pytest.raises(ScramError):
        _exchange(mechanism, "wrong")
    with pytest.raises(ScramError):
        _exchange(mechanism, "secret", user="mallory")


def test_scram_client_refuses_a_server_that_does_not_know_the_credential():
    cred = credential(SCRAM_SHA_512, "other", b"s" * 16, 4096)
    impostor = ScramServer(SCRAM_SHA_512, lambda u: cred, "x")
    client = ScramClient(SCRAM_SHA_512, "alice", "secret", "c")
    server_first = impostor.step(client.first_message())
    client.final_message(server_first)
    with pytest.raises(ScramError):
        client.verify(b"v=" + base64.b64encode(b"\0" * 64))


@pytest.mark.parametrize("message", [
    b"", b"garbage", b"p=tls-unique,,n=user,r=abc", b"n,,r=abc,n=user", b"n,,n=user", b"\xff\xfe",
    b"n,x,n=user,r=a", b"n,,n=us=er,r=a", b"n,a=bob,n=alice,r=x",
])
def test_scram_server_refuses_malformed_client_first_messages(message):
    cred = credential(SCRAM_SHA_256, "p", b"salt", 4096)
    with pytest.raises(ScramError):
        ScramServer(SCRAM_SHA_256, lambda u: cred, "n").step(message)


@pytest.mark.parametrize("final", [
    b"c=biws,r=abcn,p=", b"c=biws,r=other,p=AAAA", b"c=eSws,r=abcn,p=AAAA", b"r=abcn,c=biws,p=AAAA",
    b"c=biws,r=abcn", b"c=biws,r=abcn,p=!!!", b"c=biws,r=abcn,p=" + base64.b64encode(b"x" * 32),
])
def test_scram_server_refuses_malformed_client_final_messages(final):
    cred = credential(SCRAM_SHA_256, "p", b"salt", 4096)
    server = ScramServer(SCRAM_SHA_256, lambda u: cred, "n")
    server.step(b"n,,n=user,r=abc")
    with pytest.raises(ScramError):
        server.step(final)
    with pytest.raises(ScramError):  # the exchange is over after a failure
        server.step(final)


# -- the SASL session ------------------------------------------------------------------------

def _session(**kw):
    cred = credential(SCRAM_SHA_512, "alice-secret", b"s" * 32, 4096)
    return SaslServerSession(("PLAIN", "SCRAM-SHA-512"), plain_users={"alice": "alice-secret"},
                             scram_lookup=lambda m, u: cred if (m, u) == ("SCRAM-SHA-512", "alice") else None,
                             nonce="srv", **kw)


def test_sasl_plain_success_and_failure():
    s = _session()
    answer = s.receive("SaslHandshake", 1, {"mechanism": "PLAIN"})
    assert answer.body == {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]} and not answer.close
    answer = s.receive("SaslAuthenticate", 2, {"auth_bytes": b"\0alice\0alice-secret"})
    assert answer.body["error_code"] == 0 and not answer.close
    assert s.state is SaslState.COMPLETE and s.principal == "User:alice"
    for token in (b"\0alice\0wrong", b"\0bob\0alice-secret", b"alice-secret", b"bob\0alice\0alice-secret",
                  b"\0\0", b"\xff\0alice\0x"):
        s = _session()
        s.receive("SaslHandshake", 1, {"mechanism": "PLAIN"})
        answer = s.receive("SaslAuthenticate", 2, {"auth_bytes": token})
        assert answer.body["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED and answer.close
        assert answer.body["error_message"] and s.principal is None


def test_sasl_scram_exchange_through_the_session():
    s = _session()
    s.receive("SaslHandshake", 1, {"mechanism": "SCRAM-SHA-512"})
    client = ScramClient(SCRAM_SHA_512, "alice", "alice-secret", "cli")
    first = s.receive("SaslAuthenticate", 2, {"auth_bytes": client.first_message()})
    assert first.body["error_code"] == 0 and s.state is SaslState.AUTHENTICATE
    final = s.receive("SaslAuthenticate", 2, {"auth_bytes": client.final_message(first.body["auth_bytes"])})
    client.verify(final.body["auth_bytes"])
    assert s.principal == "User:alice"


def test_sasl_out_of_turn_requests_close_the_connection():
    s = _session()
    assert s.receive("Metadata", 12, {}).close  # skipping SASL
    s = _session()
    assert s.receive("SaslAuthenticate", 2, {"auth_bytes": b""}).close  # no handshake first
    s = _session()
    answer = s.receive("SaslHandshake", 1, {"mechanism": "GSSAPI"})
    assert answer.body["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM and answer.close
    s = _session()
    s.receive("SaslHandshake", 1, {"mechanism": "PLAIN"})
    assert s.receive("SaslHandshake", 1, {"mechanism": "PLAIN"}).close  # twice


# -- JAAS ------------------------------------------------------------------------------------

def test_jaas_config_parsing():
    entries = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="admin" password="admin-secret"\n  user_admin="admin-secret" user_alice="al\\"ice";')
    (entry,) = entries
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.flag == "required"
    assert entry.options["username"] == "admin" and entry.options["password"] == "admin-secret"
    assert entry.users() == {"admin": "admin-secret", "alice": 'al"ice'}
    two = parse_jaas_config('a.B optional debug=true; c.D REQUIRED x="1 2;3";')
    assert [(e.login_module, e.flag, e.options) for e in two] == [
        ("a.B", "optional", {"debug": "true"}), ("c.D", "required", {"x": "1 2;3"})]


@pytest.mark.parametrize("text", [
    "", "   ", "a.B required", "a.B sometimes;", 'a.B required user_x="y"', 'a.B required x=;',
    'a.B required ="y";', 'a.B required x "y";', 'a.B required x="unterminated;',
])
def test_jaas_config_errors(text):
    with pytest.raises(JaasError):
        parse_jaas_config(text)


# -- TLS principal ---------------------------------------------------------------------------

def test_principal_of_a_client_certificate_is_its_subject_in_rfc_2253_form(tmp_path):
    import ssl

    from kraft.security.dev_certs import write_dev_certificates
    from kraft.security.tls import ANONYMOUS, principal_of_certificate

    certs = write_dev_certificates(tmp_path, clients=("alice",))
    der = ssl.PEM_cert_to_DER_cert(certs.clients["alice"].certificate.read_text())
    # Kafka's default principal builder: X500Principal.getName(), most specific RDN first
    assert principal_of_certificate(der) == "User:CN=alice,O=kraft-dev" == certs.clients["alice"].principal
    assert principal_of_certificate(None) == ANONYMOUS == "User:ANONYMOUS"


@pytest.mark.parametrize("module", ["scram", "sasl", "jaas", "credentials"])
def test_security_cores_do_no_io(module):
    """The cores take and return bytes: no trio, sockets, clocks or module-level randomness."""
    import ast
    from pathlib import Path

    import kraft.security

    tree = ast.parse((Path(kraft.security.__file__).parent / f"{module}.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & {"trio", "socket", "time", "random", "ssl", "asyncio"}, imported
