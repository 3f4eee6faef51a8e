"""TASOPass folds a batch norm over a matmul's features into the weight's columns: BatchNorm1d after a Linear
(with or without its bias), and LeViT's Linear + BatchNorm1d over the (B * N, C) rows; and one over the features a
matmul reads into the weight's rows (BatchNorm1d before a Linear: LeViT's and RepViT's heads)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax

from taso_relay.bridge.execute import random_inputs
from taso_relay.passes import TASOPass

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import F32, Model, import_onnx  # noqa: E402
from test_passes_norm import batch_norm_calls, computes_the_same  # noqa: E402


def linear_bn(bias: bool):
    """torch's Linear(16, 32) then BatchNorm1d(32) on (4, 16): Gemm with B transposed, or MatMul."""
    m = Model(7)
    if bias:
        y = m.op("Gemm", ["x", m.weight((32, 16)), m.weight((32,))], transB=1)
    else:
        y = m.op("MatMul", ["x", m.weight((16, 32))])
    return import_onnx(m.build([("x", F32, [4, 16])], [(m.bn(y, 32), F32, [4, 32])]))


def norm_linear(heads: int):
    """timm's NormLinear head: BatchNorm1d(16) on (4, 16) pooled features, then Linear(16, 10) (a Gemm with B
    transposed); with two heads, both read the one batch norm."""
    m = Model(10)
    y = m.bn("x", 16)
    outs = [m.op("Gemm", [y, m.weight((10, 16)), m.weight((10,))], transB=1) for _ in range(heads)]
    return import_onnx(m.build([("x", F32, [4, 16])], [(o, F32, [4, 10]) for o in outs]))


def tokens_norm_linear():
    """A batch norm over the last axis of (2, 6, 16) tokens, then a matmul with a (16, 8) weight, in Relax."""
    rng = np.random.default_rng(11)
    c = lambda *shape, lo=0.0: relax.const((rng.standard_normal(shape) + lo).astype("float32"))  # noqa: E731
    x = relax.Var("x", relax.TensorType((2, 6, 16), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.batch_norm(x, c(16), c(16), c(16), relax.const(
                np.abs(rng.standard_normal(16)).astype("float32") + 0.5), axis=-1, training=False))
            out = bb.emit_output(relax.op.matmul(bb.emit(relax.TupleGetItem(y, 0)), c(16, 8)))
        bb.emit_func_output(out)
    return bb.get()


def levit_linear_norm():
    """timm's LeViT LinearNorm: a bias-free Linear on (B, N, C) tokens, BatchNorm1d over the flattened rows, and
    the rows reshaped back; twice, with a hardswish between (the MLP)."""
    m = Model(8)
    x = "x"
    for cin, cout in ((16, 32), (32, 16)):
        y = m.op("MatMul", [x, m.weight((cin, cout))])
        y = m.op("Reshape", [y, m.const([12, cout])])
        y = m.op("Reshape", [m.bn(y, cout), m.const([2, 6, cout])])
        x = m.op("HardSwish", [y]) if cout == 32 else y
    return import_onnx(m.build([("x", F32, [2, 6, 16])], [(x, F32, [2, 6, 16])]))


@pytest.mark.parametrize("model, rules", [
    (lambda: linear_bn(True), ["h-bn-matmul-bias2"]),
    (lambda: linear_bn(False), ["h-bn-matmul2"]),
    (levit_linear_norm, ["h-bn-rows-matmul", "h-bn-rows-matmul"]),
    (lambda: norm_linear(1), ["h-bn-before-matmul2"]),
    (tokens_norm_linear, ["h-bn-before-matmul3"]),
], ids=["gemm-bias", "matmul", "levit-rows", "bn-before-gemm", "bn-before-matmul-tokens"])
def test_a_batch_norm_over_a_matmuls_features_folds_into_its_weight(model, rules, run_module, rng):
    mod = model()
    taso = TASOPass(verify_speed=False, min_gain=0.0)  # (a small model: the matmuls dominate its predicted cost)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized"
    assert sorted(a.rule_id for a in report.search.applied[:report.search.first_phase]) == rules
    assert batch_norm_calls(mod) == len(rules) and batch_norm_calls(out) == 0
    computes_the_same(mod, out, run_module, rng)


def test_a_batch_norm_two_matmuls_read_is_left(run_module, rng):
    """Folding it into one head would leave the batch norm computed for the other: the match is refused."""
    mod = norm_linear(2)
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    search = taso.report["main"].search
    assert not any(a.rule_id.startswith("h-bn-before") for a in (search.applied if search else []))
    inputs = random_inputs(mod["main"].params, rng)
    for want, got in zip(run_module(mod, inputs), run_module(out, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_batch_norm_over_rows_of_another_width_is_left():
    """(2, 6, 32) flattened to (24, 16) is not rows of 32 features: the batch norm there is over other values."""
    m = Model(9)
    y = m.op("MatMul", ["x", m.weight((16, 32))])
    y = m.bn(m.op("Reshape", [y, m.const([24, 16])]), 16)
    mod = import_onnx(m.build([("x", F32, [2, 6, 16])], [(y, F32, [24, 16])]))
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    taso(mod)
    search = taso.report["main"].search
    assert not any(a.rule_id.startswith("h-bn-") for a in (search.applied if search else []))


def bmm_linear_norm(batch):
    """torch.export's LeViT LinearNorm: the Linear on (B, 6, 8) tokens as a batched matmul with its transposed
    (16, 8) weight broadcast to (B, 8, 16), then BatchNorm1d over the (B * 6, 16) rows, reshaped back."""
    rng = np.random.default_rng(5)
    c = lambda *shape: relax.const(rng.standard_normal(shape).astype("float32"))  # noqa: E731
    x = relax.Var("x", relax.TensorType((batch, 6, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            w = bb.emit(relax.op.broadcast_to(bb.emit(relax.op.permute_dims(c(16, 8), [1, 0])),
                                              relax.ShapeExpr([batch, 8, 16])))
            rows = bb.emit(relax.op.reshape(bb.emit(relax.op.matmul(x, w, out_dtype="float32")),
                                            relax.ShapeExpr([batch * 6, 16])))
            var = relax.const((np.abs(rng.standard_normal(16)) + 0.5).astype("float32"))
            y = bb.emit(relax.TupleGetItem(bb.emit(relax.op.nn.batch_norm(rows, c(16), c(16), c(16), var, axis=1,
                                                                          training=False)), 0))
            out = bb.emit_output(relax.op.reshape(y, relax.ShapeExpr([batch, 6, 16])))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("symbolic", [False, True], ids=["batch-2", "batch-n"])
def test_a_weight_broadcast_over_the_batch_for_a_bmm_is_read_as_the_linears_weight(symbolic, run_module, rng):
    """The matmul reads the (8, 16) weight itself (it broadcasts it the same way), so the batch norm over its
    rows folds into it; with a symbolic batch, no constant of the stand-in's batch is computed ahead either."""
    from tvm import tirx

    from taso_relay.bridge.from_relax import graph_from_function

    n = tirx.Var("n", "int64") if symbolic else 2
    mod = bmm_linear_norm(n)
    if not symbolic:
        assert "broadcast_to" not in graph_from_function(mod["main"], "main").graph.op_counts()
    taso = TASOPass(verify_speed=False, min_gain=0.0)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized" and [a.rule_id for a in report.search.applied] == ["h-bn-rows-matmul"]
    assert batch_norm_calls(out) == 0
    for k in ((1, 3) if symbolic else (2,)):
        want_mod, got_mod = (tvm.IRModule({"main": m["main"].bind_symbolic_vars({"n": k})}) if symbolic else m
                             for m in (mod, out))
        inputs = [rng.standard_normal((k, 6, 8)).astype("float32")]
        np.testing.assert_allclose(run_module(got_mod, inputs)[0], run_module(want_mod, inputs)[0], rtol=1e-4,
                                   atol=1e-5)
