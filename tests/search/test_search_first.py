"""Rules marked to run first (the batch-norm folds) apply everywhere before the search."""
from __future__ import annotations

import numpy as np
import pytest
from rewrite_helpers import assert_same_outputs
from test_search_norm import activation_batch_norms

from taso_relay.cost import FixedCost
from taso_relay.graph import GraphBuilder
from taso_relay.search import optimize
from taso_relay.search.first import first_phase_rules
from taso_relay.subst import default_rules
from taso_relay.subst.index import index_of


@pytest.fixture(scope="module")
def fold_rules():
    rules = first_phase_rules(default_rules())
    assert {m.rule.id for m in rules} == {"h-bn-conv", "h-bn-conv-bias", "h-pad-conv", "h-pad-avg_pool2d",
                                              "h-pad-avg_pool2d-uncounted", "h-sum-conv-bias", "h-sum-conv-bias1",
                                              "h-sum-conv-bias-enlarge", "h-sum-conv-identity",
                                              "h-sum-conv-bn-identity", "h-add-consts-scalar", "h-add-consts-same",
                                              "h-sub-conv-identity", "h-sub-conv-bn-identity", "h-add-consts-across",
                                              "h-factor-conv-bias4", "h-factor-conv-bias3", "h-factor-conv4",
                                              "h-factor-conv3", "h-bn-matmul2", "h-bn-matmul3",
                                              "h-bn-matmul-bias2", "h-bn-matmul-bias3", "h-bn-rows-matmul",
                                              "h-bn-before-matmul2", "h-bn-before-matmul3", "h-bn-convT",
                                              "h-bn-convT-bias", "h-bn-convT-grouped", "h-bn-convT-grouped-bias"}
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


def mobileone_stage(branches: int = 4):
    """MobileOne's depthwise stage as timm sums it: 0 + (1x1 conv + bias), then each 3x3 branch
    (conv + bias), then the batch norm of the input; every conv depthwise."""
    rng = np.random.default_rng(5)
    b = GraphBuilder()

    def w(name, shape, low=None):
        value = rng.uniform(low, 1.5, shape) if low is not None else rng.standard_normal(shape) * 0.3
        return b.weight(name, shape, value=value.astype("float32"))

    x = b.input("x", (1, 6, 8, 8))
    out = b.op("add", w("zero", (), low=0.0), b.op("add", b.op("conv2d", x, w("s", (6, 1, 1, 1)), groups=6),
                                                     w("sb", (1, 6, 1, 1))))
    for i in range(branches):
        conv = b.op("conv2d", x, w(f"k{i}", (6, 1, 3, 3)), padding=(1, 1, 1, 1), groups=6)
        out = b.op("add", out, b.op("add", conv, w(f"kb{i}", (1, 6, 1, 1))))
    bn = b.op("batch_norm", x, w("gamma", (6,), 0.5), w("beta", (6,)), w("mean", (6,)), w("var", (6,), 0.5))
    return b.build([b.op("relu", b.op("add", out, bn))])


def test_a_re_parameterizable_stage_becomes_one_conv_with_no_search_budget(fold_rules):
    """The conv-sum rules run first, in sweeps: the five branches and the identity become one depthwise 3x3 conv
    without a single search expansion (MobileOne-S0's 170 such rewrites did not fit in the search's 8 s)."""
    g = mobileone_stage()
    best, report = optimize(g, fold_rules, FixedCost({"conv2d": 10.0, "batch_norm": 3.0, "add": 1.0}),
                            budget=0, time_limit=5)
    assert g.op_counts()["conv2d"] == 5 and best.op_counts()["conv2d"] == 1, best.op_counts()
    assert activation_batch_norms(g) == 1 and activation_batch_norms(best) == 0  # the rest: of weights, folded
    applied = {a.rule_id for a in report.applied}
    assert {"h-add-consts-scalar", "h-sum-conv-bias-enlarge", "h-sum-conv-bias", "h-sum-conv-bn-identity"} <= applied
    assert_same_outputs(g, best)


def test_a_factor_per_output_channel_folds_into_the_conv_and_others_stay(fold_rules):
    """A layer scale after a conv, with or without its bias, (1, C, 1, 1) or (C, 1, 1), joins the kernels (any
    groups, a batch of two); a factor per position (1, 1, H, W) does not fit the rules and stays a multiply."""
    rng = np.random.default_rng(2)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=rng.uniform(0.5, 1.5, shape).astype("float32"))

    x = b.input("x", (2, 4, 6, 6))
    conv = b.op("conv2d", x, w("k", (6, 2, 3, 3)), padding=(1, 1, 1, 1), groups=2)
    scaled = b.op("mul", conv, w("f", (1, 6, 1, 1)))
    conv2 = b.op("conv2d", x, w("k2", (6, 4, 1, 1)))
    biased = b.op("mul", w("f3", (6, 1, 1)), b.op("add", conv2, w("b2", (1, 6, 1, 1))))
    per_position = b.op("mul", b.op("conv2d", x, w("k3", (6, 4, 1, 1))), w("fp", (1, 1, 6, 6)))
    g = b.build([scaled, biased, per_position])
    best, report = optimize(g, fold_rules, FixedCost({"conv2d": 10.0, "mul": 1.0, "add": 1.0}), budget=0,
                            time_limit=5)
    assert sorted(a.rule_id for a in report.applied) == ["h-factor-conv-bias3", "h-factor-conv4"]
    activations = [i for i, n in enumerate(best.nodes) if n.op == "mul" and not index_of(best).foldable[i]]
    assert len(activations) == 1, best.op_counts()  # the factor per position
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


def explicit_pads():
    """A TF export's stem and a 'SAME' strided conv: zero pads before 'VALID' convs and an average pool that
    counts its padding; a pad with another value and one of the channels must stay."""
    rng = np.random.default_rng(3)
    b = GraphBuilder()

    def w(name, shape):
        return b.weight(name, shape, value=(rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype("float32"))

    y = b.op("pad", b.input("x", (1, 3, 11, 10)), pad_width=(0, 0, 0, 0, 3, 3, 2, 3))
    y = b.op("relu", b.op("conv2d", y, w("w0", (6, 3, 7, 7)), strides=(2, 2)))
    y = b.op("conv2d", b.op("pad", y, pad_width=(0, 0, 0, 0, 0, 1, 0, 1)), w("w1", (6, 6, 3, 3)), strides=(2, 2),
             padding=(1, 0, 0, 1))
    y = b.op("avg_pool2d", b.op("pad", y, pad_width=(0, 0, 0, 0, 1, 1, 1, 1)), kernel=(3, 3),
             count_include_pad=True)
    kept = b.op("conv2d", b.op("pad", y, pad_width=(0, 0, 0, 0, 1, 1, 1, 1), value=1.0), w("w2", (4, 6, 3, 3)))
    channels = b.op("conv2d", b.op("pad", y, pad_width=(0, 0, 1, 1, 1, 1, 1, 1)), w("w3", (4, 8, 3, 3)))
    return b.build([kept, channels])


def test_zero_pads_of_h_and_w_fold_into_the_conv_or_pool_after_them(fold_rules):
    g = explicit_pads()
    best, report = optimize(g, fold_rules, FixedCost({"conv2d": 10.0, "pad": 1.0, "avg_pool2d": 2.0}),
                            budget=0, time_limit=5)
    assert sorted(a.rule_id for a in report.applied) == ["h-pad-avg_pool2d", "h-pad-conv", "h-pad-conv"]
    assert [n.attr_dict["pad_width"] for n in best.nodes if n.op == "pad"] == [(0, 0, 0, 0, 1, 1, 1, 1),
                                                                             (0, 0, 1, 1, 1, 1, 1, 1)]
    paddings = [n.attr_dict["padding"] for n in best.nodes if n.op in ("conv2d", "avg_pool2d")]
    assert paddings[:3] == [(3, 2, 3, 3), (1, 0, 1, 2), (1, 1, 1, 1)]  # (top, left, bottom, right)
    assert_same_outputs(g, best)
