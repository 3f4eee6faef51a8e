"""Small graphs for the cost tests, built with the graph form's GraphBuilder (no TVM)."""
from __future__ import annotations

import numpy as np

from taso_relay.graph import Graph, GraphBuilder


def with_values(graph: Graph, seed: int = 0) -> Graph:
    """The graph with a random value for every weight (so exports embed constants TVM can fold)."""
    rng = np.random.default_rng(seed)
    values = dict(graph.values)
    for i in graph.nodes_of("weight"):
        a = graph.nodes[i].attr_dict
        values.setdefault(a["name"], (rng.standard_normal(a["shape"]) * 0.1).astype(a["dtype"]))
    return Graph(graph.nodes, graph.outputs, values, graph.payloads)


def conv_bias_relu(c: int = 16, hw: int = 8, out: int | None = None) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, c, hw, hw))
    y = b.op("conv2d", x, b.weight("w", (out or c, c, 3, 3)), padding=(1, 1, 1, 1))
    y = b.op("relu", b.op("add", y, b.weight("b", (out or c, 1, 1))))
    return b.build([y])


def conv_bn_relu_chain(c: int = 16, hw: int = 8, n: int = 2) -> Graph:
    b = GraphBuilder()
    y = b.input("x", (1, c, hw, hw))
    for k in range(n):
        y = b.op("conv2d", y, b.weight(f"w{k}", (c, c, 3, 3)), padding=(1, 1, 1, 1))
        params = [b.weight(f"bn{k}_{p}", (c,)) for p in ("g", "b", "m", "v")]
        y = b.op("relu", b.op("batch_norm", y, *params))
    return b.build([y])


def bottleneck_with_projection(c: int = 16, hw: int = 8) -> Graph:
    """ResNet's first bottleneck of a stage: conv+bn on both branches, then add and relu."""
    b = GraphBuilder()
    x = b.input("x", (1, c, hw, hw))

    def conv_bn(y, name, k=1):
        pad = (k // 2,) * 4
        y = b.op("conv2d", y, b.weight(f"{name}_w", (2 * c, y_channels[y], k, k)), padding=pad)
        return b.op("batch_norm", y, *[b.weight(f"{name}_{p}", (2 * c,)) for p in ("g", "b", "m", "v")])

    y_channels = {x: c}
    main = conv_bn(x, "main", 3)
    side = conv_bn(x, "side")
    return b.build([b.op("relu", b.op("add", main, side))])


def residual_block(c: int = 16, hw: int = 8) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, c, hw, hw))
    y = b.op("relu", b.op("conv2d", x, b.weight("w1", (c, c, 3, 3)), padding=(1, 1, 1, 1)))
    y = b.op("conv2d", y, b.weight("w2", (c, c, 3, 3)), padding=(1, 1, 1, 1))
    y = b.op("relu", b.op("add", y, x))
    return b.build([y])


def parallel_convs(c: int = 16, hw: int = 8, merged: bool = False, relu: bool = True) -> Graph:
    """Two 3x3 convs of one input: separate, or merged into one conv whose output is split (TASO)."""
    b = GraphBuilder()
    x = b.input("x", (1, c, hw, hw))
    w1, w2 = b.weight("w1", (c, c, 3, 3)), b.weight("w2", (c, c, 3, 3))
    if merged:
        y = b.op("conv2d", x, b.op("concat", w1, w2, axis=0), padding=(1, 1, 1, 1))
        ys = list(b.op("split", y, axis=1, sizes=(c, c)))
    else:
        ys = [b.op("conv2d", x, w, padding=(1, 1, 1, 1)) for w in (w1, w2)]
    if relu:
        ys = [b.op("relu", y) for y in ys]
    return b.build(ys)


def concat_of_activations(c: int = 8, hw: int = 8) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, c, hw, hw))
    y1 = b.op("conv2d", x, b.weight("w1", (c, c, 1, 1)))
    y2 = b.op("conv2d", x, b.weight("w2", (c, c, 1, 1)))
    z = b.op("concat", y1, y2, axis=1)
    return b.build([b.op("conv2d", z, b.weight("w3", (c, 2 * c, 1, 1)))])


def gemm_with_weight_transpose(n: int = 4, k: int = 32, m: int = 16) -> Graph:
    """x @ transpose(W) + b, as the ONNX importer writes a Gemm: the transpose is folded."""
    b = GraphBuilder()
    x = b.input("x", (n, k))
    wt = b.op("transpose", b.weight("w", (m, k)), perm=(1, 0))
    y = b.op("add", b.op("matmul", x, wt), b.weight("b", (m,)))
    return b.build([y])


def transpose_of_activations(n: int = 16, m: int = 32) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (n, m))
    y = b.op("matmul", x, b.weight("w", (m, m)))
    t = b.op("transpose", y, perm=(1, 0))
    return b.build([b.op("matmul", t, b.weight("w2", (n, n)))])


def head(c: int = 16, hw: int = 4, classes: int = 10) -> Graph:
    """Global average pool, flatten (a view), dense layer."""
    b = GraphBuilder()
    x = b.input("x", (1, c, hw, hw))
    m = b.op("mean", b.op("relu", x), axes=(2, 3), keepdims=True)
    f = b.op("reshape", m, shape=(1, c))
    y = b.op("add", b.op("matmul", f, b.weight("w", (c, classes))), b.weight("b", (classes,)))
    return b.build([y])


def attention(seq: int = 8, d: int = 16) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (seq, d))
    q = b.op("matmul", x, b.weight("wq", (d, d)))
    k = b.op("matmul", x, b.weight("wk", (d, d)))
    v = b.op("matmul", x, b.weight("wv", (d, d)))
    s = b.op("div", b.op("matmul", q, b.op("transpose", k, perm=(1, 0))), b.weight("scale", (1,)))
    p = b.op("softmax", s, axis=-1)
    o = b.op("matmul", p, v)
    y = b.op("layer_norm", b.op("add", o, x), b.weight("g", (d,)), b.weight("beta", (d,)), axes=(-1,))
    return b.build([y])


def inception_like(c: int = 8, hw: int = 8) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (1, c, hw, hw))
    br = [b.op("relu", b.op("conv2d", x, b.weight(f"w{k}", (c, c, 1, 1)))) for k in range(3)]
    pool = b.op("max_pool2d", x, kernel=(3, 3), padding=(1, 1, 1, 1))
    z = b.op("concat", *br, pool, axis=1)
    return b.build([b.op("relu", z)])


def split_slice_chain(n: int = 8, m: int = 32) -> Graph:
    b = GraphBuilder()
    x = b.input("x", (n, m))
    h = b.op("matmul", x, b.weight("w", (m, 2 * m)))
    a, c = b.op("split", h, axis=1, sizes=(m, m))
    y = b.op("mul", b.op("sigmoid", a), b.op("tanh", c))
    s = b.op("strided_slice", y, axes=(1,), begin=(0,), end=(m // 2,))
    return b.build([b.op("squeeze", b.op("expand_dims", s, axes=(0,)), axes=(0,))])


ALL = {
    "conv_bias_relu": conv_bias_relu, "conv_bn_relu_chain": conv_bn_relu_chain, "residual_block": residual_block,
    "bottleneck_with_projection": bottleneck_with_projection,
    "parallel_convs": parallel_convs, "parallel_convs_merged": lambda: parallel_convs(merged=True),
    "concat_of_activations": concat_of_activations, "gemm_with_weight_transpose": gemm_with_weight_transpose,
    "transpose_of_activations": transpose_of_activations, "head": head, "attention": attention,
    "inception_like": inception_like, "split_slice_chain": split_slice_chain,
}
