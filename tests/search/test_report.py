"""The search report: what was applied where, costs, time, graphs explored; as text and JSON."""
from __future__ import annotations

import json

from rewrite_helpers import PAD1, OpCost, fixture_rules

from taso_relay.graph import GraphBuilder
from taso_relay.search import AppliedRewrite, SearchReport, optimize


def conv_bn_relu_graph():
    b = GraphBuilder()
    x = b.input("x", (1, 4, 8, 8))
    c = b.op("conv2d", x, b.weight("w", (6, 4, 3, 3)), padding=PAD1)
    bn = b.op("batch_norm", c, *(b.weight(f"{n}_0", (6,)) for n in ("gamma", "beta", "mean", "var")))
    return b.build([b.op("relu", bn), b.op("conv2d", x, b.weight("w2", (2, 4, 3, 3)), padding=PAD1)])


def test_the_report_says_what_was_applied_where():
    _, report = optimize(conv_bn_relu_graph(), fixture_rules(), OpCost(), alpha=1.5)
    assert [a.rule_id for a in report.applied] == ["fold-conv-bn", "merge-parallel-conv"]
    fold, merge = report.applied
    assert fold.text.startswith("batch_norm[epsilon=?eps](conv2d")
    assert "batch_norm" in fold.where and "weight 'w'" in fold.where and "input 'x'" in fold.where
    assert "conv2d" in merge.where and "float32[1, 6, 8, 8]" in merge.where
    assert report.cost_before == 25 and report.cost_after == 13
    assert report.nodes_before == 11 and report.graphs_explored >= 3 and report.expansions >= 2
    assert report.stopped_by == "exhausted" and 0 < report.seconds < 5
    assert report.settings["alpha"] == 1.5 and report.settings["rules"] == 6


def test_the_report_as_json_round_trips():
    _, report = optimize(conv_bn_relu_graph(), fixture_rules(), OpCost(), alpha=1.5)
    data = json.loads(report.to_json())
    assert data["cost_before"] == 25 and data["cost_after"] == 13
    assert data["improvement"] == 25 / 13
    assert [a["rule_id"] for a in data["applied"]] == ["fold-conv-bn", "merge-parallel-conv"]
    assert set(data) >= {"applied", "cost_before", "cost_after", "seconds", "graphs_explored", "expansions",
                         "stopped_by", "settings"}
    again = SearchReport.from_dict(data)
    assert again.applied == report.applied and again.cost_after == report.cost_after


def test_the_report_as_text_reads_like_a_summary():
    _, report = optimize(conv_bn_relu_graph(), fixture_rules(), OpCost(), alpha=1.5)
    text = report.to_text()
    first = text.splitlines()[0]
    assert first.startswith("TASO search: cost 25 -> 13 (48.0% less")
    assert "rules: fold-conv-bn x1, merge-parallel-conv x1" in text
    assert "1. fold-conv-bn at batch_norm%" in text
    assert str(report) == text


def test_an_empty_report_says_so():
    b = GraphBuilder()
    g = b.build([b.op("relu", b.input("x", (3,)))])
    _, report = optimize(g, fixture_rules("merge-parallel-conv"), OpCost())
    assert report.applied == [] and "no rewrite applied" in report.to_text()
    assert "besides" not in report.to_text()
    assert report.improvement == 1.0
    b = GraphBuilder()  # the same relu twice: merged before the search, which is a change to report
    x = b.input("x", (3,))
    _, report = optimize(b.build([b.op("relu", x), b.op("relu", x)]), fixture_rules("merge-parallel-conv"), OpCost())
    assert report.merged == 1 and "no rewrite applied besides merging the duplicates" in report.to_text()
    assert AppliedRewrite("r", "a => b", "here") == AppliedRewrite(rule_id="r", text="a => b", where="here")


def test_a_free_result_has_no_improvement_ratio_in_json():
    """A split rejoined into its own input costs nothing: 1.0 in the JSON said nothing was gained."""
    def report(before, after):
        return SearchReport([], before, after, seconds=0.1, graphs_explored=1, expansions=1, stopped_by="exhausted")

    free = report(2.0, 0.0)
    assert free.improvement is None and free.to_dict()["improvement"] is None
    assert json.loads(free.to_json())["improvement"] is None and ", x" not in free.to_text()
    assert report(2.0, 1.0).to_dict()["improvement"] == 2.0 and report(0.0, 0.0).to_dict()["improvement"] == 1.0
    assert SearchReport.from_dict(report(2.0, 0.0).to_dict()).cost_after == 0.0  # read back as it was


def test_a_judge_that_keeps_the_input_reports_no_merges():
    """The judge priced the merged graph within its margin and kept the input: the report must not claim
    the duplicates it merged on the way."""
    b = GraphBuilder()
    x = b.input("x", (3,))
    h = x
    for _ in range(200):
        h = b.op("relu", h)
    g = b.build([h, b.op("relu", x), b.op("relu", x)])
    best, report = optimize(g, fixture_rules("merge-parallel-conv"), OpCost(), judge=OpCost())
    assert best is g and report.applied == []
    assert report.merged == 0 and "merged" not in report.to_text() and "merging" not in report.to_text()
