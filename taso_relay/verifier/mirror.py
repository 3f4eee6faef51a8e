"""One proof for both directions of an equivalence.

The generator emits `a => b` and `b => a` as two rules. Their Z3 queries
differ only in names and in the constraints each direction carries, so one
proof often covers both: if renaming the constants of query B (inputs and
attribute variables, one to one) turns it into a superset of query A, with
the same pair of sides in the goal, then A unsat implies B unsat (B has
more premises, and a renaming keeps satisfiability). The renaming is found
by matching B's target terms against A's source terms and B's source terms
against A's target terms, constant to constant; anything else (a variable of
one direction that is a computed size in the other) is no renaming, and B
is proved on its own. Premises of A that B does not state (a constraint
one direction needs and the other's typing implies) are asked of Z3: B's
premises must imply them, which is a small query.
"""
from __future__ import annotations

import z3

from .prover import Query, check_bounded


def _is_const(t) -> bool:
    return z3.is_const(t) and t.decl().kind() == z3.Z3_OP_UNINTERPRETED


def _unify(a, b, sigma: dict, owned: set) -> bool:
    """Extend sigma (B constant id -> A constant) so that b renamed is a; False if it cannot."""
    if b.get_id() in owned:
        hit = sigma.get(b.get_id())
        if hit is None:
            if not _is_const(a) or a.sort() != b.sort() or any(v.eq(a) for v in sigma.values()):
                return False
            sigma[b.get_id()] = a
            return True
        return hit.eq(a)
    if z3.is_int_value(a) or z3.is_int_value(b):
        return z3.is_int_value(a) and z3.is_int_value(b) and a.as_long() == b.as_long()
    if not (z3.is_app(a) and z3.is_app(b)) or a.num_args() != b.num_args() or not a.decl().eq(b.decl()):
        return False
    return all(_unify(x, y, sigma, owned) for x, y in zip(a.children(), b.children()))


MAX_MISSING = 8  # premises of A that B may imply rather than state


def covered_outputs(a: Query, b: Query, entail_timeout: float = 1.0) -> list[int] | None:
    """For each output of B, the output of A whose proof also proves it; None if A does not cover B."""
    owned = {c.get_id() for c in b.consts}
    sigma: dict = {}
    used: list[int] = []
    for sb, tb in b.outputs:
        for k, (sa, ta) in enumerate(a.outputs):
            trial = dict(sigma)
            if k not in used and _unify(sa, tb, trial, owned) and _unify(ta, sb, trial, owned):
                sigma = trial
                used.append(k)
                break
        else:
            return None
    pairs = []
    for c in b.consts:  # constants no term reached: fresh names, so they cannot meet A's
        hit = sigma.get(c.get_id())
        pairs.append((c, hit if hit is not None else z3.Const(f"mirror!{c}", c.sort())))
    renamed = [z3.substitute(f, *pairs) for f in b.background]  # alive while ids are compared
    keys = {k for f in renamed for k in _keys(f)}
    missing = [f for f in a.background if not all(k in keys for k in _keys(f))]
    if missing and not _entailed(renamed, missing, entail_timeout):
        return None
    return used


def _entailed(premises: list, goals: list, timeout: float) -> bool:
    """Premises imply every goal (a constraint one direction states and the other implies)."""
    if len(goals) > MAX_MISSING or any(z3.is_quantifier(g) for g in goals):
        return False
    s = z3.Solver()
    s.set("smt.mbqi", False)
    s.add(premises)
    s.add(z3.Not(z3.And(*goals)))
    return check_bounded(s, timeout) == z3.unsat


def _keys(f):
    """Identities of a premise's conjuncts, an equality's sides unordered (a == b is b == a)."""
    if z3.is_and(f):
        return [k for c in f.children() for k in _keys(c)]
    if z3.is_eq(f):
        return [frozenset(c.get_id() for c in f.children())]
    return [f.get_id()]
