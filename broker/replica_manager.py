"""The partitions this broker hosts, kept in step with the metadata image.

``on_image`` reconciles (in a node: ``run_reconciler``, in bounded steps): for every partition whose replicas include this broker it opens
(or creates) the log and applies the partition registration — leader or follower, with
its epochs and ISR; partitions that left this broker are closed and their logs deleted.
Followers are handed to the replica fetcher; leaders serve Produce and Fetch
(``broker/data_path.py``).  A background task shrinks ISRs, times out acks=all waiters and
checkpoints high watermarks.  Topic config changes in the image reach the open logs
(``Log.update_config``).

A failed log directory (``fail_log_dir``): an I/O error writing a checkpoint, creating a
log, appending or truncating does not kill the node.  As Kafka's LogDirFailureChannel does,
the broker takes the directory offline: every replica in it goes offline (answers
NOT_LEADER_OR_FOLLOWER, no longer fetched), its logs' descriptors are dropped without
writing, nothing in it is written again, and DescribeLogDirs reports it with
KAFKA_STORAGE_ERROR.  The broker's heartbeats then name the directory in
``offline_log_dirs`` and ask to be fenced: kraft hosts one log directory per broker, so the
controller moves every leadership away and takes the broker out of the ISRs, as Kafka's
controller does for the partitions of a failed directory.  Restarting the node (once the
disk is repaired) brings the directory back.

Log compaction (``run_cleaner``): every ``log.cleaner.backoff.ms`` each hosted replica,
leader or follower, whose ``cleanup.policy`` includes ``compact`` is cleaned below its high
watermark by the broker's one ``LogCleaner``.  The long half (``prepare``: measuring, the
key map, writing the ``.cleaned`` segments) runs in a worker thread and only reads the
segment files; the log keeps taking appends on the trio thread meanwhile.  The swap
(``commit``) runs on the trio thread, where every other change to the log happens, and is
skipped when the replica was replaced or closed, or its log was truncated, while the plan
was being made; ``commit`` itself discards a plan whose segments retention or truncation
removed or changed.
"""

from __future__ import annotations

import functools
import logging
import shutil
import uuid
from pathlib import Path

import trio

from broker.config_defaults import dynamic_broker_value, dynamic_log_defaults, topic_defaults
from broker.partition import Partition
from broker.partition_state_types import IsrProposal
from broker.replication_quotas import ReplicationQuotas
from kraft import clock
from kraft.protocol.error_codes import ErrorCode
from kraft.log import LogConfig, LogDir, OffsetCheckpointFile, REPLICATION_OFFSET_CHECKPOINT
from kraft.log.cleaner import LogCleaner
from kraft.log.errors import LogConfigError
from kraft.log.file_cache import SEGMENT_FILES
from kraft.loop_watchdog import replicas_hosted, replicas_removed
from kraft.metrics.stats import BrokerTopicStats, ReplicaManagerStats
from kraft.server_config import ServerConfig
from kraft.storage import parse_uuid_string, read_meta
from metadata.image import EMPTY_IMAGE, ConfigResourceType, MetadataImage

log = logging.getLogger(__name__)

DESCRIBE_STEP = 2000  # replicas DescribeLogDirs walks between giving the loop back
HW_FULL_PASS_EVERY = 12  # high-watermark checkpoints (5 s apart by default) between full passes


def log_defaults(image: MetadataImage, broker_id: int) -> dict[str, str]:
    """Topic key -> value of the dynamic broker configs that are topic defaults."""
    return {key: value for key, value, _ in dynamic_log_defaults(image, broker_id)}


def log_config_for(config: ServerConfig, topic_configs) -> LogConfig:
    """A topic's LogConfig: the topic defaults of the static file (``topic_defaults``, the
    table DescribeConfigs reports them from) overridden by ``topic_configs``."""
    props = {key: value for key, (value, _, _) in topic_defaults(config).items()}
    props.update(topic_configs or {})
    return LogConfig.from_properties(props)


class _Waiting(set):
    """The partitions with acks=all producers waiting; adding one wakes the maintenance task
    (idle, it sleeps until its next periodic task, seconds away: each wake-up of an idle
    node is CPU it burns)."""

    def __init__(self) -> None:
        super().__init__()
        self.added = trio.Event()

    def add(self, partition) -> None:
        super().add(partition)
        self.added.set()


class ReplicaManager:
    def __init__(self, broker_id: int, config: ServerConfig):
        self.broker_id = broker_id
        self.config = config
        self.image = MetadataImage()
        self._log_defaults: dict[str, str] = {}  # log_defaults of the image
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._indexes: dict[str, set[int]] = {}  # topic -> the indexes of its hosted replicas
        self._waiting = _Waiting()  # partitions with acks=all producers waiting
        self._followed: dict[int, dict[tuple[str, int], Partition]] = {}  # leader -> followers
        self.change_sinks: list[set[Partition]] = []  # each replica fetcher's changed partitions
        # Segment files stay open through one bounded cache, so the partitions a node hosts
        # are not bounded by its open files limit (see kraft/log/file_cache.py).
        SEGMENT_FILES.set_max_open(config["kraft.log.open.files.max"])
        log.info("at most %d segment files open at once (kraft.log.open.files.max)", SEGMENT_FILES.max_open)
        self.log_dir_path = Path(config.log_dirs[0])
        self.log_dir_id = _directory_id(self.log_dir_path)
        self.log_dir_error: str | None = None  # set when the directory failed: it is offline
        self.log_dir_failed = trio.Event()
        self._published = EMPTY_IMAGE
        self._image_published = trio.Event()
        self.log_dir = LogDir.open(self.log_dir_path, clock=clock.wall_ms)
        self._hw_checkpoint = OffsetCheckpointFile(Path(config.log_dirs[0]) / REPLICATION_OFFSET_CHECKPOINT)
        self._checkpointed_hw = self._hw_checkpoint.read()
        self._hw_dirty: set[Partition] = set()  # replicas that notified since the last checkpoint
        # Leaderships the next ISR check looks at: the replicas that notified since the
        # last one, and those it left unsettled (``PartitionState.isr_settled``).  Checking
        # every hosted replica cost an idle node with 20,000 a tenth of a second every
        # 15 s, a sixth of its idle CPU (issue 19).
        self._isr_watch: set[Partition] = set()
        self._hw_rebuild = True  # the next checkpoint builds the whole map (replicas went)
        self._hw_calls = 0
        # Replicas whose leader-epoch checkpoint is behind their cache (a leadership, a
        # follower's first append in an epoch): ``run_epoch_checkpoints`` writes them.  A
        # broker fenced at 20,000 partitions moved its leaderships a tenth slower for
        # writing each file as it went (issue 19).
        self._epochs_changed: set[Partition] = set()
        self._epochs_event = trio.Event()
        self._reconciling = False  # run_reconciler is applying an image
        self._reconciled_ms = 0  # when it last finished one that changed replicas
        self.unsafe_ack = bool(config["kraft.unsafe.ack.before.replication"])
        if self.unsafe_ack:
            log.warning("UNSAFE MODE: kraft.unsafe.ack.before.replication=true — acks=all is "
                        "answered after the leader's local write; acknowledged data WILL be "
                        "lost when a leader fails. For fault-injection tests only.")
        self.unsafe_read_committed_hw = bool(config["kraft.unsafe.read.committed.high.watermark"])
        if self.unsafe_read_committed_hw:
            log.warning("UNSAFE MODE: kraft.unsafe.read.committed.high.watermark=true — "
                        "read_committed fetches are served up to the high watermark without "
                        "aborted transactions; consumers WILL see open and aborted transactions' "
                        "data. For fault-injection tests only.")
        self.unsafe_follower_read_log_end = bool(config["kraft.unsafe.follower.read.log.end"])
        if self.unsafe_follower_read_log_end:
            log.warning("UNSAFE MODE: kraft.unsafe.follower.read.log.end=true — a follower serves "
                        "consumers up to its log end, past its high watermark; consumers WILL see "
                        "records that are later truncated away. For fault-injection tests only.")
        self.followers_changed = trio.Event()
        self.isr_proposals: list[tuple[Partition, IsrProposal]] = []
        self.isr_proposal_event = trio.Event()
        # (topic, partition, is_leader) callbacks: the group coordinator follows the
        # leadership of __consumer_offsets partitions.
        self.leadership_listeners: list = []
        # (topic, partition, producer_id, producer_epoch, committed) callbacks, called when
        # a transaction marker on a __consumer_offsets partition is committed: the group
        # coordinator applies or drops that producer's transactional offset commits.
        self.txn_marker_listeners: list = []
        self.cleaner = LogCleaner()
        self._uncleanable: dict[tuple[str, int], Partition] = {}  # a pass failed: skipped
        self.topic_stats = BrokerTopicStats()  # Kafka's BrokerTopicMetrics (kraft.metrics)
        self.stats = ReplicaManagerStats()  # IsrShrinksPerSec, IsrExpandsPerSec, ...
        # leader/follower.replication.throttled.* (reassignment throttles): the data path
        # asks ``.leader`` when answering followers, the replica fetchers ``.follower``
        self.replication_quotas = ReplicationQuotas.from_config(config)

    def on_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                      committed: bool) -> None:
        """A COMMIT (``committed``) or ABORT marker written by WriteTxnMarkers is committed
        on ``topic``-``partition`` (``broker/txn_markers.py``)."""
        for listener in self.txn_marker_listeners:
            listener(topic, partition, producer_id, producer_epoch, committed)

    # -- lookups ----------------------------------------------------------------------

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def not_hosted_error(self, topic: str, index: int) -> ErrorCode:
        """The answer for a partition this broker has no open replica of: it exists
        elsewhere (NOT_LEADER_OR_FOLLOWER, the client looks again) or not at all."""
        known = self.image.topic(topic)
        return (ErrorCode.NOT_LEADER_OR_FOLLOWER if known is not None and index in known.partitions
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def followed_leaders(self) -> list[int]:
        return list(self._followed)

    def followed_from(self, leader_id: int) -> list[Partition]:
        return list(self._followed.get(leader_id, {}).values())

    def _track(self, partition: Partition) -> None:
        """Note the partition's role in ``followed_from`` after it may have changed."""
        key = (partition.topic, partition.index)
        st = partition.state
        new = (st.leader_id if st.role.value == "follower" and st.leader_id >= 0
               and self.partitions.get(key) is partition else None)
        old = partition.followed_leader
        if old == new:
            return
        if old is not None:
            followed = self._followed.get(old, {})
            followed.pop(key, None)
            if not followed:
                self._followed.pop(old, None)
        if new is not None:
            self._followed.setdefault(new, {})[key] = partition
        partition.followed_leader = new
        self._changed(partition)  # the replica fetchers start or stop following it

    def _changed(self, partition: Partition) -> None:
        self._hw_dirty.add(partition)
        self._isr_watch.add(partition)
        for sink in self.change_sinks:
            sink.add(partition)

    def topic_config(self, topic: str) -> dict:
        """The topic's configs over this broker's dynamic log defaults (Kafka's precedence:
        the topic's own, this broker's dynamic value, the cluster-wide dynamic default; the
        static file's come after, in ``log_config_for``)."""
        return {**self._log_defaults, **self.image.config(ConfigResourceType.TOPIC, topic)}

    @property
    def offline_log_dirs(self) -> list[uuid.UUID]:
        """The ids of failed log directories (for the broker heartbeat)."""
        return [self.log_dir_id] if self.log_dir_error is not None else []

    async def describe_log_dirs(self, topics: list[dict] | None) -> list[dict]:
        """DescribeLogDirs results: the directory with each hosted partition's size, or
        KAFKA_STORAGE_ERROR and nothing else when it failed.  It gives the event loop back
        every ``DESCRIBE_STEP`` replicas: at 100,000 it held the loop for up to 0.9 s, and
        the quorum's leadership moved while a tool polled it."""
        if self.log_dir_error is not None:
            return [{"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": str(self.log_dir_path),
                     "topics": [], "total_bytes": -1, "usable_bytes": -1}]
        wanted = None if topics is None else {(t["topic"], p) for t in topics for p in t["partitions"]}
        by_topic: dict[str, list[dict]] = {}
        for n, ((topic, index), partition) in enumerate(sorted(self.partitions.items())):
            if n % DESCRIBE_STEP == DESCRIBE_STEP - 1:
                await trio.sleep(0)
            if wanted is not None and (topic, index) not in wanted:
                continue
            if self.partitions.get((topic, index)) is not partition:
                continue  # removed while the loop was given back
            by_topic.setdefault(topic, []).append({
                "partition_index": index, "partition_size": partition.log.size_in_bytes,
                "offset_lag": 0, "is_future_key": False})
        try:
            usage = shutil.disk_usage(self.log_dir_path)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        return [{"error_code": 0, "log_dir": str(self.log_dir_path),
                 "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                 "total_bytes": total, "usable_bytes": usable}]

    def fail_log_dir(self, doing: str, exc: BaseException) -> None:
        """Take the log directory offline after an I/O error (see the module doc)."""
        if self.log_dir_error is not None:
            log.warning("offline log dir %s: %s also failed: %s", self.log_dir_path, doing, exc)
            return
        self.log_dir_error = f"{doing}: {exc}"
        log.error("log dir %s failed while %s: %s; taking it offline with its %d replicas (the node "
                  "keeps running; restart it once the disk is repaired)",
                  self.log_dir_path, doing, exc, len(self.partitions))
        for partition in self.partitions.values():
            partition.close()
            self._track(partition)
            partition.log.abandon()  # drop the descriptors; write nothing more there
            for listener in self.leadership_listeners:
                listener(partition.topic, partition.index, False)
        self.log_dir_failed.set()
        self._wake_fetchers()

    def _broker_value(self, key: str):
        """A broker config that may change at run time (kafka-configs --entity-type brokers),
        as in force on this broker."""
        return dynamic_broker_value(self.image, self.broker_id, key, self.config[key])

    def transaction_verification_enabled(self) -> bool:
        """transaction.partition.verification.enable as in force now (a dynamic broker config)."""
        value = self._broker_value("transaction.partition.verification.enable")
        return value if isinstance(value, bool) else str(value).strip().lower() == "true"

    def min_insync_replicas(self, topic: str) -> int:
        value = self.image.config(ConfigResourceType.TOPIC, topic).get("min.insync.replicas") \
            or self._log_defaults.get("min.insync.replicas")  # on every acks=all produce: no merged dict
        return int(value) if value is not None else self.config["min.insync.replicas"]

    # -- metadata ---------------------------------------------------------------------

    def _set_image(self, image: MetadataImage) -> None:
        if image.configs is not self.image.configs:
            self._log_defaults = log_defaults(image, self.broker_id)
        self.image = image

    def on_image(self, previous: MetadataImage, image: MetadataImage) -> None:
        self._set_image(image)
        if self.log_dir_error is not None:
            return  # the replicas are offline; the directory is not touched again
        try:
            self._reconcile(previous, image)
        except OSError as exc:
            self.fail_log_dir("applying metadata to the replicas", exc)

    def _reconcile(self, previous: MetadataImage, image: MetadataImage) -> None:
        for _ in self._reconcile_steps(previous, image):
            pass

    def publish(self, image: MetadataImage) -> None:
        """A node's metadata subscriber: ``run_reconciler`` applies the newest image.

        An image that differs from the one applied only where the replicas never look (a
        NoOpRecord's, twice a second) is taken as applied at once: waking the reconciler
        and then the fetchers for it was most of what an idle broker did (issue 19)."""
        last, self._published = self._published, image
        if (last is self.image and not self._reconciling and image.topics_by_name is last.topics_by_name
                and image.configs is last.configs and image.brokers is last.brokers):
            self._set_image(image)
            return
        self._image_published.set()

    async def run_reconciler(self, step_ms: float = 20) -> None:
        """Apply published images as ``on_image`` does, but give the event loop back every
        ``step_ms``: creating thousands of partitions (files, fsyncs) at once must not stall
        the Raft driver and controller sharing this thread (issue 15: the quorum lost its
        leader while a broker created 1,000 partitions in one go).  A newer image published
        meanwhile is applied, from the one just applied, once the pass ends."""
        applied = EMPTY_IMAGE
        while True:
            await self._image_published.wait()
            self._image_published = trio.Event()
            image = self._published
            if image is applied:
                continue
            self._set_image(image)
            if self.log_dir_error is None:
                started = clock.monotonic_ms()
                self._reconciling = True
                steps = 0
                try:
                    for _ in self._reconcile_steps(applied, image):
                        steps += 1
                        if clock.monotonic_ms() - started >= step_ms:
                            self._wake_fetchers()  # followers set up so far start fetching
                            await trio.sleep(0)
                            started = clock.monotonic_ms()
                except OSError as exc:
                    self.fail_log_dir("applying metadata to the replicas", exc)
                finally:
                    self._reconciling = self._published is not image  # a newer one is next
                    if steps:  # replicas changed (not a NoOpRecord's image)
                        self._reconciled_ms = clock.monotonic_ms()
            applied = image

    def _reconcile_steps(self, previous: MetadataImage, image: MetadataImage):
        """Reconcile the hosted replicas with ``image`` (``previous`` being the image they
        were reconciled with); yields after every replica it opened or changed, so a
        caller may pause there.  Only the topics that changed are looked at: an ISR change
        of one partition must not cost a pass over 20,000 (issue 15)."""
        wanted = set()
        changed = set()  # names of the topics created, changed or re-created
        for topic in image.topics_by_name.values():
            old_topic = previous.topics_by_name.get(topic.name)
            if old_topic is topic:
                continue  # images share unchanged topics: its replicas are as applied before
            changed.add(topic.name)
            topic_config = None  # the topic's LogConfig, worked out once for all its new replicas
            for index, reg in topic.partitions.items():
                if self.broker_id not in reg.replicas:
                    continue
                key = (topic.name, index)
                wanted.add(key)
                old_reg = old_topic.partitions.get(index) if old_topic and old_topic.id == topic.id else None
                partition = self.partitions.get(key)
                if partition is not None and partition.topic_id != topic.id:
                    self._remove(key)  # a deleted and re-created topic of the same name
                    partition = None
                if partition is None:
                    if topic_config is None:
                        topic_config = self._log_config(topic.name)
                    partition = self._open(topic.name, index, topic.id, topic_config)
                    old_reg = None
                if old_reg == reg:
                    continue
                self._apply(partition, reg, clock.monotonic_ms())
                yield
        topics = image.topics_by_name
        # Only the topics that changed or went can lose replicas here; a pass over every
        # hosted key for each image (a NoOpRecord every 500 ms) cost a node with 100,000
        # replicas a tenth of a core while idle (issue 19).
        look = changed.union(name for name in previous.topics_by_name if name not in topics)
        removed = [(name, i) for name in look for i in sorted(self._indexes.get(name, ()))
                   if name not in topics or (name, i) not in wanted]
        for key in removed:
            self._remove(key)
            yield
        if removed:
            replicas_removed(len(removed), len(self.partitions))  # they may be frozen (kraft.loop_watchdog)
        else:
            replicas_hosted(len(self.partitions))
        if image.configs is not previous.configs:
            self._update_log_configs(previous, image)
            self.replication_quotas.apply(image)
        self._wake_fetchers()

    def _wake_fetchers(self) -> None:
        self.followers_changed.set()
        self.followers_changed = trio.Event()

    def _open(self, topic: str, index: int, topic_id, config: LogConfig) -> Partition:
        plog = self.log_dir.get_or_create((topic, index), config)
        if plog.config != config:  # a log found on disk at startup opened with defaults
            plog.update_config(config)
        hw = self._checkpointed_hw.get((topic, index), 0)
        partition = Partition(topic, index, topic_id, plog, self.broker_id,
                              high_watermark=hw, unsafe_ack_before_replication=self.unsafe_ack,
                              unsafe_follower_read_log_end=self.unsafe_follower_read_log_end,
                              cleaner=self.cleaner, waiting=self._waiting)
        partition.on_change = self._changed
        partition.on_epochs_changed = self._epochs_to_write
        partition.topic_stats = self.topic_stats.attach(topic)
        partition.broker_stats = self.topic_stats
        self.partitions[(topic, index)] = partition
        self._indexes.setdefault(topic, set()).add(index)
        self._hw_dirty.add(partition)
        return partition

    def _epochs_to_write(self, partition: Partition) -> None:
        self._epochs_changed.add(partition)
        self._epochs_event.set()

    def write_epoch_checkpoints(self, limit: int | None = None) -> int:
        """Write the leader-epoch checkpoints that are behind (at most ``limit``); how many."""
        written = 0
        while self._epochs_changed and (limit is None or written < limit):
            self._epochs_changed.pop().checkpoint_epochs()
            written += 1
        return written

    async def run_epoch_checkpoints(self, step: int = 200, delay_s: float = 1.0, max_wait_s: float = 10.0) -> None:
        """Write the leader-epoch checkpoints behind their cache, ``step`` at a time, once the
        reconciler has changed no replica for ``delay_s`` (and has no image to apply), or
        ``max_wait_s`` after the first was noted: a burst of leaderships (a broker fenced,
        its changes coming in batches) moves them all first."""
        while True:
            await self._epochs_event.wait()
            self._epochs_event = trio.Event()
            noted = clock.monotonic_ms()
            while self._epochs_changed and self.log_dir_error is None:
                # ... but not later than ``max_wait_s`` after, under metadata that never rests
                while (self._reconciling or clock.monotonic_ms() - self._reconciled_ms < delay_s * 1000) \
                        and clock.monotonic_ms() - noted < max_wait_s * 1000:
                    await trio.sleep(0.1)
                try:
                    self.write_epoch_checkpoints(step)
                except OSError as exc:
                    self.fail_log_dir("writing a leader-epoch checkpoint", exc)
                await trio.sleep(0)

    def _log_config(self, topic: str, fallback: LogConfig | None = None) -> LogConfig:
        """The topic's LogConfig from the image; ``fallback`` (or the broker defaults) if
        the image holds a value the log refuses (the controller's checks are looser)."""
        try:
            return log_config_for(self.config, self.topic_config(topic))
        except LogConfigError as exc:
            log.warning("topic %s: unusable configuration (%s); keeping %s", topic, exc,
                        "the previous one" if fallback is not None else "the broker defaults")
            return fallback if fallback is not None else log_config_for(self.config, {})

    def _update_log_configs(self, previous: MetadataImage, image: MetadataImage) -> None:
        """Hand changed topic configs, and changed dynamic broker log defaults, to the open
        logs (IncrementalAlterConfigs of a topic or a broker)."""
        changed: dict[str, LogConfig | None] = {}
        defaults_changed = log_defaults(previous, self.broker_id) != self._log_defaults
        for (topic, index), partition in self.partitions.items():
            if topic not in changed:
                old = previous.config(ConfigResourceType.TOPIC, topic)
                changed[topic] = None
                if defaults_changed or old != image.config(ConfigResourceType.TOPIC, topic):
                    changed[topic] = self._log_config(topic, partition.log.config)
            config = changed[topic]
            if config is not None and config != partition.log.config:
                log.info("%s: log configuration changed: %s", partition.name, _config_diff(
                    partition.log.config, config))
                partition.log.update_config(config)

    def _apply(self, partition: Partition, reg, now: int) -> None:
        partition.apply_registration(self.broker_id, reg.leader, reg.leader_epoch, reg.partition_epoch,
                                     reg.replicas, reg.isr, now)
        self._track(partition)
        for listener in self.leadership_listeners:
            listener(partition.topic, partition.index, partition.state.is_leader)

    def _remove(self, key) -> None:
        partition = self.partitions.pop(key)
        self._epochs_changed.discard(partition)  # its directory is deleted below
        self._hw_rebuild = True
        indexes = self._indexes[key[0]]
        indexes.discard(key[1])
        if not indexes:
            del self._indexes[key[0]]
        partition.close()
        self._track(partition)
        for listener in self.leadership_listeners:
            listener(partition.topic, partition.index, False)
        self.cleaner.forget(partition.log)
        self._uncleanable.pop(key, None)
        self.log_dir.delete(key)
        self.topic_stats.detach(key[0])  # as Kafka, a topic's series go with its last replica
        log.info("%s: replica removed and its log deleted", partition.name)

    # -- background work --------------------------------------------------------------

    def propose(self, partition: Partition, proposal: IsrProposal | None) -> None:
        if proposal is not None:
            self.isr_proposals.append((partition, proposal))
            self.isr_proposal_event.set()

    async def run_maintenance(self) -> None:
        """ISR shrink checks, acks=all deadlines, HW checkpoints, retention.

        Each costs what has work, not what is hosted (issue 15: a node hosting 20,000
        replicas spent its CPU ticking them all every 50 ms): deadlines are checked only on
        the partitions with waiting producers, and the ISR of every led partition every
        ``replica.lag.time.max.ms / 2``, as Kafka's isr-expiration task does."""
        lag_ms = self.config["replica.lag.time.max.ms"]
        isr_every_ms = max(lag_ms // 2, 1)
        hw_every_ms = self.config["replica.high.watermark.checkpoint.interval.ms"]
        retention_every_ms = self.config["log.retention.check.interval.ms"]
        expire_every_ms = self.config["producer.id.expiration.check.interval.ms"]
        last_isr = last_hw = last_retention = last_expire = clock.monotonic_ms()
        while True:
            if self._waiting:  # acks=all deadlines: checked every 50 ms
                await trio.sleep(0.05)
            else:  # the next periodic task, or the first waiter, whichever comes first
                self._waiting.added = trio.Event()
                now = clock.monotonic_ms()
                due = min(last_isr + isr_every_ms, last_hw + hw_every_ms,
                          last_retention + retention_every_ms, last_expire + expire_every_ms)
                with trio.move_on_after(max(due - now, 50) / 1000):
                    await self._waiting.added.wait()
            if self.log_dir_error is not None:
                continue
            now = clock.monotonic_ms()
            try:
                self._expire_waiters(now)
                if now - last_isr >= isr_every_ms:
                    last_isr = now
                    self._check_isrs(now, lag_ms)
                if now - last_hw >= hw_every_ms:
                    last_hw = now
                    self.checkpoint_high_watermarks()
                if now - last_retention >= retention_every_ms:
                    last_retention = now
                    self._apply_retention()
                if now - last_expire >= expire_every_ms:
                    last_expire = now
                    self.expire_producers(clock.wall_ms())
            except OSError as exc:
                self.fail_log_dir("checkpointing or applying retention", exc)

    def _expire_waiters(self, now: int) -> None:
        """Fail the acks=all waiters past their deadline, on the partitions that have any."""
        for partition in list(self._waiting):
            if not partition.expire_waiters(now):
                self._waiting.discard(partition)

    def _check_isrs(self, now: int, lag_ms: int) -> None:
        """Kafka's isr-expiration task, over the leaderships that may need it (``_isr_watch``)."""
        watch, self._isr_watch = self._isr_watch, set()
        partitions = self.partitions
        for partition in watch:
            st = partition.state
            if not st.is_leader or partitions.get((partition.topic, partition.index)) is not partition:
                continue
            self.propose(partition, st.maybe_shrink_isr(now, lag_ms))
            if not st.isr_settled():
                self._isr_watch.add(partition)

    def expire_producers(self, now_ms: int) -> int:
        """Forget, on every hosted replica, the producers idle for ``producer.id.expiration.ms``
        (by their last batch's timestamp) with no transaction ongoing, as Kafka's broker does
        every ``producer.id.expiration.check.interval.ms``; returns how many."""
        expiration_ms = int(self._broker_value("producer.id.expiration.ms"))
        return sum(len(p.producers.expire(now_ms, expiration_ms)) for p in list(self.partitions.values()))

    def _apply_retention(self) -> None:
        for partition in list(self.partitions.values()):
            partition.apply_retention()

    async def run_cleaner(self) -> None:
        """Log compaction (see the module doc): a round every ``log.cleaner.backoff.ms``,
        unless ``log.cleaner.enable`` is false."""
        if not self.config["log.cleaner.enable"]:
            return
        while True:  # the backoff as in force now: a dynamic change applies from the next round
            await trio.sleep(int(self._broker_value("log.cleaner.backoff.ms")) / 1000)
            await self.clean_logs()

    async def clean_logs(self) -> int:
        """One cleaner round over the hosted compacted replicas; returns how many logs it
        compacted."""
        cleaned = 0
        # The cheap part of _clean's test first, in one pass, and the policy once per topic
        # (every replica of a topic has its configuration): a round over 100,000 replicas
        # awaiting each cost an idle node 3% of a core, and testing each one's policy still
        # a sixth of its idle CPU at 20,000 (issue 19).
        partitions = self.partitions
        candidates = []
        for topic, indexes in self._indexes.items():
            if partitions[(topic, next(iter(indexes)))].log.config.compact:
                candidates += [((topic, i), p) for i in indexes
                               if len((p := partitions[(topic, i)]).log.segments) >= 2]
        for key, partition in candidates:
            if await self._clean(key, partition):
                cleaned += 1
        return cleaned

    def _current(self, key, partition: Partition) -> bool:
        return self.partitions.get(key) is partition and not partition.log.closed

    async def _clean(self, key, partition: Partition) -> bool:
        plog = partition.log
        st = partition.state
        if (not self._current(key, partition) or not plog.config.compact or len(plog.segments) < 2
                or not (st.is_leader or st.role.value == "follower")
                or self._uncleanable.get(key) is partition):
            return False
        truncations = partition.truncations
        # prepare decides too: it returns None unless needs_cleaning(...) holds.
        # Below the LSO: nothing of an undecided transaction is cleaned (nor shadows older data).
        prepare = functools.partial(self.cleaner.prepare, plog, clock.wall_ms(),
                                    upper_bound_offset=partition.last_stable_offset)
        try:
            plan = await trio.to_thread.run_sync(prepare)
        except Exception:  # noqa: BLE001 - a bad log must not stop the cleaner
            if self._current(key, partition):
                log.exception("%s: log cleaning failed; this replica is not cleaned again until "
                              "it is reopened", partition.name)
                self._uncleanable[key] = partition
            return False
        if plan is None:
            return False
        # Nothing awaits from here to the end of commit: no append or truncation between.
        if (not self._current(key, partition) or partition.truncations != truncations
                or not plog.config.compact):  # replaced, closed, truncated or altered meanwhile
            self.cleaner.discard(plan)
            return False
        try:
            result = self.cleaner.commit(plan)
        except Exception:  # noqa: BLE001
            log.exception("%s: swapping in cleaned segments failed; this replica is not cleaned "
                          "again until it is reopened", partition.name)
            self._uncleanable[key] = partition
            return False
        if result is None:
            return False
        log.info("%s: cleaned offsets %d..%d: %d segments (%d bytes) -> %d (%d bytes), %d records "
                 "and %d tombstones removed, %d keys", partition.name, result.first_dirty_offset,
                 result.end_offset, result.segments_in, result.bytes_in, result.segments_out,
                 result.bytes_out, result.records_removed, result.tombstones_removed, result.keys)
        return True

    def checkpoint_high_watermarks(self) -> None:
        """Write the replication-offset checkpoint when a high watermark changed or a
        replica came or went since the last write; fsync the log directory for the logs
        created or deleted meanwhile (``LogDir.sync_dir``).  Only the replicas that notified
        a change are looked at: building the whole map every 5 s cost an idle node with
        100,000 replicas 3% of a core (issue 19).  Every ``HW_FULL_PASS_EVERY`` calls the
        map is built whole anyway, so a move that did not notify is written within a minute."""
        self.log_dir.sync_dir()
        dirty, self._hw_dirty = self._hw_dirty, set()
        self._hw_calls += 1
        if self._hw_rebuild or self._hw_calls % HW_FULL_PASS_EVERY == 0:
            hws = {key: p.state.high_watermark for key, p in self.partitions.items()}
            self._hw_rebuild = False
        elif not dirty:
            return
        else:
            hws = self._checkpointed_hw.copy()
            partitions = self.partitions
            for p in dirty:
                key = (p.topic, p.index)
                if partitions.get(key) is p:
                    hws[key] = p.state.high_watermark
        if hws == self._checkpointed_hw:
            return
        self._hw_checkpoint.write(hws)
        self._checkpointed_hw = hws

    def close(self) -> None:
        if self.log_dir_error is not None:
            return  # nothing is written to a failed directory, not even a clean shutdown
        self._hw_rebuild = True
        self.checkpoint_high_watermarks()
        for partition in self.partitions.values():
            partition.checkpoint_epochs(sync=True)
            partition.close()
        self.log_dir.close()


def _directory_id(path: Path) -> uuid.UUID:
    """The log directory's ``directory.id`` from its meta.properties (KIP-858), or a
    stable id derived from its path when it has none."""
    try:
        meta = read_meta(path)
        if meta is not None and meta.directory_id:
            return parse_uuid_string(meta.directory_id)
    except Exception:  # noqa: BLE001 - an unformatted dir (in-process tests): derive one
        pass
    return uuid.uuid5(uuid.NAMESPACE_URL, str(path.resolve()))


def _config_diff(old: LogConfig, new: LogConfig) -> str:
    before, after = old.to_properties(), new.to_properties()
    return ", ".join(f"{k}={after[k]}" for k in sorted(after) if before.get(k) != after[k]) or "none"
