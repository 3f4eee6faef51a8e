"""Rules marked to run first (the batch-norm folds) apply everywhere before the search."""
from __future__ import annotations

import pytest
from rewrite_helpers import assert_same_outputs
from test_search_norm import activation_batch_norms

from taso_relay.cost import FixedCost
from taso_relay.graph import GraphBuilder
from taso_relay.search import optimize
from taso_relay.search.first import first_phase_rules
from taso_relay.subst import default_rules


@pytest.fixture(scope="module")
def fold_rules():
    rules = first_phase_rules(default_rules())
    assert {m.rule.id for m in rules} == {"h-bn-conv", "h-bn-conv-bias"}
    return [m.rule for m in rules]


def tower(depth: int = 4):
    b = GraphBuilder()
    y = b.input("x", (1, 4, 8, 8))
    for i in range(depth):
        y = b.op("conv2d", y, b.weight(f"w{i}", (4, 4, 3, 3)), padding=(1, 1, 1, 1))
        y = b.op("batch_norm", y, *(b.weight(f"{n}{i}", (4,)) for n in ("gamma", "beta", "mean", "var")))
        y = b.op("relu", y)
    return b.build([y])


def test_every_fold_is_applied_even_with_no_search_budget(fold_rules):
    g = tower()
    best, report = optimize(g, fold_rules, FixedCost({"conv2d": 10.0, "batch_norm": 3.0, "add": 1.0}),
                            budget=0, time_limit=5)
    assert activation_batch_norms(g) == 4 and activation_batch_norms(best) == 0
    assert [a.rule_id for a in report.applied] == ["h-bn-conv"] * 4
    assert report.cost_after < report.cost_before
    assert_same_outputs(g, best)


def test_a_fold_that_would_cost_more_is_refused(fold_rules):
    g = tower(2)
    # a cost model where the bias add is dearer than the batch norm it replaces
    best, report = optimize(g, fold_rules, FixedCost({"conv2d": 10.0, "batch_norm": 0.5, "add": 5.0}),
                            budget=0, time_limit=5)
    assert best.hash == g.hash and not report.applied


def test_first_phase_can_be_switched_off(fold_rules):
    from taso_relay.search.backtracking import backtracking_search

    g = tower(2)
    best, report = backtracking_search(g, fold_rules, FixedCost({"conv2d": 10.0, "batch_norm": 3.0}),
                                       budget=0, time_limit=5, first_phase=False)
    assert best.hash == g.hash and not report.applied
