"""The batch-lifted rules let the search merge a transformer's Q/K/V projections."""
from __future__ import annotations

from rewrite_helpers import assert_same_outputs

from taso_relay.cost import FixedCost
from taso_relay.graph import GraphBuilder
from taso_relay.search import optimize
from taso_relay.subst import default_rules


def projections(batch_shape=(1, 8)):
    b = GraphBuilder()
    x = b.input("x", (*batch_shape, 16))
    outs = []
    for n in "qkv":
        y = b.op("matmul", x, b.weight("w" + n, (16, 16)))
        y = b.op("add", y, b.weight("b" + n, (16,)))
        outs.append(b.op("reshape", y, shape=(*batch_shape, 2, 8)))
    return b.build(outs)


def generated_rules():
    """The shipped rules less the hand-written matmul merges (h-merge-matmul*-sliced, tests/search/
    test_search_slices.py), which would merge these projections too: here the generated ones are on trial."""
    return [r for r in default_rules() if not r.id.startswith("h-merge-matmul")]


def test_three_projections_of_a_3d_activation_become_one_matmul():
    g = projections()
    # patience ends the search (a few seconds); the limit is for a loaded machine, where 8 s ran out
    best, report = optimize(g, generated_rules(), FixedCost({"matmul": 10.0}), time_limit=60)
    assert best.op_counts()["matmul"] == 1
    # lifted rules, one batch dimension (and the hand-written one that takes the biases along)
    assert all(a.rule_id.endswith("b1") or a.rule_id == "h-split-bias" for a in report.applied)
    assert_same_outputs(g, best)


def test_a_4d_activation_uses_the_two_batch_dimension_rules():
    g = projections((2, 3, 4))
    best, report = optimize(g, generated_rules(), FixedCost({"matmul": 10.0}), time_limit=60)
    assert best.op_counts()["matmul"] == 1
    assert all(a.rule_id.endswith("b2") or a.rule_id == "h-split-bias" for a in report.applied)
    assert_same_outputs(g, best)


def test_without_the_lifted_rules_nothing_merges():
    g = projections()
    rules = [r for r in generated_rules() if "lifted_from" not in r.provenance]
    best, report = optimize(g, rules, FixedCost({"matmul": 10.0}), time_limit=8)
    assert best.op_counts()["matmul"] == 3 and not report.applied
