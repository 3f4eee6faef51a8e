"""`rules verify`: verdicts written into the rule file and reloaded, report, exit codes, reuse."""
from __future__ import annotations

import argparse
import json

import pytest

from sample_rules import CORRECT, WRONG
from taso_relay.subst import RuleFileError, load_rules, save_rules
from taso_relay.verifier.cli import add_verify_command, main
from taso_relay.verifier.report import report_path

FAST = [r for r in CORRECT if r.id in ("relu_into_conv", "merge_two_convs", "concat_relu", "avg_pool_as_conv")]


@pytest.fixture
def rule_file(tmp_path):
    path = tmp_path / "sample.json"
    save_rules(path, FAST, {"generator": {"note": "test"}})
    return path


def test_verify_writes_verdicts_back_and_a_report(rule_file, capsys):
    assert main([str(rule_file), "--workers", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "PROVED: 4" in out and "REFUTED: 0" in out
    rules = load_rules(rule_file)
    assert [r.status for r in rules] == ["PROVED"] * 4
    for r in rules:
        assert r.verification["time_s"] >= 0 and r.verification["outputs"]
        assert "max_rel_err_target" in r.numerics["float32"]
    assert [r.id for r in load_rules(rule_file, status="PROVED")] == [r.id for r in FAST]
    doc = json.loads(rule_file.read_text())
    assert doc["generator"] == {"note": "test"} and doc["verification"]["counts"]["PROVED"] == 4
    report = json.loads(report_path(rule_file).read_text())
    assert report["counts"]["PROVED"] == 4 and len(report["rules"]) == 4
    assert report_path(rule_file).name == "sample.verify.report.json"
    # a second run reuses the stored verdicts
    assert main([str(rule_file), "--workers", "1", "--quiet"]) == 0
    assert "4 reused" in capsys.readouterr().out


def test_refuted_rule_gives_nonzero_exit_in_parallel(tmp_path, capsys):
    path = tmp_path / "mixed.json"
    wrong = [r for r in WRONG if r.id in ("bad_relu_linear", "bad_grouped_merge_unequal")]
    save_rules(path, FAST[:2] + wrong)
    assert main([str(path), "--workers", "2", "--timeout", "5", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "REFUTED: 2" in out and "bad_relu_linear" in out and "counterexample" in out
    statuses = {r.id: r.status for r in load_rules(path)}
    assert statuses["bad_relu_linear"] == "REFUTED" and statuses["relu_into_conv"] == "PROVED"
    assert load_rules(path)[-1].verification["counterexample"]["inputs"]


def test_bad_file_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert main([str(path), "--quiet"]) == 2
    assert "error:" in capsys.readouterr().err


def test_a_report_given_for_its_rule_file_is_a_one_line_error_and_left_as_it_is(rule_file, capsys):
    """A shell glob (rules/handwritten_*.json) also names the reports: each is refused, not read as rules and
    rewritten."""
    assert main([str(rule_file), "--workers", "1", "--quiet"]) == 0
    report = report_path(rule_file)
    before = report.read_bytes()
    capsys.readouterr()
    assert main([str(report), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "a verification report (of sample.json), not a rule file" in err and len(err.strip().splitlines()) == 1
    assert report.read_bytes() == before and not report_path(report).exists()


def test_add_verify_command_registers_a_subcommand():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    add_verify_command(sub)
    args = parser.parse_args(["verify", "x.json", "--timeout", "3", "--workers", "4"])
    assert args.timeout == 3.0 and args.workers == 4 and args.func.__name__ == "run_verify"


def test_rules_the_graph_form_cannot_read_are_kept_and_the_rest_verified(tmp_path, capsys):
    """A reference rule set may use operators this version does not have: those entries are named,
    left in the file as they were, and the other rules are verified."""
    from sample_rules import rule_dict_with_op

    path = tmp_path / "reference.json"
    save_rules(path, FAST[:1])
    doc = json.loads(path.read_text())
    foreign = rule_dict_with_op(doc["rules"][0], "merge_gconv")
    doc["rules"].insert(0, foreign)
    path.write_text(json.dumps(doc))
    assert main([str(path), "--workers", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "PROVED: 1" in out and "1 rules cannot be read here" in out and "merge_gconv" in out
    after = json.loads(path.read_text())["rules"]
    assert after[0] == foreign  # untouched, in its place
    assert after[1]["id"] == FAST[0].id and after[1]["verification"]["status"] == "PROVED"
    with pytest.raises(RuleFileError, match="merge_gconv"):
        load_rules(path)  # strict by default: the error names the rule and the operator
    with pytest.warns(UserWarning, match="1 of 2 rules cannot be used here"):
        assert [r.id for r in load_rules(path, strict=False)] == [FAST[0].id]
