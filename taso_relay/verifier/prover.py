"""Prove rules against the axioms: one Z3 query per mapped output.

For each output pair the query is

    axioms (selected by the rule's operators) + shape axioms
    + wt(every node of both sides) + their typing facts + the rule's constraints
    + source_k != target_k

and the output is proved when Z3 answers unsat. Every input, shape and
attribute variable is a free constant, so unsat means the rule holds for all
shapes and parameters its constraints allow (given that both sides type-check:
the matcher instantiates the target and applies a rule only where the target
type-checks with the source's output types, so both are premises).

Verdicts: PROVED (every output unsat); REFUTED (the interpreter finds inputs
where the sides differ, at the example or at perturbed shapes); UNKNOWN
(timeout, Z3 "unknown", or something the encoder cannot express). Z3 "sat" is
only a candidate: with uninterpreted operators a model need not be a real
counterexample, so sat without a concrete disagreement is UNKNOWN.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import z3

from ..subst.rule import Rule
from . import axioms as AX
from . import typing as TY
from . import vocab as V
from .concrete import search_counterexample
from .encode import RuleEncoder, Unsupported

PROVED, REFUTED, UNKNOWN = "PROVED", "REFUTED", "UNKNOWN"
DEFAULT_TIMEOUT = 10.0


@dataclass
class Verdict:
    rule_id: str
    status: str
    time_s: float
    outputs: list = field(default_factory=list)  # per output: PROVED / UNKNOWN / ...
    axioms: int = 0
    reason: str = ""
    counterexample: dict | None = None
    concrete_tested: int = 0
    covered_by: str = ""  # the rule (other direction) whose proof covers this one

    def to_dict(self, timeout: float) -> dict[str, Any]:
        d = {"status": self.status, "time_s": round(self.time_s, 3), "outputs": self.outputs,
             "method": f"z3 {z3.get_version_string()} E-matching over {self.axioms} axioms",
             "timeout_s": timeout, "concrete_instances": self.concrete_tested}
        if self.covered_by:
            d["covered_by"] = self.covered_by
        if self.reason:
            d["reason"] = self.reason
        if self.counterexample:
            d["counterexample"] = self.counterexample
        return d


# ---- axiom sets -------------------------------------------------------------
_Z3_AXIOMS: list | None = None


def z3_axioms() -> list:
    global _Z3_AXIOMS
    if _Z3_AXIOMS is None:
        _Z3_AXIOMS = [AX.to_z3(a) for a in AX.ALL]
    return _Z3_AXIOMS


def select_axioms(funcs: set, every: bool = False):
    """Axioms whose left side (or right side, for two-way ones) uses only available
    operators; what they introduce becomes available in turn."""
    avail = set(funcs)
    chosen: list = []
    pending = list(z3_axioms())
    changed = True
    while changed:
        changed = False
        for ax in list(pending):
            if every or ax.lhs_funcs <= avail or (ax.both_ways and ax.rhs_funcs <= avail):
                chosen.append(ax)
                pending.remove(ax)
                avail |= ax.lhs_funcs | ax.rhs_funcs
                changed = True
    return chosen, avail


# ---- one rule ---------------------------------------------------------------
@dataclass
class Query:
    background: list
    goals: list  # per output: the disequality
    n_axioms: int
    consts: list = field(default_factory=list)  # every free constant: inputs, then variables
    outputs: list = field(default_factory=list)  # per output: (source term, target term)


def build_query(rule: Rule, every: bool = False) -> Query:
    enc = RuleEncoder(rule)
    src, tgt = enc.side("source"), enc.side("target")
    chosen, avail = select_axioms(src.funcs | tgt.funcs, every)
    bg: list = [f for ax in chosen for f in ax.forms]
    bg += TY.shape_axioms({f for f in avail if f in V.SIGNATURES or f.startswith("opaque:")})
    bg += TY.shape_algebra()
    terms = list(enc.inputs.values()) + src.terms + tgt.terms
    bg += [V.wt(t) for t in terms]
    bg += src.facts + tgt.facts + src.extra + tgt.extra + enc.domain
    bg += enc.constraints(src)
    bg += _extensionality(rule, enc, terms)
    # the matcher applies a rule only where the target instantiates with the source's output types
    bg += [V.shp(s) == V.shp(t) for s, t in zip(src.outputs, tgt.outputs)]
    goals = [s != t for s, t in zip(src.outputs, tgt.outputs)]
    consts = list(enc.inputs.values()) + [c for v in enc.vars.values() for c in _flat(v)]
    return Query(bg, goals, len(chosen), consts, list(zip(src.outputs, tgt.outputs)))


def _flat(value):
    if isinstance(value, tuple):
        return [c for v in value for c in _flat(v)]
    return [value]


def _extensionality(rule: Rule, enc: RuleEncoder, terms: list) -> list:
    """Ground instances of: same rank r and same dims => same shape (r from the example's ranks).

    Only for the operand pairs of element-wise binary operators, where the axioms'
    equal-shape guards are needed (all pairs made queries measurably slower)."""
    ranks = {len(s) for s in rule.example.get("inputs", {}).values()} or {4}
    pairs = {}
    for t in terms:
        if z3.is_app(t) and t.decl().name() in V.BINARY:
            a, b = t.arg(0), t.arg(1)
            pairs[(a.get_id(), b.get_id())] = (a, b)
    out = []
    for a, b in pairs.values():
        for r in sorted(ranks):
            same = [V.rank(a) == r, V.rank(b) == r] + [V.dim(a, i) == V.dim(b, i) for i in range(r)]
            out.append(z3.Implies(z3.And(*same), V.shp(a) == V.shp(b)))
    return out


FIRST_TRY_S = 0.5  # measured: proofs that succeed mostly take under 0.4 s
# Z3's resource units per second of a try's budget: an upper bound on the work behind its timeout.
# Measured on these queries: 0.1 to 13 million units per second, so this limit binds only when
# Z3's timeout has not (once, under CPU starvation, a check ran 15 min past a 3 s timeout).
RLIMIT_PER_S = 50_000_000


def check_bounded(s: z3.Solver, budget: float):
    """s.check() under both Z3's wall-clock timeout and a resource limit of the same budget.

    The limit is a count of Z3's own steps, so a lost timer cannot let a check run
    on; interrupting from another thread instead crashed Z3 now and then.
    """
    s.set("timeout", max(1, int(budget * 1000)))
    s.set("rlimit", max(1, int(budget * RLIMIT_PER_S)))
    return s.check()


def _solve(background, goal, timeout: float):
    """Short tries with fresh random seeds, each twice as long as the one before last.

    E-matching depends on the order terms are met: the same query takes 0.05 s
    with one seed and times out with another (measured on the K=3 rules), so
    restarts find the quick proof far more often than one long try.
    """
    t_end = time.perf_counter() + timeout
    result, seed = z3.unknown, 0
    while True:
        left = t_end - time.perf_counter()
        if left <= 0.05:
            return result
        result = check_bounded(_solver(background, goal, seed), min(left, FIRST_TRY_S * 2 ** (seed // 2)))
        if result != z3.unknown:
            return result
        seed += 1


def _solver(background, goal, seed: int) -> z3.Solver:
    s = z3.Solver()
    s.set("smt.mbqi", False)  # E-matching only: "unknown" once instantiation saturates
    s.set("smt.arith.solver", 2)  # measured: 50x faster than the default on these queries
    s.set("smt.random_seed", seed)
    s.add(background)
    s.add(goal)
    return s


def _work() -> int:
    """Z3's resource units spent so far in this process (the count is shared by every solver)."""
    return z3.Solver().statistics().get_key_value("rlimit count")


FIRST_TRY_UNITS = 250_000  # about 0.05 s of work on these queries
# Measured: bad_split_other_axis's contradictory premises are found unsat in 30 thousand units;
# consistent premises come back "unknown" only when the budget is spent (0.3-3 s).
VACUITY_MIN_UNITS = 2_000_000


def _solve_by_work(background, goal, units: int, wall_s: float) -> tuple:
    """Like _solve, but each try and the whole are bounded by Z3's resource count, not the clock:
    (result, whether the clock, wall_s, ended it first). The count gives the same answer on a busy
    machine; the clock is only a safety net, and the caller learns when it fired."""
    t_end, spent, seed, result = time.perf_counter() + wall_s, 0, 0, z3.unknown
    while spent < units:
        left = t_end - time.perf_counter()
        if left <= 0:
            return result, True
        s = _solver(background, goal, seed)
        s.set("timeout", max(1, int(left * 1000)))
        s.set("rlimit", max(1, min(units - spent, FIRST_TRY_UNITS * 2 ** (seed // 2))))
        before = _work()
        result = s.check()
        if result != z3.unknown:
            return result, False
        if s.reason_unknown() == "timeout":
            return result, True
        spent += _work() - before
        seed += 1
    return result, False


def has_witness(rule: Rule, check) -> bool:
    """Some instance where both sides build with equal output types and agree: a model of the premises.

    The concrete search counts those (its example among them); without a search, the example alone.
    """
    if check.tested > 0 or check.example_ok is not None:
        return check.tested > 0
    import numpy as np

    from .concrete import compare_instance
    shapes = {k: tuple(v) for k, v in rule.example.get("inputs", {}).items()}
    out = compare_instance(rule, shapes, dict(rule.example.get("vars", {})), np.random.default_rng(0),
                           both_ways=False, is_rule=True)
    return out.status == "ok"


def prove_rule(rule: Rule, timeout: float = DEFAULT_TIMEOUT, concrete_trials: int = 40,
               concrete: bool = True, query: Query | None = None) -> Verdict:
    """Search for a concrete counterexample first (cheap), then prove each output with Z3.

    concrete=False skips the search (tests use it to show Z3 alone proves no wrong rule);
    `query` is the rule's build_query() when the caller has built it already.
    """
    t0 = time.perf_counter()
    check = search_counterexample(rule, trials=concrete_trials) if concrete else None
    if check is None:
        from .concrete import RuleCheck
        check = RuleCheck(0)
    if check.counterexample is not None:
        return Verdict(rule.id, REFUTED, time.perf_counter() - t0, reason="concrete disagreement",
                       counterexample=check.counterexample, concrete_tested=check.tested)
    try:
        query = query or build_query(rule)
    except (Unsupported, z3.Z3Exception) as exc:
        return Verdict(rule.id, UNKNOWN, time.perf_counter() - t0, reason=f"not encodable: {exc}",
                       concrete_tested=check.tested)
    results, reason, work = [], "", _work()
    for k, goal in enumerate(query.goals):
        r = _solve(query.background, goal, timeout)
        if r == z3.unsat:
            results.append(PROVED)
        else:
            results.append(UNKNOWN)
            reason = reason or (f"output {k}: z3 says {r}" + (" (timeout)" if r == z3.unknown else ""))
    status = PROVED if all(r == PROVED for r in results) else UNKNOWN
    if status == PROVED and not has_witness(rule, check):
        # Contradictory premises (the target never type-checks with the source's output
        # types) make any goal unsat: that is not a proof. An instance where the rule
        # applies is a model of the premises; without one ask Z3, for at least twice the
        # work the proofs took (counted in Z3's steps, so a busy machine gets the same answer).
        units = max(VACUITY_MIN_UNITS, 2 * (_work() - work))
        answer, timed_out = _solve_by_work(query.background, z3.BoolVal(True), units, wall_s=timeout)
        if answer == z3.unsat:
            status, reason = UNKNOWN, "vacuous: the premises are contradictory, the rule never applies"
        elif timed_out:
            status, reason = UNKNOWN, "proved, but whether the premises are consistent was not decided in time"
        else:
            reason = "proved, but no instance where the rule applies was found"
    if status == UNKNOWN and check.example_ok is False:
        reason += "; the example itself does not build or disagree"
    return Verdict(rule.id, status, time.perf_counter() - t0, results, query.n_axioms, reason,
                   concrete_tested=check.tested)
