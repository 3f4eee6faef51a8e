"""Common subexpressions merged: one node per (operator, attributes, operands), opaque calls apart."""
from __future__ import annotations

import numpy as np

from taso_relay.cost import FixedCost
from taso_relay.graph import GraphBuilder, TensorType, evaluate
from taso_relay.graph.cse import merge_common_subexpressions
from taso_relay.search import optimize


def _branches():
    """Two branches that each take relu(x) and pool it (as NASNet's cells do), and a third relu of y."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    w = b.weight("w", (4, 4, 1, 1), value=np.random.default_rng(0).standard_normal((4, 4, 1, 1)).astype("float32"))
    r1, r2 = b.op("relu", x), b.op("relu", x)
    p1 = b.op("max_pool2d", r1, kernel=(2, 2), strides=(2, 2))
    p2 = b.op("max_pool2d", r2, kernel=(2, 2), strides=(2, 2))
    y = b.op("add", b.op("conv2d", p1, w), p2)
    return b, b.build([y, b.op("relu", y), p2])


def test_duplicates_merge_and_results_stay():
    _, g = _branches()
    merged, n = merge_common_subexpressions(g)
    assert n == 2  # the second relu, then the second pool (its operand became the first relu)
    assert merged.op_counts()["relu"] == 2 and merged.op_counts()["max_pool2d"] == 1
    assert merged.outputs[0] != merged.outputs[2]
    x = np.random.default_rng(1).standard_normal((1, 4, 8, 8)).astype("float32")
    for want, got in zip(evaluate(g, {"x": x}), evaluate(merged, {"x": x})):
        np.testing.assert_array_equal(got, want)


def test_nothing_to_merge_returns_the_graph_itself():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    g = b.build([b.op("relu", x), b.op("sigmoid", x)])
    assert merge_common_subexpressions(g) == (g, 0)


def test_opaque_calls_are_not_merged():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    t = TensorType((2, 3), "float32")
    (o1,), (o2,) = (b.opaque([x], [t], payload="random", key="k") for _ in range(2))
    g = b.build([b.op("add", o1, o2)])
    assert merge_common_subexpressions(g)[1] == 0


def test_search_merges_duplicates_first_and_reports_it():
    _, g = _branches()
    best, report = optimize(g, [], FixedCost({"relu": 1.0, "max_pool2d": 1.0}), time_limit=2)
    assert report.merged == 2 and report.cost_after < report.cost_before
    assert best.op_counts()["max_pool2d"] == 1 and "2 duplicate nodes merged" in report.to_text()
    assert report.first_graph is not None and report.first_graph.hash == best.hash
