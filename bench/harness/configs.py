"""The three configurations compared on every model.

Each is a function ``(imported, target, options) -> (mod, info)`` applied to
the module ``from_onnx`` produced, *before* the kernel treatment
(``compile.py``), which is the same for all three:

1. ``tvm``       - TVM alone: the imported module unchanged (weights bound as
   constants - exactly what ``from_onnx`` gives by default);
2. ``tvm_rules`` - TVM's own rule-based Relax graph passes (``rule_passes``);
3. ``taso``      - ``taso_relay.TASOPass`` on the same module as (1).

The model is imported once with its weights as parameters (``Imported``):
CombineParallelMatmul only matches weights that are parameters (on constants
it does nothing, and on NASRNN it raises), so configuration (2) runs it before
binding the weights, the way TVM's own examples do.

``info`` carries what the configuration knows about itself: search time,
rewrites applied, graphs explored, or why it is unavailable.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import relax

CONFIG_NAMES = ("tvm", "tvm_rules", "taso")
CONFIG_LABELS = {
    "tvm": "TVM",
    "tvm_rules": "TVM + Relax rule passes",
    "taso": "TVM + TASOPass",
}


class ConfigUnavailable(RuntimeError):
    """The configuration cannot run here (e.g. TASOPass not importable)."""


@dataclass
class Options:
    cost: str | None = None  # None: TASOPass's own default
    time_limit: float | None = None  # None: TASOPass's own default (8 s, under the 10 s search target)
    rules: str | None = None
    verify_speed: bool | None = None  # TASOPass keeps a rewrite only if it measures faster end to end (None: its default)
    layout: str | None = None  # TASOPass(layout=...): also offer every conv in this layout
    lowering: str = "default"  # how the kernels will be built ("tuning" when the bench tunes): TASOPass prices that
    extra: dict = field(default_factory=dict)


@dataclass
class Imported:
    """One ONNX import: weights as parameters, and the same module with them bound."""
    with_params: tvm.IRModule
    params: dict  # relax.Var -> tvm tensor, for "main"
    bound: tvm.IRModule


def import_onnx(onnx_model) -> Imported:
    from tvm.relax.frontend import detach_params
    from tvm.relax.frontend.onnx import from_onnx
    mod, params = detach_params(from_onnx(onnx_model, keep_params_in_input=True))
    func = mod["main"]
    num_input = int(func.attrs["num_input"]) if func.attrs and "num_input" in func.attrs else 1
    by_var = dict(zip(func.params[num_input:], params.get("main", [])))
    bound = relax.transform.BindParams("main", by_var)(mod)
    return Imported(with_params=mod, params=by_var, bound=bound)


def rule_passes() -> list[tvm.transform.Pass]:
    """TVM's rule-based graph rewrites after the weights are bound.

    FoldConstant first concatenates the weights CombineParallelMatmul merged
    (it runs earlier, on parameters: see ``apply_tvm_rules``).
    FoldBatchnormToConv2D matches ``conv2d -> batch_norm`` (nothing has
    decomposed batch_norm yet); the FoldConstant after it folds the scaled
    weights.  EliminateCommonSubexpr, CanonicalizeBindings and
    DeadCodeElimination clean up what the others leave.  This order runs on
    every model of the suite.
    """
    t = relax.transform
    return [
        t.FoldConstant(),
        t.FoldBatchnormToConv2D(),
        t.FoldConstant(),
        t.EliminateCommonSubexpr(),
        t.CanonicalizeBindings(),
        t.FoldConstant(),
        t.DeadCodeElimination(),
    ]


RULE_PASS_NAMES = [
    "CombineParallelMatmul", "BindParams", "FoldConstant", "FoldBatchnormToConv2D",
    "FoldConstant", "EliminateCommonSubexpr", "CanonicalizeBindings", "FoldConstant",
    "DeadCodeElimination",
]


def apply_tvm(imported: Imported, target, options: Options):
    return imported.bound, {"search_time_s": 0.0, "passes": []}


def apply_tvm_rules(imported: Imported, target, options: Options):
    t0 = time.perf_counter()
    t = relax.transform
    with target:
        mod = t.CombineParallelMatmul()(imported.with_params)
        mod = t.BindParams("main", imported.params)(mod)
        mod = tvm.transform.Sequential(rule_passes())(mod)
    return mod, {"search_time_s": time.perf_counter() - t0, "passes": RULE_PASS_NAMES}


def _report_value(report, *names):
    """First present attribute/key of a TASOPass report among ``names``."""
    for n in names:
        if isinstance(report, dict) and n in report:
            return report[n]
        if report is not None and hasattr(report, n):
            return getattr(report, n)
    return None


# A function report's graphs, weights and all, printed as text made a results file megabytes long
# (2.7 MB for full Inception-v3); the report's op counts say what they held.
_NOT_RECORDED = ("graph_before", "graph_after")


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "to_dict"):
        return _jsonable(value.to_dict())
    if hasattr(value, "__dict__"):
        return {k: _jsonable(v) for k, v in vars(value).items() if not k.startswith("_") and k not in _NOT_RECORDED}
    return str(value)


def _count(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple)):
        return len(value)
    if isinstance(value, dict):
        nums = [v for v in value.values() if isinstance(v, (int, float))]
        return int(sum(nums)) if nums else len(value)
    return None


def _sum(values) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _op_total(ops) -> int | None:
    if not isinstance(ops, dict):
        return None
    return sum(v for k, v in ops.items() if k not in ("input", "weight", "constant"))


def summarize_taso_report(report) -> dict:
    """Normalises ``TASOPass.report`` into the fields the results record.

    Today the report is a dict of per-function reports (status, ops before and
    after, seconds, warnings); the search will add rules applied and graphs
    explored.  Fields a report does not carry are ``None`` ("not reported"),
    except that a function left unchanged had zero rules applied.
    """
    functions = report if isinstance(report, dict) else {"main": report}
    applied, explored, statuses, before, after, warns = [], [], {}, [], [], []
    for name, fr in functions.items():
        if fr is None:
            continue
        status = _report_value(fr, "status")
        statuses[str(name)] = status
        n = _count(_report_value(fr, "rules_applied", "applied", "rewrites", "applied_rules"))
        if n is None and status in ("unchanged", "skipped", "rejected", "re-emitted"):
            n = 0
        applied.append(n)
        explored.append(_count(_report_value(fr, "graphs_explored", "explored", "num_explored")))
        before.append(_op_total(_report_value(fr, "ops_before")))
        after.append(_op_total(_report_value(fr, "ops_after")))
        warns.extend(str(w) for w in (_report_value(fr, "warnings") or []))
    return {
        "rules_applied": _sum(applied),
        "graphs_explored": _sum(explored),
        "function_status": statuses,
        "ops_before": _sum(before),
        "ops_after": _sum(after),
        "warnings": warns[:20],
        "report": _jsonable(report),
    }


def make_taso_pass(target, options: Options):
    try:
        from taso_relay import TASOPass  # noqa: PLC0415 - optional until the pass exists
    except Exception as err:  # ImportError, or a half-written package
        raise ConfigUnavailable(f"taso_relay.TASOPass not importable: {type(err).__name__}: {err}")
    kwargs = {"target": target, "lowering": options.lowering}
    if options.verify_speed is not None:
        kwargs["verify_speed"] = options.verify_speed
    if options.time_limit is not None:
        kwargs["time_limit"] = options.time_limit
    if options.cost is not None:
        kwargs["cost"] = options.cost
    if options.rules is not None:
        kwargs["rules"] = options.rules
    if options.layout is not None:
        kwargs["layout"] = None if options.layout == "none" else options.layout
    return TASOPass(**kwargs)


def apply_taso(imported: Imported, target, options: Options):
    mod = imported.bound
    taso = make_taso_pass(target, options)
    t0 = time.perf_counter()
    with target:
        out = taso(mod)
    elapsed = time.perf_counter() - t0
    info = {"search_time_s": elapsed, "pass_kwargs": {
        "cost": getattr(options.cost, "method", options.cost), "time_limit": getattr(taso, "time_limit", options.time_limit),
        "rules": options.rules, "verify_speed": bool(getattr(taso, "verifies_speed", options.verify_speed)),
        "lowering": options.lowering}}
    info.update(summarize_taso_report(getattr(taso, "report", None)))
    info["structurally_unchanged"] = bool(tvm_ffi.structural_equal(out, mod))
    return out, info


APPLY = {"tvm": apply_tvm, "tvm_rules": apply_tvm_rules, "taso": apply_taso}


def apply_config(name: str, imported: Imported, target, options: Options):
    return APPLY[name](imported, target, options)
