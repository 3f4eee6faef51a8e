"""Parallel matmuls merge into one whose parts are read by slices, which TVM fuses into their readers.

Priced by the fusion-aware analytic model (fixed peaks), as the pass prices them: a split whose parts go
different ways is a copy kernel of its own there (as FuseOps makes it), a slice joins its reader's kernel.
"""
from __future__ import annotations

import pytest
from rewrite_helpers import assert_same_outputs, count

from taso_relay.cost.analytic import AnalyticCost, MachinePeaks
from taso_relay.graph import Graph, GraphBuilder
from taso_relay.search import optimize
from taso_relay.subst import default_rules
from taso_relay.subst.incremental import RuleIndex

PEAKS = MachinePeaks(gflops=245.0, gbps=49.0, launch_s=2e-6)
SLICE_RULES = {"h-merge-matmul2-sliced-r3", "h-merge-matmul3-sliced-r3", "h-split-slices3", "h-slice-of-slice"}


@pytest.fixture(scope="module")
def rules():
    found = default_rules()
    assert SLICE_RULES <= {r.id for r in found}, "rules/handwritten_{merge,split}.json not PROVED"
    return RuleIndex(found)


def attention_heads(b: GraphBuilder, parts, head=16):
    """Each part (1, S, H) reshaped to heads of `head` and transposed, as attention reads Q, K and V."""
    out = []
    for p in parts:
        s, h = b.type_of(p).shape[1:]
        out.append(b.op("transpose", b.op("reshape", p, shape=(1, s, h // head, head)), perm=(0, 2, 1, 3)))
    return out


def qkv(widths=(64, 64, 64), seq=16, hidden=64) -> Graph:
    """Q, K and V projections of one input; with K and V narrower (grouped-query attention) the heads are the
    graph's outputs, else attention reads them."""
    b = GraphBuilder()
    x = b.input("x", (1, seq, hidden))
    q, k, v = attention_heads(b, [b.op("matmul", x, b.weight(f"w{i}", (hidden, n))) for i, n in enumerate(widths)])
    if len(set(widths)) > 1:
        return b.build([q, k, v])
    scores = b.op("softmax", b.op("matmul", q, b.op("transpose", k, perm=(0, 1, 3, 2))), axis=3)
    return b.build([b.op("matmul", scores, v)])


def fused_qkv(seq=16, hidden=64) -> Graph:
    """GPT-2's form: one projection, split in three."""
    b = GraphBuilder()
    x = b.input("x", (1, seq, hidden))
    y = b.op("matmul", x, b.weight("w", (hidden, 3 * hidden)))
    q, k, v = attention_heads(b, list(b.op("split", y, axis=2, sizes=(hidden,) * 3)))
    scores = b.op("softmax", b.op("matmul", q, b.op("transpose", k, perm=(0, 1, 3, 2))), axis=3)
    return b.build([b.op("matmul", scores, v)])


def search(g, rules):
    return optimize(g, rules, AnalyticCost(PEAKS), time_limit=20)


@pytest.mark.parametrize("widths", [(64, 64, 64), (64, 32, 32)], ids=["mha", "grouped-query"])
def test_q_k_v_projections_become_one_matmul_read_by_slices(rules, widths):
    g = qkv(widths)
    best, report = search(g, rules)
    attention = 2 if len(set(widths)) == 1 else 0
    assert count(best, "matmul") == 1 + attention, [a.rule_id for a in report.applied]
    assert count(best, "strided_slice") == 3 and count(best, "split") == 0
    assert report.cost_after < report.cost_before
    assert_same_outputs(g, best)


def test_a_split_in_three_is_read_as_three_slices(rules):
    g = fused_qkv()
    best, report = search(g, rules)
    assert "h-split-slices3" in {a.rule_id for a in report.applied}
    assert count(best, "split") == 0 and count(best, "strided_slice") == 3
    assert_same_outputs(g, best)


def test_gate_and_up_projections_merge(rules):
    """A gated MLP (LLaMA's): silu(x W1) * (x W2) W3; the slices fuse into the merged matmul's epilogue."""
    b = GraphBuilder()
    x = b.input("x", (1, 16, 64))
    gate, up = (b.op("matmul", x, b.weight(f"w{i}", (64, 96))) for i in range(2))
    g = b.build([b.op("matmul", b.op("mul", b.op("silu", gate), up), b.weight("w3", (96, 64)))])
    best, report = search(g, rules)
    assert count(best, "matmul") == 2, [a.rule_id for a in report.applied]
    assert "h-merge-matmul2-sliced-r3" in {a.rule_id for a in report.applied}
    assert_same_outputs(g, best)


def test_matmuls_of_different_inputs_stay_apart(rules):
    b = GraphBuilder()
    x, y = b.input("x", (1, 16, 64)), b.input("y", (1, 16, 64))
    g = b.build(attention_heads(b, [b.op("matmul", x, b.weight("w0", (64, 64))),
                                    b.op("matmul", y, b.weight("w1", (64, 64)))]))
    best, _ = search(g, rules)
    assert count(best, "matmul") == 2 and count(best, "strided_slice") == 0
    assert_same_outputs(g, best)


def slices_of_a_slice(inner_bounds) -> Graph:
    """x[:, 2:11] sliced again at each of two bounds (on axis 1), one read by a ReLU, the other by a tanh."""
    b = GraphBuilder()
    x = b.input("x", (2, 12, 3))
    outer = b.op("strided_slice", x, axes=(1,), begin=(2,), end=(11,), strides=(1,))
    inner = [b.op("strided_slice", outer, axes=(1,), begin=(lo,), end=(hi,), strides=(1,)) for lo, hi in inner_bounds]
    return b.build([b.op("relu", inner[0]), b.op("tanh", inner[1])])


def test_slices_of_a_slice_read_by_two_are_slices_of_its_input(rules):
    """What merging a third matmul into two merged ones leaves: a slice with two readers is a kernel of its
    own; each reader slicing the input directly fuses it away."""
    g = slices_of_a_slice([(1, 5), (5, 9)])
    best, report = search(g, rules)
    assert {a.rule_id for a in report.applied} == {"h-slice-of-slice"}
    assert report.cost_after < report.cost_before
    users = best.users
    assert all(len(users[i]) == 1 for i, n in enumerate(best.nodes) if n.op == "strided_slice")
    assert_same_outputs(g, best)


def test_a_slice_past_the_end_flattens_to_where_it_stops(rules):
    """Python slicing clamps: [2:11] of 12, then [1:20] of that, is [3:11] (not [3:22])."""
    g = slices_of_a_slice([(1, 20), (0, 1)])
    best, _ = search(g, rules)
    relu = next(n for n in best.nodes if n.op == "relu")
    read = best.nodes[relu.inputs[0].node]
    assert read.op == "strided_slice" and best.nodes[read.inputs[0].node].op == "input"
    assert (read.attr("begin"), read.attr("end")) == ((3,), (11,))
    assert_same_outputs(g, best)


@pytest.mark.parametrize("lowering", ["default", "tuning"])
def test_the_pass_merges_matmuls_only_where_the_build_tunes_them(lowering):
    """TVM's default CPU lowering runs matmuls as plain loops, slower per flop on wider weights (merged Q/K/V
    measured 0.72x here), which the roofline cannot see: for it the pass leaves matmul merges out."""
    from taso_relay.passes import FunctionReport, TASOPass, resolve_rules, without_matmul_merges

    g = qkv()
    report = FunctionReport("main")
    best = TASOPass(lowering=lowering, target="llvm", time_limit=10, layout=None).optimize_graph(g, report)
    assert count(best, "matmul") == (5 if lowering == "default" else 3)
    said = report.search.settings.get("left_out", "")  # the text report's settings line says what was left out
    assert ("merges onto wider matmuls" in said) == (lowering == "default")
    assert_same_outputs(g, best)
    shipped = resolve_rules(None)
    fewer = without_matmul_merges(shipped)
    assert without_matmul_merges(shipped) is fewer and without_matmul_merges(fewer) is fewer  # indexed once
    assert not [m for m in fewer.matchers if m.rule.id.startswith("h-merge-matmul")]
    assert len(shipped.matchers) - len(fewer.matchers) >= 6


def test_a_rule_set_without_matmul_merges_is_not_kept_alive_by_the_filter():
    """TASOPass(rules=[...]) indexes its rules on every call: the filter's memo must not hold them."""
    import gc
    import weakref

    from taso_relay.passes import without_matmul_merges

    index = RuleIndex([r for r in default_rules() if r.id.startswith("h-split")])
    assert without_matmul_merges(index) is index  # nothing to leave out
    ref = weakref.ref(index)
    del index
    gc.collect()
    assert ref() is None
