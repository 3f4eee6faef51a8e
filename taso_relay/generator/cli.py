"""`rules generate` and `rules stats` commands.

taso_relay/cli.py wires them in with `add_rules_commands(subparsers)`; until then
`python -m taso_relay.generator generate ...` takes the same arguments.
Each parser sets `func` to a callable taking the parsed args and returning an exit code.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..subst.rule_io import RuleFileError
from .config import ALL_OPS, Settings


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-ops", type=int, default=3, metavar="K", help="largest graph size, in operators (default 3)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="rule file to write (default rules/taso_k{K}.json); the report goes beside it")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="local processes (default: all cores)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the tasks on a Dask distributed cluster, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                   help="where finished tasks are kept so an interrupted run resumes "
                        "(default ~/.cache/taso_relay/generator/...)")
    p.add_argument("--fresh", action="store_true", help="ignore checkpoints and start over")
    p.add_argument("--ops", default=None, metavar="LIST",
                   help=f"comma-separated operator families (default all: {','.join(ALL_OPS)})")
    p.add_argument("--max-outputs", type=int, default=2, metavar="N", help="most outputs per graph (default 2)")
    p.add_argument("--seed", type=int, default=2019, help="seed of the fingerprint inputs")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run_generate)


def add_stats_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a rule file (rules/*.json)")
    p.set_defaults(func=run_stats)


def add_lift_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a verified rule file; its PROVED rules are lifted")
    p.add_argument("--batch-dims", type=int, nargs="+", default=[1, 2], metavar="K",
                   help="leading batch dimensions to add to 2-D activations (default 1 2)")
    p.add_argument("--out", required=True, metavar="FILE", help="rule file to write (verify it next)")
    p.set_defaults(func=run_lift)


def add_rules_commands(subparsers) -> argparse.ArgumentParser:
    """Add `rules generate` and `rules stats` to a top-level subparsers object."""
    rules = subparsers.add_parser("rules", help="generate rules or summarise a rule file")
    sub = rules.add_subparsers(dest="rules_command", metavar="{generate,stats,lift}")
    sub.required = True
    add_generate_arguments(sub.add_parser("generate", help="enumerate graphs and write generated rules"))
    add_stats_arguments(sub.add_parser("stats", help="summarise a rule file (and its generation report)"))
    add_lift_arguments(sub.add_parser("lift", help="give 2-D activation rules leading batch dimensions"))
    return rules


def settings_from_args(args) -> Settings:
    kw = {"max_ops": args.max_ops, "max_outputs": args.max_outputs, "seed": args.seed}
    if args.ops:
        kw["ops"] = tuple(o.strip() for o in args.ops.split(",") if o.strip())
    return Settings(**kw)


def run_generate(args) -> int:
    from .report import stage_table
    from .run import Interrupted, generate

    try:
        settings = settings_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or f"rules/taso_k{settings.max_ops}.json"
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    try:
        report = generate(settings, out, workers=args.workers, scheduler=args.scheduler,
                          checkpoint_dir=args.checkpoint_dir, fresh=args.fresh,
                          progress=not (args.no_progress or getattr(args, "quiet", False)),
                          log=lambda m: print(m, file=sys.stderr))
    except KeyboardInterrupt:
        print("interrupted: finished tasks are checkpointed; run the same command again to resume", file=sys.stderr)
        return 130
    except Interrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 130
    except (OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        import json
        print(json.dumps({"ok": True, "out": out, **{k: v for k, v in report.items() if k != "rules"}}))
        return 0
    print(stage_table(report))
    t, m = report["time_s"], report["peak_memory_mib"]
    print(f"wrote {out} ({len(report['rules'])} rules) in {t['total']} s; peak memory main "
          f"{m['main_process']} MiB, largest worker {m['largest_worker']} MiB")
    return 0


def run_stats(args) -> int:
    from .report import stats_text

    try:
        print(stats_text(args.file))
    except RuleFileError as exc:  # a missing or corrupt file is bad input: exit 2, like every command
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def run_lift(args) -> int:
    from ..subst.rule_io import load_rules, save_rules
    from .lift import lift_rules

    if any(k < 1 for k in args.batch_dims):
        print("error: --batch-dims must be positive", file=sys.stderr)
        return 2
    try:
        rules = [r for r in load_rules(args.file, status="PROVED", strict=False) if "lifted_from" not in r.provenance]
    except RuleFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    lifted = lift_rules(rules, sorted(set(args.batch_dims)))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_rules(args.out, lifted, meta={"lifted": {"from": Path(args.file).name, "batch_dims": sorted(set(args.batch_dims)),
                                                  "rules_in": len(rules)}})
    print(f"wrote {args.out}: {len(lifted)} lifted rules from {len(rules)} proven ones "
          f"(batch dims {sorted(set(args.batch_dims))}); verify them with `taso-relay rules verify {args.out}`")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m taso_relay.generator",
                                     description="TASO-style rule generation (same as `taso-relay rules ...`)")
    sub = parser.add_subparsers(dest="command", metavar="{generate,stats}")
    sub.required = True
    add_generate_arguments(sub.add_parser("generate", help="enumerate graphs and write generated rules"))
    add_stats_arguments(sub.add_parser("stats", help="summarise a rule file"))
    args = parser.parse_args(argv)
    return args.func(args)
