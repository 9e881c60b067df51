"""kraft: a KRaft-style, Kafka-wire-compatible replicated commit-log broker."""
