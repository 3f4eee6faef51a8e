"""The shipped conv-merge rules (free padding, strides, dilation, activation) are proved; wrong merges are not."""
from __future__ import annotations

import pytest
from sample_rules import shipped_docs, target_node, unverified

from taso_relay.subst.rule_io import rule_from_dict
from taso_relay.verifier.prover import PROVED, REFUTED, prove_rule

DOCS = shipped_docs("handwritten_merge")


@pytest.mark.parametrize("rid", sorted(DOCS))
def test_shipped_merge_is_proved(rid):
    assert DOCS[rid]["verification"]["status"] == PROVED  # what default_rules() will load
    v = prove_rule(rule_from_dict(unverified(DOCS[rid])), timeout=20)
    assert v.status == PROVED, v.reason


def _weights_swapped(rid):
    doc = unverified(DOCS[rid], id=f"bad-{rid}-swapped")
    node = target_node(doc, "cw")
    node["inputs"] = node["inputs"][::-1]
    axis = target_node(doc, "cw")["attrs"]["axis"]  # convs: output channels (0); matmuls: columns (1)
    for w in doc["example"]["inputs"]:  # as many in each, so that the swap keeps every output's shape
        if w.startswith("w"):
            doc["example"]["inputs"][w][axis] = 3
    return rule_from_dict(doc)


def _padding_transposed(rid):
    """The merged conv pads top and left the other way round: the same output shape, other numbers."""
    doc = unverified(DOCS[rid], id=f"bad-{rid}-padding-transposed")
    target_node(doc, "c")["attrs"]["padding"] = "=(?p[1], ?p[0], ?p[3], ?p[2])"
    doc["example"]["vars"]["p"] = [0, 1, 1, 0]
    return rule_from_dict(doc)


# (a wrong rule whose outputs change shape is never applied: the matcher checks the types, and the prover
# says UNKNOWN, not REFUTED, so those are left out here)
def _parts_swapped(rid):
    """The first two matmuls read each other's slice, at an example where every part is as wide."""
    doc = unverified(DOCS[rid], id=f"bad-{rid}-parts-swapped")
    doc["outputs"][0][1], doc["outputs"][1][1] = doc["outputs"][1][1], doc["outputs"][0][1]
    for w in doc["example"]["inputs"]:
        if w.startswith("w"):
            doc["example"]["inputs"][w][1] = 3
    return rule_from_dict(doc)


MATMULS = [r for r in sorted(DOCS) if r.startswith("h-merge-matmul")]
WRONG = [_weights_swapped(r) for r in sorted(DOCS)] + [_padding_transposed("h-merge-conv")] + \
    [_parts_swapped(r) for r in MATMULS]


@pytest.mark.parametrize("r", WRONG, ids=lambda r: r.id)
def test_wrong_merge_is_refuted_at_its_example(r):
    """A concrete disagreement, found before Z3 runs: a verdict that does not depend on the machine's speed."""
    v = prove_rule(r, timeout=5)
    assert v.status == REFUTED, (v.status, v.reason)
