"""fold_weights: what is computed from weights alone leaves the bridge as constants computed in numpy,
not as calls that FoldConstant builds a TVM kernel for, one by one."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

from taso_relay.bridge.execute import random_inputs, run_module
from taso_relay.bridge.to_relax import module_from_graph
from taso_relay.graph import evaluate
from taso_relay.graph.interpreter import fold_weights

sys.path.insert(0, str(Path(__file__).parent))
from test_bridge_weight_batch_norm import _graph  # noqa: E402
from bridge_onnx_models import MODELS, import_onnx  # noqa: E402


def _constant_only_calls(func) -> int:
    """Bound calls computed from constants alone: work FoldConstant would do at build time."""
    const_vars, found = set(), 0
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            args = list(value.args) if isinstance(value, relax.Call) else \
                [value.tuple_value] if isinstance(value, relax.TupleGetItem) else []
            if args and all(isinstance(a, (Constant, relax.ShapeExpr)) or a in const_vars for a in args):
                const_vars.add(binding.var)
                found += isinstance(value, relax.Call)
    return found


def test_fold_weights_computes_the_weight_only_nodes_and_nothing_else():
    g = _graph()
    known = fold_weights(g)
    ops = {g.nodes[i].op for i in known}
    assert "batch_norm" in ops and "transpose" in ops  # the batch norm of w and what follows it
    assert not any(g.nodes[i].op in ("input", "relu", "add") for i in known)
    bn = next(i for i in known if g.nodes[i].op == "batch_norm")
    n = g.nodes[bn]
    w, gamma, beta, mean, var = (g.values[g.nodes[r.node].attr("name")] for r in n.inputs)
    want = (w - mean.reshape(3, 1, 1, 1)) / np.sqrt(var.reshape(3, 1, 1, 1) + 1e-3) * gamma.reshape(3, 1, 1, 1) \
        + beta.reshape(3, 1, 1, 1)
    np.testing.assert_allclose(known[bn][0], want, rtol=1e-5)
    w_name = g.nodes[n.inputs[0].node].attr("name")
    assert not any(g.nodes[i].op == "batch_norm" for i in fold_weights(g, {w_name}))  # a parameter is not constant


def test_folded_module_has_no_constant_work_and_computes_the_same():
    g = _graph()
    folded, plain = module_from_graph(g, fold_weights=True), module_from_graph(g)
    assert _constant_only_calls(plain["main"]) > 0  # the bridge alone leaves them to FoldConstant
    assert _constant_only_calls(folded["main"]) == 0
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype("float32")
    want = evaluate(g, {"x": x})[0]
    for mod in (folded, plain):
        np.testing.assert_allclose(run_module(mod, [x])[0], want, rtol=1e-4, atol=1e-5)


def test_only_the_end_of_a_folded_chain_becomes_a_constant(monkeypatch):
    """The chain batch_norm(w) -> transpose is read by one emitted mul: one constant, not one per step."""
    made = []
    real = relax.const
    monkeypatch.setattr(relax, "const", lambda v, *a, **k: made.append(np.shape(v)) or real(v, *a, **k))
    module_from_graph(_graph(), fold_weights=True)
    assert made.count((1, 3, 1, 1)) == 1  # the transposed scale the mul reads
    assert made.count((3, 1, 1, 1)) == 1  # w itself (a weight leaf); not also the batch norm of it


def test_pass_output_after_batch_norm_folds_needs_no_constant_folding():
    """TASOPass folds the batch norms into the convs; its function carries the folded kernels."""
    from taso_relay.passes import TASOPass

    mod = import_onnx(MODELS["resnet_block"]())
    taso = TASOPass(verify_speed=False)
    out = taso(mod)
    assert taso.report["main"].status == "optimized"
    assert _constant_only_calls(out["main"]) == 0
    assert "batch_norm" not in str(out["main"])  # folded into the convs' constants, none at run time
    inputs = random_inputs(mod["main"].params, np.random.default_rng(0))
    target = tvm.target.Target({"kind": "llvm"})
    for want, got in zip(run_module(mod, inputs, target), run_module(out, inputs, target)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
