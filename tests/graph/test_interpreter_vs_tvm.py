"""The numpy interpreter is the reference the optimizer trusts: hold it to what TVM computes.

Every modelled operator (and its attribute corners: strides, groups, ceil-mode
pools, count_include_pad, NHWC) is built as a one-op graph, emitted to Relax by
the bridge, compiled with tvm.compile and compared with `evaluate`.
"""
from __future__ import annotations

import numpy as np
import pytest

from taso_relay.bridge import module_from_graph
from taso_relay.graph import OPS, GraphBuilder, Ref, evaluate

POSITIVE = ("log", "sqrt", "rsqrt", "pow", "exported_group_norm")  # its eps


def one_op(op, shapes, in_dtype="float32", **attrs):
    def build():
        b = GraphBuilder()
        xs = [b.input(f"x{i}", s, in_dtype) for i, s in enumerate(shapes)]
        out = b.op(op, *xs, **attrs)
        return b.build([out] if isinstance(out, Ref) else out)
    return build


def with_constant(kind, shape, op, x_shape, **attrs):
    def build():
        b = GraphBuilder()
        x = b.input("x", x_shape)
        c = b.constant(kind, shape)
        return b.build([b.op(op, x, c, **attrs)])
    return build


def guarded_bound():
    """where(isnan(b), inf, b) with a NaN among the bounds, then maximum: Clip's guard as TVM imports it."""
    def build():
        b = GraphBuilder()
        x = b.input("x", (2, 3))
        bound = b.weight("bound", (3,), value=np.array([np.nan, 0.5, -1.0], "float32"))
        guarded = b.op("where", b.op("isnan", bound), b.constant("ones", (3,)), bound)
        return b.build([b.op("maximum", x, guarded), b.op("isnan", x)])
    return build


def batch_norm(shape, axis):
    def build():
        b = GraphBuilder()
        x = b.input("x", shape)
        c = shape[axis]
        params = [b.input(n, (c,)) for n in ("gamma", "beta", "mean")]
        var = b.op("abs", b.input("var", (c,)))  # the variance must be non-negative
        return b.build([b.op("batch_norm", x, *params, var, axis=axis, epsilon=1e-3)])
    return build


CASES = {
    "conv2d": one_op("conv2d", [(1, 4, 7, 7), (6, 4, 3, 3)], padding=(1, 1, 1, 1)),
    "conv2d_transpose": one_op("conv2d_transpose", [(1, 4, 5, 5), (4, 3, 4, 4)], strides=(2, 2),
                               padding=(1, 1, 1, 1)),
    # groups, output_padding, dilation, and a padding beyond dilation * (k - 1) (the reference crops)
    "conv2d_transpose_corners": one_op("conv2d_transpose", [(2, 4, 4, 5), (4, 3, 3, 3)], strides=(3, 1),
                                       padding=(0, 3, 2, 1), output_padding=(2, 0), dilation=(1, 2), groups=2),
    "conv2d_strided_asym_pad_dilated": one_op("conv2d", [(2, 3, 9, 8), (4, 3, 3, 2)], strides=(2, 1),
                                              padding=(1, 0, 2, 1), dilation=(1, 2)),
    "conv2d_groups": one_op("conv2d", [(1, 4, 6, 6), (6, 2, 3, 3)], groups=2, padding=(1, 1, 1, 1)),
    "conv2d_depthwise": one_op("conv2d", [(1, 4, 6, 6), (4, 1, 3, 3)], groups=4, strides=(2, 2)),
    "conv2d_relu": one_op("conv2d", [(1, 3, 5, 5), (2, 3, 1, 1)], activation="relu"),
    "conv2d_sigmoid": one_op("conv2d", [(1, 3, 5, 5), (2, 3, 3, 3)], activation="sigmoid"),
    "conv2d_tanh": one_op("conv2d", [(1, 3, 5, 5), (2, 3, 3, 3)], activation="tanh"),
    "conv2d_nhwc_hwio": one_op("conv2d", [(1, 6, 6, 4), (3, 3, 4, 5)], data_layout="NHWC",
                               kernel_layout="HWIO", padding=(1, 1, 1, 1)),
    "conv2d_nhwc_ohwi": one_op("conv2d", [(1, 6, 6, 4), (5, 3, 3, 4)], data_layout="NHWC",
                               kernel_layout="OHWI", strides=(2, 1)),
    "conv2d_nchw_hwio": one_op("conv2d", [(1, 4, 6, 6), (3, 3, 4, 5)], kernel_layout="HWIO"),
    "matmul": one_op("matmul", [(3, 4), (4, 5)]),
    "matmul_batched_broadcast": one_op("matmul", [(2, 1, 3, 4), (5, 4, 6)]),
    "matmul_vector_left": one_op("matmul", [(4,), (2, 4, 3)]),
    "matmul_vector_right": one_op("matmul", [(2, 3, 4), (4,)]),
    "matmul_relu": one_op("matmul", [(3, 4), (4, 5)], activation="relu"),
    **{op: one_op(op, [(2, 3, 4), (3, 1)]) for op in ("add", "sub", "mul", "div", "maximum", "minimum")},
    "pow": one_op("pow", [(2, 3), (3,)]),
    **{op: one_op(op, [(2, 3, 4)]) for op in ("relu", "sigmoid", "tanh", "gelu", "gelu_tanh", "erf", "exp", "log",
                                              "sqrt", "rsqrt", "neg", "abs", "silu")},
    "clip": one_op("clip", [(2, 3, 4)], min=-0.5, max=1.25),  # inputs in [-2, 2]: both bounds reached
    "isnan_where": guarded_bound(),
    "leaky_relu": one_op("leaky_relu", [(2, 3, 4)], alpha=0.1),
    "cast_f64": one_op("cast", [(2, 3)], dtype="float64"),
    "cast_i32": one_op("cast", [(2, 3)], dtype="int32"),
    "concat": one_op("concat", [(2, 3, 4), (2, 1, 4), (2, 2, 4)], axis=1),
    "concat_negative_axis": one_op("concat", [(2, 3), (2, 5)], axis=-1),
    "split_equal": one_op("split", [(2, 6, 3)], axis=1, sizes=(3, 3)),
    "split_unequal": one_op("split", [(2, 6, 3)], axis=1, sizes=(1, 3, 2)),
    "transpose": one_op("transpose", [(2, 3, 4)], perm=(2, 0, 1)),
    "reshape": one_op("reshape", [(2, 3, 4)], shape=(4, 6)),
    "enlarge_1x1": one_op("enlarge", [(4, 3, 1, 1)], kernel=(3, 3)),
    "enlarge_3x3": one_op("enlarge", [(4, 3, 3, 3)], kernel=(5, 5)),
    "subpixel_kernel_k4s2p1": one_op("subpixel_kernel", [(4, 3, 4, 4)], strides=(2, 2), padding=(1, 1)),
    "subpixel_kernel_k3x2": one_op("subpixel_kernel", [(2, 3, 3, 2)], strides=(2, 1), padding=(1, 0)),
    # a kernel smaller than the stride: phases with no tap
    "subpixel_kernel_k2s3": one_op("subpixel_kernel", [(2, 3, 2, 2)], strides=(3, 3), padding=(0, 1)),
    "subpixel_kernel_f16": one_op("subpixel_kernel", [(4, 3, 4, 4)], "float16", strides=(2, 2), padding=(1, 1)),
    "strided_slice": one_op("strided_slice", [(5, 6, 7)], axes=(0, 2), begin=(1, 0), end=(4, 7), strides=(2, 3)),
    "strided_slice_negative": one_op("strided_slice", [(5, 6)], axes=(1,), begin=(-2,), end=(100,)),
    "strided_slice_reverse": one_op("strided_slice", [(5, 6)], axes=(0,), begin=(4,), end=(0,), strides=(-2,)),
    "squeeze": one_op("squeeze", [(1, 3, 1, 4)], axes=(0, 2)),
    "expand_dims": one_op("expand_dims", [(3, 4)], axes=(0, 3)),
    "expand_dims_negative": one_op("expand_dims", [(3, 4)], axes=(-1,)),
    "broadcast_to": one_op("broadcast_to", [(3, 1)], shape=(2, 3, 4)),
    "pad": one_op("pad", [(2, 3, 4)], pad_width=(0, 1, 2, 0, 1, 1), value=1.5),
    "max_pool2d": one_op("max_pool2d", [(1, 2, 7, 7)], kernel=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1)),
    "max_pool2d_ceil": one_op("max_pool2d", [(1, 2, 6, 6)], kernel=(3, 3), strides=(2, 2), ceil_mode=True),
    "max_pool2d_dilated": one_op("max_pool2d", [(1, 2, 7, 7)], kernel=(2, 2), dilation=(2, 2)),
    "max_pool2d_nhwc": one_op("max_pool2d", [(1, 7, 7, 2)], kernel=(3, 3), strides=(2, 2), layout="NHWC"),
    "channel_shuffle": one_op("channel_shuffle", [(1, 6, 3, 2)], groups=2),
    "channel_shuffle_nhwc": one_op("channel_shuffle", [(1, 3, 2, 12)], groups=3, layout="NHWC"),
    "depth_to_space_crd": one_op("depth_to_space", [(2, 12, 3, 2)], block=(2, 3), mode="CRD"),
    "depth_to_space_dcr": one_op("depth_to_space", [(1, 8, 2, 3)], block=(2, 2), mode="DCR"),
    "depth_to_space_crd_nhwc": one_op("depth_to_space", [(1, 3, 2, 12)], block=(3, 2), mode="CRD", layout="NHWC"),
    "depth_to_space_dcr_nhwc": one_op("depth_to_space", [(1, 2, 3, 18)], block=(3, 3), mode="DCR", layout="NHWC"),
    "space_to_depth_crd": one_op("space_to_depth", [(2, 3, 4, 6)], block=(2, 3), mode="CRD"),
    "space_to_depth_dcr": one_op("space_to_depth", [(1, 2, 6, 4)], block=(3, 2), mode="DCR"),
    "space_to_depth_crd_nhwc": one_op("space_to_depth", [(1, 6, 4, 3)], block=(2, 2), mode="CRD", layout="NHWC"),
    "space_to_depth_dcr_nhwc": one_op("space_to_depth", [(1, 6, 6, 2)], block=(3, 1), mode="DCR", layout="NHWC"),
    "mirror_pad_reflect": one_op("mirror_pad", [(1, 2, 4, 5)], pad_width=(0, 0, 1, 0, 3, 2, 0, 4), mode="reflect"),
    "mirror_pad_edge": one_op("mirror_pad", [(1, 2, 3, 1)], pad_width=(0, 1, 0, 0, 2, 3, 1, 1), mode="edge"),
    "resize2d_nearest_int_ratio": one_op("resize2d", [(1, 2, 5, 4)], size=(10, 12), method="nearest_neighbor",
                                         coordinates="asymmetric", rounding="floor"),
    "resize2d_nearest_down": one_op("resize2d", [(1, 2, 9, 7)], size=(4, 3), method="nearest_neighbor",
                                    coordinates="half_pixel", rounding="round_prefer_floor"),
    "resize2d_nearest_default_round": one_op("resize2d", [(1, 2, 3, 4)], size=(5, 9), method="nearest_neighbor",
                                             coordinates="align_corners"),  # rounding "": ties (0.5, 1.5) to even
    "resize2d_nearest_ceil_tf": one_op("resize2d", [(1, 2, 5, 4)], size=(8, 7), method="nearest_neighbor",
                                       coordinates="tf_half_pixel_for_nn", rounding="ceil"),
    "resize2d_linear": one_op("resize2d", [(1, 2, 5, 4)], size=(11, 7), coordinates="half_pixel"),
    "resize2d_linear_float64": one_op("resize2d", [(1, 2, 5, 4)], "float64", size=(11, 7)),  # topi computes in f32
    "resize2d_nearest_float64": one_op("resize2d", [(1, 2, 5, 4)], "float64", size=(10, 8), method="nearest_neighbor",
                                       coordinates="asymmetric", rounding="floor"),
    "resize2d_linear_corners": one_op("resize2d", [(1, 2, 5, 4)], size=(9, 3), coordinates="align_corners"),
    "resize2d_linear_torch_nhwc": one_op("resize2d", [(1, 5, 4, 3)], size=(1, 6), layout="NHWC",
                                         coordinates="pytorch_half_pixel"),
    "avg_pool2d": one_op("avg_pool2d", [(1, 2, 7, 7)], kernel=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1)),
    "avg_pool2d_count_pad": one_op("avg_pool2d", [(1, 2, 7, 7)], kernel=(3, 3), strides=(2, 2),
                                   padding=(1, 1, 1, 1), count_include_pad=True),
    "avg_pool2d_ceil": one_op("avg_pool2d", [(1, 2, 6, 6)], kernel=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1),
                              ceil_mode=True),
    "avg_pool2d_ceil_count_pad": one_op("avg_pool2d", [(1, 2, 6, 6)], kernel=(3, 3), strides=(2, 2),
                                        padding=(1, 1, 1, 1), ceil_mode=True, count_include_pad=True),
    "avg_pool2d_nhwc": one_op("avg_pool2d", [(1, 6, 6, 2)], kernel=(2, 2), strides=(2, 2), layout="NHWC"),
    "batch_norm": batch_norm((2, 3, 4, 4), 1),
    "batch_norm_last_axis": batch_norm((2, 4, 3), 2),
    "layer_norm": one_op("layer_norm", [(2, 3, 8), (8,), (8,)], axes=(-1,)),
    "layer_norm_two_axes": one_op("layer_norm", [(2, 3, 4), (3, 4), (3, 4)], axes=(1, 2), epsilon=1e-3),
    "softmax": one_op("softmax", [(2, 3, 5)], axis=1),
    "exported_group_norm": one_op("exported_group_norm", [(2, 6, 3, 4), (), (3, 1), (3, 1)]),
    "exported_group_norm_channels_last": one_op("exported_group_norm", [(2, 3, 4, 6), (), (2, 1), (2, 1)], axis=-1),
    "group_norm": one_op("group_norm", [(2, 6, 3, 4), (6,), (6,)], groups=3, epsilon=1e-3),
    "group_norm_channels_last": one_op("group_norm", [(2, 3, 4, 6), (6,), (6,)], groups=2, axis=3),
    "group_norm_rank3": one_op("group_norm", [(1, 4, 5), (4,), (4,)], groups=1),
    "exported_group_norm_rank3": one_op("exported_group_norm", [(1, 4, 5), (), (4, 1), (4, 1)]),
    **{f"{op}_axes": one_op(op, [(2, 3, 4)], axes=(0, 2)) for op in ("sum", "mean", "max", "min", "variance")},
    **{f"{op}_keepdims": one_op(op, [(2, 3, 4)], axes=(-1,), keepdims=True)
       for op in ("sum", "mean", "max", "min", "variance")},
    **{f"{op}_all": one_op(op, [(2, 3, 4)]) for op in ("sum", "mean", "max", "min", "variance")},
    "constant_identity_conv": with_constant("identity_conv", (4, 4, 3, 3), "conv2d", (1, 4, 5, 5),
                                            padding=(1, 1, 1, 1)),
    "constant_identity_conv_grouped": with_constant("identity_conv", (4, 1, 3, 3), "conv2d", (1, 4, 5, 5),
                                                    groups=4, padding=(1, 1, 1, 1)),
    "constant_avg_kernel": with_constant("avg_kernel", (3, 1, 3, 3), "conv2d", (1, 3, 5, 5), groups=3),
    "constant_identity_matrix": with_constant("identity_matrix", (4, 4), "matmul", (3, 4)),
    "constant_ones": with_constant("ones", (3, 4), "mul", (2, 3, 4)),
}

MODELLED = set(OPS) - {"input", "weight", "opaque"}


def test_every_modelled_operator_has_a_case():
    covered = set()
    for build in CASES.values():
        covered |= {n.op for n in build().nodes}
    assert MODELLED <= covered, f"operators without a TVM comparison: {sorted(MODELLED - covered)}"


def _feeds(graph, rng):
    feeds = {}
    positive = any(n.op in POSITIVE for n in graph.nodes)
    for node in graph.nodes:
        if node.op == "input":
            a = node.attr_dict
            low = 0.2 if positive else -2.0
            feeds[a["name"]] = rng.uniform(low, 2.0, size=a["shape"]).astype(a["dtype"])
    return feeds


@pytest.mark.parametrize("case", sorted(CASES))
def test_interpreter_agrees_with_tvm(case, run_module, rng):
    graph = CASES[case]()
    feeds = _feeds(graph, rng)
    want = evaluate(graph, feeds)
    got = run_module(module_from_graph(graph), [feeds[n] for n in graph.input_names])
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["resize2d_nearest_float64", "resize2d_linear_float64"])
def test_a_float64_resize_is_computed_in_float32_as_topi_does(case, run_module, rng):
    """topi reads every pixel as float32: a float64 resize loses what float32 cannot hold, even a nearest one."""
    graph = CASES[case]()
    feeds = _feeds(graph, rng)
    want = evaluate(graph, feeds)[0]
    got = run_module(module_from_graph(graph), [feeds[n] for n in graph.input_names])[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
