"""(a) The generator finds the identities TASO is known for, as general rules."""
from __future__ import annotations

import numpy as np
import pytest
from gen_helpers import I4, K33, W2, X2, find, small

from taso_relay.generator.run import generate
from taso_relay.graph import evaluate


def _rules(settings, tmp_path):
    rep = generate(settings, None, workers=1, checkpoint_dir=tmp_path / "ckpt", progress=False, log=lambda *a: None)
    return rep["rules"], rep


def _holds(rule, shapes, variables=None):
    variables = variables if variables is not None else dict(rule.example.get("vars", {}))
    ok, why = rule.constraints_hold(shapes, variables)
    assert ok, why
    ga = rule.example_graph("source", shapes, variables, dtype="float64")
    gb = rule.example_graph("target", shapes, variables, dtype="float64")
    rng = np.random.default_rng(5)
    feeds = {n.attr("name"): rng.uniform(-1, 1, n.attr("shape")) for n in ga.nodes if n.op in ("input", "weight")}
    for u, v in zip(evaluate(ga, feeds, dtype="float64"), evaluate(gb, feeds, dtype="float64")):
        np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-9)


def test_matmul_associativity(tmp_path):
    rules, _ = _rules(small(["matmul"], 2, (X2, W2)), tmp_path)
    found = find(rules, {"matmul": 2}, {"matmul": 2})
    texts = {r.text.split("  if ")[0] for r in found}
    assert "matmul(matmul(x1, w1), w2) => matmul(x1, matmul(w1, w2))" in texts
    assert "matmul(x1, matmul(w1, w2)) => matmul(matmul(x1, w1), w2)" in texts
    rule = next(r for r in found if r.text.startswith("matmul(matmul(x1, w1), w2)"))
    assert rule.verification == {"status": "UNVERIFIED"}
    # found at rank 2 only: a 1-D middle operand breaks associativity, so the rank is a constraint
    assert {"rank(x1) == 2", "rank(w1) == 2", "rank(w2) == 2"} <= set(rule.constraints)
    # symbolic sizes: holds at shapes other than the pool's
    _holds(rule, {"x1": (3, 5), "w1": (5, 7), "w2": (7, 2)})


def test_conv_distributes_over_add(tmp_path):
    rules, _ = _rules(small(["conv", "add"], 3, (I4, K33)), tmp_path)
    found = find(rules, {"conv2d": 2, "add": 1}, {"conv2d": 1, "add": 1})
    # conv(x, w1) + conv(x, w2) => conv(x, w1 + w2)   (also found: conv(x1, w) + conv(x2, w))
    rule = next(r for r in found if r.text.startswith("add(conv2d")
                and set(next(n for n in r.target if n.op == "add").inputs) == {"w1", "w2"})
    assert rule.provenance["generalisation"] == "general"
    # the two convs must share strides; the target add needs equal weight shapes
    assert any("?s2" in c for c in rule.constraints)
    assert "dim(w2, 2) == dim(w1, 2)" in rule.constraints
    _holds(rule, {"x1": (1, 3, 7, 9), "w1": (5, 3, 5, 5), "w2": (5, 3, 5, 5)}, {"s1": (2, 2), "s2": (2, 2)})


def test_two_convs_on_one_input_become_one_conv_and_split(tmp_path):
    rules, _ = _rules(small(["conv", "concat", "split"], 3, (I4, K33)), tmp_path)
    found = find(rules, {"conv2d": 2}, {"concat": 1, "conv2d": 1, "split": 1}, outputs=2)
    merged = [r for r in found if next(n for n in r.target if n.op == "split").attrs.get("axis") == 1]
    assert merged, "conv(x, w1), conv(x, w2) => split(conv(x, concat(w1, w2))) not found"
    rule = merged[0]
    split = next(n for n in rule.target if n.op == "split")
    assert rule.text.startswith("conv2d")
    assert split.attrs["sizes"] == "=(dim(w1, 0), dim(w2, 0))"  # the concat input sizes
    _holds(rule, {"x1": (2, 3, 6, 5), "w1": (4, 3, 3, 3), "w2": (7, 3, 3, 3)}, {"s1": (1, 1), "s2": (1, 1)})


def test_relu_fused_into_conv(tmp_path):
    rules, _ = _rules(small(["conv", "conv_relu", "relu"], 2, (I4, K33)), tmp_path)
    found = find(rules, {"conv2d": 1, "relu": 1}, {"conv2d": 1})
    assert found
    rule = found[0]
    assert rule.target[0].attrs["activation"] == "relu"
    assert rule.text.startswith("relu(conv2d")
    _holds(rule, {"x1": (3, 2, 4, 4), "w1": (6, 2, 1, 5)}, {"s1": (2, 1)})


@pytest.mark.parametrize("rule_text", ["matmul(matmul(x1, w1), w2)"])
def test_stage_counts_shrink_monotonically(tmp_path, rule_text):
    _, rep = _rules(small(["matmul", "transpose"], 2, (X2, W2)), tmp_path)
    counts = [s["count"] for s in rep["stages"][2:8]]
    assert counts == sorted(counts, reverse=True)
    assert rep["stages"][0]["count"] > 0
