"""Attribute templates and sampling domains shared by the axiom families."""
from __future__ import annotations

import itertools

from .base import N

ACTS = ("none", "relu", "sigmoid", "tanh")
UNARY_ACTS = ("relu", "sigmoid", "tanh")

# conv2d with every parameter a variable (activation given separately)
CONV = {"strides": "?s", "padding": "?p", "dilation": "?d", "groups": "?g"}
CONV_DOMAINS = {
    "s": ((1, 1), (2, 2), (1, 2)),
    "p": ((0, 0, 0, 0), (1, 1, 1, 1), (0, 1, 1, 0), (2, 1, 0, 1)),
    "d": ((1, 1), (2, 1)),
    "g": (1, 2),
}
CONV1 = {"strides": "?s", "padding": "?p", "dilation": "?d", "groups": 1}
CONV1_DOMAINS = {k: v for k, v in CONV_DOMAINS.items() if k != "g"}
# conv2d_transpose with one group (its kernels (C_in, C_out, kh, kw)); output_padding below the stride
CONV_T1 = {"strides": "?s", "padding": "?p", "output_padding": "?op", "dilation": "?d", "groups": 1}
CONV_T1_DOMAINS = {**CONV1_DOMAINS, "op": ((0, 0), (1, 0), (1, 1))}
X4 = ("n", "c", "h", "w")
W4 = ("o", "=?c // ?g", "kh", "kw")
W4_1 = ("o", "c", "kh", "kw")
SYMS = ("d0", "d1", "d2", "d3")  # symbolic dims of a tensor of rank up to 4


def perms(r):
    """Every permutation of rank r, the identity last (the sampled instances try a real move first)."""
    ps = list(itertools.permutations(range(r)))
    return tuple(ps[1:] + ps[:1])

POOL = {"kernel": "?k", "strides": "?s", "padding": "?p", "ceil_mode": "?cm"}
POOL_DOMAINS = {
    "k": ((1, 1), (3, 3), (2, 2), (1, 3)),
    "s": ((1, 1), (2, 2), (1, 2)),
    "p": ((0, 0, 0, 0), (1, 1, 1, 1), (0, 1, 0, 1)),
    "cm": (False, True),
}


def ident(x):
    """The identity as a pattern term: a one-input concat (Z3 encodes it as x itself)."""
    return N("concat", x, axis=0)


def sl(x, axis="?ax", begin="?b", end="?e"):
    """A single-axis slice: what one output of a split is."""
    return N("strided_slice", x, axes=(axis,), begin=(begin,), end=(end,), strides=(1,))


AXIS_DOMAIN = (0, 1, 2)
SLICE_DOMAINS = {"ax": AXIS_DOMAIN, "b": (0, 1, 2, 3), "e": (1, 2, 3, 4)}
