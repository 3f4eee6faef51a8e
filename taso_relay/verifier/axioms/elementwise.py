"""Element-wise arithmetic: associativity, commutativity, distributivity.

Point-wise identities hold under broadcasting as well (each output element is
the same polynomial of the broadcast operands on both sides), so these carry
no shape guard.
"""
from __future__ import annotations

from .base import N, axiom

RANKS = {"a": ("d0", "d1"), "b": ("d0", "d1"), "c": ("d0", "d1"), "d": ("d0", "d1")}
DIMS = {"d0": (1, 2, 3), "d1": (1, 2, 3, 4)}


def _ax(name, lhs, rhs, inputs="abc", both_ways=False, doc=""):
    return axiom(name, "elementwise", lhs, rhs, shapes={k: RANKS[k] for k in inputs},
                 dims=DIMS, both_ways=both_ways, doc=doc)


AXIOMS = [
    _ax("add_comm", N("add", "a", "b"), N("add", "b", "a"), "ab"),
    _ax("mul_comm", N("mul", "a", "b"), N("mul", "b", "a"), "ab"),
    _ax("add_assoc", N("add", N("add", "a", "b"), "c"), N("add", "a", N("add", "b", "c")), both_ways=True),
    _ax("mul_assoc", N("mul", N("mul", "a", "b"), "c"), N("mul", "a", N("mul", "b", "c")), both_ways=True),
    _ax("mul_add_distrib", N("mul", "a", N("add", "b", "c")),
        N("add", N("mul", "a", "b"), N("mul", "a", "c")), both_ways=True),
    _ax("mul_sub_distrib", N("mul", "a", N("sub", "b", "c")),
        N("sub", N("mul", "a", "b"), N("mul", "a", "c")), both_ways=True),
    _ax("sub_of_sums", N("sub", N("add", "a", "b"), N("add", "c", "d")),
        N("add", N("sub", "a", "c"), N("sub", "b", "d")), "abcd"),
    _ax("sub_as_add_neg", N("sub", "a", "b"), N("add", "a", N("neg", "b")), "ab", both_ways=True),
    _ax("mul_neg", N("mul", "a", N("neg", "b")), N("neg", N("mul", "a", "b")), "ab", both_ways=True),
    _ax("div_add_distrib", N("div", N("add", "a", "b"), "c"),
        N("add", N("div", "a", "c"), N("div", "b", "c")), both_ways=True,
        doc="True over the reals; numerics.py measures what it costs in floating point."),
    _ax("mul_div_assoc", N("div", N("mul", "a", "b"), "c"), N("mul", "a", N("div", "b", "c")), both_ways=True),
]
