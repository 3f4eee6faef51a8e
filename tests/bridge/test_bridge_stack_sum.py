"""relax.stack reads as graph ops, and ONNX Sum of three or more inputs (which TVM imports as broadcast_to each,
stack, sum over the new axis) as a chain of adds: the rules that see through an add (parallel convs summed
into one) then reach it. Every reading runs against TVM running the original."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax

from taso_relay.bridge import function_from_graph, graph_from_function
from taso_relay.bridge.execute import random_inputs
from taso_relay.graph import evaluate
from taso_relay.passes import TASOPass

sys.path.insert(0, str(Path(__file__).parent))
from bridge_onnx_models import F32, Model, import_onnx  # noqa: E402
from test_bridge_relax_calls import single as function  # noqa: E402  (main(x0, x1, ...) = make(bb, x0, ...))

op = relax.op


def agrees_with_tvm(mod, run_module, rng):
    """The graph (numpy interpreter) and the function rebuilt from it compute what TVM computes; the graph."""
    imported = graph_from_function(mod["main"])
    graph = imported.graph
    inputs = random_inputs(mod["main"].params, rng)
    want = run_module(mod, inputs)
    got = evaluate(graph, dict(zip(graph.input_names, inputs)))
    rebuilt = run_module(tvm.IRModule({"main": function_from_graph(graph, "main", imported.signature)}), inputs)
    for w, g, r in zip(want, got, rebuilt):
        assert w.shape == g.shape == r.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(r, w, rtol=1e-6, atol=1e-6)
    return graph


@pytest.mark.parametrize("axis", [0, 1, -1, 3])
def test_stack_reads_as_expand_dims_and_concat(axis, run_module, rng):
    mod = function(lambda bb, a, b, c: op.stack(relax.Tuple([a, b, c]), axis=axis), (2, 3, 4), (2, 3, 4), (2, 3, 4))
    counts = agrees_with_tvm(mod, run_module, rng).op_counts()
    assert "opaque" not in counts and counts["expand_dims"] == 3 and counts["concat"] == 1


def onnx_sum(shapes):
    m = Model(3)
    names = [f"x{k}" for k in range(len(shapes))]
    y = m.op("Sum", names)
    out = tuple(np.broadcast_shapes(*shapes))
    return import_onnx(m.build([(n, F32, list(s)) for n, s in zip(names, shapes)], [(y, F32, list(out))]))


@pytest.mark.parametrize("shapes", [
    [(1, 4, 5, 5)] * 3,
    [(1, 4, 5, 5)] * 4,
    [(1, 4, 5, 5), (1, 4, 1, 1), (4, 1, 1)],  # broadcast: two of the three are broadcast_to first
])
def test_onnx_sum_of_three_or_more_reads_as_adds(shapes, run_module, rng):
    mod = onnx_sum(shapes)
    assert "R.stack(" in mod["main"].script()  # how TVM imports it, else this test checks nothing
    counts = agrees_with_tvm(mod, run_module, rng).op_counts()
    assert counts.get("add") == len(shapes) - 1
    assert not {"opaque", "concat", "expand_dims", "sum"} & set(counts)
    broadcast = sum(tuple(s) != tuple(np.broadcast_shapes(*shapes)) for s in shapes)
    assert counts.get("broadcast_to", 0) == broadcast  # to the same shape: no node


@pytest.mark.parametrize("make", [
    lambda bb, a, b, c: op.sum(bb.emit(op.stack(relax.Tuple([a, b, c]), axis=0)), axis=[1]),  # another axis
    lambda bb, a, b, c: op.sum(bb.emit(op.stack(relax.Tuple([a, b, c]), axis=0)), axis=[0], keepdims=True),
    lambda bb, a, b, c: op.sum(bb.emit(op.stack(relax.Tuple([a, b, c]), axis=1)), axis=[1, 2]),
], ids=["other-axis", "keepdims", "more-axes"])
def test_a_stack_summed_otherwise_is_kept_as_a_stack(make, run_module, rng):
    counts = agrees_with_tvm(function(make, (2, 3), (2, 3), (2, 3)), run_module, rng).op_counts()
    assert counts["concat"] == 1 and counts["sum"] == 1 and "add" not in counts


def test_a_stack_also_used_elsewhere_is_kept(run_module, rng):
    def make(bb, a, b):
        s = bb.emit(op.stack(relax.Tuple([a, b]), axis=0))
        return relax.Tuple([bb.emit(op.sum(s, axis=[0])), bb.emit(op.multiply(s, s))])
    counts = agrees_with_tvm(function(make, (2, 3), (2, 3)), run_module, rng).op_counts()
    assert counts["concat"] == 1 and "add" not in counts


def test_three_convs_summed_by_onnx_sum_become_one_conv(run_module, rng):
    m = Model(4)
    y = m.op("Sum", [m.conv("x", 4, 8, 3, pads=[1, 1, 1, 1]) for _ in range(3)])
    mod = import_onnx(m.build([("x", F32, [1, 4, 8, 8])], [(y, F32, [1, 8, 8, 8])]))
    taso = TASOPass(verify_speed=False)
    out = taso(mod)
    assert taso.report["main"].status == "optimized"
    assert graph_from_function(out["main"]).graph.op_counts().get("conv2d") == 1
    inputs = random_inputs(mod["main"].params, rng)
    np.testing.assert_allclose(run_module(out, inputs)[0], run_module(mod, inputs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shapes, reshapes", [
    (((12, 8), (2, 6, 8), (12, 8)), 0),  # torch.export's Linear on tokens, flattened again: the identity
    (((12, 8), (2, 6, 8), (24, 4)), 1),  # one reshape, from the first input
    (((12, 8), (2, 6, 8), (3, 4, 8), (96,)), 1),  # a chain of three: still one
])
def test_a_reshape_reshaped_again_is_one_reshape_or_none(shapes, reshapes, run_module, rng):
    def make(bb, a, w):
        y = bb.emit(op.matmul(a, w))
        for shape in shapes[1:-1]:
            y = bb.emit(op.reshape(y, shape))
        return op.reshape(y, shapes[-1])
    graph = agrees_with_tvm(function(make, (12, 5), (5, 8)), run_module, rng)
    assert graph.op_counts().get("reshape", 0) == reshapes and "opaque" not in graph.op_counts()


def test_a_reshape_also_used_elsewhere_is_kept(run_module, rng):
    def make(bb, a):
        y = bb.emit(op.reshape(a, (2, 6, 4)))
        return relax.Tuple([bb.emit(op.reshape(y, (12, 4))), bb.emit(op.add(y, y))])
    graph = agrees_with_tvm(function(make, (12, 4)), run_module, rng)
    assert graph.op_counts().get("reshape") == 2  # the one used twice is a node, and the second reads it
