"""`taso-relay cost ...`: look into the cost cache and the machine peaks.

    taso-relay cost show [--cache-file F] [--method M] [--device D] [--target T] [--limit N] [--json]
    taso-relay cost clear [--cache-file F] [--target T]
    taso-relay cost peaks [--remeasure] [--json]

`add_cost_commands(subparsers)` adds the `cost` command to an argparse
subparsers object and returns its own subparsers (so more `cost` subcommands
can be added next to these). Each handler is set as `run` (and `func`), takes
the parsed args and returns an exit status.
"""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

from .contention import contended


def add_cost_commands(subparsers) -> argparse._SubParsersAction:
    cost = subparsers.add_parser("cost", help="inspect the kernel cost cache and machine peaks",
                                 description=__doc__.split("\n\n")[0])
    inner = cost.add_subparsers(dest="cost_command", metavar="{show,clear,peaks}")
    inner.required = True

    show = inner.add_parser("show", help="list the cached kernel timings")
    _cache_file(show)
    show.add_argument("--method", default=None, help="only methods starting with this (measured, tuned, ...)")
    show.add_argument("--device", default=None, help="only this device (local, rpc:KEY)")
    show.add_argument("--target", default=None, metavar="TEXT", help="only targets whose JSON contains TEXT")
    show.add_argument("--limit", type=int, default=50, metavar="N", help="rows shown, most recent first (0: all)")
    _json_flag(show)
    _set(show, run_show)

    add_clear_and_peaks(inner)
    return inner


def add_clear_and_peaks(inner) -> None:
    """The `clear` and `peaks` subcommands, for this parser and the installed command's `cost`."""
    clear = inner.add_parser("clear", help="delete cached kernel timings")
    _cache_file(clear)
    clear.add_argument("--target", default=None, metavar="JSON", help="only entries of this exact target key")
    _json_flag(clear)
    _set(clear, run_clear)

    peaks = inner.add_parser("peaks", help="the machine peaks of the analytic model (measured once, cached; "
                                           "again once quieter when first taken on a busy machine)")
    peaks.add_argument("--remeasure", action="store_true", help="measure again and update the cache")
    _json_flag(peaks)
    _set(peaks, run_peaks)


def _cache_file(p) -> None:
    p.add_argument("--cache-file", type=Path, default=None, metavar="FILE",
                   help="the SQLite cost cache (default: costs.sqlite in the user cache directory)")


def _json_flag(p) -> None:
    if "--json" not in {s for a in p._actions for s in a.option_strings}:
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")


def _set(p, handler) -> None:
    p.set_defaults(run=handler, func=handler)


def _open(args):
    from .cache import CostCache

    return CostCache(args.cache_file) if getattr(args, "cache_file", None) else CostCache()


def run_show(args) -> int:
    cache = _open(args)
    entries = cache.entries(method=args.method)
    if args.device:
        entries = [e for e in entries if e.device == args.device]
    if args.target:
        entries = [e for e in entries if args.target in e.target]
    entries.sort(key=lambda e: -e.measured_at)
    shown = entries if not args.limit else entries[:args.limit]
    if getattr(args, "json", False):
        print(json.dumps({"path": str(cache.path), "entries": len(entries), "shown": [
            {"target": e.target, "device": e.device, "method": e.method, "workload": e.workload, "label": e.label,
             "seconds": e.seconds, "std": e.std, "repeats": e.repeats, "measured_at": e.measured_at,
             "tvm_version": e.tvm_version, "contention": e.contention} for e in shown]}, indent=1))
        return 0
    print(f"cache {cache.path}: {len(entries)} entries" + (f" (showing {len(shown)})" if len(shown) < len(entries)
                                                              else ""))
    for (method, device), n in sorted(Counter((e.method, e.device) for e in entries).items()):
        print(f"  {n:6d}  {method} on {device}")
    targets = {e.target: f"T{k}" for k, e in enumerate({e.target: e for e in entries}.values())}
    for target, tag in targets.items():
        print(f"  {tag}: {target}")
    if shown:
        print(f"  {'time (ms)':>12} {'std':>8} {'n':>3}  {'when':16} {'tgt':3} {'device':10} workload  kernel")
    for e in shown:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.measured_at))
        print(f"  {e.seconds * 1e3:12.4f} {e.std * 1e3:8.4f} {e.repeats:3d}  {when:16} {targets[e.target]:3} "
              f"{e.device:10} {e.workload[:8]}  {e.label}"
              + (f"  (contended {e.contention:.0%}: timed again once quiet)" if contended(e.contention) else ""))
    return 0


def run_clear(args) -> int:
    cache = _open(args)
    removed = cache.clear(args.target)
    if getattr(args, "json", False):
        print(json.dumps({"path": str(cache.path), "removed": removed}))
    else:
        print(f"cache {cache.path}: removed {removed} entries")
    return 0


def run_peaks(args) -> int:
    from .analytic import load_peaks
    from .paths import default_peaks_path

    peaks = load_peaks(remeasure=args.remeasure)
    if getattr(args, "json", False):
        print(json.dumps({"path": str(default_peaks_path()), "gflops": peaks.gflops, "gbps": peaks.gbps,
                          "launch_s": peaks.launch_s}))
    else:
        print(f"peaks {default_peaks_path()}: {peaks.gflops:.1f} GFLOP/s, {peaks.gbps:.1f} GB/s, "
              f"{peaks.launch_s * 1e6:.1f} us per kernel")
    return 0
