"""Multiplication by a scalar (a rank-0 tensor): it commutes with every linear or
layout operator. The guard rank(s) == 0 matters: with a broadcast vector the
two sides of most of these differ."""
from __future__ import annotations

from .base import N, axiom
from .common import CONV, CONV_DOMAINS, POOL, POOL_DOMAINS, SLICE_DOMAINS, SYMS, W4, X4, perms, sl

S = ["rank(s) == 0"]
X3 = ("d0", "d1", "d2")


def _sm(x):
    return N("mul", x, "s")


AXIOMS = [
    axiom("conv_smul_data", "scalar", N("conv2d", _sm("x"), "w", **CONV), _sm(N("conv2d", "x", "w", **CONV)),
          guard=S, shapes={"x": X4, "w": W4, "s": ()}, domains=CONV_DOMAINS, both_ways=True),
    axiom("conv_smul_weight", "scalar", N("conv2d", "x", _sm("w"), **CONV), _sm(N("conv2d", "x", "w", **CONV)),
          guard=S, shapes={"x": X4, "w": W4, "s": ()}, domains=CONV_DOMAINS, both_ways=True),
    axiom("matmul_smul_left", "scalar", N("matmul", _sm("a"), "b"), _sm(N("matmul", "a", "b")),
          guard=S, shapes={"a": ("m", "k"), "b": ("k", "n"), "s": ()}, both_ways=True),
    axiom("matmul_smul_right", "scalar", N("matmul", "a", _sm("b")), _sm(N("matmul", "a", "b")),
          guard=S, shapes={"a": ("m", "k"), "b": ("k", "n"), "s": ()}, both_ways=True),
    axiom("concat_smul", "scalar", N("concat", _sm("a"), _sm("b"), axis="?ax"),
          _sm(N("concat", "a", "b", axis="?ax")), guard=S,
          shapes={"a": X3, "b": ("d0", "d1", "d2b"), "s": ()}, domains={"ax": (2, 0, 1)}, both_ways=True),
    axiom("slice_smul", "scalar", sl(_sm("x")), _sm(sl("x")), guard=S, shapes={"x": X3, "s": ()},
          domains=SLICE_DOMAINS, both_ways=True),
    axiom("enlarge_smul", "scalar", N("enlarge", _sm("w"), kernel="?K"), _sm(N("enlarge", "w", kernel="?K")),
          guard=S, shapes={"w": ("o", "i", "kh", "kw"), "s": ()}, domains={"K": ((3, 3), (5, 5), (3, 1))},
          both_ways=True),
    axiom("avg_pool_smul", "scalar", N("avg_pool2d", _sm("x"), count_include_pad="?cip", **POOL),
          _sm(N("avg_pool2d", "x", count_include_pad="?cip", **POOL)), guard=S,
          shapes={"x": ("n", "c", "h", "w"), "s": ()}, dims={"h": (1, 2, 3, 4, 5), "w": (1, 2, 3, 4, 5)},
          domains={**POOL_DOMAINS, "cip": (True, False)}, both_ways=True),
]

for _r in (2, 3, 4):
    AXIOMS.append(axiom(f"transpose{_r}_smul", "scalar", N("transpose", _sm("x"), perm="?p"),
                        _sm(N("transpose", "x", perm="?p")), guard=S, shapes={"x": SYMS[:_r], "s": ()},
                        domains={"p": perms(_r)}, both_ways=True))
