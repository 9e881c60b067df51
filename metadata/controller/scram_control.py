"""SCRAM credentials (KIP-554): AlterUserScramCredentials and DescribeUserScramCredentials.

An upsertion carries the salt and the *salted* password (the client salts; the password never
leaves it); the controller keeps only StoredKey and ServerKey in a UserScramCredentialRecord
and a deletion writes RemoveUserScramCredentialRecord.  Users succeed or fail one by one,
with Kafka's checks and error codes: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM,
an empty name or iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL, deleting what does
not exist RESOURCE_NOT_FOUND, a user/mechanism named twice DUPLICATE_RESOURCE.
"""

from __future__ import annotations

from collections import Counter

from kraft.protocol.error_codes import ErrorCode
from kraft.security.scram import MECHANISMS_BY_TYPE, credential_from_salted
from metadata.controller.common import ControllerContext, Txn
from metadata.serde import make


def alter_user_scram_credentials(ctx: ControllerContext, txn: Txn, version: int, req: dict,
                                 now_ms: int) -> dict:
    image = txn.image
    named = Counter([(d["name"], d["mechanism"]) for d in req["deletions"]]
                    + [(u["name"], u["mechanism"]) for u in req["upsertions"]])
    errors: dict[str, tuple[int, str]] = {}  # user -> first error
    records: dict[str, list] = {}
    users: list[str] = []

    def fail(user, code, message):
        errors.setdefault(user, (int(code), message))

    for item, upsert in [(d, False) for d in req["deletions"]] + [(u, True) for u in req["upsertions"]]:
        user, mech_type = item["name"], item["mechanism"]
        if user not in users:
            users.append(user)
        mechanism = MECHANISMS_BY_TYPE.get(mech_type)
        if named[(user, mech_type)] > 1:
            fail(user, ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        elif not user:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism is None:
            fail(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif not upsert:
            if (user, mech_type) not in image.scram_credentials:
                fail(user, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            else:
                records.setdefault(user, []).append(make("RemoveUserScramCredentialRecord", name=user,
                                                         mechanism=mech_type))
        elif not mechanism.min_iterations <= item["iterations"] <= mechanism.max_iterations:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL,
                 f"Iterations {item['iterations']} outside {mechanism.min_iterations}.."
                 f"{mechanism.max_iterations} for {mechanism.name}")
        elif not item["salt"] or len(item["salted_password"]) != len(mechanism.hash(b"")):
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Bad salt or salted password")
        else:
            c = credential_from_salted(mechanism, item["salt"], item["salted_password"], item["iterations"])
            records.setdefault(user, []).append(make(
                "UserScramCredentialRecord", name=user, mechanism=mech_type, salt=c.salt,
                stored_key=c.stored_key, server_key=c.server_key, iterations=c.iterations))
    results = []
    for user in users:
        code, message = errors.get(user, (0, None))
        if not code:
            txn.add(*records.get(user, ()))
        results.append({"user": user, "error_code": code, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}


def describe_user_scram_credentials(ctx: ControllerContext, txn: Txn, version: int, req: dict,
                                    now_ms: int) -> dict:
    credentials = txn.image.scram_credentials
    by_user: dict[str, list] = {}
    for (user, mech_type), c in sorted(credentials.items()):
        by_user.setdefault(user, []).append({"mechanism": mech_type, "iterations": c.iterations})
    results = []
    if not req["users"]:
        for user, infos in by_user.items():
            results.append({"user": user, "error_code": 0, "error_message": None, "credential_infos": infos})
    else:
        counts = Counter(u["name"] for u in req["users"])
        for name in dict.fromkeys(u["name"] for u in req["users"]):
            if counts[name] > 1:
                results.append({"user": name, "error_code": ErrorCode.DUPLICATE_RESOURCE,
                                "error_message": "Cannot describe SCRAM credentials for the same user twice "
                                                 "in a single request", "credential_infos": []})
            elif name not in by_user:
                results.append({"user": name, "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                                "error_message": "Attempt to describe a user credential that does not exist",
                                "credential_infos": []})
            else:
                results.append({"user": name, "error_code": 0, "error_message": None,
                                "credential_infos": by_user[name]})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}
