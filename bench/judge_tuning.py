"""How long TASOPass's tuned judge tunes on one model, run by run.

    PYTHONPATH=. python -m bench.judge_tuning build/corpus/dynamo_hf_llama.onnx --trials 8

Runs TASOPass(cost=TunedCost(trials=N)) on an ONNX model with an empty tuning database and records
each MetaSchedule run the judge starts (its kernels, its seconds, the call that started it), the
seconds MetaSchedule spent picking candidates and on picks that sent none (from its scheduler log),
and the pass's result. Writes bench/results/judge-tuning-<date>-<model>.json.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def picking_seconds(log_path: Path) -> dict:
    """Seconds from each 'picks Task' line to the batch it sent, summed, and those of empty batches."""
    stamp = lambda line: datetime.datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S")  # noqa: E731
    lines = [line for line in log_path.read_text().splitlines()
             if "picks Task" in line or ("Sending" in line and "builder" in line)]
    picking = empty = 0.0
    for first, second in zip(lines, lines[1:]):
        if "picks Task" in first and "Sending" in second:
            seconds = (stamp(second) - stamp(first)).total_seconds()
            picking += seconds
            empty += seconds if re.search(r"Sending 0 sample", second) else 0.0
    return {"picking_s": picking, "empty_batches_s": empty}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="ONNX file")
    p.add_argument("--trials", type=int, default=8, help="MetaSchedule trials per kernel (the CLI's: 64)")
    p.add_argument("--work-dir", default=None, help="tuning database (default: a new empty folder)")
    p.add_argument("--out", default=None, help="JSON file (default: bench/results/judge-tuning-<date>-<model>.json)")
    args = p.parse_args(argv)

    import onnx
    from tvm.relax.frontend.onnx import from_onnx
    from tvm.s_tir import meta_schedule as ms

    from taso_relay.cost.tuned import TunedCost
    from taso_relay.passes import TASOPass

    runs = []
    real = ms.tune.tune_tasks

    def counted(**kwargs):
        caller = [f"{f.name}:{f.lineno}" for f in traceback.extract_stack()[:-1] if "taso_relay" in f.filename]
        start = time.perf_counter()
        out = real(**kwargs)
        runs.append({"seconds": round(time.perf_counter() - start, 1),
                     "kernels": [t.task_name for t in kwargs["tasks"]], "called_from": caller[-4:]})
        print(f"run {len(runs)}: {len(kwargs['tasks'])} kernels, {runs[-1]['seconds']} s", flush=True)
        return out

    ms.tune.tune_tasks = counted
    work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="judge-tuning-"))
    mod = from_onnx(onnx.load(args.model), keep_params_in_input=False)
    judge = TunedCost(trials=args.trials, work_dir=work_dir)
    taso = TASOPass(cost=judge)
    start = time.perf_counter()
    taso(mod)
    seconds = time.perf_counter() - start
    reports = {name: {"status": r.status, "cost_before": r.cost_before, "cost_after": r.cost_after,
                      "summary": r.summary()} for name, r in taso.report.items()}
    log = next(iter((work_dir / "logs").glob("*task_scheduler.log")), None)
    result = {"model": args.model, "trials": args.trials, "pass_seconds": round(seconds, 1),
              "metaschedule_runs": runs, "kernels_tuned": judge.tunings,
              **(picking_seconds(log) if log else {}), "reports": reports,
              "date": datetime.date.today().isoformat()}
    name = Path(args.model).stem
    out = Path(args.out or REPO / "bench" / "results" / f"judge-tuning-{result['date']}-{name}.json")
    out.write_text(json.dumps(result, indent=1, default=str))
    print(f"{name}: pass {seconds:.0f} s, {len(runs)} MetaSchedule runs, {judge.tunings} kernels tuned -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
