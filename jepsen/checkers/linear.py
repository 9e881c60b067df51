"""Linearizability: the Wing-Gong / Lowe search, one key at a time.

Theory of operation
-------------------
A history of independent keys is linearizable iff each key's sub-history is
(P-compositionality, Horn & Kroening), so every key is searched alone and the keys can be
spread over Spark tasks.

For one key the search walks an ordered list of *entries*: a call entry at each
operation's invocation and a return entry at each ``ok`` completion.  ``info`` operations
(and operations still pending) have no return entry: they may take effect at any time
after their call, or never.  ``fail`` operations did not happen and are dropped, and so
are indefinite reads, which change nothing.

At a call entry the search tries to linearize the operation now: if the model accepts it
in the current state, the call and its return are lifted out of the list, the old
configuration is pushed on a stack, and the walk restarts at the head.  At a return entry
whose operation is still unlinearized, nothing earlier can be tried any more, so the
search backtracks: it pops the last linearized operation and tries the next entry after
its call.  Configurations ``(linearized set, model state)`` already explored are cached
(Lowe's improvement), which makes most real histories near-linear.  The search succeeds
when every ``ok`` operation is linearized, fails when it must backtrack past an empty
stack, and gives up with ``unknown`` after ``budget`` steps.

When a key fails, :func:`explain` finds the shortest failing prefix (the history cut at
the completion of its *failing op*; cutting makes later-completing operations
indefinite, so failing is monotone in the cut and bisection works), reports the window of
operations around the failing op, and the model states the search held when it had to
give up on it.

Models are small objects: ``init()``, ``step(state, f, arg, out)`` returning the next
state or ``None`` when the operation cannot happen there, and ``prepare`` that turns a
history value into ``(arg, out)``.  States must be hashable.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from jepsen.checkers._common import UNKNOWN, Flat, flatten, freeze, merge_valid, thaw
from jepsen.history import FAIL, INFO, OK, Op

DEFAULT_BUDGET = 200_000
MAX_FINAL_STATES = 10


class LinOp(NamedTuple):
    """One operation of a key's sub-history, as the search sees it."""

    i_index: int
    c_index: int | None  # None: indefinite (info or pending)
    process: Any
    f: str
    arg: Any
    out: Any
    i_time: int = 0
    c_time: int | None = None

    def ref(self) -> dict[str, Any]:
        return {"process": self.process, "f": self.f, "type": OK if self.c_index is not None
                else INFO, "invoke-index": self.i_index, "index": self.c_index,
                "invoke-time": self.i_time, "time": self.c_time,
                "value": {"arg": thaw(self.arg), "out": thaw(self.out)}}


# ---------------------------------------------------------------- models


class Model:
    """Base of the sequential specifications."""

    name = "model"
    fs: frozenset[str] = frozenset()
    readonly: frozenset[str] = frozenset({"read"})

    def init(self) -> Any:
        return None

    def prepare(self, f: str, i_payload: Any, c_payload: Any) -> tuple[Any, Any]:
        """``(arg, out)`` of an operation from its invoke and completion payloads."""
        return freeze(i_payload), freeze(c_payload)

    def step(self, state: Any, f: str, arg: Any, out: Any) -> Any:
        raise NotImplementedError


class Register(Model):
    """A read/write register, initially ``None``."""

    name = "register"
    fs = frozenset({"read", "write"})

    def step(self, state, f, arg, out):
        if f == "write":
            return ("v", arg)
        if f == "read":
            return state if _val(state) == out else None
        return None

    def init(self):
        return ("v", None)


class CasRegister(Register):
    """A register with compare-and-set: ``cas`` takes ``[old, new]``."""

    name = "cas-register"
    fs = frozenset({"read", "write", "cas"})

    def step(self, state, f, arg, out):
        if f == "cas":
            old, new = arg
            return ("v", new) if _val(state) == old else None
        return super().step(state, f, arg, out)


class SetModel(Model):
    """A grow-only set: ``add`` an element, ``read`` the whole set."""

    name = "set"
    fs = frozenset({"add", "read"})

    def init(self):
        return frozenset()

    def prepare(self, f, i_payload, c_payload):
        if f == "read":
            return None, (frozenset(freeze(x) for x in c_payload)
                          if c_payload is not None else None)
        return freeze(i_payload), None

    def step(self, state, f, arg, out):
        if f == "add":
            return state | {arg}
        if f == "read":
            return state if out == state else None
        return None


class LogModel(Model):
    """An append-only log: ``append`` a value, ``read`` the whole log in order."""

    name = "log"
    fs = frozenset({"append", "read"})

    def init(self):
        return ()

    def prepare(self, f, i_payload, c_payload):
        if f == "read":
            return None, freeze(c_payload) if c_payload is not None else None
        return freeze(i_payload), None

    def step(self, state, f, arg, out):
        if f == "append":
            return state + (arg,)
        if f == "read":
            return state if out == state else None
        return None


def _val(state):
    return state[1]


MODELS: dict[str, type[Model]] = {
    "register": Register,
    "cas-register": CasRegister,
    "set": SetModel,
    "log": LogModel,
}


def model_named(name: str | Model) -> Model:
    if isinstance(name, Model):
        return name
    try:
        return MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown model {name!r}; one of {sorted(MODELS)}") from None


# ---------------------------------------------------------------- extraction


def lin_record(model: Model, fl: Flat, keyed: bool = True) -> tuple[Any, LinOp] | None:
    """``(key, LinOp)`` for one flat operation, or None when it takes no part."""
    if fl.f not in model.fs or fl.c_type == FAIL:
        return None
    indefinite = fl.c_type != OK
    if indefinite and fl.f in model.readonly:
        return None
    iv, cv = fl.i_value, fl.c_value
    key = None
    if keyed:
        if not isinstance(iv, (list, tuple)) or len(iv) != 2:
            return None
        key, iv = iv[0], iv[1]
        if isinstance(cv, (list, tuple)) and len(cv) == 2:
            cv = cv[1]
        else:
            cv = None
    arg, out = model.prepare(fl.f, iv, None if indefinite else cv)
    if isinstance(key, list):
        key = freeze(key)
    return key, LinOp(fl.i_index, None if indefinite else fl.c_index, fl.process, fl.f, arg,
                      out, fl.i_time, None if indefinite else fl.c_time)


# ---------------------------------------------------------------- the search


class _Search(NamedTuple):
    valid: Any  # True / False / "unknown"
    steps: int
    stuck: list  # states held when backtracking at the return of `stuck_op`
    stuck_op: int | None


def search(model: Model, ops: list[LinOp], budget: int = DEFAULT_BUDGET,
           watch: int | None = None) -> _Search:
    """Runs the WGL search over one key's operations.

    Args:
        model: the sequential specification.
        ops: the key's operations (any order).
        budget: the most entries the search may visit before answering ``unknown``.
        watch: an op position whose blocked-return states are collected.
    """
    n = len(ops)
    # Entries: (order, is_return, op position). Calls sort before returns at one index.
    entries = []
    for i, o in enumerate(ops):
        entries.append((o.i_index, 0, i))
        if o.c_index is not None:
            entries.append((o.c_index, 1, i))
    entries.sort()
    m = len(entries)
    # A doubly linked list over entries 0..m-1; slot m is the head sentinel, -1 the end.
    nxt = [e + 1 if e + 1 < m else -1 for e in range(m)] + [0 if m else -1]
    prv = [e - 1 if e > 0 else m for e in range(m)] + [-1]
    ret_of = [-1] * n
    for e, (_, is_ret, i) in enumerate(entries):
        if is_ret:
            ret_of[i] = e
    remaining = sum(1 for o in ops if o.c_index is not None)
    kind = [x[1] for x in entries]
    opos = [x[2] for x in entries]

    def lift(e: int) -> None:
        a, b = prv[e], nxt[e]
        nxt[a] = b
        if b != -1:
            prv[b] = a
        r = ret_of[opos[e]]
        if r != -1:
            a, b = prv[r], nxt[r]
            nxt[a] = b
            if b != -1:
                prv[b] = a

    def unlift(e: int) -> None:
        r = ret_of[opos[e]]
        if r != -1:
            a, b = prv[r], nxt[r]
            nxt[a] = r
            if b != -1:
                prv[b] = r
        a, b = prv[e], nxt[e]
        nxt[a] = e
        if b != -1:
            prv[b] = e

    state = model.init()
    lin = 0
    seen: set = set()
    stack: list = []
    stuck: list = []
    steps = 0
    e = nxt[m]
    while remaining > 0:
        if e == -1:
            break  # only indefinite calls are left
        steps += 1
        if steps > budget:
            return _Search(UNKNOWN, steps, stuck, None)
        i = opos[e]
        if kind[e] == 0:
            o = ops[i]
            s2 = model.step(state, o.f, o.arg, o.out)
            if s2 is not None:
                lin2 = lin | (1 << i)
                cfg = (lin2, s2)
                if cfg not in seen:
                    seen.add(cfg)
                    stack.append((e, state))
                    state, lin = s2, lin2
                    lift(e)
                    if o.c_index is not None:
                        remaining -= 1
                    e = nxt[m]
                    continue
            e = nxt[e]
        else:
            if watch is not None and i == watch and len(stuck) < MAX_FINAL_STATES \
                    and state not in stuck:
                stuck.append(state)
            if not stack:
                return _Search(False, steps, stuck, i)
            e, state = stack.pop()
            j = opos[e]
            lin &= ~(1 << j)
            unlift(e)
            if ops[j].c_index is not None:
                remaining += 1
            e = nxt[e]
    return _Search(True, steps, stuck, None)


def _cut(ops: list[LinOp], at: int, readonly: frozenset[str]) -> list[LinOp]:
    """The history as it stood at record index ``at``: later completions are unknown."""
    out = []
    for o in ops:
        if o.i_index > at:
            continue
        if o.c_index is not None and o.c_index > at:
            if o.f in readonly:
                continue
            o = o._replace(c_index=None, c_time=None, out=None)
        out.append(o)
    return out


def explain(model: Model, ops: list[LinOp], budget: int) -> dict[str, Any]:
    """Shrinks a failing key to its shortest failing prefix and describes it."""
    cuts = sorted(o.c_index for o in ops if o.c_index is not None)
    lo, hi = 0, len(cuts) - 1  # cuts[hi] fails (the whole history)
    while lo < hi:
        mid = (lo + hi) // 2
        r = search(model, _cut(ops, cuts[mid], model.readonly), budget)
        if r.valid is False:
            hi = mid
        else:
            lo = mid + 1
    at = cuts[hi]
    prefix = _cut(ops, at, model.readonly)
    failing = next(o for o in prefix if o.c_index == at)
    fpos = prefix.index(failing)
    r = search(model, prefix, budget, watch=fpos)
    before = [o for o in prefix if o.c_index is not None and o.c_index < failing.i_index]
    last_before = max(before, key=lambda o: o.c_index) if before else None
    window = [o for o in prefix
              if o is failing or o is last_before
              or (o.i_index < failing.c_index
                  and (o.c_index is None or o.c_index > failing.i_index))]
    window.sort(key=lambda o: o.i_index)
    return {
        "op": failing.ref(),
        "window": [o.ref() for o in window],
        "final-states": [thaw(_show(s)) for s in r.stuck],
        "prefix-ops": len(prefix),
    }


def _show(state: Any) -> Any:
    if isinstance(state, tuple) and len(state) == 2 and state[0] == "v":
        return state[1]
    return state


def check_key(model: Model, key: Any, ops: list[LinOp],
              budget: int = DEFAULT_BUDGET) -> dict[str, Any]:
    """Checks one key's operations; the unit of work of a Spark task."""
    r = search(model, ops, budget)
    out: dict[str, Any] = {"key": thaw(key), "valid": r.valid, "ops": len(ops),
                           "steps": r.steps}
    if r.valid is False:
        out.update(explain(model, ops, budget))
    return out


def merge_keys(model: Model, results: Iterable[dict[str, Any]],
               max_examples: int = 100) -> dict[str, Any]:
    """Folds per-key results into the linearizability part of results.json."""
    rs = list(results)
    bad = sorted((r for r in rs if r["valid"] is False), key=lambda r: repr(r["key"]))
    unknown = sorted((repr(r["key"]) for r in rs if r["valid"] == UNKNOWN))
    return {
        "checker": "linearizable",
        "model": model.name,
        "valid": merge_valid(*(r["valid"] for r in rs)),
        "keys": len(rs),
        "ops": sum(r["ops"] for r in rs),
        "steps": sum(r["steps"] for r in rs),
        "failures": {"count": len(bad), "examples": bad[:max_examples]},
        "unknown-keys": unknown[:max_examples],
        "unknown-count": len(unknown),
    }


def check_linearizable(history: Iterable[Op], model: str | Model = "cas-register",
                       keyed: bool = True, budget: int = DEFAULT_BUDGET,
                       max_examples: int = 100) -> dict[str, Any]:
    """Checks a history for linearizability in this process.

    Args:
        history: the ops, in history order.
        model: a model name (``register``, ``cas-register``, ``set``, ``log``) or object.
        keyed: values are ``[key, payload]`` and keys are independent; otherwise the
            whole history is one object and values are payloads.
        budget: per-key search budget (entries visited) before ``unknown``.
        max_examples: at most this many failing keys are described.

    Returns:
        The linearizability result (see ``jepsen.checkers`` for the format).
    """
    m = model_named(model)
    groups: dict[Any, list[LinOp]] = {}
    for fl in flatten(history):
        r = lin_record(m, fl, keyed)
        if r is not None:
            groups.setdefault(r[0], []).append(r[1])
    results = (check_key(m, k, ops, budget) for k, ops in groups.items())
    return merge_keys(m, results, max_examples)
