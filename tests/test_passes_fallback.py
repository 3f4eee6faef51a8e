"""When the search's result is refused, TASOPass falls back to the first phase's rewrites alone
(the batch-norm folds TVM's own rule passes would make) before keeping the original."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import tvm

from taso_relay.cost import FixedCost
from taso_relay.guard.speed import SpeedCheck
from taso_relay.passes import TASOOptimizer, TASOPass

sys.path.insert(0, str(Path(__file__).parent))
from test_passes import fixed_times, replace_op, swap_add  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "bridge"))
from bridge_onnx_models import MODELS, import_onnx  # noqa: E402

from taso_relay.bridge.execute import random_inputs  # noqa: E402

COST = FixedCost({"conv2d": 10.0, "batch_norm": 5.0})  # folding a batch norm is predicted to pay


@pytest.fixture(scope="module")
def resnet():
    return import_onnx(MODELS["resnet_block"]())


def search_then(change):
    """The real search (it folds both batch norms first), with its result changed by `change`:
    a stand-in for whatever the backtracking search adds after the first phase."""
    real = TASOOptimizer.optimize_graph

    def optimize_graph(self, graph, report=None):
        return change(real(self, graph, report))

    return optimize_graph


def per_call_times(*rounds_ms):
    """_measure_speed stand-in: the k-th call gets the k-th (before, after) pair of round times."""
    calls = []

    def measure(self, func, rewritten, mod, name, lowering, database):
        before, after = rounds_ms[len(calls)]
        calls.append(rewritten)
        return fixed_times(before, after)(self, func, rewritten, mod, name, lowering, database)

    return measure, calls


def test_numeric_refusal_falls_back_to_the_folds(resnet, monkeypatch, run_module, rng):
    monkeypatch.setattr(TASOOptimizer, "optimize_graph", search_then(lambda g: replace_op(g, "relu", "sigmoid")))
    taso = TASOPass(verify_speed=False, cost=COST)
    with pytest.warns(UserWarning, match="computes different results.*kept the first phase's 2 rewrites"):
        out = taso(resnet)
    report = taso.report["main"]
    assert report.status == "optimized" and report.kept == "first phase"
    assert report.refused[0][:2] == ("search", "numeric")
    assert report.graph_after.hash == report.search.first_graph.hash
    assert "sigmoid" not in report.ops_after and report.ops_after["relu"] == 2
    assert len(report.search.applied) == report.search.first_phase == 2
    assert report.cost_after == report.search.cost_first < report.cost_before
    inputs = random_inputs(resnet["main"].params, rng)
    for want, got in zip(run_module(resnet, inputs), run_module(out, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def run_timed(mod, monkeypatch, rounds, note: str, change=swap_add, **kwargs):
    """TASOPass with verify_speed whose k-th measurement gets rounds[k]: (the pass, its output, the calls).
    A rewrite refused for speed is the pass doing its job: a note in the report and the log, no warning."""
    measure, calls = per_call_times(*rounds)
    if change is not None:
        monkeypatch.setattr(TASOOptimizer, "optimize_graph", search_then(change))
    monkeypatch.setattr(TASOOptimizer, "_measure_speed", measure)
    taso = TASOPass(cost=COST, verify_speed=True, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = taso(mod)
    report = taso.report["main"]
    assert any(note in n for n in report.notes) and report.warnings == [], report.summary()
    assert f"note: {report.notes[0]}" in report.summary()
    return taso, out, calls


def test_speed_refusal_falls_back_to_the_folds_when_they_measure_faster(resnet, monkeypatch):
    taso, _, calls = run_timed(resnet, monkeypatch, (([10, 10, 10], [10.5, 10.4, 10.6]), ([10, 10, 10], [9, 9, 9])),
                               "is not measured faster")
    report = taso.report["main"]
    assert len(calls) == 2 and report.kept == "first phase" and report.status == "optimized"
    assert [c.candidate for c in report.speed_tried] == ["search", "first phase"]
    assert [c.kept for c in report.speed_tried] == [False, True] and report.speed is report.speed_tried[1]
    text = report.summary()
    assert "first phase: kept the rewrite" in text and "kept the original" in text
    from taso_relay.commands.report import report_dict

    data = report_dict(report)
    assert data["kept"] == "first phase" and [c["candidate"] for c in data["speed_tried"]] == ["search", "first phase"]
    assert data["search"]["first_phase"] == len(data["search"]["applied"]) == 2 and "first_graph" not in data["search"]


def test_both_refused_keeps_the_original(resnet, monkeypatch):
    taso, out, _ = run_timed(resnet, monkeypatch, (([10, 10, 10], [11, 11, 11]), ([10, 10, 10], [10, 10.2, 10])),
                             "kept the original")
    tvm.ir.assert_structural_equal(out, resnet)
    report = taso.report["main"]
    assert report.status == "rejected" and report.rejected_by == "speed" and report.kept == ""
    assert [r[0] for r in report.refused] == ["search", "first phase"] and report.rewrites == []


def test_a_numeric_refusal_still_warns_when_the_fallback_is_then_refused_for_speed(resnet, monkeypatch):
    """The search's result computes different results (a fault), the first phase's folds are not
    measured faster (the check's job): the fault must not be hidden in a note."""
    measure, calls = per_call_times(([10, 10, 10], [11, 11, 11]))
    monkeypatch.setattr(TASOOptimizer, "optimize_graph", search_then(lambda g: replace_op(g, "relu", "sigmoid")))
    monkeypatch.setattr(TASOOptimizer, "_measure_speed", measure)
    taso = TASOPass(cost=COST, verify_speed=True)
    with pytest.warns(UserWarning, match=r"computes different results \(search\) and is not measured faster "
                                         r"\(first phase\).*kept the original"):
        out = taso(resnet)
    tvm.ir.assert_structural_equal(out, resnet)
    report = taso.report["main"]
    assert [r[:2] for r in report.refused] == [("search", "numeric"), ("first phase", "speed")]
    assert report.status == "rejected" and len(calls) == 1 and report.notes == []


def test_no_fallback_when_the_search_found_only_the_folds(resnet, monkeypatch):
    _, _, calls = run_timed(resnet, monkeypatch, (([10, 10, 10], [11, 11, 11]), ([10, 10, 10], [9, 9, 9])),
                            "kept the original", change=None, rules=_fold_rules())
    assert len(calls) == 1  # the folds were the search's result: measured once, not twice


def test_original_is_compiled_once_for_both_candidates(resnet, monkeypatch):
    """Real timing with a short budget: two candidates measured, three builds (not four)."""
    from taso_relay.cost import lowering
    from taso_relay.guard import speed

    monkeypatch.setattr(speed, "faster", lambda *args: False)  # whatever the timing: try both
    built = []
    real = lowering.compile_module
    monkeypatch.setattr(lowering, "compile_module", lambda mod, *a, **k: built.append(mod) or real(mod, *a, **k))
    monkeypatch.setattr(TASOOptimizer, "optimize_graph", search_then(swap_add))
    taso = TASOPass(cost=COST, verify_speed=True, speed_budget=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = taso(resnet)
    report = taso.report["main"]
    assert [c.candidate for c in report.speed_tried] == ["search", "first phase"]
    assert all(c.measured and not c.kept for c in report.speed_tried)
    assert len(built) == 3
    assert taso._compiled == {}  # no whole-model executable outlives the function it checked
    assert taso.take_build(out, taso._speed_target()) is None  # unless asked to (keep_build=True)


def _fold_rules():
    from taso_relay.subst import default_rules

    return [r for r in default_rules() if dict(r.provenance or {}).get("phase") == "first"]


def builds_only(monkeypatch, wanted):
    """TVM's build stand-in: raises for a module `wanted` refuses (given its count of batch_norm calls)."""
    from taso_relay.cost import lowering

    real = lowering.compile_module

    def compile_module(mod, *args, **kwargs):
        if not wanted(str(mod["main"]).count("R.nn.batch_norm(")):
            raise TypeError("Binary operators must have the same datatype for both operands")
        return real(mod, *args, **kwargs)

    monkeypatch.setattr(lowering, "compile_module", compile_module)


def test_a_rewrite_tvm_cannot_build_is_never_kept(resnet, monkeypatch):
    """The original builds, neither candidate does (both fold the batch norms): the original is kept, and
    the warning says why. Kept unmeasured, as before, such a rewrite gave the user a module TVM cannot build."""
    builds_only(monkeypatch, lambda batch_norms: batch_norms > 0)
    monkeypatch.setattr(TASOOptimizer, "optimize_graph", search_then(swap_add))
    taso = TASOPass(cost=COST, verify_speed=True, speed_budget=0.05)
    with pytest.warns(UserWarning, match=r"does not build, tune or run with TVM \(search\) and does not "
                                         r"build, tune or run with TVM \(first phase\).*kept the original"):
        out = taso(resnet)
    tvm.ir.assert_structural_equal(out, resnet)
    report = taso.report["main"]
    assert report.status == "rejected" and report.rejected_by == "build"
    assert [c.builds for c in report.speed_tried] == [(True, False), (True, False)]
    assert "TVM cannot build the rewritten function: TypeError" in report.speed.to_text()


def test_a_rewrite_that_builds_where_the_original_does_not_is_kept(resnet, monkeypatch, run_module, rng):
    """TVM 0.27's default pipeline builds no float16 batch_norm (a float32 result): a float16 model whose
    batch norms the pass folds builds only rewritten. Nothing to time against: kept, with a warning that says so."""
    builds_only(monkeypatch, lambda batch_norms: batch_norms == 0)
    taso = TASOPass(cost=COST, verify_speed=True, speed_budget=0.05)
    with pytest.warns(UserWarning, match=r"TVM cannot build the original function: TypeError.*the rewritten one "
                                         r"builds"):
        out = taso(resnet)
    report = taso.report["main"]
    assert report.status == "optimized" and report.kept == "search" and report.speed.builds == (False, True)
    assert not report.speed.measured and "batch_norm" not in report.ops_after
    # nothing to time against, but its outputs are compared with the original graph's (numpy interpreter)
    assert report.speed.same_outputs is True
    assert any("computes what the original graph does" in w for w in report.warnings), report.warnings
    inputs = random_inputs(resnet["main"].params, rng)
    monkeypatch.undo()
    for want, got in zip(run_module(resnet, inputs), run_module(out, inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_rewrite_that_builds_where_the_original_does_not_but_computes_otherwise_is_refused(resnet, monkeypatch):
    """check=False (no graph-level check): the compiled rewrite's outputs against the original graph's."""
    builds_only(monkeypatch, lambda batch_norms: batch_norms == 0)
    monkeypatch.setattr(TASOOptimizer, "optimize_graph", search_then(lambda g: replace_op(g, "relu", "sigmoid")))
    taso = TASOPass(cost=COST, verify_speed=True, speed_budget=0.05, check=False)
    with pytest.warns(UserWarning, match="computes different results when compiled"):
        taso(resnet)
    report = taso.report["main"]
    assert report.speed_tried[0].builds == (False, True) and report.speed_tried[0].same_outputs is False
    assert report.refused[0][:2] == ("search", "numeric")
    # the first phase's folds alone build, and compute what the original graph does: kept
    assert report.kept == "first phase" and report.speed_tried[1].same_outputs is True
    assert "sigmoid" not in report.ops_after and "batch_norm" not in report.ops_after


def test_a_rewrite_that_fails_when_run_is_never_kept(resnet, monkeypatch):
    """It builds, and raises when run (every second run: the rewritten module's)."""
    from taso_relay.bridge import execute

    real, runs = execute.flatten, []

    def flatten(value):
        runs.append(value)
        if len(runs) % 2 == 0:
            raise RuntimeError("out of bounds")
        return real(value)

    monkeypatch.setattr(execute, "flatten", flatten)
    monkeypatch.setattr(TASOOptimizer, "optimize_graph", search_then(swap_add))
    taso = TASOPass(cost=COST, verify_speed=True, speed_budget=0.05)
    with pytest.warns(UserWarning, match="does not build, tune or run with TVM"):
        out = taso(resnet)
    tvm.ir.assert_structural_equal(out, resnet)
    check = taso.report["main"].speed_tried[0]
    assert check.builds == (True, False) and "the rewritten function TVM built fails when run" in check.note


def test_a_rewrite_the_judge_cannot_lower_to_tune_is_never_kept(resnet, monkeypatch):
    """A cost model that tunes before the speed check (the tuned judge) and fails on the rewritten module."""

    class Tuning(FixedCost):
        def tune_modules(self, mods):
            if any("R.nn.batch_norm(" not in str(m["main"]) for m in mods):
                raise TypeError("cannot lower")
            return None

    taso = TASOPass(cost=Tuning({"conv2d": 10.0, "batch_norm": 5.0}), verify_speed=True, speed_budget=0.05)
    with pytest.warns(UserWarning, match="does not build, tune or run with TVM"):
        out = taso(resnet)
    tvm.ir.assert_structural_equal(out, resnet)
    check = taso.report["main"].speed_tried[0]
    assert check.builds == (True, False) and "TVM cannot lower or tune the rewritten function" in check.note
