"""TASOPass folds a batch norm over a matmul's features into the weight's columns: BatchNorm1d after a Linear
(with or without its bias), and LeViT's Linear + BatchNorm1d over the (B * N, C) rows."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from taso_relay.bridge.execute import random_inputs
from taso_relay.passes import TASOPass

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import F32, Model, import_onnx  # noqa: E402
from test_passes_norm import batch_norm_calls  # noqa: E402


def linear_bn(bias: bool):
    """torch's Linear(16, 32) then BatchNorm1d(32) on (4, 16): Gemm with B transposed, or MatMul."""
    m = Model(7)
    if bias:
        y = m.op("Gemm", ["x", m.weight((32, 16)), m.weight((32,))], transB=1)
    else:
        y = m.op("MatMul", ["x", m.weight((16, 32))])
    return import_onnx(m.build([("x", F32, [4, 16])], [(m.bn(y, 32), F32, [4, 32])]))


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
], ids=["gemm-bias", "matmul", "levit-rows"])
def test_a_batch_norm_over_a_matmuls_features_folds_into_its_weight(model, rules, run_module, rng):
    mod = model()
    taso = TASOPass(verify_speed=False, min_gain=0.0)  # (a small model: the matmuls dominate its predicted cost)
    out = taso(mod)
    report = taso.report["main"]
    assert report.status == "optimized"
    assert sorted(a.rule_id for a in report.search.applied[:report.search.first_phase]) == rules
    assert batch_norm_calls(mod) == len(rules) and batch_norm_calls(out) == 0
    inputs = random_inputs(mod["main"].params, rng)
    want, got = run_module(mod, inputs)[0], run_module(out, inputs)[0]
    assert np.abs(want).max() > 0.1
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
