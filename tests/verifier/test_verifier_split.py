"""The shipped split rules are proved; the same rules with the parts' order mixed up are refuted."""
from __future__ import annotations

import pytest
from sample_rules import shipped_docs, unverified

from taso_relay.subst.rule_io import rule_from_dict
from taso_relay.verifier.prover import PROVED, REFUTED, prove_rule

DOCS = shipped_docs("handwritten_split")


def test_every_shipped_split_rule_is_proved():
    assert DOCS and {d["verification"]["status"] for d in DOCS.values()} == {PROVED}


def _swapped(rid, node_id, sizes):
    """The rule with `node_id`'s first two inputs swapped, at an example whose parts have the same size (so the
    swap keeps every shape and only the numbers can tell)."""
    doc = unverified(DOCS[rid], id=f"bad-{rid}-swapped")
    node = next(n for n in doc["source"] + doc["target"] if n["id"] == node_id)
    node["inputs"][:2] = node["inputs"][1::-1]
    for name, shape in sizes.items():
        doc["example"]["inputs"][name] = shape
    doc["example"]["vars"]["sz"] = [3, 3]
    return rule_from_dict(doc)


WRONG = [
    _swapped("h-split-bias-channels", "c", {"y": [2, 6, 3, 5], "b1": [1, 3, 1, 1], "b2": [1, 3, 1, 1]}),
    _swapped("h-split-rejoined", "k", {"y": [2, 6, 3]}),
    _swapped("h-split-rejoined-before", "k", {"y": [2, 6, 3]}),
    _swapped("h-split-rejoined-after", "j", {"y": [2, 6, 3], "z": [2, 6, 3]}),  # y and z swapped in the target
]


@pytest.mark.parametrize("r", WRONG, ids=lambda r: r.id)
def test_parts_in_the_wrong_order_are_refuted(r):
    v = prove_rule(r, timeout=5)
    assert v.status == REFUTED, (v.status, v.reason)
