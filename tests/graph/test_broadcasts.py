"""Broadcasts an element-wise operator makes anyway, dropped (graph/broadcasts.py)."""
from __future__ import annotations

import numpy as np

from taso_relay.graph import GraphBuilder
from taso_relay.graph.broadcasts import drop_implied_broadcasts
from taso_relay.graph.interpreter import evaluate


def test_a_gates_expand_as_before_its_multiply_is_dropped_and_a_widening_one_is_kept():
    """x * g.expand_as(x) is x * g; an expansion that makes the result larger than the other operand is not
    implied by it, and one read elsewhere stays for that reader."""
    b = GraphBuilder()
    x = b.input("x", (1, 4, 3, 3))
    gate = b.input("g", (1, 4, 1, 1))
    wide = b.op("broadcast_to", gate, shape=(2, 4, 3, 3))
    outs = [b.op("mul", x, b.op("broadcast_to", gate, shape=(1, 4, 3, 3))), b.op("sub", wide, x),
            b.op("add", b.op("broadcast_to", gate, shape=(1, 4, 3, 3)), b.op("broadcast_to", x, shape=(1, 4, 3, 3)))]
    g = b.build(outs)
    out, found = drop_implied_broadcasts(g)
    assert found == 2
    assert out.op_counts()["broadcast_to"] == 1  # the widening one
    assert [out.nodes[r.node].op for r in out.nodes[out.outputs[2].node].inputs] == ["input", "input"]
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 4, 3, 3)).astype(np.float32),
             "g": rng.standard_normal((1, 4, 1, 1)).astype(np.float32)}
    for want, got in zip(evaluate(g, feeds), evaluate(out, feeds)):
        np.testing.assert_array_equal(got, want)
    assert drop_implied_broadcasts(out) == (out, 0)
