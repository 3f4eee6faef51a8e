"""How well the measured cost model predicts what TVM really runs.

    python -m bench.cost_accuracy [--models resnet50 bert ...] [--quick] [--lowering default|tuning]
                                  [--target JSON] [--rounds R] [--cache FILE] [--no-ranking]

For every benchmark model (bench.models): import the ONNX model with
`from_onnx(keep_params_in_input=False)`, convert it to a Graph with the
bridge, predict its latency with `MeasuredCost` (each distinct kernel
compiled alone and timed), then compile the whole model with the same
lowering and time it end to end. Reported per model: predicted and measured
latency (wall-clock medians) and their ratio; kernels predicted against
kernel launches in TVM's lowered module; time spent predicting (cold: kernels
measured, warm: served from the cache); and, per run, the process CPU time
of the whole model, which other processes competing for the cores distort
far less than wall time (the default lowering runs every kernel on one
thread, so CPU time is the uncontended latency).

Ranking check: pairs of alternative graphs the search chooses between -- two
parallel convs separate or merged into one conv + split (TASO's signature
rewrite) at several sizes, a 1x1 conv enlarged to merge with a 3x3 one,
three matmuls of one input merged, a Gemm rewritten with activation
transposes: does the model order each pair as their measured latencies do?
A pair whose measured latencies differ by less than the noise (3%) is a tie
and counts as agreement either way.

Writes bench/results/cost-accuracy-<date>-<lowering>[-quick].json and prints a table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TIE = 0.03  # relative latency difference below which a pair counts as a tie
# (c, hw, kernel) of the parallel-conv pairs: early, middle and late CNN stages.
RANKING_SHAPES = [(32, 56, 3), (128, 14, 3), (256, 7, 1)]


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.cost_accuracy", description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=None, help="benchmark models (default: all)")
    p.add_argument("--quick", action="store_true", help="the models' quick variants")
    p.add_argument("--lowering", choices=("default", "tuning"), default="default",
                   help="default: relax.get_default_pipeline; tuning: static_shape_tuning's passes, no trials")
    p.add_argument("--target", default=None, help='target JSON (default: {"kind": "llvm", "num-cores": N})')
    p.add_argument("--rounds", type=int, default=7, help="end-to-end runs per model (median)")
    p.add_argument("--cache", default=None,
                   help="cost cache file (default: a fresh one, so kernels are measured in this session)")
    p.add_argument("--no-ranking", action="store_true", help="skip the separate-vs-merged ranking check")
    p.add_argument("--warm-search", default="resnet50", metavar="MODEL",
                   help="model on which to time the cost model inside a warm search run ('' to skip)")
    p.add_argument("--search-time", type=float, default=60.0, help="search time limit for --warm-search (s)")
    p.add_argument("--results-dir", default=str(REPO / "bench" / "results"))
    p.add_argument("--out", default=None, help="JSON file (default: results dir, dated)")
    return p.parse_args(argv)


def default_target(spec: str | None) -> dict:
    if spec:
        return json.loads(spec)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return {"kind": "llvm", "num-cores": cores}


# ---- timing the whole model ---------------------------------------------------------------
def time_model(executable, inputs, rounds: int) -> dict:
    """Median wall and CPU (process) seconds of `rounds` single runs, after a warm-up run."""
    import tvm
    from tvm import relax

    dev = tvm.cpu()
    vm = relax.VirtualMachine(executable, dev)
    vm.set_input("main", *[tvm.runtime.tensor(a, dev) for a in inputs])
    vm.invoke_stateful("main")
    walls, cpus = [], []
    for _ in range(rounds):
        c0, w0 = time.process_time(), time.perf_counter()
        vm.invoke_stateful("main")
        dev.sync()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "wall_runs": walls,
            "cpu_runs": cpus}


def kernel_cpu_times(model, kernels, runs: int = 3) -> float:
    """Sum over kernels of the median process CPU time of one run (the uncontended prediction)."""
    import tvm
    from tvm import relax

    total = 0.0
    seen: dict[str, float] = {}
    for k in kernels:
        if k.key not in seen:
            ex, inputs = model.build(k)
            dev = tvm.cpu()
            vm = relax.VirtualMachine(ex, dev)
            vm.set_input("main", *[tvm.runtime.tensor(a, dev) for a in inputs])
            vm.invoke_stateful("main")
            cpus = []
            for _ in range(runs):
                c0 = time.process_time()
                vm.invoke_stateful("main")
                cpus.append(time.process_time() - c0)
            seen[k.key] = statistics.median(cpus)
        total += seen[k.key]
    return total


# ---- one model -------------------------------------------------------------------------------
def run_model(name: str, args, target, cache_path: str) -> dict:
    import tvm
    from tvm.relax.frontend.onnx import from_onnx

    from bench.models import build
    from taso_relay.bridge import graph_from_function
    from taso_relay.cost.lowering import compile_module, count_kernels, lower
    from taso_relay.cost.measured import MeasuredCost

    t0 = time.perf_counter()
    mod = from_onnx(build(name, quick=args.quick), keep_params_in_input=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imported = graph_from_function(mod["main"])
    if imported is None:
        return {"model": name, "error": "no graph form"}
    graph = imported.graph
    import_s = time.perf_counter() - t0

    model = MeasuredCost(target, cache=cache_path, module=mod, lowering=args.lowering)
    t0 = time.perf_counter()
    predicted = model.graph_cost(graph)
    cold_s = time.perf_counter() - t0
    warm = MeasuredCost(target, cache=cache_path, module=mod, lowering=args.lowering)
    t0 = time.perf_counter()
    assert warm.graph_cost(graph) == predicted
    warm_s = time.perf_counter() - t0
    kernels = model.kernels(graph)

    tvm_launches = count_kernels(lower(mod, target, lowering=args.lowering))
    executable = compile_module(mod, target, lowering=args.lowering)
    rng = np.random.default_rng(0)
    inputs = []
    for p in mod["main"].params:
        shape = [int(d) for d in p.ty.shape]
        inputs.append(rng.uniform(0, 1, shape).astype(str(p.ty.dtype)))
    measured = time_model(executable, inputs, args.rounds)
    predicted_cpu = kernel_cpu_times(model, kernels)

    rows = sorted(model.breakdown(graph), key=lambda kc: -kc[1])
    return {
        "model": name, "nodes": len(graph.nodes), "kernels_predicted": len(kernels),
        "kernel_launches_tvm": tvm_launches, "distinct_kernels": len({k.key for k in kernels}),
        "predicted_s": predicted, "measured_s": measured["wall_s"], "ratio": predicted / measured["wall_s"],
        "predicted_cpu_s": predicted_cpu, "measured_cpu_s": measured["cpu_s"],
        "ratio_cpu": predicted_cpu / measured["cpu_s"] if measured["cpu_s"] > 0 else None,
        "measured_runs_s": measured["wall_runs"], "measured_cpu_runs_s": measured["cpu_runs"],
        "predict_cold_s": cold_s, "predict_warm_s": warm_s, "import_s": import_s,
        "kernels_compiled": model.compiles, "failures": model.failures,
        "top_kernels": [{"kernel": k.describe(), "predicted_ms": c * 1e3} for k, c in rows[:8]],
    }


# ---- ranking: alternatives the search chooses between ----------------------------------------------
def _weight(b, rng, name, shape):
    return b.weight(name, shape, value=(rng.standard_normal(shape) * 0.05).astype("float32"))


def parallel_convs(c: int, hw: int, k: int, merged: bool):
    """Two convs of one input, separate or merged into one conv over concatenated weights + split."""
    from taso_relay.graph import GraphBuilder

    b, rng = GraphBuilder(), np.random.default_rng(0)
    x = b.input("x", (1, c, hw, hw))
    ws = [_weight(b, rng, f"w{i}", (c, c, k, k)) for i in range(2)]
    pad = (k // 2,) * 4
    if merged:
        ys = list(b.op("split", b.op("conv2d", x, b.op("concat", *ws, axis=0), padding=pad), axis=1, sizes=(c, c)))
    else:
        ys = [b.op("conv2d", x, w, padding=pad) for w in ws]
    ys = [b.op("relu", y) for y in ys]
    return b.build([b.op("add", ys[0], ys[1])])  # one consumer of both, as in a real block


def enlarged_convs(c: int, hw: int, merged: bool):
    """A 1x1 and a 3x3 conv of one input; merged: the 1x1 kernel enlarged to 3x3 first (TASO)."""
    from taso_relay.graph import GraphBuilder

    b, rng = GraphBuilder(), np.random.default_rng(0)
    x = b.input("x", (1, c, hw, hw))
    w1, w3 = _weight(b, rng, "w1", (c, c, 1, 1)), _weight(b, rng, "w3", (c, c, 3, 3))
    if merged:
        w = b.op("concat", b.op("enlarge", w1, kernel=(3, 3)), w3, axis=0)
        ys = list(b.op("split", b.op("conv2d", x, w, padding=(1, 1, 1, 1)), axis=1, sizes=(c, c)))
    else:
        ys = [b.op("conv2d", x, w1), b.op("conv2d", x, w3, padding=(1, 1, 1, 1))]
    return b.build([b.op("add", b.op("relu", ys[0]), b.op("relu", ys[1]))])


def qkv_matmuls(seq: int, d: int, merged: bool):
    """Three projections of one input (attention's Q, K, V), separate or as one matmul + split."""
    from taso_relay.graph import GraphBuilder

    b, rng = GraphBuilder(), np.random.default_rng(0)
    x = b.input("x", (seq, d))
    ws = [_weight(b, rng, f"w{i}", (d, d)) for i in range(3)]
    if merged:
        ys = list(b.op("split", b.op("matmul", x, b.op("concat", *ws, axis=1)), axis=1, sizes=(d, d, d)))
    else:
        ys = [b.op("matmul", x, w) for w in ws]
    return b.build([b.op("add", b.op("mul", ys[0], ys[1]), ys[2])])


def gemm_transposes(n: int, d: int, merged: bool):
    """x @ W^T (the transpose folds), against (W @ x^T)^T (two activation transposes)."""
    from taso_relay.graph import GraphBuilder

    b, rng = GraphBuilder(), np.random.default_rng(0)
    x = b.input("x", (n, d))
    w = _weight(b, rng, "w", (d, d))
    if merged:
        y = b.op("transpose", b.op("matmul", w, b.op("transpose", x, perm=(1, 0))), perm=(1, 0))
    else:
        y = b.op("matmul", x, b.op("transpose", w, perm=(1, 0)))
    return b.build([b.op("relu", y)])


# (name, builder(merged) -> Graph, input shape); "merged" is the rewritten alternative
RANKING_PAIRS = [
    *[(f"2 x conv{k}x{k} {c}->{c} on {hw}x{hw}: separate / merged", (lambda c, hw, k: lambda m: parallel_convs(
        c, hw, k, m))(c, hw, k), (1, c, hw, hw)) for c, hw, k in RANKING_SHAPES],
    *[(f"conv1x1 + conv3x3 {c} on {hw}x{hw}: separate / enlarged+merged",
       (lambda c, hw: lambda m: enlarged_convs(c, hw, m))(c, hw), (1, c, hw, hw)) for c, hw in [(64, 28), (128, 14)]],
    *[(f"3 x matmul {seq}x{d}x{d}: separate / merged", (lambda seq, d: lambda m: qkv_matmuls(seq, d, m))(seq, d),
       (seq, d)) for seq, d in [(64, 256), (128, 512)]],
    ("matmul 128x256 by W^T: folded / via activation transposes", lambda m: gemm_transposes(128, 256, m), (128, 256)),
]


def run_ranking(args, target, cache_path: str) -> list[dict]:
    from taso_relay.bridge import module_from_graph
    from taso_relay.cost.lowering import compile_module
    from taso_relay.cost.measured import MeasuredCost

    out = []
    for name, make, shape in RANKING_PAIRS:
        row = {"pair": name}
        for variant in ("separate", "merged"):
            graph = make(variant == "merged")
            model = MeasuredCost(target, cache=cache_path, lowering=args.lowering)
            row[f"{variant}_predicted_s"] = model.graph_cost(graph)
            row[f"{variant}_kernels"] = [kk.label for kk in model.kernels(graph)]
            ex = compile_module(module_from_graph(graph), target, lowering=args.lowering)
            x = np.random.default_rng(1).uniform(0, 1, shape).astype("float32")
            timing = time_model(ex, [x], max(args.rounds, 7))
            row[f"{variant}_measured_s"] = timing["wall_s"]
            row[f"{variant}_measured_cpu_s"] = timing["cpu_s"]
        pred = row["merged_predicted_s"] / row["separate_predicted_s"] - 1
        meas = row["merged_measured_s"] / row["separate_measured_s"] - 1
        cpu = row["merged_measured_cpu_s"] / row["separate_measured_cpu_s"] - 1
        row.update(predicted_change=pred, measured_change=meas, measured_cpu_change=cpu,
                   agrees=abs(meas) < TIE or (pred < 0) == (meas < 0),
                   agrees_cpu=abs(cpu) < TIE or (pred < 0) == (cpu < 0),
                   tie=abs(meas) < TIE)
        out.append(row)
    return out


# ---- time in the cost model during a warm search ---------------------------------------------
def warm_search(name: str, args, target, cache_path: str) -> dict:
    """Run the TASO search twice on a model; the second (warm) run's time inside the cost model."""
    from tvm.relax.frontend.onnx import from_onnx

    from bench.models import build
    from taso_relay.bridge import graph_from_function
    from taso_relay.cost.measured import MeasuredCost
    from taso_relay.search import optimize
    from taso_relay.subst.rule_io import default_rules, load_rules, shipped_rules_dir

    mod = from_onnx(build(name, quick=args.quick), keep_params_in_input=False)
    graph = graph_from_function(mod["main"]).graph
    rules, which = default_rules(), "proved"
    if not rules:  # no proven rules shipped yet: all generated rules (the search only needs the matcher)
        rules, which = [r for p in sorted(shipped_rules_dir().glob("*.json")) if not p.name.endswith(
            ".report.json") for r in load_rules(p)], "all (none proved yet)"
    runs = []
    for label in ("cold", "warm"):
        model = MeasuredCost(target, cache=cache_path, module=mod, lowering=args.lowering)
        t0 = time.perf_counter()
        _best, report = optimize(graph, rules, model, time_limit=args.search_time)
        runs.append({"run": label, "search_s": time.perf_counter() - t0, "cost_model_s": model.stats.seconds,
                     "graph_costs": model.stats.graph_calls, "graph_costs_memoised": model.stats.graph_hits,
                     "kernels_costed": model.stats.computed, "kernels_compiled": model.compiles})
    return {"model": name, "rules": len(rules), "rule_set": which, "time_limit_s": args.search_time, "runs": runs}


# ---- report ---------------------------------------------------------------------------------------
def print_report(result: dict) -> None:
    print(f"\ncost model accuracy -- lowering {result['lowering']}, target {json.dumps(result['target'])}, "
          f"{'quick' if result['quick'] else 'full'} models, load average {result['load_average_start']} -> "
          f"{result['load_average_end']}")
    head = (f"{'model':14} {'kernels':>11} {'predicted':>11} {'measured':>11} {'ratio':>6}   "
            f"{'pred cpu':>10} {'meas cpu':>10} {'ratio':>6}   {'cold':>7} {'warm':>7}")
    print(head)
    print("-" * len(head))
    for r in result["models"]:
        if "error" in r:
            print(f"{r['model']:14} error: {r['error']}")
            continue
        ratio_cpu = f"{r['ratio_cpu']:6.2f}" if r["ratio_cpu"] else "     -"
        print(f"{r['model']:14} {r['kernels_predicted']:>5}/{r['kernel_launches_tvm']:<5} "
              f"{r['predicted_s'] * 1e3:9.2f}ms {r['measured_s'] * 1e3:9.2f}ms {r['ratio']:6.2f}   "
              f"{r['predicted_cpu_s'] * 1e3:8.2f}ms {r['measured_cpu_s'] * 1e3:8.2f}ms {ratio_cpu}   "
              f"{r['predict_cold_s']:6.1f}s {r['predict_warm_s'] * 1e3:5.1f}ms")
    if result.get("ranking"):
        print("\nranking of alternative graphs: change = second / first - 1 (ties: |measured| < 3%)")
        for r in result["ranking"]:
            mark = "tie" if r["tie"] else ("agree" if r["agrees"] else "DISAGREE")
            print(f"  {r['pair']:58} predicted {r['predicted_change'] * 100:+7.1f}%  measured "
                  f"{r['measured_change'] * 100:+7.1f}% (cpu {r['measured_cpu_change'] * 100:+7.1f}%)  {mark}")
    ws = result.get("warm_search")
    if ws and "runs" in ws:
        for r in ws["runs"]:
            print(f"\n{r['run']} search on {ws['model']} ({ws['rules']} rules, {ws['time_limit_s']:.0f} s limit): "
                  f"{r['cost_model_s']:.2f} s of {r['search_s']:.1f} s in the cost model, {r['graph_costs']} graph "
                  f"costs, {r['kernels_compiled']} kernels compiled", end="")
        print()
    elif ws:
        print(f"\nwarm search on {ws['model']}: {ws['error']}")
    s = result["summary"]
    print(f"\nwithin 25% (wall): {s['within_25pct']}/{s['models']}; within 25% (cpu): {s['within_25pct_cpu']}/"
          f"{s['models']}; ranking agrees: {s['ranking_agrees']}/{s['ranking_pairs']}")


def main(argv=None) -> int:
    args = parse_args(argv)
    target = default_target(args.target)
    os.environ.setdefault("TVM_NUM_THREADS", str(target.get("num-cores", "")) or "1")
    from bench.models import MODELS

    names = args.models or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s): {unknown}; known: {list(MODELS)}", file=sys.stderr)
        return 2
    workdir = tempfile.mkdtemp(prefix="cost-accuracy-")
    cache_path = args.cache or os.path.join(workdir, "costs.sqlite")
    result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "lowering": args.lowering,
              "target": target, "quick": args.quick, "rounds": args.rounds, "cache": cache_path,
              "load_average_start": [round(v, 2) for v in os.getloadavg()], "models": []}
    for name in names:
        print(f"[{name}] ...", flush=True)
        try:
            row = run_model(name, args, target, cache_path)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next model
            row = {"model": name, "error": f"{type(exc).__name__}: {exc}"}
        result["models"].append(row)
        if "error" not in row:
            print(f"[{name}] predicted {row['predicted_s'] * 1e3:.2f} ms, measured {row['measured_s'] * 1e3:.2f} ms "
                  f"(ratio {row['ratio']:.2f}; cpu ratio {row['ratio_cpu']:.2f})", flush=True)
    if not args.no_ranking:
        print("[ranking] ...", flush=True)
        result["ranking"] = run_ranking(args, target, cache_path)
    if args.warm_search:
        print(f"[warm search on {args.warm_search}] ...", flush=True)
        try:
            result["warm_search"] = warm_search(args.warm_search, args, target, cache_path)
        except Exception as exc:  # noqa: BLE001
            result["warm_search"] = {"model": args.warm_search, "error": f"{type(exc).__name__}: {exc}"}
    result["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
    ok = [r for r in result["models"] if "error" not in r]
    ranking = result.get("ranking", [])
    result["summary"] = {
        "models": len(ok),
        "within_25pct": sum(abs(r["ratio"] - 1) <= 0.25 for r in ok),
        "within_25pct_cpu": sum(r["ratio_cpu"] is not None and abs(r["ratio_cpu"] - 1) <= 0.25 for r in ok),
        "kernel_counts_match": sum(r["kernels_predicted"] == r["kernel_launches_tvm"] for r in ok),
        "ranking_pairs": len(ranking), "ranking_agrees": sum(r["agrees"] for r in ranking),
        "ranking_agrees_cpu": sum(r["agrees_cpu"] for r in ranking),
    }
    out = Path(args.out) if args.out else Path(args.results_dir) / (
        f"cost-accuracy-{dt.date.today().isoformat()}-{args.lowering}{'-quick' if args.quick else ''}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print_report(result)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
