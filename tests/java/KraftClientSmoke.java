// Apache Kafka's Java clients against a kraft cluster: AdminClient, an idempotent
// KafkaProducer with acks=all, and a KafkaConsumer in a classic consumer group.
//
// Compiled at test time against the jars bench/kafka/pom.xml fetches (kraft.apache_kafka);
// tests/test_kafka_java_clients.py runs it.  Usage: KraftClientSmoke <bootstrap> <topic> <group>
// Prints one "ok ..." line per step; any failure is an exception and a non-zero exit.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class KraftClientSmoke {
    static final int PARTITIONS = 3;
    static final int RECORDS = 300;

    static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], group = args[2];
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        common.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");

        try (Admin admin = Admin.create(common)) {
            admin(admin, topic);
            produce(bootstrap, topic);
            consume(bootstrap, topic, group, "classic");
            groupAdmin(admin, topic, group);
            consume(bootstrap, topic, group + "-kip848", "consumer");
            groupAdmin(admin, topic, group + "-kip848");
            mixed(admin, bootstrap, topic, group + "-mixed");
            admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
            System.out.println("ok admin deleteTopics");
        }
        System.out.println("ok all");
    }

    static void admin(Admin admin, String topic) throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        Collection<Node> nodes = cluster.nodes().get(30, TimeUnit.SECONDS);
        Node controller = cluster.controller().get();
        String clusterId = cluster.clusterId().get();
        check(nodes.size() == 3, "describeCluster: 3 brokers, got " + nodes);
        check(clusterId != null && !clusterId.isEmpty(), "describeCluster: a cluster id");
        System.out.println("ok admin describeCluster nodes=" + nodes.size() + " controller=" + controller.id()
                + " clusterId=" + clusterId);

        NewTopic newTopic = new NewTopic(topic, PARTITIONS, (short) 3)
                .configs(Map.of("retention.ms", "3600000", "min.insync.replicas", "2"));
        admin.createTopics(List.of(newTopic)).all().get(30, TimeUnit.SECONDS);
        // Admin.createTopics' javadoc: brokers may learn of a new topic some time after the
        // answer, and listTopics / describeTopics may not show it until then.
        long created = System.currentTimeMillis();
        while (!admin.listTopics().names().get().contains(topic)) {
            check(System.currentTimeMillis() - created < 10_000, "listTopics names the new topic");
            Thread.sleep(20);
        }
        System.out.println("ok admin createTopics listTopics (listed after "
                + (System.currentTimeMillis() - created) + " ms)");

        TopicDescription description = null;
        while (description == null) {  // each broker learns of the topic on its own (see above)
            try {
                description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            } catch (java.util.concurrent.ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException
                      && System.currentTimeMillis() - created < 10_000, "describeTopics: " + e);
                Thread.sleep(20);
            }
        }
        check(description.partitions().size() == PARTITIONS, "describeTopics: partitions");
        for (TopicPartitionInfo p : description.partitions()) {
            check(p.leader() != null && p.replicas().size() == 3 && p.isr().size() == 3,
                  "describeTopics: leader, 3 replicas and 3 in sync: " + p);
        }
        System.out.println("ok admin describeTopics id=" + description.topicId());

        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config config = null;
        while (config == null) {  // the broker asked may learn of the topic after the one above
            try {
                config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            } catch (java.util.concurrent.ExecutionException e) {
                check(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException
                      && System.currentTimeMillis() - created < 10_000, "describeConfigs: " + e);
                Thread.sleep(20);
            }
        }
        check("3600000".equals(config.get("retention.ms").value()), "describeConfigs: retention.ms");
        check(config.get("retention.ms").source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
              "describeConfigs: retention.ms is a dynamic topic config");
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry("max.message.bytes", "500000"), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get(30, TimeUnit.SECONDS);
        long deadline = System.currentTimeMillis() + 10_000;  // brokers apply the change as they replay it
        while (true) {
            ConfigEntry entry = admin.describeConfigs(List.of(resource)).all().get().get(resource).get("max.message.bytes");
            if ("500000".equals(entry.value())) {
                break;
            }
            check(System.currentTimeMillis() < deadline, "incrementalAlterConfigs: max.message.bytes=500000, got " + entry);
            Thread.sleep(100);
        }
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, "1");
        Config brokerConfig = admin.describeConfigs(List.of(broker)).all().get().get(broker);
        check(brokerConfig.get("num.partitions") != null, "describeConfigs broker 1: num.partitions");
        System.out.println("ok admin describeConfigs incrementalAlterConfigs");
    }

    static void produce(String bootstrap, String topic) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        Map<Integer, Long> lastOffset = new HashMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sends = new ArrayList<>();
            for (int i = 0; i < RECORDS; i++) {
                sends.add(producer.send(new ProducerRecord<>(topic, i % PARTITIONS, "k" + i, "v" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> send : sends) {
                RecordMetadata md = send.get(60, TimeUnit.SECONDS);
                Long previous = lastOffset.put(md.partition(), md.offset());
                check(previous == null || md.offset() == previous + 1,
                      "offsets in a partition are consecutive: " + previous + " then " + md.offset());
            }
        }
        for (int p = 0; p < PARTITIONS; p++) {
            check(lastOffset.get(p) == RECORDS / PARTITIONS - 1, "partition " + p + " ends at " + lastOffset.get(p));
        }
        System.out.println("ok producer idempotent acks=all records=" + RECORDS);
    }

    // protocol "classic" subscribes by name; "consumer" (KIP-848) by a regex the coordinator resolves
    static void consume(String bootstrap, String topic, String group, String protocol) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Set<String> seen = new HashSet<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            if (protocol.equals("consumer")) {  // a regex the broker resolves (RE2J syntax)
                consumer.subscribe(new SubscriptionPattern(topic + "|no-such-topic-.*"));
            } else {
                consumer.subscribe(List.of(topic));
            }
            long deadline = System.currentTimeMillis() + 45_000;
            while (seen.size() < RECORDS) {
                check(System.currentTimeMillis() < deadline, "consumed " + seen.size() + " of " + RECORDS);
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    check(r.value().equals("v" + r.key().substring(1)), "value matches key: " + r);
                    check(seen.add(r.key()), "no record twice: " + r.key());
                }
            }
            check(consumer.assignment().size() == PARTITIONS, "one member owns every partition");
            consumer.commitSync(Duration.ofSeconds(30));
            Set<TopicPartition> partitions = consumer.assignment();
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(partitions, Duration.ofSeconds(30));
            for (TopicPartition tp : partitions) {
                check(committed.get(tp) != null && committed.get(tp).offset() == RECORDS / PARTITIONS,
                      "committed offset of " + tp + ": " + committed.get(tp));
            }
        }
        System.out.println("ok consumer " + protocol + " group subscribe poll commitSync records=" + seen.size());
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, String protocol) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        if (protocol.equals("classic")) {
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        }
        return new KafkaConsumer<>(props);
    }

    // Both polled from this thread in turn until ``done`` holds (or 60 s): every record read once
    // or more, into ``seen``.
    static void pollBoth(List<KafkaConsumer<String, String>> consumers, Set<String> seen,
                         java.util.function.BooleanSupplier done, String what) {
        long deadline = System.currentTimeMillis() + 60_000;
        while (!done.getAsBoolean()) {
            check(System.currentTimeMillis() < deadline, what + ": seen " + seen.size() + ", assignments "
                    + consumers.stream().map(c -> c.assignment().toString()).toList());
            for (KafkaConsumer<String, String> c : consumers) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                    seen.add(r.key());
                }
            }
        }
    }

    // Kafka 4's online migration: a group.protocol=consumer member joins a classic group in use
    // (the upgrade), shares the partitions with the classic member, then leaves (the downgrade).
    static void mixed(Admin admin, String bootstrap, String topic, String group) throws Exception {
        Set<String> seen = new HashSet<>();
        try (KafkaConsumer<String, String> classic = consumer(bootstrap, group, "classic")) {
            classic.subscribe(List.of(topic));
            pollBoth(List.of(classic), seen, () -> classic.assignment().size() == PARTITIONS, "classic joins");
            try (KafkaConsumer<String, String> modern = consumer(bootstrap, group, "consumer")) {
                modern.subscribe(List.of(topic));
                pollBoth(List.of(classic, modern), seen, () -> seen.size() == RECORDS
                        && !classic.assignment().isEmpty() && !modern.assignment().isEmpty()
                        && classic.assignment().size() + modern.assignment().size() == PARTITIONS
                        && java.util.Collections.disjoint(classic.assignment(), modern.assignment()),
                        "a consumer member beside the classic one");
                ConsumerGroupDescription upgraded = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                check(upgraded.type().toString().equals("Consumer") && upgraded.members().size() == 2,
                      "upgraded: " + upgraded);
            }
            pollBoth(List.of(classic), seen, () -> classic.assignment().size() == PARTITIONS, "the classic one alone");
            ConsumerGroupDescription downgraded = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            check(downgraded.type().toString().equals("Classic"), "downgraded: " + downgraded);
        }
        System.out.println("ok mixed group: a consumer member upgraded the classic group, both shared "
                + PARTITIONS + " partitions, its leave downgraded the group; records=" + seen.size());
    }

    static void groupAdmin(Admin admin, String topic, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
        check(offsets.size() == PARTITIONS, "listConsumerGroupOffsets: " + offsets);
        ConsumerGroupDescription description = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        check(description.members().isEmpty(), "the group is empty once its consumer closed: " + description);
        admin.deleteConsumerGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
        System.out.println("ok admin listConsumerGroupOffsets describeConsumerGroups deleteConsumerGroups state="
                + description.groupState() + " type=" + description.type());
    }
}
