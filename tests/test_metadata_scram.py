"""SCRAM credentials in the metadata log: AlterUserScramCredentials and
DescribeUserScramCredentials on the controller, replay into the image, snapshots and
``kraftctl format --add-scram``'s bootstrap records."""

from __future__ import annotations

import pytest
from test_metadata_helpers import Harness

from kraft.protocol.error_codes import ErrorCode
from kraft.security.credentials import CredentialSpecError, bootstrap_records, parse_scram_specs
from kraft.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramClient, ScramServer
from metadata.delta import image_from_records

E = ErrorCode


def upsert(name, mechanism=SCRAM_SHA_512, password="secret", iterations=4096, salt=b"salt-salt"):
    return {"name": name, "mechanism": mechanism.type, "iterations": iterations, "salt": salt,
            "salted_password": mechanism.salted_password(password.encode(), salt, iterations)}


def authenticates(image, name, password, mechanism=SCRAM_SHA_512) -> bool:
    server = ScramServer(mechanism, lambda u: image.scram_credentials.get((u, mechanism.type)), "srv")
    client = ScramClient(mechanism, name, password, "cli")
    try:
        client.verify(server.step(client.final_message(server.step(client.first_message()))))
        return True
    except Exception:
        return False


def test_alter_stores_keys_not_passwords_and_describe_lists_them():
    h = Harness()
    resp = h.send("AlterUserScramCredentials", {"deletions": [], "upsertions": [
        upsert("alice"), upsert("alice", SCRAM_SHA_256, iterations=8192), upsert("bob")]})
    assert resp["results"] == [{"user": "alice", "error_code": 0, "error_message": None},
                               {"user": "bob", "error_code": 0, "error_message": None}]
    image = h.ctl.image
    assert authenticates(image, "alice", "secret") and not authenticates(image, "alice", "wrong")
    assert authenticates(image, "alice", "secret", SCRAM_SHA_256)
    records = [r for r in h.records() if r.name == "UserScramCredentialRecord"]
    assert len(records) == 3 and all(b"secret" not in repr(r.data).encode() for r in records)
    described = h.send("DescribeUserScramCredentials", {"users": None})
    assert [(r["user"], r["credential_infos"]) for r in described["results"]] == [
        ("alice", [{"mechanism": 1, "iterations": 8192}, {"mechanism": 2, "iterations": 4096}]),
        ("bob", [{"mechanism": 2, "iterations": 4096}])]
    one = h.send("DescribeUserScramCredentials", {"users": [{"name": "carol"}, {"name": "bob"}, {"name": "bob"}]})
    assert [(r["user"], r["error_code"]) for r in one["results"]] == [
        ("carol", E.RESOURCE_NOT_FOUND), ("bob", E.DUPLICATE_RESOURCE)]
    # a snapshot of the image carries the credentials
    assert image_from_records(image.records(), image.offset).scram_credentials == image.scram_credentials
    resp = h.send("AlterUserScramCredentials", {"deletions": [{"name": "alice", "mechanism": 2}], "upsertions": []})
    assert resp["results"][0]["error_code"] == 0
    assert not authenticates(h.ctl.image, "alice", "secret") and authenticates(h.ctl.image, "bob", "secret")


def test_alter_refuses_with_kafkas_error_codes_user_by_user():
    h = Harness()
    resp = h.send("AlterUserScramCredentials", {
        "deletions": [{"name": "ghost", "mechanism": 2}, {"name": "dup", "mechanism": 2}],
        "upsertions": [upsert("few", iterations=10), upsert("many", iterations=20000), upsert(""),
                       {**upsert("weird"), "mechanism": 7}, upsert("dup"), upsert("ok")]})
    codes = {r["user"]: r["error_code"] for r in resp["results"]}
    assert codes == {"ghost": E.RESOURCE_NOT_FOUND, "dup": E.DUPLICATE_RESOURCE, "few": E.UNACCEPTABLE_CREDENTIAL,
                     "many": E.UNACCEPTABLE_CREDENTIAL, "": E.UNACCEPTABLE_CREDENTIAL,
                     "weird": E.UNSUPPORTED_SASL_MECHANISM, "ok": 0}
    assert set(u for u, _ in h.ctl.image.scram_credentials) == {"ok"}


def test_format_add_scram_specs_become_bootstrap_records():
    assert [(m.name, f) for m, f in parse_scram_specs(
        'SCRAM-SHA-256=[name=alice,iterations=8192,password="a,b"],SCRAM-SHA-512=[name=bob,password=x]')] == [
        ("SCRAM-SHA-256", {"name": "alice", "iterations": "8192", "password": "a,b"}),
        ("SCRAM-SHA-512", {"name": "bob", "password": "x"})]
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-512=name=a", "SCRAM-SHA-512=[name]",
                "SCRAM-SHA-512=[name=a,password=\"x]"):
        with pytest.raises(CredentialSpecError):
            parse_scram_specs(bad)
    records = bootstrap_records(["SCRAM-SHA-512=[name=alice,password=alice-secret]"])
    image = image_from_records(records, 0)
    assert authenticates(image, "alice", "alice-secret")
    h = Harness()
    h.ctl.bootstrap = tuple(records)
    h.send("DescribeUserScramCredentials", {"users": None})
    assert authenticates(h.ctl.image, "alice", "alice-secret")
