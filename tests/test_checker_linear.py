"""The linearizability checker's pure path: models, the WGL search, failure reports."""

from __future__ import annotations

import pytest
from test_checker_histories import reg

from jepsen.checkers import check_linearizable
from jepsen.checkers.linear import (
    CasRegister,
    LinOp,
    LogModel,
    Register,
    SetModel,
    check_key,
    model_named,
    search,
)
from jepsen.checkers.synth import register_history
from jepsen.history import Op

INV, OK, FAIL, INFO = "invoke", "ok", "fail", "info"


def verdict(ops, model="cas-register", **kw):
    return check_linearizable(ops, model, **kw)["valid"]


# ---------------------------------------------------------------- registers

def test_concurrent_read_may_see_a_write_in_flight():
    h = reg((0, INV, "write", 1), (1, INV, "read", None), (1, OK, "read", 1), (0, OK, "write", 1))
    assert verdict(h) is True


def test_concurrent_read_may_see_the_old_value():
    h = reg((0, INV, "write", 1), (1, INV, "read", None), (1, OK, "read", None),
            (0, OK, "write", 1))
    assert verdict(h) is True


def test_stale_read_after_write_completed():
    h = reg((0, INV, "write", 1), (0, OK, "write", 1), (1, INV, "read", None),
            (1, OK, "read", None))
    r = check_linearizable(h)
    assert r["valid"] is False
    f = r["failures"]["examples"][0]
    assert f["key"] == "k"
    assert (f["op"]["f"], f["op"]["invoke-index"], f["op"]["index"]) == ("read", 2, 3)
    assert [o["invoke-index"] for o in f["window"]] == [0, 2]
    assert f["final-states"] == [1]


def test_reads_must_agree_on_the_order_of_overlapping_writes():
    h = reg((0, INV, "write", 1), (1, INV, "write", 2), (0, OK, "write", 1), (1, OK, "write", 2),
            (2, INV, "read", None), (2, OK, "read", 1),
            (3, INV, "read", None), (3, OK, "read", 2))
    r = check_linearizable(h)
    assert r["valid"] is False
    f = r["failures"]["examples"][0]
    assert f["op"]["invoke-index"] == 6  # the second read is where it breaks
    assert sorted(f["final-states"]) == [1]
    # Either write order alone is fine.
    assert verdict(h[:6]) is True


def test_indefinite_write_may_take_effect_late():
    h = reg((0, INV, "write", 1), (0, INFO, "write", 1),
            (1, INV, "read", None), (1, OK, "read", None),
            (1, INV, "read", None), (1, OK, "read", 1))
    assert verdict(h) is True


def test_indefinite_write_may_never_take_effect():
    h = reg((0, INV, "write", 1), (0, INFO, "write", 1),
            (1, INV, "read", None), (1, OK, "read", None))
    assert verdict(h) is True


def test_indefinite_write_cannot_take_effect_twice():
    h = reg((0, INV, "write", 1), (0, INFO, "write", 1),
            (1, INV, "read", None), (1, OK, "read", 1),
            (2, INV, "write", 2), (2, OK, "write", 2),
            (1, INV, "read", None), (1, OK, "read", 1))
    assert verdict(h) is False


def test_indefinite_write_cannot_act_before_its_invocation():
    h = reg((1, INV, "read", None), (1, OK, "read", 1),
            (0, INV, "write", 1), (0, INFO, "write", 1))
    assert verdict(h) is False


def test_failed_operations_did_not_happen():
    h = reg((0, INV, "write", 1), (0, FAIL, "write", 1),
            (1, INV, "read", None), (1, OK, "read", 1))
    assert verdict(h) is False
    h = reg((0, INV, "cas", [None, 5]), (0, FAIL, "cas", [None, 5]),
            (1, INV, "read", None), (1, OK, "read", None))
    assert verdict(h) is True


def test_cas():
    ok = reg((0, INV, "write", 0), (0, OK, "write", 0), (1, INV, "cas", [0, 1]),
             (1, OK, "cas", [0, 1]), (0, INV, "read", None), (0, OK, "read", 1))
    assert verdict(ok) is True
    bad = reg((0, INV, "write", 0), (0, OK, "write", 0), (1, INV, "cas", [2, 1]),
              (1, OK, "cas", [2, 1]))
    assert verdict(bad) is False
    # A plain register does not know cas: those ops are not its business.
    assert verdict(bad, "register") is True


def test_keys_are_independent_and_only_the_bad_one_is_reported():
    good = reg((0, INV, "write", 1), (0, OK, "write", 1), (0, INV, "read", None),
               (0, OK, "read", 1), key="a")
    bad = reg((1, INV, "write", 1), (1, OK, "write", 1), (1, INV, "read", None),
              (1, OK, "read", 2), key="b")
    ops = [Op(i, 1000 * i, o.type, o.process, o.f, o.value)
           for i, o in enumerate(good[:2] + bad + good[2:])]
    r = check_linearizable(ops)
    assert r["valid"] is False and r["keys"] == 2
    assert [f["key"] for f in r["failures"]["examples"]] == ["b"]


def test_unkeyed_history():
    h = reg((0, INV, "write", 3), (0, OK, "write", 3), (1, INV, "read", None),
            (1, OK, "read", 3), key=None)
    assert check_linearizable(h, "register", keyed=False)["valid"] is True


def test_budget_gives_unknown_instead_of_hanging():
    # Many concurrent writes then a read nobody wrote: the search must explore a lot.
    steps = [(p, INV, "write", p) for p in range(12)] + [(p, OK, "write", p) for p in range(12)]
    steps += [(99, INV, "read", None), (99, OK, "read", 77)]
    h = reg(*steps)
    r = check_linearizable(h, budget=50)
    assert r["valid"] == "unknown" and r["unknown-count"] == 1
    assert check_linearizable(h)["valid"] is False


def test_wide_concurrency_needs_backtracking():
    # The last read forces w0 to be linearized last: the search must backtrack far.
    n = 9
    steps = [(p, INV, "write", p) for p in range(n)]
    steps += [(100, INV, "read", None), (100, OK, "read", n - 1)]
    steps += [(p, OK, "write", p) for p in range(n)]
    steps += [(101, INV, "read", None), (101, OK, "read", 0)]
    assert verdict(reg(*steps)) is True


# ---------------------------------------------------------------- other models

def test_set_model():
    ok = reg((0, INV, "add", 1), (1, INV, "add", 2), (0, OK, "add", 1),
             (2, INV, "read", None), (2, OK, "read", [2, 1]), (1, OK, "add", 2), key=None)
    assert check_linearizable(ok, "set", keyed=False)["valid"] is True
    bad = reg((0, INV, "add", 1), (0, OK, "add", 1), (2, INV, "read", None),
              (2, OK, "read", []), key=None)
    assert check_linearizable(bad, "set", keyed=False)["valid"] is False


def test_log_model_orders_appends():
    h = reg((0, INV, "append", "x"), (1, INV, "append", "y"), (0, OK, "append", "x"),
            (1, OK, "append", "y"), (2, INV, "read", None), (2, OK, "read", ["y", "x"]),
            key="log")
    assert check_linearizable(h, "log")["valid"] is True
    h2 = h + reg((2, INV, "read", None), (2, OK, "read", ["x", "y"]), key="log")
    h2 = [Op(i, 1000 * (i + 1), o.type, o.process, o.f, o.value) for i, o in enumerate(h2)]
    r = check_linearizable(h2, "log")
    assert r["valid"] is False
    assert r["failures"]["examples"][0]["final-states"] == [["y", "x"]]


def test_models_step():
    assert Register().step(("v", 1), "read", None, 1) == ("v", 1)
    assert Register().step(("v", 1), "read", None, 2) is None
    assert CasRegister().step(("v", 1), "cas", (1, 2), None) == ("v", 2)
    assert SetModel().step(frozenset(), "add", 3, None) == frozenset({3})
    assert LogModel().step((), "append", 3, None) == (3,)
    assert isinstance(model_named("set"), SetModel)
    with pytest.raises(ValueError):
        model_named("queue")


def test_search_on_linops_directly():
    ops = [LinOp(0, 3, 0, "write", 1, None), LinOp(1, 2, 1, "read", None, 1)]
    assert search(CasRegister(), ops).valid is True
    res = check_key(CasRegister(), "k", [LinOp(0, 1, 0, "read", None, 5)])
    assert res["valid"] is False and res["final-states"] == [None]


@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_linearizable_history(seed):
    ops = register_history(4000, keys=40, seed=seed)
    r = check_linearizable(ops)
    assert r["valid"] is True, r["failures"]
    assert r["keys"] == 40
    assert any(o.type == "info" for o in ops)


def test_synthetic_history_with_a_corrupted_read_fails():
    ops = register_history(2000, keys=20, seed=3)
    i = next(i for i, o in enumerate(ops)
             if o.f == "read" and o.type == "ok" and o.value[1] is not None and i > 500)
    o = ops[i]
    ops[i] = Op(o.index, o.time, o.type, o.process, o.f, [o.value[0], 999])
    r = check_linearizable(ops)
    assert r["valid"] is False
    f = r["failures"]["examples"][0]
    assert f["key"] == o.value[0] and f["op"]["index"] == i


# ---------------------------------------------------------------- against brute force

def _brute_force(model, ops):
    """Linearizable iff some real-time-respecting order of the ok ops plus a subset of
    the indefinite ones is accepted by the model (tries them all)."""
    from itertools import combinations, permutations

    oks = [o for o in ops if o.c_index is not None]
    maybes = [o for o in ops if o.c_index is None]
    for k in range(len(maybes) + 1):
        for chosen in combinations(maybes, k):
            group = oks + list(chosen)
            for order in permutations(group):
                # real time: nothing may precede an op that completed before it began
                if any(b.c_index is not None and b.c_index < a.i_index
                       for x, a in enumerate(order) for b in order[x + 1:]):
                    continue
                state = model.init()
                for o in order:
                    state = model.step(state, o.f, o.arg, o.out)
                    if state is None:
                        break
                else:
                    return True
    return False


def _random_history(rng, n_ops):
    """Random concurrent cas-register ops with random (often impossible) results."""
    recs, live, procs = [], {}, 0
    started = 0
    while started < n_ops or live:
        if started < n_ops and (not live or rng.random() < 0.5):
            f = rng.choice(["read", "write", "cas"])
            arg = (None if f == "read" else rng.randrange(3) if f == "write"
                   else (rng.randrange(3), rng.randrange(3)))
            live[procs] = (len(recs), f, arg)
            recs.append(None)
            procs += 1
            started += 1
        else:
            p = rng.choice(sorted(live))
            i, f, arg = live.pop(p)
            ctype = rng.choice(["ok", "ok", "ok", "info"]) if f != "read" else "ok"
            out = rng.choice([None, 0, 1, 2]) if f == "read" else None
            recs[i] = (p, i, f, arg, ctype, out)
            recs.append(("ret", p))
    ops = []
    for x, r in enumerate(recs):
        if r is None or r[0] == "ret":
            continue
        p, i, f, arg, ctype, out = r
        c = next(y for y in range(x + 1, len(recs))
                 if recs[y] is not None and recs[y][0] == "ret" and recs[y][1] == p)
        ops.append(LinOp(i, c if ctype == "ok" else None, p, f, arg, out))
    return ops


def test_search_agrees_with_brute_force():
    import random

    rng = random.Random(2024)
    model = CasRegister()
    verdicts = {True: 0, False: 0}
    for _ in range(400):
        ops = _random_history(rng, rng.randint(1, 6))
        expected = _brute_force(model, ops)
        assert search(model, ops).valid is expected, ops
        verdicts[expected] += 1
    assert min(verdicts.values()) > 50  # both kinds were exercised
