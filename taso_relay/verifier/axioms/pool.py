"""Pooling: average pooling as a depthwise convolution with the averaging kernel, and
how pooling commutes with relu, concat and slices.
"""
from __future__ import annotations

from .base import N, axiom
from .common import POOL, POOL_DOMAINS, sl

X = ("n", "c", "h", "w")
DIMS = {"h": (1, 2, 3, 4, 5), "w": (1, 2, 3, 4, 5)}
POOL_OPS = ("max_pool2d", "avg_pool2d")

AXIOMS = [
    axiom("avg_pool_as_conv", "pool",
          N("avg_pool2d", "x", kernel="?k", strides="?s", padding="?p", count_include_pad="?cip"),
          N("conv2d", "x", N("constant", kind="avg_kernel", shape="=(dim(x, 1), 1, ?k[0], ?k[1])"),
            strides="?s", padding="?p", groups="=dim(x, 1)"),
          guard=["?cip or ?p == (0, 0, 0, 0)"], shapes={"x": X}, dims=DIMS,
          domains={**{k: v for k, v in POOL_DOMAINS.items() if k != "cm"}, "cip": (True, False)},
          doc="Average pooling (floor mode, padding counted or absent) is a depthwise convolution with "
              "the averaging kernel."),
    axiom("conv_avg_kernel_as_pool", "pool",
          N("conv2d", "x", N("constant", kind="avg_kernel", shape=("?o", 1, "?kh", "?kw")),
            strides="?s", padding="?p", groups="?g"),
          N("avg_pool2d", "x", kernel="=(?kh, ?kw)", strides="?s", padding="?p", count_include_pad=True),
          guard=["?g == ?o", "?o == dim(x, 1)"], shapes={"x": X}, dims=DIMS,
          domains={"o": ("=?c", 1, 2), "g": ("=?c", 1), "kh": (1, 3, 2), "kw": (3, 1, 2),
                   "s": POOL_DOMAINS["s"], "p": POOL_DOMAINS["p"]}),
    axiom("avg_pool_unpadded_count", "pool",
          N("avg_pool2d", "x", kernel="?k", strides="?s", padding=(0, 0, 0, 0), ceil_mode="?cm",
            count_include_pad=False),
          N("avg_pool2d", "x", kernel="?k", strides="?s", padding=(0, 0, 0, 0), ceil_mode="?cm",
            count_include_pad=True),
          shapes={"x": X}, dims=DIMS, domains={k: v for k, v in POOL_DOMAINS.items() if k != "p"},
          both_ways=True, doc="Without padding the two counting conventions agree (floor and ceil mode)."),
    axiom("relu_max_pool", "pool", N("relu", N("max_pool2d", "x", **POOL)), N("max_pool2d", N("relu", "x"), **POOL),
          guard=["?p[0] < ?k[0]", "?p[2] < ?k[0]", "?p[1] < ?k[1]", "?p[3] < ?k[1]"],
          shapes={"x": X}, dims=DIMS, domains=POOL_DOMAINS, both_ways=True,
          doc="max is monotone; a window made of padding alone would give -inf on one side only."),
    axiom("avg_pool_linear", "pool",
          N("avg_pool2d", N("add", "x", "y"), count_include_pad="?cip", **POOL),
          N("add", N("avg_pool2d", "x", count_include_pad="?cip", **POOL),
            N("avg_pool2d", "y", count_include_pad="?cip", **POOL)),
          guard=["shape(x) == shape(y)"], shapes={"x": X, "y": X}, dims=DIMS,
          domains={**POOL_DOMAINS, "cip": (True, False)}, both_ways=True),
]
AXIOMS.append(axiom(
    "avg_pool_conv1x1", "pool",
    N("avg_pool2d", N("conv2d", "x", "w", groups="?g"), count_include_pad="?cip", **POOL),
    N("conv2d", N("avg_pool2d", "x", count_include_pad="?cip", **POOL), "w", groups="?g"),
    guard=["dim(w, 2) == 1", "dim(w, 3) == 1"], shapes={"x": X, "w": ("o", "=?c // ?g", 1, 1)}, dims=DIMS,
    domains={"g": (1, 2), **POOL_DOMAINS, "cip": (True, False)}, both_ways=True,
    doc="Average pooling acts on positions alike in every channel, a 1x1 convolution on channels "
        "alike at every position: they commute."))
for _op in POOL_OPS:
    _extra = {"count_include_pad": "?cip"} if _op == "avg_pool2d" else {}
    _dom = {**POOL_DOMAINS, "cip": (True, False)} if _extra else POOL_DOMAINS
    AXIOMS.append(axiom(
        f"{_op}_concat", "pool",
        N(_op, N("concat", "a", "b", axis="?ax"), **POOL, **_extra),
        N("concat", N(_op, "a", **POOL, **_extra), N(_op, "b", **POOL, **_extra), axis="?ax"),
        guard=["?ax <= 1"], shapes={"a": X, "b": ("n", "c2", "h", "w")}, dims=DIMS,
        domains={**_dom, "ax": (1, 0, 2)},
        doc="One way only: pooling can map different sizes to one, so the right side may type-check alone."))
    AXIOMS.append(axiom(
        f"slice_{_op}", "pool", sl(N(_op, "x", **POOL, **_extra)), N(_op, sl("x"), **POOL, **_extra),
        guard=["?ax <= 1"], shapes={"x": X}, dims=DIMS,
        domains={**_dom, "ax": (1, 0, 2), "b": (0, 1), "e": (1, 2, 3)}, both_ways=True))
