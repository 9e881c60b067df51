import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPEC_DIR = Path(os.environ.get("KRAFT_KAFKA_SPEC", REPO.parent / "shared" / "kafka-spec"))


@pytest.fixture
def spec_dir() -> Path:
    if not (SPEC_DIR / "message").is_dir():
        pytest.skip(f"the Kafka message specification is not at {SPEC_DIR} (set KRAFT_KAFKA_SPEC)")
    return SPEC_DIR
