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


def _slices_swapped(parts):
    """h-split-slicesN with the first two outputs mapped to each other's slice, at equal part sizes."""
    doc = unverified(DOCS[f"h-split-slices{parts}"], id=f"bad-slices{parts}-swapped")
    doc["outputs"][0][1], doc["outputs"][1][1] = doc["outputs"][1][1], doc["outputs"][0][1]
    doc["example"]["inputs"]["y"] = [2, 3 * parts, 3]
    doc["example"]["vars"]["sz"] = [3] * parts
    return rule_from_dict(doc)


def _slice_short(parts):
    """h-split-slicesN whose last slice stops one element early (a shape the verifier must see through)."""
    doc = unverified(DOCS[f"h-split-slices{parts}"], id=f"bad-slices{parts}-short")
    last = doc["target"][-1]
    last["attrs"]["end"] = [last["attrs"]["end"][0] + " - 1"]
    return rule_from_dict(doc)


WRONG = [
    *(_slices_swapped(n) for n in (2, 3, 4)),
    _swapped("h-split-bias-channels", "c", {"y": [2, 6, 3, 5], "b1": [1, 3, 1, 1], "b2": [1, 3, 1, 1]}),
    _swapped("h-split-rejoined", "k", {"y": [2, 6, 3]}),
    _swapped("h-split-rejoined-before", "k", {"y": [2, 6, 3]}),
    _swapped("h-split-rejoined-after", "j", {"y": [2, 6, 3], "z": [2, 6, 3]}),  # y and z swapped in the target
]


@pytest.mark.parametrize("r", WRONG, ids=lambda r: r.id)
def test_parts_in_the_wrong_order_are_refuted(r):
    v = prove_rule(r, timeout=5)
    assert v.status == REFUTED, (v.status, v.reason)


@pytest.mark.parametrize("parts", [2, 3, 4])
def test_a_slice_short_of_its_part_is_never_proved(parts):
    v = prove_rule(_slice_short(parts), timeout=5)
    assert v.status != PROVED, (v.status, v.reason)
