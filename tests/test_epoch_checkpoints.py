"""Leader-epoch checkpoints written after the fact (issue 19): a leadership, or a follower's
first append in a new epoch, adds an epoch at the end of a replica's cache; the broker
writes the ``leader-epoch-checkpoint`` file a moment later, off the path that moves
leaderships (a broker fenced at 20,000 partitions spent a tenth of that path writing one
file per leadership).  A crash before the write must lose nothing: the batches' own epochs
restore the entry when the replica is opened again.  In-process, on hand-made images."""

import uuid

import pytest

from broker.leader_epoch_cache import LeaderEpochCache, LeaderEpochCheckpointError
from broker.leader_epoch_checkpoint import CHECKPOINT_FILE_NAME, LeaderEpochCheckpointFile
from broker.replica_manager import ReplicaManager
from broker_helpers import server_config
from kraft.records import build_batch
from metadata.image import EMPTY_IMAGE, MetadataImage, PartitionRegistration, TopicImage, frozen_map

TOPIC_ID = uuid.UUID(int=11)


def image(leader: int, epoch: int, *, offset: int = 1, topic: bool = True) -> MetadataImage:
    reg = PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=leader, leader_epoch=epoch,
                                partition_epoch=epoch)
    topics = {"t": TopicImage("t", TOPIC_ID, frozen_map({0: reg}))} if topic else {}
    return MetadataImage(offset=offset, topics_by_name=frozen_map(topics),
                         topics_by_id=frozen_map({t.id: t for t in topics.values()}))


def checkpointed(manager: ReplicaManager) -> list[tuple[int, int]]:
    path = manager.partitions[("t", 0)].log.dir / CHECKPOINT_FILE_NAME
    return [(e.epoch, e.start_offset) for e in LeaderEpochCheckpointFile(path).read().entries]


def test_a_leadership_s_epoch_is_written_after_the_reconcile_not_during_it(tmp_path):
    manager = ReplicaManager(1, server_config(tmp_path))
    first = image(leader=1, epoch=3)
    manager.on_image(EMPTY_IMAGE, first)
    assert checkpointed(manager) == []  # leading in epoch 3: not written yet
    assert manager.write_epoch_checkpoints() == 1
    assert checkpointed(manager) == [(3, 0)]
    assert manager.write_epoch_checkpoints() == 0  # nothing behind any more
    manager.close()


def test_an_epoch_lost_in_a_crash_before_its_write_comes_back_from_the_batches(tmp_path):
    manager = ReplicaManager(1, server_config(tmp_path))
    manager.on_image(EMPTY_IMAGE, image(leader=1, epoch=3))
    manager.write_epoch_checkpoints()
    later = image(leader=1, epoch=5, offset=2)
    manager.on_image(image(leader=1, epoch=3), later)  # a new leadership: epoch 5 at offset 0
    partition = manager.partitions[("t", 0)]
    partition.append_as_leader(bytearray(build_batch([(b"k", b"v")])))
    assert checkpointed(manager) == [(3, 0)]  # epoch 5 not written: the process dies here

    again = ReplicaManager(1, server_config(tmp_path))
    again.on_image(EMPTY_IMAGE, image(leader=2, epoch=6))
    state = again.partitions[("t", 0)].state
    assert state.log_end_offset == 1
    assert [(e.epoch, e.start_offset) for e in state.epoch_cache.entries] == [(5, 0)]
    again.close()


def test_a_replica_removed_before_its_write_is_not_written(tmp_path):
    manager = ReplicaManager(1, server_config(tmp_path))
    first = image(leader=1, epoch=3)
    manager.on_image(EMPTY_IMAGE, first)
    directory = manager.partitions[("t", 0)].log.dir
    manager.on_image(first, image(leader=1, epoch=3, offset=2, topic=False))  # the topic is deleted
    assert manager.write_epoch_checkpoints() == 0
    assert not directory.exists()
    manager.close()


def test_a_grown_cache_is_written_in_place_and_a_cut_one_replaces_the_file(tmp_path):
    """No new file for an epoch added at the end (creating one is what cost the time); a
    cache cut back by a truncation is not a superset, so it replaces the file atomically."""
    path = tmp_path / CHECKPOINT_FILE_NAME
    cache = LeaderEpochCache()
    cache.assign(3, 0)
    store = LeaderEpochCheckpointFile(path)
    store.write(cache, sync=False)
    inode = path.stat().st_ino
    cache.assign(5, 40)
    store.write(cache, sync=False, grown=True)
    assert path.stat().st_ino == inode and store.read().entries == cache.entries
    cache.truncate_from_end(10)
    store.write(cache, sync=False)
    assert path.stat().st_ino != inode and store.read().entries == cache.entries


@pytest.mark.parametrize("torn", ["new content, old tail", "new content cut at the old length"])
def test_a_torn_in_place_write_is_refused_when_read(tmp_path, torn):
    """What a crash in the middle of an in-place write of a longer list can leave is a
    malformed file (its count heads it), never a readable wrong one: opening the replica
    then rebuilds the epochs from its batches."""
    old, new = LeaderEpochCache(), LeaderEpochCache()
    for epoch, offset in [(1, 0), (2, 1000), (3, 20000), (4, 300000)]:
        old.assign(epoch, offset)
        new.assign(epoch, offset)
    new.assign(12, 4000000)
    old_bytes, new_bytes = old.to_checkpoint_bytes(), new.to_checkpoint_bytes()
    path = tmp_path / CHECKPOINT_FILE_NAME
    if torn == "new content, old tail":  # killed between the pwrite and the ftruncate of a shorter list
        shorter = LeaderEpochCache()
        shorter.assign(1, 0)
        path.write_bytes(shorter.to_checkpoint_bytes() + old_bytes[len(shorter.to_checkpoint_bytes()):])
    else:  # a power loss that kept the new sectors but the old length
        path.write_bytes(new_bytes[:len(old_bytes)])
    with pytest.raises(LeaderEpochCheckpointError):
        LeaderEpochCheckpointFile(path).read()
