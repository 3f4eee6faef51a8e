"""Numerics: how far each side of a rule drifts from exact arithmetic in low precision.

Equal over the reals is not equal in floating point. For every rule we run both
sides on the same inputs in float32 at three shapes (the example and rescaled
variants that still satisfy the constraints) against a float64 evaluation of
the source, and record the largest relative error of each side
(max |y - ref| / max |ref|, a norm-wise error that is stable near zero).

The heuristic that flags a rule as precision-sensitive (the search then skips
it for float16/bfloat16 graphs), measured rather than guessed:

* float16 stress runs at the example's shapes, every input at one magnitude per run (1, 1e2, 6e4:
  the last near float16's 65504 limit). Per-tensor mixed magnitudes
  (MIXED_TRIALS) are off: they flag nearly every reassociation (matmul
  associativity, conv distributivity: one weight at 6e4, the other at 1e-3),
  which says more about the inputs than about the rule;
* flag "overflow" when the target produces inf/nan at an element whose exact
  (float64) value is below half the dtype's range and the source does not;
* flag "precision" when, in float32 or float16, the target's error exceeds
  both 8x the source's error and an absolute floor (1e-5 in float32, 1e-2 in
  float16): rounding noise alone stays well under these (tests measure it).

``(a+b)/c => a/c + b/c`` is not flagged (a+b may overflow in the source, the
target does better) while ``a/c + b/c => (a+b)/c`` is.
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np

from ..graph import evaluate
from ..subst.rule import Rule
from .concrete import _BUILD_ERRORS

RATIO = 8.0
FLOOR = {"float32": 1e-5, "float16": 1e-2}
SCALES = (1.0, 1e2, 6e4)
MIXED = (1e-3, 1.0, 6e4)
MIXED_TRIALS = 0  # per-tensor magnitudes: off, see the module docstring
RANGE = {"float32": 3.4e38, "float16": 65504.0}


def _rel_err(y: np.ndarray, ref: np.ndarray) -> float:
    y = y.astype(np.float64)
    scale = float(np.max(np.abs(ref), initial=0.0))
    if scale == 0.0 or not np.isfinite(scale):
        scale = 1.0
    diff = np.abs(y - ref)
    diff = diff[np.isfinite(ref)]
    if diff.size and not np.all(np.isfinite(diff)):
        return float("inf")
    return float(np.max(diff, initial=0.0)) / scale


def _shape_variants(rule: Rule, rnd: random.Random, count: int = 3) -> list[tuple[dict, dict]]:
    shapes = {k: tuple(v) for k, v in rule.example.get("inputs", {}).items()}
    variables = dict(rule.example.get("vars", {}))
    out = [(shapes, variables)]
    sizes = sorted({d for s in shapes.values() for d in s})
    tries = 0
    while len(out) < count and tries < 40:
        tries += 1
        factor = rnd.choice((2, 3))
        mapping = {d: (d * factor if rnd.random() < 0.7 else d) for d in sizes}
        cand = {k: tuple(mapping[d] for d in s) for k, s in shapes.items()}
        if all(c != o[0] for c in [cand] for o in out) and _builds(rule, cand, variables):
            out.append((cand, variables))
    return out


def _builds(rule, shapes, variables) -> bool:
    if not rule.constraints_hold(shapes, variables)[0]:
        return False
    try:
        rule.example_graph("source", shapes, variables)
        rule.example_graph("target", shapes, variables)
        return True
    except _BUILD_ERRORS:
        return False


def _feeds(graph, rng, magnitudes):
    feeds = {}
    for node in graph.nodes:
        if node.op in ("input", "weight"):
            a = node.attr_dict
            scale = magnitudes(a["name"])
            feeds[a["name"]] = rng.uniform(-1, 1, size=a["shape"]) * scale
    return feeds


def _run(graph, feeds, dtype):
    with np.errstate(all="ignore"):
        low = {k: v.astype(dtype) for k, v in feeds.items()}
        return evaluate(graph, low, dtype=dtype)


def measure(rule: Rule, seed: int = 0, trials: int = 1) -> dict[str, Any]:
    """Largest relative errors of source and target (float32 and float16), and flags."""
    rnd = random.Random(f"{rule.id}:{seed}")
    rng = np.random.default_rng(seed)
    variants = _shape_variants(rule, rnd)
    err = {("float32", "source"): 0.0, ("float32", "target"): 0.0,
           ("float16", "source"): 0.0, ("float16", "target"): 0.0}
    flags: set[str] = set()
    n_shapes = 0
    for shapes, variables in variants:
        try:
            src = rule.example_graph("source", shapes, variables)
            tgt = rule.example_graph("target", shapes, variables)
        except _BUILD_ERRORS:
            continue
        n_shapes += 1
        regimes = [("float32", lambda name: 1.0)] * trials
        if n_shapes == 1:  # float16 stress runs at the example's shapes
            regimes += [("float16", (lambda s: lambda name: s)(s)) for s in SCALES]
            regimes += [("float16", lambda name: rnd.choice(MIXED)) for _ in range(trials * MIXED_TRIALS)]
        for dtype, mags in regimes:
            feeds = _feeds(src, rng, mags)
            try:
                with np.errstate(all="ignore"):
                    ref = evaluate(src, feeds, dtype="float64")
                ys = _run(src, feeds, dtype)
                yt = _run(tgt, feeds, dtype)
            except _BUILD_ERRORS:
                continue
            for r, a, b in zip(ref, ys, yt):
                finite_ref = np.isfinite(r)
                bad_s = np.any(~np.isfinite(a) & finite_ref)
                # overflow counts where the exact result is comfortably representable
                safe = finite_ref & (np.abs(r) < RANGE[dtype] / 2)
                bad_t = np.any(~np.isfinite(b) & finite_ref)
                if np.any(~np.isfinite(b) & safe) and not np.any(~np.isfinite(a) & safe):
                    flags.add("overflow")
                es, et = _rel_err(a, r), _rel_err(b, r)
                if not bad_s:
                    err[(dtype, "source")] = max(err[(dtype, "source")], es)
                if not bad_t:
                    err[(dtype, "target")] = max(err[(dtype, "target")], et)
                if not (bad_s or bad_t) and et > RATIO * es and et > FLOOR[dtype]:
                    flags.add("precision")
    risky = {"div", "sub", "pow", "exp", "log", "rsqrt", "sqrt"}
    intro = sorted(({n.op for n in rule.target} - {n.op for n in rule.source}) & risky)
    return {
        "float32": {"max_rel_err_source": _round(err[("float32", "source")]),
                    "max_rel_err_target": _round(err[("float32", "target")])},
        "float16": {"max_rel_err_source": _round(err[("float16", "source")]),
                    "max_rel_err_target": _round(err[("float16", "target")])},
        "max_rel_err": _round(err[("float32", "target")]),
        "shapes": n_shapes,
        "flags": sorted(flags),
        "introduces": intro,
        "precision_sensitive": bool(flags),
    }


def _round(x: float) -> float:
    return float(f"{x:.3g}") if np.isfinite(x) else "inf"  # JSON has no infinity
