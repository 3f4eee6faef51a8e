"""Small Relax modules for tests that need TVM's own operators (not the graph form)."""
from __future__ import annotations

import numpy as np


def lookup_then_add(rows: int, ids: int = 16, width: int = 64):
    """An embedding lookup of a `rows`-row constant table at run-time ids, plus an activation: two kernels."""
    from tvm import relax

    bb = relax.BlockBuilder()
    index = relax.Var("ids", relax.TensorType((1, ids), "int64"))
    x = relax.Var("x", relax.TensorType((1, ids, width), "float32"))
    with bb.function("main", [index, x]):
        with bb.dataflow():
            looked_up = bb.emit(relax.op.take(relax.const(np.ones((rows, width), "float32")), index, axis=0))
            out = bb.emit_output(relax.op.add(looked_up, x))
        bb.emit_func_output(out)
    return bb.get()
