"""Verify a rule file: prove every rule, measure its numerics, write the results back.

Work is spread over processes (one equivalence at a time each, both of its
directions, so that one proof can serve both; Z3 objects never cross a process
boundary: workers get rule dicts and return plain dicts). A rule
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
from typing import Callable, Mapping

import z3

from ..subst import read_rule_file, rule_from_dict, rule_to_dict, save_rules
from ..subst.rule import Rule
from . import axioms as AX
from .numerics import measure
from .concrete import RuleCheck
from .encode import Unsupported
from .mirror import covered_outputs
from .prover import (DEFAULT_TIMEOUT, PROVED, REFUTED, UNKNOWN, Verdict, has_witness, build_query,
                     prove_rule)
from .report import report_path, write_report


def axioms_digest() -> str:
    text = "\n".join(f"{a.name}|{a.text}|{a.both_ways}" for a in AX.ALL)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def rule_digest(rule: Rule) -> str:
    d = rule_to_dict(rule)
    core = {k: d[k] for k in ("inputs", "source", "target", "outputs", "constraints", "example")}
    return hashlib.blake2b(json.dumps(core, sort_keys=True).encode(), digest_size=8).hexdigest()


def verify_one(rule: Rule, timeout: float = DEFAULT_TIMEOUT, numerics: bool = True) -> tuple[dict, dict]:
    return _finish(rule, prove_rule(rule, timeout=timeout), timeout, numerics)


def _finish(rule: Rule, verdict: Verdict, timeout: float, numerics: bool) -> tuple[dict, dict]:
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


def verify_pair(a: Rule, b: Rule, timeout: float = DEFAULT_TIMEOUT,
                numerics: bool = True) -> list[tuple[dict, dict]]:
    """Both directions of one equivalence: one proof where it covers the other (mirror.py).

    The direction whose proof would cover the other is proved first; if it fails and
    the other direction is proved on its own, that proof may cover the first instead.
    """
    try:
        queries = {a.id: build_query(a), b.id: build_query(b)}
    except (Unsupported, z3.Z3Exception):
        return [verify_one(a, timeout, numerics), verify_one(b, timeout, numerics)]
    covers: dict = {}

    def cover(p: Rule, q: Rule):  # outputs of p's proof that prove q's, timed
        if (p.id, q.id) not in covers:
            t0 = time.perf_counter()
            covers[p.id, q.id] = (covered_outputs(queries[p.id], queries[q.id]), time.perf_counter() - t0)
        return covers[p.id, q.id]

    first, second = (a, b) if cover(a, b)[0] is not None or cover(b, a)[0] is None else (b, a)
    verdicts = {first.id: prove_rule(first, timeout=timeout, query=queries[first.id])}
    verdicts[second.id] = (_mirror(verdicts[first.id], second, *cover(first, second))
                           or prove_rule(second, timeout=timeout, query=queries[second.id]))
    if verdicts[first.id].status != PROVED:
        verdicts[first.id] = _mirror(verdicts[second.id], first, *cover(second, first)) or verdicts[first.id]
    digests = {r.id: rule_digest(r) for r in (a, b)}
    results = [_finish(r, verdicts[r.id], timeout, numerics) for r in (a, b)]
    for ver, _ in results:
        if "covered_by" in ver:  # a borrowed proof goes stale with the rule it was borrowed from
            ver["covered_digest"] = digests[ver["covered_by"]]
    return results


def _mirror(proof: Verdict, rule: Rule, outputs: list | None, cover_s: float) -> Verdict | None:
    """The verdict `rule` gets from another direction's proof, or None if that proof does not cover it."""
    if proof.status != PROVED or outputs is None or proof.covered_by:
        return None
    t0 = time.perf_counter()
    if not has_witness(rule, RuleCheck(0)):  # its own premises might be contradictory
        return None
    return Verdict(rule.id, PROVED, cover_s + time.perf_counter() - t0, [proof.outputs[k] for k in outputs],
                   proof.axioms, f"mirror: the proof of {proof.rule_id} covers it", covered_by=proof.rule_id)


def _worker(args):
    group, timeout, numerics = args
    rules = [rule_from_dict(data) for _, data in group]
    if len(rules) == 2:
        results = verify_pair(rules[0], rules[1], timeout, numerics)
    else:
        results = [verify_one(r, timeout, numerics) for r in rules]
    return [(index, ver, num) for (index, _), (ver, num) in zip(group, results)]


def proof_is_current(rule: Rule, by_id: Mapping[str, Rule] | None = None) -> bool:
    """PROVED, with today's axioms, for this very rule text (not typed in, not edited since)."""
    return rule.status == PROVED and _is_current(rule, by_id)


def _is_current(rule: Rule, by_id: Mapping[str, Rule] | None = None) -> bool:
    """Reached with today's axioms and this rule text; a mirrored proof also needs the rule
    it borrows from present, current, PROVED and unchanged since the mirror was recorded."""
    v = rule.verification
    if not (v.get("status") in (PROVED, REFUTED) and v.get("axioms_digest") == axioms_digest()
            and v.get("rule_digest") == rule_digest(rule)):
        return False
    if "covered_by" not in v:
        return True
    cover = (by_id or {}).get(v["covered_by"])
    return (cover is not None and "covered_by" not in cover.verification and cover.status == PROVED
            and _is_current(cover) and v.get("covered_digest") == rule_digest(cover))


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
    unreadable: list = field(default_factory=list)  # rule_io.Unreadable: left in the file as they were


def verify_file(path, timeout: float = DEFAULT_TIMEOUT, workers: int = 2, force: bool = False,
                numerics: bool = True, progress: Callable | None = None,
                write: bool = True) -> RunResult:
    path = Path(path)
    read = read_rule_file(path)
    rules, meta = read.rules, read.meta
    by_id = {r.id: r for r in rules}
    stale = {i for i, r in enumerate(rules) if force or not _is_current(r, by_id)}
    # a stale mirror takes its equivalence along: its proof was the other direction's, so that is
    # proved again for it to cover; other rules are retried alone (a current proof is kept)
    redo = {rules[i].provenance.get("equivalence") for i in stale if "covered_by" in rules[i].verification} - {None}
    todo = [i for i, r in enumerate(rules) if i in stale or r.provenance.get("equivalence") in redo]
    t0 = time.perf_counter()
    interrupted = False
    groups: dict = {}
    for i in todo:  # the two directions of an equivalence go to one worker together
        key = rules[i].provenance.get("equivalence") or f"#{i}"
        groups.setdefault(key, []).append((i, rule_to_dict(rules[i])))
    jobs = [(g, timeout, numerics) for g in groups.values()]
    bar = progress(total=len(todo)) if progress else None
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
    result = RunResult(path, rules, elapsed, workers, timeout, len(rules) - len(todo), interrupted,
                       unreadable=read.unreadable)
    result.counts = {s: sum(r.status == s for r in rules) for s in (PROVED, REFUTED, UNKNOWN, "UNVERIFIED")}
    if write:
        meta["verification"] = {"axioms": len(AX.ALL), "axioms_digest": axioms_digest(),
                                "timeout_s": timeout, "counts": result.counts,
                                "report": report_path(path).name}
        entries: list = list(rules)
        for u in read.unreadable:  # back where they were, untouched
            entries.insert(u.position, u.entry)
        save_rules(path, entries, meta)
        write_report(result)
    return result


def _collect(results, rules, bar):
    for group in results:
        for index, ver, num in group:
            rules[index] = replace(rules[index], verification=ver, numerics=num)
            if bar is not None:
                bar.set_postfix_str(f"{rules[index].id}: {ver['status']}", refresh=False)
                bar.update(1)
