"""The one place a kraft process reads wall-clock time from.

Wall time stamps records (CreateTime defaults, LogAppendTime), drives retention and is what
a clock nemesis attacks.  A fault-injection harness skews a node's clock by writing an
offset in milliseconds into the file named by ``KRAFT_CLOCK_OFFSET_FILE``; the offset is
re-read at most every ``_REFRESH_S`` so a bump or a strobe takes effect while the node runs.
Timeouts and elapsed-time measurements use ``monotonic_ms``, which no skew touches, as in
Kafka (a wall-clock jump must not expire every session at once).
"""

from __future__ import annotations

import os
import time

_REFRESH_S = 0.1
_offset_file = os.environ.get("KRAFT_CLOCK_OFFSET_FILE")
_offset_ms = 0
_read_at = 0.0


def _current_offset_ms() -> int:
    global _offset_ms, _read_at
    now = time.monotonic()
    if now - _read_at >= _REFRESH_S:
        _read_at = now
        try:
            with open(_offset_file) as f:
                _offset_ms = int(f.read().strip() or 0)
        except (OSError, ValueError):
            _offset_ms = 0
    return _offset_ms


def wall_ms() -> int:
    """Milliseconds since the epoch, as this node believes (including any injected skew)."""
    now = time.time_ns() // 1_000_000
    if _offset_file:
        now += _current_offset_ms()
    return now


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000
