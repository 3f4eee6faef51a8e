"""A batch norm of weights leaves the bridge as arithmetic, so that FoldConstant folds it through."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from taso_relay.bridge.execute import run_module
from taso_relay.bridge.to_relax import module_from_graph
from taso_relay.graph import GraphBuilder, evaluate


def _graph():
    """relu(x * batch_norm[axis=0](w, ...)) + batch_norm(x, ...): one batch norm of weights, one not."""
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4, 4))

    def params(tag):
        values = [rng.uniform(0.5, 1.5, 3), rng.standard_normal(3), rng.standard_normal(3), rng.uniform(0.5, 1.5, 3)]
        return [b.weight(f"{n}_{tag}", (3,), value=v.astype("float32"))
                for n, v in zip(("gamma", "beta", "mean", "var"), values)]

    w = b.weight("w", (3, 1, 1, 1), value=rng.standard_normal((3, 1, 1, 1)).astype("float32"))
    scale = b.op("batch_norm", w, *params("w"), axis=0, epsilon=1e-3)
    y = b.op("mul", x, b.op("transpose", scale, perm=(1, 0, 2, 3)))
    return b.build([b.op("add", b.op("relu", y), b.op("batch_norm", x, *params("x")))])


def _calls(mod, name):
    found = []
    relax.analysis.post_order_visit(mod["main"].body, lambda e: found.append(e) if isinstance(e, relax.Call)
                                    and isinstance(e.op, tvm.ir.Op) and e.op.name == name else None)
    return len(found)


def test_weight_batch_norm_is_arithmetic_and_folds():
    g = _graph()
    mod = module_from_graph(g)
    assert _calls(mod, "relax.nn.batch_norm") == 1  # the one on the activation stays a batch norm
    folded = relax.transform.FoldConstant()(relax.transform.LegalizeOps()(mod))
    # the scale and its transpose are constants now: only mul, relu, batch_norm(x) and add run
    # (emitted as a batch_norm call, the transpose of the folded tuple's item would run too)
    assert _calls(folded, "relax.call_tir") == 4
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype("float32")
    want = evaluate(g, {"x": x})[0]
    np.testing.assert_allclose(run_module(mod, [x])[0], want, rtol=1e-5, atol=1e-5)
