"""Benchmark suite: TVM alone vs TVM's Relax rule passes vs TASOPass.

    python -m bench.run [--models resnet50 bert ...] [--tune-trials N] [--quick]
                        [--target '{"kind": "llvm", "num-cores": 2}'] [--rounds R]

Per model, three configurations under the same kernel treatment (see
``bench/harness``), timed in interleaved rounds with onnxruntime on the same
number of threads as an outside reference.  Writes
``bench/results/<date>-<target kind>-<mode>.json`` and ``.png`` and
regenerates the tables in ``bench/README.md`` and ``README.md``.
``--table-from FILE`` only regenerates tables and chart from an existing JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = REPO / "bench" / "results"
DEFAULT_WORK = REPO / "build" / "bench-tuning"
READMES = (REPO / "bench" / "README.md", REPO / "README.md")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", help="model names or ONNX files (default: all; --quick: a subset)")
    p.add_argument("--quick", action="store_true",
                   help="quick variants of a subset of models, few rounds (< 10 min on 2 cores)")
    p.add_argument("--tune-trials", type=int, default=0,
                   help="MetaSchedule trials per configuration (0: default lowering)")
    p.add_argument("--trials-per-task", type=int, default=0,
                   help="MetaSchedule, one database per model: every distinct kernel of every "
                        "configuration tuned once with this many trials (fairer than --tune-trials)")
    p.add_argument("--tasks-per-run", type=int, default=4,
                   help="kernels per MetaSchedule run with --trials-per-task: a run's records are saved only as it "
                        "ends, so an interrupted run loses at most this many kernels' tuning (a full model's "
                        "kernels take 1-2 min each at 64 trials on 2 cores)")
    p.add_argument("--target", default=None,
                   help='target as JSON, e.g. \'{"kind": "cuda"}\' (default: host llvm, all cores)')
    p.add_argument("--configs", nargs="+", default=None,
                   help="subset of tvm tvm_rules taso (tvm is always included)")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7; quick 5)")
    p.add_argument("--min-rounds", type=int, default=3)
    p.add_argument("--model-budget-s", type=float, default=None,
                   help="cap on timing seconds per model; lowers rounds (not below --min-rounds)")
    p.add_argument("--round-s", type=float, default=None,
                   help="minimum seconds per round and configuration (runs averaged)")
    p.add_argument("--taso-time-limit", type=float, default=None, help="TASOPass time_limit (s)")
    p.add_argument("--taso-cost", default=None, help="TASOPass cost model (default: its own)")
    p.add_argument("--taso-rules", default=None, help="TASOPass rules file")
    p.add_argument("--taso-layout", choices=("auto", "nhwc", "none"), default=None,
                   help="TASOPass(layout=...): also offer the result with every conv in this layout "
                        "(default: the pass's own, auto: nhwc with --taso-cost tuned)")
    p.add_argument("--taso-verify-speed", action=argparse.BooleanOptionalAction, default=None,
                   help="TASOPass(verify_speed=...): rewrites kept only if measured faster end to end "
                        "(default: the pass's own, on for the default lowering and --taso-cost tuned)")
    p.add_argument("--results-dir", default=str(DEFAULT_RESULTS))
    p.add_argument("--work-dir", default=str(DEFAULT_WORK), help="MetaSchedule work dirs")
    p.add_argument("--date", default=None, help="date in the file name (default: today, UTC)")
    p.add_argument("--readme", choices=("auto", "yes", "no"), default="auto",
                   help="regenerate README tables (auto: full runs into the default results dir)")
    p.add_argument("--table-from", default=None, help="only regenerate chart/tables from a JSON")
    return p.parse_args(argv)


def resolve_target(spec: str | None) -> dict:
    if spec:
        target = json.loads(spec)
        if isinstance(target, str):
            target = {"kind": target}
    else:
        target = {"kind": "llvm"}
    if target.get("kind") == "llvm":
        from bench.harness.env import cpu_count
        target.setdefault("num-cores", cpu_count())
    return target


def set_threads(target: dict) -> int:
    """TVM's and onnxruntime's thread count; must run before TVM starts its pool."""
    from bench.harness.env import cpu_count
    threads = int(target.get("num-cores") or os.environ.get("TVM_NUM_THREADS") or cpu_count())
    os.environ["TVM_NUM_THREADS"] = str(threads)
    return threads


def log(msg: str) -> None:
    print(f"[{dt.datetime.now(dt.timezone.utc).strftime('%H:%M:%S')}] {msg}", flush=True)


def finish_outputs(result: dict, json_path: Path, update_readmes: bool) -> None:
    from bench.harness import report
    result["summary"] = report.summarize(result)
    report.write_json(result, json_path)
    png = report.write_chart(result, json_path.with_suffix(".png"))
    log(f"wrote {json_path} and {png}")
    if not update_readmes:
        return
    key = report.marker_key(result["target_kind"])
    block = report.render_table(result)
    for readme in READMES:
        if report.update_readme(readme, key, block):
            log(f"table regenerated in {readme}")
        elif not readme.exists():
            log(f"note: {readme} does not exist; table not written there")
        else:
            log(f"note: {readme} has no <!-- {key}:start/end --> markers; table not written there")


def bench_model(name, args, target_dict, target, threads, run_id, options):
    """Runs one model through every configuration; returns its JSON entry."""
    import numpy as np
    import tvm

    from bench.harness import compile as hcompile
    from bench.harness import configs, env, measure, models
    from taso_relay.cost import host_speed

    t_model = time.perf_counter()
    onnx_model = models.build_model(name, quick=args.quick)
    name = models.label(name)
    input_name, shape, dtype = models.input_shape(onnx_model)
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    entry = {"name": name, "quick": args.quick, "input_shape": shape, "input_dtype": dtype,
             "onnx_nodes": len(onnx_model.graph.node), "configs": {}}
    t0 = time.perf_counter()
    imported = configs.import_onnx(onnx_model)
    entry["import_time_s"] = time.perf_counter() - t0
    kind = target.kind.name
    device = tvm.device("cpu" if kind in ("llvm", "c") else kind, 0)

    runners, outputs = {}, {}
    shared = hcompile.SharedTuning(target, args.trials_per_task, str(
        Path(args.work_dir) / run_id / name / "shared"), args.tasks_per_run) if args.trials_per_task else None
    tuning = args.tune_trials or args.trials_per_task
    if shared is not None and options.cost == "tuned":
        # TASOPass's tuned judge tunes into the model's shared database, with the same trials per kernel
        options = dataclasses.replace(options, cost=shared.model)
    for cfg in args.configs:
        log(f"{name}: {cfg}: graph passes + {'tuning' if tuning else 'lowering'}")
        c = {"status": "ok", "label": configs.CONFIG_LABELS[cfg]}
        try:
            with env.PeakRSS() as mem:
                mod, info = configs.apply_config(cfg, imported, target, options)
                c.update(info)
                if shared is not None:
                    ex, cinfo = shared.build(mod)
                else:
                    work = Path(args.work_dir) / run_id / name / cfg
                    ex, cinfo = hcompile.build(mod, target, args.tune_trials, str(work))
                c.update(cinfo)
            c["peak_rss_mb"] = mem.peak_mb
            c["rss_increase_mb"] = mem.peak_mb - mem.start_mb
            runner = measure.TVMRunner(ex, device, x)
            outputs[cfg] = runner.outputs()
            runners[cfg] = runner
        except configs.ConfigUnavailable as err:
            c = {"status": "unavailable", "label": configs.CONFIG_LABELS[cfg], "reason": str(err)}
            log(f"{name}: {cfg} unavailable: {err}")
        except Exception as err:  # one failing config must not lose the others
            c = {"status": "error", "label": configs.CONFIG_LABELS[cfg],
                 "error": f"{type(err).__name__}: {str(err)[:2000]}",
                 "traceback": traceback.format_exc()[-4000:]}
            log(f"{name}: {cfg} failed: {type(err).__name__}: {str(err)[:300]}")
        entry["configs"][cfg] = c
    if "tvm" not in runners:
        entry["status"] = "error"
        entry["error"] = entry["configs"]["tvm"].get("error", "TVM alone failed")
        return entry

    for cfg in runners:
        if cfg != "tvm":
            entry["configs"][cfg]["numerics_vs_tvm"] = measure.compare(outputs[cfg], outputs["tvm"])

    ort_entry = {"status": "ok", "threads": threads}
    try:
        ort = measure.ORTRunner(onnx_model.SerializeToString(), input_name, x, threads,
                                measure.ort_providers(kind))
        ort_entry["providers"] = ort.providers
        ort_entry["numerics_tvm_vs_onnxruntime"] = measure.compare(outputs["tvm"], ort.outputs())
        runners[measure.REFERENCE] = ort
    except Exception as err:
        ort_entry = {"status": "error", "error": f"{type(err).__name__}: {err}"}
    entry[measure.REFERENCE] = ort_entry

    # Calibrate runs per round, then pick the number of rounds for the budget.
    round_s = args.round_s if args.round_s is not None else (0.05 if args.quick else 0.2)
    per_round = sum(measure.calibrate(r, round_s) for r in runners.values())
    rounds = args.rounds
    if args.model_budget_s:
        rounds = max(args.min_rounds, min(rounds, int(args.model_budget_s / max(per_round, 1e-6))))
    log(f"{name}: timing {rounds} interleaved rounds of {list(runners)} (~{per_round:.2f}s/round)")

    def progress(r, n, last):
        log(f"{name}: round {r}/{n}: " + ", ".join(f"{k} {v * 1e3:.2f}ms" for k, v in last.items()))
    cpu: dict = {}
    on_cpu = kind in ("llvm", "c")  # a slowed host is what the probe sees (taso_relay/cost/host_speed.py)
    probes = [host_speed.probe_or_none()] if on_cpu else []
    times = measure.interleaved(runners, rounds, progress, cpu=cpu)
    probes = [p for p in probes + ([host_speed.probe_or_none()] if on_cpu else []) if p]
    try:  # only a note: a timing is never lost for it
        entry["host_probe"] = host_speed.against_best(probes) if probes else None
    except Exception:  # noqa: BLE001
        entry["host_probe"] = None
    if entry["host_probe"] and entry["host_probe"]["slowdown"] >= host_speed.SLOW:
        log(f"{name}: the host ran numpy's matmul and copy {entry['host_probe']['slowdown']:.2f}x slower than "
            "its best: something outside this process slowed it, and ratios may shift")
    summary = measure.summarize(times, "tvm", cpu)
    for cfg, s in summary.items():
        target_entry = entry[measure.REFERENCE] if cfg == measure.REFERENCE else entry["configs"][cfg]
        target_entry["timing"] = s
        target_entry["number"] = runners[cfg].number
        target_entry["timer"] = runners[cfg].timer
    entry["rounds"] = rounds
    entry["per_round_estimate_s"] = per_round
    entry["status"] = "ok"
    entry["wall_time_s"] = time.perf_counter() - t_model
    # Other processes on the machine disturb timings; the load shows how much.
    entry["load_average_after"] = [round(v, 2) for v in os.getloadavg()]
    return entry


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.table_from:
        from bench.harness import report
        result = report.load_json(args.table_from)
        result["notes"] = run_notes(result)
        finish_outputs(result, Path(args.table_from), args.readme != "no")
        return 0

    target_dict = resolve_target(args.target)
    threads = set_threads(target_dict)
    import tvm  # after TVM_NUM_THREADS is set

    from bench.harness import configs, env, models, report

    if target_dict.get("kind") == "llvm" and "mcpu" not in target_dict:
        # Same instruction set as onnxruntime uses on this host.
        target_dict["mcpu"] = tvm.target.codegen.llvm_get_system_cpu()
    target = tvm.target.Target(target_dict)
    kind = report.target_kind(target_dict)

    args.configs = ["tvm"] + [c for c in (args.configs or configs.CONFIG_NAMES[1:])
                              if c != "tvm" and c in configs.CONFIG_NAMES]
    if args.rounds is None:
        args.rounds = 5 if args.quick else 7
    if args.model_budget_s is None:
        args.model_budget_s = 60.0 if args.quick else 300.0
    names = args.models or (list(models.QUICK_MODELS) if args.quick
                            else models.available_models())
    options = configs.Options(
        cost=args.taso_cost, rules=args.taso_rules, verify_speed=args.taso_verify_speed, layout=args.taso_layout,
        time_limit=args.taso_time_limit,
        lowering="tuning" if args.tune_trials or args.trials_per_task else "default")
    if args.tune_trials and args.trials_per_task:
        raise SystemExit("--tune-trials and --trials-per-task are two methods: give one")
    if args.taso_cost == "tuned" and not (args.tune_trials or args.trials_per_task):
        raise SystemExit("--taso-cost tuned prices MetaSchedule's kernels, but this run builds with the default "
                         "lowering: add --trials-per-task N")

    date = args.date or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    mode = report.mode_name(args.quick, args.tune_trials, args.trials_per_task)
    json_path = report.result_path(args.results_dir, date, kind, mode)
    run_id = f"{date}-{kind}-{mode}"
    update_readmes = args.readme == "yes" or (
        args.readme == "auto" and not args.quick
        and Path(args.results_dir).resolve() == DEFAULT_RESULTS.resolve())

    result = {
        "schema": 1,
        "file": os.path.relpath(json_path, REPO) if str(json_path.resolve()).startswith(
            str(REPO)) else str(json_path),
        "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:]),
        "mode": mode,
        "quick": args.quick,
        "target": target_dict,
        "target_kind": kind,
        "kernel_treatment": f"MetaSchedule {args.tune_trials} trials" if args.tune_trials
        else f"MetaSchedule, {args.trials_per_task} trials per distinct kernel, one database "
             "shared by the configurations" if args.trials_per_task
        else "default lowering (no schedules)" if kind == "cpu" else "default (DLight) schedules",
        "tune_trials": args.tune_trials,
        "trials_per_task": args.trials_per_task,
        "threads": threads,
        "rounds": args.rounds,
        "configs": {c: configs.CONFIG_LABELS[c] for c in args.configs},
        "rule_passes": configs.RULE_PASS_NAMES,
        "taso_options": {"cost": options.cost, "time_limit": options.time_limit,
                         "rules": options.rules, "verify_speed": options.verify_speed, "layout": options.layout},
        "machine": env.machine(kind),
        "versions": env.versions(),
        "models": [],
        "notes": [],
    }
    log(f"bench: {names} on {target_dict} ({mode}, {threads} threads) -> {json_path}")
    t_all = time.perf_counter()
    for name in names:
        try:
            entry = bench_model(name, args, target_dict, target, threads, run_id, options)
        except Exception as err:
            entry = {"name": name, "quick": args.quick, "status": "error",
                     "error": f"{type(err).__name__}: {str(err)[:2000]}",
                     "traceback": traceback.format_exc()[-4000:]}
            log(f"{name} failed: {entry['error'][:300]}")
        result["models"].append(entry)
        result["total_time_s"] = time.perf_counter() - t_all
        result["peak_rss_mb_process"] = env.max_rss_mb()
        result["notes"] = run_notes(result)
        result["summary"] = report.summarize(result)
        report.write_json(result, json_path)  # partial results survive an interruption
        gc.collect()
    finish_outputs(result, json_path, update_readmes)
    print(report.render_table(result))
    return 0 if all(m.get("status") == "ok" for m in result["models"]) else 1


def run_notes(result: dict) -> list[str]:
    """Plain statements a reader of the table needs (unavailable/no-op TASO, noise)."""
    notes = []
    spreads = []
    for m in result["models"]:
        t = ((m.get("configs") or {}).get("tvm") or {}).get("timing")
        if t and t["median_ms"] > 0:
            spreads.append((t["max_ms"] - t["min_ms"]) / t["median_ms"])
    loads = [m["load_average_after"][0] for m in result["models"] if m.get("load_average_after")]
    if spreads:
        notes.append(f"Round-to-round spread of TVM alone (max-min)/median: up to "
                     f"{max(spreads) * 100:.0f}%; 1-min load average after each model: "
                     f"{min(loads, default=0):.1f}-{max(loads, default=0):.1f} on "
                     f"{result['machine'].get('cpu_cores_available')} cores. Ratios within "
                     "that spread are not significant.")
    from taso_relay.cost.host_speed import SLOW as SLOW_HOST

    slow = [(m["name"], m["host_probe"]["slowdown"]) for m in result["models"] if m.get("host_probe")]
    slow = [(n, s) for n, s in slow if s >= SLOW_HOST]
    if slow:
        notes.append("The host ran numpy's matmul and copy (taso_relay/cost/host_speed.py) up to "
                     f"{max(s for _, s in slow):.2f}x slower than the fastest it has run it, while timing "
                     f"{', '.join(n for n, _ in slow)}: something outside this process slowed it (the load "
                     "average need not show it). Such a slowdown is not even across kernels: ratios from "
                     "this run may not hold on a quiet host.")
    taso = [m["configs"].get("taso", {}) for m in result["models"] if m.get("configs")]
    if taso and all(t.get("status") == "unavailable" for t in taso):
        notes.append("TASOPass was not available in this run: " + taso[0].get("reason", ""))
    elif taso:
        ok = [t for t in taso if t.get("status") == "ok"]
        if ok and all(t.get("structurally_unchanged") for t in ok):
            aa = [t["timing"]["speedup"] for t in ok if t.get("timing")]
            spread = (f" Its deviation from 1.00× ({min(aa):.2f}-{max(aa):.2f}×) is therefore "
                      "pure measurement noise (an A/A control)." if aa else "")
            notes.append("TASOPass ran but returned every model unchanged (no rewrites applied); "
                         "its timings measure the same graph as TVM alone." + spread)
        speed = []
        for m in result["models"]:
            for name, fr in (((m.get("configs") or {}).get("taso") or {}).get("report") or {}).items():
                sp = fr.get("speed") if isinstance(fr, dict) else None
                if isinstance(sp, dict) and fr.get("rejected_by") == "speed" and fr.get("status") == "rejected":
                    speed.append(f"{m['name']} ({sp.get('before_s', 0) * 1e3:.4g} -> "
                                 f"{sp.get('after_s', 0) * 1e3:.4g} ms)")
        if speed:
            notes.append("verify_speed measured the search's rewrites and kept the original where they "
                         "were not at least min_gain faster: " + ", ".join(speed) + ".")
    bad = [f"{m['name']}/{c}" for m in result["models"]
           for c, e in (m.get("configs") or {}).items()
           if (e.get("numerics_vs_tvm") or {}).get("ok") is False]
    if bad:
        notes.append("numerics differ from TVM alone beyond tolerance: " + ", ".join(bad))
    if result["kernel_treatment"].startswith("default lowering"):
        notes.append("Default CPU lowering applies no schedules: absolute TVM times are far "
                     "behind onnxruntime; the configuration ratios are the point.")
    return notes


if __name__ == "__main__":
    sys.exit(main())
