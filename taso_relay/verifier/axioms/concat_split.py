"""concat and split, and how each operator commutes with them.

A split output is a single-axis slice (encode.py), so these are slice axioms.
Slices follow Python's slicing (negative wrap, clamping), as strided_slice
does; the guards keep the bounds in range where an axiom needs that.
Concatenation on two different axes only interchanges when the first
operands agree in size on the inner axis (``concat_interchange``); the
unguarded form is wrong.
"""
from __future__ import annotations

from .base import N, axiom
from .common import ACTS, CONV, CONV1, CONV1_DOMAINS, CONV_DOMAINS, SLICE_DOMAINS, UNARY_ACTS, W4, W4_1, X4, ident, sl

X3 = ("d0", "d1", "d2")
IN_RANGE = ["0 <= ?b", "?b <= ?e"]

AXIOMS = [
    axiom("slice_full", "concat_split", sl("x", begin=0), ident("x"),
          guard=["?e == dim(x, ?ax)"], shapes={"x": X3},
          domains={"ax": (0, 1, 2), "e": (1, 2, 3, 4)}),
    axiom("slice_concat_left", "concat_split", sl(N("concat", "p", "q", axis="?ax")), sl("p"),
          guard=IN_RANGE + ["?e <= dim(p, ?ax)"],
          shapes={"p": X3, "q": ("d0", "d1", "d2q")}, domains={**SLICE_DOMAINS, "ax": (2, 0, 1)}),
    axiom("slice_concat_right", "concat_split", sl(N("concat", "p", "q", axis="?ax")),
          sl("q", begin="=?b - dim(p, ?ax)", end="=?e - dim(p, ?ax)"),
          guard=["dim(p, ?ax) <= ?b", "?b <= ?e"],
          shapes={"p": X3, "q": ("d0", "d1", "d2q")}, domains={**SLICE_DOMAINS, "ax": (2, 0, 1),
                                                              "b": (1, 2, 3, 4), "e": (2, 3, 4, 5, 6)}),
    axiom("concat_adjacent_slices", "concat_split",
          N("concat", sl("x", end="?m"), sl("x", begin="?m"), axis="?ax"), sl("x"),
          guard=["0 <= ?b", "?b <= ?m", "?m <= ?e", "?e <= dim(x, ?ax)"],
          shapes={"x": X3}, domains={**SLICE_DOMAINS, "m": (1, 2, 3)}),
    axiom("slice_slice", "concat_split", sl(sl("x", begin="?b1", end="?e1"), begin="?b2", end="?e2"),
          sl("x", begin="=?b1 + ?b2", end="=?b1 + ?e2"),
          guard=["0 <= ?b1", "?b1 <= ?e1", "?e1 <= dim(x, ?ax)", "0 <= ?b2", "?b2 <= ?e2",
                 "?e2 <= ?e1 - ?b1"],
          shapes={"x": X3}, domains={"ax": (0, 1, 2), "b1": (0, 1), "e1": (2, 3, 4), "b2": (0, 1), "e2": (1, 2)}),
    axiom("concat_assoc", "concat_split",
          N("concat", N("concat", "a", "b", axis="?ax"), "c", axis="?ax"),
          N("concat", "a", N("concat", "b", "c", axis="?ax"), axis="?ax"),
          shapes={"a": X3, "b": X3, "c": X3}, dims={"d0": (1, 2), "d1": (1, 2), "d2": (1, 2)},
          domains={"ax": (0, 1, 2)}, both_ways=True),
    axiom("concat_interchange", "concat_split",
          N("concat", N("concat", "a", "b", axis="?ax0"), N("concat", "c", "d", axis="?ax0"), axis="?ax1"),
          N("concat", N("concat", "a", "c", axis="?ax1"), N("concat", "b", "d", axis="?ax1"), axis="?ax0"),
          guard=["?ax0 != ?ax1", "dim(a, ?ax0) == dim(c, ?ax0)"],
          shapes={"a": ("i", "j"), "b": ("i", "j2"), "c": ("i2", "j"), "d": ("i2", "j2")},
          domains={"ax0": (1, 0), "ax1": (0, 1)}, both_ways=False,
          doc="Needs the first operands to agree on the inner concat axis: the unguarded form is wrong."),
    axiom("slice_concat_other_axis", "concat_split",
          sl(N("concat", "p", "q", axis="?ax0"), axis="?ax1"),
          N("concat", sl("p", axis="?ax1"), sl("q", axis="?ax1"), axis="?ax0"),
          guard=["?ax0 != ?ax1"], shapes={"p": X3, "q": ("d0", "d1", "d2q")},
          domains={"ax0": (2, 1, 0), "ax1": (0, 1, 2), "b": (0, 1), "e": (1, 2, 3)}, both_ways=False),
    axiom("slice_conv_out_channels", "concat_split",
          sl(N("conv2d", "x", "w", activation="?a", **CONV1), axis=1),
          N("conv2d", "x", sl("w", axis=0), activation="?a", **CONV1),
          shapes={"x": X4, "w": W4_1}, domains={**CONV1_DOMAINS, "a": ACTS, "b": (0, 1), "e": (1, 2, 3)},
          both_ways=True, doc="Only for groups=1."),
    axiom("slice_conv_batch", "concat_split",
          sl(N("conv2d", "x", "w", activation="?a", **CONV), axis=0),
          N("conv2d", sl("x", axis=0), "w", activation="?a", **CONV),
          shapes={"x": X4, "w": W4}, domains={**CONV_DOMAINS, "a": ACTS, "b": (0, 1), "e": (1, 2, 3)},
          both_ways=True),
    axiom("slice_matmul_right", "concat_split",
          sl(N("matmul", "a", "m", activation="?act")), N("matmul", "a", sl("m"), activation="?act"),
          guard=["rank(a) == rank(m)", "rank(m) >= 2", "?ax == rank(m) - 1"],
          shapes={"a": ("i", "k"), "m": ("k", "j")},
          domains={"ax": (1, 0), "b": (0, 1), "e": (1, 2, 3), "act": ACTS}, both_ways=True),
    axiom("slice_matmul_left", "concat_split",
          sl(N("matmul", "a", "m", activation="?act")), N("matmul", sl("a"), "m", activation="?act"),
          guard=["rank(a) == rank(m)", "rank(m) >= 2", "?ax == rank(a) - 2"],
          shapes={"a": ("i", "k"), "m": ("k", "j")},
          domains={"ax": (0, 1), "b": (0, 1), "e": (1, 2, 3), "act": ACTS}, both_ways=True),
]

for _u in UNARY_ACTS:
    AXIOMS.append(axiom(f"slice_{_u}", "concat_split", sl(N(_u, "x")), N(_u, sl("x")),
                        shapes={"x": X3}, domains=SLICE_DOMAINS, both_ways=True))
    AXIOMS.append(axiom(f"concat_{_u}", "concat_split",
                        N("concat", N(_u, "a"), N(_u, "b"), axis="?ax"), N(_u, N("concat", "a", "b", axis="?ax")),
                        shapes={"a": X3, "b": ("d0", "d1", "d2b")}, domains={"ax": (2, 0, 1)}, both_ways=True))

for _b in ("add", "sub", "mul"):
    AXIOMS.append(axiom(
        f"concat_{_b}", "concat_split",
        N("concat", N(_b, "a", "b"), N(_b, "c", "d"), axis="?ax"),
        N(_b, N("concat", "a", "c", axis="?ax"), N("concat", "b", "d", axis="?ax")),
        guard=["shape(a) == shape(b)", "shape(c) == shape(d)"],
        shapes={"a": X3, "b": X3, "c": ("d0", "d1", "d2c"), "d": ("d0", "d1", "d2c")},
        dims={"d0": (1, 2), "d1": (1, 2, 3), "d2": (1, 2), "d2c": (1, 2, 3)},
        domains={"ax": (2, 0, 1)}, both_ways=True,
        doc="Needs equal shapes: with broadcasting along the axis the two sides differ."))
    for _r in (2, 3, 4):  # broadcasting off the axis is fine, written per rank
        _off = [f"?ax == {i} or dim({p}, {i}) == dim({q}, {i})" for i in range(_r) for p, q in (("a", "c"), ("b", "d"))]
        AXIOMS.append(axiom(
            f"concat_{_b}_rank{_r}", "concat_split",
            N("concat", N(_b, "a", "b"), N(_b, "c", "d"), axis="?ax"),
            N(_b, N("concat", "a", "c", axis="?ax"), N("concat", "b", "d", axis="?ax")),
            guard=[f"rank({t}) == {_r}" for t in "abcd"] + ["dim(a, ?ax) == dim(b, ?ax)", "dim(c, ?ax) == dim(d, ?ax)"]
            + _off,
            shapes={"a": X4[:_r], "b": X4[:_r], "c": X4[:_r - 1] + ("e",), "d": X4[:_r - 1] + ("e",)},
            dims={"n": (1, 2), "c": (1, 2, 3), "h": (1, 2), "w": (1, 2), "e": (1, 2, 3)},
            domains={"ax": tuple(range(_r))[::-1]}, both_ways=True))
    AXIOMS.append(axiom(
        f"slice_{_b}", "concat_split", sl(N(_b, "x", "y")), N(_b, sl("x"), sl("y")),
        guard=["rank(x) == rank(y)", "dim(x, ?ax) == dim(y, ?ax)"], shapes={"x": X3, "y": X3},
        domains=SLICE_DOMAINS, both_ways=True))
    AXIOMS.append(axiom(
        f"slice_{_b}_bias", "concat_split", sl(N(_b, "x", "y")), N(_b, sl("x"), sl("y", axis=0)),
        guard=["rank(y) == 1", "?ax == rank(x) - 1", "dim(y, 0) == dim(x, ?ax)"],
        shapes={"x": X3, "y": ("d2",)}, domains={**SLICE_DOMAINS, "ax": (2,)}, both_ways=True,
        doc="A 1-D operand (a bias) broadcasts along the last axis: slicing that axis slices the bias."))
