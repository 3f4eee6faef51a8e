"""Wall time of TASOPass itself, beside the search time it contains.

    PYTHONPATH=. python -m bench.pass_time --models nasnet_mobile inception_v3 bert --quick
    PYTHONPATH=. python -m bench.pass_time --models resnet50 --check whole   # the former whole-function check
    PYTHONPATH=. python -m bench.pass_time --models inception_v3 \
        --work-dir build/bench-tuning-incep64/2026-12-05-cpu-shared64/inception_v3/shared   # tuned, as bench.run

The pass should take about the search time plus a few seconds: what is left is
reading the rule file, importing and emitting the function, and the numeric
check. `--check whole` times the whole-function check (numpy, or two TVM
builds when the function has opaque calls) that the region check replaced.
Prints one JSON line per model; `--profile DIR` also writes cProfile files.

`--work-dir` runs the pass as `bench.run --trials-per-task 64 --taso-cost tuned` does, on the model's
database that such a run tuned (one model per call: a database belongs to one model): the tuned
judge, the tuning lowering and the speed check, on the host's `mcpu` (bench.run's target, so the
cost cache's timings are found). What it times, once every kernel has a record, is reading the
database, lowering and building the candidates, and the speed check's rounds.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import time
import warnings


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["nasnet_mobile", "inception_v3", "bert"])
    p.add_argument("--quick", action="store_true", help="the models' quick variants")
    p.add_argument("--time-limit", type=float, default=None,
                   help="the pass's search limit in seconds (default 10; with --work-dir the pass's own, as bench.run)")
    p.add_argument("--check", choices=("region", "whole"), default="region")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--profile", default=None, metavar="DIR")
    p.add_argument("--work-dir", default=None, metavar="DIR",
                   help="a MetaSchedule database tuned by bench.run: the tuned pass with its speed check")
    p.add_argument("--trials", type=int, default=64, help="with --work-dir: trials per kernel, as it was tuned")
    args = p.parse_args(argv)
    if args.work_dir and len(args.models) != 1:
        p.error("--work-dir holds one model's database: name that model alone")
    os.environ.setdefault("TVM_NUM_THREADS", str(args.cores))  # as bench.run, before TVM starts its pool

    import tvm

    from bench.harness.configs import import_onnx
    from bench.harness.models import build_model
    from taso_relay.passes import TASOOptimizer, TASOPass

    if args.check == "whole":
        def whole(self, before, after, imported, mod, report=None):
            start = time.perf_counter()
            same, how = self._whole_function_same(before, after, imported, mod)
            if report is not None:
                report.check = f"whole function ({how}) in {time.perf_counter() - start:.2f} s"
            return same
        TASOOptimizer._same_results = whole

    spec = {"kind": "llvm", "num-cores": args.cores}
    if args.work_dir:
        spec["mcpu"] = tvm.target.codegen.llvm_get_system_cpu()
    target = tvm.target.Target(spec)
    for name in args.models:
        imported = import_onnx(build_model(name, quick=args.quick))
        if args.work_dir:
            from taso_relay.cost.tuned import TunedCost

            judge = TunedCost(target, trials=args.trials, work_dir=args.work_dir)
            limit = {} if args.time_limit is None else {"time_limit": args.time_limit}
            taso = TASOPass(target=target, cost=judge, lowering="tuning", **limit)
        else:  # the pass's own work: its default speed check (two builds and timing) would dwarf it
            limit = 10.0 if args.time_limit is None else args.time_limit
            taso = TASOPass(target=target, time_limit=limit, verify_speed=False)
        profile = cProfile.Profile() if args.profile else None
        start = time.perf_counter()
        with target, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if profile:
                profile.enable()
            taso(imported.bound)
            if profile:
                profile.disable()
        seconds = time.perf_counter() - start
        if profile:
            os.makedirs(args.profile, exist_ok=True)
            profile.dump_stats(os.path.join(args.profile, f"{name}.prof"))
        report = taso.report["main"]
        print(json.dumps({
            "model": name + (" (quick)" if args.quick else ""), "pass_s": round(seconds, 2),
            "search_s": round(report.search_seconds, 2), "overhead_s": round(seconds - report.search_seconds, 2),
            "status": report.status, "nodes": sum(report.ops_before.values()), "check": report.check,
            "speed_check": report.speed.to_text() if getattr(report, "speed", None) else None,
            "load_avg": [round(x, 2) for x in os.getloadavg()],
        }), flush=True)


if __name__ == "__main__":
    main()
