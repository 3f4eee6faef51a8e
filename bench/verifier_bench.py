"""Time the verifier: the axioms' concrete checks, and proving a rule file on N workers.

    python -m bench.verifier_bench [RULE_FILE] [--workers 2] [--timeout 10]

Without a rule file it proves the test suite's sample rules. The rule file is
copied first (verdicts are written into the copy, not the original) and every
rule is proved afresh. Prints one JSON line per measurement.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


def bench_axioms() -> dict:
    from taso_relay.verifier import axioms as AX
    from taso_relay.verifier.concrete import check_axiom

    t0 = time.perf_counter()
    results = [check_axiom(a) for a in AX.ALL]
    return {"what": "axiom concrete checks", "axioms": len(results),
            "passed": sum(r.passed for r in results), "instances": sum(r.valid for r in results),
            "seconds": round(time.perf_counter() - t0, 2)}


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the worker processes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def bench_rules(path: Path, workers: int, timeout: float) -> dict:
    from taso_relay.verifier.report import summary_table
    from taso_relay.verifier.run import verify_file

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        shutil.copy(path, copy)
        load_before, cpu0 = os.getloadavg()[0], _cpu_s()
        t0 = time.perf_counter()
        result = verify_file(copy, timeout=timeout, workers=workers, force=True)
        wall = time.perf_counter() - t0
        cpu = _cpu_s() - cpu0
        print(summary_table(result), file=sys.stderr)
    times = sorted(r.verification.get("time_s", 0.0) for r in result.rules)
    return {"what": "verify rule file", "file": str(path), "rules": len(result.rules), "workers": workers,
            "timeout_s": timeout, "counts": result.counts, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2), "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "covered_by_other_direction": sum("covered_by" in r.verification for r in result.rules),
            "per_rule_s": {"median": times[len(times) // 2] if times else 0, "max": times[-1] if times else 0}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", nargs="?", help="rule file (default: the tests' sample rules)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=10.0)
    args = p.parse_args(argv)
    print(json.dumps(bench_axioms()))
    if args.file:
        path = Path(args.file)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "verifier"))
        from sample_rules import CORRECT

        from taso_relay.subst import save_rules
        path = Path(tempfile.mkdtemp()) / "sample_rules.json"
        save_rules(path, CORRECT)
    print(json.dumps(bench_rules(path, args.workers, args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
