"""A harness for the controller tests: a QuorumController and a pretend metadata log.

Requests go through the codec both ways (so bodies and responses must fit the schemas),
records through the metadata serde, and the log commits when told to, like Raft would.
"""

from __future__ import annotations

import uuid
from random import Random

from kraft.protocol import codec
from metadata import serde
from metadata.controller import ControllerConfig, ControllerResult, QuorumController

CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
NODE_ID = 3000


def incarnation(broker_id: int, n: int = 0) -> uuid.UUID:
    return uuid.UUID(int=(broker_id << 32) | (n + 1))


class Harness:
    def __init__(self, *, seed: int = 0, **config):
        self.ctl = QuorumController(ControllerConfig(node_id=NODE_ID, cluster_id=CLUSTER_ID, **config),
                                    Random(seed))
        self.batches: list[tuple[int, list[bytes]]] = []  # (base offset, record values)
        self.committed = 0  # batches committed
        self.now_ms = 0
        self.epoch = 1
        self.ctl.on_leader_change(NODE_ID, self.epoch, next_offset=0)

    # -- the log

    @property
    def log_end(self) -> int:
        return sum(len(values) for _, values in self.batches)

    def append(self, result: ControllerResult) -> None:
        if not result.records:
            return
        assert result.base_offset == self.log_end
        assert result.commit_offset == result.base_offset + len(result.records) - 1
        self.batches.append((result.base_offset, serde.encode_all(result.records)))

    def commit(self) -> None:
        while self.committed < len(self.batches):
            base, values = self.batches[self.committed]
            self.ctl.replay_encoded(values, base + len(values) - 1)  # as the controller server does
            self.committed += 1

    def records(self, since: int = 0) -> list[serde.MetadataRecord]:
        out = []
        for base, values in self.batches:
            for i, v in enumerate(values):
                if base + i >= since:
                    out.append(serde.decode(v))
        return out

    # -- requests

    def send(self, api: str, body: dict, *, version: int | None = None, commit: bool = True,
             connection_id: str = ""):
        version = codec.versions_of(api).hi if version is None else version
        request = codec.decode(api, "request", version, codec.encode(api, "request", version, body))
        result = self.ctl.handle(api, version, request, self.now_ms, connection_id)
        self.append(result)
        if commit:
            self.commit()
        self.last_result = result
        return codec.decode(api, "response", version,
                            codec.encode(api, "response", version, result.response))

    def tick(self, advance_ms: int = 0, *, commit: bool = True) -> ControllerResult:
        self.now_ms += advance_ms
        result = self.ctl.tick(self.now_ms)
        self.append(result)
        if commit:
            self.commit()
        return result

    # -- brokers

    def register(self, broker_id: int, rack: str | None = None, *, n: int = 0, **extra) -> dict:
        body = {"broker_id": broker_id, "cluster_id": CLUSTER_ID, "incarnation_id": incarnation(broker_id, n),
                "rack": rack,
                "listeners": [{"name": "PLAINTEXT", "host": "localhost", "port": 9092 + broker_id,
                               "security_protocol": 0}]}
        body.update(extra)
        return self.send("BrokerRegistration", body)

    def heartbeat(self, broker_id: int, *, offset: int | None = None, epoch: int | None = None,
                  want_fence: bool = False, want_shut_down: bool = False, commit: bool = True,
                  connection_id: str = "") -> dict:
        b = self.ctl.working_image.broker(broker_id)
        body = {
            "broker_id": broker_id,
            "broker_epoch": b.epoch if epoch is None else epoch,
            "current_metadata_offset": self.ctl.image.offset if offset is None else offset,
            "want_fence": want_fence,
            "want_shut_down": want_shut_down,
        }
        return self.send("BrokerHeartbeat", body, commit=commit, connection_id=connection_id)

    def add_brokers(self, racks: dict[int, str | None]) -> None:
        """Register and unfence brokers (id -> rack)."""
        for broker_id, rack in racks.items():
            assert self.register(broker_id, rack)["error_code"] == 0
        for broker_id in racks:
            resp = self.heartbeat(broker_id)
            assert not resp["is_fenced"], resp

    def heartbeat_all(self, advance_ms: int = 0) -> None:
        self.now_ms += advance_ms
        for broker_id, b in sorted(self.ctl.working_image.brokers.items()):
            self.heartbeat(broker_id)

    def create_topic(self, name: str, partitions: int = 1, rf: int = 1, **extra) -> dict:
        topic = {"name": name, "num_partitions": partitions, "replication_factor": rf}
        topic.update(extra)
        resp = self.send("CreateTopics", {"topics": [topic]})
        return resp["topics"][0]

    def partition(self, name: str, index: int = 0):
        topic = self.ctl.image.topic(name)
        return topic.partitions[index]
