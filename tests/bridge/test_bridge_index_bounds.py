"""Random integer inputs stay inside the tables they index (TVM's take in "fast" mode reads past them)."""
from __future__ import annotations

import numpy as np
from bridge_onnx_models import import_onnx, token_types

from taso_relay.bridge.execute import index_bounds, random_inputs
from taso_relay.onnx_io.export import onnx_index_bounds, random_onnx_inputs
from taso_relay.onnx_io.prepare import Tensor


def test_relax_inputs_stay_below_the_tables_they_index(run_module):
    mod = import_onnx(token_types())
    func = mod["main"]
    assert index_bounds(func) == {"ids": 12, "types": 2}
    ids, types = random_inputs(func.params, np.random.default_rng(0), func)
    assert types.max() == 1 and ids.max() == 3  # [0, 4) where the table allows it, [0, 2) for the types
    unbounded = random_inputs(func.params, np.random.default_rng(0))[1]
    assert unbounded.max() >= 2  # what was drawn before: rows the token-type table does not have
    assert np.isfinite(run_module(mod, [ids, types])[0]).all()


def test_onnx_inputs_stay_below_the_tables_they_index():
    model = token_types()
    bounds = onnx_index_bounds(model)
    assert bounds == {"ids": 12, "types": 2}
    feeds = random_onnx_inputs([Tensor("ids", (1, 64), "int64"), Tensor("types", (1, 64), "int32")], 0, bounds)
    assert feeds["types"].max() == 1 and feeds["ids"].max() == 3
