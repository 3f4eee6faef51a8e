"""Concrete checks with the project's own interpreter (float64).

Two uses of one routine, `compare_instance`, which builds both sides of a rule
(or an axiom, which is a rule) at given shapes and variable values and
compares them:

* `check_axiom`: every axiom on many small instances (dims 1..4, kernels 1
  and 3, strides 1..2, groups dividing channels). Instances are drawn four
  ways so that an axiom's shape templates cannot hide a missing guard: from
  the templates; from the templates with one dimension perturbed, one unit
  moved between two dimensions, one input's rank changed, or one input
  replaced by a shape that broadcasts against another's; and with every
  dimension drawn independently.
* `search_counterexample`: a rule at its example and at perturbed shapes and
  variables; a disagreement refutes the rule.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from ..graph import evaluate, random_feeds
from ..graph.types import GraphError
from ..subst import expr as X
from ..subst.rule import Rule
from .axioms.base import Axiom

DEFAULT_DIMS = (1, 2, 3, 4)
KERNEL_DIMS = (1, 3)
_BUILD_ERRORS = (GraphError, X.ExprError, IndexError, KeyError, TypeError, ValueError, ZeroDivisionError)


@dataclass
class Outcome:
    status: str  # "ok", "skip" (left side ill-typed or guard false), "fail"
    detail: str = ""


def _build(rule: Rule, which: str, shapes, variables):
    try:
        return rule.example_graph(which, shapes, variables), ""
    except _BUILD_ERRORS as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal within rounding; infinities must match, and a NaN never agrees.

    Inputs are drawn inside the operators' domains (_feeds), so a NaN means a
    side left its domain: counting equal NaNs as agreement would hide that.
    """
    if a.shape != b.shape:
        return False
    finite = np.isfinite(a) & np.isfinite(b)
    if not np.array_equal(np.isfinite(a), np.isfinite(b)):
        return False
    if not np.array_equal(a[~finite], b[~finite]):  # NaN != NaN
        return False
    scale = max(1.0, float(np.max(np.abs(a[finite]), initial=0.0)))
    return bool(np.allclose(a[finite], b[finite], rtol=1e-6, atol=1e-6 * scale))


# operand positions that must be non-negative: a batch norm's variance, a square root's or a logarithm's argument
# and a power's base (drawn in [0.1, 2), so positive: a negative base to a fractional power is NaN), a spelled group
# norm's eps
_NON_NEGATIVE = {"batch_norm": (4,), "sqrt": (0,), "rsqrt": (0,), "log": (0,), "pow": (0,), "exported_group_norm": (1,)}


def _non_negative(*graphs) -> set:
    """Inputs read directly where an operator needs non-negative values (the sides' own domain)."""
    names = set()
    for g in graphs:
        for node in g.nodes:
            for pos in _NON_NEGATIVE.get(node.op, ()):
                src = g.nodes[node.inputs[pos].node]
                if src.op in ("input", "weight"):
                    names.add(src.attr("name"))
    return names


def _feeds(left, right, rng: np.random.Generator) -> dict:
    """Random inputs, variance-like ones in [0.1, 2): a negative variance makes both sides NaN."""
    feeds = random_feeds(left, rng)
    for name in _non_negative(left, right):
        if name in feeds:
            feeds[name] = rng.uniform(0.1, 2.0, size=feeds[name].shape).astype(feeds[name].dtype)
    return feeds


TYPES_DIFFER = "output types differ: the matcher does not apply the rule here"
RIGHT_ILL_TYPED = "left side type-checks, right does not"


def compare_instance(rule: Rule, shapes: Mapping[str, tuple], variables: Mapping[str, Any],
                     rng: np.random.Generator, both_ways: bool = True, is_rule: bool = False) -> Outcome:
    """Build both sides; ill-typed left side or false guard: skip; else they must agree.

    For an axiom a right side that does not type-check where the left does is a
    failure; for a rule it only means the rule does not apply there (is_rule).
    """
    ok, why = rule.constraints_hold(shapes, variables)
    if not ok:
        return Outcome("skip", why)
    left, lwhy = _build(rule, "source", shapes, variables)
    right, rwhy = _build(rule, "target", shapes, variables)
    if left is None and right is None:
        return Outcome("skip", lwhy)
    if left is None:
        return Outcome("fail" if both_ways else "skip", f"right side type-checks, left does not: {lwhy}")
    if right is None:
        return Outcome("skip" if is_rule else "fail", f"{RIGHT_ILL_TYPED}: {rwhy}")
    feeds = _feeds(left, right, rng)
    try:
        with np.errstate(all="ignore"):
            lo = evaluate(left, feeds, dtype="float64")
            ro = evaluate(right, feeds, dtype="float64")
    except _BUILD_ERRORS as exc:
        return Outcome("fail", f"evaluation failed: {type(exc).__name__}: {exc}")
    if is_rule:
        for k, (a, b) in enumerate(zip(lo, ro)):
            if a.shape != b.shape:
                return Outcome("skip", f"{TYPES_DIFFER} (output {k}: shapes {a.shape} vs {b.shape})")
    for k, (a, b) in enumerate(zip(lo, ro)):
        if not _close(a, b):
            if a.shape != b.shape:
                return Outcome("fail", f"output {k}: shapes {a.shape} vs {b.shape}")
            return Outcome("fail", f"output {k}: max difference {float(np.max(np.abs(a - b))):.3g}")
    return Outcome("ok")


# ---- axioms -----------------------------------------------------------------
@dataclass
class AxiomCheck:
    name: str
    passed: bool
    valid: int  # instances where the left side type-checked and the guard held
    trials: int
    failures: list = field(default_factory=list)  # (shapes, vars, detail)

    def __str__(self):
        verdict = "ok" if self.passed else "FAILED"
        first = f"; first failure: {self.failures[0]}" if self.failures else ""
        return f"{self.name}: {verdict} ({self.valid}/{self.trials} instances){first}"


def _pool(ax: Axiom, sym: str):
    if sym in ax.dims:
        return ax.dims[sym]
    return KERNEL_DIMS if sym.startswith("k") else DEFAULT_DIMS


def _eval_entry(entry, env: dict):
    if isinstance(entry, str) and entry.startswith("="):
        return X.evaluate(entry[1:], X.Env({}, env))
    if isinstance(entry, str):
        return env[entry]
    return entry


def _symbols(ax: Axiom) -> list[str]:
    syms = []
    for template in ax.shapes.values():
        for e in template:
            if isinstance(e, str) and not e.startswith("=") and e not in syms:
                syms.append(e)
            elif isinstance(e, str):
                for s in X.variables_in(e[1:]):
                    if s not in syms and s not in ax.domains:
                        syms.append(s)
    return syms


def sample_axiom_instance(ax: Axiom, rnd: random.Random):
    env: dict[str, Any] = {s: rnd.choice(_pool(ax, s)) for s in _symbols(ax)}
    variables = {}
    for name, domain in ax.domains.items():
        value = rnd.choice(domain)
        if isinstance(value, str) and value.startswith("="):
            value = _eval_entry(value, {**env, **variables})
        variables[name] = value
    env.update(variables)
    mode = rnd.random()
    shapes = {}
    for name, template in ax.shapes.items():
        if mode < 0.15 or mode >= 0.9:  # every dimension independent: templates must not hide a guard
            shape = tuple(rnd.choice(_pool(ax, e) if isinstance(e, str) and not e.startswith("=") else DEFAULT_DIMS)
                          for e in template)
        else:
            shape = tuple(int(_eval_entry(e, env)) for e in template)
        shapes[name] = shape
    if 0.2 <= mode < 0.4:  # one dimension perturbed
        name = rnd.choice(list(shapes))
        if shapes[name]:
            shape = list(shapes[name])
            i = rnd.randrange(len(shape))
            shape[i] = rnd.choice(DEFAULT_DIMS + KERNEL_DIMS[1:])
            shapes[name] = tuple(shape)
    elif 0.6 <= mode < 0.7:  # one input changes rank: a leading size dropped or added
        name = rnd.choice(list(shapes))
        shape = shapes[name]
        if shape and rnd.random() < 0.5:
            shapes[name] = shape[1:]
        else:
            shapes[name] = (rnd.choice(DEFAULT_DIMS),) + shape
    elif 0.7 <= mode < 0.8:  # one input broadcasts against another
        shapes.update(_broadcast_variant(shapes, rnd))
    elif 0.4 <= mode < 0.6:  # one unit moved between two dimensions (keeps sums of sizes)
        slots = [(k, i) for k, s in shapes.items() for i in range(len(s))]
        if len(slots) >= 2:
            (k1, i1), (k2, i2) = rnd.sample(slots, 2)
            if shapes[k2][i2] > 1:
                shapes[k1] = tuple(d + 1 if j == i1 else d for j, d in enumerate(shapes[k1]))
                shapes[k2] = tuple(d - 1 if j == i2 else d for j, d in enumerate(shapes[k2]))
    return shapes, variables


def check_axiom(ax: Axiom, trials: int = 240, seed: int = 0, min_valid: int = 12) -> AxiomCheck:
    rnd = random.Random(f"{ax.name}:{seed}")
    rng = np.random.default_rng(seed)
    valid, failures = 0, []
    for _ in range(trials):
        shapes, variables = sample_axiom_instance(ax, rnd)
        out = compare_instance(ax.rule, shapes, variables, rng, both_ways=ax.both_ways)
        if out.status == "fail":
            failures.append((shapes, variables, out.detail))
        elif out.status == "ok":
            valid += 1
    return AxiomCheck(ax.name, not failures and valid >= min_valid, valid, trials, failures)


# ---- rules ------------------------------------------------------------------
def _perturb_shapes(shapes: Mapping[str, tuple], rnd: random.Random, mode: str) -> dict:
    """Rename the example's distinct sizes consistently, or perturb single entries."""
    sizes = sorted({d for s in shapes.values() for d in s})
    if mode == "rename":
        new = {d: rnd.choice((1, 2, 3, 4, 5, 6)) for d in sizes}
        return {k: tuple(new[d] for d in s) for k, s in shapes.items()}
    out = {k: list(s) for k, s in shapes.items()}
    for _ in range(rnd.choice((1, 2))):
        k = rnd.choice(list(out))
        if out[k]:
            out[k][rnd.randrange(len(out[k]))] = rnd.choice((1, 2, 3, 4))
    return {k: tuple(v) for k, v in out.items()}


def _broadcast_variant(shapes: Mapping[str, tuple], rnd: random.Random) -> dict:
    """One input takes a shape that broadcasts against another's: a suffix of it, some sizes 1.

    Rules without shape constraints match broadcasting operands too (a scalar
    learned as rank 0 may be a vector in a real graph); this is where they break.
    """
    out = dict(shapes)
    names = list(shapes)
    k, other = rnd.choice(names), rnd.choice(names)
    base = shapes[other]
    if not base:
        base = (rnd.choice((2, 3)),)
    cut = rnd.randrange(len(base) + 1)
    out[k] = tuple(1 if rnd.random() < 0.4 else d for d in base[cut:]) if base[cut:] else (rnd.choice((2, 3)),)
    return out


def _perturb_vars(variables: Mapping[str, Any], rnd: random.Random) -> dict:
    out = dict(variables)
    for k, v in variables.items():
        if rnd.random() < 0.3:
            if isinstance(v, bool):
                out[k] = not v
            elif isinstance(v, int):
                out[k] = max(0, v + rnd.choice((-1, 1)))
            elif isinstance(v, tuple) and v and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
                i = rnd.randrange(len(v))
                out[k] = tuple(max(0, e + rnd.choice((-1, 1))) if j == i else e for j, e in enumerate(v))
            elif v in ("none", "relu", "sigmoid", "tanh"):
                out[k] = rnd.choice(("none", "relu", "sigmoid", "tanh"))
    return out


@dataclass
class RuleCheck:
    tested: int
    counterexample: dict | None = None
    example_ok: bool | None = None


def search_counterexample(rule: Rule, trials: int = 60, seed: int = 0) -> RuleCheck:
    """The rule at its example and at perturbed shapes/variables; the first disagreement found."""
    rnd = random.Random(f"{rule.id}:{seed}")
    rng = np.random.default_rng(seed)
    shapes = {k: tuple(v) for k, v in rule.example.get("inputs", {}).items()}
    variables = dict(rule.example.get("vars", {}))
    tested = 0
    example_ok = None
    for t in range(trials + 1):
        if t == 0:
            s, v = shapes, variables
        else:
            mode = rnd.choice(("rename", "entries", "broadcast"))
            s = _broadcast_variant(shapes, rnd) if mode == "broadcast" else _perturb_shapes(shapes, rnd, mode)
            v = _perturb_vars(variables, rnd) if rnd.random() < 0.5 else variables
        out = compare_instance(rule, s, v, rng, both_ways=False, is_rule=True)
        if t == 0:
            example_ok = out.status == "ok"
        # elsewhere differing output types or a target that does not type-check only mean the rule
        # does not apply; at the example its author says it does, so there they show it false as written
        if out.status == "fail" or (t == 0 and out.detail.startswith((TYPES_DIFFER, RIGHT_ILL_TYPED))):
            detail = out.detail if out.status == "fail" else _at_example(out.detail)
            return RuleCheck(tested + 1, {"inputs": {k: list(x) for k, x in s.items()},
                                          "vars": _jsonable(v), "detail": detail}, example_ok)
        tested += out.status == "ok"
    return RuleCheck(tested, None, example_ok)


def _at_example(detail: str) -> str:
    if detail.startswith(TYPES_DIFFER):
        return "at its example, " + detail[len(TYPES_DIFFER) + 2:-1]  # "(output k: shapes ...)" unwrapped
    return "at its example, the target does not type-check: " + detail[len(RIGHT_ILL_TYPED) + 2:]


def _jsonable(v):
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    return v
