"""Verify a rule file: prove every rule, measure its numerics, write the results back.

Work is spread over processes (one rule at a time each; Z3 objects never cross
a process boundary: workers get rule dicts and return plain dicts). A rule
whose stored verdict was reached with the same axiom set and the same rule
text is not proved again unless ``force`` is set, so an interrupted run
resumes where it stopped; results are written back on interrupt as well.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..subst import load_rules, rule_from_dict, rule_to_dict, save_rules
from ..subst.rule import Rule
from . import axioms as AX
from .numerics import measure
from .prover import DEFAULT_TIMEOUT, PROVED, REFUTED, UNKNOWN, prove_rule
from .report import report_path, write_report


def axioms_digest() -> str:
    text = "\n".join(f"{a.name}|{a.text}|{a.both_ways}" for a in AX.ALL)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def rule_digest(rule: Rule) -> str:
    d = rule_to_dict(rule)
    core = {k: d[k] for k in ("inputs", "source", "target", "outputs", "constraints", "example")}
    return hashlib.blake2b(json.dumps(core, sort_keys=True).encode(), digest_size=8).hexdigest()


def verify_one(rule: Rule, timeout: float = DEFAULT_TIMEOUT, numerics: bool = True) -> tuple[dict, dict]:
    verdict = prove_rule(rule, timeout=timeout)
    ver = verdict.to_dict(timeout)
    ver.update(axioms_digest=axioms_digest(), rule_digest=rule_digest(rule))
    num = dict(rule.numerics)
    if verdict.status == REFUTED:
        num = {"skipped": "refuted rule"}
    elif numerics:
        try:
            num = measure(rule)
        except Exception as exc:  # numerics must never lose a proof
            num = {"error": f"{type(exc).__name__}: {exc}"}
    return ver, num


def _worker(args):
    index, data, timeout, numerics = args
    rule = rule_from_dict(data)
    ver, num = verify_one(rule, timeout, numerics)
    return index, ver, num


def _is_current(rule: Rule) -> bool:
    v = rule.verification
    return (v.get("status") in (PROVED, REFUTED) and v.get("axioms_digest") == axioms_digest()
            and v.get("rule_digest") == rule_digest(rule))


@dataclass
class RunResult:
    path: Path
    rules: list
    elapsed_s: float
    workers: int
    timeout: float
    reused: int = 0
    interrupted: bool = False
    counts: dict = field(default_factory=dict)


def verify_file(path, timeout: float = DEFAULT_TIMEOUT, workers: int = 2, force: bool = False,
                numerics: bool = True, progress: Callable | None = None,
                write: bool = True) -> RunResult:
    path = Path(path)
    rules = load_rules(path)
    meta = _meta(path)
    todo = [i for i, r in enumerate(rules) if force or not _is_current(r)]
    t0 = time.perf_counter()
    interrupted = False
    jobs = [(i, rule_to_dict(rules[i]), timeout, numerics) for i in todo]
    bar = progress(total=len(jobs)) if progress else None
    try:
        if workers <= 1 or len(jobs) <= 1:
            results = (_worker(j) for j in jobs)
            _collect(results, rules, bar)
        else:
            ctx = mp.get_context("spawn")
            with ctx.Pool(min(workers, len(jobs))) as pool:
                _collect(pool.imap_unordered(_worker, jobs, chunksize=1), rules, bar)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - t0
    result = RunResult(path, rules, elapsed, workers, timeout, len(rules) - len(todo), interrupted)
    result.counts = {s: sum(r.status == s for r in rules) for s in (PROVED, REFUTED, UNKNOWN, "UNVERIFIED")}
    if write:
        meta["verification"] = {"axioms": len(AX.ALL), "axioms_digest": axioms_digest(),
                                "timeout_s": timeout, "counts": result.counts,
                                "report": report_path(path).name}
        save_rules(path, rules, meta)
        write_report(result)
    return result


def _collect(results, rules, bar):
    for index, ver, num in results:
        rules[index] = replace(rules[index], verification=ver, numerics=num)
        if bar is not None:
            bar.set_postfix_str(f"{rules[index].id}: {ver['status']}", refresh=False)
            bar.update(1)


def _meta(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    return {k: v for k, v in doc.items() if k not in ("format", "rules")}
