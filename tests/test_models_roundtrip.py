"""Every benchmark model goes Relax -> Graph -> Relax through TASOPass unchanged.

With no rules the pass must hand back a structurally equal function, and the
compiled model must compute the same outputs as the original. Full-size
models take a minute in all under the default lowering, hence `slow`; the
quick variants run by default.
"""
from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm.relax.frontend.onnx import from_onnx

from bench.models import MODELS, build
from taso_relay.bridge.execute import run_module
from taso_relay.passes import TASOPass


def _roundtrip(name: str, quick: bool) -> None:
    mod = from_onnx(build(name, quick=quick), keep_params_in_input=False)
    pass_ = TASOPass(rules=[])
    after = pass_(mod)
    report = pass_.report["main"]
    assert report.status == "unchanged", report.summary()
    assert report.ops_before == report.ops_after
    tvm.ir.assert_structural_equal(after["main"], mod["main"], map_free_vars=True)
    shape = [int(d) for d in mod["main"].params[0].ty.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    expected = run_module(mod, [x])
    got = run_module(after, [x])
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        assert np.all(np.isfinite(e))
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_quick_model_roundtrips_exactly(name):
    _roundtrip(name, quick=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_model_roundtrips_exactly(name):
    _roundtrip(name, quick=False)
