"""pad (constant): through a transpose, and into a convolution's or an average pool's own padding;
mirror_pad (reflect, edge): through a transpose only.

TF and Keras exports pad explicitly before a 'VALID' conv; NASNet's factorized
reductions pad before a strided slice and a pool. The pad value is opaque to
the theory (a literal is interned like an epsilon): only a zero pad folds.
"""
from __future__ import annotations

from ...generator.pad_rules import GROWN_PADDING as _GROWN, SPATIAL_ONLY as _SPATIAL_ONLY
from .base import N, axiom
from .common import ACTS, CONV, CONV_DOMAINS, POOL_DOMAINS, SYMS, perms

# pad_width is (before, after) per axis: NCHW's H is entries 4, 5 and W is 6, 7
_WIDTHS4 = ((0, 0, 0, 0, 1, 1, 1, 1), (0, 0, 0, 0, 0, 2, 1, 0), (0, 0, 0, 0, 2, 0, 0, 3), (0, 1, 0, 0, 1, 1, 0, 0),
            (0, 0, 1, 0, 0, 1, 0, 1))
_X4 = ("n", "c", "h", "w")

AXIOMS = [
    axiom("conv_pad", "pad",
          N("conv2d", N("pad", "x", pad_width="?pw", value=0.0), "k", **CONV, activation="?a"),
          N("conv2d", "x", "k", **{**CONV, "padding": _GROWN}, activation="?a"),
          guard=_SPATIAL_ONLY, shapes={"x": _X4, "k": ("o", "=?c // ?g", "kh", "kw")},
          dims={"c": (2, 4), "kh": (1, 3), "kw": (1, 2), "h": (2, 3, 5), "w": (2, 4)},
          domains={**CONV_DOMAINS, "pw": _WIDTHS4, "a": ACTS},
          doc="A conv pads with zeros: a zero pad of H and W before it adds to its own padding."),
    axiom("avg_pool_pad", "pad",
          N("avg_pool2d", N("pad", "x", pad_width="?pw", value=0.0), kernel="?k", strides="?s", padding="?p",
            ceil_mode=False, count_include_pad=True),
          N("avg_pool2d", "x", kernel="?k", strides="?s", padding=_GROWN, ceil_mode=False, count_include_pad=True),
          guard=_SPATIAL_ONLY, shapes={"x": _X4}, dims={"h": (3, 5), "w": (3, 4)},
          domains={**{k: v for k, v in POOL_DOMAINS.items() if k != "cm"}, "pw": _WIDTHS4},
          doc="Counting the padding, an average pool reads its own padding as zeros: a zero pad of H and W "
              "before it adds to that padding (floor mode)."),
]
for _r in (2, 3, 4):
    _moved = "=(" + ", ".join(f"?pw[2 * ?p[{i}]], ?pw[2 * ?p[{i}] + 1]" for i in range(_r)) + ",)"
    _widths = tuple(tuple((k + j) % 3 for j in range(2 * _r)) for k in range(3))
    AXIOMS.append(axiom(
        f"transpose{_r}_pad", "pad", N("transpose", N("pad", "x", pad_width="?pw", value="?v"), perm="?p"),
        N("pad", N("transpose", "x", perm="?p"), pad_width=_moved, value="?v"),
        shapes={"x": SYMS[:_r]}, domains={"p": perms(_r), "pw": _widths, "v": (0, 1)},
        doc="A transpose moves each axis' widths with the axis; the value is the same everywhere."))
    AXIOMS.append(axiom(
        f"transpose{_r}_mirror_pad", "pad", N("transpose", N("mirror_pad", "x", pad_width="?pw", mode="?m"), perm="?p"),
        N("mirror_pad", N("transpose", "x", perm="?p"), pad_width=_moved, mode="?m"),
        shapes={"x": SYMS[:_r]}, domains={"p": perms(_r), "pw": _widths, "m": ("reflect", "edge")},
        dims={d: (3, 4) for d in SYMS[:_r]},
        doc="A reflect or edge pad mirrors each axis on its own: a transpose moves the axis' widths with it."))
