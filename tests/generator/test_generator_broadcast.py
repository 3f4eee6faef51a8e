"""Element-wise operands broadcast; a rule found at equal shapes must not match where they do."""
from __future__ import annotations

import numpy as np
import pytest
from gen_helpers import I4, K33, small

from taso_relay.generator.run import generate
from taso_relay.graph import evaluate
from taso_relay.graph.types import GraphError
from taso_relay.subst import expr as X
from taso_relay.subst import load_rules
from taso_relay.subst.rule_io import shipped_rules_dir

SHIPPED = shipped_rules_dir() / "taso_k3.json"
_BUILD = (GraphError, X.ExprError, ValueError, IndexError, TypeError, ZeroDivisionError)


def _elementwise(rule) -> bool:
    return any(n.op in ("add", "mul") for n in rule.source)


def _broadcast_instances(rule):
    """The example with one input dimension set to 1, one at a time."""
    ex = {k: tuple(v) for k, v in rule.example["inputs"].items()}
    for name, shape in ex.items():
        for axis, size in enumerate(shape):
            if size != 1:
                yield {**ex, name: shape[:axis] + (1,) + shape[axis + 1:]}


def _agree(rule, shapes) -> bool | None:
    """None where the rule does not apply (constraints fail or a side does not build)."""
    variables = dict(rule.example.get("vars", {}))
    if not rule.constraints_hold(shapes, variables)[0]:
        return None
    try:
        ga = rule.example_graph("source", shapes, variables, dtype="float64")
        gb = rule.example_graph("target", shapes, variables, dtype="float64")
    except _BUILD:
        return None
    rng = np.random.default_rng(3)
    feeds = {n.attr("name"): rng.uniform(-1, 1, n.attr("shape")) for n in ga.nodes if n.op in ("input", "weight")}
    outs = zip(evaluate(ga, feeds, dtype="float64"), evaluate(gb, feeds, dtype="float64"))
    return all(u.shape == v.shape and np.allclose(u, v, rtol=1e-9, atol=1e-9) for u, v in outs)


def test_conv_over_add_requires_equal_operand_shapes(tmp_path):
    rep = generate(small(["conv", "add"], 3, (I4, K33)), None, workers=1, checkpoint_dir=tmp_path / "ckpt",
                   progress=False, log=lambda *a: None)
    rule = next(r for r in rep["rules"] if r.text.startswith("conv2d") and "(add(x1, x2), w1) => add(" in r.text)
    assert "shape(x2) == shape(x1)" in rule.constraints
    ex = {k: tuple(v) for k, v in rule.example["inputs"].items()}
    # x2 broadcasting along the width: conv(x1 + x2) is not conv(x1) + conv(x2) there
    assert not rule.constraints_hold({**ex, "x2": ex["x2"][:3] + (1,)}, dict(rule.example["vars"]))[0]


def test_shipped_rules_agree_wherever_a_broadcast_operand_lets_them_apply():
    if not SHIPPED.exists():
        pytest.skip("rules/taso_k3.json not generated")
    rules = [r for r in load_rules(SHIPPED) if _elementwise(r)]
    assert len(rules) > 500
    applied, wrong = 0, []
    for rule in rules:
        for shapes in _broadcast_instances(rule):
            verdict = _agree(rule, shapes)
            applied += verdict is not None
            if verdict is False:
                wrong.append((rule.id, shapes))
    assert not wrong, wrong[:5]
    assert applied > 0  # some rules do apply to a size-1 dimension: the check is not vacuous
