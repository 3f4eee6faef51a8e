"""`taso-relay demo`: the bundled ONNX example through TASOPass, compiled and compared before and after."""
from __future__ import annotations

import statistics
import warnings
from pathlib import Path

from ..onnx_io.errors import InputError as CliError

EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "inception_block.onnx"


# ---- demo ------------------------------------------------------------------------
def add_demo(sub) -> None:
    p = sub.add_parser("demo", help="import the bundled ONNX example, run TASOPass, compile and compare",
                       description="Import an ONNX model with TVM's importer, run TASOPass on it, compile the "
                                   "model before and after with tvm.compile and compare their outputs.")
    p.add_argument("--model", type=Path, default=EXAMPLE, help="ONNX file (default: the bundled Inception block)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random input")
    p.add_argument("--repeat", type=int, default=20, help="timed runs per model")
    p.set_defaults(run=run_demo)


def run_demo(args) -> int:
    import numpy as np
    import onnx
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    from ..bridge import execute
    from ..cost.lowering import compile_module
    from ..guard.speed import interleaved
    from ..passes import TASOPass

    if not args.model.is_file():
        raise CliError(f"no such model file: {args.model}")
    try:
        model = onnx.load(str(args.model))
        mod = from_onnx(model, keep_params_in_input=False)
    except Exception as exc:  # a malformed or unsupported model
        raise CliError(f"cannot import {args.model}: {type(exc).__name__}: {exc}") from exc
    target = execute.default_target()
    print(f"model   {args.model.name} ({args.model.stat().st_size / 1024:.0f} KB), target {target.kind.name}")
    taso = TASOPass(target=target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report below lists them
        optimized, pass_s = execute.timed(taso, mod)
    for report in taso.report.values():
        print("pass    " + report.summary().replace("\n", "\n        "))
        body = {k: v for k, v in sorted(report.ops_after.items()) if k not in ("input", "weight", "constant")}
        print("ops     " + ", ".join(f"{k} {v}" for k, v in body.items()))
        if report.search is None and report.status != "skipped":
            print("        (no proven rule available: the pass round-tripped Relax -> graph -> Relax unchanged)")
    print(f"time    {pass_s:.2f} s in the pass")

    unchanged = all(report.status != "optimized" for report in taso.report.values())
    inputs = execute.random_inputs(mod["main"].params, np.random.default_rng(args.seed), mod["main"])
    tensors = [tvm.runtime.tensor(x) for x in inputs]
    results, timers = {}, {}
    for label, module in (("before", mod), ("after", optimized)):
        ex, compile_s = execute.timed(compile_module, module, target)  # the target's pipeline, as the pass assumes
        vm = tvm.relax.VirtualMachine(ex, tvm.cpu())
        results[label] = execute.flatten(vm["main"](*tensors))  # also the warm-up run
        timers[label] = vm.time_evaluator("main", tvm.cpu(), number=1, repeat=1)
        print(f"{label:<7} compile {compile_s:.2f} s" + (" (the module the pass was given)" if unchanged
                                                          and label == "after" else ""))
    args.repeat = max(1, args.repeat)
    runs = interleaved([lambda t=timers[k]: t(*tensors).mean for k in ("before", "after")], range(args.repeat))
    before, after = (statistics.median(r) * 1e3 for r in runs)
    print(f"run     before {before:.3f} ms, after {after:.3f} ms: x{before / after:.3f} "
          f"(medians of {args.repeat} interleaved runs" + ("; the same module twice, so this is the "
                                                           "machine's noise)" if unchanged else ")"))
    diffs = [float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
             for a, b in zip(results["before"], results["after"])]
    # random weights can give outputs of 1e10 (or 1e-10): a difference says little without its output's scale
    scales = [float(np.max(np.abs(a.astype(np.float64)), initial=0.0)) for a in results["before"]]
    relative = [d / s for d, s in zip(diffs, scales) if s > 0]
    of_scale = f" ({max(relative):.2g} of its output's largest magnitude, at most)" if relative else ""
    print(f"check   {len(results['after'])} outputs, max abs diff {max(diffs, default=0.0):.3g}{of_scale}")
    return 0

