"""Random operation sequences against the controller, from one seed each, checking the
invariants of every image: ISR and leader rules, epochs that never go back, the working
image converging on the committed one, standbys and snapshots agreeing with the leader."""

from __future__ import annotations

from random import Random

import pytest
from test_metadata_helpers import CLUSTER_ID, NODE_ID, Harness

from metadata import serde
from metadata.controller import ControllerConfig, QuorumController
from metadata.delta import image_from_records
from metadata.image import MetadataImage

TOPICS = ["a", "b", "c.d", "c_d", "e"]
BROKERS = {1: "r1", 2: "r1", 3: "r2", 4: "r2", 5: None}


def check_image(image: MetadataImage, *, unclean_possible: bool) -> None:
    assert set(image.topics_by_name) == {t.name for t in image.topics_by_id.values()}
    for topic in image.topics_by_id.values():
        assert image.topics_by_name[topic.name] is topic
        assert sorted(topic.partitions) == list(range(len(topic.partitions)))
        for p in topic.partitions.values():
            assert p.isr, p
            assert len(set(p.isr)) == len(p.isr) and set(p.isr) <= set(p.replicas), p
            if p.leader != -1:
                assert p.leader in p.isr, p
                b = image.brokers.get(p.leader)
                assert b is not None and b.is_active, (p, b)
            if not unclean_possible:
                assert p.leader_recovery_state == 0


def run(seed: int, steps: int = 150) -> Harness:
    rng = Random(seed)
    unclean = rng.random() < 0.3
    h = Harness(seed=seed, unclean_leader_election_enable=unclean,
                leader_imbalance_check_interval_ms=rng.choice([2000, 300_000]))
    incarnations = {b: 0 for b in BROKERS}
    epochs: dict = {}

    def committed_checks():
        check_image(h.ctl.image, unclean_possible=unclean)
        for topic in h.ctl.image.topics_by_id.values():
            for index, p in topic.partitions.items():
                key = (topic.id, index)
                old = epochs.get(key, (0, 0))
                assert p.leader_epoch >= old[0] and p.partition_epoch >= old[1]
                epochs[key] = (p.leader_epoch, p.partition_epoch)

    for _ in range(steps):
        commit = rng.random() < 0.7
        op = rng.random()
        work = h.ctl.working_image
        if op < 0.12:
            b = rng.choice(list(BROKERS))
            if rng.random() < 0.3:
                incarnations[b] += 1
            h.register(b, BROKERS[b], n=incarnations[b])
        elif op < 0.45 and work.brokers:
            b = rng.choice(sorted(work.brokers))
            h.heartbeat(b, want_fence=rng.random() < 0.1, want_shut_down=rng.random() < 0.05, commit=commit)
        elif op < 0.6:
            body = {"topics": [{"name": rng.choice(TOPICS), "num_partitions": rng.randint(1, 4),
                                "replication_factor": rng.randint(1, 3)}]}
            h.send("CreateTopics", body, commit=commit)
        elif op < 0.65:
            h.send("DeleteTopics", {"topic_names": [rng.choice(TOPICS)]}, version=5, commit=commit)
        elif op < 0.7 and work.topics_by_name:
            name = rng.choice(sorted(work.topics_by_name))
            count = len(work.topics_by_name[name].partitions) + rng.randint(0, 2)
            h.send("CreatePartitions", {"topics": [{"name": name, "count": count, "assignments": None}]},
                   commit=commit)
        elif op < 0.85 and work.topics_by_name:
            topic = work.topics_by_name[rng.choice(sorted(work.topics_by_name))]
            index = rng.choice(sorted(topic.partitions))
            p = topic.partitions[index]
            if p.leader != -1:
                others = [r for r in p.replicas if r != p.leader]
                isr = [p.leader] + rng.sample(others, rng.randint(0, len(others)))
                h.send("AlterPartition", {"broker_id": p.leader, "broker_epoch": work.brokers[p.leader].epoch,
                                          "topics": [{"topic_id": topic.id, "partitions": [{
                                              "partition_index": index, "leader_epoch": p.leader_epoch,
                                              "partition_epoch": p.partition_epoch, "new_isr": isr,
                                              "leader_recovery_state": 0}]}]},
                       version=2, commit=commit)
        elif op < 0.95:
            h.tick(rng.choice([0, 100, 1000, 5000]), commit=commit)
        else:
            # a leadership bounce: uncommitted writes are lost
            h.commit() if rng.random() < 0.5 else None
            h.batches = h.batches[:h.committed]
            h.epoch += 1
            h.ctl.on_leader_change(NODE_ID + 1, h.epoch)
            assert h.ctl.working_image == h.ctl.image
            h.epoch += 1
            h.ctl.on_leader_change(NODE_ID, h.epoch, next_offset=h.log_end)
        check_image(h.ctl.working_image, unclean_possible=unclean)
        if rng.random() < 0.5:
            h.commit()
        committed_checks()

    h.commit()
    committed_checks()
    assert h.ctl.pending_offsets == []
    assert h.ctl.working_image == h.ctl.image
    return h


@pytest.mark.parametrize("seed", range(30))
def test_random_operations_keep_the_invariants(seed):
    h = run(seed)
    # a standby that replays the log, and a snapshot of the image, agree with the leader
    standby = QuorumController(ControllerConfig(node_id=NODE_ID + 1, cluster_id=CLUSTER_ID))
    for base, values in h.batches:
        standby.replay(serde.decode_all(values), base + len(values) - 1)
    assert standby.image == h.ctl.image
    snapshot = serde.encode_all(h.ctl.image.records())
    assert image_from_records(serde.decode_all(snapshot), h.ctl.image.offset) == h.ctl.image


def test_the_simulation_does_something():
    h = run(1, steps=300)
    names = {r.name for r in h.records()}
    assert {"RegisterBrokerRecord", "UnfenceBrokerRecord", "TopicRecord", "PartitionChangeRecord",
            "FenceBrokerRecord", "RemoveTopicRecord"} <= names


def test_the_invariant_check_can_fail():
    image = next(h.ctl.image for h in (run(s, steps=80) for s in range(10)) if h.ctl.image.topics_by_id)
    topic = next(iter(image.topics_by_id.values()))
    from dataclasses import replace

    from metadata.image import frozen_map
    bad_part = replace(topic.partitions[0], isr=())
    bad_topic = replace(topic, partitions=frozen_map({**topic.partitions, 0: bad_part}))
    bad = replace(image, topics_by_id=frozen_map({**image.topics_by_id, topic.id: bad_topic}),
                  topics_by_name=frozen_map({**image.topics_by_name, topic.name: bad_topic}))
    with pytest.raises(AssertionError):
        check_image(bad, unclean_possible=True)
