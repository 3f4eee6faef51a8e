"""Float and modular-integer interpreters agree on polynomial operators.

With small integer inputs a polynomial graph computes exact integers in
float64, so reducing that result modulo p must give the modular result: the
fingerprints the generator uses are then fingerprints of the real operators.
"""
from __future__ import annotations

import numpy as np
import pytest

from taso_relay.graph import GraphBuilder, Ref, evaluate
from taso_relay.graph.ops.modular import DEFAULT_PRIME as P


def one_op(op, shapes, **attrs):
    b = GraphBuilder()
    xs = [b.input(f"x{i}", s) for i, s in enumerate(shapes)]
    out = b.op(op, *xs, **attrs)
    return b.build([out] if isinstance(out, Ref) else list(out))


def chain():
    b = GraphBuilder()
    x, w, v = b.input("x", (1, 2, 5, 5)), b.input("w", (4, 2, 1, 1)), b.input("v", (4, 4))
    c = b.op("conv2d", x, b.op("enlarge", w, kernel=(3, 3)), padding=(1, 1, 1, 1))
    t = b.op("reshape", b.op("transpose", c, perm=(0, 2, 3, 1)), shape=(25, 4))
    m = b.op("matmul", t, b.op("add", v, b.constant("identity_matrix", (4, 4))))
    return b.build([b.op("sum", b.op("mul", m, m), axes=(0,))])


POLYNOMIAL = {
    "add": one_op("add", [(2, 3), (3,)]),
    "sub": one_op("sub", [(2, 3), (2, 1)]),
    "mul": one_op("mul", [(2, 3), (2, 3)]),
    "neg": one_op("neg", [(2, 3)]),
    "matmul": one_op("matmul", [(2, 3, 4), (4, 5)]),
    "conv2d": one_op("conv2d", [(1, 4, 6, 6), (6, 2, 3, 3)], groups=2, strides=(2, 1), padding=(1, 0, 2, 1),
                     dilation=(1, 2)),
    "concat": one_op("concat", [(2, 3), (2, 1)], axis=1),
    "split": one_op("split", [(2, 5)], axis=1, sizes=(2, 3)),
    "strided_slice": one_op("strided_slice", [(5, 6)], axes=(0, 1), begin=(1, 5), end=(5, 0), strides=(2, -2)),
    "squeeze_expand": one_op("expand_dims", [(3, 1)], axes=(0,)),
    "broadcast_to": one_op("broadcast_to", [(3, 1)], shape=(2, 3, 4)),
    "sum": one_op("sum", [(2, 3, 4)], axes=(1,), keepdims=True),
    "chain": chain(),
}
DIVIDING = {  # results times a known count are integers
    "mean": (one_op("mean", [(2, 3, 4)], axes=(1, 2)), 12),
    "avg_pool2d": (one_op("avg_pool2d", [(1, 2, 5, 5)], kernel=(2, 2), strides=(1, 1)), 4),
}


def _int_feeds(graph, rng):
    return {n.attr("name"): rng.integers(-3, 4, size=n.attr("shape")) for n in graph.nodes if n.op == "input"}


@pytest.mark.parametrize("case", sorted(POLYNOMIAL))
def test_modular_matches_float_on_polynomials(case, rng):
    graph = POLYNOMIAL[case]
    feeds = _int_feeds(graph, rng)
    exact = evaluate(graph, {k: v.astype(np.float64) for k, v in feeds.items()}, dtype="float64")
    modular = evaluate(graph, feeds, modular=True)
    for f, m in zip(exact, modular):
        assert np.array_equal(np.mod(np.rint(f).astype(np.int64), P), m)


@pytest.mark.parametrize("case", sorted(DIVIDING))
def test_modular_division_is_the_modular_inverse(case, rng):
    graph, count = DIVIDING[case]
    feeds = _int_feeds(graph, rng)
    (exact,) = evaluate(graph, {k: v.astype(np.float64) for k, v in feeds.items()}, dtype="float64")
    (modular,) = evaluate(graph, feeds, modular=True)
    assert np.array_equal(np.mod(np.rint(exact * count).astype(np.int64), P), modular * count % P)


def test_modular_distinguishes_what_float_distinguishes(rng):
    a = one_op("matmul", [(3, 3), (3, 3)])
    b = GraphBuilder()
    x0, x1 = b.input("x0", (3, 3)), b.input("x1", (3, 3))
    swapped = b.build([b.op("matmul", x1, x0)])
    feeds = _int_feeds(a, rng)
    assert not np.array_equal(evaluate(a, feeds, modular=True)[0], evaluate(swapped, feeds, modular=True)[0])
