"""File faults: lose unsynced writes (fsync-journal contract), truncate and bitflip segments."""

from jepsen.faults._corrupt import corrupt, flip_bits, segment_files, truncate_tail
from jepsen.faults._journal import (JOURNAL_ENV, JournalError, JournalWriter, LossReport,
                                    lose_unsynced_writes, read_journal, record_baseline)

__all__ = ["JOURNAL_ENV", "JournalError", "JournalWriter", "LossReport", "corrupt", "flip_bits",
           "lose_unsynced_writes", "read_journal", "record_baseline", "segment_files", "truncate_tail"]
