"""Does a merge's gain hold over time and thread counts? One model against its saturated merges, again and again.

    PYTHONPATH=. python -m bench.merge_threads --work-dir build/bench-tuning-s7/2026-11-30-cpu-shared64/nasrnn/shared
    PYTHONPATH=. python -m bench.merge_threads --threads 1 --seconds 60 --work-dir ...

Full NASRNN's matmul merges (80 matmuls -> 17) measured anywhere from 0.73x to
1.4x against the original in different runs. This builds the original and the
graph every merge rule reaches at its fixpoint (what the search's saturation
proposes), compiles both once from a MetaSchedule database, and then repeats
guard.speed.measure's interleaved check (a few seconds each) for `--seconds`,
printing one line per check. A gain that depends on the machine's state shows up
as spells; one that depends on the thread count as a shift between runs with
different `--threads`. `--json FILE` writes the checks.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="nasrnn")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--work-dir", required=True, help="MetaSchedule database of the model (tuned by bench.run)")
    p.add_argument("--threads", type=int, default=None, help="TVM_NUM_THREADS (default: the target's num-cores)")
    p.add_argument("--target", default='{"kind": "llvm", "mcpu": "znver5"}')
    p.add_argument("--seconds", type=float, default=180.0)
    p.add_argument("--check-s", type=float, default=3.0, help="timing budget of one check")
    p.add_argument("--json", default=None, metavar="FILE")
    args = p.parse_args(argv)
    target_dict = json.loads(args.target)
    target_dict.setdefault("num-cores", 2)
    os.environ["TVM_NUM_THREADS"] = str(args.threads or target_dict["num-cores"])  # before TVM starts

    import tvm

    from bench.harness.configs import import_onnx
    from bench.harness.models import build_model
    from taso_relay.bridge.from_relax import graph_from_function
    from taso_relay.bridge.to_relax import function_from_graph
    from taso_relay.cost.best_records import read_database
    from taso_relay.guard import speed
    from taso_relay.passes import resolve_rules
    from taso_relay.search.saturate import _fixpoint, merges_and_hoists

    warnings.simplefilter("ignore")
    original = import_onnx(build_model(args.model, quick=args.quick)).bound
    imported = graph_from_function(original["main"], "main")
    merged = imported.graph
    for matcher in merges_and_hoists(resolve_rules(None))[0]:
        merged, _ = _fixpoint(merged, matcher, time.perf_counter() + 60, 256)
    changed = original.clone()
    changed["main"] = function_from_graph(merged, "main", imported.signature, fold_weights=True)
    target = tvm.target.Target(target_dict)
    database = read_database(args.work_dir)
    compiled: dict = {}
    rows = []
    print(f"{args.model}: {imported.graph.op_counts().get('matmul', 0)} -> {merged.op_counts().get('matmul', 0)} "
          f"matmuls; {speed.runtime_threads()} TVM threads", flush=True)
    end = time.time() + args.seconds
    while time.time() < end:
        check = speed.measure(original, changed, "main", target, lowering="tuning", database=database,
                              budget_s=args.check_s, max_rounds=20, compiled=compiled)
        rows.append({"utc": time.strftime("%H:%M:%S", time.gmtime()), "before_ms": check.before_s * 1e3,
                     "after_ms": check.after_s * 1e3, "speedup": check.speedup})
        print(f"{rows[-1]['utc']}  original {rows[-1]['before_ms']:.3f} ms  merged {rows[-1]['after_ms']:.3f} ms  "
              f"x{check.speedup:.3f}", flush=True)
    gains = [r["speedup"] for r in rows]
    summary = {"model": args.model, "quick": args.quick, "threads": speed.runtime_threads(), "target": target_dict,
               "checks": len(rows), "median": statistics.median(gains), "faster": sum(g > 1 for g in gains),
               "rows": rows}
    print(f"{len(rows)} checks: median x{summary['median']:.3f}, merged faster in {summary['faster']}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
