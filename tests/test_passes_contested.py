"""Merges the judge refused, though the search's model priced them far cheaper, are measured end to end
(verify_speed) and kept when faster: the judge times kernels alone, and on full NASRNN under MetaSchedule
its verdict (2.5% dearer) and the analytic model's (7% cheaper) disagreed."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

from taso_relay.bridge import module_from_graph
from taso_relay.cost import AnalyticCost
from taso_relay.passes import CONTESTED, TASOOptimizer, TASOPass, resolve_rules
from taso_relay.search import SearchReport, optimize

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "search"))
sys.path.insert(0, str(Path(__file__).parent / "cost"))
from cost_graphs import with_values  # noqa: E402
from test_passes import fixed_times  # noqa: E402
from test_search_saturate import PEAKS, cell  # noqa: E402



def gates():
    """NASRNN's cell in small: four gates of one input (matmul, bias, activation), combined."""
    return cell(k=4, n=64)


class MergeHater:
    """A judge (tuned-like: a search model of its own) that prices every merge dearer."""

    name = "merge-hater"
    lowering = "tuning"

    def search_model(self):
        return AnalyticCost(PEAKS, lowering="tuning")

    def graph_cost(self, graph):
        return 10.0 - graph.op_counts().get("matmul", 0)  # fewer matmuls: dearer


def test_a_refused_merge_the_model_prices_far_cheaper_is_reported_as_contested():
    g = gates()
    _, report = optimize(g, resolve_rules(None), AnalyticCost(PEAKS, lowering="tuning"),
                         saturate_merges=True, judge=MergeHater().graph_cost)
    assert not any(a.rule_id.startswith("t") for a in report.applied[report.first_phase:])  # judge refused
    assert report.contested_graph is not None and report.contested
    assert report.contested_graph.op_counts()["matmul"] < g.op_counts()["matmul"]
    assert 0 <= report.contested_saturated <= len(report.contested)
    assert report.contested_cost == 10.0 - report.contested_graph.op_counts()["matmul"]  # the judge's price
    again = SearchReport.from_dict(report.to_dict())  # the trail goes to JSON, the graph does not
    assert again.contested == report.contested and again.contested_graph is None


def test_a_merge_the_judge_takes_is_not_contested():
    g = gates()
    _, report = optimize(g, resolve_rules(None), AnalyticCost(PEAKS, lowering="tuning"),
                         saturate_merges=True, judge=lambda graph: 1.0 + graph.op_counts().get("matmul", 0))
    assert report.applied and report.contested_graph is None and report.contested == []


def run_pass(monkeypatch, before_ms, after_ms):
    monkeypatch.setattr(TASOOptimizer, "_measure_speed", fixed_times(before_ms, after_ms))
    mod = module_from_graph(with_values(gates()))
    taso = TASOPass(cost=MergeHater(), verify_speed=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = taso(mod)
    return taso.report["main"], out, [str(w.message) for w in caught]


def test_contested_merges_measured_faster_are_kept(monkeypatch):
    report, out, warned = run_pass(monkeypatch, [2.0, 2.1, 2.0, 2.05, 2.0], [1.5, 1.6, 1.5, 1.55, 1.5])
    assert report.status == "optimized" and report.kept == CONTESTED
    assert report.ops_after["matmul"] < report.ops_before["matmul"]
    assert report.search.applied == report.search.contested
    assert report.speed.candidate == CONTESTED and report.speed.kept
    assert not any("kept the original" in w for w in warned)


def test_contested_merges_measured_slower_leave_the_model_unchanged_quietly(monkeypatch):
    report, out, warned = run_pass(monkeypatch, [2.0, 2.1, 2.0, 2.05, 2.0], [2.5, 2.6, 2.5, 2.55, 2.5])
    assert report.status != "optimized" and report.refused and report.refused[0][0] == CONTESTED
    assert report.graph_after.hash == report.graph_before.hash
    assert not any("taso_relay" in w for w in warned)  # the judge's verdict, confirmed: no alarm


def test_the_report_says_what_was_contested():
    _, report = optimize(gates(), resolve_rules(None), AnalyticCost(PEAKS, lowering="tuning"),
                         saturate_merges=True, judge=MergeHater().graph_cost)
    assert f"contested: {len(report.contested)} rewrites" in report.to_text()
    report.keep_contested()
    assert "contested:" not in report.to_text() and report.applied == report.contested


def test_contested_merges_must_measure_clearly_faster(monkeypatch):
    """3% faster would pass min_gain (1%), but a graph the judge refused needs CONTEST_GAIN (5%)."""
    report, out, warned = run_pass(monkeypatch, [2.0, 2.1, 2.0, 2.05, 2.0], [1.94, 2.04, 1.94, 1.99, 1.94])
    assert report.status != "optimized" and report.refused[0][0] == CONTESTED
    assert report.speed.min_gain == pytest.approx(0.05) and not report.speed.kept


def test_contested_merges_are_not_kept_unmeasured(monkeypatch):
    from taso_relay.guard.speed import SpeedCheck

    def cannot_measure(self, func, rewritten, mod, name, lowering, database):
        return SpeedCheck(lowering=lowering, note="no device")

    monkeypatch.setattr(TASOOptimizer, "_measure_speed", cannot_measure)
    taso = TASOPass(cost=MergeHater(), verify_speed=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        taso(module_from_graph(with_values(gates())))
    report = taso.report["main"]
    assert report.status != "optimized" and report.refused[0][0] == CONTESTED
