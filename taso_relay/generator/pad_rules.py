"""Hand-written first-phase rules that fold an explicit zero pad into the next operator's own padding.

TF and Keras exports pad explicitly before a 'VALID' conv or pool; TVM then runs
the pad as a separate kernel that copies the whole tensor. TASO's generator has
no pad, so these rules are written here and proved like the generated ones
(verifier/axioms/pad.py holds the axioms, which share GROWN_PADDING):

    python -m taso_relay.generator.pad_rules --out rules/handwritten_pad.json
    taso-relay rules verify rules/handwritten_pad.json
"""
from __future__ import annotations

from .handwritten import node, write_main

# pad_width is (before, after) per NCHW axis, so H is entries 4, 5 and W is 6, 7; a conv's or a pool's
# padding is (top, left, bottom, right)
GROWN_PADDING = "=(?p[0] + ?pw[4], ?p[1] + ?pw[6], ?p[2] + ?pw[5], ?p[3] + ?pw[7])"
PAD_ONLY = "=(?pw[4], ?pw[6], ?pw[5], ?pw[7])"
SPATIAL_ONLY = ["?pw[0] == 0", "?pw[1] == 0", "?pw[2] == 0", "?pw[3] == 0"]
_PAD = node("pd", "pad", ["x"], pad_width="?pw", value=0.0)
_EXAMPLE_PW = [0, 0, 0, 0, 1, 2, 0, 1]
_X = [1, 3, 6, 7]


def _rule(id_, inputs, source_op, source_attrs, target_attrs, example):
    """op(pad(x), ...) => op[padding grown](x, ...): one output, the pad only when it touches H and W."""
    out = "c" if source_op == "conv2d" else "o"
    args = [name for name, _ in inputs]
    return {"id": id_, "inputs": [{"name": n, "kind": k} for n, k in inputs],
            "source": [_PAD, node(out, source_op, ["pd"] + args[1:], **source_attrs)],
            "target": [node("n", source_op, args, **target_attrs)],
            "outputs": [[out, "n"]], "constraints": ["rank(x) == 4"] + SPATIAL_ONLY, "example": example,
            "provenance": {"generator": "handwritten", "family": "pad-fold", "phase": "first"}}


def pad_rules() -> list[dict]:
    conv = {"strides": "?s", "dilation": "?d", "groups": "?g", "activation": "?a"}
    pool = {"kernel": "?k", "strides": "?s", "ceil_mode": False}
    counted = {**pool, "count_include_pad": True}
    return [
        _rule("h-pad-conv", [("x", "any"), ("w", "weight")], "conv2d", {"padding": "?p", **conv},
              {"padding": GROWN_PADDING, **conv},
              {"inputs": {"x": _X, "w": [4, 3, 3, 3]},
               "vars": {"pw": _EXAMPLE_PW, "s": [2, 2], "p": [0, 0, 0, 0], "d": [1, 1], "g": 1, "a": "none"}}),
        _rule("h-pad-avg_pool2d", [("x", "any")], "avg_pool2d", {"padding": "?p", **counted},
              {"padding": GROWN_PADDING, **counted},
              {"inputs": {"x": _X}, "vars": {"pw": _EXAMPLE_PW, "k": [3, 3], "s": [1, 1], "p": [0, 0, 0, 0]}}),
        # ONNX AveragePool defaults to count_include_pad=0: without padding of its own the pool counts
        # nothing extra, and the explicit zeros it read become padding it counts
        _rule("h-pad-avg_pool2d-uncounted", [("x", "any")], "avg_pool2d",
              {"padding": [0, 0, 0, 0], **pool, "count_include_pad": False}, {"padding": PAD_ONLY, **counted},
              {"inputs": {"x": _X}, "vars": {"pw": _EXAMPLE_PW, "k": [3, 3], "s": [1, 1]}}),
    ]


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], pad_rules, (
        "A zero pad of H and W before a conv (or an average pool counting its padding) folds into that operator's "
        "own padding: TF and Keras exports pad explicitly before 'VALID' convs. Applied before the search, "
        "everywhere (taso_relay/generator/pad_rules.py). Proved like the generated ones (taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
