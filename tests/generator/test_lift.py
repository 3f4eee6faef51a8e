"""Batch lifting: 2-D activation rules moved to (batch, rows, features) activations."""
from __future__ import annotations

import numpy as np
import pytest

from taso_relay.generator.lift import lift_rule, lift_rules
from taso_relay.graph import GraphBuilder, evaluate, random_feeds
from taso_relay.subst.apply import apply
from taso_relay.subst.match import Matcher
from taso_relay.subst.rule_io import rule_from_dict
from taso_relay.verifier.concrete import search_counterexample


def _rule(rid, inputs, source, target, outputs, constraints, example):
    return rule_from_dict({"id": rid, "inputs": [{"name": n, "kind": k} for n, k in inputs],
                           "source": source, "target": target, "outputs": outputs,
                           "constraints": constraints, "example": {"inputs": example, "vars": {}}})


# two matmuls sharing their activation <=> one matmul against the weights side by side, split
MERGE = _rule(
    "t-merge", [("x1", "any"), ("w1", "weight"), ("w2", "weight")],
    [{"id": "n1", "op": "matmul", "inputs": ["x1", "w1"], "attrs": {}},
     {"id": "n2", "op": "matmul", "inputs": ["x1", "w2"], "attrs": {}}],
    [{"id": "m1", "op": "concat", "inputs": ["w1", "w2"], "attrs": {"axis": 1}},
     {"id": "m2", "op": "matmul", "inputs": ["x1", "m1"], "attrs": {}},
     {"id": "m3", "op": "split", "inputs": ["m2"], "attrs": {"axis": 1, "sizes": "=(dim(w1, 1), dim(w2, 1))"}}],
    [["n1", "m3:0"], ["n2", "m3:1"]],
    ["rank(x1) == 2", "rank(w1) == 2", "rank(w2) == 2"],
    {"x1": [2, 4], "w1": [4, 4], "w2": [4, 4]})

# a rule whose constant is sized by the activation: the size expression must move too
IDENTITY = _rule(
    "t-ident", [("x1", "any")],
    [{"id": "n1", "op": "relu", "inputs": ["x1"], "attrs": {}}],
    [{"id": "m1", "op": "constant", "inputs": [],
      "attrs": {"kind": "identity_matrix", "shape": "=(dim(x1, 1), dim(x1, 1))"}},
     {"id": "m2", "op": "matmul", "inputs": ["x1", "m1"], "attrs": {}},
     {"id": "m3", "op": "relu", "inputs": ["m2"], "attrs": {}}],
    [["n1", "m3"]], ["rank(x1) == 2"], {"x1": [2, 4]})


def test_merge_rule_moves_its_axes_past_the_batch():
    lifted = lift_rule(MERGE, 1)
    assert lifted.id == "t-mergeb1"
    assert "rank(x1) == 3" in lifted.constraints and "rank(x1) == 2" not in lifted.constraints
    split = next(n for n in lifted.target if n.op == "split")
    assert split.attrs["axis"] == 2
    concat = next(n for n in lifted.target if n.op == "concat")
    assert concat.attrs["axis"] == 1  # the weights keep their rank and axes
    assert lifted.example["inputs"]["x1"] == (3, 2, 4)
    assert lifted.provenance["lifted_from"] == "t-merge"
    assert lift_rule(MERGE, 2).target[2].attrs["axis"] == 3


def test_size_expressions_of_constants_follow_the_batch():
    lifted = lift_rule(IDENTITY, 1)
    const = next(n for n in lifted.target if n.op == "constant")
    assert const.attrs["shape"] == "=(dim(x1, 2), dim(x1, 2))"
    check = search_counterexample(lifted, trials=20)
    assert check.counterexample is None and check.example_ok


def test_concat_of_a_batched_and_an_unbatched_tensor_is_not_lifted():
    rule = _rule(
        "t-mixed", [("x1", "any"), ("w1", "weight")],
        [{"id": "n1", "op": "concat", "inputs": ["x1", "w1"], "attrs": {"axis": 0}}],
        [{"id": "m1", "op": "concat", "inputs": ["x1", "w1"], "attrs": {"axis": 0}},
         {"id": "m2", "op": "relu", "inputs": ["m1"], "attrs": {}},
         {"id": "m3", "op": "relu", "inputs": ["m1"], "attrs": {}},
         {"id": "m4", "op": "maximum", "inputs": ["m2", "m3"], "attrs": {}}],
        [["n1", "m4"]], ["rank(x1) == 2", "rank(w1) == 2"], {"x1": [2, 4], "w1": [2, 4]})
    assert lift_rule(rule, 1) is None


def test_activation_of_unconstrained_rank_is_not_lifted():
    data = dict(MERGE.__dict__)
    rule = _rule("t-free", [("x1", "any"), ("w1", "weight"), ("w2", "weight")],
                 [{"id": n.id, "op": n.op, "inputs": list(n.inputs), "attrs": dict(n.attrs)} for n in MERGE.source],
                 [{"id": n.id, "op": n.op, "inputs": list(n.inputs), "attrs": dict(n.attrs)} for n in MERGE.target],
                 [list(p) for p in MERGE.outputs], ["rank(w1) == 2", "rank(w2) == 2"],
                 dict(data["example"]["inputs"]))
    assert lift_rule(rule, 1) is None


def test_lifted_merge_applies_to_a_transformer_projection_and_keeps_the_numbers():
    b = GraphBuilder()
    x = b.input("x", (2, 5, 8))
    wq, wk = b.weight("wq", (8, 6)), b.weight("wk", (8, 3))
    q, k = b.op("matmul", x, wq), b.op("matmul", x, wk)
    g = b.build([b.op("relu", q), b.op("relu", k)])
    assert not Matcher(MERGE).find(g)  # the 2-D rule does not see a 3-D activation
    lifted = lift_rule(MERGE, 1)
    match = Matcher(lifted).find(g)[0]
    new = apply(g, match).graph
    assert sum(n.op == "matmul" for n in new.nodes) == 1
    feeds = random_feeds(g, np.random.default_rng(3), include_weights=True)
    for u, v in zip(evaluate(g, feeds), evaluate(new, feeds)):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-6)


def test_shipped_rules_lift_and_stay_right_on_random_shapes():
    from taso_relay.subst import default_rules

    rules = [r for r in default_rules() if "lifted_from" not in r.provenance]
    lifted = lift_rules(rules, (1, 2))
    assert len(lifted) > 100
    assert {r.provenance["batch_dims"] for r in lifted} == {1, 2}
    rng = np.random.default_rng(0)
    for rule in rng.choice(lifted, size=40, replace=False):
        check = search_counterexample(rule, trials=8)
        assert check.counterexample is None, (rule.id, rule.text, check.counterexample)
        assert check.example_ok, rule.id


@pytest.mark.parametrize("bad", [0, -1])
def test_batch_dims_must_be_positive(bad):
    with pytest.raises(ValueError):
        lift_rule(MERGE, bad)


def test_equal_shapes_of_two_batched_activations_stay_a_constraint():
    rule = _rule(
        "t-dist", [("x1", "any"), ("x2", "any"), ("w1", "weight")],
        [{"id": "n1", "op": "add", "inputs": ["x1", "x2"], "attrs": {}},
         {"id": "n2", "op": "matmul", "inputs": ["n1", "w1"], "attrs": {}}],
        [{"id": "m1", "op": "matmul", "inputs": ["x1", "w1"], "attrs": {}},
         {"id": "m2", "op": "matmul", "inputs": ["x2", "w1"], "attrs": {}},
         {"id": "m3", "op": "add", "inputs": ["m1", "m2"], "attrs": {}}],
        [["n2", "m3"]], ["rank(x1) == 2", "rank(x2) == 2", "rank(w1) == 2", "shape(x1) == shape(x2)"],
        {"x1": [2, 4], "x2": [2, 4], "w1": [4, 4]})
    lifted = lift_rule(rule, 1)
    assert lifted is not None and "shape(x1) == shape(x2)" in lifted.constraints
    check = search_counterexample(lifted, trials=20)
    assert check.counterexample is None and check.example_ok


def test_lift_command_on_a_missing_file_is_bad_input(tmp_path, capsys):
    from taso_relay.cli import main

    out = tmp_path / "lifted.json"
    assert main(["rules", "lift", str(tmp_path / "missing.json"), "--out", str(out)]) == 2
    assert "error:" in capsys.readouterr().err and not out.exists()
    assert main(["rules", "lift", str(tmp_path / "missing.json"), "--out", str(out), "--batch-dims", "0"]) == 2
