"""Parallel convs of one input merge under the shipped rules whatever padding they share (a fixed cost)."""
from __future__ import annotations

import pytest
from rewrite_helpers import OpCost, assert_same_outputs, count

from taso_relay.graph import Graph, GraphBuilder
from taso_relay.search import optimize
from taso_relay.subst import default_rules
from taso_relay.subst.incremental import RuleIndex

VALID = (0, 0, 0, 0)


@pytest.fixture(scope="module")
def rules():
    found = default_rules()
    assert {"h-merge-conv", "h-merge-conv-concat", "h-merge-conv-enlarge"} <= {r.id for r in found}, \
        "rules/handwritten_merge.json not PROVED"
    return RuleIndex(found)


def parallel_convs(k1, k2, pad1, pad2, strides=(1, 1), concat=False, activation="none") -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, 4, 11, 10))
    outs = [b.op("conv2d", x, b.weight(f"w{i}", (c, 4) + k), padding=p, strides=strides, activation=activation)
            for i, (c, k, p) in enumerate([(6, k1, pad1), (2, k2, pad2)])]
    return b.build([b.op("concat", *outs, axis=1)] if concat else outs)


@pytest.mark.parametrize("case", [
    dict(k1=(3, 3), k2=(3, 3), pad1=VALID, pad2=VALID),  # 'VALID': before, no shipped rule merged these
    dict(k1=(3, 3), k2=(3, 3), pad1=VALID, pad2=VALID, strides=(2, 2), activation="relu"),
    dict(k1=(3, 2), k2=(3, 2), pad1=(0, 1, 1, 0), pad2=(0, 1, 1, 0)),  # uneven, any shared padding
    dict(k1=(3, 3), k2=(1, 1), pad1=(1, 1, 1, 1), pad2=VALID),  # 'same' sizes: the 1x1 kernel is enlarged
    dict(k1=(5, 5), k2=(3, 5), pad1=(2, 2, 2, 2), pad2=(1, 2, 1, 2)),
    dict(k1=(3, 3), k2=(3, 3), pad1=VALID, pad2=VALID, concat=True),  # the concat is the merged conv
], ids=["valid", "valid-strided-relu", "uneven-padding", "enlarge-1x1", "enlarge-3x5", "valid-concat"])
def test_parallel_convs_merge(rules, case):
    g = parallel_convs(**case)
    best, report = optimize(g, rules, OpCost(), time_limit=20)
    assert count(best, "conv2d") == 1, [a.rule_id for a in report.applied]
    assert report.cost_after < report.cost_before
    assert count(best, "split") == (0 if case.get("concat") else 1)
    assert_same_outputs(g, best)


@pytest.mark.parametrize("case", [
    dict(k1=(3, 3), k2=(3, 3), pad1=VALID, pad2=(1, 1, 1, 1)),  # output sizes differ: no conv computes both
    dict(k1=(1, 7), k2=(7, 1), pad1=(0, 3, 0, 3), pad2=(3, 0, 3, 0)),  # neither kernel holds the other
    dict(k1=(3, 3), k2=(1, 1), pad1=VALID, pad2=VALID),  # sizes differ (9x8 and 11x10)
], ids=["padding-differs", "crossed-kernels", "sizes-differ"])
def test_convs_that_cannot_share_a_kernel_stay_apart(rules, case):
    g = parallel_convs(**case)
    best, _ = optimize(g, rules, OpCost(), time_limit=20)
    assert count(best, "conv2d") == 2
    assert_same_outputs(g, best)


def inception_branches(kernels, concat=True) -> Graph:
    """Branches as ONNX exports them: conv, a (1, C, 1, 1) bias add, ReLU; joined by a concat."""
    b = GraphBuilder()
    x = b.input("x", (1, 8, 9, 9))
    outs = []
    for i, (c, k) in enumerate(kernels):
        y = b.op("conv2d", x, b.weight(f"w{i}", (c, 8, k, k)), padding=(k // 2,) * 4)
        outs.append(b.op("relu", b.op("add", y, b.weight(f"b{i}", (1, c, 1, 1)))))
    return b.build([b.op("concat", *outs, axis=1)] if concat else outs)


@pytest.mark.parametrize("kernels", [[(6, 1), (2, 1)], [(6, 3), (2, 1)], [(4, 1), (3, 1), (5, 1)]],
                         ids=["1x1-1x1", "3x3-1x1 (enlarged)", "three-1x1"])
def test_merged_branches_take_their_biases_and_activations_along(rules, kernels):
    """TASO's Inception rewrite on graphs as exported: after the merge, the biases are added before the split
    (h-split-bias-channels), the ReLUs run once (h-split-relu), and the concat of the parts is the merged
    conv itself (h-split-rejoined): one conv, one add, one ReLU, and no split or concat of activations."""
    g = inception_branches(kernels)
    best, report = optimize(g, rules, OpCost(), time_limit=20)
    ops = {op: count(best, op) for op in ("conv2d", "add", "relu", "split")}
    assert ops == {"conv2d": 1, "add": 1, "relu": 1, "split": 0}, [a.rule_id for a in report.applied]
    assert {"h-split-bias-channels", "h-split-relu", "h-split-rejoined"} <= {a.rule_id for a in report.applied}
    on_x = []  # whether each node reads the input: what concats are left join weights and biases (FoldConstant's)
    for n in best.nodes:
        on_x.append(n.op == "input" or any(on_x[r.node] for r in n.inputs))
    assert not [n for n, live in zip(best.nodes, on_x) if live and n.op == "concat"]
    assert_same_outputs(g, best)


def test_without_a_concat_the_parts_stay_split(rules):
    g = inception_branches([(6, 1), (2, 1)], concat=False)
    best, _ = optimize(g, rules, OpCost(), time_limit=20)
    assert {op: count(best, op) for op in ("conv2d", "add", "relu", "split")} == \
        {"conv2d": 1, "add": 1, "relu": 1, "split": 1}
    assert_same_outputs(g, best)


# ---- where the two-part rules must not apply -------------------------------------------------------------
def _split_graph(sizes, use) -> Graph:
    """x split on axis 1 into `sizes`; `use(b, parts)` builds the outputs."""
    b = GraphBuilder()
    x = b.input("x", (2, sum(sizes), 3))
    return b.build(use(b, list(b.op("split", x, axis=1, sizes=tuple(sizes)))))


def test_a_three_way_split_is_not_rejoined_by_two_of_its_parts(rules):
    g = _split_graph((2, 3, 4), lambda b, p: [b.op("concat", p[0], p[1], axis=1), p[2]])
    best, _ = optimize(g, rules, OpCost(), time_limit=10)
    assert count(best, "split") == 1 and count(best, "concat") == 1
    assert_same_outputs(g, best)


def test_a_split_rejoined_is_its_input_even_where_that_is_the_graph_input(rules):
    g = _split_graph((3, 4), lambda b, p: [b.op("concat", p[0], p[1], axis=1)])
    best, report = optimize(g, rules, OpCost(), time_limit=10)
    assert [a.rule_id for a in report.applied] == ["h-split-rejoined"]
    assert best.nodes[best.outputs[0].node].op == "input"
    assert report.cost_after == 0 and "x1.000" not in report.to_text()  # free, and not called "no gain"
    assert_same_outputs(g, best)


def test_an_activation_stays_on_two_parts_when_the_third_is_read_as_it_is(rules):
    g = _split_graph((2, 3, 4), lambda b, p: [b.op("relu", p[0]), b.op("relu", p[1]), b.op("tanh", p[2])])
    best, report = optimize(g, rules, OpCost(), time_limit=10)
    assert "h-split-relu" not in {a.rule_id for a in report.applied}  # relu on the whole would change part 2
    assert count(best, "relu") == 2
    assert_same_outputs(g, best)


def test_grouped_convs_are_not_merged_by_concatenating_their_weights(rules):
    b = GraphBuilder()
    x = b.input("x", (1, 4, 9, 9))
    g = b.build([b.op("conv2d", x, b.weight(f"w{i}", (4, 2, 3, 3)), padding=VALID, groups=2) for i in range(2)])
    best, _ = optimize(g, rules, OpCost(), time_limit=10)
    assert count(best, "conv2d") == 2
    assert_same_outputs(g, best)
