"""Correct rules are PROVED; planted wrong rules never are, with or without the concrete search."""
from __future__ import annotations

import numpy as np
import pytest

from sample_rules import CORRECT, WRONG, n, rule
from taso_relay.graph import GraphBuilder, evaluate
from taso_relay.verifier.prover import PROVED, REFUTED, build_query, prove_rule


@pytest.mark.parametrize("r", CORRECT, ids=lambda r: r.id)
def test_correct_rule_is_proved(r):
    v = prove_rule(r, timeout=60)  # generous: a starved CI machine once took 20.1 s on matmul_assoc
    assert v.status == PROVED, (v.reason, v.counterexample)
    assert len(v.outputs) == len(r.outputs) and v.time_s > 0


# Wrong where they apply, and the concrete search finds where, or with output types that differ at
# the rule's own example. (The others are wrong only where their output types differ away from the
# example, where the matcher never applies them, or need a broadcast shape the search may not hit:
# those must still never be PROVED.)
REFUTABLE = {"bad_grouped_merge_unequal", "bad_grouped_merge_symbolic", "bad_relu_linear",
             "bad_transpose_perm", "bad_matmul_assoc_vector", "bad_split_other_axis"}


@pytest.mark.parametrize("r", WRONG, ids=lambda r: r.id)
def test_wrong_rule_is_not_proved(r):
    v = prove_rule(r, timeout=5)
    assert v.status != PROVED
    if r.id in REFUTABLE:
        assert v.status == REFUTED and v.counterexample["detail"]


@pytest.mark.parametrize("r", WRONG, ids=lambda r: r.id)
def test_z3_alone_proves_no_wrong_rule(r):
    """Soundness of the axioms as used: without the concrete search Z3 still must not prove them."""
    v = prove_rule(r, timeout=2, concrete=False)
    assert v.status != PROVED


def test_grouped_merge_with_equal_channels_per_group_is_proved():
    """The correct grouped merge (same in- and out-channels per group) goes through."""
    r = rule("grouped_merge_equal", ["x1", "x2", "w1", "w2"],
             [n("c1", "conv2d", "x1", "w1", groups=1), n("c2", "conv2d", "x2", "w2", groups=2),
              n("c", "concat", "c1", "c2", axis=1)],
             [n("x", "concat", "x1", "x2", axis=1), n("w", "concat", "w1", "w2", axis=0),
              n("c", "conv2d", "x", "w", groups=3)],
             [["c", "c"]], {"inputs": {"x1": [1, 2, 3, 3], "x2": [1, 4, 3, 3], "w1": [2, 2, 1, 1],
                                       "w2": [4, 2, 1, 1]}},
             constraints=["dim(w1, 0) * 2 == dim(w2, 0)"])
    assert prove_rule(r, timeout=20).status == PROVED


def test_rule_with_an_unencodable_operator_is_unknown():
    r = rule("softmax_twice", ["x"], [n("s", "softmax", "x", axis="?ax")], [n("s", "softmax", "x", axis="?ax")],
             [["s", "s"]], {"inputs": {"x": [2, 3]}, "vars": {"ax": 1}})
    assert prove_rule(r).status == "UNKNOWN"


def test_opaque_operator_by_congruence():
    r = rule("softmax_concat_relu", ["a", "b"],
             [n("ra", "relu", "a"), n("rb", "relu", "b"), n("c", "concat", "ra", "rb", axis=1),
              n("s", "softmax", "c", axis=0)],
             [n("c", "concat", "a", "b", axis=1), n("r", "relu", "c"), n("s", "softmax", "r", axis=0)],
             [["s", "s"]], {"inputs": {"a": [2, 3], "b": [2, 3]}})
    assert prove_rule(r, timeout=20).status == PROVED


def test_split_and_nary_concat_encodings_match_the_interpreter():
    """split outputs are slices and concat(a, b, c) is concat(concat(a, b), c), as encode.py assumes."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x, y, z = (b.input(k, s) for k, s in (("x", (2, 3)), ("y", (2, 1)), ("z", (2, 2))))
    c3 = b.op("concat", x, y, z, axis=1)
    c2 = b.op("concat", b.op("concat", x, y, axis=1), z, axis=1)
    parts = b.op("split", c3, axis=1, sizes=(3, 1, 2))
    sl = b.op("strided_slice", c3, axes=(1,), begin=(3,), end=(4,))
    g = b.build([c3, c2, parts[1], sl])
    feeds = {k: rng.normal(size=s) for k, s in (("x", (2, 3)), ("y", (2, 1)), ("z", (2, 2)))}
    o = evaluate(g, feeds)
    assert np.array_equal(o[0], o[1]) and np.array_equal(o[2], o[3])


def test_query_selects_axioms_by_operator():
    q = build_query(CORRECT[0])  # matmul associativity
    assert 0 < q.n_axioms < 30


def test_a_rule_whose_output_shape_differs_at_its_own_example_is_refuted():
    """The example is where the rule's author says it applies: differing output shapes there, or a target
    that does not type-check, make the rule false as written (it was UNKNOWN, "z3 says sat"). Elsewhere
    they only mean it does not apply."""
    r = rule("sum_is_relu", "x", [n("s", "sum", "x", axes=[1], keepdims=False)], [n("r", "relu", "x")],
             [["s", "r"]], {"inputs": {"x": [2, 3]}})
    v = prove_rule(r, timeout=5)
    assert v.status == REFUTED and v.counterexample == {"inputs": {"x": [2, 3]}, "vars": {},
                                                         "detail": "at its example, output 0: shapes (2,) vs (2, 3)"}
    ill_typed = rule("relu_is_self_matmul", "x", [n("r", "relu", "x")], [n("m", "matmul", "x", "x")],
                     [["r", "m"]], {"inputs": {"x": [2, 3]}})
    v = prove_rule(ill_typed, timeout=5)
    detail = v.counterexample["detail"]
    assert v.status == REFUTED and detail.startswith("at its example, the target does not type-check")


def test_vacuous_rule_is_not_proved():
    """Split sizes along the wrong axis: the target never has the source's type, so the
    premises are contradictory; that must not count as a proof."""
    r = next(w for w in WRONG if w.id == "bad_split_other_axis")
    v = prove_rule(r, timeout=5, concrete=False)
    assert v.status == "UNKNOWN" and "vacuous" in v.reason


def test_a_check_is_bounded_by_work_as_well_as_by_time(monkeypatch):
    """A resource limit behind Z3's timeout (a check once ran 15 min past its 3 s under CPU starvation):
    with a budget whose wall clock is far off, a hopeless query still stops, on the work it did."""
    import z3

    from taso_relay.verifier import prover

    x, y, z = z3.Ints("x y z")
    s = z3.Solver()
    s.add(x > 0, y > 0, z > 0, x * x * x + y * y * y == z * z * z)  # Fermat, n = 3: Z3 searches on and on
    monkeypatch.setattr(prover, "RLIMIT_PER_S", 10 ** 4)  # 100 s of budget: a million units
    assert prover.check_bounded(s, 100.0) == z3.unknown
    assert s.reason_unknown() == "canceled"  # the resource limit; a timeout says "timeout"
    assert s.statistics().get_key_value("rlimit count") >= 10 ** 6


def test_the_vacuity_check_is_bounded_by_work_not_by_the_clock():
    """Under CPU starvation a wall-clock budget ran out before Z3 found the premises contradictory, and a
    vacuous rule came out PROVED. The check now stops on Z3's own step count: a hopeless query gives up
    after the work it was given (the clock, 100 s here, is only a safety net)."""
    import time

    import z3

    from taso_relay.verifier import prover

    x, y, z = z3.Ints("x y z")
    fermat = [x > 0, y > 0, z > 0, x * x * x + y * y * y == z * z * z]
    before, t0 = prover._work(), time.perf_counter()
    assert prover._solve_by_work(fermat, z3.BoolVal(True), 2_000_000, wall_s=100.0) == (z3.unknown, False)
    spent = prover._work() - before
    assert 2_000_000 <= spent < 4_000_000 and time.perf_counter() - t0 < 60
    # and a contradiction is found within a small part of the least budget the check gets
    q = build_query(next(w for w in WRONG if w.id == "bad_split_other_axis"))
    assert prover._solve_by_work(q.background, z3.BoolVal(True), prover.VACUITY_MIN_UNITS // 20, 100.0)[0] == z3.unsat
    # when the clock runs out first, the caller is told (prove_rule then says UNKNOWN, never PROVED)
    assert prover._solve_by_work(fermat, z3.BoolVal(True), 10 ** 12, wall_s=0.3) == (z3.unknown, True)


def test_any_concrete_instance_where_the_rule_applies_is_a_witness():
    """The concrete search's agreeing instances are models of the premises, not only the example."""
    from taso_relay.verifier.concrete import RuleCheck
    from taso_relay.verifier.prover import has_witness

    r = next(w for w in WRONG if w.id == "bad_split_other_axis")
    assert has_witness(r, RuleCheck(3, example_ok=False))
    assert not has_witness(r, RuleCheck(0, example_ok=False))
    assert not has_witness(r, RuleCheck(0))  # no search: the example is built, and it does not apply
    assert has_witness(CORRECT[0], RuleCheck(0))


@pytest.mark.parametrize("timed_out,status", [(True, "UNKNOWN"), (False, "PROVED")])
def test_a_proof_without_a_witness_stands_only_if_the_vacuity_check_ended_on_its_budget(monkeypatch, timed_out,
                                                                                     status):
    """No instance where the rule applies, and Z3 could not show the premises contradictory: that counts
    only when the check spent its work budget; cut short by the clock (a starved machine), UNKNOWN."""
    import z3

    from taso_relay.verifier import prover

    monkeypatch.setattr(prover, "has_witness", lambda rule, check: False)
    monkeypatch.setattr(prover, "_solve_by_work", lambda *a, **k: (z3.unknown, timed_out))
    v = prove_rule(CORRECT[0], timeout=10, concrete=False)
    assert v.status == status and "proved, but" in v.reason
