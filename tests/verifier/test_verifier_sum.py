"""The shipped conv-sum rules (two convs of one input, biases added, summed) are proved; wrong sums are not."""
from __future__ import annotations

import pytest
from sample_rules import shipped_docs, target_node, unverified

from taso_relay.subst.rule_io import rule_from_dict
from taso_relay.verifier.prover import PROVED, REFUTED, prove_rule

DOCS = shipped_docs("handwritten_sum")


def test_the_ten_forms_are_recorded_proved_and_prove_again():
    """What default_rules() loads (the recorded verdict), and a fresh proof of each, its verdict cleared."""
    assert sorted(DOCS) == ["h-add-consts-across", "h-add-consts-same", "h-add-consts-scalar",
                            "h-sub-conv-bn-identity", "h-sub-conv-identity", "h-sum-conv-bias",
                            "h-sum-conv-bias-enlarge", "h-sum-conv-bias1", "h-sum-conv-bn-identity",
                            "h-sum-conv-identity"]
    fresh = {rid: prove_rule(rule_from_dict(unverified(doc)), timeout=20) for rid, doc in DOCS.items()}
    assert {rid: doc["verification"]["status"] for rid, doc in DOCS.items()} == dict.fromkeys(DOCS, PROVED)
    assert {rid: v.status for rid, v in fresh.items()} == dict.fromkeys(DOCS, PROVED), \
        {rid: v.reason for rid, v in fresh.items()}


def _target_changed(rid, what, node_id, **fields):
    """Rule `rid` with one node of its target changed (`fields` replaced): a planted mistake named `what`."""
    doc = unverified(DOCS[rid], id=f"bad-{rid}-{what}")
    target_node(doc, node_id).update(fields)
    return rule_from_dict(doc)


def _activation_kept(rid):
    """Both convs fused with a ReLU: a sum of ReLUs is not the ReLU of the sum."""
    doc = unverified(DOCS[rid], id=f"bad-{rid}-relu")
    for n in doc["source"] + doc["target"]:
        if n["op"] == "conv2d":
            n["attrs"]["activation"] = "relu"
    return rule_from_dict(doc)


WRONG = [
    # the summed conv takes the first weight twice: right only where both weights are equal
    _target_changed("h-sum-conv-bias", "w1-twice", "w", inputs=["w1", "w1"]),
    _target_changed("h-sum-conv-bias1", "w1-twice", "w", inputs=["w1", "w1"]),
    # the target adds the first bias only
    _target_changed("h-sum-conv-bias", "bias-dropped", "t", inputs=["c", "b1"]),
    _target_changed("h-sum-conv-bias-enlarge", "bias-dropped", "t", inputs=["c", "b1"]),
    _activation_kept("h-sum-conv-bias"),
    # the batch norm's scale left off the identity kernel (its shift still added), or its shift left out
    _target_changed("h-sum-conv-bn-identity", "unscaled", "w", inputs=["w1", "i"]),
    _target_changed("h-sum-conv-bn-identity", "shift-dropped", "t", inputs=["c", "b1"]),
    # the second constant subtracted instead of added
    _target_changed("h-add-consts-same", "subtracted", "c", op="sub"),
    _target_changed("h-add-consts-across", "subtracted", "c", op="sub"),
    # a subtracted branch's kernel or shift added instead
    _target_changed("h-sub-conv-identity", "kernel-added", "w", op="add"),
    _target_changed("h-sub-conv-bn-identity", "shift-added", "b", op="add"),
]


@pytest.mark.parametrize("r", WRONG, ids=lambda r: r.id)
def test_wrong_sum_is_refuted_at_its_example(r):
    v = prove_rule(r, timeout=5)
    assert v.status == REFUTED, (v.status, v.reason)
