"""Hand-written rules that merge two convolutions of one input whatever their padding.

The generated merge rules come from graphs whose convs pad to keep the size
(padding = kernel // 2), the only padding TASO's generator enumerates; parallel
'VALID' convs, or convs with any other shared padding, stride or dilation, were
never merged. Here the padding, strides, dilation and fused activation are free
variables shared by both convs, and the prover checks the rule for all of them:

    python -m taso_relay.generator.merge_rules --out rules/handwritten_merge.json
    taso-relay rules verify rules/handwritten_merge.json
"""
from __future__ import annotations

from .handwritten import node, write_main

_SAME = {"padding": "?p", "strides": "?s", "dilation": "?d", "activation": "?a"}
_INPUTS = [{"name": "x", "kind": "any"}, {"name": "w1", "kind": "weight"}, {"name": "w2", "kind": "weight"}]
_KERNELS_AGREE = ["rank(x) == 4", "rank(w1) == 4", "rank(w2) == 4", "dim(w2, 1) == dim(w1, 1)",
                  "dim(w2, 2) == dim(w1, 2)", "dim(w2, 3) == dim(w1, 3)"]
_EXAMPLE = {"inputs": {"x": [1, 3, 7, 6], "w1": [4, 3, 3, 2], "w2": [2, 3, 3, 2]},
            "vars": {"p": [0, 1, 0, 0], "s": [2, 1], "d": [1, 1], "a": "relu"}}
_HALF = "=(dim({0}, 2) // 2, dim({0}, 3) // 2, dim({0}, 2) // 2, dim({0}, 3) // 2)"
_PROVENANCE = {"generator": "handwritten", "family": "merge-conv"}


def merge_rules() -> list[dict]:
    merged = [node("cw", "concat", ["w1", "w2"], axis=0), node("c", "conv2d", ["x", "cw"], **_SAME)]
    sizes = "=(dim(w1, 0), dim(w2, 0))"
    return [
        {"id": "h-merge-conv", "inputs": _INPUTS,
         "source": [node("c1", "conv2d", ["x", "w1"], **_SAME), node("c2", "conv2d", ["x", "w2"], **_SAME)],
         "target": merged + [node("s", "split", ["c"], axis=1, sizes=sizes)],
         "outputs": [["c1", "s:0"], ["c2", "s:1"]], "constraints": _KERNELS_AGREE, "example": _EXAMPLE,
         "provenance": _PROVENANCE},
        # an Inception-style concat of the two: the merged conv is the concat, and no split is left to undo
        {"id": "h-merge-conv-concat", "inputs": _INPUTS,
         "source": [node("c1", "conv2d", ["x", "w1"], **_SAME), node("c2", "conv2d", ["x", "w2"], **_SAME),
                    node("k", "concat", ["c1", "c2"], axis=1)],
         "target": merged, "outputs": [["k", "c"]], "constraints": _KERNELS_AGREE, "example": _EXAMPLE,
         "provenance": _PROVENANCE},
        # TASO's Inception rewrite without a concat after: the smaller kernel is zero-padded to the larger one's
        # size; both convs keep their size ("same" padding), so centring the smaller kernel changes nothing
        {"id": "h-merge-conv-enlarge", "inputs": _INPUTS,
         "source": [node("c1", "conv2d", ["x", "w1"], padding=_HALF.format("w1"), strides="?s", activation="?a"),
                    node("c2", "conv2d", ["x", "w2"], padding=_HALF.format("w2"), strides="?s", activation="?a")],
         "target": [node("e", "enlarge", ["w2"], kernel="=(dim(w1, 2), dim(w1, 3))"),
                    node("cw", "concat", ["w1", "e"], axis=0),
                    node("c", "conv2d", ["x", "cw"], padding=_HALF.format("w1"), strides="?s", activation="?a"),
                    node("s", "split", ["c"], axis=1, sizes=sizes)],
         "outputs": [["c1", "s:0"], ["c2", "s:1"]],
         "constraints": ["rank(x) == 4", "rank(w1) == 4", "rank(w2) == 4", "dim(w2, 1) == dim(w1, 1)",
                         "dim(w1, 2) % 2 == 1", "dim(w1, 3) % 2 == 1", "dim(w2, 2) % 2 == 1", "dim(w2, 3) % 2 == 1",
                         "dim(w2, 2) <= dim(w1, 2)", "dim(w2, 3) <= dim(w1, 3)",
                         "dim(w2, 2) * dim(w2, 3) < dim(w1, 2) * dim(w1, 3)"],
         "example": {"inputs": {"x": [1, 3, 7, 6], "w1": [4, 3, 3, 5], "w2": [2, 3, 1, 3]},
                     "vars": {"s": [1, 2], "a": "none"}},
         "provenance": _PROVENANCE},
    ]


def main(argv=None) -> int:
    return write_main(argv, __doc__.splitlines()[0], merge_rules, (
        "Two convs of one input with the same kernel size, padding, strides, dilation and activation (all free) "
        "become one conv on the concatenated weights, split (or concatenated) after: the generated merge rules "
        "only cover padding = kernel // 2 (taso_relay/generator/merge_rules.py). Proved like the generated ones "
        "(taso-relay rules verify)."))


if __name__ == "__main__":
    raise SystemExit(main())
