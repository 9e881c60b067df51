"""Apache Kafka's broker configuration keys that kraft reads but does not act on, and the
few it refuses unless left at Kafka's default.

A ``server.properties`` written for Kafka must start a kraft node: thread counts, socket
buffers, purgatory intervals, remote-storage and share-group tuning, JSSE and Kerberos
details have no counterpart here, and refusing them would make every real file fail on
its first line.  They load, and the node logs them once at start-up, as Kafka logs a
"supplied but not used" key.  A key whose setting kraft cannot honour and whose loss
would change what the cluster enforces (a Java plugin class, a cipher-suite restriction,
tiered storage) is refused with the reason instead.

``tests/test_kafka_broker_keys.py`` holds both tables against the pinned Kafka release's
``KafkaConfig`` (every name here is Kafka's; every Kafka name is here or in ``KEYS``).
"""

from __future__ import annotations

# Kafka's key names, grouped by their first word.
NOT_USED = frozenset({
    "add.partitions.to.txn.retry.backoff.max.ms", "add.partitions.to.txn.retry.backoff.ms",
    "alter.log.dirs.replication.quota.window.num", "alter.log.dirs.replication.quota.window.size.seconds",
    "background.threads",
    "connection.failed.authentication.delay.ms",
    "connections.max.reauth.ms",
    "controlled.shutdown.enable",
    "controller.performance.always.log.threshold.ms", "controller.performance.sample.period.ms",
    "controller.quorum.retry.backoff.ms", "controller.quota.window.num", "controller.quota.window.size.seconds",
    "controller.socket.timeout.ms",
    "delegation.token.expiry.check.interval.ms", "delegation.token.expiry.time.ms",
    "delegation.token.max.lifetime.ms", "delegation.token.secret.key",
    "delete.records.purgatory.purge.interval.requests",
    "early.start.listeners",
    "fetch.max.bytes", "fetch.purgatory.purge.interval.requests",
    "group.coordinator.append.linger.ms", "group.coordinator.threads", "group.max.size",
    "group.share.assignors", "group.share.delivery.count.limit", "group.share.enable",
    "group.share.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
    "group.share.max.record.lock.duration.ms", "group.share.max.session.timeout.ms",
    "group.share.max.share.sessions", "group.share.max.size", "group.share.min.heartbeat.interval.ms",
    "group.share.min.record.lock.duration.ms", "group.share.min.session.timeout.ms",
    "group.share.partition.max.record.locks", "group.share.record.lock.duration.ms",
    "group.share.session.timeout.ms", "group.streams.heartbeat.interval.ms",
    "group.streams.max.heartbeat.interval.ms", "group.streams.max.session.timeout.ms", "group.streams.max.size",
    "group.streams.max.standby.replicas", "group.streams.min.heartbeat.interval.ms",
    "group.streams.min.session.timeout.ms", "group.streams.num.standby.replicas",
    "group.streams.session.timeout.ms",
    "initial.broker.registration.timeout.ms",
    "internal.metadata.delete.delay.millis", "internal.metadata.log.segment.bytes",
    "internal.metadata.max.batch.size.in.bytes", "internal.metadata.max.fetch.size.in.bytes",
    "kafka.metrics.polling.interval.secs", "kafka.metrics.reporters",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.threads", "log.dir.failure.timeout.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.scheduler.interval.ms",
    "log.flush.start.offset.checkpoint.interval.ms", "log.initial.task.delay.ms", "log.local.retention.bytes",
    "log.local.retention.ms", "log.preallocate", "log.roll.jitter.hours", "log.roll.jitter.ms",
    "max.connection.creation.rate",
    "metadata.log.segment.ms", "metadata.max.retention.bytes", "metadata.max.retention.ms",
    "metric.reporters",
    "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms",
    "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
    "num.replica.alter.log.dirs.threads", "num.replica.fetchers",
    "offset.metadata.max.bytes",
    "offsets.commit.timeout.ms", "offsets.load.buffer.size", "offsets.retention.check.interval.ms",
    "offsets.topic.compression.codec", "offsets.topic.segment.bytes",
    "producer.purgatory.purge.interval.requests",
    "queued.max.request.bytes", "queued.max.requests",
    "remote.fetch.max.wait.ms", "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes", "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.copy.quota.window.num",
    "remote.log.manager.copy.quota.window.size.seconds", "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.fetch.max.bytes.per.second", "remote.log.manager.fetch.quota.window.num",
    "remote.log.manager.fetch.quota.window.size.seconds", "remote.log.manager.task.interval.ms",
    "remote.log.manager.task.retry.backoff.max.ms", "remote.log.manager.task.retry.backoff.ms",
    "remote.log.manager.task.retry.jitter", "remote.log.manager.thread.pool.size",
    "remote.log.metadata.custom.metadata.max.bytes", "remote.log.metadata.manager.class.path",
    "remote.log.metadata.manager.impl.prefix", "remote.log.metadata.manager.listener.name",
    "remote.log.reader.max.pending.tasks", "remote.log.reader.threads", "remote.log.storage.manager.class.path",
    "remote.log.storage.manager.impl.prefix",
    "replica.socket.receive.buffer.bytes", "replica.socket.timeout.ms",
    "sasl.jaas.config", "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
    "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter", "sasl.login.retry.backoff.max.ms",
    "sasl.login.retry.backoff.ms", "sasl.oauthbearer.assertion.algorithm",
    "sasl.oauthbearer.assertion.claim.aud", "sasl.oauthbearer.assertion.claim.exp.seconds",
    "sasl.oauthbearer.assertion.claim.iss", "sasl.oauthbearer.assertion.claim.jti.include",
    "sasl.oauthbearer.assertion.claim.nbf.seconds", "sasl.oauthbearer.assertion.claim.sub",
    "sasl.oauthbearer.assertion.file", "sasl.oauthbearer.assertion.private.key.file",
    "sasl.oauthbearer.assertion.private.key.passphrase", "sasl.oauthbearer.assertion.template.file",
    "sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.scope", "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.token.endpoint.url", "sasl.server.max.receive.size",
    "server.max.startup.time.ms",
    "share.coordinator.append.linger.ms", "share.coordinator.cold.partition.snapshot.interval.ms",
    "share.coordinator.load.buffer.size", "share.coordinator.snapshot.update.records.per.snapshot",
    "share.coordinator.state.topic.compression.codec", "share.coordinator.state.topic.min.isr",
    "share.coordinator.state.topic.num.partitions", "share.coordinator.state.topic.prune.interval.ms",
    "share.coordinator.state.topic.replication.factor", "share.coordinator.state.topic.segment.bytes",
    "share.coordinator.threads", "share.coordinator.write.timeout.ms",
    "share.fetch.purgatory.purge.interval.requests",
    "socket.connection.setup.timeout.max.ms", "socket.connection.setup.timeout.ms",
    "socket.listen.backlog.size", "socket.receive.buffer.bytes", "socket.send.buffer.bytes",
    "ssl.allow.dn.changes", "ssl.allow.san.changes", "ssl.keymanager.algorithm", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "telemetry.max.bytes",
    "transaction.state.log.load.buffer.size", "transaction.two.phase.commit.enable",
    "unstable.api.versions.enable", "unstable.feature.versions.enable",})

_NO_JAVA = "kraft runs no Java classes"
# key -> (the values that mean "Kafka's default", why any other value is refused)
NOT_HONOURED: dict[str, tuple[frozenset[str], str]] = {
    **{k: (frozenset({""}), f"{_NO_JAVA}: the policy would not be enforced")
       for k in ("alter.config.policy.class.name", "create.topic.policy.class.name")},
    "client.quota.callback.class": (frozenset({""}), f"{_NO_JAVA}: quotas are client-quotas entities "
                                    "(kafka-configs --entity-type users/clients)"),
    "principal.builder.class": (
        frozenset({"", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"}),
        f"{_NO_JAVA}: principals come from the TLS subject (ssl.principal.mapping.rules) or the SASL user"),
    **{k: (frozenset({""}), f"{_NO_JAVA}: SASL is kraft's own PLAIN and SCRAM")
       for k in ("sasl.server.callback.handler.class", "sasl.client.callback.handler.class",
                 "sasl.login.callback.handler.class", "sasl.login.class")},
    **{k: (frozenset({"", f"org.apache.kafka.common.security.oauthbearer.DefaultJwt{kind}"}),
           f"{_NO_JAVA}: OAUTHBEARER is not among kraft's SASL mechanisms")
       for k, kind in (("sasl.oauthbearer.jwt.retriever.class", "Retriever"),
                       ("sasl.oauthbearer.jwt.validator.class", "Validator"))},
    **{k: (frozenset({""}), f"{_NO_JAVA}: TLS is Python's ssl module (OpenSSL)")
       for k in ("ssl.engine.factory.class", "security.providers")},
    "ssl.cipher.suites": (frozenset({""}), "kraft does not restrict cipher suites: OpenSSL's defaults apply "
                          "within ssl.enabled.protocols"),
    "remote.log.storage.system.enable": (frozenset({"false"}), "kraft has no tiered storage"),
    "remote.log.storage.manager.class.name": (frozenset({""}), f"{_NO_JAVA}: kraft has no tiered storage"),
    "remote.log.metadata.manager.class.name": (
        frozenset({"", "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"}),
        f"{_NO_JAVA}: kraft has no tiered storage"),
    "group.share.persister.class.name": (
        frozenset({"", "org.apache.kafka.server.share.persister.DefaultStatePersister"}),
        f"{_NO_JAVA}: kraft has no share groups"),
}


def refusal(name: str, value: str) -> str | None:
    """Why ``name = value`` is refused, or None when kraft can take it (an ignored key, or a
    NOT_HONOURED key at Kafka's default)."""
    entry = NOT_HONOURED.get(name)
    if entry is None:
        return None
    defaults, why = entry
    text = value.strip()
    text = text.removeprefix("class ").strip()
    return None if text.lower() in {d.lower() for d in defaults} or text.lower() == "null" else why
