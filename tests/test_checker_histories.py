"""Hand-built histories shared by the checker tests (no tests of its own here).

Each scenario writes into one partition ``key`` using processes ``p .. p+9`` and returns
the anomalies it must produce, as ``{type: [[invoke indexes of the ops shown], ...]}``.
Scenarios on different keys and processes are independent, so several can share a
history (the Spark tests check them all in one run).
"""

from __future__ import annotations

from jepsen.history import Op


class Builder:
    """Appends invoke/completion records with dense indexes and 1 µs apart times."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add(self, type_: str, p, f: str, value=None) -> int:
        i = len(self.ops)
        self.ops.append(Op(i, 1_000 * (i + 1), type_, p, f, value))
        return i

    def invoke(self, p, f, value=None) -> int:
        return self.add("invoke", p, f, value)

    def send(self, p, key, value, offset=None, type_="ok") -> int:
        i = self.invoke(p, "send", [key, value])
        self.add(type_, p, "send", [key, [offset, value]] if type_ == "ok" else [key, value])
        return i

    def poll(self, p, value) -> int:
        i = self.invoke(p, "poll")
        self.add("ok", p, "poll", value)
        return i

    def op(self, p, f, value=None, type_="ok") -> int:
        i = self.invoke(p, f, value)
        self.add(type_, p, f, value)
        return i


def clean(b, k, p):
    b.op(p + 1, "assign", [k])
    b.send(p, k, f"{k}a", 0)
    b.send(p, k, f"{k}b", 1)
    b.poll(p + 1, {k: [[0, f"{k}a"]]})
    b.poll(p + 1, {k: [[1, f"{k}b"]]})
    return {}


def inconsistent_offsets(b, k, p):
    s1 = b.send(p, k, "a", 0)
    s2 = b.send(p + 2, k, "b", 0)
    b.poll(p + 1, {k: [[0, "a"]]})
    b.poll(p + 3, {k: [[0, "b"]]})
    return {"inconsistent-offsets": [[s1, s2]]}


def duplicate(b, k, p):
    s1 = b.send(p, k, "a", 0)
    b.send(p, k, "b", 1)
    q = b.poll(p + 1, {k: [[0, "a"], [1, "b"], [2, "a"]]})
    return {"duplicate": [[s1, q]]}


def lost_write(b, k, p):
    s1 = b.send(p, k, "a", 0)
    b.send(p, k, "b", 1)
    b.poll(p + 1, {k: [[1, "b"]]})
    return {"lost-write": [[s1]]}


def unseen(b, k, p):
    b.send(p, k, "a", 0)
    s2 = b.send(p, k, "b", 1)
    b.send(p, k, "c", type_="info")  # indefinite and never read: not committed
    b.poll(p + 1, {k: [[0, "a"]]})
    return {"unseen": [[s2]]}


def g1a(b, k, p):
    s1 = b.send(p, k, "a", type_="fail")
    b.send(p, k, "b", 0)
    q = b.poll(p + 1, {k: [[0, "b"], [1, "a"]]})
    return {"G1a": [[s1, q]]}


def unexpected(b, k, p):
    b.send(p, k, "a", 0)
    q = b.poll(p + 1, {k: [[0, "a"], [1, "z"]]})
    return {"unexpected": [[q]]}


def poll_skip(b, k, p):
    b.send(p, k, "a", 0)
    b.send(p, k, "b", 1)
    b.send(p, k, "c", 2)
    q1 = b.poll(p + 1, {k: [[0, "a"]]})
    q2 = b.poll(p + 1, {k: [[2, "c"]]})
    b.poll(p + 3, {k: [[1, "b"]]})
    return {"poll-skip": [[q1, q2]]}


def nonmonotonic_poll(b, k, p):
    b.send(p, k, "a", 0)
    b.send(p, k, "b", 1)
    q1 = b.poll(p + 1, {k: [[0, "a"], [1, "b"]]})
    q2 = b.poll(p + 1, {k: [[1, "b"]]})
    return {"nonmonotonic-poll": [[q1, q2]]}


def int_poll_skip(b, k, p):
    b.send(p, k, "a", 0)
    b.send(p, k, "b", 1)
    b.send(p, k, "c", 2)
    q = b.poll(p + 1, {k: [[0, "a"], [2, "c"]]})
    b.poll(p + 3, {k: [[1, "b"]]})
    return {"int-poll-skip": [[q]]}


def int_nonmonotonic_poll(b, k, p):
    b.send(p, k, "a", 0)
    b.send(p, k, "b", 1)
    q = b.poll(p + 1, {k: [[1, "b"], [0, "a"]]})
    return {"int-nonmonotonic-poll": [[q]]}


def nonmonotonic_send(b, k, p):
    s1 = b.send(p, k, "a", 1)
    s2 = b.send(p, k, "b", 0)
    b.poll(p + 1, {k: [[0, "b"], [1, "a"]]})
    return {"nonmonotonic-send": [[s1, s2]]}


def int_nonmonotonic_send(b, k, p):
    s = b.invoke(p, "send", [[k, "a"], [k, "b"]])
    b.add("ok", p, "send", [[k, [1, "a"]], [k, [0, "b"]]])
    b.poll(p + 1, {k: [[0, "b"], [1, "a"]]})
    return {"int-nonmonotonic-send": [[s, s]]}


def realtime_order(b, k, p):
    s1 = b.send(p, k, "a", 1)
    s2 = b.send(p + 2, k, "b", 0)
    b.poll(p + 1, {k: [[0, "b"], [1, "a"]]})
    return {"realtime-order": [[s1, s2]]}


SCENARIOS = {
    "inconsistent-offsets": inconsistent_offsets,
    "duplicate": duplicate,
    "lost-write": lost_write,
    "unseen": unseen,
    "G1a": g1a,
    "unexpected": unexpected,
    "poll-skip": poll_skip,
    "nonmonotonic-poll": nonmonotonic_poll,
    "int-poll-skip": int_poll_skip,
    "int-nonmonotonic-poll": int_nonmonotonic_poll,
    "nonmonotonic-send": nonmonotonic_send,
    "int-nonmonotonic-send": int_nonmonotonic_send,
    "realtime-order": realtime_order,
}


def all_scenarios() -> tuple[list[Op], dict]:
    """Every scenario in one history, scenario n on key n with processes 10n..10n+9."""
    b = Builder()
    expected: dict = {}
    for n, (name, fn) in enumerate(sorted(SCENARIOS.items())):
        for kind, groups in fn(b, n, 10 * n).items():
            expected.setdefault(kind, []).extend(groups)
    clean(b, 100, 1000)
    return b.ops, expected


def json_identities(k: int = 0, p: int = 0) -> tuple[list[Op], dict]:
    """``1``, ``1.0`` and ``true`` as three different values (as EDN has them, though
    Python finds them equal): on key ``k`` sent and read once each, which is clean; on
    key ``k + 1`` a send of ``1`` read back as ``1.0``, which is not."""
    b = Builder()
    b.send(p, k, 1, 0)
    b.send(p, k, 1.0, 1)
    b.send(p, k, True, 2)
    b.poll(p + 1, {k: [[0, 1], [1, 1.0], [2, True]]})
    s = b.send(p + 2, k + 1, 1, 0)
    q = b.poll(p + 3, {k + 1: [[0, 1.0]]})
    return b.ops, {"inconsistent-offsets": [[s, q]], "unexpected": [[q]], "unseen": [[s]]}


def negative_zero(k: int = 0, p: int = 0) -> tuple[list[Op], dict]:
    """``-0.0`` and ``0.0`` as one value, as Clojure's ``=`` has them (and Python's):
    keys ``k`` and ``k + 1`` send one and read back the other, which is clean; on key
    ``k + 2`` a send of ``0`` read back as ``-0.0`` is not (an integer is never a float).
    (The inconsistent offset lists its operations in the order of its values' reprs.)"""
    b = Builder()
    b.send(p, k, 0.0, 0)
    b.poll(p + 1, {k: [[0, -0.0]]})
    b.send(p, k + 1, -0.0, 0)
    b.poll(p + 1, {k + 1: [[0, 0.0]]})
    s = b.send(p + 2, k + 2, 0, 0)
    q = b.poll(p + 3, {k + 2: [[0, -0.0]]})
    return b.ops, {"inconsistent-offsets": [[q, s]], "unexpected": [[q]], "unseen": [[s]]}


def exponent_zeros(text: str) -> str:
    """A JSON value text with every ``-0.0`` and ``0.0`` written with an exponent, as
    other JSON writers may write them (same values)."""
    return text.replace("-0.0", "-0.0e0").replace(",0.0", ",0.0E0").replace("[0.0", "[0.0E0")


def nested_floats(k: int = 0, p: int = 0) -> tuple[list[Op], dict]:
    """Floats, booleans and -0.0 inside list and map values follow the rule of top-level
    values: on key ``k`` values read back equal (a map's names in another order, one of
    them of digits, -0.0 for 0.0), which is clean; on keys ``k + 1`` .. ``k + 3`` a send of ``[1, 1]``, ``[1]``
    and ``{"a": [0]}`` read back as ``[1, 1.0]``, ``[true]`` and ``{"a": [0.0]}``.
    (An inconsistent offset lists its operations in the order of its values' reprs.)"""
    b = Builder()
    b.send(p, k, [1, 1.0], 0)
    b.send(p, k, {"b": [0.0, True], "a": 1, "7": None}, 1)
    b.poll(p + 1, {k: [[0, [1, 1.0]], [1, {"7": None, "a": 1, "b": [-0.0, True]}]]})
    expected: dict = {}
    for j, (sent, read) in enumerate((([1, 1], [1, 1.0]), ([1], [True]),
                                      ({"a": [0]}, {"a": [0.0]}))):
        s = b.send(p + 2, k + 1 + j, sent, 0)
        q = b.poll(p + 3, {k + 1 + j: [[0, read]]})
        io = [s, q] if repr(sent) < repr(read) else [q, s]
        for kind, ops in (("inconsistent-offsets", io), ("unexpected", [q]),
                          ("unseen", [s])):
            expected.setdefault(kind, []).append(ops)
    return b.ops, expected


def string_and_integer_keys(p: int = 0) -> tuple[list[Op], dict]:
    """The partition keys ``"3"`` and ``3`` are two partitions (as ``"3"`` and ``3`` are
    two values), though a poll's JSON object names both ``"3"``: read back from JSON a
    name of digits is the integer key (``history.decode_value``), so the send to ``"3"``
    is never read (unseen), the one to ``3`` is; the string key ``"x"`` reads back as
    itself (clean)."""
    b = Builder()
    s = b.send(p, "3", "a", 0)
    b.send(p, 3, "b", 0)
    b.send(p, "x", "c", 0)
    b.poll(p + 1, {3: [[0, "b"]], "x": [[0, "c"]]})
    return b.ops, {"unseen": [[s]]}


def shown(result: dict) -> dict:
    """The anomalies of a queue result as ``{type: [[invoke indexes], ...]}``."""
    return {k: sorted([o["invoke-index"] for o in a["ops"]] for a in v["examples"])
            for k, v in result["anomalies"].items()}


# ---------------------------------------------------------------- registers


def reg(*steps, key="k"):
    """A register history from ``(process, type, f, payload)`` steps, keyed by ``key``."""
    b = Builder()
    for p, t, f, v in steps:
        b.add(t, p, f, [key, v] if key is not None else v)
    return b.ops
