"""The shipped batch-norm fold rules are proved; plausible wrong folds and axioms are not."""
from __future__ import annotations

import copy
import json

import pytest

from taso_relay.subst.rule_io import rule_from_dict, shipped_rules_dir
from taso_relay.verifier.axioms import N, axiom
from taso_relay.verifier.axioms.common import CONV, CONV_DOMAINS, W4, X4
from taso_relay.verifier.axioms.norm import BN_PARAMS, EPS, bn, scale
from taso_relay.verifier.concrete import check_axiom
from taso_relay.verifier.prover import PROVED, REFUTED, prove_rule

FILE = shipped_rules_dir() / "handwritten_norm.json"
DOCS = {d["id"]: d for d in json.loads(FILE.read_text())["rules"]}


def _fresh(doc):
    doc = copy.deepcopy(doc)
    doc["verification"] = {"status": "UNVERIFIED"}
    return doc


@pytest.mark.parametrize("rid", sorted(DOCS))
def test_shipped_fold_is_proved(rid):
    assert DOCS[rid]["verification"]["status"] == PROVED  # what default_rules() will load
    v = prove_rule(rule_from_dict(_fresh(DOCS[rid])), timeout=20)
    assert v.status == PROVED, v.reason


def _edit(rid, name, **nodes):
    """A copy of a shipped rule with some target nodes changed: {node id: {attr or "inputs": value}}."""
    doc = _fresh(DOCS[rid])
    doc["id"] = f"bad-{rid}-{name}"
    for node_id, change in nodes.items():
        node = next(n for n in doc["target"] if n["id"] == node_id)
        for key, value in change.items():
            node.setdefault("attrs", {})
            (node.__setitem__ if key == "inputs" else node["attrs"].__setitem__)(key, value)
    return rule_from_dict(doc)


WRONG = [
    # the scale on the kernels' input-channel axis (type-checks where in == out channels)
    _edit("h-bn-conv", "scale-in-channels",
          ones_o={"shape": "=(1, dim(w, 0), 1, 1)"}, scale={"axis": 1}),
    # the shift forgets the mean
    _edit("h-bn-conv", "no-mean", shift={"inputs": ["zeros_c", "gamma", "beta", "zero", "var"]}),
    # the kernels scaled with beta and the mean left in (a per-channel affine map, not a scale)
    _edit("h-bn-conv", "affine-scale", scale={"inputs": ["ones_o", "gamma", "beta", "mean", "var"]}),
    # the bias not sent through the batch norm's mean
    _edit("h-bn-conv-bias", "bias-no-mean", shift={"inputs": ["bias", "gamma", "beta", "zero", "var"]}),
]


@pytest.mark.parametrize("r", WRONG, ids=lambda r: r.id)
def test_wrong_fold_is_not_proved_by_z3(r):
    assert prove_rule(r, timeout=2, concrete=False).status != PROVED


# wrong wherever they apply, and at the rule's example (scale-in-channels only applies where
# a kernel has as many input as output channels, which the example does not)
REFUTABLE = [r for r in WRONG if "scale-in-channels" not in r.id]


@pytest.mark.parametrize("r", REFUTABLE, ids=lambda r: r.id)
def test_wrong_fold_is_refuted(r):
    v = prove_rule(r, timeout=5)
    assert v.status == REFUTED and v.counterexample["detail"]


def test_wrong_scale_axiom_fails_concretely():
    """Moving the per-channel factor onto the kernels' input channels is caught by the concrete check."""
    bad = axiom("bad_conv_scale_in_channels", "norm",
                N("mul", N("conv2d", "x", "w", **CONV), scale("dim(w, 0)", beta="beta", mean="mean")),
                N("conv2d", "x", N("mul", "w", scale("dim(w, 0)", beta="beta", mean="mean")), **CONV),
                shapes={"x": X4, "w": W4, **{p: ("o",) for p in BN_PARAMS}},
                domains={**CONV_DOMAINS, **EPS})
    assert not check_axiom(bad).passed


def test_bn_without_mean_axiom_fails_concretely():
    bad = axiom("bad_bn_affine_no_mean", "norm", bn("y"),
                N("add", N("mul", "y", scale("dim(y, 1)")), "beta"),
                guard=["rank(y) == 4"], shapes={"y": ("n", "c", "h", "w"), **{p: ("c",) for p in BN_PARAMS}},
                domains=EPS)
    assert not check_axiom(bad).passed
