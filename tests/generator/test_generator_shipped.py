"""The shipped rule file: found by the package, made with the default settings, and sound."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from taso_relay.generator.config import Settings
from taso_relay.graph import evaluate
from taso_relay.subst.rule_io import shipped_rules_dir

SHIPPED = shipped_rules_dir() / "taso_k3.json"


def test_shipped_file_is_the_default_k3_generation(shipped_k3):
    doc = json.loads(SHIPPED.read_text())
    assert Settings.from_dict(doc["generator"]["settings"]) == Settings(max_ops=3)
    assert doc["generator"]["digest"] == Settings(max_ops=3).digest
    assert len({r.provenance["equivalence"] for r in shipped_k3}) > 743
    assert len({r.id for r in shipped_k3}) == len(shipped_k3)
    report = json.loads((SHIPPED.parent / "taso_k3.report.json").read_text())
    assert [s["count"] for s in report["stages"]] == [doc["generator"]["counts"][s["stage"]] for s in report["stages"]]


def _holds_at_example(rule, seed=0):
    ex = rule.example
    ga = rule.example_graph("source", ex["inputs"], ex["vars"])
    gb = rule.example_graph("target", ex["inputs"], ex["vars"])
    rng = np.random.default_rng(seed)
    feeds = {n.attr("name"): rng.uniform(-1, 1, n.attr("shape")) for n in ga.nodes if n.op in ("input", "weight")}
    return all(np.allclose(u, v, rtol=1e-6, atol=1e-6) for u, v in zip(
        evaluate(ga, feeds, dtype="float64"), evaluate(gb, feeds, dtype="float64")))


def test_sample_of_shipped_rules_hold_at_their_examples(shipped_k3):
    for rule in random.Random(0).sample(shipped_k3, 150):
        assert _holds_at_example(rule), rule


@pytest.mark.slow
def test_all_shipped_rules_hold_at_their_examples(shipped_k3):
    bad = [r.id for r in shipped_k3 if not _holds_at_example(r, 1)]
    assert not bad


@pytest.mark.slow
def test_shipped_rules_are_what_the_generator_makes_today(shipped_k3, tmp_path):
    """Regenerating K=3 gives the shipped rules exactly; verification only added verdicts and numerics."""
    from taso_relay.generator.run import generate

    out = tmp_path / "taso_k3.json"
    generate(Settings(max_ops=3), out, workers=2, checkpoint_dir=tmp_path / "ck", progress=False, log=lambda *a: None)
    fresh, doc = json.loads(out.read_text()), json.loads(SHIPPED.read_text())
    assert fresh["generator"] == doc["generator"]

    def strip(d):
        return [{k: v for k, v in r.items() if k not in ("verification", "numerics")} for r in d["rules"]]
    assert strip(fresh) == strip(doc)
