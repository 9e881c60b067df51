"""Throughput of kraft.log: leader appends and sequential reads of 16 KiB batches.

    python bench/log_bench.py [--total-mb 256] [--batch-kb 16] [--segment-mb 1024]

Appends the same pre-built batch (the log copies it and assigns offsets, as a leader does)
until ``--total-mb`` are written, twice: once without fsync, once followed by a final
``flush()``.  Then reads everything back twice: fetch-sized reads (1 MiB, whole batches)
and one batch per read.  Runs in a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import tempfile
import time
from pathlib import Path

import crc32c

from kraft.log import Log, LogConfig


def one_record_batch(size: int, timestamp: int) -> bytes:
    """A valid v2 batch of exactly ``size`` bytes holding one record (value of zeros)."""
    def varint(n: int) -> bytes:
        z, out = (n << 1) ^ (n >> 63), bytearray()
        while z > 0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
        return bytes(out)

    for value_len in range(size - 61 - 20, size - 61):  # the record's framing is varint-sized
        body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(value_len) + bytes(value_len) + varint(0)
        record = varint(len(body)) + body
        if 61 + len(record) == size:
            break
    else:
        raise ValueError(f"cannot build a batch of exactly {size} bytes")
    after_crc = struct.pack(">hiqqqhii", 0, 0, timestamp, timestamp, -1, -1, -1, 1) + record
    head = struct.pack(">qiibI", 0, 9 + len(after_crc), 0, 2, crc32c.crc32c(after_crc))
    return head + after_crc


def bench_append(directory: Path, config: LogConfig, batch: bytes, count: int, flush: bool):
    log = Log.open(directory, config, clock=lambda: 1_700_000_000_000)
    start = time.perf_counter()
    for _ in range(count):
        log.append(batch, assign_offsets=True)
    appended = time.perf_counter() - start
    if flush:
        log.flush()
    total = time.perf_counter() - start
    log.close(flush=False)
    return appended, total


def bench_read(directory: Path, config: LogConfig, max_bytes: int):
    log = Log.open(directory, config, clock=lambda: 1_700_000_000_000, had_clean_shutdown=True)
    offset, nbytes, reads = 0, 0, 0
    start = time.perf_counter()
    while offset < log.log_end_offset:
        r = log.read(offset, max_bytes)
        nbytes += r.size
        offset = r.next_offset
        reads += 1
    elapsed = time.perf_counter() - start
    batches = log.log_end_offset
    log.close(flush=False)
    return elapsed, nbytes, reads, batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mb", type=int, default=256)
    parser.add_argument("--batch-kb", type=int, default=16)
    parser.add_argument("--segment-mb", type=int, default=1024)
    parser.add_argument("--dir", default=None, help="where to make the temporary directory")
    args = parser.parse_args()

    batch = one_record_batch(args.batch_kb * 1024, 1_700_000_000_000)
    count = args.total_mb * 1024 * 1024 // len(batch)
    mb = count * len(batch) / 1e6
    config = LogConfig(segment_bytes=min(args.segment_mb * 1024 * 1024, 2**31 - 1))
    root = Path(tempfile.mkdtemp(prefix="kraft-log-bench-", dir=args.dir))
    try:
        print(f"{count} batches of {len(batch)} bytes ({mb:.0f} MB), segment.bytes={config.segment_bytes}")
        for flush in (False, True):
            appended, total = bench_append(root / f"flush-{flush}", config, batch, count, flush)
            if not flush:  # drop its dirty pages, so the next run does not pay for their writeback
                shutil.rmtree(root / f"flush-{flush}")
            label = "append + final flush" if flush else "append (no fsync)   "
            print(f"{label}: {mb / total:8.1f} MB/s  {count / total:9.0f} batches/s"
                  + (f"  (appends alone {mb / appended:.1f} MB/s, fsync {total - appended:.2f} s)"
                     if flush else ""))
        for max_bytes, label in ((1024 * 1024, "read, 1 MiB fetches "), (len(batch), "read, 1 batch each  ")):
            elapsed, nbytes, reads, batches = bench_read(root / "flush-True", config, max_bytes)
            print(f"{label}: {nbytes / 1e6 / elapsed:8.1f} MB/s  {batches / elapsed:9.0f} batches/s"
                  f"  ({reads} reads)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
