"""`taso-relay rules verify FILE [--timeout S] [--workers N]`.

The lead wires `add_verify_command` into taso_relay/cli.py; until then
`python -m taso_relay.verifier FILE ...` runs the same command.
Exit status: 0 when no rule is refuted, 1 when one is, 2 on a bad rule file.
"""
from __future__ import annotations

import argparse
import os
import sys

from .prover import DEFAULT_TIMEOUT


def add_verify_command(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("verify", help="prove a rule file's rules with Z3 and check their numerics",
                              description=__doc__.splitlines()[0])
    configure_parser(p)
    return p


def configure_parser(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("file", help="rule file (rules/*.json); verdicts are written back into it")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds per Z3 query (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), metavar="N",
                   help="processes (default: 2, or 1 on a single core)")
    p.add_argument("--force", action="store_true", help="re-prove rules whose stored verdict is current")
    p.add_argument("--no-numerics", action="store_true", help="skip the float32/float16 measurements")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_verify)
    return p


def run_verify(args) -> int:
    from ..subst import RuleFileError
    from ..subst.rule_io import unreadable_reasons
    from .report import report_path, summary_table
    from .run import verify_file

    progress = None
    if not args.quiet:
        from tqdm import tqdm

        def progress(total):
            return tqdm(total=total, desc="verify", unit="rule", file=sys.stderr, dynamic_ncols=True)
    try:
        result = verify_file(args.file, timeout=args.timeout, workers=max(1, args.workers), force=args.force,
                             numerics=not args.no_numerics, progress=progress)
    except RuleFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(summary_table(result))
    if result.unreadable:
        print(f"not verified: {len(result.unreadable)} rules cannot be read here and were left in the file as they "
              f"were ({unreadable_reasons(result.unreadable)})")
    print(f"report: {report_path(result.path)}")
    if result.interrupted:
        print("interrupted: verdicts so far were saved; run again to continue", file=sys.stderr)
        return 130
    return 1 if result.counts.get("REFUTED") else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m taso_relay.verifier", description=__doc__.splitlines()[0])
    configure_parser(p)
    args = p.parse_args(argv)
    return args.func(args)
