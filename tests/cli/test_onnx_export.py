"""Graph -> ONNX: each operator family exported and run by onnxruntime equals the graph interpreter."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from taso_relay.graph import GraphBuilder, evaluate
from taso_relay.onnx_io.export import ExportError, export_graph, run_onnxruntime


def _check(build, shapes, atol=1e-5):
    g = GraphBuilder()
    ins = [g.input(f"in{k}", s) for k, s in enumerate(shapes)]
    outs = build(g, *ins)
    outs = list(outs) if isinstance(outs, (list, tuple)) and not hasattr(outs, "node") else [outs]
    graph = g.build(outs)
    sig = SimpleNamespace(input_names=tuple(f"in{k}" for k in range(len(shapes))),
                          result=tuple(range(len(outs))), exports=())
    names = [f"x{k}" for k in range(len(shapes))]
    model = export_graph(graph, sig, names, [f"y{k}" for k in range(len(outs))])
    rng = np.random.default_rng(0)
    feeds = {f"in{k}": rng.uniform(-1, 1, s).astype("float32") for k, s in enumerate(shapes)}
    want = evaluate(graph, feeds)
    got = run_onnxruntime(model, {n: feeds[f"in{k}"] for k, n in enumerate(names)})
    assert len(got) == len(want)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=atol)


def _w(g, name, shape, seed=1):
    return g.weight(name, shape, value=np.random.default_rng(seed).uniform(-1, 1, shape).astype("float32"))


def _group_norm_params(g, groups: int):
    """eps, and a per-group scale and shift as TVM's import of an InstanceNormalization reshapes them, (G, 1)."""
    eps = g.weight(f"eps{groups}", (), value=np.array(1e-3, "float32"))
    return eps, _w(g, f"s{groups}", (groups, 1), groups), _w(g, f"b{groups}", (groups, 1), groups + 1)


CASES = {
    "conv_relu_pad": (lambda g, x: g.op("conv2d", x, _w(g, "w", (4, 3, 3, 3)), strides=(2, 1), padding=(1, 0, 2, 1),
                                        activation="relu"), [(1, 3, 9, 8)]),
    "conv_groups_dilation": (lambda g, x: g.op("conv2d", x, _w(g, "w", (4, 1, 3, 3)), groups=4, dilation=(2, 2),
                                               padding=(2, 2, 2, 2), activation="sigmoid"), [(1, 4, 8, 8)]),
    "conv_nhwc_hwio": (lambda g, x: g.op("conv2d", x, _w(g, "w", (3, 3, 2, 5)), data_layout="NHWC",
                                         kernel_layout="HWIO", padding=(1, 1, 1, 1)), [(1, 6, 6, 2)]),
    "enlarge_conv": (lambda g, x: g.op("conv2d", x, g.op("enlarge", _w(g, "w", (4, 3, 1, 1)), kernel=(3, 3)),
                                       padding=(1, 1, 1, 1)), [(1, 3, 5, 5)]),
    "enlarge_of_input": (lambda g, x, k: g.op("conv2d", x, g.op("enlarge", k, kernel=(3, 5)), padding=(1, 2, 1, 2)),
                         [(1, 3, 5, 6), (4, 3, 1, 3)]),
    "subpixel_kernel_of_input": (lambda g, x, k, k2: [
        g.op("conv2d", x, g.op("subpixel_kernel", k, strides=(2, 2), padding=(1, 1)), padding=(1, 1, 1, 1)),
        g.op("conv2d", x, g.op("subpixel_kernel", k2, strides=(2, 1), padding=(1, 0)))],
        [(1, 3, 5, 6), (3, 2, 4, 4), (3, 1, 3, 2)]),
    "identity_conv": (lambda g, x: g.op("conv2d", x, g.constant("identity_conv", (3, 3, 3, 3)), padding=(1, 1, 1, 1)),
                      [(1, 3, 4, 4)]),
    "matmul_tanh_batch": (lambda g, a, b: g.op("matmul", a, b, activation="tanh"), [(2, 3, 4), (4, 5)]),
    "pools": (lambda g, x: [g.op("max_pool2d", x, kernel=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1)),
                            g.op("avg_pool2d", x, kernel=(2, 2), strides=(2, 2), count_include_pad=True,
                                 padding=(1, 1, 1, 1))], [(1, 2, 7, 7)]),
    "channel_shuffles": (lambda g, x: [g.op("channel_shuffle", x, groups=3),
                                       g.op("channel_shuffle", g.op("transpose", x, perm=(0, 2, 3, 1)), groups=2,
                                            layout="NHWC")], [(1, 6, 2, 3)]),
    "pixel_shuffles": (lambda g, x: [g.op("depth_to_space", x, block=(2, 2), mode="CRD"),
                                     g.op("depth_to_space", x, block=(4, 1), mode="DCR"),
                                     g.op("depth_to_space", g.op("transpose", x, perm=(0, 2, 3, 1)), block=(1, 2),
                                          mode="CRD", layout="NHWC"),
                                     g.op("space_to_depth", x, block=(2, 3), mode="DCR"),
                                     g.op("space_to_depth", g.op("transpose", x, perm=(0, 2, 3, 1)), block=(2, 1),
                                          mode="CRD", layout="NHWC")], [(1, 8, 2, 3)]),
    "mirror_pads": (lambda g, x: [g.op("mirror_pad", x, pad_width=(0, 0, 0, 1, 2, 1, 0, 3), mode="reflect"),
                                  g.op("mirror_pad", x, pad_width=(1, 0, 0, 0, 3, 0, 1, 2), mode="edge")],
                    [(1, 2, 3, 4)]),
    "resizes": (lambda g, x: [g.op("resize2d", x, size=(10, 14), method="nearest_neighbor", coordinates="asymmetric",
                                   rounding="floor"),
                              g.op("resize2d", x, size=(9, 3), method="linear", coordinates="half_pixel"),
                              g.op("resize2d", g.op("transpose", x, perm=(0, 2, 3, 1)), size=(11, 6), layout="NHWC",
                                   method="linear", coordinates="align_corners")], [(1, 2, 5, 7)]),
    "batch_norm": (lambda g, x: g.op("batch_norm", x, *(_w(g, n, (3,), k) for k, n in enumerate("gbm")),
                                     g.weight("v", (3,), value=np.array([0.5, 1.0, 2.0], "float32")),
                                     epsilon=1e-3), [(2, 3, 4, 4)]),
    "layer_norm_softmax": (lambda g, x: g.op("softmax", g.op("layer_norm", x, _w(g, "g", (6,)), _w(g, "b", (6,), 2),
                                                              axes=(-1,)), axis=1), [(2, 4, 6)]),
    "concat_split": (lambda g, a, b: g.op("split", g.op("concat", a, b, axis=1), axis=1, sizes=(1, 4, 2)),
                     [(2, 3, 2), (2, 4, 2)]),
    "layout": (lambda g, x: g.op("expand_dims", g.op("squeeze", g.op("reshape", g.op("transpose", x, perm=(0, 2, 1)),
                                                                     shape=(1, 4, 6)), axes=(0,)), axes=(2,)),
               [(2, 3, 4)]),
    "slice_pad_broadcast": (lambda g, x: g.op("broadcast_to", g.op("pad", g.op(
        "strided_slice", x, axes=(1, 2), begin=(1, 4), end=(3, 0), strides=(1, -2)), pad_width=(0, 0, 1, 2, 0, 1),
        value=0.5), shape=(3, 2, 5, 3)), [(2, 4, 5)]),
    "unary": (lambda g, x: [g.op(op, x) for op in ("relu", "sigmoid", "tanh", "gelu", "gelu_tanh", "erf", "exp",
                                                     "neg", "abs", "silu")], [(3, 4)]),
    "positive_unary": (lambda g, x: [g.op(op, g.op("add", g.op("abs", x), g.constant("ones", (3, 4))))
                                     for op in ("log", "sqrt", "rsqrt")], [(3, 4)]),
    "binary": (lambda g, a, b: [g.op(op, a, b) for op in ("add", "sub", "mul", "div", "maximum", "minimum")],
               [(2, 3), (3,)]),
    "reductions": (lambda g, x: [g.op("sum", x, axes=(1,)), g.op("mean", x, axes=(0, 2), keepdims=True),
                                 g.op("max", x, axes=()), g.op("min", x, axes=(-1,)),
                                 g.op("variance", x, axes=(2,), keepdims=True), g.op("variance", x, axes=(0, 1))],
                    [(2, 3, 4)]),
    "group_norms": (lambda g, x: [g.op("exported_group_norm", x, *_group_norm_params(g, 2)),
                                  g.op("exported_group_norm", g.op("transpose", x, perm=(0, 2, 3, 1)), *_group_norm_params(g, 3),
                                       axis=3)], [(2, 6, 3, 4)]),
    "group_norms_per_channel": (lambda g, x: [
        g.op("group_norm", x, _w(g, "ga", (6,)), _w(g, "be", (6,), 2), groups=3, epsilon=1e-3),
        g.op("group_norm", g.op("transpose", x, perm=(0, 2, 3, 1)), _w(g, "ga3", (6,), 3), _w(g, "be3", (6,), 4),
             groups=2, axis=3)], [(2, 6, 3, 4)]),
    "clip": (lambda g, x: [g.op("clip", x, min=-0.5, max=0.25), g.op("clip", x, min=0.0, max=1.0)], [(3, 4)]),
    "leaky_relu": (lambda g, x: g.op("leaky_relu", x, alpha=0.2), [(3, 4)]),
    "isnan_where": (lambda g, x, y: [g.op("where", g.op("isnan", g.op("log", x)), x, y), g.op("isnan", y)],
                    [(3, 4), (4,)]),  # log of negative inputs: NaN where x < 0
    "cast_and_identity_matrix": (lambda g, x: g.op("cast", g.op("matmul", x, g.constant("identity_matrix", (4, 4))),
                                                   dtype="float64"), [(3, 4)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.filterwarnings("ignore:invalid value encountered in log")  # isnan_where makes its NaNs so
def test_exported_graph_matches_the_interpreter(name):
    build, shapes = CASES[name]
    _check(build, shapes)


def test_pixel_shuffles_are_written_as_onnx_operators_where_onnx_has_them():
    """NCHW with a square block: DepthToSpace in either order, SpaceToDepth in DCR (ONNX's only order);
    the others (PyTorch's CRD pixel unshuffle, a 2x1 block, NHWC) keep their reshape, transpose, reshape."""
    g = GraphBuilder()
    x = g.input("in0", (1, 8, 4, 6))
    ys = [g.op("depth_to_space", x, block=(2, 2), mode="CRD"), g.op("depth_to_space", x, block=(2, 2), mode="DCR"),
          g.op("space_to_depth", x, block=(2, 2), mode="DCR"), g.op("space_to_depth", x, block=(2, 2), mode="CRD"),
          g.op("depth_to_space", x, block=(2, 1), mode="CRD")]
    sig = SimpleNamespace(input_names=("in0",), result=tuple(range(len(ys))), exports=())
    model = export_graph(g.build(ys), sig, ["x"], [f"y{k}" for k in range(len(ys))])
    kinds = [(n.op_type, {a.name: a.s or a.i for a in n.attribute}) for n in model.graph.node]
    assert ("DepthToSpace", {"blocksize": 2, "mode": b"CRD"}) in kinds
    assert ("DepthToSpace", {"blocksize": 2, "mode": b"DCR"}) in kinds
    assert [k for k in kinds if k[0] in ("DepthToSpace", "SpaceToDepth")][2] == ("SpaceToDepth", {"blocksize": 2})
    assert len([k for k in kinds if k[0] == "Transpose"]) == 2
    feed = np.random.default_rng(0).uniform(-1, 1, (1, 8, 4, 6)).astype("float32")
    for want, got in zip(evaluate(g.build(ys), {"in0": feed}), run_onnxruntime(model, {"x": feed})):
        np.testing.assert_array_equal(got, want)


def test_opaque_nodes_are_refused_by_name():
    g = GraphBuilder()
    x = g.input("x", (2, 2))
    from taso_relay.graph import TensorType
    (y,) = g.opaque([x], [TensorType((2, 2))], None, "k", label="relax.topk")
    graph = g.build([y])
    sig = SimpleNamespace(input_names=("x",), result=(0,), exports=())
    with pytest.raises(ExportError, match="relax.topk"):
        export_graph(graph, sig, ["x"], ["y"])


def test_the_models_own_names_are_kept_free_and_each_output_named_once():
    """Exporters name tensors "add_5" or "w_1" too, list one tensor twice as an output, or return an input:
    the written model must stay valid ONNX (SSA) and compute the same."""
    onnx = pytest.importorskip("onnx")
    g = GraphBuilder()
    x = g.input("in0", (4, 8))
    y = g.op("relu", g.op("matmul", x, _w(g, "w", (8, 8))))
    z = g.op("add", y, _w(g, "b", (4, 8), seed=2))
    graph = g.build([y, z, y, x])
    sig = SimpleNamespace(input_names=("in0",), result=(0, 1, 2, 3), exports=())
    names = ["relu_4", "add_5", "relu_4", "w_1"]
    model = export_graph(graph, sig, ["w_1"], names)
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == names
    made = {t.name for t in model.graph.initializer} | {o for n in model.graph.node for o in n.output}
    assert len([n for n in model.graph.node for o in n.output if o in names]) == 2  # relu_4 and add_5, once each
    assert "w_1" not in made
    feed = np.random.default_rng(0).uniform(-1, 1, (4, 8)).astype("float32")
    got = run_onnxruntime(model, {"w_1": feed})
    want = evaluate(graph, {"in0": feed})
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_a_writer_failure_writes_the_input_model_with_the_reason(monkeypatch):
    from taso_relay.onnx_io import export

    def broken(*args, **kwargs):
        raise ValueError("checker says no\nsecond line")
    monkeypatch.setattr(export, "export_graph", broken)
    prepared = SimpleNamespace(model="the input model", inputs=[], outputs=[])
    got = export.export_module(None, prepared, graph=object(), signature=object())
    assert got.model == "the input model" and got.exported is False
    assert got.reason == "the ONNX writer failed: ValueError: checker says no"


def test_an_output_named_like_an_input_but_computed_is_refused():
    g = GraphBuilder()
    x = g.input("in0", (2, 2))
    graph = g.build([g.op("relu", x)])
    sig = SimpleNamespace(input_names=("in0",), result=(0,), exports=())
    with pytest.raises(ExportError, match="output 'x' is also an input"):
        export_graph(graph, sig, ["x"], ["x"])


def test_the_export_check_compares_against_the_output_own_scale():
    """A random-weight MobileNet's logits are about 1e-9: against 1 + their magnitude any export agreed."""
    from taso_relay.onnx_io.export import close

    logits = np.float32([1e-9, -2e-9, 3e-9])
    assert not close(logits, -logits)[0] and close(logits, logits * np.float32(1 + 1e-6))[0]
    half = np.float16([0.5, -0.25])
    assert close(half, np.nextafter(half, np.float16(1)))[0]  # one float16 rounding step
