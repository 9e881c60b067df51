"""Apache Kafka's own tools and Java clients for tests: skip with the reason when Java,
Maven or the one-time download (kraft.apache_kafka) is missing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kraft import apache_kafka

JAVA_SOURCES = Path(__file__).resolve().parent / "java"


def kafka_libs() -> Path:
    """The Kafka jars (downloaded by Maven on first use, a few minutes once), or a skip."""
    try:
        return apache_kafka.ensure_libs()
    except KafkaUnavailable as exc:
        pytest.skip(f"Apache Kafka's Java tools are unavailable: {exc}")


KafkaUnavailable = apache_kafka.KafkaUnavailable


def compile_java(source: str, out_dir: Path, libs: Path) -> Path:
    """``javac`` one program of tests/java against the Kafka jars; returns the classes dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["javac", "-d", str(out_dir), "-cp", str(libs / "*"), str(JAVA_SOURCES / source)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return out_dir


def run_tool(tool: str, *args: str, input: str | None = None, timeout_s: float = 120.0):
    """A Kafka tool by its script name, e.g. ``run_tool("kafka-topics", "--list", ...)``."""
    return apache_kafka.run_tool(tool, list(args), input=input, timeout_s=timeout_s)
