"""The constant tensors: identity conv kernel, identity matrix, all-ones."""
from __future__ import annotations

from .base import N, axiom
from .common import ident

# where a conv with an identity kernel (shape (?o, ?i, ?kh, ?kw)) gives back its input x: as many outputs as
# inputs, an odd kernel, "same" padding for its dilation, and an output as large as x
IDENTITY_CONV_GUARD = [
    "(dim(x, 2) - 1) // ?st[0] + 1 == dim(x, 2)", "(dim(x, 3) - 1) // ?st[1] + 1 == dim(x, 3)",
    "?o == dim(x, 1)", "?i * ?g == ?o", "?kh % 2 == 1", "?kw % 2 == 1",
    "2 * ?p[0] == ?d[0] * (?kh - 1)", "2 * ?p[2] == ?d[0] * (?kh - 1)",
    "2 * ?p[1] == ?d[1] * (?kw - 1)", "2 * ?p[3] == ?d[1] * (?kw - 1)"]
IDENTITY_CONV_ATTRS = {"strides": "?st", "padding": "?p", "dilation": "?d", "groups": "?g"}
IDENTITY_CONV_DOMAINS = {
    "st": ((1, 1), (1, 1), (2, 2), (1, 2)), "g": (1, 2, 4), "o": ("=?c", "=?c", 2, 4),
    "i": ("=?c // ?g", "=?c // ?g", "=?c"), "kh": (1, 3), "kw": (3, 1), "d": ((1, 1), (2, 1)),
    "p": ("=((?kh - 1) // 2 * ?d[0], (?kw - 1) // 2 * ?d[1], (?kh - 1) // 2 * ?d[0], "
          "(?kw - 1) // 2 * ?d[1])",) * 3 + ((1, 1, 1, 1), (0, 1, 0, 1), (0, 0, 0, 0))}


def identity_kernel():
    return N("constant", kind="identity_conv", shape=("?o", "?i", "?kh", "?kw"))


AXIOMS = [
    axiom("conv_identity_kernel", "constants",
          N("conv2d", "x", identity_kernel(), **IDENTITY_CONV_ATTRS),
          ident("x"),
          guard=IDENTITY_CONV_GUARD, shapes={"x": ("n", "c", "h", "w")}, dims={"c": (1, 2, 4)},
          domains=IDENTITY_CONV_DOMAINS,
          doc="Kernel with a single 1 at the centre tap of in-channel o % I: the identity, for any groups."),
    axiom("matmul_identity_right", "constants",
          N("matmul", "x", N("constant", kind="identity_matrix", shape=("?n", "?n"))), ident("x"),
          guard=["rank(x) >= 2", "?n == dim(x, rank(x) - 1)"], shapes={"x": ("m", "k")},
          domains={"n": ("=?k", 1, 2, 3)}),
    axiom("matmul_identity_left", "constants",
          N("matmul", N("constant", kind="identity_matrix", shape=("?n", "?n")), "x"), ident("x"),
          guard=["rank(x) >= 2", "?n == dim(x, rank(x) - 2)"], shapes={"x": ("m", "k")},
          domains={"n": ("=?m", 1, 2, 3)}),
]
for _r in (1, 2, 3, 4):
    _shape = tuple(f"d{i}" for i in range(_r))
    _var = tuple(f"?s{i}" for i in range(_r))
    _dom = {f"s{i}": (f"=?d{i}",) * 6 + (1, 2) for i in range(_r)}
    AXIOMS.append(axiom(f"mul_ones{_r}", "constants", N("mul", "x", N("constant", kind="ones", shape=_var)),
                        ident("x"), guard=["shape(x) == (" + ", ".join(_var) + ",)"],
                        shapes={"x": _shape}, domains=_dom))
