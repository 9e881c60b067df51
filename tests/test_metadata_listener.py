"""The broker's MetadataListener: committed batches become images, and in a combined node the
image is the one the controller built of the same batch (one copy of the metadata, not two)."""

from __future__ import annotations

from test_metadata_helpers import CLUSTER_ID, NODE_ID, Harness

from broker.metadata_listener import MetadataListener
from kraft.raft.messages import Batch, OffsetAndEpoch
from metadata import serde
from metadata.controller import ControllerConfig, QuorumController


def committed_batches() -> list[Batch]:
    """The batches an active controller wrote for a few brokers and topics, then a control
    batch (a LeaderChangeMessage)."""
    h = Harness()
    h.add_brokers({1: "a", 2: "b", 3: None})
    h.create_topic("t", 6, 3)
    h.create_topic("u", 2, 2)
    batches = [Batch(base, 1, tuple(values)) for base, values in h.batches]
    batches.append(Batch(h.log_end, 2, (b"leader change",), control=True))
    return batches


def standby() -> QuorumController:
    ctl = QuorumController(ControllerConfig(node_id=NODE_ID + 1, cluster_id=CLUSTER_ID))
    ctl.on_leader_change(NODE_ID, 1)
    return ctl


def replay(ctl: QuorumController, batch: Batch) -> None:
    """What ControllerServer.handle_commit does with a batch."""
    ctl.replay([] if batch.control else serde.decode_all(batch.records), batch.last_offset)


def test_a_combined_node_holds_one_image_that_equals_the_one_a_broker_builds():
    ctl = standby()
    combined = MetadataListener(controller_image=lambda: ctl.image)
    alone = MetadataListener()
    for batch in committed_batches():
        replay(ctl, batch)  # the controller comes first in the node's FanOutListener
        combined.handle_commit(batch)
        alone.handle_commit(batch)
        assert combined.image is ctl.image
        assert alone.image == ctl.image and alone.image is not ctl.image
    assert combined.image.topic("t") is not None and len(combined.image.topic("t").partitions) == 6


def test_the_listener_builds_its_own_image_when_the_controllers_is_elsewhere():
    batches = committed_batches()
    ctl = standby()
    for batch in batches:  # the controller is ahead (it skips batches it already has)
        replay(ctl, batch)
    listener = MetadataListener(controller_image=lambda: ctl.image)
    for batch in batches[:-2]:
        listener.handle_commit(batch)
        assert listener.image.offset == batch.last_offset and listener.image is not ctl.image
    alone = MetadataListener()
    for batch in batches[:-2]:
        alone.handle_commit(batch)
    assert listener.image == alone.image
    for batch in batches[-2:]:
        listener.handle_commit(batch)
    assert listener.image is ctl.image  # caught up: shared again


def test_a_snapshot_loaded_by_both_roles_is_one_image():
    source = standby()
    for batch in committed_batches():
        replay(source, batch)
    records = serde.encode_all(source.image.records())
    snapshot_id = OffsetAndEpoch(source.image.offset + 1, 2)
    ctl = standby()
    ctl.load_snapshot(serde.decode_all(records), snapshot_id.offset - 1)
    listener = MetadataListener(controller_image=lambda: ctl.image)
    listener.handle_load_snapshot(snapshot_id, records)
    assert listener.image is ctl.image and listener.image == source.image
