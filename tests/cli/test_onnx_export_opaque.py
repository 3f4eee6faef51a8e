"""Opaque nodes with an ONNX form (onnx_io/opaque.py): a model whose Relax calls the graph does not
model is exported optimized, and onnxruntime computes the same on the export as on the input."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from taso_relay.bridge import graph_from_function  # noqa: E402
from taso_relay.onnx_io import prepare  # noqa: E402
from taso_relay.onnx_io.export import export_module, run_onnxruntime  # noqa: E402


def _model(tmp_path, nodes, x_shape, y_shape, inits=(), y_type=TensorProto.FLOAT):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(v if v.dtype != np.float64 else v.astype(np.float32), name)
             for name, v in ((n, rng.uniform(-1, 1, s)) if isinstance(s, tuple) else (n, s) for n, s in inits)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              [helper.make_tensor_value_info("y", y_type, list(y_shape))], inits)
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


CASES = {
    # ONNX op, its attributes, (node, weights, x shape, y shape, the Relax call left opaque)
    "conv1d": ([helper.make_node("Conv", ["x", "w"], ["c"], strides=[2], pads=[1, 2], dilations=[2], group=2),
                helper.make_node("Relu", ["c"], ["y"])], [("w", (6, 2, 3))], (1, 4, 17), (1, 6, 8),
               "relax.nn.conv1d", "Conv"),
    "conv_transpose": ([helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 3], pads=[0, 1, 1, 2],
                                         output_padding=[1, 0]),
                        helper.make_node("Relu", ["c"], ["y"])], [("w", (3, 5, 3, 2))], (1, 3, 4, 5), (1, 5, 9, 11),
                       "relax.nn.conv2d_transpose", "ConvTranspose"),
    "conv_transpose_1d": ([helper.make_node("ConvTranspose", ["x", "w"], ["c"], strides=[2], pads=[1, 0],
                                            output_padding=[1]),
                           helper.make_node("Relu", ["c"], ["y"])], [("w", (3, 5, 3))], (1, 3, 6), (1, 5, 13),
                          "relax.nn.conv1d_transpose", "ConvTranspose"),
    "log_softmax": ([helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)], [], (2, 5, 3), (2, 5, 3),
                    "relax.nn.log_softmax", "LogSoftmax"),
    "sin": ([helper.make_node("Sin", ["x"], ["y"])], [], (2, 5), (2, 5), "relax.sin", "Sin"),
    "prelu": ([helper.make_node("PRelu", ["x", "s"], ["y"])], [("s", (3, 1, 1))], (2, 3, 4, 5), (2, 3, 4, 5),
              "relax.nn.prelu", "PRelu"),
    "prelu_one_slope": ([helper.make_node("PRelu", ["x", "s"], ["y"])], [("s", (1,))], (2, 3, 4, 5), (2, 3, 4, 5),
                        "relax.nn.prelu", "PRelu"),  # nn.PReLU(): TVM reads it as prelu over the last axis
    "pad_reflect": ([helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
                    [("p", np.array([0, 0, 1, 2, 0, 0, 2, 0], np.int64))], (1, 2, 4, 5), (1, 2, 7, 7),
                    "relax.call_tir", "Pad"),  # topi's mirror_pad
    "pad_edge": ([helper.make_node("Pad", ["x", "p"], ["y"], mode="edge")],
                 [("p", np.array([0, 1, 0, 3, 0, 0, 2, 1], np.int64))], (1, 2, 4, 5), (1, 3, 6, 9),
                 "relax.call_tir", "Pad"),  # topi's replicate_pad
    "tile_whole_axes": ([helper.make_node("Tile", ["x", "r"], ["y"])], [("r", np.array([1, 2, 3], np.int64))],
                        (2, 3, 4), (2, 6, 12), "relax.call_tir", "Tile"),
    "argmax": ([helper.make_node("ArgMax", ["x"], ["y"], axis=1, keepdims=0)], [], (2, 5, 3), (2, 3),
               "relax.argmax", "ArgMax"),
    # nearest and linear resizes are the graph operator resize2d (test_onnx_export.py); cubic stays opaque
    "resize_cubic": ([helper.make_node("Resize", ["x", "", "", "sz"], ["y"], mode="cubic", cubic_coeff_a=-0.5,
                                       coordinate_transformation_mode="align_corners")],
                     [("sz", np.array([1, 2, 5, 9], np.int64))], (1, 2, 3, 4), (1, 2, 5, 9),
                     "relax.image.resize2d", "Resize"),
}


# calls the bridge reads as graph operators, left opaque here (as where their layout or dtype is another)
READ = {"conv1d": "relax.nn.conv1d", "conv_transpose": "relax.nn.conv2d_transpose",
        "conv_transpose_1d": "relax.nn.conv1d_transpose"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_opaque_call_exports_as_its_onnx_operator(name, tmp_path, monkeypatch):
    nodes, inits, x_shape, y_shape, label, onnx_type = CASES[name]
    if name in READ:  # read as graph operators (conv1d: test_conv1d_exports_as_a_2d_conv; transposed convs:
        from taso_relay.bridge import ops_table  # tests/test_passes_conv_transpose.py); opaque otherwise

        monkeypatch.delitem(ops_table.IMPORTERS, READ[name])
    if name.startswith("pad_"):  # read as mirror_pad (tests/test_passes_layout.py); opaque where it is not
        from taso_relay.bridge import call_tir

        monkeypatch.setattr(call_tir, "_as_mirror_pad", lambda *args: None)
    y_type = TensorProto.INT64 if onnx_type == "ArgMax" else TensorProto.FLOAT
    prepared = prepare(_model(tmp_path, nodes, x_shape, y_shape, inits, y_type), {})
    imported = graph_from_function(prepared.mod["main"], "main", prepared.mod)
    labels = {imported.graph.nodes[i].attr("label") for i in imported.graph.nodes_of("opaque")}
    assert label in labels  # the call is opaque: what is tested is its ONNX form

    exported = export_module(prepared.mod, prepared, graph=imported.graph, signature=imported.signature)
    assert exported.exported, exported.reason
    assert onnx_type in [n.op_type for n in exported.model.graph.node]
    x = np.random.default_rng(7).uniform(-1, 1, x_shape).astype(np.float32)
    (want,), (got,) = run_onnxruntime(prepared.original, {"x": x}), run_onnxruntime(exported.model, {"x": x})
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv1d_exports_as_a_2d_conv(tmp_path):
    """Strided, dilated, grouped, unevenly padded: read as a conv2d on (N, C, 1, L), written as a 2-D Conv between
    Reshapes, and onnxruntime computes the same."""
    nodes, inits, x_shape, y_shape, _, _ = CASES["conv1d"]
    prepared = prepare(_model(tmp_path, nodes, x_shape, y_shape, inits), {})
    imported = graph_from_function(prepared.mod["main"], "main", prepared.mod)
    assert "opaque" not in imported.graph.op_counts() and imported.one_d == "conv1d"
    exported = export_module(prepared.mod, prepared, graph=imported.graph, signature=imported.signature)
    assert exported.exported, exported.reason
    conv = next(n for n in exported.model.graph.node if n.op_type == "Conv")
    weights = {i.name: list(i.dims) for i in exported.model.graph.initializer}
    assert weights[conv.input[1]] == [6, 2, 1, 3]
    assert {a.name: list(a.ints) for a in conv.attribute if a.ints}["pads"] == [0, 1, 0, 2]
    x = np.random.default_rng(7).uniform(-1, 1, x_shape).astype(np.float32)
    (want,), (got,) = run_onnxruntime(prepared.original, {"x": x}), run_onnxruntime(exported.model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_rms_norm_exports_as_its_arithmetic(tmp_path):
    """Opset 23's RMSNormalization (Llama-style exports) becomes relax.nn.rms_norm, which the writer spells
    out in opset 17 operators; over two axes, so the scale is reshaped to broadcast."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("RMSNormalization", ["x", "g"], ["n"], axis=1, epsilon=1e-3),
             helper.make_node("MatMul", ["n", "w"], ["y"])]
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, (4, 5)).astype(np.float32), "g"),
             numpy_helper.from_array(rng.uniform(-1, 1, (5, 3)).astype(np.float32), "w")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3])], inits)
    path = tmp_path / "rms.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=11), str(path))
    prepared = prepare(path, {})
    imported = graph_from_function(prepared.mod["main"], "main", prepared.mod)
    labels = {imported.graph.nodes[i].attr("label") for i in imported.graph.nodes_of("opaque")}
    assert "relax.nn.rms_norm" in labels

    exported = export_module(prepared.mod, prepared, graph=imported.graph, signature=imported.signature)
    assert exported.exported, exported.reason
    assert "RMSNormalization" not in [n.op_type for n in exported.model.graph.node]
    x = rng.uniform(-2, 2, (2, 4, 5)).astype(np.float32)
    (want,), (got,) = run_onnxruntime(prepared.original, {"x": x}), run_onnxruntime(exported.model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_float16_rms_norm_is_computed_in_float32_as_tvm_does(tmp_path):
    """x * x overflows float16 at |x| > 256: topi squares in float32, and so must the export (checked with
    onnx's reference evaluator, which, unlike onnxruntime's CPU kernels, computes float16 in float16)."""
    from onnx.reference import ReferenceEvaluator

    nodes = [helper.make_node("RMSNormalization", ["x", "g"], ["y"], axis=-1, epsilon=1e-5, stash_type=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 8])],
                              [numpy_helper.from_array(np.linspace(0.5, 1.5, 8).astype(np.float16), "g")])
    path = tmp_path / "rms16.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=11), str(path))
    prepared = prepare(path, {})
    imported = graph_from_function(prepared.mod["main"], "main", prepared.mod)
    exported = export_module(prepared.mod, prepared, graph=imported.graph, signature=imported.signature)
    assert exported.exported, exported.reason
    x = np.stack([np.full(8, 300.0), np.linspace(-2, 2, 8)]).astype(np.float16)
    (got,) = ReferenceEvaluator(exported.model).run(None, {"x": x})
    x32, g32 = x.astype(np.float32), np.linspace(0.5, 1.5, 8).astype(np.float16).astype(np.float32)
    want = x32 / np.sqrt((x32 * x32).mean(-1, keepdims=True) + 1e-5) * g32
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)


def test_instance_norm_is_read_as_the_variance_operator_and_exports(tmp_path):
    """GroupNorm's and InstanceNorm's statistics (relax.variance) are a graph operator since session 35: no
    opaque call is left, and the export computes what the input model does."""
    nodes = [helper.make_node("InstanceNormalization", ["x", "g", "b"], ["y"], epsilon=1e-3)]
    prepared = prepare(_model(tmp_path, nodes, (2, 3, 4, 5), (2, 3, 4, 5), [("g", (3,)), ("b", (3,))]), {})
    imported = graph_from_function(prepared.mod["main"], "main", prepared.mod)
    counts = imported.graph.op_counts()
    assert counts.get("variance") == 1 and "opaque" not in counts, counts
    exported = export_module(prepared.mod, prepared, graph=imported.graph, signature=imported.signature)
    assert exported.exported, exported.reason
    x = np.random.default_rng(7).uniform(-1, 1, (2, 3, 4, 5)).astype(np.float32)
    (want,), (got,) = run_onnxruntime(prepared.original, {"x": x}), run_onnxruntime(exported.model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
