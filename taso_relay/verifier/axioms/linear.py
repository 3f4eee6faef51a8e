"""conv2d and matmul: linearity in each argument, associativity, and how they meet concat.

Grouped convolution needs care: merging two grouped convolutions into one is
only right when both have the same channels per group, in and out
(``conv_grouped_merge``); TASO's first, more general form was wrong.
"""
from __future__ import annotations

from .base import N, axiom
from .common import ACTS, CONV, CONV1, CONV1_DOMAINS, CONV_DOMAINS, W4, W4_1, X4

_X2 = ("n", "c", "h", "w")
MM = {"a": ("m", "k"), "b": ("k", "n")}

AXIOMS = [
    axiom("conv_linear_data", "linear",
          N("conv2d", N("add", "x1", "x2"), "w", **CONV),
          N("add", N("conv2d", "x1", "w", **CONV), N("conv2d", "x2", "w", **CONV)),
          guard=["shape(x1) == shape(x2)"], shapes={"x1": X4, "x2": X4, "w": W4},
          domains=CONV_DOMAINS, both_ways=True),
    axiom("conv_linear_weight", "linear",
          N("conv2d", "x", N("add", "w1", "w2"), **CONV),
          N("add", N("conv2d", "x", "w1", **CONV), N("conv2d", "x", "w2", **CONV)),
          guard=["shape(w1) == shape(w2)"], shapes={"x": X4, "w1": W4, "w2": W4},
          domains=CONV_DOMAINS, both_ways=True),
    axiom("conv_linear_weight_sub", "linear",
          N("conv2d", "x", N("sub", "w1", "w2"), **CONV),
          N("sub", N("conv2d", "x", "w1", **CONV), N("conv2d", "x", "w2", **CONV)),
          guard=["shape(w1) == shape(w2)"], shapes={"x": X4, "w1": W4, "w2": W4},
          domains=CONV_DOMAINS, both_ways=True),
    axiom("conv_concat_weight", "linear",
          N("conv2d", "x", N("concat", "w1", "w2", axis=0), activation="?a", **CONV1),
          N("concat", N("conv2d", "x", "w1", activation="?a", **CONV1),
            N("conv2d", "x", "w2", activation="?a", **CONV1), axis=1),
          shapes={"x": X4, "w1": W4_1, "w2": ("o2", "c", "kh", "kw")},
          domains={**CONV1_DOMAINS, "a": ACTS}, both_ways=False,
          doc="Only for groups=1: with groups, concatenating kernels regroups the channels."),
    axiom("conv_concat_data_weight", "linear",
          N("conv2d", N("concat", "x1", "x2", axis=1), N("concat", "w1", "w2", axis=1), **CONV1),
          N("add", N("conv2d", "x1", "w1", **CONV1), N("conv2d", "x2", "w2", **CONV1)),
          guard=["dim(x1, 1) == dim(w1, 1)"],
          shapes={"x1": X4, "x2": ("n", "c2", "h", "w"), "w1": W4_1, "w2": ("o", "c2", "kh", "kw")},
          domains=CONV1_DOMAINS, both_ways=False),
    axiom("conv_concat_batch", "linear",
          N("conv2d", N("concat", "x1", "x2", axis=0), "w", activation="?a", **CONV),
          N("concat", N("conv2d", "x1", "w", activation="?a", **CONV),
            N("conv2d", "x2", "w", activation="?a", **CONV), axis=0),
          shapes={"x1": X4, "x2": ("n2", "c", "h", "w"), "w": W4},
          domains={**CONV_DOMAINS, "a": ACTS}, both_ways=False),
    axiom("conv_grouped_merge", "linear",
          N("concat",
            N("conv2d", "x1", "w1", strides="?s", padding="?p", dilation="?d", groups="?g1", activation="?a"),
            N("conv2d", "x2", "w2", strides="?s", padding="?p", dilation="?d", groups="?g2", activation="?a"),
            axis=1),
          N("conv2d", N("concat", "x1", "x2", axis=1), N("concat", "w1", "w2", axis=0),
            strides="?s", padding="?p", dilation="?d", groups="=?g1 + ?g2", activation="?a"),
          guard=["dim(w1, 0) * ?g2 == dim(w2, 0) * ?g1"]
          + [f"dim(w1, {i}) == dim(w2, {i})" for i in (1, 2, 3)]
          + [f"dim(x1, {i}) == dim(x2, {i})" for i in (0, 2, 3)],
          shapes={"x1": ("n", "=?i * ?g1", "h", "w"), "x2": ("n", "=?i * ?g2", "h", "w"),
                  "w1": ("=?j * ?g1", "i", "kh", "kw"), "w2": ("=?j * ?g2", "i", "kh", "kw")},
          dims={"i": (1, 2), "j": (1, 2, 3)},
          domains={**CONV1_DOMAINS, "g1": (1, 2), "g2": (1, 2, 3), "a": ACTS},
          doc="Merging grouped convolutions: right only when both have the same in- and "
              "out-channels per group; the merged groups are then g1 + g2. (One way only: "
              "the other direction needs the groups split by division.)"),
    axiom("matmul_assoc", "linear", N("matmul", N("matmul", "a", "b"), "c"),
          N("matmul", "a", N("matmul", "b", "c")),
          guard=["rank(a) >= 2", "rank(b) >= 2", "rank(c) >= 2"],
          shapes={"a": ("m", "k"), "b": ("k", "n"), "c": ("n", "p")}, both_ways=True,
          doc="Not with vectors: numpy's 1-D matmul operands break associativity."),
    axiom("matmul_linear_left", "linear", N("matmul", N("add", "a1", "a2"), "b"),
          N("add", N("matmul", "a1", "b"), N("matmul", "a2", "b")),
          guard=["rank(a1) == 2", "rank(a2) == 2", "rank(b) == 2", "dim(a1, 1) == dim(b, 0)",
                 "dim(a2, 1) == dim(b, 0)"],
          shapes={"a1": ("m", "k"), "a2": ("m", "k"), "b": ("k", "n")},
          both_ways=True),
    axiom("matmul_linear_right", "linear", N("matmul", "a", N("add", "b1", "b2")),
          N("add", N("matmul", "a", "b1"), N("matmul", "a", "b2")),
          guard=["rank(b1) == 2", "rank(b2) == 2", "rank(a) == 2", "dim(b1, 0) == dim(a, 1)",
                 "dim(b2, 0) == dim(a, 1)"],
          shapes={"a": ("m", "k"), "b1": ("k", "n"), "b2": ("k", "n")},
          both_ways=True),
    axiom("matmul_concat_right", "linear",
          N("matmul", "a", N("concat", "b1", "b2", axis="?ax"), activation="?act"),
          N("concat", N("matmul", "a", "b1", activation="?act"), N("matmul", "a", "b2", activation="?act"),
            axis="?ax"),
          guard=["rank(a) == rank(b1)", "rank(a) >= 2", "?ax == rank(b1) - 1"],
          shapes={"a": ("m", "k"), "b1": ("k", "n"), "b2": ("k", "n2")},
          domains={"ax": (1, 0), "act": ACTS}, both_ways=True),
    axiom("matmul_concat_left", "linear",
          N("matmul", N("concat", "a1", "a2", axis="?ax"), "b", activation="?act"),
          N("concat", N("matmul", "a1", "b", activation="?act"), N("matmul", "a2", "b", activation="?act"),
            axis="?ax"),
          guard=["rank(a1) == rank(b)", "rank(b) >= 2", "?ax == rank(a1) - 2"],
          shapes={"a1": ("m", "k"), "a2": ("m2", "k"), "b": ("k", "n")},
          domains={"ax": (0, 1), "act": ACTS}, both_ways=True),
    axiom("matmul_concat_inner", "linear",
          N("matmul", N("concat", "a1", "a2", axis=1), N("concat", "b1", "b2", axis=0)),
          N("add", N("matmul", "a1", "b1"), N("matmul", "a2", "b2")),
          guard=["rank(a1) == 2", "rank(b1) == 2", "dim(a1, 1) == dim(b1, 0)"],
          shapes={"a1": ("m", "k"), "a2": ("m", "k2"), "b1": ("k", "n"), "b2": ("k2", "n")}, both_ways=False),
]

# A factor per output column after a matmul (a batch norm's scale, a layer scale) scales the weight's columns.
for _r, _x in ((2, ("m", "k")), (3, ("b", "m", "k"))):
    AXIOMS.append(axiom(
        f"matmul_scale_columns{_r}", "linear",
        N("mul", N("matmul", "x", "w"), "f"),
        N("matmul", "x", N("mul", "w", "f")),
        guard=[f"rank(x) == {_r}", "rank(w) == 2", "shape(f) == (1, dim(w, 1))"],
        shapes={"x": _x, "w": ("k", "n"), "f": (1, "n")},
        doc="Output column j is x times column j of w: a factor per column goes into the weight."))
    AXIOMS.append(axiom(
        f"matmul_affine_rows{_r}", "linear",
        N("matmul", N("add", N("mul", "x", "f"), "t"), "w"),
        N("add", N("matmul", "x", N("mul", "w", N("transpose", "f", perm=(1, 0)))), N("matmul", "t", "w")),
        guard=[f"rank(x) == {_r}", "rank(w) == 2", f"dim(x, {_r - 1}) == dim(w, 0)", "shape(f) == (1, dim(w, 0))",
               "shape(t) == (1, dim(w, 0))"],
        shapes={"x": _x, "w": ("k", "n"), "f": (1, "k"), "t": (1, "k")},
        doc="x * f + t with (1, K) rows over x's last axis, then w: f scales row k of w, and t comes out as the "
            "(1, N) row t @ w added to every output row. One axiom: the two steps chained timed out in Z3."))

# A depthwise convolution of a 1x1 image to a 1x1 image scales each channel by one kernel tap,
# so an element-wise factor of the image's shape comes out of it.
AXIOMS.append(axiom(
    "conv_depthwise_1x1_mul", "linear",
    N("conv2d", N("mul", "x", "y"), "w", **CONV),
    N("mul", "y", N("conv2d", "x", "w", **CONV)),
    guard=["shape(x) == shape(y)", "dim(x, 2) == 1", "dim(x, 3) == 1", "?g == dim(x, 1)",
           "dim(w, 0) == dim(x, 1)",
           "(?p[0] + ?p[2] - ?d[0] * (dim(w, 2) - 1)) // ?s[0] + 1 == 1",
           "(?p[1] + ?p[3] - ?d[1] * (dim(w, 3) - 1)) // ?s[1] + 1 == 1"],
    shapes={"x": ("n", "c", 1, 1), "y": ("n", "c", 1, 1), "w": ("c", 1, "kh", "kw")},
    dims={"c": (1, 2, 3), "kh": (1, 3), "kw": (1, 3)},
    domains={"s": ((1, 1), (2, 2), (1, 2)),
             "p": ("=((?kh - 1) // 2, (?kw - 1) // 2, (?kh - 1) // 2, (?kw - 1) // 2)",) * 4
             + ((1, 1, 1, 1), (0, 0, 0, 0), (0, 1, 0, 1), (2, 1, 0, 1), (1, 0, 1, 0)),
             "d": ((1, 1), (1, 1), (2, 1)), "g": ("=?c", "=?c", "=?c", 1, 2)},
    both_ways=True,
    doc="Output = x times one tap of w per channel (or zero), which y multiplies on either side."))

# A convolution whose kernel has size 1 along a spatial axis, with no padding and stride 1
# there, acts on each row (column) alone: it commutes with concat and slices along that axis.
for _ax, (_k, _lo, _hi, _st) in ((2, (2, 0, 2, 0)), (3, (3, 1, 3, 1))):
    _g = [f"dim(w, {_k}) == 1", f"?p[{_lo}] == 0", f"?p[{_hi}] == 0", f"?st[{_st}] == 1"]
    _conv = {"strides": "?st", "padding": "?p", "dilation": "?d", "groups": "?g", "activation": "?a"}
    _w = ("o", "=?c // ?g", 1, "kw") if _ax == 2 else ("o", "=?c // ?g", "kh", 1)
    _dom = {"st": ((1, 1), (2, 1), (1, 2)), "p": ((0, 0, 0, 0), (0, 1, 0, 1), (1, 0, 1, 0)),
            "d": ((1, 1), (2, 2)), "g": (1, 2), "a": ACTS}
    AXIOMS.append(axiom(
        f"conv_concat_spatial{_ax}", "linear",
        N("conv2d", N("concat", "x1", "x2", axis=_ax), "w", **_conv),
        N("concat", N("conv2d", "x1", "w", **_conv), N("conv2d", "x2", "w", **_conv), axis=_ax),
        guard=_g, shapes={"x1": X4, "x2": ("n", "c", "h2", "w") if _ax == 2 else ("n", "c", "h", "w2"), "w": _w},
        domains=_dom,
        doc="Kernel size 1, no padding and stride 1 along the concat axis."))
    AXIOMS.append(axiom(
        f"slice_conv_spatial{_ax}", "linear",
        N("strided_slice", N("conv2d", "x", "w", **_conv), axes=(_ax,), begin=("?b",), end=("?e",), strides=(1,)),
        N("conv2d", N("strided_slice", "x", axes=(_ax,), begin=("?b",), end=("?e",), strides=(1,)), "w", **_conv),
        guard=_g + ["0 <= ?b", "?b < ?e", f"?e <= dim(x, {_ax})"], shapes={"x": X4, "w": _w},
        dims={"h": (2, 3, 4), "w": (3, 4)},
        domains={**_dom, "b": (0, 1), "e": (1, 2, 3)}, both_ways=True))
