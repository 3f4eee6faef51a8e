"""The shipped batch-norm fold rules, found by the search under the analytic cost."""
from __future__ import annotations

import pytest
from rewrite_helpers import assert_same_outputs

from taso_relay.cost import AnalyticCost
from taso_relay.graph import Graph, GraphBuilder
from taso_relay.search import optimize
from taso_relay.subst import default_rules
from taso_relay.subst.incremental import RuleIndex


@pytest.fixture(scope="module")
def rules():
    found = default_rules()
    assert {"h-bn-conv", "h-bn-conv-bias"} <= {r.id for r in found}, "rules/handwritten_norm.json not PROVED"
    return RuleIndex(found)


def conv_bn(bias: bool = False, activation: str = "none", **conv) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (2, 8, 12, 12))
    groups = conv.get("groups", 1)
    y = b.op("conv2d", x, b.weight("w", (16, 8 // groups, 3, 3)), activation=activation, **conv)
    if bias:
        y = b.op("add", y, b.weight("bias", (1, 16, 1, 1)))
    y = b.op("batch_norm", y, *(b.weight(f"{n}_0", (16,)) for n in ("gamma", "beta", "mean", "var")),
             epsilon=1e-3)
    return b.build([b.op("relu", y)])


def activation_batch_norms(g: Graph) -> int:
    """batch_norm nodes that run (those on weights alone fold at compile time)."""
    weight_only = []
    for n in g.nodes:
        weight_only.append(n.op in ("weight", "constant") or (
            n.op != "input" and bool(n.inputs) and all(weight_only[r.node] for r in n.inputs)))
    return sum(1 for i, n in enumerate(g.nodes) if n.op == "batch_norm" and not weight_only[i])


@pytest.mark.parametrize("bias,conv", [
    (False, {"padding": (1, 1, 1, 1)}),
    (False, {"strides": (2, 2), "padding": (0, 1, 2, 1), "groups": 4}),
    (True, {"dilation": (2, 2), "padding": (2, 2, 2, 2)}),
], ids=["plain", "strided-grouped", "bias-dilated"])
def test_batch_norm_after_conv_is_folded(rules, bias, conv):
    g = conv_bn(bias, **conv)
    best, report = optimize(g, rules, AnalyticCost(), time_limit=5)
    assert activation_batch_norms(g) == 1 and activation_batch_norms(best) == 0
    assert [a.rule_id for a in report.applied] == ["h-bn-conv-bias" if bias else "h-bn-conv"]
    assert report.cost_after < report.cost_before
    assert_same_outputs(g, best)


def test_batch_norm_after_a_fused_relu_is_kept(rules):
    g = conv_bn(activation="relu", padding=(1, 1, 1, 1))  # bn(relu(conv)) is no conv of scaled kernels
    best, report = optimize(g, rules, AnalyticCost(), time_limit=5)
    assert activation_batch_norms(best) == 1
    assert not any(a.rule_id.startswith("h-bn") for a in report.applied)
