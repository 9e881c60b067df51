"""Helpers for the log tests: build valid v2 record batches without the records package,
and crash the log cleaner partway through its file operations.

The log never decodes records, but the batches here are nevertheless well formed (varint
records with a key-less value), with a correct CRC-32C over bytes [21:].
"""

from __future__ import annotations

import struct

import crc32c
import pytest

from kraft.log.cleaner import LogCleaner, SimulatedCrash

_AFTER_CRC = struct.Struct(">hiqqqhii")
_BEFORE_CRC = struct.Struct(">qiibI")


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, value: bytes) -> bytes:
    body = (b"\x00" + _varint(timestamp_delta) + _varint(offset_delta) + _varint(-1)
            + _varint(len(value)) + value + _varint(0))
    return _varint(len(body)) + body


def make_batch(base_offset: int = 0, count: int = 1, *, timestamp: int = 1_000_000,
               ts_step: int = 1, value_size: int = 10, epoch: int = 0, fill: int | None = None,
               producer_id: int = -1) -> bytes:
    """A v2 batch of ``count`` records with values of ``value_size`` bytes.

    Record i has timestamp ``timestamp + i * ts_step``; the batch's max timestamp is the
    last one.  ``fill`` picks the value bytes (default derived from the base offset).
    """
    byte = (base_offset if fill is None else fill) & 0xFF
    records = b"".join(_record(i, i * ts_step, bytes([byte]) * value_size) for i in range(count))
    max_ts = timestamp + (count - 1) * ts_step
    after = _AFTER_CRC.pack(0, count - 1, timestamp, max_ts, producer_id, -1, -1, count) + records
    crc = crc32c.crc32c(after)
    return _BEFORE_CRC.pack(base_offset, 9 + len(after), epoch, 2, crc) + after


def clean_until_crash(log, now_ms: int, crash_after: int, **clean_options) -> None:
    """Runs the log cleaner on ``log`` and crashes it (``SimulatedCrash``) once it has done
    ``crash_after`` file operations, then drops ``log`` as the crashed process would.

    ``clean_options`` go to ``LogCleaner.clean`` (``force=True``, ...).  The test fails if
    the cleaner finishes before the crash.
    """
    done: list[str] = []

    def step(label: str) -> None:
        done.append(label)
        if len(done) > crash_after:
            raise SimulatedCrash(label)

    with pytest.raises(SimulatedCrash):
        LogCleaner().clean(log, now_ms, step=step, **clean_options)
    log.abandon()


def test_make_batch_is_valid():
    from kraft.records.header import iter_batches

    data = make_batch(5, 3, timestamp=100, ts_step=10) + make_batch(8, 1)
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.last_offset, h.records_count) for h in headers] == [(5, 7, 3), (8, 8, 1)]
    assert headers[0].max_timestamp == 120
