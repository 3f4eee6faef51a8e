"""The backtracking search under a fixed cost: known rewrites found, never worse, limits honoured."""
from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rewrite_helpers import (PAD1, OpCost, assert_same_outputs, bert_like, count, fixture_rules, inception_like,
                             random_graph, two_convs)

from taso_relay.graph import Graph, GraphBuilder
from taso_relay.search import optimize

RULES = fixture_rules()


def conv_bn_relu(parallel: bool) -> Graph:
    """x -> conv -> bn -> relu, and optionally a second conv on x (a 1x1 branch)."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    c = b.op("conv2d", x, b.weight("w", (6, 4, 3, 3)), padding=PAD1)
    bn = b.op("batch_norm", c, *(b.weight(f"{n}_0", (6,)) for n in ("gamma", "beta", "mean", "var")))
    outs = [b.op("relu", bn)]
    if parallel:
        outs.append(b.op("conv2d", x, b.weight("w2", (2, 4, 3, 3)), padding=PAD1))
    return b.build(outs)


# ---- known rewrites are found ------------------------------------------------------------
def test_parallel_convs_are_merged():
    g = two_convs()
    best, report = optimize(g, RULES, OpCost())
    assert count(best, "conv2d") == 1 and count(best, "split") == 1
    assert [a.rule_id for a in report.applied] == ["merge-parallel-conv"]
    assert report.cost_before == 20 and report.cost_after == 11
    assert_same_outputs(g, best)


def test_parallel_matmuls_are_merged():
    g = bert_like(layers=1)
    best, report = optimize(g, RULES, OpCost())
    assert sorted(a.rule_id for a in report.applied) == ["fuse-matmul-relu"] + ["merge-parallel-matmul"] * 2
    assert count(g, "matmul") == 8 and count(best, "matmul") == 6  # the q, k, v projections became one
    x = best.inputs[0]
    assert [n.op for n in best.nodes if n.inputs and n.inputs[0].node == x] == ["matmul"]
    assert_same_outputs(g, best)


def test_conv_and_batch_norm_are_folded_through_rules():
    g = conv_bn_relu(parallel=False)
    best, report = optimize(g, RULES, OpCost())
    assert [a.rule_id for a in report.applied] == ["fold-conv-bn"]
    assert report.cost_after == report.cost_before - 3  # batch_norm (4) -> bias add (1); the rest folds
    assert_same_outputs(g, best)


def test_relu_is_fused_into_its_producer():
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    g = b.build([b.op("relu", b.op("conv2d", x, b.weight("w", (4, 4, 3, 3)), padding=PAD1))])
    best, report = optimize(g, RULES, OpCost())
    assert count(best, "relu") == 0 and best.nodes[best.outputs[0].node].attr("activation") == "relu"
    assert_same_outputs(g, best)


def test_alpha_lets_the_search_through_a_costlier_step():
    # merging the convs first (-9) blocks folding the batch norm; folding first (-3) allows both (-12)
    g = conv_bn_relu(parallel=True)
    greedy, r1 = optimize(g, RULES, OpCost(), alpha=1.0)
    patient, r2 = optimize(g, RULES, OpCost(), alpha=1.5)
    assert r1.cost_after == r1.cost_before - 9
    assert r2.cost_after == r2.cost_before - 12
    assert sorted(a.rule_id for a in r2.applied) == ["fold-conv-bn", "merge-parallel-conv"]
    assert_same_outputs(g, patient)


def test_incremental_and_reference_searches_agree_on_small_models():
    for g in [conv_bn_relu(True), bert_like(layers=1), inception_like(blocks=2)]:
        fast = optimize(g, RULES, OpCost())[1]
        ref = optimize(g, RULES, OpCost(), incremental=False)[1]
        assert fast.cost_after == ref.cost_after


# ---- guarantees ------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.floats(0.0, 20.0), min_size=6, max_size=6),
       st.sampled_from([1.0, 1.05, 1.3]), st.booleans())
def test_never_costlier_than_the_input(seed, prices, alpha, incremental):
    g = random_graph(seed)
    table = dict(zip(["conv2d", "matmul", "batch_norm", "split", "add", "relu"], prices))
    cost = OpCost(table)
    best, report = optimize(g, RULES, cost, alpha=alpha, budget=30, incremental=incremental)
    assert report.cost_before == cost.graph_cost(g)
    assert report.cost_after == cost.graph_cost(best) <= report.cost_before
    if report.cost_after == report.cost_before:
        assert best is g and report.applied == []
    else:
        assert_same_outputs(g, best)


def test_a_graph_nothing_applies_to_comes_back_unchanged():
    b = GraphBuilder()
    g = b.build([b.op("softmax", b.input("x", (2, 3)), axis=1)])
    best, report = optimize(g, RULES, OpCost())
    assert best is g and report.applied == [] and report.stopped_by == "exhausted"
    assert report.cost_before == report.cost_after


def test_duplicates_are_found_by_hash():
    # both directions of associativity: the five bracketings of a 4-matmul chain, each built once
    (assoc,) = fixture_rules("matmul-assoc")
    back = type(assoc)(id="matmul-assoc-back", inputs=assoc.inputs, source=assoc.target, target=assoc.source,
                       outputs=(("out", "abc"),), constraints=assoc.constraints)
    b = GraphBuilder()
    chain = b.input("a", (2, 3))
    for i, s in enumerate([(3, 4), (4, 5), (5, 6)]):  # activations: no bracketing is weight-only
        chain = b.op("matmul", chain, b.input(f"b{i}", s))
    g = b.build([chain])
    for incremental in (True, False):
        best, report = optimize(g, [assoc, back], OpCost(), incremental=incremental)
        assert report.stopped_by == "exhausted"
        assert report.graphs_explored == 5  # Catalan(3)
        assert best is g  # all cost the same under a per-op cost


def test_the_search_stops_when_it_has_found_nothing_cheaper_for_a_while():
    """patience: expansions in a row without a cheaper graph. Equal-cost rearrangements can keep a
    search busy to its time limit; the best graph is still the one found before it gave up."""
    g = inception_like(blocks=8)
    # no time limit to speak of: on a starved CPU the default 8 s stopped the full search first
    best_full, full = optimize(g, RULES, OpCost(), patience=None, budget=400, time_limit=3600)
    assert full.stopped_by in ("budget", "exhausted")
    best, report = optimize(g, RULES, OpCost(), patience=5, budget=400, time_limit=3600)
    assert report.stopped_by == "patience" and report.expansions < full.expansions
    assert report.cost_after == full.cost_after and report.settings["patience"] == 5
    with pytest.raises(ValueError, match="patience"):
        optimize(g, RULES, OpCost(), patience=-1)


def test_the_budget_and_the_time_limit_are_honoured():
    g = inception_like(blocks=8)
    _, report = optimize(g, RULES, OpCost(), budget=3)
    assert report.expansions == 3 and report.stopped_by == "budget"
    best, report = optimize(g, RULES, OpCost(), time_limit=0.0)
    assert report.stopped_by == "time" and best is g
    big = inception_like(blocks=30)
    start = time.perf_counter()
    _, report = optimize(big, RULES, OpCost(), time_limit=0.5, budget=10**6, patience=None)
    assert report.stopped_by == "time"
    assert report.seconds < 0.5 + 0.5  # the last step and the final costing run past the limit
    assert time.perf_counter() - start < 0.5 + 1.5


def test_a_search_out_of_time_builds_the_cheapest_rewrite_it_priced(monkeypatch):
    """A wide graph can spend the whole limit pricing its first expansion: what it priced is not lost."""
    from taso_relay.search import backtracking

    expand = backtracking._Search.expand

    def expand_then_run_out(self, state):
        expand(self, state)
        self.deadline = float("-inf")
    monkeypatch.setattr(backtracking._Search, "expand", expand_then_run_out)
    g = two_convs()
    best, report = optimize(g, RULES, OpCost())
    assert report.stopped_by == "time" and report.expansions == 1
    assert [a.rule_id for a in report.applied] == ["merge-parallel-conv"] and report.cost_after == 11
    assert_same_outputs(g, best)


def test_a_plain_callable_is_a_cost_model_too():
    g = two_convs()
    best, report = optimize(g, RULES, OpCost().graph_cost)
    assert count(best, "conv2d") == 1
    with pytest.raises(TypeError, match="graph_cost"):
        optimize(g, RULES, object())
    with pytest.raises(ValueError, match="alpha"):
        optimize(g, RULES, OpCost(), alpha=0.5)


def test_a_500_node_model_is_optimized_in_seconds():
    g = inception_like(blocks=16)  # 529 nodes: 64 conv + bn + relu branches
    assert 450 < len(g.nodes) < 600
    best, report = optimize(g, RULES, OpCost(), time_limit=10.0, budget=40)
    assert report.cost_after <= report.cost_before * 0.7
    assert report.best_found_after < 5.0
    assert report.seconds < 10.5


def test_the_search_is_deterministic():
    g = random_graph(7, steps=16)
    runs = [optimize(g, RULES, OpCost(), alpha=1.2, budget=50) for _ in range(2)]
    (best1, r1), (best2, r2) = runs
    assert best1.hash == best2.hash
    assert r1.applied == r2.applied and r1.expansions == r2.expansions and r1.candidates == r2.candidates


def test_duplicates_merged_at_no_gain_give_back_the_input():
    """Hypothesis found it: with a free operator, merging its duplicates costs the same, and the
    search returned the merged graph, where the promise is the input itself on a tie."""
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    g = b.build([b.op("add", b.op("relu", x), b.op("relu", x))])
    best, report = optimize(g, RULES, OpCost({"relu": 0.0, "add": 1.0}))
    assert best is g and report.applied == [] and report.merged == 0 and report.first_phase == 0
    assert report.cost_after == report.cost_before == 1.0
    merged, paid = optimize(g, RULES, OpCost({"relu": 2.0, "add": 1.0}))  # a priced duplicate is merged
    assert paid.merged == 1 and paid.cost_after == 3.0 and len(merged.nodes) == len(g.nodes) - 1


def test_collection_resumes_without_thawing_a_users_frozen_objects():
    import gc

    from taso_relay.search.backtracking import resume_collection

    if gc.get_freeze_count():
        pytest.skip("something in this process froze objects already")
    try:
        gc.disable()
        kept = [[] for _ in range(1000)]  # young objects, to be moved to the oldest generation
        resume_collection()
        assert gc.isenabled() and gc.get_freeze_count() == 0  # moved, not left frozen
        gc.disable()
        gc.freeze()  # a user's frozen objects (a forking server does this)
        frozen = gc.get_freeze_count()
        resume_collection()
        assert gc.isenabled() and gc.get_freeze_count() == frozen > 0
    finally:
        gc.unfreeze()
        gc.enable()
    assert kept
