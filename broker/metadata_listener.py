"""A broker's view of the cluster: the metadata log, applied as it commits.

The broker follows ``__cluster_metadata`` as a Raft observer; this listener turns committed
batches into successive immutable ``MetadataImage``s and tells subscribers (the replica
manager, the lifecycle manager) about each new image together with the previous one, so
they can work out what changed (which partitions this broker now leads or follows).
"""

from __future__ import annotations

import logging
from typing import Callable

import trio

from kraft import clock

from kraft.raft.messages import Batch, LeaderAndEpoch, OffsetAndEpoch
from metadata import serde
from metadata.delta import MetadataDelta, image_from_records
from metadata.image import EMPTY_IMAGE, MetadataImage

log = logging.getLogger(__name__)

ImageSubscriber = Callable[[MetadataImage, MetadataImage], None]


class MetadataListener:
    def __init__(self):
        self.image: MetadataImage = EMPTY_IMAGE
        self.leader = LeaderAndEpoch(-1, -1)
        self.subscribers: list[ImageSubscriber] = []
        self.leader_subscribers: list[Callable[[LeaderAndEpoch], None]] = []
        self._changed = trio.Event()
        # kafka.server:type=broker-metadata-metrics (kraft.metrics): when the last batch was
        # applied (the metadata log carries no timestamps), and subscribers that failed.
        self.last_applied_ms = -1
        self.apply_errors = 0

    # -- RaftListener -------------------------------------------------------------------

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, records: list[bytes]) -> None:
        image = image_from_records(serde.decode_all(records), snapshot_id.offset - 1)
        self._publish(image)

    def handle_commit(self, batch: Batch) -> None:
        if batch.control:
            self._publish(_at_offset(self.image, batch.last_offset))
            return
        delta = MetadataDelta(self.image)
        for value in batch.records:
            delta.replay(serde.decode(value))
        self._publish(delta.apply(batch.last_offset))

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        self.leader = leader
        for callback in self.leader_subscribers:
            callback(leader)
        self._wake()

    # -- waiting ------------------------------------------------------------------------

    async def wait_for(self, predicate: Callable[[MetadataImage], bool]) -> MetadataImage:
        """Wait until the image satisfies ``predicate``; returns that image."""
        while not predicate(self.image):
            await self._changed.wait()
        return self.image

    def _publish(self, image: MetadataImage) -> None:
        previous, self.image = self.image, image
        self.last_applied_ms = clock.wall_ms()
        for callback in self.subscribers:
            try:
                callback(previous, image)
            except Exception:  # one subscriber's bug must not stop the metadata log
                self.apply_errors += 1
                log.exception("metadata subscriber failed at offset %d", image.offset)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


def _at_offset(image: MetadataImage, offset: int) -> MetadataImage:
    from dataclasses import replace

    return replace(image, offset=offset)
