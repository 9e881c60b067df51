"""The queue analysis of one partition, vectorized: numpy over its rows' columns.

Theory of operation
-------------------
The Spark queue checker (``spark_queue``) reduces a history to *rows*: one per message a
send carried (``src`` 0) and one per ``(offset, value)`` pair an ok poll read (``src``
1), grouped by partition key.  :func:`analyse` finds in one partition's rows what
``queue.check_partition`` finds in its records, with sorts and grouped reductions over
whole columns instead of a Python loop per record:

* values are integer codes, so "who shows which value at which offset" is a sort by
  ``(offset, value)`` or ``(value, offset)`` and a look at the group boundaries
  (inconsistent offsets, duplicates); the first showing of anything is the least
  ``(src, invoke index, pos)``;
* the first read of each value is its first row in read order (G1a, lost, unseen,
  unexpected, realtime lag);
* the previous read or ok send of the same consumer or producer is the previous row
  after one sort by ``(process, src, known, invoke index, pos)`` (poll skips, backward
  polls and sends); the version order is the rank among the distinct known offsets;
* realtime order is a running maximum of offsets over ok sends in completion order: a
  send is a candidate only if a send completed before it began landed higher, and only
  candidates whose highest earlier send is their own producer's are looked at one by one.

An anomaly comes out as a *row*: ``kind``, ``key``, ``first`` (the lowest invoke
index its example names), ``seq`` (its order among the anomalies of its kind, key and
``first``), ``refs`` (``{"src", "i", "pos", "c"}``: the rows it names, ``c`` the
completion index of the row's operation),
``offsets``, ``delta``, ``extra``, with what its example needs beyond those rows in
``more``.  The driver fetches the few operations the examples name and turns rows into
the anomaly dicts of the single-process path (``spark_queue.example``).  Counts are
complete; at most ``max_examples`` rows of each kind are kept, the first by ``(lowest
invoke index named, seq)``, the order in which the driver picks examples overall.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

NULL = np.iinfo(np.int64).min  # a missing long: numpy integers have no null
OK, FAIL, INFO = 0, 1, 2  # the ``type`` codes
SEND, READ = 0, 1  # the ``src`` codes
SKIPPED_SHOWN = 16  # check_partition lists at most this many skipped offsets


class Rows(NamedTuple):
    """One partition's rows, as equally long int64 arrays."""

    src: np.ndarray  # SEND or READ
    proc: np.ndarray  # process code
    i_index: np.ndarray
    i_time: np.ndarray
    c_index: np.ndarray  # NULL while pending
    c_time: np.ndarray  # NULL while pending
    type: np.ndarray  # OK, FAIL or INFO (reads are OK)
    pos: np.ndarray  # the message's place in its send, the pair's in its poll's list
    offset: np.ndarray  # NULL when unknown (a message not acknowledged)
    value: np.ndarray  # value code: equal codes, equal values
    reset: np.ndarray  # the process's latest position reset before the operation, or NULL


def row_id(row: dict[str, Any]) -> tuple:
    """What tells an anomaly row from every other (``more`` keys skips by it)."""
    return (row["kind"], row["key"],
            tuple((r["src"], r["i"], r["pos"]) for r in row["refs"]))


def analyse(key: str, r: Rows, t0: int, bucket_ns: int, max_examples: int
            ) -> dict[str, Any]:
    """Everything ``check_partition`` finds in one partition, as anomaly rows.

    Returns ``{"key", "counts": {kind: n}, "rows": [anomaly row], "more", "acked",
    "seen" (bucket -> sends acknowledged / first seen), "lag-sum", "lag-n", "worst"
    (the send seen latest: ``{"lag", "i", "c", "pos", "read-i", "read-c"}`` or None)}``.
    """
    f = _Found(key, r, max_examples)
    known = r.offset != NULL
    read = r.src == READ
    more: dict = {}
    _shows(f, known, more)
    first_read = _first_reads(r, read)
    _writes(f, known, read, first_read)
    _sequences(f, known, more)
    _realtime(f, known)
    return {"key": key, "counts": f.counts, "rows": f.rows, "more": more,
            **_lag(r, first_read, t0, bucket_ns)}


class _Found:
    """The anomaly rows of one partition, counted and capped per kind."""

    def __init__(self, key: str, r: Rows, max_examples: int) -> None:
        self.key, self.r, self.max_examples = key, r, max_examples
        self.counts: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []

    def ref(self, x: Any) -> dict[str, Any]:
        """A reference to row ``x``: ``c`` its operation's completion index (None while
        pending), so the driver can read the operation's two records."""
        c = int(self.r.c_index[x])
        return {"src": int(self.r.src[x]), "i": int(self.r.i_index[x]),
                "pos": int(self.r.pos[x]), "c": None if c == NULL else c}

    def add(self, kind: str, seq: np.ndarray, refs: list[np.ndarray],
            offsets: list[np.ndarray] | None = None, delta: np.ndarray | None = None,
            extra: np.ndarray | None = None, first_i: np.ndarray | None = None
            ) -> list[tuple[int, dict[str, Any]]]:
        """Counts ``len(seq)`` anomalies of ``kind`` and keeps the first few.

        ``refs`` holds one array of row numbers per reference of the anomaly;
        ``first_i`` the lowest invoke index each anomaly's example names (that of its
        references by default), ``seq`` its order among those of equal ``first_i`` (the
        order in which ``check_partition`` finds them).  Returns ``(j, row)`` for each
        row kept, ``j`` its place in the arrays given.
        """
        if not len(seq):
            return []
        self.counts[kind] = self.counts.get(kind, 0) + len(seq)
        if first_i is None:
            first_i = np.minimum.reduce([self.r.i_index[x] for x in refs])
        kept = []
        for j in np.lexsort((seq, first_i))[:self.max_examples]:
            row = {"kind": kind, "key": self.key, "first": int(first_i[j]),
                   "seq": int(seq[j]), "refs": [self.ref(x[j]) for x in refs],
                   "offsets": None if offsets is None else [int(o[j]) for o in offsets],
                   "delta": None if delta is None else int(delta[j]),
                   "extra": None if extra is None else int(extra[j])}
            self.rows.append(row)
            kept.append((int(j), row))
        return kept


def _starts(*keys: np.ndarray) -> np.ndarray:
    """Where a new group begins, in arrays sorted by ``keys``."""
    new = np.zeros(len(keys[0]), bool)
    if len(new):
        new[0] = True
        for k in keys:
            new[1:] |= k[1:] != k[:-1]
    return new


def _grouped(rows: np.ndarray, r: Rows, *group: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``rows`` sorted by ``group`` (columns), then by place ``(src, invoke, pos)``;
    returns them with each group's start and size."""
    s = rows[np.lexsort((r.pos[rows], r.i_index[rows], r.src[rows],
                         *(g[rows] for g in reversed(group))))]
    starts = np.flatnonzero(_starts(*(g[s] for g in group)))
    return s, starts, np.diff(np.append(starts, len(s)))


def _shows(f: _Found, known: np.ndarray, more: dict) -> None:
    """Inconsistent offsets (an offset showing two values) and duplicates (a value at
    two offsets), by the first showing of each ``(offset, value)``."""
    r = f.r
    k = np.flatnonzero(known)
    for kind, a, b in (("inconsistent-offsets", r.offset, r.value),
                       ("duplicate", r.value, r.offset)):
        s, starts, _ = _grouped(k, r, a, b)
        firsts = s[starts]  # the first showing of each (a, b), by a then b
        s, starts, sizes = _grouped(firsts, r, a)  # by a, each group by place
        bad = sizes > 1
        this = s[starts[bad]]  # the first showing of an a shown with two b's
        # the example lists the first showing of each b: it names the lowest of those
        first_i = np.minimum.reduceat(r.i_index[s], starts)[bad] if len(s) else this
        if kind == "duplicate":  # found in order of first showing
            seq = (r.src[this] << 62) + (r.i_index[this] << 20) + r.pos[this]
        else:  # found by offset
            seq = r.offset[this]
        for j, row in f.add(kind, seq, [this], [r.offset[this]], first_i=first_i):
            group = s[starts[bad][j]:starts[bad][j] + sizes[bad][j]]
            if kind == "duplicate":  # every offset, by offset
                group = group[np.argsort(r.offset[group], kind="stable")]
                more[("dup", f.key, row["refs"][0]["i"], row["refs"][0]["pos"])] = [
                    (int(r.offset[x]), f.ref(x)) for x in group]
            else:  # every value
                more[("io", f.key, row["offsets"][0])] = [f.ref(x) for x in group]


def _first_reads(r: Rows, read: np.ndarray) -> np.ndarray:
    """For each row, the row of the first read of its value (-1 if never read)."""
    rd = np.flatnonzero(read)
    s = rd[np.lexsort((r.pos[rd], r.i_index[rd]))]
    values, first = np.unique(r.value[s], return_index=True)
    by_value = np.full(int(r.value.max()) + 1 if len(r.value) else 0, -1)
    by_value[values] = s[first]
    return by_value[r.value]


def _writes(f: _Found, known: np.ndarray, read: np.ndarray, first_read: np.ndarray) -> None:
    """G1a, lost writes, unseen writes and unexpected reads."""
    r = f.r
    send = ~read
    seq = (r.i_index << 20) + r.pos  # found in invocation order
    x = np.flatnonzero(send & (r.type == FAIL) & (first_read >= 0))
    f.add("G1a", seq[x], [x, first_read[x]])
    gone = send & (r.type == OK) & (first_read < 0)
    read_offsets = r.offset[read & known]
    if len(read_offsets):
        max_read = read_offsets.max()
        lost = known & (r.offset < max_read)
        x = np.flatnonzero(gone & lost)
        f.add("lost-write", seq[x], [x], extra=np.full(len(x), max_read))
        gone &= ~lost
    x = np.flatnonzero(gone)
    f.add("unseen", seq[x], [x])
    sent = np.zeros(int(r.value.max()) + 1 if len(r.value) else 0, bool)
    sent[r.value[send]] = True
    x = np.flatnonzero(read & (first_read == np.arange(len(read))) & ~sent[r.value])
    f.add("unexpected", seq[x], [x])


def _sequences(f: _Found, known: np.ndarray, more: dict) -> None:
    """Each consumer's reads and each producer's acknowledged messages, in invocation
    order: skips and steps back, within one poll or send and between two."""
    r = f.r
    order = np.unique(r.offset[known])  # the version order
    rank = np.searchsorted(order, r.offset)
    s = np.lexsort((r.pos, r.i_index, known, r.src, r.proc))
    p, x = s[:-1], s[1:]
    same = (r.proc[p] == r.proc[x]) & (r.src[p] == r.src[x]) & known[p] & known[x]
    p, x = p[same], x[same]  # x follows p
    internal = r.i_index[p] == r.i_index[x]
    back = r.offset[x] <= r.offset[p]
    d = rank[x] - rank[p]
    polls = r.src[x] == READ
    # a position reset of the consumer between two polls excuses the step
    excused = ~internal & (r.reset[x] != NULL) & (r.reset[x] > r.c_index[p])
    steps = polls & ~excused
    for kind, m, refs in (
            ("int-nonmonotonic-poll", steps & internal & back, [x]),
            ("int-poll-skip", steps & internal & ~back & (d > 1), [x]),
            ("nonmonotonic-poll", steps & ~internal & back, [p, x]),
            ("poll-skip", steps & ~internal & ~back & (d > 1), [p, x]),
            ("int-nonmonotonic-send", ~polls & back & internal, [p, x]),
            ("nonmonotonic-send", ~polls & back & ~internal, [p, x])):
        kept = f.add(kind, r.pos[x[m]], [y[m] for y in refs], [r.offset[p[m]], r.offset[x[m]]],
                     d[m])
        if kind.endswith("skip"):
            for j, row in kept:
                lo = rank[p[m][j]] + 1
                more[("skip", row_id(row))] = [
                    int(o) for o in order[lo:lo + min(SKIPPED_SHOWN, int(d[m][j]) - 1)]]


def _realtime(f: _Found, known: np.ndarray) -> None:
    """Sends that landed below a send of another producer completed before they began."""
    r = f.r
    oks = np.flatnonzero((r.src == SEND) & (r.type == OK) & known)
    done = oks[r.c_time[oks] != NULL]
    done = done[np.lexsort((r.pos[done], r.i_index[done], r.c_time[done]))]
    if not len(done):
        return
    highest = np.maximum.accumulate(r.offset[done])  # over sends completed so far
    k = np.searchsorted(r.c_time[done], r.i_time[oks], "left")  # completed before
    cand = (k > 0) & (highest[np.maximum(k - 1, 0)] > r.offset[oks])
    bs, ks = oks[cand], k[cand]
    # the earliest send to reach that highest offset, if it is another producer's
    a = done[np.searchsorted(highest, highest[ks - 1], "left")]
    mine = r.proc[a] == r.proc[bs]
    for j in np.flatnonzero(mine):  # the highest of another producer's, if any beats b
        b, before = bs[j], done[:ks[j]]
        offsets = np.where(r.proc[before] != r.proc[b], r.offset[before], NULL)
        best = int(np.argmax(offsets))  # the first (earliest) of the highest
        a[j] = before[best] if offsets[best] > r.offset[b] else -1
    hit = a >= 0
    a, bs = a[hit], bs[hit]
    f.add("realtime-order", (r.i_index[bs] << 20) + r.pos[bs], [a, bs],
          [r.offset[a], r.offset[bs]])


def _lag(r: Rows, first_read: np.ndarray, t0: int, bucket_ns: int) -> dict[str, Any]:
    """Sends acknowledged and first seen per time bucket; how late they were seen."""
    done = np.flatnonzero((r.src == SEND) & (r.type == OK) & (r.c_time != NULL))
    seen = done[first_read[done] >= 0]
    q = first_read[seen]
    lag = np.maximum(0, r.i_time[q] - r.c_time[seen])
    out: dict[str, Any] = {
        "acked": _per_bucket((r.c_time[done] - t0) // bucket_ns),
        "seen": _per_bucket((np.maximum(r.c_time[q], r.c_time[seen]) - t0) // bucket_ns),
        "lag-sum": int(lag.sum()), "lag-n": len(lag), "worst": None}
    if len(seen):
        j = np.lexsort((r.pos[seen], r.i_index[seen], -lag))[0]
        out["worst"] = {"lag": int(lag[j]), "i": int(r.i_index[seen[j]]),
                        "c": int(r.c_index[seen[j]]), "pos": int(r.pos[seen[j]]),
                        "read-i": int(r.i_index[q[j]]), "read-c": int(r.c_index[q[j]])}
    return out


def _per_bucket(buckets: np.ndarray) -> dict[int, int]:
    b, n = np.unique(buckets, return_counts=True)
    return dict(zip(b.tolist(), n.tolist()))
