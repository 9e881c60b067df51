// Apache Kafka's broker configuration keys, as the pinned release defines them: one line per
// key, "name<TAB>type<TAB>default" (the default as Kafka writes it back, "<none>" when a key
// has none, "<null>" when it defaults to null).
//
// Compiled at test time against the jars bench/kafka/pom.xml fetches (kraft.apache_kafka);
// tests/test_kafka_broker_keys.py holds kraft's tables of broker keys against its output.

import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.config.ConfigDef;

public class KafkaBrokerConfigKeys {
    public static void main(String[] args) {
        Map<String, ConfigDef.ConfigKey> keys = new TreeMap<>(kafka.server.KafkaConfig.configDef().configKeys());
        for (ConfigDef.ConfigKey key : keys.values()) {
            String value;
            if (!key.hasDefault()) {
                value = "<none>";
            } else if (key.defaultValue == null) {
                value = "<null>";
            } else {
                value = ConfigDef.convertToString(key.defaultValue, key.type);
            }
            System.out.println(key.name + "\t" + key.type + "\t" + value);
        }
    }
}
