"""A broker's view of the cluster: the metadata log, applied as it commits.

The broker follows ``__cluster_metadata`` as a Raft observer; this listener turns committed
batches into successive immutable ``MetadataImage``s and tells subscribers (the replica
manager, the lifecycle manager) about each new image together with the previous one, so
they can work out what changed (which partitions this broker now leads or follows).

In a combined node (controller and broker in one process) the controller has just built the
image of the same committed batch (``FanOutListener`` calls it first): the listener takes
that image instead of building an equal one, so the process holds the metadata once.
Images are immutable, so sharing one is safe; the listener builds its own whenever the
controller's is not at the batch's offset (the controller skips what it already has).
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
    def __init__(self, controller_image: Callable[[], MetadataImage] | None = None):
        """``controller_image``: in a combined node, the controller's committed image."""
        self.image: MetadataImage = EMPTY_IMAGE
        self._controller_image = controller_image
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
        image = self._shared(snapshot_id.offset - 1)
        if image is None:
            image = image_from_records(serde.decode_all(records), snapshot_id.offset - 1)
        self._publish(image)

    def handle_commit(self, batch: Batch) -> None:
        shared = self._shared(batch.last_offset)
        if shared is not None:
            self._publish(shared)
            return
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

    def _shared(self, offset: int) -> MetadataImage | None:
        """The controller's image, when it is the image of the log up to ``offset``."""
        if self._controller_image is None:
            return None
        image = self._controller_image()
        return image if image.offset == offset else None

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
