"""Client quotas in the metadata log: AlterClientQuotas and DescribeClientQuotas on the
controller (Kafka's checks and filters), replay into the image, and snapshots."""

from __future__ import annotations

from test_metadata_helpers import Harness

from kraft.protocol import codec
from kraft.protocol.error_codes import ErrorCode
from metadata.delta import image_from_records
from metadata.serde import decode, encode

E = ErrorCode


def ent(**names):
    """An EntityData list: ent(user="alice", client_id=None) -> user alice, <default> client-id."""
    return [{"entity_type": k.replace("_", "-"), "entity_name": v} for k, v in names.items()]


def op(key, value=0.0, remove=False):
    return {"key": key, "value": float(value), "remove": remove}


def alter(h, *entries, validate_only=False):
    resp = h.send("AlterClientQuotas", {"entries": [{"entity": e, "ops": ops} for e, ops in entries],
                                        "validate_only": validate_only})
    return [(e["error_code"], e["error_message"]) for e in resp["entries"]]


def describe(h, *components, strict=False):
    return h.send("DescribeClientQuotas", {"components": [
        {"entity_type": t, "match_type": m, "match": n} for t, m, n in components], "strict": strict})


def entries(resp):
    return [({e["entity_type"]: e["entity_name"] for e in entry["entity"]},
             {v["key"]: v["value"] for v in entry["values"]}) for entry in resp["entries"]]


def test_alter_writes_client_quota_records_and_the_image_keeps_them():
    h = Harness()
    assert alter(h, (ent(client_id="app"), [op("producer_byte_rate", 1024), op("request_percentage", 12.5)]),
                 (ent(user="alice", client_id=None), [op("consumer_byte_rate", 2048)]),
                 (ent(user=None), [op("producer_byte_rate", 10)])) == [(0, None)] * 3
    image = h.ctl.image
    assert dict(image.client_quotas) == {
        (("client-id", "app"),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0},
        (("user", None),): {"producer_byte_rate": 10.0}}
    records = [r for r in h.records() if r.name == "ClientQuotaRecord"]
    assert len(records) == 4 and all(decode(encode(r)) == r for r in records)
    snapshot = image_from_records(image.records(), image.offset)
    assert snapshot.client_quotas == image.client_quotas
    # Removing a key writes a removal; removing the last key of an entity drops the entity;
    # removing a key that is not set writes nothing.
    before = len(h.records())
    assert alter(h, (ent(client_id="app"), [op("producer_byte_rate", remove=True)]),
                 (ent(user=None), [op("producer_byte_rate", remove=True), op("consumer_byte_rate", remove=True)])) \
        == [(0, None)] * 2
    assert len(h.records()) == before + 2
    assert dict(h.ctl.image.client_quotas) == {
        (("client-id", "app"),): {"request_percentage": 12.5},
        (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0}}
    # validate_only checks and writes nothing
    assert alter(h, (ent(client_id="x"), [op("producer_byte_rate", 5)]), validate_only=True) == [(0, None)]
    assert (("client-id", "x"),) not in h.ctl.image.client_quotas


def test_alter_refuses_entity_by_entity_with_invalid_request():
    h = Harness()
    results = alter(
        h,
        (ent(client_id="ok"), [op("producer_byte_rate", 100)]),
        ([], [op("producer_byte_rate", 1)]),
        (ent(group="g"), [op("producer_byte_rate", 1)]),
        (ent(client_id=""), [op("producer_byte_rate", 1)]),
        (ent(client_id="a"), [op("bogus", 1)]),
        (ent(client_id="b"), [op("producer_byte_rate", 0)]),
        (ent(client_id="c"), [op("producer_byte_rate", 1.5)]),
        (ent(client_id="d"), [op("producer_byte_rate", 1), op("producer_byte_rate", 2)]),
        (ent(ip="10.0.0.1", user="u"), [op("connection_creation_rate", 1)]),
        (ent(ip="10.0.0.1"), [op("producer_byte_rate", 1)]),
        (ent(client_id="e"), [op("request_percentage", 0.5)]),
    )
    assert [code for code, _ in results] == [0] + [E.INVALID_REQUEST] * 9 + [0]
    assert "Invalid configuration key bogus" in results[4][1]
    assert "fractional" in results[6][1]
    assert sorted(k[0][1] for k in h.ctl.image.client_quotas) == ["e", "ok"]
    twice = alter(h, (ent(client_id="z"), [op("producer_byte_rate", 1)]),
                  (ent(client_id="z"), [op("consumer_byte_rate", 1)]))
    assert [code for code, _ in twice] == [E.INVALID_REQUEST] * 2


def test_describe_filters_as_kafka_does():
    h = Harness()
    alter(h, (ent(client_id="app"), [op("producer_byte_rate", 1)]),
          (ent(client_id=None), [op("producer_byte_rate", 2)]),
          (ent(user="alice"), [op("producer_byte_rate", 3)]),
          (ent(user="alice", client_id="app"), [op("producer_byte_rate", 4)]),
          (ent(user=None, client_id=None), [op("producer_byte_rate", 5)]))
    EXACT, DEFAULT, SPECIFIED = 0, 1, 2
    assert entries(describe(h)) == entries(describe(h, strict=False))
    assert len(describe(h)["entries"]) == 5
    assert entries(describe(h, ("client-id", EXACT, "app"))) == [
        ({"client-id": "app"}, {"producer_byte_rate": 1.0}),
        ({"client-id": "app", "user": "alice"}, {"producer_byte_rate": 4.0})]
    assert entries(describe(h, ("client-id", EXACT, "app"), strict=True)) == [
        ({"client-id": "app"}, {"producer_byte_rate": 1.0})]
    assert entries(describe(h, ("client-id", DEFAULT, None), strict=True)) == [
        ({"client-id": None}, {"producer_byte_rate": 2.0})]
    assert entries(describe(h, ("user", SPECIFIED, None), strict=True)) == [
        ({"user": "alice"}, {"producer_byte_rate": 3.0})]
    assert [e[1]["producer_byte_rate"] for e in entries(describe(h, ("user", SPECIFIED, None), ("client-id", SPECIFIED, None)))] == [5.0, 4.0]
    for bad in ([("client-id", EXACT, None)], [("client-id", DEFAULT, "x")], [("user", 7, None)],
                [("user", SPECIFIED, None), ("user", DEFAULT, None)], [("ip", SPECIFIED, None), ("user", SPECIFIED, None)]):
        resp = describe(h, *bad)
        assert resp["error_code"] == E.INVALID_REQUEST and resp["entries"] is None, bad
    assert describe(h, ("group", SPECIFIED, None))["error_code"] == E.UNSUPPORTED_VERSION


def test_the_apis_encode_at_every_version():
    for version in (0, 1):
        for api in ("AlterClientQuotas", "DescribeClientQuotas"):
            for kind in ("request", "response"):
                body = codec.default_message(api, kind)
                assert codec.decode(api, kind, version, codec.encode(api, kind, version, body)) == body
