"""fold_kernels then FoldConstant against FoldConstant alone, on ONNX models nobody here wrote.

    .venv/bin/python -m bench.corpus.check_folding build/corpus/*.onnx

Per model: `taso_relay.onnx_io.prepare` (as the CLI imports), then each lowering's passes up to
where constants are folded (the tuning lowering decomposes batch norms first), folded both ways.
The two modules must be structurally equal and their constants equal bit for bit: fold_kernels
(taso_relay/cost/fold_kernels.py) builds each distinct kernel once where TVM's FoldConstant builds
one per call, and must change nothing else. Prints one JSON line per model with both folding times;
exits 1 if any model differs or fails.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def _constants(mod) -> list:
    import tvm
    from tvm import relax
    from tvm.ir.expr import GenericConst

    found = []
    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, lambda e: found.append(e.value.numpy()) if isinstance(
                e, GenericConst) and isinstance(e.value, tvm.runtime.Tensor) else None)
    return found


def check(mod, lowering: str) -> dict:
    """Both foldings of `mod` lowered up to FoldConstant: {"same", "fold_s", "ours_s", "constants"}."""
    import numpy as np
    import tvm
    import tvm_ffi
    from tvm import relax

    from taso_relay.cost.fold_kernels import fold_kernels
    from taso_relay.cost.lowering import passes_before_folding

    with tvm.target.Target("llvm"):
        legalized = tvm.transform.Sequential(passes_before_folding(lowering))(mod)
        start = time.perf_counter()
        stock = relax.transform.FoldConstant()(legalized)
        stock_s = time.perf_counter() - start
        start = time.perf_counter()
        ours = relax.transform.FoldConstant()(fold_kernels(legalized))
        ours_s = time.perf_counter() - start
    a, b = _constants(stock), _constants(ours)
    same = bool(tvm_ffi.structural_equal(stock, ours)) and len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))
    return {"same": same, "fold_s": round(stock_s, 2), "ours_s": round(ours_s, 2), "constants": len(a)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", help="ONNX files")
    args = p.parse_args(argv)

    from taso_relay.onnx_io.prepare import prepare

    failed = 0
    for path in args.models:
        record: dict = {"model": path}
        try:
            mod = prepare(path).mod
            for lowering in ("tuning", "default"):
                record[lowering] = check(mod, lowering)
            failed += not all(record[lowering]["same"] for lowering in ("tuning", "default"))
        except Exception as exc:  # noqa: BLE001 - one model's failure is reported, the others still run
            record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            failed += 1
        print(json.dumps(record), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
