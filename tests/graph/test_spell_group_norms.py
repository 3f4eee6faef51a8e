"""spell_group_norms: the group norm PyTorch's exporters write (reshape, instance norm as TVM imports it, reshape
back) becomes one exported_group_norm node computing the same, and only where it is exactly that spelling."""
from __future__ import annotations

import numpy as np
import pytest

from taso_relay.graph import GraphBuilder, evaluate
from taso_relay.graph.spell_group_norms import spell_group_norms

SHAPE, GROUPS = (2, 6, 3, 4), 3


def exported_group_norm(swap_operands=False, mean_read_too=False, back_to=SHAPE, scale_shape=(GROUPS, 1)):
    """reshape (N, G, -1), mean, variance, + eps, sqrt, (x - mean) / root, * scale, + shift, reshape back."""
    g = GraphBuilder()
    x = g.input("x", SHAPE)
    rng = np.random.default_rng(1)
    eps = g.weight("eps", (), value=np.array(1e-5, "float32"))
    scale, shift = (g.weight(name, scale_shape, value=rng.uniform(0.5, 1.5, scale_shape).astype("float32"))
                    for name in ("scale", "shift"))
    split = g.op("reshape", x, shape=(SHAPE[0], GROUPS, 24))
    mean = g.op("mean", split, axes=(-1,), keepdims=True)
    var = g.op("variance", split, axes=(-1,), keepdims=True)
    pair = (lambda a, b: (b, a)) if swap_operands else (lambda a, b: (a, b))
    root = g.op("sqrt", g.op("add", *pair(var, eps)))
    normed = g.op("div", g.op("sub", split, mean), root)
    out = g.op("reshape", g.op("add", *pair(g.op("mul", *pair(normed, scale)), shift)), shape=back_to)
    return g.build([out, mean] if mean_read_too else [out])


@pytest.mark.parametrize("swap", [False, True], ids=["as_tvm_imports", "operands_swapped"])
def test_an_exported_group_norm_is_one_node_computing_the_same(swap):
    graph = exported_group_norm(swap_operands=swap)
    spelled, found = spell_group_norms(graph)
    assert found == 1
    assert [n.op for n in spelled.nodes if n.op not in ("input", "weight")] == ["exported_group_norm"]
    feed = {"x": np.random.default_rng(0).standard_normal(SHAPE).astype("float32")}
    np.testing.assert_allclose(evaluate(spelled, feed)[0], evaluate(graph, feed)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("graph", [
    exported_group_norm(mean_read_too=True),  # a middle value read elsewhere: the spelling cannot go
    exported_group_norm(back_to=(2, 6, 12)),  # reshaped back to another shape
    exported_group_norm(scale_shape=(GROUPS, 24)),  # scaled per element, not per group
], ids=["mean_read_elsewhere", "other_shape_back", "scale_per_element"])
def test_anything_else_is_left_as_it_is(graph):
    spelled, found = spell_group_norms(graph)
    assert found == 0 and spelled is graph
