"""Does the search's time limit cut it short? The same search at two time limits, side by side.

    PYTHONPATH=. python -m bench.search_convergence                       # all models, limits 8 and 40 s
    PYTHONPATH=. python -m bench.search_convergence --lowering tuning --models bert nasrnn --quick

TASOPass searches for 8 s by default (the issue's target is under 10 s per
model; TASO took 13.6 s on BERT and 1226 s on NasNet-A). If a longer search
found a cheaper graph, the limit would cost speed. Per model and limit this
prints the cost before and after (the analytic model of `--lowering`), when the
returned graph was first reached, how many graphs were expanded and why the
search stopped. Costs are predictions, not timings, so a busy machine only
changes how far a search gets in its time, which the output shows.
`--patience 0` lets a search run to its limit or budget even when it has found
nothing cheaper for a while (the reference a default `patience` is checked
against). `--json FILE` also writes the rows.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=None, help="default: every benchmark model")
    p.add_argument("--quick", action="store_true", help="the models' quick variants")
    p.add_argument("--limits", nargs="+", type=float, default=[8.0, 40.0], metavar="S")
    p.add_argument("--budget", type=int, default=None, help="expansions (default: the search's own)")
    p.add_argument("--patience", type=int, default=None,
                   help="expansions without a cheaper graph before it stops (default: the search's own; 0: never)")
    p.add_argument("--lowering", choices=("default", "tuning"), default="default")
    p.add_argument("--json", default=None, metavar="FILE")
    args = p.parse_args(argv)

    from bench.harness.configs import import_onnx
    from bench.harness.models import available_models, build_model
    from taso_relay.bridge.from_relax import graph_from_function
    from taso_relay.cost import AnalyticCost
    from taso_relay.passes import resolve_rules
    from taso_relay.search import DEFAULT_BUDGET, DEFAULT_PATIENCE, optimize

    rules = resolve_rules(None)
    patience = DEFAULT_PATIENCE if args.patience is None else args.patience
    rows = []
    for name in args.models or available_models():
        imported = import_onnx(build_model(name, quick=args.quick))
        graph = graph_from_function(imported.bound["main"], "main").graph
        for limit in args.limits:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                _, report = optimize(graph, rules, AnalyticCost(lowering=args.lowering), time_limit=limit,
                                     budget=args.budget or DEFAULT_BUDGET, patience=patience,
                                     saturate_merges=args.lowering == "tuning")
            row = {"model": name + (" (quick)" if args.quick else ""), "lowering": args.lowering,
                   "time_limit_s": limit, "patience": patience, "seconds": round(time.perf_counter() - start, 2),
                   "cost_before": report.cost_before, "cost_after": report.cost_after,
                   "improvement": None if report.improvement is None else round(report.improvement, 4),
                   "rewrites": len(report.applied),
                   "best_found_after_s": round(report.best_found_after, 2), "expansions": report.expansions,
                   "stopped_by": report.stopped_by, "load_avg": [round(x, 2) for x in os.getloadavg()]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            command = "python -m bench.search_convergence " + " ".join(sys.argv[1:] if argv is None else argv)
            json.dump({"command": command, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
