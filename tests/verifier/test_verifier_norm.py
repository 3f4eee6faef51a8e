"""The shipped batch-norm fold rules are proved; plausible wrong folds and axioms are not."""
from __future__ import annotations

import random

import numpy as np
import pytest
from sample_rules import shipped_docs, unverified

from taso_relay.graph import evaluate
from taso_relay.subst.rule_io import rule_from_dict
from taso_relay.verifier.axioms import N, axiom
from taso_relay.verifier.axioms.common import CONV, CONV_DOMAINS, W4, X4
from taso_relay.verifier.axioms.norm import AXIOMS as NORM_AXIOMS
from taso_relay.verifier.axioms.norm import BN_PARAMS, EPS, bn, scale
from taso_relay.verifier.concrete import _build, _close, _feeds, check_axiom, sample_axiom_instance
from taso_relay.verifier.prover import PROVED, REFUTED, prove_rule

DOCS = shipped_docs("handwritten_norm")


@pytest.mark.parametrize("rid", sorted(DOCS))
def test_shipped_fold_is_proved(rid):
    assert DOCS[rid]["verification"]["status"] == PROVED  # what default_rules() will load
    v = prove_rule(rule_from_dict(unverified(DOCS[rid])), timeout=20)
    assert v.status == PROVED, v.reason


def _edit(rid, name, example=None, **nodes):
    """A copy of a shipped rule with some target nodes changed: {node id: {attr or "inputs": value}}."""
    doc = unverified(DOCS[rid])
    doc["id"] = f"bad-{rid}-{name}"
    for node_id, change in nodes.items():
        node = next(n for n in doc["target"] if n["id"] == node_id)
        for key, value in change.items():
            node.setdefault("attrs", {})
            (node.__setitem__ if key == "inputs" else node["attrs"].__setitem__)(key, value)
    doc["example"] = example or doc["example"]
    return rule_from_dict(doc)


# kernels with as many input as output channels, where the scale-in-channels fold type-checks
SQUARE = {"inputs": {"x": [1, 4, 6, 6], "w": [4, 4, 3, 3], **{p: [4] for p in BN_PARAMS}},
          "vars": {"s": [1, 1], "p": [1, 1, 1, 1], "d": [1, 1], "g": 1, "e": 1e-05}}
WRONG = [
    # the scale on the kernels' input-channel axis (type-checks where in == out channels)
    _edit("h-bn-conv", "scale-in-channels", SQUARE,
          ones_o={"shape": "=(1, dim(w, 0), 1, 1)"}, scale={"axis": 1}),
    # the shift forgets the mean
    _edit("h-bn-conv", "no-mean", shift={"inputs": ["zeros_c", "gamma", "beta", "zero", "var"]}),
    # the kernels scaled with beta and the mean left in (a per-channel affine map, not a scale)
    _edit("h-bn-conv", "affine-scale", scale={"inputs": ["ones_o", "gamma", "beta", "mean", "var"]}),
    # the bias not sent through the batch norm's mean
    _edit("h-bn-conv-bias", "bias-no-mean", shift={"inputs": ["bias", "gamma", "beta", "zero", "var"]}),
    # a layer scale on the kernels' input channels: the kernel not transposed around the product
    _edit("h-factor-conv-bias4", "in-channels",
          {"inputs": {"x": [1, 4, 6, 6], "w": [4, 4, 3, 3], "f": [1, 4, 1, 1], "bias": [1, 4, 1, 1]},
           "vars": {"s": [1, 1], "p": [1, 1, 1, 1], "d": [1, 1], "g": 1}},
          w_t={"perm": [0, 1, 2, 3]}, w_f={"perm": [0, 1, 2, 3]}),
    # the bias left unscaled
    _edit("h-factor-conv-bias3", "bias-unscaled", out={"inputs": ["conv", "bias"]}),
    # a transposed conv's kernels scaled on axis 0, as a conv's are (its input channels, square here)
    _edit("h-bn-convT", "scale-axis-0",
          {"inputs": {"x": [1, 4, 5, 5], "w": [4, 4, 3, 3], **{p: [4] for p in BN_PARAMS}},
           "vars": {"s": [2, 2], "p": [1, 1, 1, 1], "op": [1, 1], "d": [1, 1], "e": 1e-05}},
          ones_o={"shape": "=(dim(w, 0), 1, 1, 1)"}, scale={"axis": 0}),
    # its bias not sent through the batch norm
    _edit("h-bn-convT-bias", "bias-unnormalized", out={"inputs": ["conv", "bias"]}),
    # a grouped one's scale split as (1, groups, C_out / groups) (type-checks where C_in / groups == groups)
    _edit("h-bn-convT-grouped", "scale-split-wrong", scale_g={"shape": "=(1, ?g, dim(w, 1), 1, 1)"}),
]


@pytest.mark.parametrize("r", WRONG, ids=lambda r: r.id)
def test_wrong_fold_is_refuted_at_its_example(r):
    """Refuted by a concrete disagreement before Z3 runs: a verdict that does not depend on
    how fast the machine is (a Z3 timeout would also read "not proved")."""
    v = prove_rule(r, timeout=5)
    assert v.status == REFUTED and v.counterexample["detail"].startswith("output 0: max difference")
    assert v.counterexample["inputs"] == {k: list(s) for k, s in r.example["inputs"].items()}


def test_batch_norm_inputs_are_drawn_in_its_domain():
    """Variances are drawn non-negative, so no side of a norm axiom or fold evaluates to NaN."""
    rng, rnd = np.random.default_rng(0), random.Random(0)
    cases = [(ax.rule, lambda ax=ax: sample_axiom_instance(ax, rnd)) for ax in NORM_AXIOMS]
    cases += [(r, lambda r=r: (r.example["inputs"], r.example["vars"])) for r in map(rule_from_dict, DOCS.values())]
    for rule, draw in cases:
        if not any(n.op == "batch_norm" for n in rule.source + rule.target):
            continue  # a layer scale's fold: no variance
        built = 0
        for _ in range(40):
            shapes, variables = draw()
            left, right = _build(rule, "source", shapes, variables)[0], _build(rule, "target", shapes, variables)[0]
            if left is None or right is None:
                continue
            built += 1
            feeds = _feeds(left, right, rng)
            assert feeds["var"].min() >= 0.1
            for out in evaluate(left, feeds, dtype="float64") + evaluate(right, feeds, dtype="float64"):
                assert np.all(np.isfinite(out)), rule.id
        assert built, rule.id


def test_nan_on_both_sides_is_a_disagreement():
    nan = np.array([1.0, np.nan])
    assert not _close(nan, nan.copy())
    assert _close(np.array([1.0, np.inf]), np.array([1.0 + 1e-9, np.inf]))
    assert not _close(np.array([np.inf]), np.array([-np.inf]))


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
