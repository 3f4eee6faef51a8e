"""1-D calls (conv1d, max_pool1d, avg_pool1d) read as their 2-D operators over a unit axis inserted at 2, and the
element-wise calls, batch norms and splits that read their results read on the 2-D values too. Every reading
runs against TVM running the original, and the rebuilt function is run as well."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from tvm import relax

from taso_relay.bridge import graph_from_function

sys.path.insert(0, str(Path(__file__).parent))
from test_bridge_relax_calls import single as function  # noqa: E402
from test_bridge_stack_sum import agrees_with_tvm  # noqa: E402

op = relax.op


def const(*shape, seed=0, positive=False):
    value = np.random.default_rng(seed).standard_normal(shape)
    return relax.const((np.abs(value) + 0.5 if positive else value).astype("float32"))


def batch_norm(bb, x, c, seed=1):
    y = bb.emit(op.nn.batch_norm(x, const(c, seed=seed), const(c, seed=seed + 1), const(c, seed=seed + 2),
                                 const(c, seed=seed + 3, positive=True), axis=1, training=False))
    return bb.emit(relax.TupleGetItem(y, 0))


@pytest.mark.parametrize("kwargs, w_shape", [
    ({}, (6, 4, 3)),
    ({"strides": 2, "padding": (1, 2), "dilation": 2}, (6, 4, 3)),
    ({"groups": 2, "padding": (2, 2)}, (6, 2, 5)),
    ({"groups": 4, "padding": (1, 1)}, (4, 1, 3)),  # depthwise
], ids=["plain", "strided-dilated", "grouped", "depthwise"])
def test_conv1d_reads_as_conv2d_over_a_unit_axis(kwargs, w_shape, run_module, rng):
    mod = function(lambda bb, x: op.nn.conv1d(x, const(*w_shape), **kwargs), (2, 4, 17))
    graph = agrees_with_tvm(mod, run_module, rng)
    counts = graph.op_counts()
    assert "opaque" not in counts and counts["conv2d"] == 1
    assert graph_from_function(mod["main"]).one_d == "conv1d"


@pytest.mark.parametrize("kwargs, w_shape", [
    ({"strides": 2, "padding": (1, 1)}, (4, 6, 4)),
    ({"strides": 3, "padding": (2, 0), "output_padding": 2, "dilation": 2, "groups": 2}, (4, 3, 3)),
], ids=["upsampling", "grouped-dilated-output-padding"])
def test_conv1d_transpose_reads_as_conv2d_transpose_over_a_unit_axis(kwargs, w_shape, run_module, rng):
    mod = function(lambda bb, x: op.nn.conv1d_transpose(x, const(*w_shape), **kwargs), (2, 4, 9))
    graph = agrees_with_tvm(mod, run_module, rng)
    assert "opaque" not in graph.op_counts() and graph.op_counts()["conv2d_transpose"] == 1
    assert graph_from_function(mod["main"]).one_d == "conv1d_transpose"


@pytest.mark.parametrize("make", [
    lambda bb, x: op.nn.max_pool1d(x, 3, strides=2, padding=(1, 1)),
    lambda bb, x: op.nn.max_pool1d(x, 2, strides=2, ceil_mode=True),
    lambda bb, x: op.nn.avg_pool1d(x, 3, strides=1, padding=(1, 1), count_include_pad=True),
    lambda bb, x: op.nn.avg_pool1d(x, 3, strides=2, padding=(1, 1), count_include_pad=False),
], ids=["max", "max-ceil", "avg-pads-counted", "avg-pads-not-counted"])
def test_pool1d_reads_as_pool2d_over_a_unit_axis(make, run_module, rng):
    graph = agrees_with_tvm(function(make, (2, 3, 11)), run_module, rng)
    assert "opaque" not in graph.op_counts() and sum(n.op.endswith("pool2d") for n in graph.nodes) == 1


def conv_block(bb, x):
    """conv1d + bias (1, C, 1), a batch norm, relu, a (C, 1) scale, a GLU (split, sigmoid, mul), a depthwise
    conv1d, a residual add of the input, and a transpose the 2-D form does not read."""
    y = bb.emit(op.add(bb.emit(op.nn.conv1d(x, const(8, 4, 3), padding=(1, 1))), const(1, 8, 1, seed=2)))
    y = bb.emit(op.nn.relu(batch_norm(bb, y, 8)))
    y = bb.emit(op.multiply(y, const(8, 1, seed=3)))
    halves = bb.emit(op.split(y, 2, axis=1))
    y = bb.emit(op.multiply(bb.emit(relax.TupleGetItem(halves, 0)),
                            bb.emit(op.sigmoid(bb.emit(relax.TupleGetItem(halves, 1))))))
    y = batch_norm(bb, bb.emit(op.nn.conv1d(y, const(4, 1, 5, seed=4), padding=(2, 2), groups=4)), 4, seed=5)
    y = bb.emit(op.add(y, x))
    return op.permute_dims(y, [0, 2, 1])


def test_the_calls_reading_a_1d_result_read_it_in_2d(run_module, rng):
    """Nothing is left between a conv1d and the bias, batch norm, activations, split and add after it: only the
    input read in 2-D (shared by the conv and the add) and a squeeze before the transpose. expand_dims and
    squeeze, which write no sizes (a symbolic length needs none read back)."""
    graph = agrees_with_tvm(function(conv_block, (2, 4, 9)), run_module, rng)
    counts = graph.op_counts()
    assert "opaque" not in counts and counts["conv2d"] == 2 and counts["batch_norm"] == 2
    assert counts["squeeze"] == 1 and "reshape" not in counts
    reader = {n.op: graph.nodes[n.inputs[0].node].op for n in graph.nodes if n.op in ("squeeze", "transpose")}
    assert reader == {"squeeze": "add", "transpose": "squeeze"}
    expanded = sorted(graph.nodes[n.inputs[0].node].op for n in graph.nodes if n.op == "expand_dims")
    assert expanded == ["input"] + ["weight"] * (len(expanded) - 1)
    assert all(len(n.types[0].shape) == 4 for n in graph.nodes if n.op in ("batch_norm", "split", "sigmoid", "mul"))


@pytest.mark.parametrize("axis", [1, -2])
def test_a_batch_norm_over_the_channels_reads_the_2d_value(axis, run_module, rng):
    """axis -2 of (N, C, L) is the channels, axis 1 of (N, C, 1, L)."""
    mod = function(lambda bb, x: bb.emit(relax.TupleGetItem(bb.emit(op.nn.batch_norm(
        bb.emit(op.nn.conv1d(x, const(6, 4, 3))), const(6), const(6, seed=2), const(6, seed=3),
        const(6, seed=4, positive=True), axis=axis, training=False)), 0)), (2, 4, 9))
    graph = agrees_with_tvm(mod, run_module, rng)
    norm = next(n for n in graph.nodes if n.op == "batch_norm")
    assert len(norm.types[0].shape) == 4 and norm.attr("axis") == 1


@pytest.mark.parametrize("axis", [1, 2, -1, 0])
def test_a_concat_of_1d_results_reads_the_2d_values(axis, run_module, rng):
    """Two conv1d results and the input concatenated (the input read in 2-D too), along any axis but the unit one."""
    def make(bb, x):
        a, b = (bb.emit(op.nn.conv1d(x, const(4, 4, 3, seed=k), padding=(1, 1))) for k in (1, 2))
        return op.concat([a, x, b], axis=axis)
    graph = agrees_with_tvm(function(make, (2, 4, 9)), run_module, rng)
    concat = next(n for n in graph.nodes if n.op == "concat")
    assert len(concat.types[0].shape) == 4 and concat.attr("axis") == {1: 1, 2: 3, -1: 3, 0: 0}[axis]


def test_a_value_of_another_rank_is_read_as_written(run_module, rng):
    """An add of a conv1d result and a (2, 1, 8, 9) tensor broadcasts to rank 4: not read on the unit axis."""
    mod = function(lambda bb, x, y: op.add(bb.emit(op.nn.conv1d(x, const(8, 4, 3), padding=(1, 1))), y),
                   (1, 4, 9), (2, 1, 8, 9))
    graph = agrees_with_tvm(mod, run_module, rng)
    add = next(n for n in graph.nodes if n.op == "add")
    assert [len(graph.nodes[r.node].types[r.index].shape) for r in add.inputs] == [3, 4]


@pytest.mark.parametrize("mode, coordinates, nearest", [
    ("linear", "half_pixel", "round_prefer_floor"), ("linear", "pytorch_half_pixel", "round_prefer_floor"),
    ("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_ceil"),
    ("linear", "align_corners", "round_prefer_floor"),
], ids=["linear", "linear-pytorch", "nearest-floor", "nearest-ceil", "align-corners-opaque"])
def test_an_onnx_resize_of_a_1d_tensor_reads_as_resize2d_over_a_unit_axis(mode, coordinates, nearest, run_module):
    """TVM's ONNX importer writes it as call_tir of topi's resize1d: read as resize2d on (N, C, 1, L) where topi's
    PrimFunc for one method and coordinate mode is the one called; align_corners (which divides by zero on a
    unit axis) stays opaque. The graph, the function rebuilt from it and TVM running the original agree."""
    from onnx import TensorProto, helper, numpy_helper
    from tvm.relax.frontend.onnx import from_onnx

    from taso_relay.bridge import function_from_graph
    from taso_relay.bridge.execute import module_with
    from taso_relay.graph import evaluate

    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, nearest_mode=nearest,
                            coordinate_transformation_mode=coordinates)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 20])],
                              [numpy_helper.from_array(np.array([1, 1, 2], np.float32), "scales")])
    mod = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    imported = graph_from_function(mod["main"], "main", mod)
    x = np.random.default_rng(3).standard_normal((1, 4, 10)).astype("float32")
    want = run_module(mod, [x])[0]
    rebuilt = module_with(mod, "main", function_from_graph(imported.graph, "main", imported.signature))
    np.testing.assert_allclose(run_module(rebuilt, [x])[0], want, rtol=1e-6, atol=1e-6)
    if coordinates == "align_corners":
        assert imported.graph.op_counts()["opaque"] == 1 and imported.one_d == ""
        return
    assert "opaque" not in imported.graph.op_counts() and imported.one_d == "resize1d"
    np.testing.assert_allclose(evaluate(imported.graph, {"x": x})[0], want, rtol=1e-6, atol=1e-6)
