"""The membership nemesis: partition reassignments and preferred-leader elections under
load (issue 22).  Redpanda's Jepsen analysis found lost writes only with such a nemesis:
replica sets that change while the workload writes exercise code no crash reaches (a
leader whose replica set grows and shrinks under one epoch, followers that appear and are
deleted, leadership handed to a replica that just caught up).

``start-membership`` (value: how many of the workload's partitions, an int or ``"all"``)
reassigns that many partitions, chosen at random, to a random replica set of the same
size among the live brokers (a new order is a move too: it changes the preferred leader),
and removes one controller from the quorum's voters (RemoveRaftVoter, KIP-853), the active
one as likely as any, while at least three voters remain.
``stop-membership`` elects the preferred leader of every workload partition, which after
a move hands leadership to the new first replica, and adds every removed controller back
(AddRaftVoter with the endpoint and directory id DescribeQuorum gave; one that is down or
behind stays removed until a later stop).  Reassignments finish on their own (new
replicas catch up and join the ISR), so a stop never waits for them; the final heal's
stop is the last membership change of a run.
"""

from __future__ import annotations

import time

import random

from jepsen.nemesis._core import Nemesis, completed
from jepsen.nemesis._targets import Oracle

PREFERRED = 0
VOTERS_LEFT = 3  # a removal leaves at least this many: the quorum still survives a fault


class MembershipNemesis(Nemesis):
    fault = "membership"
    fs = frozenset({"start-membership", "stop-membership"})

    def __init__(self, hosts, rng: random.Random | None = None, oracle: Oracle | None = None):
        super().__init__(rng)
        self.hosts = hosts
        self.oracle = oracle or Oracle()
        self.removed: dict[int, dict] = {}  # controller id -> the AddRaftVoter body to add it back

    def _admin(self):
        from cli.admin_client import AdminClient

        if not self.oracle.bootstrap:
            raise RuntimeError("the membership nemesis needs the cluster's bootstrap servers")
        from jepsen import security

        return AdminClient(self.oracle.bootstrap, timeout_s=10, security=security.kraft_client())

    def _partitions(self, admin) -> tuple[dict[tuple[str, int], list[int]], list[int]]:
        md = admin.metadata(sorted({t for t, _ in self.oracle.topics}))
        live = sorted(b["node_id"] for b in md["brokers"])
        replicas = {(t["name"], p["partition_index"]): list(p["replica_nodes"])
                    for t in md["topics"] if not t["error_code"] for p in t["partitions"]}
        return replicas, live

    def invoke(self, invocation: dict) -> dict:
        f = invocation.get("f")
        if f == "start-membership":
            value = self.reassign(invocation.get("value"))
            value["controllers"] = self._guarded(self.remove_controller)
            return completed(invocation, value)
        if f == "stop-membership":
            value = self.elect()
            value["controllers"] = self._guarded(self.add_controllers)
            return completed(invocation, value)
        self._unknown(invocation)

    def reassign(self, how_many) -> dict:
        admin = self._admin()
        current, live = self._partitions(admin)
        keys = sorted(current)
        count = len(keys) if how_many == "all" else min(int(how_many or 1), len(keys))
        moves = {}
        for key in self.rng.sample(keys, count):
            size = len(current[key])
            if size > len(live):
                continue  # not enough live brokers for a replica set of this size
            moves[key] = self.rng.sample(live, size)
        if not moves:
            return {"moves": {}, "live": live}
        topics: dict[str, list[dict]] = {}
        for (t, p), target in sorted(moves.items()):
            topics.setdefault(t, []).append({"partition_index": p, "replicas": target})
        resp = admin.call("AlterPartitionReassignments", {"timeout_ms": 10000, "topics": [
            {"name": t, "partitions": ps} for t, ps in topics.items()]})
        errors = {f"{t['name']}-{p['partition_index']}": p["error_code"]
                  for t in resp.get("responses", []) for p in t["partitions"] if p["error_code"]}
        return {"moves": {f"{t}-{p}": [current[(t, p)], target] for (t, p), target in sorted(moves.items())},
                "errors": errors, "error_code": resp["error_code"]}

    def elect(self) -> dict:
        admin = self._admin()
        resp = admin.call("ElectLeaders", {"election_type": PREFERRED, "timeout_ms": 10000, "topic_partitions": [
            {"topic": t, "partitions": list(range(n))} for t, n in self.oracle.topics]})
        elected = [f"{t['topic']}-{p['partition_id']}" for t in resp["replica_election_results"]
                   for p in t["partition_result"] if p["error_code"] == 0]
        return {"elected": elected, "error_code": resp.get("error_code", 0)}

    # ------------------------------------------------------------------ controllers

    @staticmethod
    def _guarded(step) -> dict:
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - the quorum may be unreachable mid-fault
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _quorum(self, admin) -> dict:
        resp = admin.call("DescribeQuorum", {"topics": [{"topic_name": "__cluster_metadata",
                                                          "partitions": [{"partition_index": 0}]}]})
        if resp["error_code"]:
            raise RuntimeError(f"DescribeQuorum error {resp['error_code']}")
        return resp

    def remove_controller(self) -> dict:
        admin = self._admin()
        resp = self._quorum(admin)
        partition = resp["topics"][0]["partitions"][0]
        voters = {v["replica_id"]: v for v in partition["current_voters"]}
        listeners = {n["node_id"]: n["listeners"] for n in resp.get("nodes", [])}
        if len(voters) - 1 < VOTERS_LEFT:
            return {"voters": sorted(voters), "removed": None}
        victim = self.rng.choice(sorted(v for v in voters if v in listeners))
        answer = self._remove(admin, victim, voters[victim]["replica_directory_id"])
        for _ in range(4):
            if answer["error_code"] not in (127, 6, 7):
                break
            # VOTER_NOT_FOUND: the key changed under us (the leader recorded the voters'
            # directory ids in between, or a lagging controller described an older set);
            # NOT_LEADER_OR_FOLLOWER / REQUEST_TIMED_OUT: the leadership moved. Describe again.
            time.sleep(0.5)
            fresh = {v["replica_id"]: v for v in self._quorum(admin)["topics"][0]["partitions"][0]["current_voters"]}
            if victim not in fresh:  # a timed-out attempt had landed after all
                answer = {"error_code": 0}
                break
            voters.update(fresh)
            answer = self._remove(admin, victim, voters[victim]["replica_directory_id"])
        if answer["error_code"] == 0:
            self.removed[victim] = {"cluster_id": None, "timeout_ms": 8000, "voter_id": victim,
                                    "voter_directory_id": voters[victim]["replica_directory_id"],
                                    "listeners": listeners[victim]}
        return {"voters": sorted(voters), "removed": victim, "leader": partition["leader_id"],
                "error_code": answer["error_code"]}

    @staticmethod
    def _remove(admin, victim: int, directory_id) -> dict:
        return admin.call("RemoveRaftVoter", {"cluster_id": None, "voter_id": victim,
                                              "voter_directory_id": directory_id})

    def add_controllers(self) -> dict:
        if not self.removed:
            return {"added": {}}
        admin = self._admin()
        added = {}
        for voter_id, body in sorted(self.removed.items()):
            try:
                added[voter_id] = admin.call("AddRaftVoter", body)["error_code"]
            except Exception as exc:  # noqa: BLE001 - try the others; this one stays removed
                added[voter_id] = f"{type(exc).__name__}: {exc}"
            if added[voter_id] in (0, 126):  # added, or DUPLICATE_VOTER: a retry that had landed
                del self.removed[voter_id]
        return {"added": added, "still_removed": sorted(self.removed)}
