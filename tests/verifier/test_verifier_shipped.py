"""The shipped K=3 rule file: every rule proved, and its verification report says the same."""
from __future__ import annotations

import json

import pytest

from taso_relay.subst import load_rules
from taso_relay.subst.rule_io import shipped_rules_dir
from taso_relay.verifier.report import report_path

SHIPPED = shipped_rules_dir() / "taso_k3.json"


def test_every_shipped_rule_is_proved(shipped_k3):
    not_proved = [(r.id, r.status) for r in shipped_k3 if r.status != "PROVED"]
    assert not not_proved, not_proved[:5]
    for r in shipped_k3:  # each verdict names its proof: its own Z3 run, or the other direction's
        v = r.verification
        assert v["outputs"] == ["PROVED"] * len(r.outputs)
        assert v.get("covered_by") != r.id


def test_mirrored_verdicts_point_at_a_proved_rule_of_the_same_equivalence(shipped_k3):
    by_id = {r.id: r for r in shipped_k3}
    mirrored = [r for r in shipped_k3 if "covered_by" in r.verification]
    assert mirrored
    for r in mirrored:
        other = by_id[r.verification["covered_by"]]
        assert other.provenance["equivalence"] == r.provenance["equivalence"]
        assert other.status == "PROVED" and "covered_by" not in other.verification


def test_verification_report_matches_the_file(shipped_k3):
    report = json.loads(report_path(SHIPPED).read_text())
    assert report["counts"] == {"PROVED": len(shipped_k3), "REFUTED": 0, "UNKNOWN": 0, "UNVERIFIED": 0}
    assert {row["id"] for row in report["rules"]} == {r.id for r in shipped_k3}
    # a whole run; its speed is bench/verifier_bench.py's to measure (this one ran beside a benchmark)
    assert not report["interrupted"] and report["elapsed_s"] > 0


SHIPPED_FILES = sorted(p for p in shipped_rules_dir().glob("*.json") if not p.name.endswith(".report.json"))
LAYOUT_FILES = sorted(p for p in shipped_rules_dir().glob("layout/*.json") if not p.name.endswith(".report.json"))


@pytest.mark.parametrize("path", SHIPPED_FILES + LAYOUT_FILES, ids=lambda p: p.name)
def test_every_shipped_file_is_proved_against_the_current_axioms(path):
    """Whatever default_rules() and the layout step (search/layout.py) load: all PROVED, none stale
    (an axiom change means re-verify), and no mirrored verdict borrowed from a proof that has changed since."""
    from taso_relay.verifier.run import _is_current

    rules = load_rules(path)
    assert rules
    by_id = {r.id: r for r in rules}
    stale = [r.id for r in rules if r.status != "PROVED" or not _is_current(r, by_id)]
    assert not stale, stale[:5]


def test_the_default_set_includes_the_lifted_and_handwritten_files():
    names = {p.name for p in SHIPPED_FILES}
    assert {"taso_k3.json", "taso_k3_batched.json", "handwritten_norm.json"} <= names
    assert {p.name for p in LAYOUT_FILES} == {"nhwc.json"}  # applied whole by the layout step, not searched


@pytest.mark.parametrize("name, module", [("handwritten_pad", "pad_rules"), ("handwritten_norm", "norm_rules"),
                                          ("handwritten_split", "split_rules"), ("handwritten_merge", "merge_rules"),
                                          ("handwritten_sum", "sum_rules"),
                                          ("handwritten_subpixel", "subpixel_rules")])
def test_a_shipped_handwritten_file_is_what_its_generator_writes(name, module):
    """rules/handwritten_*.json are reproducible: generator/*_rules.py writes the same rules, and the proofs
    recorded in the file were made of exactly those (rule digests agree)."""
    import importlib

    from taso_relay.subst.rule_io import rule_from_dict
    from taso_relay.verifier.run import rule_digest

    gen = importlib.import_module(f"taso_relay.generator.{module}")
    shipped = load_rules(shipped_rules_dir() / f"{name}.json")
    fresh = [rule_from_dict(r) for r in getattr(gen, module)()]
    assert [(r.id, rule_digest(r), r.provenance) for r in shipped] == \
        [(r.id, rule_digest(r), r.provenance) for r in fresh]
    assert all(r.verification["rule_digest"] == rule_digest(r) for r in shipped)
