import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams' word count against a kraft cluster: lines from INPUT, the running count
 * of each word to OUTPUT (a KTable's changelog stream).  Runs until SECONDS pass or the
 * process is told to stop; prints "state RUNNING" once the application runs, and exits 1
 * if it ever reaches ERROR.
 *
 * Args: bootstrap input output application.id processing.guarantee seconds
 */
public class KraftStreamsWordCount {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], input = args[1], output = args[2], appId = args[3], guarantee = args[4];
        long seconds = Long.parseLong(args[5]);
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args.length > 6 ? args[6] : "/tmp/kraft-streams-" + appId);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
               .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
               .filter((key, word) -> !word.isEmpty())
               .map((key, word) -> KeyValue.pair(word, word))
               .groupByKey()
               .count()
               .toStream()
               .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stop = new CountDownLatch(1);
        final boolean[] failed = {false};
        streams.setStateListener((now, before) -> {
            System.out.println("state " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR) {
                failed[0] = true;
                stop.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("uncaught " + e);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(stop::countDown));
        streams.start();
        stop.await(seconds, java.util.concurrent.TimeUnit.SECONDS);
        streams.close(Duration.ofSeconds(20));
        System.exit(failed[0] ? 1 : 0);
    }
}
