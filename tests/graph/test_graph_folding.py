"""Weight-only values: one definition, shared by the matcher, the cost models and the emitter."""
from __future__ import annotations

from taso_relay.graph import GraphBuilder, TensorType, weight_only
from taso_relay.subst.index import GraphIndex


def _graph():
    b = GraphBuilder()
    x = b.input("x", (4, 8))
    w, v = b.weight("w", (8, 8)), b.weight("v", (8, 8))
    ones = b.constant("ones", (8, 8))
    wv = b.op("add", w, v)                     # weights only: folds
    scaled = b.op("mul", wv, ones)             # and a constant: folds
    (op,) = b.opaque([w], [TensorType((8, 8), "float32")], payload="p", key="k")  # opaque: never folds
    y = b.op("matmul", x, scaled)               # reads an activation: runs
    z = b.op("matmul", y, op)
    return b.build([z]), {"x": x, "w": w, "v": v, "ones": ones, "wv": wv, "scaled": scaled, "op": op, "y": y, "z": z}


def test_weight_only_values():
    g, at = _graph()
    flags = weight_only(g)
    want = {"x": False, "w": True, "v": True, "ones": True, "wv": True, "scaled": True, "op": False,
            "y": False, "z": False}
    assert {k: flags[r.node] for k, r in at.items()} == want


def test_a_weight_passed_as_a_parameter_is_not_a_constant():
    g, at = _graph()
    flags = weight_only(g, frozenset({"v"}))
    assert flags[at["w"].node] and not flags[at["v"].node]
    assert not flags[at["wv"].node] and not flags[at["scaled"].node]


def test_the_matcher_relies_on_no_opaque_fold_and_the_cost_model_assumes_it():
    """FoldConstant folds an opaque call on constants when it legalizes (sin, clip, ...): the cost
    model prices it as folded, but no rule may bind a weight input to it."""
    from taso_relay.cost.fusion import partition

    g, at = _graph()
    assert GraphIndex(g).foldable == weight_only(g)
    priced = weight_only(g, opaque_folds=True)
    assert priced[at["op"].node] and not weight_only(g)[at["op"].node]
    assert [a == b for a, b in zip(priced, weight_only(g))].count(False) == 1
    folded = set(partition(g).folded)
    assert folded == {i for i, f in enumerate(priced) if f and g.nodes[i].op not in ("weight", "constant")}
