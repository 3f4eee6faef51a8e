"""`taso-relay cost show`: what the cost models say about a model's kernels, or what the cost cache holds.

    taso-relay cost show MODEL.onnx [--cost analytic|measured|tuned] [--top N]
    taso-relay cost show --cache
    taso-relay cost clear [--cache-file F] [--target JSON]
    taso-relay cost peaks [--remeasure] [--json]
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from . import common


def add_cost(sub) -> None:
    import importlib.util

    if importlib.util.find_spec("taso_relay.cost.protocol") is None:
        return  # the cost package is not there: no subcommand
    p = sub.add_parser("cost", help="inspect cost models and the cost cache")
    inner = p.add_subparsers(dest="cost_command", metavar="{show,clear,peaks}")
    inner.required = True
    show = inner.add_parser("show", help="cost of a model's kernels (as TVM fuses them), or the cache's contents",
                            description=common.description(__doc__))
    show.add_argument("model", type=Path, nargs="?", metavar="MODEL.onnx", help="the ONNX model")
    show.add_argument("--input-shape", action="append", default=[], metavar="NAME:D1,D2,...",
                      help="pin the shape of an input with dynamic dimensions (repeatable)")
    common.add_target_argument(show)
    show.add_argument("--cost", choices=common.COST_MODELS, default="analytic",
                      help="cost model (default analytic: no compilation)")
    show.add_argument("--trials", type=int, default=32, metavar="N", help="MetaSchedule trials per kernel (tuned)")
    show.add_argument("--top", type=int, default=20, metavar="N", help="kernels listed, costliest first")
    show.add_argument("--cache", action="store_true", help="summarise the on-disk cost cache instead")
    show.add_argument("--cache-file", type=Path, default=None, metavar="FILE", help="cost cache (default: user cache)")
    show.set_defaults(run=run_cost_show)
    _add_cache_commands(inner)


def _add_cache_commands(inner) -> None:
    """`clear` and `peaks` as taso_relay.cost.cli defines them (its `show` is `show --cache` here)."""
    from ..cost.cli import add_clear_and_peaks

    add_clear_and_peaks(inner)


def _model(name: str, target, module, args):
    if name == "analytic":
        from ..cost.analytic import AnalyticCost
        model = AnalyticCost()
        model.set_module(module)
        return model
    kwargs = {"module": module}
    if args.cache_file is not None:
        kwargs["cache"] = str(args.cache_file)
    if name == "measured":
        from ..cost.measured import MeasuredCost
        return MeasuredCost(target, **kwargs)
    from ..cost.tuned import TunedCost
    return TunedCost(target, trials=args.trials, **kwargs)


def run_cost_show(args) -> int:
    if args.cache:
        return _show_cache(args)
    if args.model is None:
        raise common.InputError("cost show needs MODEL.onnx (or --cache)")
    import warnings

    from ..bridge import graph_from_function

    target = common.parse_target(args.target)
    prepared = common.prepare_model(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imported = graph_from_function(prepared.mod["main"], "main", prepared.mod)
    if imported is None:
        raise common.InputError(f"{args.model}: the model's main function has no graph form")
    model = _model(args.cost, target, prepared.mod, args)
    kernels = model.kernels(imported.graph)
    if hasattr(model, "prefetch"):
        model.prefetch(kernels)
    rows = sorted(((model.kernel_cost(k), k) for k in kernels), key=lambda r: -r[0])
    total = sum(c for c, _ in rows)
    result = {"model": str(args.model), "cost_model": args.cost, "target": common.target_json(target),
              "total_ms": total * 1e3, "kernels": len(rows),
              "top": [{"kernel": k.describe(), "ms": c * 1e3} for c, k in rows[:args.top]]}
    if args.json:
        common.print_json(result)
        return 0
    print(f"model    {args.model}: {len(rows)} kernels, {args.cost} cost on {common.target_summary(target)}")
    print(f"total    {total * 1e3:.4f} ms")
    for cost, kernel in rows[:args.top]:
        share = 100 * cost / total if total else 0.0
        print(f"  {cost * 1e3:10.4f} ms {share:5.1f}%  {kernel.describe()}")
    if len(rows) > args.top:
        print(f"  ... {len(rows) - args.top} more (--top N)")
    return 0


def _show_cache(args) -> int:
    from ..cost.cache import CostCache

    cache = CostCache(args.cache_file) if args.cache_file else CostCache()
    entries = cache.entries()
    by = Counter((e.method, e.device) for e in entries)
    targets = Counter(e.target for e in entries)
    result = {"path": str(getattr(cache, "path", args.cache_file)), "entries": len(entries),
              "by_method": [{"method": m, "device": d, "entries": n} for (m, d), n in sorted(by.items())],
              "targets": dict(targets)}
    if args.json:
        common.print_json(result)
        return 0
    print(f"cache    {result['path']}: {len(entries)} kernel timings")
    for (method, device), n in sorted(by.items()):
        print(f"  {n:6d}  {method} on {device}")
    for target, n in targets.most_common(5):
        print(f"  {n:6d}  target {target}")
    return 0
