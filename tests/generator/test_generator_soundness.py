"""(b) A non-equivalent pair is never emitted: every rule holds in float64 at its example
and at another shape set, and the float re-check rejects a planted non-equivalent pair."""
from __future__ import annotations

import numpy as np
import pytest
from gen_helpers import I4, K33, P11, SC, W2, X2, small

from taso_relay.generator import fingerprint as fpm
from taso_relay.generator.enumerate import engine_for
from taso_relay.generator.pairing import CGraph, COp, Pair, float_check
from taso_relay.generator.run import generate
from taso_relay.graph import evaluate
from taso_relay.graph.ops import get_op
from taso_relay.graph.types import GraphError

# Every example size maps to another (kernel sizes 1 and 3 kept): a second, consistent shape set.
OTHER = {2: 3, 4: 6, 5: 7, 6: 5, 8: 12, 1: 1, 3: 3}


def _agree(rule, shapes, variables, seed):
    ga = rule.example_graph("source", shapes, variables, dtype="float64")
    gb = rule.example_graph("target", shapes, variables, dtype="float64")
    rng = np.random.default_rng(seed)
    feeds = {n.attr("name"): rng.uniform(-1, 1, n.attr("shape")) for n in ga.nodes if n.op in ("input", "weight")}
    ya, yb = evaluate(ga, feeds, dtype="float64"), evaluate(gb, feeds, dtype="float64")
    return all(u.shape == v.shape and np.allclose(u, v, rtol=1e-9, atol=1e-9) for u, v in zip(ya, yb))


@pytest.fixture(scope="module")
def mixed_rules(tmp_path_factory):
    settings = small(["conv", "conv_relu", "relu", "add", "concat", "split", "smul", "enlarge", "avg_pool",
                      "const_iconv"], 2, (I4, K33, P11, SC))
    rep = generate(settings, None, workers=1, checkpoint_dir=tmp_path_factory.mktemp("ck"), progress=False,
                   log=lambda *a: None)
    assert len(rep["rules"]) > 20
    return rep["rules"]


def test_every_rule_holds_at_example_and_other_shapes(mixed_rules):
    checked_other = 0
    for rule in mixed_rules:
        ex = rule.example
        assert rule.constraints_hold(ex["inputs"], ex["vars"])[0], rule
        assert _agree(rule, ex["inputs"], ex["vars"], 1), f"{rule} fails at its example"
        shapes = {k: tuple(OTHER.get(d, d) for d in v) for k, v in ex["inputs"].items()}
        variables = dict(ex["vars"])
        if not rule.constraints_hold(shapes, variables)[0]:
            continue
        try:
            ok = _agree(rule, shapes, variables, 2)
        except GraphError:
            continue  # the rule does not apply at these sizes
        assert ok, f"{rule} fails at {shapes}"
        checked_other += 1
    assert checked_other >= 0.8 * len(mixed_rules)


def test_float_recheck_rejects_a_planted_non_equivalent_pair():
    settings = small(["add", "relu"], 2, (X2, W2))
    eng = engine_for(settings)
    x1, x2 = 0, 1
    P = eng.P
    add = next(t for t in eng.templates if t.family == "add").tid
    relu = next(t for t in eng.templates if t.family == "relu").tid
    s = (2, 4)
    # relu(x1 + x2)  vs  relu(x1) + relu(x2): not equal
    g1 = CGraph((COp(add, "add", (), (x1, x2), P, (s,)), COp(relu, "relu", (), (P,), P + 1, (s,))), (P + 1,), P)
    g2 = CGraph((COp(relu, "relu", (), (x1,), P, (s,)), COp(relu, "relu", (), (x2,), P + 1, (s,)),
                 COp(add, "add", (), (P, P + 1), P + 2, (s,))), (P + 2,), P)
    assert not float_check(eng, Pair(g1, g2, ((P + 1, P + 2),)))
    # and a true one passes: relu(x1) + relu(x2) == relu(x2) + relu(x1)
    g3 = CGraph((COp(relu, "relu", (), (x2,), P, (s,)), COp(relu, "relu", (), (x1,), P + 1, (s,)),
                 COp(add, "add", (), (P, P + 1), P + 2, (s,))), (P + 2,), P)
    assert float_check(eng, Pair(g2, g3, ((P + 2, P + 2),)))


def test_fast_modular_kernels_match_the_operator_table():
    p = fpm.gm.DEFAULT_PRIME
    rng = np.random.default_rng(0)
    x = rng.integers(0, p, (2, 4, 5, 6))
    for shape, g in (((4, 4, 3, 3), 1), ((4, 4, 1, 3), 1), ((4, 1, 3, 3), 4), ((8, 1, 3, 3), 4), ((4, 2, 3, 3), 2)):
        w = rng.integers(0, p, shape)
        pad = (shape[2] // 2, shape[3] // 2, shape[2] // 2, shape[3] // 2)
        conv = get_op("conv2d")
        ref = conv.modular([x, w], dict(conv.normalize_attrs({"padding": pad, "groups": g})), p)[0]
        assert (ref == fpm.conv2d(x, w, g, pad, p)).all()
    for op, extra in (("max_pool2d", {}), ("avg_pool2d", {"count_include_pad": True})):
        d = get_op(op)
        at = dict(d.normalize_attrs({"kernel": (3, 3), "padding": (1, 1, 1, 1), **extra}))
        assert (d.modular([x], at, p)[0] == fpm.pool2d(op, x, (3, 3), (1, 1, 1, 1), p)).all()
